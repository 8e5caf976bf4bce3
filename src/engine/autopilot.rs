//! The autopilot: what keeps a wallet safe with nobody watching.
//!
//! An Ark VTXO must be refreshed before it expires; after expiry the server can sweep
//! the tree it hangs from. The wallet's `rounds` task refreshes the VTXOs bark considers
//! due at each round while the Ark server answers (`wallet_tasks`); barkd never starts
//! an exit on its own. The autopilot adds, on every check (each `check_interval` and
//! each new block):
//! - a probe of the Ark server (`ark-server-unreachable` when it stops answering);
//! - the expiry watchdog. A VTXO's *exit deadline* is the last height at which an exit
//!   can still get each of its transactions confirmed (one block each) before the VTXO
//!   expires. Its thresholds come from the wallet's bark config and the server's terms
//!   ([`Thresholds::derive`]); `berth.toml` can only make it act earlier. Within
//!   `warn_blocks` of the deadline: a `vtxo-expiring` alert. Within
//!   `exit_margin_blocks`: the VTXO is at risk, and an exit is the last resort — only
//!   when a refresh cannot happen (the server does not answer, no round starts before
//!   the deadline, or refreshing it failed `refresh_attempts` times), and never for a
//!   VTXO that is locked or in a pending round ([`plan`] has the rules). Exited funds
//!   are never claimed here; `exit-claimable` tells the user they can be;
//! - the exit reserve: the on-chain wallet's confirmed coins must pay the fee-paying
//!   children of every exit; `exit-reserve-low` when they would not.
//!
//! The decisions are pure functions ([`Thresholds::derive`], [`plan`], [`reserve`])
//! tested against tip heights and VTXO sets; [`Autopilot::check`] gathers the facts,
//! applies them and records what it saw for `/health` and `/metrics`.
//!
//! The watchdog never races bark: the `rounds` task holds [`Autopilot::round_gate`]
//! while it picks and joins VTXOs for a round and plays the round's events, and the
//! watchdog holds it while it re-reads a VTXO's state and joins a round or starts an
//! exit. A VTXO is never in two participations: the maintenance refresh leaves out the
//! inputs of pending ones, and the watchdog joins only VTXOs in none.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ark::VtxoId;
use bitcoin::{Amount, FeeRate};

use super::{Engine, EngineError};
use crate::events::{Alert, EventKind};

/// What the autopilot may do, from `berth.toml` `[watchdog]` and `[exits]`.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Start exits on its own; off leaves the alerts only.
    pub watchdog: bool,
    pub check_interval: Duration,
    /// `[watchdog] warn_blocks`: can only make the alert come earlier than derived.
    pub warn_blocks: Option<u32>,
    /// `[watchdog] exit_margin_blocks`: can only widen the derived margin.
    pub exit_margin_blocks: Option<u32>,
    pub refresh_attempts: u32,
    /// Most the estimated fees of one automatic exit batch may be.
    pub auto_exit_fee_budget: Option<Amount>,
    /// Progress passes over live exits without a new block.
    pub exit_progress_interval: Duration,
    /// A fixed fee rate for exits' fee-paying children; `None`: the estimate.
    pub exit_fee_rate: Option<FeeRate>,
    /// Cap on the estimate.
    pub max_exit_fee_rate: FeeRate,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            watchdog: true,
            check_interval: Duration::from_secs(60),
            warn_blocks: None,
            exit_margin_blocks: None,
            refresh_attempts: 3,
            auto_exit_fee_budget: None,
            exit_progress_interval: Duration::from_secs(30),
            exit_fee_rate: None,
            max_exit_fee_rate: FeeRate::from_sat_per_vb_u32(500),
        }
    }
}

/// What the watchdog's thresholds are derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sources {
    /// bark's `vtxo_refresh_expiry_threshold` (`config.toml`; 144 on mainnet, 12 on
    /// the test networks): the maintenance refresh takes a VTXO into the next round
    /// once `tip > expiry_height - this`.
    pub bark_refresh_threshold: u32,
    /// bark's `vtxo_exit_margin` (12): the blocks bark expects an exit to need.
    pub bark_exit_margin: u32,
    /// bark's `round_tx_required_confirmations` (1): a round's inputs are forfeited
    /// only once its funding transaction has this many confirmations.
    pub bark_round_confirmations: u32,
    /// The server's `vtxo_lifetime`; `None` until the wallet has reached it once.
    pub vtxo_lifetime: Option<u32>,
    /// The server's `vtxo_exit_delta`: blocks between an exit's confirmation and its
    /// funds becoming claimable. It does not move the exit deadline, but it is part of
    /// the room bark wants before it forfeits a round's inputs ([`Thresholds`]).
    pub vtxo_exit_delta: Option<u32>,
}

/// The watchdog's thresholds in effect: one value each, from [`Thresholds::derive`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Blocks before the exit deadline from which a `vtxo-expiring` alert is raised.
    pub warn_blocks: u32,
    /// Blocks before the exit deadline from which a VTXO is at risk.
    pub exit_margin_blocks: u32,
    /// bark's refresh threshold, as bark applies it (blocks before expiry).
    pub refresh_threshold_blocks: u32,
    /// Failed refresh attempts after which a VTXO at risk is exited.
    pub refresh_attempts: u32,
    /// The shortest VTXO lifetime with which bark completes a refresh: it forfeits a
    /// round's inputs only if the new VTXOs expire at least `2 × vtxo_exit_margin +
    /// exit_delta` blocks after the tip at which it forfeits, which is at the
    /// earliest `round_tx_required_confirmations` blocks after the round (bark 0.8,
    /// `check_output_vtxos_exitable`). `None` while the exit delta is unknown.
    pub refresh_needs_lifetime: Option<u32>,
    /// Whether a refresh can complete under the server's lifetime (`true` while
    /// unknown). When it cannot, a round would lock the VTXOs and never forfeit them:
    /// the maintenance refresh does not join, and no round counts as a way out.
    pub refresh_possible: bool,
    pub sources: Sources,
}

impl Thresholds {
    /// The thresholds for a wallet whose bark config and server give `sources`:
    /// - exit margin: bark's `vtxo_exit_margin`, or `[watchdog] exit_margin_blocks`
    ///   when that is wider;
    /// - warning: bark's refresh threshold, but never later than the exit margin, or
    ///   `[watchdog] warn_blocks` when that is earlier;
    /// - both at most half the server's VTXO lifetime. A margin as long as the
    ///   lifetime would put every VTXO in it from birth: the watchdog would refresh
    ///   each at every round (and, with the server down, exit it). With half, a VTXO
    ///   lives at least half its lifetime before the watchdog acts on it.
    ///
    /// A configured value tighter than the derived one is ignored: acting later than
    /// bark's own margins is never safer.
    pub fn derive(sources: Sources, policy: &Policy) -> Thresholds {
        let cap = sources.vtxo_lifetime.map_or(u32::MAX, |l| l / 2);
        let refresh_needs_lifetime = sources
            .vtxo_exit_delta
            .map(|delta| sources.bark_round_confirmations + 2 * sources.bark_exit_margin + delta);
        let refresh_possible = match (sources.vtxo_lifetime, refresh_needs_lifetime) {
            (Some(lifetime), Some(needs)) => lifetime >= needs,
            _ => true,
        };
        let exit_margin = sources
            .bark_exit_margin
            .max(policy.exit_margin_blocks.unwrap_or(0))
            .min(cap);
        let warn = sources
            .bark_refresh_threshold
            .max(exit_margin)
            .max(policy.warn_blocks.unwrap_or(0))
            .min(cap);
        Thresholds {
            warn_blocks: warn,
            exit_margin_blocks: exit_margin,
            refresh_threshold_blocks: sources.bark_refresh_threshold,
            refresh_attempts: policy.refresh_attempts,
            refresh_needs_lifetime,
            refresh_possible,
            sources,
        }
    }
}

/// Bitcoin's target block spacing, the same on every network (regtest and signet
/// included: `pow_target_spacing` in `bitcoin::consensus::params`). The watchdog
/// converts blocks to time with it to tell whether a round comes before a deadline.
pub fn block_spacing(network: bitcoin::Network) -> Duration {
    Duration::from_secs(bitcoin::consensus::params::Params::new(network).pow_target_spacing)
}

/// Where a VTXO stands with respect to rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Custody {
    /// Spendable, in no round participation.
    Free,
    /// Spendable, an input of a participation waiting for its round (it is locked
    /// only when the round's attempt starts).
    Scheduled,
    /// Locked as an input of a pending round (bark's `pending_round_input_vtxos`):
    /// it may have been forfeited already, an exit could lose it.
    InPendingRound,
    /// Locked by another operation (an offboard, a Lightning payment, a board).
    Locked,
}

/// What the watchdog needs to know of one unspent VTXO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VtxoFacts {
    pub id: VtxoId,
    pub amount: Amount,
    pub expiry_height: u32,
    /// Transactions its exit must confirm, one block each at best.
    pub exit_depth: u16,
    pub custody: Custody,
}

/// Blocks left at `tip` before `v` can no longer be exited safely (negative: past it).
pub fn blocks_to_deadline(v: &VtxoFacts, tip: u32) -> i64 {
    i64::from(v.expiry_height) - i64::from(tip) - i64::from(v.exit_depth)
}

/// Whether bark's maintenance refresh takes `v` into the next round at `tip` (its
/// `RefreshStrategy::must_refresh` expiry rule: `tip > expiry - threshold`).
pub fn due_for_maintenance(v: &VtxoFacts, tip: u32, t: &Thresholds) -> bool {
    tip > v.expiry_height.saturating_sub(t.refresh_threshold_blocks)
}

/// The Ark server as a check saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Unreachable,
    /// It answers; its next round starts in `next_round_in` (`None`: it would not
    /// say, nor do we know its round interval).
    Answering {
        next_round_in: Option<Duration>,
    },
}

/// What a check knows besides the VTXOs.
#[derive(Debug, Clone)]
pub struct Conditions<'a> {
    pub tip: u32,
    pub server: Server,
    pub block_spacing: Duration,
    /// Failed refresh attempts so far, per VTXO.
    pub failures: &'a HashMap<VtxoId, u32>,
}

/// What the watchdog decided at one check.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Within `warn_blocks` of their deadline.
    pub expiring: Vec<VtxoId>,
    /// At risk and in no round: the watchdog joins the next round with them.
    pub refresh: Vec<VtxoId>,
    /// At risk, a refresh can still happen: the maintenance refresh takes them at
    /// the next round, or a participation waits for it.
    pub waiting: Vec<VtxoId>,
    /// At risk, locked or in a pending round: never exited by the watchdog.
    pub held: Vec<VtxoId>,
    /// At risk and no refresh can happen: exit.
    pub exit: Vec<VtxoId>,
    /// At risk and the server did not answer: a failed refresh attempt each.
    pub failed: Vec<VtxoId>,
    /// The nearest deadline, in blocks.
    pub first_deadline: Option<i64>,
}

impl Plan {
    /// VTXOs within the exit margin, whatever is done about them.
    pub fn at_risk(&self) -> usize {
        self.refresh.len() + self.waiting.len() + self.held.len() + self.exit.len()
    }
}

/// The watchdog's decision for `vtxos` under `c`. For a VTXO within the exit margin,
/// the first rule that applies:
/// 1. locked, or an input of a pending round: held, never exited (bark's operation
///    owns it; a round input may already be forfeited);
/// 2. refreshing it failed `refresh_attempts` times: exit;
/// 3. the server does not answer: a failed attempt, and exit only in the last
///    quarter of the margin (no time left to wait for the server);
/// 4. the server answers, a refresh can complete under its VTXO lifetime, and its
///    next round starts before the deadline (blocks converted to time at
///    `block_spacing`): wait for that round — the watchdog joins it itself only with
///    a VTXO in no participation that bark's maintenance refresh would not take yet
///    (a margin widened in `berth.toml`);
/// 5. otherwise (no round before the deadline, no refresh can complete, or the
///    deadline passed): exit.
///
/// With the watchdog off, only the warnings are planned.
pub fn plan(vtxos: &[VtxoFacts], c: &Conditions<'_>, t: &Thresholds, watchdog: bool) -> Plan {
    let mut plan = Plan::default();
    let last_quarter = i64::from(t.exit_margin_blocks / 4);
    for v in vtxos {
        let left = blocks_to_deadline(v, c.tip);
        plan.first_deadline = Some(plan.first_deadline.map_or(left, |f| f.min(left)));
        if left <= i64::from(t.warn_blocks) {
            plan.expiring.push(v.id);
        }
        if !watchdog || left > i64::from(t.exit_margin_blocks) {
            continue;
        }
        if matches!(v.custody, Custody::Locked | Custody::InPendingRound) {
            plan.held.push(v.id);
            continue;
        }
        let failures = c.failures.get(&v.id).copied().unwrap_or(0);
        if failures >= t.refresh_attempts {
            plan.exit.push(v.id);
            continue;
        }
        match c.server {
            Server::Unreachable if left <= last_quarter => plan.exit.push(v.id),
            Server::Unreachable => {
                plan.failed.push(v.id);
                plan.waiting.push(v.id);
            }
            Server::Answering { next_round_in } => {
                let round_in_time = left > 0
                    && t.refresh_possible
                    && next_round_in.is_none_or(|wait| {
                        let blocks = u32::try_from(left).unwrap_or(u32::MAX);
                        wait < c.block_spacing.saturating_mul(blocks)
                    });
                if !round_in_time {
                    plan.exit.push(v.id);
                } else if v.custody == Custody::Free && !due_for_maintenance(v, c.tip, t) {
                    plan.refresh.push(v.id);
                } else {
                    plan.waiting.push(v.id);
                }
            }
        }
    }
    plan
}

/// Whether the on-chain wallet can pay for exiting every VTXO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserve {
    /// Fees of broadcasting every exit (the fee-paying children).
    pub needed: Amount,
    /// Confirmed on-chain coins.
    pub available: Amount,
}

impl Reserve {
    pub fn sufficient(&self) -> bool {
        self.available >= self.needed
    }

    pub fn shortfall(&self) -> Amount {
        self.needed
            .checked_sub(self.available)
            .unwrap_or(Amount::ZERO)
    }
}

/// The reserve check: the exit fees against the confirmed on-chain balance.
pub fn reserve(needed: Amount, available: Amount) -> Reserve {
    Reserve { needed, available }
}

/// The fee rate for exits' fee-paying children: the fixed one if configured, else the
/// estimate capped at the policy's maximum.
pub fn exit_fee_rate(policy: &Policy, estimate: FeeRate) -> FeeRate {
    policy
        .exit_fee_rate
        .unwrap_or_else(|| estimate.min(policy.max_exit_fee_rate))
}

/// What the autopilot last saw, for `/health` and `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct Status {
    pub ark_server: ServerStatus,
    pub chain_tip: Option<TipStatus>,
    /// The watched VTXOs (unspent, not exiting) at `chain_tip`.
    pub vtxos: Vec<VtxoFacts>,
    pub first_deadline: Option<i64>,
    pub expiring: usize,
    pub at_risk: usize,
    /// Of `at_risk`, those locked or in a pending round (never exited automatically).
    pub held: usize,
    /// The thresholds of the last check (`None` before one with a loaded wallet).
    pub thresholds: Option<Thresholds>,
    /// When the server said its next round starts (`None` when it did not answer).
    pub next_round_at: Option<SystemTime>,
    pub exits_by_phase: Vec<(&'static str, u64)>,
    pub exits_started_automatically: u64,
    pub reserve: Option<Reserve>,
    pub refresh_successes: u64,
    pub refresh_failures: u64,
}

#[derive(Debug, Clone, Default)]
pub struct ServerStatus {
    /// `None` until the first probe.
    pub reachable: Option<bool>,
    pub last_reachable_at: Option<SystemTime>,
    pub consecutive_failures: u32,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, Copy)]
pub struct TipStatus {
    pub height: u32,
    /// When Berth first saw this tip (boards have no RTC worth trusting for block
    /// times, and fetching the block to read its time costs a whole block).
    pub seen_at: SystemTime,
}

/// The autopilot's memory between checks.
pub struct Autopilot {
    policy: Policy,
    status: std::sync::RwLock<Status>,
    memory: tokio::sync::Mutex<Memory>,
    /// Failed refresh attempts per VTXO. Written by checks (the server did not
    /// answer, a join was refused) and by the `rounds` task (a round failed with it).
    failures: std::sync::Mutex<Failures>,
    /// See the module docs: one of the `rounds` task and the watchdog at a time.
    round_gate: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Memory {
    /// VTXOs a `vtxo-expiring` alert was raised for (raised once each).
    warned: HashSet<VtxoId>,
    /// Exits an `exit-claimable` alert was raised for.
    claimable: HashSet<VtxoId>,
    server_alerted: bool,
    reserve_alerted: bool,
    last_tip: Option<TipStatus>,
    /// The server's terms as last seen (kept while it is unreachable).
    terms: Option<ServerTerms>,
    thresholds: Option<Thresholds>,
    checks: u64,
}

#[derive(Debug, Clone, Copy)]
struct ServerTerms {
    vtxo_lifetime: u32,
    vtxo_exit_delta: u32,
    round_interval: Duration,
    block_spacing: Duration,
}

#[derive(Default)]
struct Failures {
    per_vtxo: HashMap<VtxoId, u32>,
    /// Failed round states already counted (a failed state stays listed until the
    /// next sync; each counts once). Bounded: the oldest are forgotten.
    rounds_counted: VecDeque<bark::persist::models::RoundStateId>,
}

/// Failed round states remembered, to count each once.
const ROUNDS_REMEMBERED: usize = 64;

/// Phases of exits as `/metrics` and `/health` name them.
const PHASES: [(bark::exit::ExitStateKind, &str); 6] = [
    (bark::exit::ExitStateKind::Start, "start"),
    (bark::exit::ExitStateKind::Processing, "processing"),
    (bark::exit::ExitStateKind::AwaitingDelta, "awaiting-delta"),
    (bark::exit::ExitStateKind::Claimable, "claimable"),
    (
        bark::exit::ExitStateKind::ClaimInProgress,
        "claim-in-progress",
    ),
    (bark::exit::ExitStateKind::Claimed, "claimed"),
];

/// How long one call to the Ark server or chain source may take within a check, and
/// how long the watchdog waits for the round gate before leaving its action to the
/// next check.
const CALL_BOUND: Duration = Duration::from_secs(30);

impl Autopilot {
    pub fn new(policy: Policy) -> Arc<Self> {
        Arc::new(Autopilot {
            policy,
            status: std::sync::RwLock::new(Status::default()),
            memory: tokio::sync::Mutex::new(Memory::default()),
            failures: std::sync::Mutex::new(Failures::default()),
            round_gate: tokio::sync::Mutex::new(()),
        })
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    pub fn status(&self) -> Status {
        self.status
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Held by whoever chooses VTXOs for a round or an exit, or plays round events.
    pub(super) async fn round_gate(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.round_gate.lock().await
    }

    /// Count a refresh the wallet joined (or failed to join) outside the watchdog: the
    /// maintenance refresh at each round (`wallet_tasks`).
    pub(super) fn record_refresh(&self, joined: bool) {
        self.update(|s| {
            if joined {
                s.refresh_successes += 1
            } else {
                s.refresh_failures += 1
            }
        });
    }

    /// A round participation that failed: a failed refresh attempt for each of its
    /// inputs, counted once per round state.
    pub(super) fn record_failed_round(
        &self,
        state: bark::persist::models::RoundStateId,
        inputs: impl IntoIterator<Item = VtxoId>,
    ) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        if failures.rounds_counted.contains(&state) {
            return;
        }
        if failures.rounds_counted.len() == ROUNDS_REMEMBERED {
            failures.rounds_counted.pop_front();
        }
        failures.rounds_counted.push_back(state);
        for id in inputs {
            *failures.per_vtxo.entry(id).or_default() += 1;
        }
        drop(failures);
        self.update(|s| s.refresh_failures += 1);
    }

    fn record_failed_attempts(&self, ids: &[VtxoId]) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        for id in ids {
            *failures.per_vtxo.entry(*id).or_default() += 1;
        }
    }

    /// The failure counts of `watched`, forgetting every other VTXO.
    fn failures_of(&self, watched: &[VtxoFacts]) -> HashMap<VtxoId, u32> {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures
            .per_vtxo
            .retain(|id, _| watched.iter().any(|f| f.id == *id));
        failures.per_vtxo.clone()
    }

    fn update(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.status.write().unwrap_or_else(|e| e.into_inner()));
    }

    /// One pass: probe, watch, act, record. An error ends the pass early (the
    /// supervisor retries with backoff); what was learnt so far stays recorded.
    pub async fn check(&self, engine: &Engine) -> Result<(), EngineError> {
        let mut memory = self.memory.lock().await;
        memory.checks += 1;
        let loaded = match engine.loaded().await {
            Ok(loaded) => loaded,
            Err(EngineError::NoWallet | EngineError::NotLoaded) => {
                // Nothing is known without a wallet.
                self.update(|s| *s = Status::default());
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        tracing::debug!(target: "berth::autopilot", "check: probing the Ark server");

        // The Ark server.
        let probe = tokio::time::timeout(CALL_BOUND, loaded.wallet.refresh_server()).await;
        let server_error = match probe {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("{e:#}")),
            Err(_) => Some(format!("no answer within {} s", CALL_BOUND.as_secs())),
        };
        let now = SystemTime::now();
        self.update(|s| match &server_error {
            None => {
                s.ark_server.reachable = Some(true);
                s.ark_server.last_reachable_at = Some(now);
                s.ark_server.consecutive_failures = 0;
                s.ark_server.last_error = None;
            }
            Some(e) => {
                s.ark_server.reachable = Some(false);
                s.ark_server.consecutive_failures += 1;
                s.ark_server.last_error = Some(e.clone());
            }
        });
        match (&server_error, memory.server_alerted) {
            (Some(e), false) => {
                tracing::warn!(target: "berth::autopilot", error = %e, "the Ark server is unreachable");
                self.alert(
                    engine,
                    EventKind::ArkServerUnreachable,
                    Alert {
                        message: "The Ark server cannot be reached: payments and refreshes wait \
                                  for it, and VTXOs near expiry will be exited if it stays away."
                            .into(),
                        ..Alert::default()
                    },
                )
                .await;
                memory.server_alerted = true;
            }
            (None, true) => {
                tracing::info!(target: "berth::autopilot", "the Ark server is reachable again");
                memory.server_alerted = false;
            }
            _ => {}
        }
        // The server's terms: bark keeps what the connection first learnt, also
        // while the server is down.
        if let Ok(Some(info)) = loaded.wallet.ark_info().await {
            memory.terms = Some(ServerTerms {
                vtxo_lifetime: info.vtxo_lifetime.into(),
                vtxo_exit_delta: info.vtxo_exit_delta.into(),
                round_interval: info.round_interval,
                block_spacing: block_spacing(info.network),
            });
        }
        // When the next round starts: the server says, else its round interval.
        let server = match server_error {
            Some(_) => Server::Unreachable,
            None => {
                let next =
                    tokio::time::timeout(CALL_BOUND, loaded.wallet.next_round_start_time()).await;
                let next_round_in = match next {
                    Ok(Ok(at)) => Some(at.duration_since(now).unwrap_or_default()),
                    failed => {
                        tracing::debug!(target: "berth::autopilot", ok = failed.is_ok(),
                            "the server did not say when its next round starts");
                        memory.terms.map(|t| t.round_interval)
                    }
                };
                Server::Answering { next_round_in }
            }
        };
        self.update(|s| {
            s.next_round_at = match server {
                Server::Answering {
                    next_round_in: Some(wait),
                } => Some(now + wait),
                _ => None,
            }
        });

        tracing::debug!(target: "berth::autopilot", ?server, "check: the chain tip");
        // The chain tip.
        let tip: u32 = tokio::time::timeout(CALL_BOUND, loaded.wallet.chain().tip())
            .await
            .map_err(|_| EngineError::Unreachable {
                what: "the chain source",
                reason: "no tip within the bound".into(),
            })?
            .map_err(|e| EngineError::Unreachable {
                what: "the chain source",
                reason: format!("{e:#}"),
            })?
            .into();
        let tip_status = match memory.last_tip {
            Some(t) if t.height == tip => t,
            _ => TipStatus {
                height: tip,
                seen_at: now,
            },
        };
        memory.last_tip = Some(tip_status);
        self.update(|s| s.chain_tip = Some(tip_status));

        // Exits: what is exiting already, and by phase.
        let exit_vtxos = loaded.wallet.exit_mgr().get_exit_vtxos().await;
        let exiting: HashSet<VtxoId> = exit_vtxos.iter().map(|e| e.id()).collect();
        let mut by_phase: Vec<(&'static str, u64)> = PHASES.iter().map(|p| (p.1, 0)).collect();
        let mut claimable_now = Vec::new();
        for e in &exit_vtxos {
            let kind = e.state().kind();
            if let Some(i) = PHASES.iter().position(|p| p.0 == kind) {
                by_phase[i].1 += 1;
            }
            if kind == bark::exit::ExitStateKind::Claimable {
                claimable_now.push((e.id(), e.amount()));
            }
        }
        let fresh: Vec<_> = claimable_now
            .iter()
            .filter(|(id, _)| !memory.claimable.contains(id))
            .collect();
        if !fresh.is_empty() {
            let amount: Amount = fresh.iter().map(|(_, a)| *a).sum();
            self.alert(
                engine,
                EventKind::ExitClaimable,
                Alert {
                    message: format!(
                        "{} exited VTXO(s) can be claimed to the on-chain wallet \
                         (POST /api/v1/exits/claim/all); Berth never claims on its own.",
                        fresh.len()
                    ),
                    vtxos: fresh.iter().map(|(id, _)| id.to_string()).collect(),
                    amount_sat: Some(amount.to_sat()),
                    ..Alert::default()
                },
            )
            .await;
        }
        memory.claimable = claimable_now.iter().map(|(id, _)| *id).collect();
        self.update(|s| s.exits_by_phase = by_phase);

        // The watchdog.
        let facts: Vec<VtxoFacts> = watched_vtxos(&loaded.wallet, &exiting).await?;
        let config = loaded.wallet.config();
        let thresholds = Thresholds::derive(
            Sources {
                bark_refresh_threshold: config.vtxo_refresh_expiry_threshold.into(),
                bark_exit_margin: config.vtxo_exit_margin.into(),
                bark_round_confirmations: config.round_tx_required_confirmations.into(),
                vtxo_lifetime: memory.terms.map(|t| t.vtxo_lifetime),
                vtxo_exit_delta: memory.terms.map(|t| t.vtxo_exit_delta),
            },
            &self.policy,
        );
        if memory.thresholds != Some(thresholds) {
            tracing::info!(target: "berth::autopilot",
                warn_blocks = thresholds.warn_blocks,
                exit_margin_blocks = thresholds.exit_margin_blocks,
                refresh_threshold_blocks = thresholds.refresh_threshold_blocks,
                vtxo_lifetime = ?thresholds.sources.vtxo_lifetime,
                "watchdog thresholds (blocks before a VTXO's exit deadline)");
            if !thresholds.refresh_possible {
                tracing::error!(target: "berth::autopilot",
                    vtxo_lifetime = ?thresholds.sources.vtxo_lifetime,
                    needs = ?thresholds.refresh_needs_lifetime,
                    "no refresh can complete: the Ark server's VTXO lifetime is shorter than \
                     bark needs before it forfeits a round's inputs (2 x vtxo_exit_margin + \
                     vtxo_exit_delta + round_tx_required_confirmations); VTXOs near expiry \
                     will be exited");
            }
            for (key, set, used) in [
                (
                    "warn_blocks",
                    self.policy.warn_blocks,
                    thresholds.warn_blocks,
                ),
                (
                    "exit_margin_blocks",
                    self.policy.exit_margin_blocks,
                    thresholds.exit_margin_blocks,
                ),
            ] {
                if let Some(set) = set.filter(|set| *set != used) {
                    tracing::warn!(target: "berth::autopilot", key, set, used,
                        "[watchdog] value not used: it may only make the watchdog act earlier \
                         than bark's margins, within half the server's VTXO lifetime");
                }
            }
            memory.thresholds = Some(thresholds);
        }
        let failures = self.failures_of(&facts);
        let conditions = Conditions {
            tip,
            server,
            block_spacing: memory
                .terms
                .map_or(block_spacing(bitcoin::Network::Bitcoin), |t| {
                    t.block_spacing
                }),
            failures: &failures,
        };
        let decided = plan(&facts, &conditions, &thresholds, self.policy.watchdog);
        self.record_failed_attempts(&decided.failed);
        if !decided.failed.is_empty() {
            tracing::warn!(target: "berth::autopilot", vtxos = decided.failed.len(),
                "cannot refresh VTXOs near their exit deadline: the Ark server is unreachable");
            self.update(|s| s.refresh_failures += 1);
        }
        self.update(|s| {
            s.vtxos = facts.clone();
            s.first_deadline = decided.first_deadline;
            s.expiring = decided.expiring.len();
            s.at_risk = decided.at_risk();
            s.held = decided.held.len();
            s.thresholds = Some(thresholds);
        });
        let new_warnings: Vec<&VtxoFacts> = facts
            .iter()
            .filter(|f| decided.expiring.contains(&f.id) && !memory.warned.contains(&f.id))
            .collect();
        if !new_warnings.is_empty() {
            let first = new_warnings
                .iter()
                .map(|f| blocks_to_deadline(f, tip))
                .min();
            self.alert(
                engine,
                EventKind::VtxoExpiring,
                Alert {
                    message: format!(
                        "{} VTXO(s) must be refreshed soon or exited: the first can be exited \
                         safely for {} more block(s).",
                        new_warnings.len(),
                        first.unwrap_or(0)
                    ),
                    vtxos: new_warnings.iter().map(|f| f.id.to_string()).collect(),
                    amount_sat: Some(new_warnings.iter().map(|f| f.amount.to_sat()).sum()),
                    blocks_left: first,
                    ..Alert::default()
                },
            )
            .await;
            memory.warned.extend(new_warnings.iter().map(|f| f.id));
        }
        memory.warned.retain(|id| facts.iter().any(|f| f.id == *id));
        if !decided.held.is_empty() {
            tracing::debug!(target: "berth::autopilot", vtxos = decided.held.len(),
                "VTXOs near their exit deadline are locked or in a round: left to it");
        }

        if !decided.refresh.is_empty() {
            self.join_round(engine, &loaded.wallet, &decided.refresh)
                .await;
        }

        if !decided.exit.is_empty() {
            self.start_exits(engine, &loaded.wallet, &decided.exit, &facts, tip)
                .await?;
        }

        // The exit reserve: on the first check, on each new block, and every tenth.
        if tip_status.seen_at == now || memory.checks % 10 == 1 {
            match engine.exit_fee(None, None, None).await {
                Ok((estimate, _)) => {
                    let confirmed = loaded.onchain.read().await.balance().confirmed;
                    let r = reserve(estimate.exit_broadcast_fee, confirmed);
                    self.update(|s| s.reserve = Some(r));
                    if !r.sufficient() && !memory.reserve_alerted {
                        self.alert(
                            engine,
                            EventKind::ExitReserveLow,
                            Alert {
                                message: format!(
                                    "The on-chain wallet's confirmed {} sat cannot pay the {} sat \
                                     of fees that exiting every VTXO needs; send at least {} sat \
                                     to an on-chain address of this wallet.",
                                    r.available.to_sat(),
                                    r.needed.to_sat(),
                                    r.shortfall().to_sat()
                                ),
                                shortfall_sat: Some(r.shortfall().to_sat()),
                                ..Alert::default()
                            },
                        )
                        .await;
                    }
                    memory.reserve_alerted = !r.sufficient();
                }
                Err(e) => {
                    tracing::debug!(target: "berth::autopilot", error = %e, "cannot estimate the exit reserve")
                }
            }
        }
        tracing::debug!(target: "berth::autopilot", tip, vtxos = facts.len(), "check: done");
        Ok(())
    }

    /// Join the server's next round with VTXOs at risk that are in no participation
    /// (a margin widened in `berth.toml`: bark's maintenance refresh would take them
    /// only later). Under the round gate, with their state read again; a refused
    /// join is a failed attempt. Joining only registers a participation: the `rounds`
    /// task plays it when the round starts.
    async fn join_round(&self, engine: &Engine, wallet: &bark::Wallet, ids: &[VtxoId]) {
        let Ok(_gate) = tokio::time::timeout(CALL_BOUND, self.round_gate()).await else {
            tracing::debug!(target: "berth::autopilot", "a round is being played: joining at the next check");
            return;
        };
        let free = match still_free(wallet, ids).await {
            Ok(free) => free,
            Err(e) => {
                tracing::warn!(target: "berth::autopilot", error = %e, "cannot read VTXOs before joining a round");
                return;
            }
        };
        let fresh: Vec<VtxoId> = free
            .into_iter()
            .filter(|(_, custody)| *custody == Custody::Free)
            .map(|(id, _)| id)
            .collect();
        if fresh.is_empty() {
            return;
        }
        match tokio::time::timeout(CALL_BOUND * 2, engine.refresh_vtxos(&fresh)).await {
            Ok(Ok(_)) => {
                tracing::info!(target: "berth::autopilot", vtxos = fresh.len(),
                    "joined the next round to refresh VTXOs near their exit deadline");
                self.update(|s| s.refresh_successes += 1);
            }
            failed => {
                let reason = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "no answer in time".to_string(),
                };
                tracing::warn!(target: "berth::autopilot", error = %reason,
                    vtxos = fresh.len(), "cannot refresh VTXOs near their exit deadline");
                self.record_failed_attempts(&fresh);
                self.update(|s| s.refresh_failures += 1);
            }
        }
    }

    /// Start the exits of `ids`: under the round gate, only of those still spendable
    /// (a round may have taken one since the plan), and within the fee budget.
    async fn start_exits(
        &self,
        engine: &Engine,
        wallet: &bark::Wallet,
        ids: &[VtxoId],
        facts: &[VtxoFacts],
        tip: u32,
    ) -> Result<(), EngineError> {
        let Ok(_gate) = tokio::time::timeout(CALL_BOUND, self.round_gate()).await else {
            tracing::warn!(target: "berth::autopilot",
                "a round is being played: deciding the exits at the next check");
            return Ok(());
        };
        let ids: Vec<VtxoId> = still_free(wallet, ids)
            .await
            .map_err(EngineError::internal("reading VTXOs before an exit"))?
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        if let Some(budget) = self.policy.auto_exit_fee_budget {
            match engine.exit_fee(Some(&ids), None, None).await {
                Ok((estimate, _)) if estimate.exit_broadcast_fee > budget => {
                    tracing::error!(target: "berth::autopilot",
                        fee = estimate.exit_broadcast_fee.to_sat(), budget = budget.to_sat(),
                        "not starting exits: their fees are over [watchdog] auto_exit_fee_budget_sat");
                    return Ok(());
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(target: "berth::autopilot", error = %e,
                        "cannot estimate the exit fee; starting the exits anyway")
                }
            }
        }
        let started = engine.exit_start_vtxos(&ids).await?;
        let amount: Amount = facts
            .iter()
            .filter(|f| ids.contains(&f.id))
            .map(|f| f.amount)
            .sum();
        let first = facts
            .iter()
            .filter(|f| ids.contains(&f.id))
            .map(|f| blocks_to_deadline(f, tip))
            .min();
        tracing::warn!(target: "berth::autopilot", started, amount = amount.to_sat(),
            "started exits of VTXOs near expiry: no refresh can happen before their deadline");
        self.update(|s| s.exits_started_automatically += started as u64);
        self.alert(
            engine,
            EventKind::ExitStarted,
            Alert {
                message: format!(
                    "Started the exit of {started} VTXO(s) near expiry: the Ark server could not \
                     refresh them before their exit deadline. The funds will become claimable \
                     on-chain; Berth will not claim them on its own."
                ),
                vtxos: ids.iter().map(ToString::to_string).collect(),
                amount_sat: Some(amount.to_sat()),
                blocks_left: first,
                ..Alert::default()
            },
        )
        .await;
        Ok(())
    }

    async fn alert(&self, engine: &Engine, kind: EventKind, alert: Alert) {
        if let Err(e) = engine.events().alert(kind, alert).await {
            tracing::error!(target: "berth::autopilot", error = %e, ?kind, "cannot record an alert");
        }
    }
}

/// The ids of the inputs of the wallet's pending round participations, whether or
/// not their round has started (bark locks them only then).
pub(super) async fn participation_inputs(wallet: &bark::Wallet) -> anyhow::Result<HashSet<VtxoId>> {
    Ok(wallet
        .pending_round_states()
        .await?
        .iter()
        .flat_map(|s| s.state().locked_pending_inputs().iter().map(|v| v.id()))
        .collect())
}

/// The unspent VTXOs not being exited, with what the watchdog needs of each.
async fn watched_vtxos(
    wallet: &bark::Wallet,
    exiting: &HashSet<VtxoId>,
) -> Result<Vec<VtxoFacts>, EngineError> {
    let unspent = wallet
        .vtxos()
        .await
        .map_err(EngineError::internal("listing VTXOs"))?;
    let in_round: HashSet<VtxoId> = wallet
        .pending_round_input_vtxos()
        .await
        .map_err(EngineError::internal("listing round inputs"))?
        .iter()
        .map(|v| v.vtxo.id())
        .collect();
    let scheduled = participation_inputs(wallet)
        .await
        .map_err(EngineError::internal("listing round participations"))?;
    Ok(unspent
        .iter()
        .filter(|v| !exiting.contains(&v.vtxo.id()))
        .map(|v| {
            let id = v.vtxo.id();
            VtxoFacts {
                id,
                amount: v.vtxo.amount(),
                expiry_height: v.vtxo.expiry_height().into(),
                exit_depth: v.exit_depth,
                custody: custody(&v.state, in_round.contains(&id), scheduled.contains(&id)),
            }
        })
        .collect())
}

fn custody(state: &bark::vtxo::VtxoState, in_round: bool, scheduled: bool) -> Custody {
    match state {
        _ if in_round => Custody::InPendingRound,
        bark::vtxo::VtxoState::Spendable if scheduled => Custody::Scheduled,
        bark::vtxo::VtxoState::Spendable => Custody::Free,
        _ => Custody::Locked,
    }
}

/// Which of `ids` are still spendable now (free or scheduled), read again.
async fn still_free(
    wallet: &bark::Wallet,
    ids: &[VtxoId],
) -> anyhow::Result<Vec<(VtxoId, Custody)>> {
    let scheduled = participation_inputs(wallet).await?;
    let mut free = Vec::with_capacity(ids.len());
    for id in ids {
        let v = wallet.get_vtxo_by_id(*id).await?;
        match custody(&v.state, false, scheduled.contains(id)) {
            Custody::Locked | Custody::InPendingRound => {}
            c => free.push((*id, c)),
        }
    }
    Ok(free)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vtxo(n: u8, expiry_height: u32, exit_depth: u16) -> VtxoFacts {
        use bitcoin::hashes::Hash as _;
        let txid = bitcoin::Txid::from_byte_array([n; 32]);
        VtxoFacts {
            id: VtxoId::from(bitcoin::OutPoint::new(txid, 0)),
            amount: Amount::from_sat(10_000 * u64::from(n)),
            expiry_height,
            exit_depth,
            custody: Custody::Free,
        }
    }

    fn held(custody: Custody, v: VtxoFacts) -> VtxoFacts {
        VtxoFacts { custody, ..v }
    }

    /// bark's defaults on regtest and captaind's default lifetime.
    fn regtest(lifetime: u32) -> Sources {
        Sources {
            bark_refresh_threshold: 12,
            bark_exit_margin: 12,
            bark_round_confirmations: 1,
            vtxo_lifetime: Some(lifetime),
            // Short enough for bark to forfeit into 32-block VTXOs (2 x 12 + 4 + 1).
            vtxo_exit_delta: Some(4),
        }
    }

    fn configured(warn: Option<u32>, margin: Option<u32>) -> Policy {
        Policy {
            warn_blocks: warn,
            exit_margin_blocks: margin,
            refresh_attempts: 3,
            ..Policy::default()
        }
    }

    /// Thresholds with bark's regtest defaults (warn 12, margin 12) and a long lifetime.
    fn derived() -> Thresholds {
        Thresholds::derive(regtest(432), &configured(None, None))
    }

    const TEN_MINUTES: Duration = Duration::from_secs(600);

    /// The server answers; its next round starts in `minutes`.
    fn up(minutes: u64) -> Server {
        Server::Answering {
            next_round_in: Some(Duration::from_secs(60 * minutes)),
        }
    }

    fn check<'a>(tip: u32, server: Server, failures: &'a HashMap<VtxoId, u32>) -> Conditions<'a> {
        Conditions {
            tip,
            server,
            block_spacing: TEN_MINUTES,
            failures,
        }
    }

    #[test]
    fn the_deadline_leaves_a_block_per_exit_transaction() {
        let v = vtxo(1, 1000, 5);
        assert_eq!(blocks_to_deadline(&v, 900), 95);
        assert_eq!(blocks_to_deadline(&v, 995), 0);
        assert_eq!(blocks_to_deadline(&v, 1000), -5);
    }

    #[test]
    fn thresholds_come_from_bark_and_the_server_unless_configured_earlier() {
        let t = derived();
        assert_eq!(
            (
                t.warn_blocks,
                t.exit_margin_blocks,
                t.refresh_threshold_blocks
            ),
            (12, 12, 12)
        );
        let mainnet = Sources {
            bark_refresh_threshold: 144,
            ..regtest(4320)
        };
        let t = Thresholds::derive(mainnet, &configured(None, None));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (144, 12));
        // Earlier than derived: used.
        let t = Thresholds::derive(regtest(432), &configured(Some(100), Some(40)));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (100, 40));
        // A wider margin moves the warning with it: never warned after acting.
        let t = Thresholds::derive(regtest(432), &configured(None, Some(40)));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (40, 40));
        // Later than derived: ignored.
        let t = Thresholds::derive(regtest(432), &configured(Some(5), Some(3)));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (12, 12));
        assert_eq!(t.refresh_attempts, 3);
        assert_eq!(t.sources.vtxo_exit_delta, Some(4));
    }

    #[test]
    fn thresholds_are_at_most_half_the_vtxo_lifetime() {
        // berth.toml's old fixed margins against a 32-block lifetime: every VTXO would
        // have been at risk (and in the "last quarter") from birth.
        let t = Thresholds::derive(regtest(32), &configured(Some(288), Some(72)));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (16, 16));
        let t = Thresholds::derive(regtest(32), &configured(None, None));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (12, 12));
        let t = Thresholds::derive(regtest(20), &configured(None, None));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (10, 10));
        // The server never reached: nothing to clamp to.
        let unknown = Sources {
            vtxo_lifetime: None,
            vtxo_exit_delta: None,
            ..regtest(0)
        };
        let t = Thresholds::derive(unknown, &configured(Some(288), Some(72)));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (288, 72));
    }

    #[test]
    fn blocks_are_ten_minutes_on_every_network() {
        for network in [
            bitcoin::Network::Bitcoin,
            bitcoin::Network::Testnet,
            bitcoin::Network::Signet,
            bitcoin::Network::Regtest,
        ] {
            assert_eq!(block_spacing(network), TEN_MINUTES, "{network}");
        }
    }

    #[test]
    fn far_vtxos_are_left_alone_near_ones_warned_then_watched() {
        let t = Thresholds::derive(regtest(432), &configured(Some(100), Some(40)));
        let vtxos = [vtxo(1, 2000, 3), vtxo(2, 1103, 3), vtxo(3, 1043, 3)];
        let none = HashMap::new();
        let p = plan(&vtxos, &check(1000, up(30), &none), &t, true);
        // 997 blocks, 100 and 40 left.
        assert_eq!(p.first_deadline, Some(40));
        assert_eq!(p.expiring, vec![vtxos[1].id, vtxos[2].id]);
        // 43 blocks to expiry: bark's maintenance refresh (12) would not take it yet.
        assert_eq!(p.refresh, vec![vtxos[2].id]);
        assert_eq!(p.at_risk(), 1);
        assert!(p.exit.is_empty());
        // One block earlier the nearest is still outside the margin.
        let p = plan(&vtxos, &check(999, up(30), &none), &t, true);
        assert_eq!(p.at_risk(), 0);
    }

    #[test]
    fn a_locked_vtxo_is_never_exited() {
        let t = derived();
        let v = held(Custody::Locked, vtxo(1, 1005, 1));
        let mut failures = HashMap::new();
        failures.insert(v.id, 10);
        for server in [Server::Unreachable, up(30), up(600)] {
            // 4 blocks left, the last quarter is 3; then past the deadline.
            for tip in [1000, 1003, 1010] {
                let p = plan(
                    std::slice::from_ref(&v),
                    &check(tip, server, &failures),
                    &t,
                    true,
                );
                assert_eq!(p.held, vec![v.id], "{server:?} at {tip}");
                assert!(p.exit.is_empty() && p.refresh.is_empty() && p.failed.is_empty());
                assert_eq!(p.at_risk(), 1);
            }
        }
    }

    #[test]
    fn a_vtxo_in_a_pending_round_is_never_exited() {
        let t = derived();
        let v = held(Custody::InPendingRound, vtxo(1, 1005, 1));
        let mut failures = HashMap::new();
        failures.insert(v.id, 3);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1003, Server::Unreachable, &failures),
            &t,
            true,
        );
        assert_eq!(p.held, vec![v.id]);
        assert!(p.exit.is_empty());
        // The same VTXO spendable again (its round failed): now the rules apply.
        let free = VtxoFacts {
            custody: Custody::Free,
            ..v
        };
        let p = plan(
            &[free],
            &check(1003, Server::Unreachable, &failures),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id]);
    }

    #[test]
    fn with_the_server_up_and_a_round_due_nothing_is_exited_even_in_the_last_quarter() {
        // The case: a 32-block lifetime, the old berth.toml margins.
        let t = Thresholds::derive(regtest(32), &configured(Some(288), Some(72)));
        let none = HashMap::new();
        // In bark's refresh window (11 blocks to expiry), 10 to the deadline.
        let due = vtxo(1, 1011, 1);
        let scheduled = held(Custody::Scheduled, vtxo(2, 1004, 1));
        let vtxos = [due.clone(), scheduled.clone()];
        // The next round in 25 minutes: before either deadline (100 and 30 minutes).
        let p = plan(&vtxos, &check(1000, up(25), &none), &t, true);
        assert!(p.exit.is_empty(), "{p:?}");
        assert!(
            p.refresh.is_empty(),
            "bark's maintenance refresh takes them: {p:?}"
        );
        assert_eq!(p.waiting, vec![due.id, scheduled.id]);
        assert!(p.failed.is_empty());
        // 3 blocks left is the last quarter of 16: still waiting for the round.
        let p = plan(
            std::slice::from_ref(&due),
            &check(1007, up(25), &none),
            &t,
            true,
        );
        assert_eq!(p.waiting, vec![due.id]);
        assert!(p.exit.is_empty());
    }

    #[test]
    fn no_round_helps_when_the_lifetime_is_too_short_for_bark_to_forfeit() {
        // The regtest stack's exit delta of 12 under a 32-block lifetime: bark wants
        // new VTXOs to outlive the forfeit tip by 2 x 12 + 12, the round's
        // confirmation comes first, so 37 blocks. It would lock the inputs and never
        // forfeit them.
        let short = Sources {
            vtxo_exit_delta: Some(12),
            ..regtest(32)
        };
        let t = Thresholds::derive(short, &configured(None, None));
        assert_eq!(t.refresh_needs_lifetime, Some(37));
        assert!(!t.refresh_possible);
        let none = HashMap::new();
        let v = vtxo(1, 1011, 1);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, up(5), &none),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id], "a round is due, but cannot refresh it");
        let locked = held(Custody::InPendingRound, v.clone());
        let p = plan(&[locked], &check(1000, up(5), &none), &t, true);
        assert_eq!(p.held, vec![v.id]);
        // Enough lifetime, or terms not known yet: a round can refresh it.
        let t = Thresholds::derive(
            Sources {
                vtxo_exit_delta: Some(12),
                ..regtest(37)
            },
            &configured(None, None),
        );
        assert!(t.refresh_possible);
        let unknown = Sources {
            vtxo_lifetime: None,
            vtxo_exit_delta: None,
            ..regtest(0)
        };
        let t = Thresholds::derive(unknown, &configured(None, None));
        assert_eq!(t.refresh_needs_lifetime, None);
        assert!(t.refresh_possible);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, up(5), &none),
            &t,
            true,
        );
        assert_eq!(p.waiting, vec![v.id]);
    }

    #[test]
    fn with_no_round_before_the_deadline_the_vtxo_is_exited() {
        let t = derived();
        let none = HashMap::new();
        let v = vtxo(1, 1011, 1);
        // 10 blocks (100 minutes) left.
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, up(99), &none),
            &t,
            true,
        );
        assert_eq!(p.waiting, vec![v.id]);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, up(100), &none),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id]);
        // Past the deadline a round cannot help: exit (it may yet confirm in time).
        let p = plan(
            std::slice::from_ref(&v),
            &check(1010, up(0), &none),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id]);
        // A server that answers without saying when: a round is assumed to come.
        let unsaid = Server::Answering {
            next_round_in: None,
        };
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, unsaid, &none),
            &t,
            true,
        );
        assert_eq!(p.waiting, vec![v.id]);
    }

    #[test]
    fn with_the_server_down_attempts_fail_and_the_last_quarter_exits() {
        let t = derived();
        let none = HashMap::new();
        let v = vtxo(1, 1011, 1);
        // 10 blocks left of a 12-block margin: a failed attempt, wait.
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, Server::Unreachable, &none),
            &t,
            true,
        );
        assert_eq!(p.failed, vec![v.id]);
        assert_eq!(p.waiting, vec![v.id]);
        assert!(p.exit.is_empty());
        // 3 blocks left: the last quarter, no time to wait for the server.
        let p = plan(
            std::slice::from_ref(&v),
            &check(1007, Server::Unreachable, &none),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id]);
        assert!(p.failed.is_empty());
    }

    #[test]
    fn refused_refresh_attempts_start_the_exit_even_with_a_round_due() {
        let t = derived();
        let v = vtxo(1, 1011, 1);
        let mut failures = HashMap::new();
        failures.insert(v.id, 2);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, up(5), &failures),
            &t,
            true,
        );
        assert_eq!(
            p.waiting,
            vec![v.id],
            "two failures: the next round may take it"
        );
        failures.insert(v.id, 3);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, up(5), &failures),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id]);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, Server::Unreachable, &failures),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id]);
    }

    #[test]
    fn a_wider_margin_joins_a_round_only_before_bark_would() {
        let t = Thresholds::derive(regtest(432), &configured(None, Some(40)));
        let none = HashMap::new();
        let early = vtxo(1, 1035, 1);
        let scheduled = held(Custody::Scheduled, vtxo(2, 1035, 1));
        let bark_takes_it = vtxo(3, 1011, 1);
        let p = plan(
            &[early.clone(), scheduled.clone(), bark_takes_it.clone()],
            &check(1000, up(30), &none),
            &t,
            true,
        );
        assert_eq!(p.refresh, vec![early.id]);
        assert_eq!(p.waiting, vec![scheduled.id, bark_takes_it.id]);
        assert!(due_for_maintenance(&bark_takes_it, 1000, &t));
        assert!(!due_for_maintenance(&early, 1000, &t));
        // With the server down nothing is joined: the attempt fails.
        let p = plan(
            std::slice::from_ref(&early),
            &check(1000, Server::Unreachable, &none),
            &t,
            true,
        );
        assert!(p.refresh.is_empty());
        assert_eq!(p.failed, vec![early.id]);
    }

    #[test]
    fn with_the_watchdog_off_only_warnings_are_planned() {
        let t = derived();
        let vtxos = [vtxo(1, 1005, 2)];
        let mut failures = HashMap::new();
        failures.insert(vtxos[0].id, 10);
        let p = plan(
            &vtxos,
            &check(1000, Server::Unreachable, &failures),
            &t,
            false,
        );
        assert_eq!(p.expiring, vec![vtxos[0].id]);
        assert_eq!(p.at_risk(), 0);
        assert!(p.exit.is_empty() && p.failed.is_empty());
        assert_eq!(
            plan(&[], &check(1000, Server::Unreachable, &failures), &t, false),
            Plan::default()
        );
    }

    #[test]
    fn custody_reads_bark_state_and_rounds() {
        use bark::vtxo::VtxoState;
        let locked = VtxoState::Locked { holder: None };
        assert_eq!(custody(&VtxoState::Spendable, false, false), Custody::Free);
        assert_eq!(
            custody(&VtxoState::Spendable, false, true),
            Custody::Scheduled
        );
        assert_eq!(custody(&locked, false, false), Custody::Locked);
        assert_eq!(custody(&locked, true, true), Custody::InPendingRound);
        assert_eq!(custody(&VtxoState::Spent, false, false), Custody::Locked);
    }

    #[test]
    fn the_reserve_compares_exit_fees_with_confirmed_coins() {
        let r = reserve(Amount::from_sat(5_000), Amount::from_sat(4_000));
        assert!(!r.sufficient());
        assert_eq!(r.shortfall(), Amount::from_sat(1_000));
        let r = reserve(Amount::from_sat(5_000), Amount::from_sat(5_000));
        assert!(r.sufficient());
        assert_eq!(r.shortfall(), Amount::ZERO);
        assert!(reserve(Amount::ZERO, Amount::ZERO).sufficient());
    }

    #[test]
    fn the_exit_fee_rate_is_fixed_or_the_capped_estimate() {
        let p = Policy::default();
        let high = FeeRate::from_sat_per_vb_u32(900);
        let low = FeeRate::from_sat_per_vb_u32(3);
        assert_eq!(exit_fee_rate(&p, high), p.max_exit_fee_rate);
        assert_eq!(exit_fee_rate(&p, low), low);
        let fixed = Policy {
            exit_fee_rate: Some(FeeRate::from_sat_per_vb_u32(7)),
            ..Policy::default()
        };
        assert_eq!(exit_fee_rate(&fixed, high), FeeRate::from_sat_per_vb_u32(7));
    }
}

//! The autopilot: what keeps a wallet safe with nobody watching.
//!
//! An Ark VTXO must be refreshed before it expires; after expiry the server can sweep
//! the tree it hangs from. bark decides refreshes: the wallet's `rounds` task runs
//! bark's own maintenance refresh at each round while the Ark server answers
//! (`wallet_tasks`), and nothing here overrides it; barkd never starts an exit on its
//! own. The autopilot adds, on every check (each `check_interval` and each new block):
//! - a probe of the Ark server (`ark-server-unreachable` when it stops answering); it
//!   is also the heartbeat bark's daemon keeps in manual-sync mode;
//! - the expiry watchdog. A VTXO's *exit deadline* is the last height at which an exit
//!   can still get each of its transactions confirmed (one block each) before the VTXO
//!   expires. Its thresholds come from the wallet's bark config and the server's terms
//!   ([`Thresholds::derive`]); `berth.toml` can only make it act earlier. Within
//!   `warn_blocks` of the deadline: a `vtxo-expiring` alert. Within
//!   `exit_margin_blocks`: the VTXO is at risk, and an exit is the last resort — only
//!   when no refresh can happen by bark's own account: the server has not answered for
//!   `refresh_attempts` blocks (or into the margin's last quarter), or bark's refreshes
//!   of it failed `refresh_attempts` times; never for a VTXO that is locked or in a
//!   pending round ([`plan`] has the rules). Exited funds are never claimed here;
//!   `exit-claimable` tells the user they can be;
//! - the exit reserve: the on-chain wallet's confirmed coins must pay the fee-paying
//!   children of every exit; `exit-reserve-low` when they would not.
//!
//! The decisions are pure functions in `decisions.rs` ([`Thresholds::derive`],
//! [`plan`], [`reserve`]), tested against tip heights and VTXO sets; `facts.rs` reads
//! what they need of the wallet. [`Autopilot::check`], here, runs one pass as a short
//! sequence of steps (probe the server, read the tip, watch exits, watch expiry, check
//! the reserve), each gathering its facts, applying the decision and recording what it
//! saw for `/health` and `/metrics`; the expiry watchdog, the step that acts, is
//! `expiry.rs`.
//!
//! When the wallet's bark config says `daemon_manual_sync = true`, the autopilot obeys
//! it as bark's daemon does: it probes, watches and alerts, but never joins a round or
//! starts an exit ([`Status::acting`] says so in `/health`).
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

use bitcoin::Amount;

use super::{Engine, EngineError, LoadedWallet};

use crate::events::{Alert, EventKind};

mod decisions;
mod expiry;
mod facts;

pub use decisions::*;

/// What the autopilot last saw, for `/health` and `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// Whether the watchdog may join rounds and start exits: `[watchdog] enabled`,
    /// and the wallet's bark config not in `daemon_manual_sync` (`None` before a check
    /// of a loaded wallet).
    pub acting: Option<Acting>,
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

/// What decides whether the autopilot acts on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acting {
    /// `[watchdog] enabled` in `berth.toml`.
    pub watchdog: bool,
    /// `daemon_manual_sync` in the wallet's `config.toml` (bark's switch).
    pub manual_sync: bool,
}

impl Acting {
    /// The watchdog may refresh and exit on its own.
    pub fn on(&self) -> bool {
        self.watchdog && !self.manual_sync
    }
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

/// The autopilot of one open wallet (each session has its own: `LoadedWallet`), and its
/// memory between checks; it goes with the wallet when the wallet is closed.
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
    /// The tip of the last expiry check: a failed attempt counts once per block.
    tip_checked: Option<u32>,
    /// The server's terms as last seen (kept while it is unreachable).
    terms: Option<ServerTerms>,
    thresholds: Option<Thresholds>,
    checks: u64,
}

#[derive(Debug, Clone, Copy)]
struct ServerTerms {
    vtxo_lifetime: u32,
    vtxo_exit_delta: u32,
}

/// Failed refresh attempts, counted only for VTXOs at risk: a refresh that failed long
/// before the deadline says nothing about the rounds still to come before it.
#[derive(Default)]
struct Failures {
    per_vtxo: HashMap<VtxoId, u32>,
    /// The VTXOs the last check found at risk.
    at_risk: HashSet<VtxoId>,
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

impl Failures {
    fn count(&mut self, ids: impl IntoIterator<Item = VtxoId>) {
        for id in ids {
            if self.at_risk.contains(&id) {
                *self.per_vtxo.entry(id).or_default() += 1;
            }
        }
    }
}

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
        failures.count(inputs);
        drop(failures);
        self.update(|s| s.refresh_failures += 1);
    }

    /// A maintenance refresh that left `ids` unrefreshed (it failed, or the server
    /// rejected them and bark went on without them): a failed attempt each.
    pub(super) fn record_unrefreshed(&self, ids: impl IntoIterator<Item = VtxoId>) {
        self.record_failed_attempts(ids);
    }

    fn record_failed_attempts(&self, ids: impl IntoIterator<Item = VtxoId>) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .count(ids);
    }

    /// The failure counts of `watched`, forgetting every other VTXO.
    fn failures_of(&self, watched: &[VtxoFacts]) -> HashMap<VtxoId, u32> {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures
            .per_vtxo
            .retain(|id, _| watched.iter().any(|f| f.id == *id));
        failures.per_vtxo.clone()
    }

    /// Remember which VTXOs are at risk: only their failed refreshes count.
    fn set_at_risk(&self, plan: &Plan) {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        failures.at_risk = [&plan.refresh, &plan.waiting, &plan.held, &plan.exit]
            .into_iter()
            .flatten()
            .copied()
            .collect();
        let at_risk = &failures.at_risk;
        let kept: HashMap<VtxoId, u32> = failures
            .per_vtxo
            .iter()
            .filter(|(id, _)| at_risk.contains(id))
            .map(|(id, n)| (*id, *n))
            .collect();
        failures.per_vtxo = kept;
    }

    fn update(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.status.write().unwrap_or_else(|e| e.into_inner()));
    }

    /// One pass: probe, watch, act, record. An error ends the pass early (the
    /// supervisor retries with backoff); what was learnt so far stays recorded. The
    /// decisions are `decisions`' pure functions; each step here gathers their facts
    /// and carries them out.
    pub async fn check(&self, engine: &Engine, loaded: &LoadedWallet) -> Result<(), EngineError> {
        let mut memory = self.memory.lock().await;
        memory.checks += 1;
        let now = SystemTime::now();
        tracing::debug!(target: "berth::autopilot", "check: probing the Ark server");
        let server = self.probe_server(engine, loaded, &mut memory, now).await;
        tracing::debug!(target: "berth::autopilot", ?server, "check: the chain tip");
        let tip = self.read_tip(loaded, &mut memory, now).await?;
        let exiting = self.watch_exits(engine, loaded, &mut memory).await;
        let watched = self
            .watch_expiry(engine, loaded, &mut memory, server, tip.height, &exiting)
            .await?;
        // The exit reserve: on the first check, on each new block, and every tenth.
        if tip.seen_at == now || memory.checks % 10 == 1 {
            self.check_reserve(engine, loaded, &mut memory).await;
        }
        tracing::debug!(target: "berth::autopilot", tip = tip.height, vtxos = watched,
            "check: done");
        Ok(())
    }

    /// Probe the Ark server (an `ark-server-unreachable` alert when it stops
    /// answering), keep its terms, and ask when its next round starts.
    async fn probe_server(
        &self,
        engine: &Engine,
        loaded: &LoadedWallet,
        memory: &mut Memory,
        now: SystemTime,
    ) -> Server {
        let probe = tokio::time::timeout(CALL_BOUND, loaded.wallet.refresh_server()).await;
        let server_error = match probe {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("{e:#}")),
            Err(_) => Some(format!("no answer within {} s", CALL_BOUND.as_secs())),
        };
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
            });
        }
        // When the next round starts, for `/health`: the server says.
        let (server, next_round_at) = match server_error {
            Some(_) => (Server::Unreachable, None),
            None => {
                let next =
                    tokio::time::timeout(CALL_BOUND, loaded.wallet.next_round_start_time()).await;
                let at = match next {
                    Ok(Ok(at)) => Some(at),
                    failed => {
                        tracing::debug!(target: "berth::autopilot", ok = failed.is_ok(),
                            "the server did not say when its next round starts");
                        None
                    }
                };
                (Server::Answering, at)
            }
        };
        self.update(|s| s.next_round_at = next_round_at);
        server
    }

    /// The chain tip, and when Berth first saw it.
    async fn read_tip(
        &self,
        loaded: &LoadedWallet,
        memory: &mut Memory,
        now: SystemTime,
    ) -> Result<TipStatus, EngineError> {
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
        Ok(tip_status)
    }

    /// Exits by phase (an `exit-claimable` alert for each newly claimable one); the
    /// VTXOs being exited, which the watchdog leaves alone.
    async fn watch_exits(
        &self,
        engine: &Engine,
        loaded: &LoadedWallet,
        memory: &mut Memory,
    ) -> HashSet<VtxoId> {
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
        exiting
    }

    /// Whether the on-chain wallet's confirmed coins pay for exiting every VTXO
    /// ([`reserve`]); an `exit-reserve-low` alert when they stop doing so.
    async fn check_reserve(&self, engine: &Engine, loaded: &LoadedWallet, memory: &mut Memory) {
        match engine.fees().exit(None, None, None).await {
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

    async fn alert(&self, engine: &Engine, kind: EventKind, alert: Alert) {
        if let Err(e) = engine.events().alert(kind, alert).await {
            tracing::error!(target: "berth::autopilot", error = %e, ?kind, "cannot record an alert");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> VtxoId {
        use bitcoin::hashes::Hash as _;
        VtxoId::from(bitcoin::OutPoint::new(
            bitcoin::Txid::from_byte_array([n; 32]),
            0,
        ))
    }

    /// A failed refresh counts only for a VTXO the last check found at risk: one that
    /// failed long before its deadline says nothing about the rounds still to come.
    #[test]
    fn failed_refreshes_count_only_while_at_risk() {
        let autopilot = Autopilot::new(Policy::default());
        let (near, far) = (id(1), id(2));
        autopilot.record_unrefreshed([near, far]);
        assert!(autopilot.failures_of(&[]).is_empty(), "nothing was at risk");
        autopilot.set_at_risk(&Plan {
            waiting: vec![near],
            ..Plan::default()
        });
        autopilot.record_unrefreshed([near, far]);
        autopilot.record_failed_round(bark::persist::models::RoundStateId(7), [near, far]);
        // The same failed round state seen again counts once.
        autopilot.record_failed_round(bark::persist::models::RoundStateId(7), [near, far]);
        let failures = autopilot
            .failures
            .lock()
            .expect("failures")
            .per_vtxo
            .clone();
        assert_eq!(failures.get(&near), Some(&2));
        assert_eq!(failures.get(&far), None);
        // Refreshed, or out of the margin again: forgotten.
        autopilot.set_at_risk(&Plan::default());
        assert!(
            autopilot
                .failures
                .lock()
                .expect("failures")
                .per_vtxo
                .is_empty()
        );
    }
}

//! The autopilot: what keeps a wallet safe with nobody watching.
//!
//! An Ark VTXO must be refreshed before it expires; after expiry the server can sweep
//! the tree it hangs from. The wallet's `rounds` task refreshes the VTXOs bark considers
//! due at each round while the Ark server answers (`wallet_tasks`); barkd never starts
//! an exit on its own. The autopilot adds, on every check (each `check_interval` and
//! each new block):
//! - a probe of the Ark server (`ark-server-unreachable` when it stops answering);
//! - the expiry watchdog: a VTXO's *exit deadline* is the last height at which an exit
//!   can still get each of its transactions confirmed (one block each) before the
//!   VTXO expires. Within `warn_blocks` of it: a `vtxo-expiring` alert. Within
//!   `exit_margin_blocks`: schedule it into the server's next round (once); a check
//!   at which the server is unreachable, or refuses the refresh, is a failed attempt.
//!   After `refresh_attempts` failed attempts — or in the last quarter of the margin,
//!   when there is no time left to keep waiting — start its exit. Exited funds are
//!   never claimed here; `exit-claimable` tells the user they can be;
//! - the exit reserve: the on-chain wallet's confirmed coins must pay the fee-paying
//!   children of every exit; `exit-reserve-low` when they would not.
//!
//! The decisions are pure functions ([`plan`], [`reserve`]) tested against tip heights
//! and VTXO sets; [`Autopilot::check`] gathers the facts, applies them and records what
//! it saw for `/health` and `/metrics`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ark::VtxoId;
use bitcoin::{Amount, FeeRate};

use super::{Engine, EngineError};
use crate::store::codec::{Alert, EventKind};

/// What the autopilot may do, from `berth.toml` `[watchdog]` and `[exits]`.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Start exits on its own; off leaves the alerts only.
    pub watchdog: bool,
    pub check_interval: Duration,
    pub warn_blocks: u32,
    pub exit_margin_blocks: u32,
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
            warn_blocks: 288,
            exit_margin_blocks: 72,
            refresh_attempts: 3,
            auto_exit_fee_budget: None,
            exit_progress_interval: Duration::from_secs(30),
            exit_fee_rate: None,
            max_exit_fee_rate: FeeRate::from_sat_per_vb_u32(500),
        }
    }
}

/// What the watchdog needs to know of one unspent VTXO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VtxoFacts {
    pub id: VtxoId,
    pub amount: Amount,
    pub expiry_height: u32,
    /// Transactions its exit must confirm, one block each at best.
    pub exit_depth: u16,
    /// Spendable (a refresh can take it); otherwise it is locked in a round.
    pub spendable: bool,
}

/// Blocks left at `tip` before `v` can no longer be exited safely (negative: past it).
pub fn blocks_to_deadline(v: &VtxoFacts, tip: u32) -> i64 {
    i64::from(v.expiry_height) - i64::from(tip) - i64::from(v.exit_depth)
}

/// What the watchdog decided at one tip.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Within `warn_blocks` of their deadline.
    pub expiring: Vec<VtxoId>,
    /// Within the margin: try a refresh first.
    pub refresh: Vec<VtxoId>,
    /// Within the margin and refresh kept failing (or no time is left): exit.
    pub exit: Vec<VtxoId>,
    /// The nearest deadline, in blocks.
    pub first_deadline: Option<i64>,
}

/// The watchdog's decision for `vtxos` at `tip`, given how many refreshes of each
/// failed in a row.
pub fn plan(
    tip: u32,
    vtxos: &[VtxoFacts],
    refresh_failures: &HashMap<VtxoId, u32>,
    policy: &Policy,
) -> Plan {
    let mut plan = Plan::default();
    let critical = i64::from(policy.exit_margin_blocks / 4);
    for v in vtxos {
        let left = blocks_to_deadline(v, tip);
        plan.first_deadline = Some(plan.first_deadline.map_or(left, |f| f.min(left)));
        if left <= i64::from(policy.warn_blocks) {
            plan.expiring.push(v.id);
        }
        if !policy.watchdog || left > i64::from(policy.exit_margin_blocks) {
            continue;
        }
        let failures = refresh_failures.get(&v.id).copied().unwrap_or(0);
        if failures >= policy.refresh_attempts || left <= critical {
            plan.exit.push(v.id);
        } else if v.spendable {
            plan.refresh.push(v.id);
        }
        // A locked VTXO is in a round already: its refresh is under way.
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
}

#[derive(Default)]
struct Memory {
    refresh_failures: HashMap<VtxoId, u32>,
    /// VTXOs the watchdog scheduled into a round (once each).
    joined: HashSet<VtxoId>,
    /// VTXOs a `vtxo-expiring` alert was raised for (raised once each).
    warned: HashSet<VtxoId>,
    /// Exits an `exit-claimable` alert was raised for.
    claimable: HashSet<VtxoId>,
    server_alerted: bool,
    reserve_alerted: bool,
    last_tip: Option<TipStatus>,
    checks: u64,
}

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

/// How long one call to the Ark server or chain source may take within a check.
const CALL_BOUND: Duration = Duration::from_secs(30);

impl Autopilot {
    pub fn new(policy: Policy) -> Arc<Self> {
        Arc::new(Autopilot {
            policy,
            status: std::sync::RwLock::new(Status::default()),
            memory: tokio::sync::Mutex::new(Memory::default()),
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

        tracing::debug!(target: "berth::autopilot", reachable = server_error.is_none(), "check: the chain tip");
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
        let unspent = loaded
            .wallet
            .vtxos()
            .await
            .map_err(EngineError::internal("listing VTXOs"))?;
        let watched: Vec<_> = unspent
            .iter()
            .filter(|v| !exiting.contains(&v.vtxo.id()))
            .collect();
        // The exit depth needs each VTXO's genesis chain (the full VTXO).
        let depths: HashMap<VtxoId, u16> = loaded
            .wallet
            .get_full_vtxos(watched.iter().map(|v| v.vtxo.id()))
            .await
            .map_err(EngineError::internal("reading VTXOs"))?
            .iter()
            .map(|full| (full.id(), full.exit_depth()))
            .collect();
        let facts: Vec<VtxoFacts> = watched
            .iter()
            .map(|v| VtxoFacts {
                id: v.vtxo.id(),
                amount: v.vtxo.amount(),
                expiry_height: v.vtxo.expiry_height().into(),
                // Unknown depth (never expected): assume a deep tree, act earlier.
                exit_depth: depths.get(&v.vtxo.id()).copied().unwrap_or(16),
                spendable: matches!(v.state, bark::vtxo::VtxoState::Spendable),
            })
            .collect();
        memory
            .refresh_failures
            .retain(|id, _| facts.iter().any(|f| f.id == *id));
        memory.joined.retain(|id| facts.iter().any(|f| f.id == *id));
        let decided = plan(tip, &facts, &memory.refresh_failures, &self.policy);
        let at_risk = decided.refresh.len() + decided.exit.len();
        self.update(|s| {
            s.vtxos = facts.clone();
            s.first_deadline = decided.first_deadline;
            s.expiring = decided.expiring.len();
            s.at_risk = at_risk;
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

        if !decided.refresh.is_empty() {
            self.try_refresh(
                engine,
                &mut memory,
                &decided.refresh,
                server_error.is_none(),
            )
            .await;
        }

        if !decided.exit.is_empty() {
            self.start_exits(engine, &decided.exit, &facts, tip).await?;
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

    /// Try to refresh VTXOs within the exit margin. A refresh fails when the Ark
    /// server is unreachable or refuses to take the VTXOs into a round. Joining
    /// only schedules a participation for the server's next round (the VTXOs stay
    /// spendable until it starts), so each VTXO joins once; while the server
    /// answers, the watchdog then waits for the round, until the margin's last
    /// quarter.
    async fn try_refresh(
        &self,
        engine: &Engine,
        memory: &mut Memory,
        ids: &[VtxoId],
        server_reachable: bool,
    ) {
        let fail = |memory: &mut Memory| {
            for id in ids {
                *memory.refresh_failures.entry(*id).or_default() += 1;
            }
            self.update(|s| s.refresh_failures += 1);
        };
        if !server_reachable {
            tracing::warn!(target: "berth::autopilot", vtxos = ids.len(),
                "cannot refresh VTXOs near their exit deadline: the Ark server is unreachable");
            fail(memory);
            return;
        }
        let fresh: Vec<VtxoId> = ids
            .iter()
            .filter(|id| !memory.joined.contains(id))
            .copied()
            .collect();
        if fresh.is_empty() {
            return;
        }
        match tokio::time::timeout(CALL_BOUND * 2, engine.refresh_vtxos(&fresh)).await {
            Ok(Ok(_)) => {
                tracing::info!(target: "berth::autopilot", vtxos = fresh.len(),
                    "joined the next round to refresh VTXOs near their exit deadline");
                memory.joined.extend(fresh.iter().copied());
                self.update(|s| s.refresh_successes += 1);
            }
            failed => {
                let reason = match failed {
                    Ok(Err(e)) => e.to_string(),
                    _ => "no answer in time".to_string(),
                };
                tracing::warn!(target: "berth::autopilot", error = %reason,
                    vtxos = fresh.len(), "cannot refresh VTXOs near their exit deadline");
                fail(memory);
            }
        }
    }

    async fn start_exits(
        &self,
        engine: &Engine,
        ids: &[VtxoId],
        facts: &[VtxoFacts],
        tip: u32,
    ) -> Result<(), EngineError> {
        if let Some(budget) = self.policy.auto_exit_fee_budget {
            match engine.exit_fee(Some(ids), None, None).await {
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
        let started = engine.exit_start_vtxos(ids).await?;
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
            "started exits of VTXOs near expiry: refreshing them kept failing");
        self.update(|s| s.exits_started_automatically += started as u64);
        self.alert(
            engine,
            EventKind::ExitStarted,
            Alert {
                message: format!(
                    "Started the exit of {started} VTXO(s) near expiry because refreshing them \
                     kept failing. The funds will become claimable on-chain; Berth will not \
                     claim them on its own."
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
            spendable: true,
        }
    }

    fn policy() -> Policy {
        Policy {
            warn_blocks: 100,
            exit_margin_blocks: 40,
            refresh_attempts: 3,
            ..Policy::default()
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
    fn far_vtxos_are_left_alone_near_ones_warned_then_refreshed() {
        let vtxos = [vtxo(1, 2000, 3), vtxo(2, 1103, 3), vtxo(3, 1043, 3)];
        let none = HashMap::new();
        let p = plan(1000, &vtxos, &none, &policy());
        // 997 blocks, 100 and 40 left.
        assert_eq!(p.first_deadline, Some(40));
        assert_eq!(p.expiring, vec![vtxos[1].id, vtxos[2].id]);
        assert_eq!(p.refresh, vec![vtxos[2].id]);
        assert!(p.exit.is_empty());
        // One block earlier the nearest is still outside the margin.
        let p = plan(999, &vtxos, &none, &policy());
        assert!(p.refresh.is_empty() && p.exit.is_empty());
    }

    #[test]
    fn repeated_refresh_failures_start_the_exit() {
        let vtxos = [vtxo(1, 1030, 2)];
        let mut failures = HashMap::new();
        failures.insert(vtxos[0].id, 2);
        let p = plan(1000, &vtxos, &failures, &policy());
        assert_eq!(p.refresh, vec![vtxos[0].id], "two failures: try again");
        failures.insert(vtxos[0].id, 3);
        let p = plan(1000, &vtxos, &failures, &policy());
        assert_eq!(p.exit, vec![vtxos[0].id]);
        assert!(p.refresh.is_empty());
    }

    #[test]
    fn no_time_left_exits_at_once_and_locked_vtxos_wait_for_their_round() {
        // 10 blocks left of a 40-block margin: the last quarter.
        let vtxos = [vtxo(1, 1012, 2)];
        let p = plan(1000, &vtxos, &HashMap::new(), &policy());
        assert_eq!(p.exit, vec![vtxos[0].id]);
        // Past the deadline: still exit (it may yet confirm in time).
        let p = plan(1100, &vtxos, &HashMap::new(), &policy());
        assert_eq!(p.exit, vec![vtxos[0].id]);
        let mut locked = vtxo(2, 1030, 2);
        locked.spendable = false;
        let p = plan(1000, &[locked], &HashMap::new(), &policy());
        assert!(p.refresh.is_empty() && p.exit.is_empty());
    }

    #[test]
    fn with_the_watchdog_off_only_warnings_are_planned() {
        let off = Policy {
            watchdog: false,
            ..policy()
        };
        let vtxos = [vtxo(1, 1005, 2)];
        let mut failures = HashMap::new();
        failures.insert(vtxos[0].id, 10);
        let p = plan(1000, &vtxos, &failures, &off);
        assert_eq!(p.expiring, vec![vtxos[0].id]);
        assert!(p.refresh.is_empty() && p.exit.is_empty());
        assert_eq!(plan(1000, &[], &failures, &off), Plan::default());
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
        let p = policy();
        let high = FeeRate::from_sat_per_vb_u32(900);
        let low = FeeRate::from_sat_per_vb_u32(3);
        assert_eq!(exit_fee_rate(&p, high), p.max_exit_fee_rate);
        assert_eq!(exit_fee_rate(&p, low), low);
        let fixed = Policy {
            exit_fee_rate: Some(FeeRate::from_sat_per_vb_u32(7)),
            ..policy()
        };
        assert_eq!(exit_fee_rate(&fixed, high), FeeRate::from_sat_per_vb_u32(7));
    }
}

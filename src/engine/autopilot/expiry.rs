//! The expiry watchdog, one step of [`Autopilot::check`]: the thresholds and the plan
//! ([`plan`], pure, in `decisions.rs`) for the watched VTXOs, and carrying it out —
//! `vtxo-expiring` alerts, joining a round with VTXOs at risk, and starting exits as
//! the last resort. The rules are in the module docs of `autopilot`.

use crate::engine::spending::Spender;
use std::collections::HashSet;

use ark::VtxoId;
use bitcoin::Amount;

use super::facts::{still_free, watched_vtxos};
use super::*;
use crate::engine::{Engine, EngineError, LoadedWallet};
use crate::events::{Alert, EventKind};

impl Autopilot {
    /// The expiry watchdog: the thresholds, the plan ([`plan`]) and carrying it out
    /// (alerts, joining a round, starting exits). Returns how many VTXOs it watched.
    pub(super) async fn watch_expiry(
        &self,
        engine: &Engine,
        loaded: &LoadedWallet,
        memory: &mut Memory,
        server: Server,
        tip: u32,
        exiting: &HashSet<VtxoId>,
    ) -> Result<usize, EngineError> {
        let facts: Vec<VtxoFacts> = watched_vtxos(&loaded.wallet, exiting).await?;
        let config = loaded.wallet.config();
        let acting = Acting {
            watchdog: self.policy.watchdog,
            manual_sync: config.daemon_manual_sync,
        };
        let thresholds = Thresholds::derive(
            Sources {
                bark_refresh_threshold: config.vtxo_refresh_expiry_threshold.into(),
                bark_exit_margin: config.vtxo_exit_margin.into(),
                vtxo_lifetime: memory.terms.map(|t| t.vtxo_lifetime),
                vtxo_exit_delta: memory.terms.map(|t| t.vtxo_exit_delta),
            },
            &self.policy,
        );
        if memory.thresholds != Some(thresholds) {
            self.announce_thresholds(&thresholds);
            memory.thresholds = Some(thresholds);
        }
        let failures = self.failures_of(&facts);
        let conditions = Conditions {
            tip,
            server,
            new_block: memory.tip_checked != Some(tip),
            failures: &failures,
        };
        memory.tip_checked = Some(tip);
        let decided = plan(&facts, &conditions, &thresholds, acting.on());
        self.set_at_risk(&decided);
        self.record_failed_attempts(decided.failed.iter().copied());
        if !decided.failed.is_empty() {
            tracing::warn!(target: "berth::autopilot", vtxos = decided.failed.len(),
                "cannot refresh VTXOs near their exit deadline: the Ark server is unreachable");
            self.update(|s| s.refresh_failures += 1);
        }
        self.update(|s| {
            s.acting = Some(acting);
            s.vtxos = facts.clone();
            s.first_deadline = decided.first_deadline;
            s.expiring = decided.expiring.len();
            s.at_risk = decided.at_risk();
            s.held = decided.held.len();
            s.thresholds = Some(thresholds);
        });
        self.warn_of_expiry(engine, memory, &facts, &decided.expiring, tip)
            .await;
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
        Ok(facts.len())
    }

    /// Log thresholds that changed (the server's terms arrived, or changed), and say
    /// which `[watchdog]` values are not used and why.
    fn announce_thresholds(&self, thresholds: &Thresholds) {
        tracing::info!(target: "berth::autopilot",
            warn_blocks = thresholds.warn_blocks,
            exit_margin_blocks = thresholds.exit_margin_blocks,
            refresh_threshold_blocks = thresholds.refresh_threshold_blocks,
            vtxo_lifetime = ?thresholds.sources.vtxo_lifetime,
            "watchdog thresholds (blocks before a VTXO's exit deadline)");
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
    }

    /// A `vtxo-expiring` alert for the VTXOs within `warn_blocks` not warned of yet;
    /// the memory of warned VTXOs keeps only those still watched.
    async fn warn_of_expiry(
        &self,
        engine: &Engine,
        memory: &mut Memory,
        facts: &[VtxoFacts],
        expiring: &[VtxoId],
        tip: u32,
    ) {
        let new_warnings: Vec<&VtxoFacts> = facts
            .iter()
            .filter(|f| expiring.contains(&f.id) && !memory.warned.contains(&f.id))
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
        match tokio::time::timeout(CALL_BOUND * 2, engine.rounds().refresh_vtxos(&fresh)).await {
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
                self.record_failed_attempts(fresh.iter().copied());
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
            match engine.fees().exit(Some(&ids), None, None).await {
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
        // The autopilot's own exits protect the wallet's funds: no device's rules.
        let started = engine.exits().start_vtxos(&ids, &Spender::Owner).await?;
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
}

//! Seed recovery, as far as berthd is concerned: bark runs it (in the `Wallet::open`
//! that creates an imported wallet, `lifecycle`); this turns bark's report into what
//! the wallet record keeps (`store::setup`), and tells the user what it found — in the
//! log, a `seed-recovery` event, and one sentence for the API and `/health`.
//!
//! bark's report sorts each VTXO it came across: recovered (restored as spendable),
//! skipped (spent, or settling elsewhere), exited, unknown to the server, foreign (its
//! key is beyond the gap limit), and failed (undecided). berthd splits the undecided
//! by whether the server returned the VTXO at all: a returned one is in the store,
//! locked until the server confirms it unspent ("unconfirmed"); one it could not
//! return is not ("unavailable"). An Ark server older than bark 0.8 leaves every VTXO
//! undecided.

use super::Engine;
use crate::events::{Alert, EventKind};
use crate::store::{Recovery, RecoveryCounts};
use bark::persist::BarkPersister;

/// At most this many VTXO ids are named in a `seed-recovery` event.
const MAX_IDS_IN_EVENT: usize = 100;

/// What seed recovery found: the record, and the VTXOs it could not restore.
pub(super) struct RecoveryFound {
    pub(super) record: Recovery,
    /// Ids of the VTXOs found but not restored (undecided, or beyond the gap limit).
    pub(super) not_restored: Vec<String>,
}

impl Engine {
    /// What bark's recovery outcome means for this wallet. A VTXO recovery could not
    /// decide on is either in the store (its body came from the mailbox or the server,
    /// kept locked until the server confirms it unspent) or not (the server could not
    /// return it).
    pub(super) async fn recovery_found(
        &self,
        outcome: Option<bark::RecoveryStatus>,
    ) -> anyhow::Result<RecoveryFound> {
        let at_us = crate::events::micros(chrono::Utc::now());
        let report = match outcome {
            None | Some(bark::RecoveryStatus::NotRun) => {
                return Ok(RecoveryFound {
                    record: Recovery::NotRun { at_us },
                    not_restored: Vec::new(),
                });
            }
            Some(bark::RecoveryStatus::Failed(e)) => {
                return Ok(RecoveryFound {
                    record: Recovery::Failed {
                        at_us,
                        reason: format!("{e:#}"),
                    },
                    not_restored: Vec::new(),
                });
            }
            Some(bark::RecoveryStatus::Completed(report)) => report,
        };
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let mut counts = RecoveryCounts {
            recovered: count(report.recovered().len()),
            recovered_sat: report.recovered().total_amount().to_sat(),
            beyond_gap_limit: count(report.foreign().len()),
            spent: count(report.skipped().len()),
            exited: count(report.exited().len()),
            unknown_to_server: count(report.not_found().len()),
            ..RecoveryCounts::default()
        };
        let mut not_restored = Vec::new();
        for id in report.failed().ids() {
            match self.store.get_wallet_vtxo(id).await? {
                Some(vtxo) => {
                    counts.unconfirmed += 1;
                    counts.unconfirmed_sat += vtxo.vtxo.amount().to_sat();
                }
                None => counts.unavailable += 1,
            }
            not_restored.push(id.to_string());
        }
        not_restored.extend(report.foreign().ids().map(|id| id.to_string()));
        Ok(RecoveryFound {
            record: Recovery::Finished { at_us, counts },
            not_restored,
        })
    }

    /// Log what an import's seed recovery found, and record it as a `seed-recovery`
    /// event (opt-in, like the alerts).
    pub(super) async fn announce_recovery(&self, found: &RecoveryFound) {
        let (message, amount_sat) = match &found.record {
            Recovery::NotRun { .. } => return,
            Recovery::Failed { reason, .. } => {
                tracing::error!(%reason, "seed recovery failed: VTXOs of this seed may be missing");
                (recovery_message(&found.record), None)
            }
            Recovery::Finished { counts, .. } => {
                tracing::info!(
                    found = counts.found(),
                    recovered = counts.recovered,
                    unconfirmed = counts.unconfirmed,
                    unavailable = counts.unavailable,
                    beyond_gap_limit = counts.beyond_gap_limit,
                    "seed recovery finished"
                );
                (
                    recovery_message(&found.record),
                    Some(counts.recovered_sat + counts.unconfirmed_sat),
                )
            }
        };
        let alert = Alert {
            message,
            vtxos: found
                .not_restored
                .iter()
                .take(MAX_IDS_IN_EVENT)
                .cloned()
                .collect(),
            amount_sat,
            ..Alert::default()
        };
        if let Err(e) = self.events.alert(EventKind::SeedRecovery, alert).await {
            tracing::error!(error = %e, "cannot record the seed recovery event");
        }
    }
}

/// One sentence on what seed recovery did, for people (the event, the API, `/health`).
pub fn recovery_message(recovery: &Recovery) -> String {
    match recovery {
        Recovery::NotRun { .. } => "No seed recovery: the seed was new.".into(),
        Recovery::Failed { .. } => "Seed recovery failed before it could read the Ark \
            server's records: VTXOs of this seed may be missing. On-chain funds are \
            unaffected; restore a backup, or delete and import the wallet again once the \
            server answers."
            .into(),
        Recovery::Finished { counts, .. } if counts.not_restored() == 0 => format!(
            "Seed recovery found {} VTXO(s) and restored {} as spendable ({} sat).",
            counts.found(),
            counts.recovered,
            counts.recovered_sat
        ),
        Recovery::Finished { counts, .. } => {
            let mut missing = Vec::new();
            if counts.unavailable > 0 {
                missing.push(format!(
                    "{} the Ark server could not return",
                    counts.unavailable
                ));
            }
            if counts.unconfirmed > 0 {
                missing.push(format!(
                    "{} ({} sat) whose state the Ark server would not confirm, kept locked",
                    counts.unconfirmed, counts.unconfirmed_sat
                ));
            }
            if counts.beyond_gap_limit > 0 {
                missing.push(format!(
                    "{} beyond the key gap limit",
                    counts.beyond_gap_limit
                ));
            }
            format!(
                "Seed recovery found {} VTXO(s) but restored only {} as spendable ({} sat); \
                 not restored: {}. Funds may be missing from this wallet: restore a backup, \
                 or import again with an Ark server that supports recovery.",
                counts.found(),
                counts.recovered,
                counts.recovered_sat,
                missing.join("; ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The recovery message says what was not restored, and why, in words.
    #[test]
    fn the_recovery_message_names_what_was_not_restored() {
        let finished = |counts| Recovery::Finished { at_us: 0, counts };
        let complete = recovery_message(&finished(RecoveryCounts {
            recovered: 2,
            recovered_sat: 30_000,
            spent: 1,
            ..RecoveryCounts::default()
        }));
        assert_eq!(
            complete,
            "Seed recovery found 3 VTXO(s) and restored 2 as spendable (30000 sat)."
        );
        let incomplete = recovery_message(&finished(RecoveryCounts {
            unconfirmed: 1,
            unconfirmed_sat: 50_000,
            unavailable: 1,
            ..RecoveryCounts::default()
        }));
        assert!(
            incomplete.starts_with("Seed recovery found 2 VTXO(s) but restored only 0")
                && incomplete.contains("1 the Ark server could not return")
                && incomplete
                    .contains("1 (50000 sat) whose state the Ark server would not confirm")
                && incomplete.contains("Funds may be missing"),
            "{incomplete}"
        );
    }
}

//! System updates, second part: the install the owner asks for, its progress, and what
//! became of it.
//!
//! berthd runs unprivileged and cannot install a system. It writes a request next to the
//! bundle it checked (`update/install-request`: the build the owner was shown, and
//! whether they confirmed going back to an older one); root's
//! `berth-update-request.path` starts `install-request`
//! (`board/common/usr/lib/berth/`), which runs `berth-update install` as an SSH user
//! would and keeps RAUC's progress in `<status_dir>/status` (in `/run`: gone with the
//! restart). What became of it arrives as `update/outcome` on the data partition:
//! written by `install-request` when the install fails, and after the restart by
//! `berth-trial` (committed, or rolled back and why), also for an update installed over
//! SSH (`berth-update` leaves the same `install-pending` note before its restart).
//! berthd raises an event from each outcome once ([`spawn_outcome_watch`]) and keeps
//! it as `update/last-outcome`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use serde::Serialize;

use super::{SystemUpdate, UpdateError, field, remove, valid_build};
use crate::events::{Alert, EventHub, EventKind};

/// The request berthd writes for root's side.
pub const REQUEST: &str = "install-request";
/// An outcome not yet told (root writes it).
const OUTCOME: &str = "outcome";
/// The last outcome, once told.
const LAST_OUTCOME: &str = "last-outcome";
/// The status file in `[update] status_dir`.
const STATUS: &str = "status";
/// What root's side leaves on the data partition before the restart into the new
/// system; berth-trial removes it with the outcome.
const PENDING: &str = "install-pending";
/// A pending note older than this is not an install under way (a system from before
/// the outcome reports left it).
const PENDING_AT_MOST: Duration = Duration::from_secs(3600);
/// How often berthd looks for an outcome to tell (a `stat`, no write).
const OUTCOME_POLL: Duration = Duration::from_secs(5);
/// The most read of a file root wrote.
const MAX_REPORT: u64 = 4096;

/// Where an install the owner asked for is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum InstallState {
    /// Asked for; the system has not started it yet.
    Requested,
    /// RAUC is writing the bundle into the other slot.
    Installing,
    /// Installed: the box is restarting into the new system, tried once.
    Rebooting,
    /// The new system was started and is being tried: kept once berthd is ready on it
    /// (`berth-trial`), else the box returns to the system before.
    Trial,
}

/// An install under way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct InstallProgress {
    pub state: InstallState,
    /// RAUC's progress, 0 to 100.
    pub percent: Option<u8>,
    /// What RAUC says it is doing.
    pub step: Option<String>,
    /// The build time of the system being installed (`YYYYMMDDTHHMMSSZ`), if known.
    pub build: Option<String>,
}

/// How an install ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeResult {
    /// The new system started, berthd was ready on it, and it is kept.
    Committed,
    /// The new system was tried and the box returned to the one before.
    RolledBack,
    /// Nothing was installed (RAUC refused or failed; the system is unchanged).
    Failed,
}

/// What became of the last install the owner asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct UpdateOutcome {
    pub result: OutcomeResult,
    /// Why, in the system's words.
    pub reason: String,
    /// The build time of the system that was installed, if known.
    pub build: Option<String>,
    /// The slot the box runs now (`A` or `B`), when the outcome says.
    pub slot: Option<String>,
    /// When it was decided (Unix seconds).
    pub at: Option<u64>,
}

impl UpdateOutcome {
    fn parse(text: &str) -> Option<UpdateOutcome> {
        let result = match field(text, "result")?.as_str() {
            "committed" => OutcomeResult::Committed,
            "rolled-back" => OutcomeResult::RolledBack,
            "failed" => OutcomeResult::Failed,
            _ => return None,
        };
        let nonempty = |key| field(text, key).filter(|v| !v.is_empty());
        Some(UpdateOutcome {
            result,
            reason: nonempty("reason").unwrap_or_default(),
            build: nonempty("build").filter(|b| valid_build(b)),
            slot: nonempty("slot").filter(|s| s.len() <= 8),
            at: nonempty("at").and_then(|a| a.parse().ok()),
        })
    }

    /// The event that tells it, and its words.
    fn event(&self) -> (EventKind, String) {
        let build = self
            .build
            .as_deref()
            .map_or(String::new(), |b| format!(" (built {b})"));
        match self.result {
            OutcomeResult::Committed => (
                EventKind::SystemUpdated,
                format!("The system was updated{build}: {}", self.reason),
            ),
            OutcomeResult::RolledBack => (
                EventKind::SystemUpdateFailed,
                format!("The system update{build} was rolled back: {}", self.reason),
            ),
            OutcomeResult::Failed => (
                EventKind::SystemUpdateFailed,
                format!("The system update{build} failed: {}", self.reason),
            ),
        }
    }
}

impl SystemUpdate {
    /// Ask the system to install the kept bundle, then restart into it once. An older
    /// system is installed only with `allow_downgrade`, the owner's confirmation.
    pub async fn install(&self, allow_downgrade: bool) -> Result<InstallProgress, UpdateError> {
        if let Some(reason) = self.unavailable() {
            return Err(UpdateError::Unavailable(reason));
        }
        let bundle = self.bundle().await?.ok_or(UpdateError::NoBundle)?;
        // No upload or removal while the request is written.
        let _held = self.bundle.try_lock().map_err(|_| UpdateError::Busy)?;
        if self.progress().is_some() {
            return Err(UpdateError::InstallUnderWay);
        }
        if bundle.downgrade && !allow_downgrade {
            return Err(UpdateError::NeedsConfirmation(format!(
                "the bundle holds an older system (built {}) than the running one (built {}): \
                 installing it needs the owner's confirmation (allow_downgrade)",
                bundle.build.as_deref().unwrap_or("at an unknown time"),
                self.running_build()
                    .as_deref()
                    .unwrap_or("at an unknown time"),
            )));
        }
        let build = bundle.build.clone().unwrap_or_else(|| "unknown".into());
        let text = format!(
            "build={build}\nallow_downgrade={}\n",
            if allow_downgrade && bundle.downgrade {
                "yes"
            } else {
                "no"
            }
        );
        // Whole or not at all: root's side starts as soon as the name appears.
        let path = self.dir.join(REQUEST);
        let tmp = self.dir.join(format!("{REQUEST}.tmp"));
        tokio::fs::write(&tmp, text)
            .await
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        tokio::fs::rename(&tmp, &path)
            .await
            .with_context(|| format!("cannot rename {}", tmp.display()))?;
        Ok(InstallProgress {
            state: InstallState::Requested,
            percent: None,
            step: None,
            build: bundle.build,
        })
    }

    /// The install under way, if any: asked for and not yet taken, or as root's side
    /// last reported it.
    pub fn progress(&self) -> Option<InstallProgress> {
        if let Ok(text) = read_report(&self.dir.join(REQUEST)) {
            return Some(InstallProgress {
                state: InstallState::Requested,
                percent: None,
                step: None,
                build: field(&text, "build").filter(|b| valid_build(b)),
            });
        }
        let Ok(text) = read_report(&self.settings.status_dir.join(STATUS)) else {
            return self.on_trial();
        };
        let state = match field(&text, "state")?.as_str() {
            "installing" => InstallState::Installing,
            "rebooting" => InstallState::Rebooting,
            // "failed": told by the outcome.
            _ => return None,
        };
        Some(InstallProgress {
            state,
            percent: field(&text, "percent")
                .and_then(|p| p.parse::<u8>().ok())
                .map(|p| p.min(100)),
            step: field(&text, "step")
                .filter(|s| !s.is_empty())
                .map(|s| s.chars().take(200).collect()),
            build: field(&text, "build").filter(|b| valid_build(b)),
        })
    }

    /// Restarted into the new system, whose outcome berth-trial has not written yet.
    fn on_trial(&self) -> Option<InstallProgress> {
        let path = self.dir.join(PENDING);
        let age = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()?
            .elapsed()
            .unwrap_or_default();
        if age > PENDING_AT_MOST {
            return None;
        }
        let text = read_report(&path).ok()?;
        Some(InstallProgress {
            state: InstallState::Trial,
            percent: Some(100),
            step: Some("Trying the new system: it is kept once berthd is ready on it".into()),
            build: field(&text, "build").filter(|b| valid_build(b)),
        })
    }

    /// What became of the last install: the outcome not yet told, else the last told.
    pub fn last_outcome(&self) -> Option<UpdateOutcome> {
        [OUTCOME, LAST_OUTCOME]
            .iter()
            .find_map(|name| read_report(&self.dir.join(name)).ok())
            .and_then(|text| UpdateOutcome::parse(&text))
    }

    /// An outcome root's side wrote that has not been told yet.
    fn untold_outcome(&self) -> Option<UpdateOutcome> {
        let path = self.dir.join(OUTCOME);
        let text = read_report(&path).ok()?;
        let outcome = UpdateOutcome::parse(&text);
        if outcome.is_none() {
            tracing::warn!(path = %path.display(), "an update outcome that cannot be read: ignored");
        }
        outcome
    }

    /// The outcome was told: kept as the last one (a crash before this tells it again
    /// at the next start: twice rather than never).
    async fn outcome_told(&self) -> Result<(), UpdateError> {
        let from = self.dir.join(OUTCOME);
        let to = self.dir.join(LAST_OUTCOME);
        tokio::fs::rename(&from, &to)
            .await
            .with_context(|| format!("cannot rename {}", from.display()))?;
        Ok(())
    }

    /// Cancel a request root's side has not taken yet (a removed bundle has nothing to
    /// install).
    pub(super) async fn cancel_request(&self) -> Result<(), UpdateError> {
        remove(&self.dir.join(REQUEST)).await
    }
}

/// A small file root's side wrote, read whole (bounded: its content is not trusted
/// to be small).
fn read_report(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_REPORT)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// Tell each update outcome as an event (`system-updated`, `system-update-failed`):
/// the one left by the restart into a new system at start, and one written while
/// berthd runs (a failed install) within [`OUTCOME_POLL`]. Only where updates are
/// available.
pub fn spawn_outcome_watch(
    updates: Arc<SystemUpdate>,
    events: Arc<EventHub>,
) -> Option<tokio::task::JoinHandle<()>> {
    if updates.unavailable().is_some() {
        return None;
    }
    Some(tokio::spawn(async move {
        let mut every = tokio::time::interval(OUTCOME_POLL);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let Some(outcome) = updates.untold_outcome() else {
                continue;
            };
            let (kind, message) = outcome.event();
            if matches!(outcome.result, OutcomeResult::Committed) {
                tracing::info!(build = ?outcome.build, "{message}");
            } else {
                tracing::warn!(build = ?outcome.build, "{message}");
            }
            let alert = Alert {
                message,
                ..Alert::default()
            };
            if let Err(e) = events.alert(kind, alert).await {
                tracing::error!(error = %e, "cannot record the system update's outcome");
                continue;
            }
            if let Err(e) = updates.outcome_told().await {
                tracing::error!(error = %e, "cannot keep the system update's outcome");
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_read_as_root_writes_them() {
        let o = UpdateOutcome::parse(
            "result=rolled-back\nreason=berthd was not ready\nbuild=20261130T010000Z\nslot=A\nat=1795000000\n",
        )
        .expect("parsed");
        assert_eq!(o.result, OutcomeResult::RolledBack);
        assert_eq!(o.reason, "berthd was not ready");
        assert_eq!(o.build.as_deref(), Some("20261130T010000Z"));
        assert_eq!(o.slot.as_deref(), Some("A"));
        assert_eq!(o.at, Some(1_795_000_000));
        let (kind, message) = o.event();
        assert_eq!(kind, EventKind::SystemUpdateFailed);
        assert!(
            message.contains("rolled back: berthd was not ready"),
            "{message}"
        );

        let o = UpdateOutcome::parse("result=committed\nbuild=unknown\nreason=\n").expect("parsed");
        assert_eq!(o.build, None, "only a build time is kept");
        assert_eq!(o.event().0, EventKind::SystemUpdated);
        assert!(UpdateOutcome::parse("result=maybe\n").is_none());
        assert!(UpdateOutcome::parse("").is_none());
    }
}

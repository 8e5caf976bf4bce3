//! The disk reserve: berthd refuses new changes while the filesystem under the datadir
//! has less than [`RESERVE`] free, so that a full disk never reaches the wallet database.
//!
//! Why a reserve rather than letting writes fail when the disk fills: redb treats a
//! failed write as an I/O error and poisons its handle (`store::error`), so a write
//! that runs into a full disk stops berthd, and systemd restarts it into the same full
//! disk. Work already under way (a round bark takes part in, an exit's progress, the
//! event log, the alert below) keeps writing into the reserve: refusing it could lose
//! track of money mid-flight, and each of its writes is small. What a client or the
//! console asks to change is refused with 507 until space is freed; reads go on.
//!
//! The free space is read (statvfs, a syscall of about a microsecond on a local
//! filesystem) at each such request, so a refusal is never stale, and every
//! [`WATCH_PERIOD`] by a watch that raises a `disk-full` alert when the disk enters the
//! reserve (once until it leaves it) and logs when it leaves it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::error::ApiError;
use crate::events::EventHub;
use crate::events::vocabulary::{Alert, EventKind};

/// Free space below which changes are refused (and `/health` says `failing`).
pub const RESERVE: u64 = 64 * 1024 * 1024;
/// Free space below which `/health` says `degraded`.
pub const LOW: u64 = 1024 * 1024 * 1024;
/// How often the watch reads the free space.
pub const WATCH_PERIOD: Duration = Duration::from_secs(30);

pub use crate::fsutil::space;

/// The reserve's state, shared by the request layer and the watch.
pub struct DiskReserve {
    dir: PathBuf,
    events: Arc<EventHub>,
    /// Inside the reserve when last read (an alert was raised for this episode).
    full: AtomicBool,
}

impl DiskReserve {
    pub fn new(dir: PathBuf, events: Arc<EventHub>) -> Arc<DiskReserve> {
        Arc::new(DiskReserve {
            dir,
            events,
            full: AtomicBool::new(false),
        })
    }

    /// `Err(free bytes)` when the disk is inside the reserve. A disk whose free space
    /// cannot be read is not refused: that is not evidence of a full disk, and the
    /// write path stops berthd safely if the disk does fail.
    fn check(self: &Arc<Self>) -> Result<(), u64> {
        match space(&self.dir) {
            Ok((free, _)) if free < RESERVE => {
                self.entered(free);
                Err(free)
            }
            Ok(_) => {
                self.left();
                Ok(())
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the datadir's free space");
                Ok(())
            }
        }
    }

    /// The disk is inside the reserve: the first time since it was last outside, log
    /// it and raise `disk-full`.
    fn entered(self: &Arc<Self>, free: u64) {
        if self.full.swap(true, Ordering::SeqCst) {
            return;
        }
        let message = format!(
            "the disk that holds the datadir has {} MiB free, less than the {} MiB berthd \
             keeps in reserve: berthd refuses changes until space is freed",
            free / (1024 * 1024),
            RESERVE / (1024 * 1024)
        );
        tracing::error!(free, dir = %self.dir.display(), "{message}");
        let events = Arc::clone(&self.events);
        tokio::spawn(async move {
            let alert = Alert {
                message,
                ..Alert::default()
            };
            if let Err(e) = events.alert(EventKind::DiskFull, alert).await {
                tracing::error!(error = %e, "cannot record the disk-full event");
            }
        });
    }

    fn left(&self) {
        if self.full.swap(false, Ordering::SeqCst) {
            tracing::info!(dir = %self.dir.display(), "the disk has space again: berthd accepts changes");
        }
    }

    /// Read the free space every [`WATCH_PERIOD`], so the alert comes when the disk
    /// fills even if nobody asks for a change.
    pub fn spawn_watch(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let reserve = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(WATCH_PERIOD);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let _ = reserve.check();
            }
        })
    }
}

/// Requests that change nothing on disk, or only remove, or that make the wallet
/// readable again: a full disk must not stop them.
pub(crate) fn exempt(method: &Method, path: &str) -> bool {
    if matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::DELETE
    ) {
        return true;
    }
    matches!(
        path,
        // Computations.
        "/api/v1/message/sign" | "/api/v1/message/verify" | "/api/v1/fees/offboard"
        // A sealed wallet cannot even be read until it is unlocked.
        | "/api/v1/wallet/unlock" | "/console/unlock"
        // A ticket for the console's live updates is kept in memory.
        | "/console/live/ticket"
        // Signing out revokes the browser's device.
        | "/console/logout"
    ) || (path.starts_with("/console/devices/") && path.ends_with("/revoke"))
}

/// Route layer: refuse (507) a change while the disk is inside the reserve.
pub async fn refuse_changes_when_full(
    State(reserve): State<Arc<DiskReserve>>,
    request: Request,
    next: Next,
) -> Response {
    if exempt(request.method(), request.uri().path()) {
        return next.run(request).await;
    }
    let Err(free) = reserve.check() else {
        return next.run(request).await;
    };
    let message = format!(
        "the disk is full ({} MiB free; berthd keeps {} MiB in reserve for work under way): \
         nothing was changed; free space on the disk that holds the datadir and try again",
        free / (1024 * 1024),
        RESERVE / (1024 * 1024)
    );
    if request.uri().path().starts_with("/console") {
        // The console's pages answer refusals in plain text.
        return (StatusCode::INSUFFICIENT_STORAGE, message).into_response();
    }
    ApiError::InsufficientStorage(message).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_removals_and_computations_pass_changes_do_not() {
        assert!(exempt(&Method::GET, "/api/v1/wallet/balance"));
        assert!(exempt(&Method::DELETE, "/api/v1/devices/abc"));
        assert!(exempt(&Method::POST, "/api/v1/message/verify"));
        assert!(exempt(&Method::POST, "/api/v1/wallet/unlock"));
        assert!(exempt(&Method::POST, "/console/devices/abc/revoke"));
        assert!(!exempt(&Method::POST, "/api/v1/wallet/send"));
        assert!(!exempt(&Method::POST, "/api/v1/pair"));
        assert!(!exempt(&Method::POST, "/api/v1/backups"));
        assert!(!exempt(&Method::POST, "/console/sign-in"));
        assert!(!exempt(&Method::POST, "/console/devices/abc/rename"));
    }

    #[test]
    fn the_space_of_a_real_filesystem_is_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (free, total) = space(dir.path()).expect("statvfs");
        assert!(total > 0 && free <= total, "{free} of {total}");
    }
}

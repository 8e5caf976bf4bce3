//! Where the wallet is, as one value: [`WalletState`], published in one `watch`.
//!
//! ```text
//!            start (seed sealed, no passphrase)            unlock
//!   Closed ───────────────────────────────────▶ Locked ─────────┐
//!     │  start / create / (loader retry)                        │
//!     ├──────────────────────────▶ Opening ◀────────────────────┘
//!     │                             │   ▲ the loader tries again (backoff)
//!     │                 open failed │   │
//!     │                             ▼   │
//!     │                            Waiting
//!     │                             │
//!     │                  opened     ▼ (install)
//!     │                  ┌────── Loaded(Session)
//!     │                  │
//!     ◀──────────────────┴── delete, unload (shutdown), a create that failed: any state → Closed
//! ```
//!
//! A [`Session`] exists only in `Loaded`, and it owns everything that belongs to that
//! one open wallet: bark's handles, the wallet's background tasks, the event recorder,
//! the autopilot's memory of it, and the chain view its balance is judged against.
//! Leaving `Loaded` closes the session as a whole ([`Session::close`]), so nothing of
//! one wallet can reach the next. The backup key is published from the state too:
//! held from the moment the seed is read (an `Opening` or `Waiting` wallet is backed up),
//! dropped in `Closed` and `Locked` ([`super::Engine::set_state`]).
//!
//! The transitions are in `lifecycle` (start, unlock, the loader, install, delete,
//! unload) and `lifecycle/create.rs`; each one is a compare-and-set on this value
//! ([`super::Engine::advance`]), so a transition that lost a race (a loader whose
//! wallet was deleted meanwhile) changes nothing.

use std::sync::Arc;
use std::time::Duration;

use bitcoin::bip32::Fingerprint;
use tokio::task::JoinHandle;

use super::LoadedWallet;
use crate::store::ChainView;

/// Where the wallet is.
#[derive(Clone, Default)]
pub enum WalletState {
    /// No wallet is open: none exists, berthd has not started it yet, it was unloaded
    /// at shutdown, or its datadir holds no seed. Which of these is the store's to say.
    #[default]
    Closed,
    /// The wallet's seed is sealed with a passphrase nobody gave since start.
    Locked,
    /// bark is opening the wallet (at start, on create, a retry of the loader).
    Opening(Fingerprint),
    /// The last open failed (most often: the chain source, or for an import the Ark
    /// server, does not answer); the loader tries again.
    Waiting(Fingerprint),
    /// bark has the wallet open.
    Loaded(Arc<Session>),
}

impl WalletState {
    /// The wallet this state is about, when its seed has been read.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        match self {
            WalletState::Closed | WalletState::Locked => None,
            WalletState::Opening(f) | WalletState::Waiting(f) => Some(*f),
            WalletState::Loaded(session) => Some(session.fingerprint),
        }
    }

    /// The state's name, for logs and tests.
    pub fn name(&self) -> &'static str {
        match self {
            WalletState::Closed => "closed",
            WalletState::Locked => "locked",
            WalletState::Opening(_) => "opening",
            WalletState::Waiting(_) => "waiting",
            WalletState::Loaded(_) => "loaded",
        }
    }

    pub(super) fn session(&self) -> Option<&Arc<Session>> {
        match self {
            WalletState::Loaded(session) => Some(session),
            _ => None,
        }
    }
}

impl std::fmt::Debug for WalletState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.fingerprint() {
            Some(fingerprint) => write!(f, "{}({fingerprint})", self.name()),
            None => f.write_str(self.name()),
        }
    }
}

/// One open wallet and everything that lives exactly as long as it is open.
pub struct Session {
    pub(super) fingerprint: Fingerprint,
    /// bark's handles and the autopilot's memory of this wallet (cheap to clone: what
    /// an operation takes, so that no lock is held while it runs).
    pub(super) wallet: LoadedWallet,
    /// The chain view the balance is judged against, as recorded in the store (`reads`);
    /// read from the store on first use.
    pub(super) chain_view: tokio::sync::Mutex<Option<ChainView>>,
    /// The wallet's background tasks (`wallet_tasks`), in place of bark's daemon.
    tasks: std::sync::Mutex<Vec<JoinHandle<()>>>,
    /// The daemon's table of supervised tasks, where those tasks show their state
    /// (forgotten when the session closes).
    supervisor: Arc<super::supervisor::Tasks>,
    /// The task recording the wallet's notifications, and its stop switch.
    recorder: std::sync::Mutex<Option<Recorder>>,
}

pub(super) struct Recorder {
    pub(super) stop: tokio::sync::watch::Sender<bool>,
    pub(super) task: JoinHandle<()>,
}

/// How long closing a session waits for the event recorder to write what bark sent.
const RECORDER_DRAIN: Duration = Duration::from_secs(5);

impl Session {
    /// The session of an opened wallet, owning its recorder and its tasks (started, in
    /// `supervisor`, by `wallet_tasks`).
    pub(super) fn new(
        fingerprint: Fingerprint,
        wallet: LoadedWallet,
        recorder: Option<Recorder>,
        tasks: Vec<JoinHandle<()>>,
        supervisor: Arc<super::supervisor::Tasks>,
    ) -> Session {
        Session {
            fingerprint,
            wallet,
            chain_view: tokio::sync::Mutex::new(None),
            tasks: std::sync::Mutex::new(tasks),
            supervisor,
            recorder: std::sync::Mutex::new(recorder),
        }
    }

    /// Stop everything the session runs: its tasks at once (and their state in the
    /// supervisor's table is forgotten), then the event recorder, after it recorded
    /// what bark sent until then. Idempotent.
    pub(super) async fn close(&self) {
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        tasks.iter().for_each(JoinHandle::abort);
        super::wallet_tasks::forget(&self.supervisor);
        let recorder = self
            .recorder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(Recorder { stop, task }) = recorder {
            stop.send_replace(true);
            if tokio::time::timeout(RECORDER_DRAIN, task).await.is_err() {
                tracing::warn!("the event recorder did not finish in time");
            }
        }
    }
}

impl Drop for Session {
    /// A session dropped without `close` (a panic on the way) still stops its tasks:
    /// none may go on working on a wallet that is no longer the engine's. (Their state
    /// in the supervisor's table is left: a later session's tasks share their names.)
    fn drop(&mut self) {
        for task in self
            .tasks
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            task.abort();
        }
        if let Some(recorder) = self
            .recorder
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            recorder.stop.send_replace(true);
        }
    }
}

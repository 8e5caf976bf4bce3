//! Berth's daemon for a loaded wallet: the work bark's `Wallet::start_daemon` would do,
//! run as supervised tasks instead (ADR 0001), so that each one backs off when it fails
//! and shows its state in `/health`. bark's own daemon is never started.
//!
//! | task | what it does | when |
//! |---|---|---|
//! | `onchain-sync` | fee-rate estimates, the on-chain wallet | each new tip, at least every `daemon_sync_interval_secs` |
//! | `ark-sync` | pending boards, offboards, rounds, Lightning sends and receives (the first pass is bark's full `sync`: mailbox, Lightning, force-exited VTXOs) | the same |
//! | `rounds` | follows the Ark server's round events: advances the wallet's round participations, and runs bark's maintenance refresh at each new round (`round_events`) | a stream |
//! | `mailbox` | receives arkoor payments and the server's other mailbox messages | a stream |
//! | `exit-driver` | advances exits (`exits.rs`) | each new tip |
//!
//! Pending Lightning payments are driven on every pass, unlike bark's daemon (which
//! drives them from mailbox messages and its start-up sync only): a claim the server
//! refused for a moment (its VTXO pool empty) or a send whose step failed is retried
//! within a pass, not left until the next restart.
//!
//! The two syncs are separate so that an unreachable Ark server does not hold up the
//! on-chain wallet behind its backoff. A stream task's step lasts as long as its stream;
//! a stream that ends after delivering something is healthy (servers and proxies close
//! idle streams) and is resubscribed after a second, one that delivers nothing counts as
//! a failure and is retried with backoff.
//!
//! With `daemon_manual_sync = true` in the wallet's `config.toml` none of these run, as
//! none of bark's daemon loops but its server heartbeat do (the autopilot's probe is
//! that heartbeat, and it obeys the same switch): nothing syncs, refreshes or advances
//! exits until a client asks.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use super::{Engine, LoadedWallet};

/// The pause after a stream that ended normally, before subscribing again.
const RESUBSCRIBE_PAUSE: Duration = Duration::from_secs(1);

/// The names of the tasks `start` spawns, for `stop` to forget their state.
pub(super) const NAMES: [&str; 5] = [
    "onchain-sync",
    "ark-sync",
    "rounds",
    "mailbox",
    "exit-driver",
];

impl Engine {
    /// Start every task that keeps `loaded` in step with the chain and the Ark server;
    /// their handles, for the wallet's session to own (and stop when it closes).
    pub(super) async fn start_wallet_tasks(
        self: &Arc<Self>,
        loaded: LoadedWallet,
    ) -> Vec<JoinHandle<()>> {
        if loaded.wallet.config().daemon_manual_sync {
            tracing::info!(
                "daemon_manual_sync is set in config.toml: no background sync, refresh or \
                 exit progression (as barkd); clients sync and progress through the API"
            );
            return Vec::new();
        }
        let interval = Duration::from_secs(loaded.wallet.config().daemon_sync_interval_secs.max(1));
        let [onchain_tip, ark_tip] = TipWait::start(&loaded, interval).await;
        vec![
            self.spawn_onchain_sync(loaded.clone(), onchain_tip),
            self.spawn_ark_sync(loaded.clone(), ark_tip),
            self.spawn_rounds(loaded.clone()),
            self.spawn_mailbox(loaded.clone()),
            self.spawn_exit_driver(loaded),
        ]
    }

    fn spawn_onchain_sync(&self, loaded: LoadedWallet, tip: TipWait) -> JoinHandle<()> {
        let step = move || {
            let loaded = loaded.clone();
            async move {
                let wallet = &loaded.wallet;
                let fees = wallet
                    .chain()
                    .update_fee_rates(wallet.config().fallback_fee_rate)
                    .await
                    .map_err(|e| format!("updating fee-rate estimates: {e:#}"));
                let onchain = wallet
                    .sync_onchain()
                    .await
                    .map_err(|e| format!("syncing the on-chain wallet: {e:#}"));
                failures([fees, onchain])
            }
        };
        self.tasks
            .spawn("onchain-sync", step, move || tip.clone().next_or_timeout())
    }

    fn spawn_ark_sync(&self, loaded: LoadedWallet, tip: TipWait) -> JoinHandle<()> {
        let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let step = move || {
            let loaded = loaded.clone();
            let first = Arc::clone(&first);
            async move {
                let wallet = &loaded.wallet;
                if first.swap(false, std::sync::atomic::Ordering::SeqCst) {
                    // What bark's daemon does once at start: catch up with everything
                    // that happened while the wallet was not running. It logs its own
                    // errors; the passes below report theirs.
                    wallet.sync().await;
                }
                let boards = wallet
                    .sync_pending_boards()
                    .await
                    .map_err(|e| format!("syncing pending boards: {e:#}"));
                let offboards = wallet
                    .sync_pending_offboards()
                    .await
                    .map_err(|e| format!("syncing pending offboards: {e:#}"));
                let rounds = wallet
                    .sync_pending_rounds()
                    .await
                    .map(drop)
                    .map_err(|e| format!("syncing pending rounds: {e:#}"));
                let sends = wallet
                    .sync_pending_lightning_send_vtxos()
                    .await
                    .map_err(|e| format!("syncing pending Lightning payments: {e:#}"));
                // Each receive is driven one step; bark logs a step that fails.
                let receives = wallet
                    .sync_pending_lightning_receives()
                    .await
                    .map_err(|e| format!("syncing pending Lightning receives: {e:#}"));
                failures([boards, offboards, rounds, sends, receives])
            }
        };
        self.tasks
            .spawn("ark-sync", step, move || tip.clone().next_or_timeout())
    }

    fn spawn_rounds(self: &Arc<Self>, loaded: LoadedWallet) -> JoinHandle<()> {
        let engine = Arc::clone(self);
        let step = move || {
            let loaded = loaded.clone();
            let engine = Arc::clone(&engine);
            async move { engine.follow_rounds(&loaded).await }
        };
        self.tasks
            .spawn("rounds", step, || tokio::time::sleep(RESUBSCRIBE_PAUSE))
    }

    fn spawn_mailbox(&self, loaded: LoadedWallet) -> JoinHandle<()> {
        let step = move || {
            let loaded = loaded.clone();
            async move {
                // Never cancelled: stopping aborts the step. bark returns an error
                // after several reconnects without a message, so an unreachable
                // server shows as this task failing.
                let never = tokio_util::sync::CancellationToken::new();
                loaded
                    .wallet
                    .subscribe_process_mailbox_messages(None, never)
                    .await
                    .map_err(|e| format!("following the server mailbox: {e:#}"))
            }
        };
        self.tasks
            .spawn("mailbox", step, || tokio::time::sleep(RESUBSCRIBE_PAUSE))
    }
}

/// Forget the state of a closed session's tasks (its session stopped them).
pub(super) fn forget(tasks: &super::supervisor::Tasks) {
    for name in NAMES {
        tasks.remove(name);
    }
}

/// `Ok` when every part succeeded, else every failure in one message.
fn failures<const N: usize>(parts: [Result<(), String>; N]) -> Result<(), String> {
    let errors: Vec<String> = parts.into_iter().filter_map(Result::err).collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Waits for the next tip bark's tip watcher reports (by ZMQ when configured, else by
/// polling), or the sync interval, whichever comes first. Without a watcher (it could
/// not start, or stopped) it waits for the interval alone.
#[derive(Clone)]
struct TipWait {
    interval: Duration,
    next_tip: Arc<tokio::sync::Mutex<Option<NextTip>>>,
}

/// bark's tip subscription, behind a future so the type stays bark's business.
type NextTip = Box<dyn FnMut() -> futures_util::future::BoxFuture<'static, bool> + Send>;

impl TipWait {
    /// One waiter per sync task: each has its own subscription, so that one task
    /// seeing a tip does not hide it from the other.
    async fn start(loaded: &LoadedWallet, interval: Duration) -> [TipWait; 2] {
        let watcher = match loaded.wallet.chain().tip_watcher(interval).await {
            Ok(watcher) => Some(watcher),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"),
                    "no chain tip watcher: syncing on the interval only");
                None
            }
        };
        let waiter = || {
            let next_tip = watcher.as_ref().map(|watcher| {
                // The subscription (which keeps bark's watcher running) lives here.
                let subscription = Arc::new(tokio::sync::Mutex::new(watcher.subscribe()));
                Box::new(move || {
                    let subscription = Arc::clone(&subscription);
                    Box::pin(async move { subscription.lock().await.changed().await.is_ok() })
                        as futures_util::future::BoxFuture<'static, bool>
                }) as NextTip
            });
            TipWait {
                interval,
                next_tip: Arc::new(tokio::sync::Mutex::new(next_tip)),
            }
        };
        [waiter(), waiter()]
    }

    async fn next_or_timeout(self) {
        let mut next_tip = self.next_tip.lock().await;
        let Some(next) = next_tip.as_mut() else {
            drop(next_tip);
            return tokio::time::sleep(self.interval).await;
        };
        let changed = next();
        tokio::select! {
            alive = changed => if !alive {
                tracing::warn!("the chain tip watcher stopped: syncing on the interval only");
                *next_tip = None;
            },
            () = tokio::time::sleep(self.interval) => {}
        }
    }
}

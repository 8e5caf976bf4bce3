//! The engine: the one owner of the wallet. Handlers ask it; it asks the store and bark.
//!
//! Where the wallet is, is one value ([`WalletState`], `session.rs`): closed, locked,
//! opening, waiting for its chain source, or loaded — holding the [`session`] that owns
//! everything of the open wallet. The transitions ([`lifecycle`]: create, start, unlock,
//! the loader, delete, unload) run without restarts. `create` answers once the wallet
//! is loaded, as barkd's does. Loading needs the chain source (and creating an imported
//! wallet its Ark server, for seed recovery), so a wallet created with `force` while
//! they are unreachable stays waiting (recorded in the store) and a background task
//! keeps trying to load it; a request that needs the wallet meanwhile waits for an open
//! under way (bounded), else gets a clear "not loaded yet".
//!
//! Backups ([`backup`]): the format, writing, verifying and restoring them, and the
//! daemon's schedule; the engine holds the backup key from the wallet's seed.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bitcoin::Network;
use bitcoin::bip32::Fingerprint;
use tokio::sync::watch;
use tokio::sync::{Mutex, RwLock};

mod arkoor_receives;
pub mod autopilot;
pub mod backup;
mod boards;
mod exits;
mod fees;
pub mod labels;
mod lifecycle;
pub mod lightning;
pub mod lnurl;
mod offboards;
mod offchain;
mod onchain;
mod reads;
mod recovery;
mod round_events;
mod rounds;
mod session;
pub mod spending;
pub mod supervisor;
mod wallet_tasks;

pub use exits::{ExitList, ExitProgress};
pub use lifecycle::{CreateParts, CreateRefused, LOAD_WAIT, new_mnemonic};
pub use offboards::{OffboardOutcome, PendingOffboard};
pub use offchain::ArkPayment;
pub use reads::Freshness;
pub use recovery::recovery_message;
pub use session::WalletState;

use crate::events::EventHub;
use crate::store::{Store, StoreError, WalletRecord};

/// What can go wrong below the API, for the API to translate.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("no wallet: create one with POST /api/v1/wallet/create")]
    NoWallet,
    #[error("a wallet already exists (fingerprint {0})")]
    WalletExists(Fingerprint),
    /// The wallet exists but bark could not open it yet (its chain source has not
    /// answered since start or create).
    #[error("the wallet is not loaded yet: berthd keeps trying to reach its chain source")]
    NotLoaded,
    /// The seed is sealed with a passphrase that berthd was not given at start: the
    /// wallet waits for an admin to unlock it.
    #[error(
        "the wallet is locked: its seed is sealed with a passphrase; unlock it in the \
         console or with POST /api/v1/wallet/unlock"
    )]
    Locked,
    /// The request names VTXOs the wallet does not have.
    #[error("the wallet has no VTXO {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    UnknownVtxos(Vec<ark::VtxoId>),
    /// Well-formed, but the wallet's state forbids it (a VTXO not spendable, nothing
    /// to refresh).
    #[error("{0}")]
    WrongState(String),
    /// The named VTXO has no exit.
    #[error("no exit for VTXO {0}")]
    NoExit(ark::VtxoId),
    /// The wallet does not hold enough funds for the request.
    #[error("{0}")]
    InsufficientFunds(String),
    /// The datadir holds something a new wallet must not clobber.
    #[error("{0}")]
    DatadirConflict(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{what} is unreachable: {reason}")]
    Unreachable { what: &'static str, reason: String },
    /// Cannot be done right now, for a reason the client may read in full (unlike
    /// `Unreachable`, whose reason is for the log).
    #[error("{0}")]
    Unavailable(String),
    /// The caller has as much under way as it may (outbound fetches); try again soon.
    #[error("{0}")]
    Busy(String),
    /// A spending rule of the caller's device refuses the payment (`spending`); the
    /// message names the rule and the figures.
    #[error("{0}")]
    Refused(String),
    /// Over a limit of the caller's device whose rules say the owner approves such
    /// payments: the transport holds it (`spending::approvals`), or refuses it.
    #[error("{}", .0.reason)]
    NeedsApproval(Box<spending::approvals::Asked>),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The seed cannot be stored or unlocked (a key source is missing or wrong).
    #[error("the wallet's seed: {0}")]
    Seed(#[from] crate::keys::KeyError),
    #[error("{context}: {source:#}")]
    Internal {
        context: &'static str,
        source: anyhow::Error,
    },
}

impl EngineError {
    /// A bark failure with no more specific meaning: ours (500), unless it is the
    /// store's or bark could not reach the Ark server. Any bark call may need the
    /// server (deriving an address does until the server's keys are stored), so every
    /// mapping of a bark error ends here and none can turn an absent server into a 500.
    fn internal(context: &'static str) -> impl FnOnce(anyhow::Error) -> EngineError {
        move |source| {
            if ark_server_unreachable(&source) {
                return EngineError::Unreachable {
                    what: "the Ark server",
                    reason: format!("{context}: {source:#}"),
                };
            }
            match source.downcast::<StoreError>() {
                Ok(store) => EngineError::Store(store),
                Err(source) => EngineError::Internal { context, source },
            }
        }
    }

    /// `Some` 503 when the Ark server refused `context` for coins it still holds
    /// ([`ark_server_holds_vtxos`]): the client is told what happened and to retry; the
    /// server's words stay in the log. For every payment's classification (Ark,
    /// on-chain out of Ark, Lightning).
    pub(crate) fn held_by_server(context: &str, error: &anyhow::Error) -> Option<EngineError> {
        ark_server_holds_vtxos(error).then(|| {
            EngineError::Unavailable(format!(
                "{context}: the Ark server still holds some of this wallet's coins for a \
                 round or a payment that has not ended (after a restart it lets them go \
                 when that round's time runs out); nothing was spent: try again in a few \
                 seconds"
            ))
        })
    }

    /// For bark operations that build transactions: tell the client's mistakes and
    /// the wallet's state (too little money, an amount below dust or below the fee)
    /// from genuine failures. bark returns `anyhow` errors; the typed causes are found
    /// in their chain.
    fn classify(context: &'static str) -> impl FnOnce(anyhow::Error) -> EngineError {
        use bdk_wallet::error::CreateTxError;
        move |source| {
            for cause in source.chain() {
                if let Some(err) = cause.downcast_ref::<CreateTxError>() {
                    return match err {
                        CreateTxError::CoinSelection(e) => {
                            EngineError::InsufficientFunds(format!("{context}: {e}"))
                        }
                        CreateTxError::OutputBelowDustLimit(_) => EngineError::InvalidRequest(
                            format!("{context}: the amount is below the dust limit"),
                        ),
                        _ => EngineError::internal(context)(source),
                    };
                }
                if let Some(err) = cause.downcast_ref::<ark::fees::FeeValidationError>() {
                    return EngineError::InvalidRequest(format!("{context}: {err}"));
                }
            }
            if let Some(held) = EngineError::held_by_server(context, &source) {
                return held;
            }
            // VTXO selection reports a shortfall as text only.
            if format!("{source:#}").contains("Insufficient money available") {
                return EngineError::InsufficientFunds(format!(
                    "{context}: not enough spendable off-chain funds"
                ));
            }
            EngineError::internal(context)(source)
        }
    }
}

/// Whether the Ark server refused to cosign because a VTXO spent is in use on its side
/// ("in flux": in a round or another payment not ended). Seen after a restart that cut
/// off a round: bark abandons its attempt at once and counts the VTXOs spendable again,
/// the server only when the round's signing times out. Nothing was spent, and the same
/// request succeeds once the server lets go. The server says it with a generic code
/// (invalid argument), so its message is read too.
fn ark_server_holds_vtxos(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.downcast_ref::<tonic::Status>().is_some_and(|status| {
            status.code() == tonic::Code::InvalidArgument
                && status.message().contains("already locked")
        })
    })
}

/// Whether bark failed because the Ark server cannot be used: bark could not connect
/// to it (`ConnectError`, under bark's "You should be connected to Ark server"
/// context; every variant means the wallet has no working server connection: refused,
/// a failed handshake, a mismatched version or network), or a call on an established
/// connection found it gone. Read by type: bark's context text is not an interface.
fn ark_server_unreachable(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<server_rpc::client::ConnectError>()
            .is_some()
            || cause.downcast_ref::<tonic::Status>().is_some_and(|status| {
                matches!(
                    status.code(),
                    tonic::Code::Unavailable | tonic::Code::DeadlineExceeded
                )
            })
    })
}

/// Where a new wallet's bark configuration comes from.
#[derive(Debug, Clone)]
pub enum WalletConfig {
    /// The datadir's existing `config.toml` (barkd's file).
    Existing,
    /// Write a new `config.toml` with these settings.
    New {
        ark_server: String,
        chain: ChainSource,
    },
}

#[derive(Debug, Clone)]
pub enum ChainSource {
    Esplora { url: String },
    Bitcoind { url: String, auth: BitcoindAuth },
}

#[derive(Clone)]
pub enum BitcoindAuth {
    Cookie(PathBuf),
    UserPass { user: String, pass: String },
}

impl std::fmt::Debug for BitcoindAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BitcoindAuth::Cookie(path) => f.debug_tuple("Cookie").field(path).finish(),
            BitcoindAuth::UserPass { user, .. } => f
                .debug_struct("UserPass")
                .field("user", user)
                .field("pass", &"<redacted>")
                .finish(),
        }
    }
}

/// A request to create (or import) a wallet, validated by the API. Its `Debug` leaves
/// the seeds out.
pub struct CreateWallet {
    pub network: Network,
    /// Import this mnemonic; `None` generates a new one (or takes `new_seed`).
    pub mnemonic: Option<bark::bip39::Mnemonic>,
    /// A new seed the caller generated (`new_mnemonic`) and showed its owner first (the
    /// console's create, which shows the phrase once before the wallet exists): a new
    /// wallet, not an import. Ignored with `mnemonic`.
    pub new_seed: Option<bark::bip39::Mnemonic>,
    pub birthday_height: Option<u32>,
    pub config: WalletConfig,
    /// Create even when the Ark server or the chain source is unreachable, or the
    /// datadir holds files berthd does not know (they are left untouched).
    pub force: bool,
    /// Also seal the seed with this passphrase (berthd then starts locked until it is
    /// given again: `Engine::unlock`).
    pub seed_passphrase: Option<zeroize::Zeroizing<String>>,
}

impl std::fmt::Debug for CreateWallet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateWallet")
            .field("network", &self.network)
            .field("mnemonic", &self.mnemonic.as_ref().map(|_| "<redacted>"))
            .field("birthday_height", &self.birthday_height)
            .field("config", &self.config)
            .field("force", &self.force)
            .field("new_seed", &self.new_seed.as_ref().map(|_| "<redacted>"))
            .field(
                "seed_passphrase",
                &self.seed_passphrase.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// A wallet open in bark: the handles an operation takes from the [`session::Session`].
/// bark holds the on-chain wallet as a trait object; the on-chain endpoints need the
/// concrete BDK wallet, so the engine keeps that handle too. Cheap to clone (all are
/// shared handles), so no lock is held while an operation runs.
#[derive(Clone)]
pub struct LoadedWallet {
    pub wallet: bark::Wallet,
    pub onchain: Arc<RwLock<bark::onchain::OnchainWallet>>,
    /// The autopilot of this wallet: what it learnt (the server's terms, alerts raised,
    /// failed refreshes) goes with the wallet when it is closed.
    pub(crate) autopilot: Arc<autopilot::Autopilot>,
}

pub struct Engine {
    store: Store,
    /// Where the datadir's files are.
    layout: crate::datadir::Layout,
    /// The wallet's seed: sealed, or barkd's plaintext file (`keys`).
    seeds: crate::keys::Seeds,
    events: Arc<EventHub>,
    /// Serialises create, unlock, install and delete: of two concurrent creates exactly
    /// one wins, and a load cannot undo a delete.
    lifecycle: Mutex<()>,
    /// Where the wallet is (`session`): the one value every transition changes.
    state: watch::Sender<WalletState>,
    /// How many times the wallet was closed: a loader started before the last close is
    /// stale (`lifecycle`), even for the same seed created again.
    closes: Arc<std::sync::atomic::AtomicU64>,
    /// One exit progress or claim at a time (the driver, the API).
    exit_lock: Mutex<()>,
    /// The watchdog's and exit reserve's settings; each open wallet gets its own
    /// autopilot with them (`LoadedWallet::autopilot`).
    autopilot_policy: autopilot::Policy,
    /// Berth's supervised background tasks and their state.
    tasks: Arc<supervisor::Tasks>,
    /// The wallet's backup key, derived from its seed when the wallet is created or
    /// berthd starts with one (`engine::backup::service`), and dropped when the state
    /// leaves the wallet (`Engine::advance`).
    backup_key: Arc<watch::Sender<crate::engine::backup::HeldKey>>,
    /// The owner's household settings: how long approvals wait, new devices' rules.
    spending_policy: spending::Policy,
    /// Told when an approval is held, so the task that expires them (`api::approvals`)
    /// sleeps until the right time whichever way the payment came.
    approval_held: tokio::sync::Notify,
}

impl Engine {
    pub fn new(
        store: Store,
        layout: crate::datadir::Layout,
        seeds: crate::keys::Seeds,
        events: Arc<EventHub>,
        policy: autopilot::Policy,
        spending_policy: spending::Policy,
    ) -> Arc<Self> {
        Arc::new(Engine {
            store,
            layout,
            seeds,
            events,
            autopilot_policy: policy,
            tasks: Arc::new(supervisor::Tasks::default()),
            lifecycle: Mutex::new(()),
            state: watch::Sender::new(WalletState::Closed),
            closes: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            exit_lock: Mutex::new(()),
            backup_key: Arc::new(watch::Sender::new(Default::default())),
            spending_policy,
            approval_held: tokio::sync::Notify::new(),
        })
    }

    /// The wallet's backup key as it changes: derived when a wallet is created or
    /// berthd starts with one, cleared when it is deleted.
    pub fn backup_key(&self) -> tokio::sync::watch::Receiver<crate::engine::backup::HeldKey> {
        self.backup_key.subscribe()
    }

    /// Derive and hold the backup key of the wallet `fingerprint` whose seed is
    /// `mnemonic`, on the blocking pool: the caller goes on at once (a start serves
    /// without waiting for it), and backups wait for the key.
    fn hold_backup_key(&self, fingerprint: Fingerprint, mnemonic: &bark::bip39::Mnemonic) {
        use crate::engine::backup::HeldKey;
        self.backup_key.send_replace(HeldKey::Deriving(fingerprint));
        let (held, mnemonic) = (Arc::clone(&self.backup_key), mnemonic.clone());
        tokio::task::spawn_blocking(move || {
            let key = Arc::new(crate::engine::backup::BackupKey::from_mnemonic(&mnemonic));
            HeldKey::finish(&held, fingerprint, key);
        });
    }

    /// Why the wallet database stopped (a storage failure is fatal), if it did.
    pub fn store_failure(&self) -> Option<String> {
        self.store.failure()
    }

    /// The idempotency records, for the API's idempotency layer.
    pub fn idempotency_keys(&self) -> crate::store::idempotency::IdempotencyKeys {
        crate::store::idempotency::IdempotencyKeys::new(self.store.clone())
    }

    /// The datadir (its filesystem's free space is in `/health`).
    pub fn datadir(&self) -> &std::path::Path {
        self.layout.root()
    }

    /// The durable event log.
    pub fn events(&self) -> &Arc<EventHub> {
        &self.events
    }

    /// What the open wallet's autopilot last saw (nothing while no wallet is open).
    pub fn autopilot_status(&self) -> autopilot::Status {
        self.loaded_now()
            .map(|loaded| loaded.autopilot.status())
            .unwrap_or_default()
    }

    /// The supervised background tasks' state.
    pub fn tasks(&self) -> Vec<(&'static str, supervisor::TaskStatus)> {
        self.tasks.snapshot()
    }

    /// Start the autopilot: a check every `[watchdog] check_interval_secs`, and as soon
    /// as bark's chain view sees a new block. Runs until the handle is aborted (also
    /// while no wallet is loaded: it then records just that).
    pub fn spawn_autopilot(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let engine = Arc::clone(self);
        let waiter = Arc::clone(self);
        self.tasks.spawn(
            "autopilot",
            move || {
                let engine = Arc::clone(&engine);
                async move { engine.check_autopilot().await.map_err(|e| e.to_string()) }
            },
            move || {
                let engine = Arc::clone(&waiter);
                async move { engine.until_next_check().await }
            },
        )
    }

    /// One autopilot pass over the open wallet; nothing while none is open (an open
    /// under way is waited for, as for any request).
    async fn check_autopilot(&self) -> Result<(), EngineError> {
        let loaded = match self.loaded().await {
            Ok(loaded) => loaded,
            Err(EngineError::NoWallet | EngineError::NotLoaded | EngineError::Locked) => {
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        loaded.autopilot.check(self, &loaded).await
    }

    /// Wait for the check interval, or less when bark sees a new block (its cached
    /// view of the tip: no request to the chain source) or a wallet is loaded or
    /// unloaded.
    async fn until_next_check(&self) {
        let deadline = tokio::time::Instant::now() + self.autopilot_policy.check_interval;
        let seen = |loaded: Option<LoadedWallet>| async move {
            match loaded {
                Some(l) => (true, l.wallet.chain().last_observed_tip().await),
                None => (false, None),
            }
        };
        let start = seen(self.loaded_now()).await;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep_until(
                deadline.min(tokio::time::Instant::now() + Duration::from_secs(2)),
            )
            .await;
            if seen(self.loaded_now()).await != start {
                return;
            }
        }
    }

    /// The wallet's fingerprint, or `None` when no wallet exists.
    pub async fn wallet_fingerprint(&self) -> Result<Option<Fingerprint>, EngineError> {
        Ok(self.wallet_record().await?.map(|w| w.fingerprint))
    }

    /// The wallet as the store knows it (also while bark has not created or opened it
    /// yet), with what its seed recovery found; `None` when no wallet exists.
    pub async fn wallet_record(&self) -> Result<Option<WalletRecord>, EngineError> {
        Ok(self.store.wallet_record().await?)
    }

    /// The wallet's fingerprint, or [`EngineError::NoWallet`].
    pub async fn require_wallet(&self) -> Result<Fingerprint, EngineError> {
        self.wallet_fingerprint()
            .await?
            .ok_or(EngineError::NoWallet)
    }

    /// A bitcoin address, which must be for the wallet's network. Needs the wallet but
    /// not its chain source: a client's mistake is a 400 even while the wallet waits to
    /// load.
    pub async fn address(&self, text: &str) -> Result<bitcoin::Address, EngineError> {
        parse_address(text, self.network().await?)
    }

    /// The wallet's network, from the store (no need for the wallet to be loaded).
    pub async fn network(&self) -> Result<Network, EngineError> {
        Ok(self
            .wallet_record()
            .await?
            .ok_or(EngineError::NoWallet)?
            .network)
    }

    /// Whether the loaded wallet currently has a connection to its Ark server.
    pub async fn connected(&self) -> Result<bool, EngineError> {
        match self.loaded().await {
            Ok(loaded) => Ok(loaded.wallet.ark_info().await.ok().flatten().is_some()),
            Err(EngineError::NotLoaded | EngineError::Locked) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The mnemonic phrase, unsealed (or from barkd's plaintext file).
    pub async fn mnemonic(&self) -> Result<zeroize::Zeroizing<String>, EngineError> {
        self.require_wallet().await?;
        if self.is_locked() {
            return Err(EngineError::Locked);
        }
        self.read_seed().await
    }

    /// The seed phrase, on a blocking thread (Argon2id, I²C, files).
    async fn read_seed(&self) -> Result<zeroize::Zeroizing<String>, EngineError> {
        let seeds = self.seeds.clone();
        Ok(tokio::task::spawn_blocking(move || seeds.read())
            .await
            .map_err(|e| EngineError::Internal {
                context: "reading the seed",
                source: e.into(),
            })??)
    }

    /// Whether the wallet waits for its seed's passphrase.
    pub fn is_locked(&self) -> bool {
        matches!(*self.state.borrow(), WalletState::Locked)
    }

    /// Whether a wallet is loaded (for status and tests).
    pub fn is_loaded(&self) -> bool {
        matches!(*self.state.borrow(), WalletState::Loaded(_))
    }

    /// Where the wallet is now, and as it changes.
    pub fn wallet_state(&self) -> watch::Receiver<WalletState> {
        self.state.subscribe()
    }

    /// The open wallet's handles, without waiting for an open under way.
    pub(crate) fn loaded_now(&self) -> Option<LoadedWallet> {
        self.state.borrow().session().map(|s| s.wallet.clone())
    }

    /// Move the wallet to `to`, if where it is now is one that `from` accepts; whether
    /// it moved. Leaving a wallet (for `Closed` or `Locked`) drops its backup key;
    /// leaving `Loaded` closes the session as a whole. Each transition goes through
    /// here, so one that lost a race (a loader whose wallet was deleted meanwhile)
    /// changes nothing.
    async fn advance(&self, from: impl FnOnce(&WalletState) -> bool, to: WalletState) -> bool {
        let drops_key = matches!(to, WalletState::Closed | WalletState::Locked);
        let closes = matches!(to, WalletState::Closed);
        let mut left = None;
        let moved = self.state.send_if_modified(|now| {
            if !from(now) {
                return false;
            }
            tracing::debug!(from = ?now, to = ?to, "wallet state");
            left = std::mem::replace(now, to).session().cloned();
            true
        });
        if moved && drops_key {
            self.backup_key
                .send_replace(crate::engine::backup::HeldKey::None);
        }
        if moved && closes {
            self.closes
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        if let Some(session) = left {
            session.close().await;
        }
        moved
    }
}

/// A bitcoin address, which must be for `network`.
pub(crate) fn parse_address(
    text: &str,
    network: bitcoin::Network,
) -> Result<bitcoin::Address, EngineError> {
    text.trim()
        .parse::<bitcoin::Address<bitcoin::address::NetworkUnchecked>>()
        .map_err(|_| EngineError::InvalidRequest(format!("{text:?} is not a bitcoin address")))?
        .require_network(network)
        .map_err(|_| {
            EngineError::InvalidRequest(format!("{text:?} is not an address for {network}"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// bark's error for a cosign the Ark server refused, as bark builds it.
    fn refused_cosign(message: &str) -> anyhow::Error {
        anyhow::Error::new(tonic::Status::invalid_argument(message))
            .context("error requesting arkoor cosign")
    }

    #[test]
    fn coins_the_server_still_holds_are_a_retry_not_a_failure_of_ours() {
        let held = refused_cosign(
            "bad user input: some VTXO is already locked by another process: \
             1eabb9e8426390fd1252f4d52b44b312af0af94e795821d83b30de6fdb53c64a:0",
        );
        assert!(ark_server_holds_vtxos(&held));
        match EngineError::classify("paying an Ark address")(held) {
            EngineError::Unavailable(message) => {
                assert!(message.starts_with("paying an Ark address: "), "{message}");
                assert!(message.contains("try again"), "{message}");
                assert!(
                    !message.contains("1eabb9e8"),
                    "no server internals: {message}"
                );
            }
            other => panic!("expected Unavailable (503), got {other:?}"),
        }
    }

    #[test]
    fn another_refusal_of_the_server_is_not_taken_for_held_coins() {
        let other = refused_cosign("bad user input: unknown VTXO");
        assert!(!ark_server_holds_vtxos(&other));
        assert!(matches!(
            EngineError::classify("paying an Ark address")(other),
            EngineError::Internal { .. }
        ));
        // The same words in a message of ours, not the server's status, do not count.
        let ours = anyhow::anyhow!("already locked");
        assert!(!ark_server_holds_vtxos(&ours));
    }
}

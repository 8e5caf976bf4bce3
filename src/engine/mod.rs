//! The engine: the one owner of the wallet. Handlers ask it; it asks the store and bark.
//!
//! Wallet lifecycle: **none** → `create` → **created** (its properties are in the
//! store) → loaded (a `bark::Wallet` with its background tasks, `wallet_tasks`) → `delete` → none,
//! all without restarts. Loading needs the chain source (bark checks it on open), so a
//! wallet created with `force` while its chain source or Ark server is unreachable stays
//! "created" and a background task keeps trying to load it; every request that needs
//! the wallet meanwhile gets a clear "not loaded yet" answer.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bark::persist::BarkPersister;
use bitcoin::Network;
use bitcoin::bip32::Fingerprint;
use tokio::sync::{Mutex, RwLock};

pub mod autopilot;
mod boards;
mod exits;
mod fees;
pub mod lightning;
mod offchain;
mod onchain;
mod rounds;
pub mod supervisor;
mod wallet_tasks;

pub use exits::{ExitList, ExitProgress};

use crate::datadir;
use crate::events::EventHub;
use crate::store::{InitialScan, Store, StoreError};

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
    fn internal(context: &'static str) -> impl FnOnce(anyhow::Error) -> EngineError {
        move |source| match source.downcast::<StoreError>() {
            Ok(store) => EngineError::Store(store),
            Err(source) => EngineError::Internal { context, source },
        }
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

/// A request to create (or import) a wallet, validated by the API.
#[derive(Debug)]
pub struct CreateWallet {
    pub network: Network,
    /// Import this mnemonic; `None` generates a new one.
    pub mnemonic: Option<bark::bip39::Mnemonic>,
    pub birthday_height: Option<u32>,
    pub config: WalletConfig,
    /// Create even when the Ark server or the chain source is unreachable, or the
    /// datadir holds files berthd does not know (they are left untouched).
    pub force: bool,
}

/// A wallet open in bark. bark holds the on-chain wallet as a trait object; the
/// on-chain endpoints need the concrete BDK wallet, so the engine keeps that handle too.
/// Cheap to clone (both are shared handles), so no lock is held while an operation runs.
#[derive(Clone)]
pub struct LoadedWallet {
    pub wallet: bark::Wallet,
    pub onchain: Arc<RwLock<bark::onchain::OnchainWallet>>,
}

pub struct Engine {
    store: Store,
    datadir: PathBuf,
    /// The wallet's seed: sealed, or barkd's plaintext file (`keys`).
    seeds: crate::keys::Seeds,
    events: Arc<EventHub>,
    /// Serialises create and delete: of two concurrent creates exactly one wins.
    lifecycle: Mutex<()>,
    loaded: RwLock<Option<LoadedWallet>>,
    /// One exit progress or claim at a time (the driver, the API).
    exit_lock: Mutex<()>,
    /// The loaded wallet's background tasks (`wallet_tasks`), in place of bark's daemon.
    wallet_tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The task recording the loaded wallet's notifications, and its stop switch.
    recorder: std::sync::Mutex<Option<Recorder>>,
    /// The watchdog, the exit reserve, alerts (`autopilot`).
    autopilot: Arc<autopilot::Autopilot>,
    /// Berth's supervised background tasks and their state.
    tasks: Arc<supervisor::Tasks>,
}

struct Recorder {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Engine {
    pub fn new(
        store: Store,
        datadir: PathBuf,
        seeds: crate::keys::Seeds,
        events: Arc<EventHub>,
        policy: autopilot::Policy,
    ) -> Arc<Self> {
        Arc::new(Engine {
            store,
            datadir,
            seeds,
            events,
            autopilot: autopilot::Autopilot::new(policy),
            tasks: Arc::new(supervisor::Tasks::default()),
            recorder: std::sync::Mutex::new(None),
            lifecycle: Mutex::new(()),
            loaded: RwLock::new(None),
            exit_lock: Mutex::new(()),
            wallet_tasks: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The wallet database.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The datadir (its filesystem's free space is in `/health`).
    pub fn datadir(&self) -> &std::path::Path {
        &self.datadir
    }

    /// The durable event log.
    pub fn events(&self) -> &Arc<EventHub> {
        &self.events
    }

    /// What the autopilot last saw.
    pub fn autopilot_status(&self) -> autopilot::Status {
        self.autopilot.status()
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
                async move {
                    engine
                        .autopilot
                        .check(&engine)
                        .await
                        .map_err(|e| e.to_string())
                }
            },
            move || {
                let engine = Arc::clone(&waiter);
                async move { engine.until_next_check().await }
            },
        )
    }

    /// Wait for the check interval, or less when bark sees a new block (its cached
    /// view of the tip: no request to the chain source) or a wallet is loaded or
    /// unloaded.
    async fn until_next_check(&self) {
        let deadline = tokio::time::Instant::now() + self.autopilot.policy().check_interval;
        let seen = |loaded: Option<LoadedWallet>| async move {
            match loaded {
                Some(l) => (true, l.wallet.chain().last_observed_tip().await),
                None => (false, None),
            }
        };
        let start = seen(self.loaded.read().await.clone()).await;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep_until(
                deadline.min(tokio::time::Instant::now() + Duration::from_secs(2)),
            )
            .await;
            if seen(self.loaded.read().await.clone()).await != start {
                return;
            }
        }
    }

    /// The wallet's fingerprint, or `None` when no wallet exists.
    pub async fn wallet_fingerprint(&self) -> Result<Option<Fingerprint>, EngineError> {
        let props = self
            .store
            .read_properties()
            .await
            .map_err(EngineError::internal("reading the wallet"))?;
        Ok(props.map(|p| p.fingerprint))
    }

    /// The wallet's fingerprint, or [`EngineError::NoWallet`].
    pub async fn require_wallet(&self) -> Result<Fingerprint, EngineError> {
        self.wallet_fingerprint()
            .await?
            .ok_or(EngineError::NoWallet)
    }

    /// The open wallet: [`EngineError::NoWallet`] without one, [`EngineError::NotLoaded`]
    /// while bark cannot open it yet.
    pub async fn loaded(&self) -> Result<LoadedWallet, EngineError> {
        if let Some(loaded) = self.loaded.read().await.as_ref() {
            return Ok(loaded.clone());
        }
        self.require_wallet().await?;
        Err(EngineError::NotLoaded)
    }

    /// A bitcoin address, which must be for the wallet's network. Needs the wallet but
    /// not its chain source: a client's mistake is a 400 even while the wallet waits to
    /// load.
    pub async fn address(&self, text: &str) -> Result<bitcoin::Address, EngineError> {
        parse_address(text, self.network().await?)
    }

    /// The wallet's network, from the store (no need for the wallet to be loaded).
    pub async fn network(&self) -> Result<Network, EngineError> {
        let props = self
            .store
            .read_properties()
            .await
            .map_err(EngineError::internal("reading the wallet"))?
            .ok_or(EngineError::NoWallet)?;
        Ok(props.network)
    }

    /// Whether the loaded wallet currently has a connection to its Ark server.
    pub async fn connected(&self) -> Result<bool, EngineError> {
        match self.loaded().await {
            Ok(loaded) => Ok(loaded.wallet.ark_info().await.ok().flatten().is_some()),
            Err(EngineError::NotLoaded) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The mnemonic phrase, unsealed (or from barkd's plaintext file).
    pub async fn mnemonic(&self) -> Result<zeroize::Zeroizing<String>, EngineError> {
        self.require_wallet().await?;
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

    /// Create (or import) the wallet and start loading it.
    ///
    /// The seed (sealed, or barkd's plaintext file when no key source is configured) is
    /// written before the wallet is committed to the store, so a crash in between leaves
    /// a seed without a wallet (which the next create refuses to overwrite), never a
    /// wallet without its seed.
    pub async fn create(self: &Arc<Self>, req: CreateWallet) -> Result<Fingerprint, EngineError> {
        let _lifecycle = self.lifecycle.lock().await;
        if let Some(existing) = self.wallet_fingerprint().await? {
            return Err(EngineError::WalletExists(existing));
        }
        let seed_file_exists = self.check_datadir_for_create(&req).await?;
        let config_path = self.datadir.join(datadir::CONFIG_FILE);
        // A config.toml this call writes is removed again if the call fails.
        let mut written_config = None;
        match &req.config {
            WalletConfig::Existing => {
                if !config_path.exists() {
                    return Err(EngineError::InvalidRequest(
                        "ark_server and chain_source are required: the datadir has no config.toml"
                            .into(),
                    ));
                }
            }
            WalletConfig::New { ark_server, chain } => {
                let text = config_toml(ark_server, chain);
                write_secret(config_path.clone(), text.into_bytes())
                    .await
                    .map_err(|e| EngineError::Internal {
                        context: "writing config.toml",
                        source: e.into(),
                    })?;
                written_config = Some(RemoveOnDrop(Some(config_path.clone())));
            }
        }
        let config = match bark::Config::load(req.network, &config_path) {
            Ok(config) => config,
            Err(e) => {
                return Err(EngineError::InvalidRequest(format!(
                    "invalid wallet configuration: {e:#}"
                )));
            }
        };
        // Birthday rules (as barkd's): only an imported seed has a past to scan; bitcoind
        // needs to be told where it starts, esplora scans by address and ignores it.
        let initial_scan = match (&req.mnemonic, req.birthday_height) {
            (None, Some(_)) => Err("birthday_height only applies when importing a mnemonic"),
            (None, None) => Ok(InitialScan::FromTip),
            (Some(_), Some(height)) => Ok(InitialScan::FromHeight(height)),
            (Some(_), None) if config.bitcoind_address.is_some() => {
                Err("birthday_height is required to import a mnemonic with a bitcoind chain source")
            }
            (Some(_), None) => Ok(InitialScan::FromHeight(0)),
        };
        let initial_scan = match initial_scan {
            Ok(scan) => scan,
            Err(msg) => return Err(EngineError::InvalidRequest(msg.into())),
        };

        let mnemonic = match req.mnemonic {
            Some(m) => m,
            None => {
                let mut entropy = [0u8; 16];
                getrandom::fill(&mut entropy).map_err(|e| EngineError::Internal {
                    context: "drawing entropy for a new seed",
                    source: anyhow::anyhow!("{e}"),
                })?;
                bark::bip39::Mnemonic::from_entropy(&entropy).map_err(|e| {
                    EngineError::Internal {
                        context: "building a mnemonic",
                        source: e.into(),
                    }
                })?
            }
        };
        let seed = bark::WalletSeed::new_from_mnemonic(req.network, &mnemonic);
        let mut written_seed = None;
        if !seed_file_exists {
            let seeds = self.seeds.clone();
            let phrase = zeroize::Zeroizing::new(mnemonic.to_string());
            let location = tokio::task::spawn_blocking(move || seeds.create(&phrase))
                .await
                .map_err(|e| EngineError::Internal {
                    context: "storing the seed",
                    source: e.into(),
                })??;
            let file = match location {
                crate::keys::SeedLocation::Sealed => crate::keys::SEALED_SEED_FILE,
                crate::keys::SeedLocation::Plaintext => datadir::MNEMONIC_FILE,
            };
            written_seed = Some(RemoveOnDrop(Some(self.datadir.join(file))));
        }
        // Before the wallet commits, so a crash cannot leave an imported wallet that
        // never scans its past; a create that fails clears it again.
        self.store.set_initial_scan(initial_scan).await?;
        let locks = bark::lock_manager::memory::MemoryLockManager::new();
        let created =
            bark::Wallet::create(req.network, &seed, &config, &self.store, &locks, req.force).await;
        if let Err(e) = created {
            self.store.clear_initial_scan().await?;
            tracing::warn!(error = %format!("{e:#}"), "cannot create the wallet: the Ark server did not answer");
            return Err(EngineError::Unavailable(
                "the Ark server is unreachable; pass \"force\": true to create the wallet anyway"
                    .into(),
            ));
        }
        for file in [written_config, written_seed].into_iter().flatten() {
            file.keep();
        }
        let fingerprint = seed.fingerprint();
        tracing::info!(%fingerprint, "wallet created");
        self.spawn_loader(req.network, config, mnemonic);
        Ok(fingerprint)
    }

    /// Refuse to create a wallet over someone else's files. A seed without a wallet
    /// (barkd's `mnemonic` file, or a create that crashed) is never overwritten, not
    /// even with `force`, unless the request imports that very seed; other unknown
    /// entries need `force` and are then left as they are (barkd deletes them; a wallet
    /// appliance does not delete what it does not own). Returns whether the seed exists
    /// (and holds the requested mnemonic).
    async fn check_datadir_for_create(&self, req: &CreateWallet) -> Result<bool, EngineError> {
        let seed_file_exists = match self.seeds.location() {
            Some(_) => {
                let phrase = match self.read_seed().await {
                    Ok(phrase) => phrase,
                    Err(EngineError::Seed(e)) => {
                        return Err(EngineError::DatadirConflict(format!(
                            "the datadir holds a seed berthd cannot open ({e}), and berthd \
                             never overwrites a seed: configure its key source, or move it \
                             out of the datadir"
                        )));
                    }
                    Err(e) => return Err(e),
                };
                let same = bark::bip39::Mnemonic::parse(phrase.trim())
                    .ok()
                    .is_some_and(|existing| req.mnemonic.as_ref() == Some(&existing));
                if !same {
                    return Err(EngineError::DatadirConflict(
                        "the datadir holds the seed of a wallet berthd has no state for \
                         (mnemonic or seed.sealed), and berthd never overwrites a seed: import \
                         that seed by passing it as \"mnemonic\", or move the file out of the \
                         datadir"
                            .into(),
                    ));
                }
                true
            }
            None => false,
        };
        let datadir = self.datadir.clone();
        let unexpected = tokio::task::spawn_blocking(move || datadir::unexpected_entries(&datadir))
            .await
            .map_err(|e| EngineError::Internal {
                context: "listing the datadir",
                source: e.into(),
            })?
            .map_err(|e| EngineError::Internal {
                context: "listing the datadir",
                source: e.into(),
            })?;
        if !unexpected.is_empty() {
            let listed = unexpected.join(", ");
            if !req.force {
                return Err(EngineError::DatadirConflict(format!(
                    "the datadir has unexpected contents ({listed}); pass \"force\": true to \
                     create the wallet beside them (berthd leaves them untouched)"
                )));
            }
            tracing::warn!(entries = %listed, "creating a wallet beside unexpected datadir contents");
        }
        Ok(seed_file_exists)
    }

    /// On start: load an existing wallet in the background (no network needed to start).
    pub async fn start(self: &Arc<Self>) -> Result<(), EngineError> {
        let Some(props) = self
            .store
            .read_properties()
            .await
            .map_err(EngineError::internal("reading the wallet"))?
        else {
            return Ok(());
        };
        if self.seeds.location().is_none() {
            tracing::error!(
                "the wallet exists but the datadir holds no seed (seed.sealed or mnemonic)"
            );
            return Ok(());
        }
        // A seed that cannot be unlocked (a wrong passphrase, a missing credential or
        // secure element) stops the start: the error names what is missing.
        let phrase = self.read_seed().await?;
        let mnemonic =
            bark::bip39::Mnemonic::parse(phrase.trim()).map_err(|e| EngineError::Internal {
                context: "parsing the seed phrase",
                source: e.into(),
            })?;
        drop(phrase);
        let config = bark::Config::load(props.network, self.datadir.join(datadir::CONFIG_FILE))
            .map_err(|e| EngineError::Internal {
                context: "loading config.toml",
                source: e,
            })?;
        self.spawn_loader(props.network, config, mnemonic);
        Ok(())
    }

    /// Keep trying to open the wallet (bark needs its chain source for that), with
    /// backoff up to a minute, until it is loaded, or deleted or replaced meanwhile.
    fn spawn_loader(
        self: &Arc<Self>,
        network: Network,
        config: bark::Config,
        mnemonic: bark::bip39::Mnemonic,
    ) {
        let engine = Arc::clone(self);
        let fingerprint = bark::WalletSeed::new_from_mnemonic(network, &mnemonic).fingerprint();
        tokio::spawn(async move {
            let mut delay = Duration::from_secs(1);
            loop {
                let still_ours = || async {
                    engine.wallet_fingerprint().await.ok().flatten() == Some(fingerprint)
                };
                if !still_ours().await {
                    return;
                }
                match engine.open_wallet(network, config.clone(), &mnemonic).await {
                    Ok(wallet) => {
                        // Install under the lifecycle lock, so a delete that ran while
                        // bark was opening cannot be undone by this load.
                        let _lifecycle = engine.lifecycle.lock().await;
                        if still_ours().await {
                            // Record first, then start the work that makes bark notify:
                            // none of its notifications can be missed.
                            engine.start_recorder(&wallet.wallet).await;
                            engine.start_wallet_tasks(wallet.clone()).await;
                            *engine.loaded.write().await = Some(wallet);
                            tracing::info!(%fingerprint, "wallet loaded");
                        }
                        return;
                    }
                    Err(e) => {
                        let reason = format!("{e:#}");
                        tracing::warn!(error = %reason, retry_in = ?delay, "cannot load the wallet yet");
                    }
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(60));
            }
        });
    }

    async fn open_wallet(
        &self,
        network: Network,
        config: bark::Config,
        mnemonic: &bark::bip39::Mnemonic,
    ) -> anyhow::Result<LoadedWallet> {
        let persister: Arc<dyn BarkPersister> = Arc::new(self.store.clone());
        let mut onchain = bark::onchain::OnchainWallet::load_or_create(
            network,
            mnemonic.to_seed(""),
            persister.clone(),
        )
        .await?;
        if let Some(scan) = self.store.initial_scan().await? {
            // A new wallet's first on-chain scan: from its birthday (imported seed) or
            // the tip (fresh seed). Runs once; a failure leaves it pending for the retry.
            let chain = bark::chain::ChainSource::new(
                config.chain_source()?,
                network,
                config.fallback_fee_rate,
            )
            .await?;
            let start = match scan {
                InitialScan::FromTip => chain.tip().await?,
                InitialScan::FromHeight(h) => bitcoin_ext::BlockHeight::new(h),
            };
            onchain.initial_wallet_scan(&chain, Some(start)).await?;
            self.store.clear_initial_scan().await?;
            tracing::info!(?scan, "initial on-chain scan done");
        }
        let onchain = Arc::new(RwLock::new(onchain));
        let shared: Arc<RwLock<dyn bark::onchain::OnchainWalletTrait>> = onchain.clone();
        let wallet = bark::Wallet::open(
            network,
            bark::WalletSeed::new_from_mnemonic(network, mnemonic),
            config,
            bark::OpenWalletArgs {
                persister: Some(persister),
                lock_manager: Some(Box::new(
                    bark::lock_manager::memory::MemoryLockManager::new(),
                )),
                onchain: Some(shared),
                create_if_not_exists: false,
                // Started once the event recorder listens (see `spawn_loader`).
                run_daemon: false,
                ..Default::default()
            },
        )
        .await?;
        Ok(LoadedWallet { wallet, onchain })
    }

    /// Delete the wallet: only when the caller names its fingerprint (so a script
    /// cannot delete whatever wallet happens to be there). Unloads it, empties its
    /// tables in one transaction, then removes its seed and configuration files.
    pub async fn delete(&self, fingerprint: &str) -> Result<(), EngineError> {
        let _lifecycle = self.lifecycle.lock().await;
        let existing = self.require_wallet().await?;
        if existing.to_string() != fingerprint {
            return Err(EngineError::InvalidRequest(format!(
                "fingerprint {fingerprint:?} does not match the wallet's"
            )));
        }
        self.unload().await;
        self.store.wipe_wallet().await?;
        self.events.forget_recent();
        if let Err(e) = self.seeds.remove() {
            tracing::warn!(error = %e, "cannot remove the deleted wallet's seed");
        }
        match std::fs::remove_file(self.datadir.join(datadir::CONFIG_FILE)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(file = datadir::CONFIG_FILE, error = %e, "cannot remove a file of the deleted wallet")
            }
        }
        tracing::warn!(%existing, "wallet deleted");
        Ok(())
    }

    /// Stop the wallet's background tasks and unload it (shutdown, delete). The event
    /// recorder stops last, after recording what bark sent until then.
    pub async fn unload(&self) {
        self.stop_wallet_tasks();
        self.loaded.write().await.take();
        let recorder = self
            .recorder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(Recorder { stop, task }) = recorder {
            stop.send_replace(true);
            if tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
            {
                tracing::warn!("the event recorder did not finish in time");
            }
        }
    }

    async fn start_recorder(&self, wallet: &bark::Wallet) {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = match self.events.spawn_recorder(wallet, stopped).await {
            Ok(task) => task,
            Err(e) => {
                // The store failing is fatal (the daemon stops); say what it cost.
                tracing::error!(error = %e, "cannot start recording wallet events");
                return;
            }
        };
        let previous = self
            .recorder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(Recorder { stop, task });
        if let Some(previous) = previous {
            previous.task.abort();
        }
    }

    /// Whether a wallet is loaded (for status and tests).
    pub async fn is_loaded(&self) -> bool {
        self.loaded.read().await.is_some()
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

/// [`datadir::write_secret_file`] (which fsyncs) on the blocking pool, never on the
/// async runtime.
async fn write_secret(path: PathBuf, contents: Vec<u8>) -> Result<(), datadir::DataDirError> {
    tokio::task::spawn_blocking(move || datadir::write_secret_file(&path, &contents))
        .await
        .unwrap_or_else(|e| {
            Err(datadir::DataDirError::Io {
                what: "writing a secret file",
                path: PathBuf::new(),
                source: std::io::Error::other(e.to_string()),
            })
        })
}

/// Removes a file when dropped, unless [`RemoveOnDrop::keep`] was called: undoes a
/// half-done operation on every early return.
struct RemoveOnDrop(Option<PathBuf>);

impl RemoveOnDrop {
    fn keep(mut self) {
        self.0 = None;
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// bark's `config.toml` for a new wallet (the format `bark::Config` reads).
fn config_toml(ark_server: &str, chain: &ChainSource) -> String {
    let quote = |s: &str| toml_string(s);
    let mut out = format!("server_address = {}\n", quote(ark_server));
    match chain {
        ChainSource::Esplora { url } => {
            out.push_str(&format!("esplora_address = {}\n", quote(url)))
        }
        ChainSource::Bitcoind { url, auth } => {
            out.push_str(&format!("bitcoind_address = {}\n", quote(url)));
            match auth {
                BitcoindAuth::Cookie(path) => out.push_str(&format!(
                    "bitcoind_cookiefile = {}\n",
                    quote(&path.display().to_string())
                )),
                BitcoindAuth::UserPass { user, pass } => out.push_str(&format!(
                    "bitcoind_user = {}\nbitcoind_pass = {}\n",
                    quote(user),
                    quote(pass)
                )),
            }
        }
    }
    out
}

/// A TOML basic string: quotes, backslashes and control characters escaped.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

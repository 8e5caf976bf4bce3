//! The wallet's lifecycle: create (or import), load, unload, delete — as barkd 0.8 does
//! it, wherever a client or a restore can see the difference.
//!
//! - **Create returns a usable wallet.** `create` opens the wallet before it answers,
//!   so the next request (an address, the Ark info, `connected`) is served at once, as
//!   barkd's is. Only with `force` and an unreachable chain source (or, for an import,
//!   Ark server) does it answer at once and leave the opening to the background loader.
//! - **Import runs bark's seed recovery.** bark recovers VTXOs from the seed only on the
//!   `Wallet::open` that creates the wallet (create-if-missing; barkd 0.8 creates this
//!   way). So berthd records the new wallet in its own setup record
//!   (`store::setup`) and lets bark create it inside that open, and records what the
//!   recovery found (`recovery`). An import waits for its Ark server: recovery needs it.
//! - **A load under way is waited for.** After a restart, a request that needs the
//!   wallet while an open is in progress waits up to [`LOAD_WAIT`] for it, instead of
//!   answering "not loaded yet" in the first instant; while the chain source is down
//!   (between attempts) the answer is immediate.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bark::persist::BarkPersister;
use bitcoin::Network;
use bitcoin::bip32::Fingerprint;

use super::{Engine, EngineError, LoadedWallet, WalletConfig};
use crate::fsutil;
use crate::store::InitialScan;

/// How long a request that needs the wallet waits for an open that is under way (at
/// start, on create, or a retry of the loader) before it is told "not loaded yet".
/// Opening a wallet that exists takes well under a second when the chain source
/// answers; the bound is for a chain source that is slow to answer.
pub const LOAD_WAIT: Duration = Duration::from_secs(20);

/// How long the chain source may take to answer its version check when a wallet is
/// opened: an unreachable one must not hold a create (or the loader) for minutes.
const CHAIN_CHECK_BOUND: Duration = Duration::from_secs(30);

/// How long warming up the Ark server connection may delay a create or a load.
const SERVER_WARM_UP_BOUND: Duration = Duration::from_secs(15);

/// How the wallet is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpenMode {
    /// bark has created it before: open it.
    Existing,
    /// bark creates it in this open (the creation is unfinished): seed recovery runs
    /// when the seed was imported. A new seed may be created without the Ark server.
    Create {
        imported: bool,
        without_server: bool,
    },
}

/// Why an open failed, as far as a client is concerned.
#[derive(Debug, thiserror::Error)]
enum OpenError {
    /// The chain source did not answer (or not as bark needs).
    #[error("the chain source: {0:#}")]
    ChainSource(anyhow::Error),
    /// bark refused to create or open it (most often: the Ark server is unreachable).
    #[error("{0:#}")]
    Bark(anyhow::Error),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl OpenError {
    /// An error of our store behind bark's persister trait (which speaks `anyhow`).
    fn from_persister(e: anyhow::Error) -> OpenError {
        match e.downcast::<crate::store::StoreError>() {
            Ok(store) => OpenError::Store(store),
            Err(other) => OpenError::Bark(other),
        }
    }
}

/// An opened wallet, and, when bark created it in that open, how seed recovery went.
struct Opened {
    wallet: LoadedWallet,
    recovery: Option<super::recovery::RecoveryFound>,
}

impl Engine {
    /// Create (or import) the wallet, and open it before answering.
    ///
    /// The seed (sealed, or barkd's plaintext file when no key source is configured)
    /// and `config.toml` are written before the wallet is recorded in the store, so a
    /// crash in between leaves a seed without a wallet (which the next create refuses
    /// to overwrite), never a wallet without its seed. The work runs in a task of its
    /// own: a client that goes away, or the request time limit, must not cut a creation
    /// off half-way.
    pub async fn create(
        self: &Arc<Self>,
        req: super::CreateWallet,
    ) -> Result<Fingerprint, EngineError> {
        let engine = Arc::clone(self);
        tokio::spawn(async move { engine.create_now(req).await })
            .await
            .map_err(|e| EngineError::Internal {
                context: "creating the wallet",
                source: e.into(),
            })?
    }

    async fn create_now(
        self: &Arc<Self>,
        req: super::CreateWallet,
    ) -> Result<Fingerprint, EngineError> {
        let _lifecycle = self.lifecycle.lock().await;
        if let Some(existing) = self.wallet_fingerprint().await? {
            return Err(EngineError::WalletExists(existing));
        }
        let seed_file_exists = self.check_datadir_for_create(&req).await?;
        let config_path = self.layout.bark_config();
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
            Ok(config) => with_user_agent(config),
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

        let imported = req.mnemonic.is_some();
        let mnemonic = match req.mnemonic {
            Some(m) => m,
            None => new_mnemonic()?,
        };
        let fingerprint = bark::WalletSeed::new_from_mnemonic(req.network, &mnemonic).fingerprint();
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
            let file = self.seeds.path_of(location).to_path_buf();
            written_seed = Some(RemoveOnDrop(Some(file)));
        }
        self.store
            .begin_wallet_creation(req.network, fingerprint, imported, initial_scan)
            .await?;
        // From here the wallet exists: its files must outlive this call even if it is
        // cut off (a shutdown), so the guards stop guarding; a failure below removes
        // them itself, after the record.
        let written: Vec<PathBuf> = [written_config, written_seed]
            .into_iter()
            .flatten()
            .filter_map(RemoveOnDrop::keep)
            .collect();
        let mode = OpenMode::Create {
            imported,
            // A new seed has nothing on the server to recover, so `force` may create it
            // while the server is away (bark then fetches the server's keys later). An
            // import always waits for the server: recovery is the point of it.
            without_server: req.force && !imported,
        };
        match self
            .open_watched(req.network, config.clone(), &mnemonic, mode)
            .await
        {
            Ok(opened) => {
                self.install(opened).await;
                tracing::info!(%fingerprint, imported, "wallet created");
                Ok(fingerprint)
            }
            // A storage failure is fatal (the daemon stops), never a reason to go on.
            Err(OpenError::Store(e)) => Err(EngineError::Store(e)),
            Err(e) if req.force => {
                tracing::warn!(%fingerprint, error = %e,
                    "wallet created; it loads once its chain source and Ark server answer");
                self.spawn_loader(req.network, config, mnemonic, mode);
                Ok(fingerprint)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot create the wallet");
                // Nothing is left: not the record, not what bark or the on-chain scan
                // stored, then not the files this call wrote (in that order: a crash in
                // between leaves a seed without a wallet, never the reverse).
                self.store.wipe_wallet().await?;
                self.events.forget_recent();
                for path in written {
                    if let Err(e) = std::fs::remove_file(&path) {
                        tracing::warn!(file = %path.display(), error = %e, "cannot remove a file of the failed create");
                    }
                }
                let missing = match e {
                    OpenError::ChainSource(_) => {
                        "the chain source is unreachable; pass \"force\": true to create the \
                         wallet anyway (it loads once the chain source answers)"
                    }
                    // bark's create fails this way when it cannot reach the server.
                    _ => {
                        "the Ark server is unreachable or refused the wallet; pass \"force\": \
                         true to create the wallet anyway (it loads once the server answers)"
                    }
                };
                Err(EngineError::Unavailable(missing.into()))
            }
        }
    }

    /// Refuse to create a wallet over someone else's files. A seed without a wallet
    /// (barkd's `mnemonic` file, or a create that crashed) is never overwritten, not
    /// even with `force`, unless the request imports that very seed; other unknown
    /// entries need `force` and are then left as they are (barkd deletes them; a wallet
    /// appliance does not delete what it does not own). Returns whether the seed exists
    /// (and holds the requested mnemonic).
    async fn check_datadir_for_create(
        &self,
        req: &super::CreateWallet,
    ) -> Result<bool, EngineError> {
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
        let layout = self.layout.clone();
        let unexpected = tokio::task::spawn_blocking(move || layout.unexpected_entries())
            .await
            .map_err(anyhow::Error::from)
            .and_then(|listed| listed.map_err(anyhow::Error::from))
            .map_err(EngineError::internal("listing the datadir"))?;
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

    /// On start: load the wallet in the background (no network is needed to start). A
    /// creation that a crash interrupted is taken up again, recovery included.
    pub async fn start(self: &Arc<Self>) -> Result<(), EngineError> {
        let Some(record) = self.store.wallet_record().await? else {
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
        let config =
            bark::Config::load(record.network, self.layout.bark_config()).map_err(|e| {
                EngineError::Internal {
                    context: "loading config.toml",
                    source: e,
                }
            })?;
        let mode = if record.created {
            OpenMode::Existing
        } else {
            tracing::warn!(fingerprint = %record.fingerprint,
                "the wallet's creation was interrupted; creating it again");
            OpenMode::Create {
                imported: record.imported,
                without_server: !record.imported,
            }
        };
        self.spawn_loader(record.network, with_user_agent(config), mnemonic, mode);
        Ok(())
    }

    /// The open wallet: [`EngineError::NoWallet`] without one, [`EngineError::NotLoaded`]
    /// while bark cannot open it yet. An open under way is waited for, at most
    /// [`LOAD_WAIT`].
    pub async fn loaded(&self) -> Result<LoadedWallet, EngineError> {
        if let Some(loaded) = self.loaded.read().await.as_ref() {
            return Ok(loaded.clone());
        }
        self.require_wallet().await?;
        let mut opening = self.opening.subscribe();
        if *opening.borrow_and_update() {
            // Whatever the outcome, look again below; a timeout is "not loaded yet".
            let _ = tokio::time::timeout(LOAD_WAIT, opening.wait_for(|busy| !*busy)).await;
        }
        match self.loaded.read().await.as_ref() {
            Some(loaded) => Ok(loaded.clone()),
            None => Err(EngineError::NotLoaded),
        }
    }

    /// Keep trying to open the wallet (bark needs its chain source for that, and an
    /// import its Ark server too), with backoff up to a minute, until it is loaded, or
    /// deleted or replaced meanwhile.
    fn spawn_loader(
        self: &Arc<Self>,
        network: Network,
        config: bark::Config,
        mnemonic: bark::bip39::Mnemonic,
        mode: OpenMode,
    ) {
        let engine = Arc::clone(self);
        let fingerprint = bark::WalletSeed::new_from_mnemonic(network, &mnemonic).fingerprint();
        // Set before the task runs, so a request that arrives in the next instant waits.
        self.opening.send_replace(true);
        tokio::spawn(async move {
            let mut delay = Duration::from_secs(1);
            loop {
                let still_ours = || async {
                    engine.wallet_fingerprint().await.ok().flatten() == Some(fingerprint)
                };
                if !still_ours().await {
                    engine.opening.send_replace(false);
                    return;
                }
                engine.opening.send_replace(true);
                match engine.open(network, config.clone(), &mnemonic, mode).await {
                    Ok(opened) => {
                        // Install under the lifecycle lock, so a delete that ran while
                        // bark was opening cannot be undone by this load.
                        let _lifecycle = engine.lifecycle.lock().await;
                        if still_ours().await {
                            engine.install(opened).await;
                            tracing::info!(%fingerprint, "wallet loaded");
                        }
                        engine.opening.send_replace(false);
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, retry_in = ?delay, "cannot load the wallet yet");
                    }
                }
                engine.opening.send_replace(false);
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(60));
            }
        });
    }

    /// [`Engine::open`], with requests that need the wallet waiting for it meanwhile.
    async fn open_watched(
        &self,
        network: Network,
        config: bark::Config,
        mnemonic: &bark::bip39::Mnemonic,
        mode: OpenMode,
    ) -> Result<Opened, OpenError> {
        self.opening.send_replace(true);
        let opened = self.open(network, config, mnemonic, mode).await;
        if opened.is_err() {
            self.opening.send_replace(false);
        }
        // On success the flag drops once the wallet is installed (`install`).
        opened
    }

    /// Open the wallet in bark: the chain source first (so that nothing is created
    /// while it is away), then the on-chain wallet and its first scan, then bark's
    /// wallet (created in this open when `mode` says so, with seed recovery), and a
    /// first connection to the Ark server.
    async fn open(
        &self,
        network: Network,
        config: bark::Config,
        mnemonic: &bark::bip39::Mnemonic,
        mode: OpenMode,
    ) -> Result<Opened, OpenError> {
        if let OpenMode::Create { .. } = mode
            && self
                .store
                .read_properties()
                .await
                .map_err(OpenError::from_persister)?
                .is_some()
        {
            // An earlier attempt (or a crash) stopped after bark created the wallet but
            // before recovery finished: start the creation over, so it recovers.
            tracing::warn!(
                "an earlier attempt to create the wallet was interrupted; starting over"
            );
            self.store.restart_wallet_creation().await?;
        }
        // The chain source is checked first when this open creates the wallet (nothing
        // of it is stored while the source is away, and the answer can say which source
        // is missing) or has the first on-chain scan to run; a plain reopen leaves the
        // check to bark's open, which makes it anyway.
        let initial_scan = self.store.initial_scan().await?;
        let chain = match (mode, initial_scan) {
            (OpenMode::Existing, None) => None,
            _ => Some(checked_chain_source(&config, network).await?),
        };

        let persister: Arc<dyn BarkPersister> = Arc::new(self.store.clone());
        let mut onchain = bark::onchain::OnchainWallet::load_or_create(
            network,
            mnemonic.to_seed(""),
            persister.clone(),
        )
        .await
        .map_err(OpenError::Bark)?;
        if let (Some(scan), Some(chain)) = (initial_scan, &chain) {
            // A new wallet's first on-chain scan: from its birthday (imported seed) or
            // the tip (fresh seed). Runs once; a failure leaves it pending for the retry.
            // Before bark creates the wallet, so that recovery can check recovered
            // VTXOs against the chain (as barkd orders it).
            let start = match scan {
                InitialScan::FromTip => chain.tip().await.map_err(OpenError::ChainSource)?,
                InitialScan::FromHeight(h) => bitcoin_ext::BlockHeight::new(h),
            };
            onchain
                .initial_wallet_scan(chain, Some(start))
                .await
                .map_err(OpenError::ChainSource)?;
            self.store.clear_initial_scan().await?;
            tracing::info!(?scan, "initial on-chain scan done");
        }
        let onchain = Arc::new(tokio::sync::RwLock::new(onchain));
        let shared: Arc<tokio::sync::RwLock<dyn bark::onchain::OnchainWalletTrait>> =
            onchain.clone();

        let (create, without_server, recover) = match mode {
            OpenMode::Existing => (false, false, false),
            OpenMode::Create {
                imported,
                without_server,
            } => (true, without_server, imported),
        };
        // bark calls this exactly once per successful open, with the recovery outcome.
        let status = Arc::new(std::sync::Mutex::new(None));
        let slot = Arc::clone(&status);
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
                create_if_not_exists: create,
                create_without_server: without_server,
                // A generated seed has nothing to recover: skip the server round trips
                // (and a "recovery failed" that would only alarm).
                skip_recovery: !recover,
                on_recovery_finished: Some(Box::new(move |outcome| {
                    *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
                })),
                // Started once the event recorder listens (see `install`).
                run_daemon: false,
                ..Default::default()
            },
        )
        .await
        .map_err(OpenError::Bark)?;

        // As barkd after a create: connect now, so `connected`, `ark-info` and
        // `next-round` answer at once. A server that does not answer is no reason to
        // refuse the wallet; the autopilot keeps probing it.
        match tokio::time::timeout(SERVER_WARM_UP_BOUND, wallet.refresh_server()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %format!("{e:#}"), "the Ark server does not answer yet")
            }
            Err(_) => tracing::warn!("the Ark server does not answer yet (timed out)"),
        }

        let recovery = match mode {
            OpenMode::Existing => None,
            OpenMode::Create { .. } => {
                let outcome = status.lock().unwrap_or_else(|e| e.into_inner()).take();
                Some(
                    self.recovery_found(outcome)
                        .await
                        .map_err(OpenError::from_persister)?,
                )
            }
        };
        Ok(Opened {
            wallet: LoadedWallet { wallet, onchain },
            recovery,
        })
    }

    /// Make an opened wallet the loaded one (the caller holds the lifecycle lock):
    /// record how its creation went, then start the event recorder, then the work that
    /// makes bark notify, so none of its notifications can be missed.
    async fn install(self: &Arc<Self>, opened: Opened) {
        if let Some(found) = opened.recovery {
            if let Err(e) = self
                .store
                .finish_wallet_creation(found.record.clone())
                .await
            {
                // The store failing is fatal (the daemon stops); the next start
                // creates the wallet again, recovery included.
                tracing::error!(error = %e, "cannot record the wallet's creation");
                self.opening.send_replace(false);
                return;
            }
            self.announce_recovery(&found).await;
        }
        self.start_recorder(&opened.wallet.wallet).await;
        self.start_wallet_tasks(opened.wallet.clone()).await;
        *self.loaded.write().await = Some(opened.wallet);
        self.opening.send_replace(false);
    }

    /// Delete the wallet: only when the caller names its fingerprint (so a script
    /// cannot delete whatever wallet happens to be there). Unloads it, empties its
    /// tables in one transaction, then removes its seed and configuration files.
    /// barkd's lock and the auth token stay. `Ok(false)` when there is no wallet (as
    /// barkd answers; unlike barkd, files berthd has no wallet for are left alone).
    pub async fn delete(&self, fingerprint: &str) -> Result<bool, EngineError> {
        let _lifecycle = self.lifecycle.lock().await;
        let Some(existing) = self.wallet_fingerprint().await? else {
            return Ok(false);
        };
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
        let config = self.layout.bark_config();
        match std::fs::remove_file(&config) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(file = %config.display(), error = %e, "cannot remove a file of the deleted wallet")
            }
        }
        tracing::warn!(%existing, "wallet deleted");
        Ok(true)
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
        if let Some(super::Recorder { stop, task }) = recorder {
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
            .replace(super::Recorder { stop, task });
        if let Some(previous) = previous {
            previous.task.abort();
        }
    }
}

/// A client of the wallet's chain source that has answered bark's version check
/// (bounded: an unreachable source must not hold a create or the loader for minutes).
async fn checked_chain_source(
    config: &bark::Config,
    network: Network,
) -> Result<bark::chain::ChainSource, OpenError> {
    async {
        let chain = bark::chain::ChainSource::new(
            config.chain_source()?,
            network,
            config.fallback_fee_rate,
        )
        .await?;
        tokio::time::timeout(CHAIN_CHECK_BOUND, chain.require_version())
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {} s", CHAIN_CHECK_BOUND.as_secs()))??;
        anyhow::Ok(chain)
    }
    .await
    .map_err(OpenError::ChainSource)
}

/// bark's config with berthd named as the client (bark sends it to the Ark server,
/// which warns about clients it does not recognise), unless `config.toml` names one.
fn with_user_agent(mut config: bark::Config) -> bark::Config {
    if config.user_agent.is_none() {
        config.user_agent = Some(concat!("berthd/", env!("CARGO_PKG_VERSION")).to_string());
    }
    config
}

/// bark's `config.toml` for a new wallet (the format `bark::Config` reads).
fn config_toml(ark_server: &str, chain: &super::ChainSource) -> String {
    let quote = |s: &str| toml_string(s);
    let mut out = format!("server_address = {}\n", quote(ark_server));
    match chain {
        super::ChainSource::Esplora { url } => {
            out.push_str(&format!("esplora_address = {}\n", quote(url)))
        }
        super::ChainSource::Bitcoind { url, auth } => {
            out.push_str(&format!("bitcoind_address = {}\n", quote(url)));
            match auth {
                super::BitcoindAuth::Cookie(path) => out.push_str(&format!(
                    "bitcoind_cookiefile = {}\n",
                    quote(&path.display().to_string())
                )),
                super::BitcoindAuth::UserPass { user, pass } => out.push_str(&format!(
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

/// A new 12-word seed phrase.
fn new_mnemonic() -> Result<bark::bip39::Mnemonic, EngineError> {
    let mut entropy = zeroize::Zeroizing::new([0u8; 16]);
    getrandom::fill(&mut *entropy).map_err(|e| EngineError::Internal {
        context: "drawing entropy for a new seed",
        source: anyhow::anyhow!("{e}"),
    })?;
    bark::bip39::Mnemonic::from_entropy(&*entropy).map_err(|e| EngineError::Internal {
        context: "building a mnemonic",
        source: e.into(),
    })
}

/// [`fsutil::write_secret_file`] (which fsyncs) on the blocking pool, never on the
/// async runtime.
async fn write_secret(path: PathBuf, contents: Vec<u8>) -> Result<(), fsutil::FsError> {
    tokio::task::spawn_blocking(move || fsutil::write_secret_file(&path, &contents))
        .await
        .unwrap_or_else(|e| {
            Err(fsutil::FsError::Io {
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
    /// Stop guarding: the file stays. Its path.
    fn keep(mut self) -> Option<PathBuf> {
        self.0.take()
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{EventRetention, Store, StoreConfig};

    /// An engine over a real store holding a wallet whose creation has begun (so it
    /// exists) but that nothing is opening.
    async fn engine_with_an_unloaded_wallet(dir: &std::path::Path) -> Arc<Engine> {
        let (store, _) = Store::open_async(&dir.join("berth.redb"), &StoreConfig::default())
            .await
            .expect("store");
        store
            .begin_wallet_creation(
                Network::Regtest,
                Fingerprint::default(),
                false,
                InitialScan::FromTip,
            )
            .await
            .expect("a wallet");
        let events = crate::events::EventHub::open(store.clone(), EventRetention::default())
            .await
            .expect("events");
        let layout = crate::datadir::Layout::new(dir.to_path_buf());
        Engine::new(
            store,
            layout.clone(),
            crate::keys::Seeds::new(layout.seed_files(), Default::default()),
            events,
            super::super::autopilot::Policy::default(),
        )
    }

    /// "Not loaded yet" comes at once while nothing is opening the wallet (its chain
    /// source is down between attempts); while an open is under way, a request waits
    /// for it to end, and at most `LOAD_WAIT`.
    #[tokio::test(start_paused = true)]
    async fn a_request_waits_for_an_open_under_way_and_only_for_that() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = engine_with_an_unloaded_wallet(dir.path()).await;
        let started = tokio::time::Instant::now();
        assert!(matches!(engine.loaded().await, Err(EngineError::NotLoaded)));
        assert_eq!(
            started.elapsed(),
            Duration::ZERO,
            "no open under way: no wait"
        );

        // An open that ends (here: fails) after 3 s.
        engine.opening.send_replace(true);
        let ender = Arc::clone(&engine);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            ender.opening.send_replace(false);
        });
        let started = tokio::time::Instant::now();
        assert!(matches!(engine.loaded().await, Err(EngineError::NotLoaded)));
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(3),
            "waited for the open"
        );

        // An open that does not end: bounded.
        engine.opening.send_replace(true);
        let started = tokio::time::Instant::now();
        assert!(matches!(engine.loaded().await, Err(EngineError::NotLoaded)));
        assert_eq!(started.elapsed(), LOAD_WAIT);
    }

    /// bark tells the Ark server it is berthd (`<name>/<version>`, the form the server
    /// accepts), unless `config.toml` names a client of its own.
    #[test]
    fn the_ark_server_is_told_the_client_is_berthd() {
        let config = with_user_agent(bark::Config::network_default(Network::Regtest));
        assert_eq!(
            config.user_agent.as_deref(),
            Some(concat!("berthd/", env!("CARGO_PKG_VERSION")))
        );
        let pinned = bark::Config {
            user_agent: Some("kiosk/2".into()),
            ..bark::Config::network_default(Network::Regtest)
        };
        assert_eq!(
            with_user_agent(pinned).user_agent.as_deref(),
            Some("kiosk/2")
        );
    }
}

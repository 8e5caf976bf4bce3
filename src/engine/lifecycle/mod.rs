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
//!
//! Creating (and importing) is `create.rs`; opening, loading, deleting and unloading
//! are here.

use std::sync::Arc;
use std::time::Duration;

use bark::persist::BarkPersister;
use bitcoin::Network;
use bitcoin::bip32::Fingerprint;

use super::{Engine, EngineError, LoadedWallet};
use crate::store::InitialScan;

mod create;
pub use create::new_mnemonic;

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

/// How long a wrong passphrase for [`Engine::unlock`] is answered late.
const WRONG_PASSPHRASE_PAUSE: Duration = Duration::from_secs(2);

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
    /// On start: load the wallet in the background (no network is needed to start). A
    /// creation that a crash interrupted is taken up again, recovery included. A seed
    /// sealed with a passphrase that berthd was not given leaves the wallet locked
    /// until [`Engine::unlock`].
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
        // secure element) stops the start: the error names what is missing. Only a
        // passphrase nobody gave yet is waited for: a person types it after a reboot.
        let phrase = match self.read_seed().await {
            Err(EngineError::Seed(crate::keys::KeyError::PassphraseNeeded)) => {
                self.locked.store(true, std::sync::atomic::Ordering::SeqCst);
                tracing::warn!(fingerprint = %record.fingerprint,
                    "the wallet is locked: its seed is sealed with a passphrase; unlock it in \
                     the console or with POST /api/v1/wallet/unlock");
                return Ok(());
            }
            other => other?,
        };
        self.load_from(record, phrase)
    }

    /// Unlock a wallet that started locked with its seed's passphrase, and load it. A
    /// wrong passphrase is answered after a pause (Argon2id already costs about a
    /// second; the pause keeps guessing slow even on a fast machine). One attempt runs
    /// at a time: each takes the KDF's memory.
    pub async fn unlock(
        self: &Arc<Self>,
        passphrase: zeroize::Zeroizing<String>,
    ) -> Result<bitcoin::bip32::Fingerprint, EngineError> {
        let _lifecycle = self.lifecycle.lock().await;
        let Some(record) = self.store.wallet_record().await? else {
            return Err(EngineError::NoWallet);
        };
        if !self.is_locked() {
            return Err(EngineError::WrongState("the wallet is not locked".into()));
        }
        if passphrase.is_empty() {
            return Err(EngineError::InvalidRequest(
                "the passphrase is empty".into(),
            ));
        }
        let candidate = self.seeds.with_given(passphrase);
        let trying = candidate.clone();
        let opened = tokio::task::spawn_blocking(move || trying.read())
            .await
            .map_err(|e| EngineError::Internal {
                context: "unlocking the seed",
                source: e.into(),
            })?;
        let phrase = match opened {
            Ok(phrase) => phrase,
            Err(crate::keys::KeyError::WrongKey) => {
                tracing::warn!("a wrong passphrase was given to unlock the wallet");
                tokio::time::sleep(WRONG_PASSPHRASE_PAUSE).await;
                return Err(EngineError::InvalidRequest(
                    "that passphrase does not open the seed".into(),
                ));
            }
            Err(e) => return Err(e.into()),
        };
        self.seeds.keep_given(&candidate);
        let fingerprint = record.fingerprint;
        self.load_from(record, phrase)?;
        self.locked
            .store(false, std::sync::atomic::Ordering::SeqCst);
        tracing::info!(%fingerprint, "the wallet was unlocked");
        Ok(fingerprint)
    }

    /// Hold the backup key and start loading the wallet whose seed is `phrase`.
    fn load_from(
        self: &Arc<Self>,
        record: crate::store::WalletRecord,
        phrase: zeroize::Zeroizing<String>,
    ) -> Result<(), EngineError> {
        let mnemonic =
            bark::bip39::Mnemonic::parse(phrase.trim()).map_err(|e| EngineError::Internal {
                context: "parsing the seed phrase",
                source: e.into(),
            })?;
        drop(phrase);
        self.hold_backup_key(record.fingerprint, &mnemonic);
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
        self.spawn_loader(
            record.network,
            record.fingerprint,
            with_user_agent(config),
            mnemonic,
            mode,
        );
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
        if self.is_locked() {
            return Err(EngineError::Locked);
        }
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
    /// `fingerprint` is the wallet's, from its record: deriving it again from the
    /// mnemonic would cost a BIP-39 stretch (milliseconds) on the way to serving.
    fn spawn_loader(
        self: &Arc<Self>,
        network: Network,
        fingerprint: Fingerprint,
        config: bark::Config,
        mnemonic: bark::bip39::Mnemonic,
        mode: OpenMode,
    ) {
        let engine = Arc::clone(self);
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
            *self.chain_view.lock().await = None;
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
    /// record how its creation went, then start the event recorder, fail the refreshes
    /// a crash left without a round state (`rounds`), then start the work that makes
    /// bark notify, so none of its notifications can be missed.
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
        // Between the two: its notifications are recorded, and no join or mailbox message
        // can be under way.
        self.repair_what_a_crash_left(&opened.wallet.wallet).await;
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
        self.backup_key
            .send_replace(crate::engine::backup::HeldKey::None);
        self.locked
            .store(false, std::sync::atomic::Ordering::SeqCst);
        self.seeds.forget_given();
        self.store.wipe_wallet().await?;
        self.events.forget_recent();
        *self.chain_view.lock().await = None;
        // The next wallet may have another Ark server: none of this one's terms, alerts
        // or failure counts may carry over to it.
        self.autopilot.forget().await;
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

    /// What a kill can leave half-done in bark's own writes, finished or failed at
    /// load: refreshes with no round state ([`Engine::fail_orphaned_round_movements`])
    /// and incoming arkoor payments with no amounts
    /// ([`Engine::repair_interrupted_arkoor_receives`]). Both start from the pending
    /// movements, listed in one scan of the history.
    async fn repair_what_a_crash_left(&self, wallet: &bark::Wallet) {
        use bark::subsystem::Subsystem;
        let subsystems = [Subsystem::ROUND.as_name(), Subsystem::ARKOOR.as_name()];
        match self.store.pending_movements(&subsystems).await {
            Ok(pending) => {
                self.fail_orphaned_round_movements(wallet, &pending).await;
                self.repair_interrupted_arkoor_receives(wallet, &pending)
                    .await;
            }
            Err(e) => tracing::error!(error = %e,
                "cannot list the movements a crash may have left pending; \
                 they stay as they are until the next load"),
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
                bitcoin::bip32::Fingerprint::default(),
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

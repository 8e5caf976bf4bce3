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

use super::session::{Recorder, Session};
use super::{Engine, EngineError, LoadedWallet, WalletState};
use crate::store::InitialScan;

mod bark_config;
mod create;
mod request;
pub use create::new_mnemonic;
pub use request::{CreateParts, CreateRefused};

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
                self.advance(
                    |now| matches!(now, WalletState::Closed),
                    WalletState::Locked,
                )
                .await;
                tracing::warn!(fingerprint = %record.fingerprint,
                    "the wallet is locked: its seed is sealed with a passphrase; unlock it in \
                     the console or with POST /api/v1/wallet/unlock");
                return Ok(());
            }
            other => other?,
        };
        self.load_from(record, phrase).await
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
        self.load_from(record, phrase).await?;
        tracing::info!(%fingerprint, "the wallet was unlocked");
        Ok(fingerprint)
    }

    /// Hold the backup key and start loading the wallet whose seed is `phrase`.
    async fn load_from(
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
            bark_config::load(record.network, &self.layout.bark_config()).map_err(|e| {
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
        )
        .await;
        Ok(())
    }

    /// The open wallet: [`EngineError::NoWallet`] without one, [`EngineError::Locked`]
    /// while its seed waits for its passphrase, [`EngineError::NotLoaded`] while bark
    /// cannot open it yet. An open under way is waited for, at most [`LOAD_WAIT`].
    pub async fn loaded(&self) -> Result<LoadedWallet, EngineError> {
        let mut state = self.state.subscribe();
        let mut now = state.borrow_and_update().clone();
        if let WalletState::Opening(_) = now {
            // Whatever the outcome, look again; a timeout is "not loaded yet".
            let _ = tokio::time::timeout(
                LOAD_WAIT,
                state.wait_for(|s| !matches!(s, WalletState::Opening(_))),
            )
            .await;
            now = self.state.borrow().clone();
        }
        match now {
            WalletState::Loaded(session) => Ok(session.wallet.clone()),
            WalletState::Locked => Err(EngineError::Locked),
            WalletState::Opening(_) | WalletState::Waiting(_) => Err(EngineError::NotLoaded),
            WalletState::Closed => {
                self.require_wallet().await?;
                Err(EngineError::NotLoaded)
            }
        }
    }

    /// Keep trying to open the wallet (bark needs its chain source for that, and an
    /// import its Ark server too), with backoff up to a minute, until it is loaded, or
    /// deleted or replaced meanwhile.
    /// `fingerprint` is the wallet's, from its record: deriving it again from the
    /// mnemonic would cost a BIP-39 stretch (milliseconds) on the way to serving.
    async fn spawn_loader(
        self: &Arc<Self>,
        network: Network,
        fingerprint: Fingerprint,
        config: bark::Config,
        mnemonic: bark::bip39::Mnemonic,
        mode: OpenMode,
    ) {
        let engine = Arc::clone(self);
        // Opening before the task runs, so a request that arrives in the next instant
        // waits. From wherever the wallet was not open: closed, locked (an unlock), or
        // waiting (a create with `force` whose first open failed).
        self.advance(
            |now| !matches!(now, WalletState::Loaded(_)),
            WalletState::Opening(fingerprint),
        )
        .await;
        // A loader started before the wallet was last closed is stale, even when the same
        // seed was created again since (same fingerprint): it must not open or install.
        let epoch = self.closes.load(std::sync::atomic::Ordering::SeqCst);
        let closes = Arc::clone(&self.closes);
        let ours = move |now: &WalletState| {
            closes.load(std::sync::atomic::Ordering::SeqCst) == epoch
                && matches!(now, WalletState::Opening(f) | WalletState::Waiting(f) if *f == fingerprint)
        };
        tokio::spawn(async move {
            let mut delay = Duration::from_secs(1);
            loop {
                // Deleted (or replaced) meanwhile, or shut down: the loader's work is over.
                if !engine
                    .advance(&ours, WalletState::Opening(fingerprint))
                    .await
                {
                    return;
                }
                match engine.open(network, config.clone(), &mnemonic, mode).await {
                    Ok(opened) => {
                        // Under the lifecycle lock, so a delete that ran while bark was
                        // opening cannot be undone by this load.
                        let _lifecycle = engine.lifecycle.lock().await;
                        let still_ours = ours(&engine.state.borrow());
                        if still_ours && engine.install(opened, fingerprint).await {
                            tracing::info!(%fingerprint, "wallet loaded");
                        }
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, retry_in = ?delay, "cannot load the wallet yet");
                    }
                }
                if !engine
                    .advance(&ours, WalletState::Waiting(fingerprint))
                    .await
                {
                    return;
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(60));
            }
        });
    }

    /// [`Engine::open`] of a wallet being created (the caller holds the lifecycle
    /// lock), with requests that need the wallet waiting for it meanwhile. A failed
    /// open leaves the wallet `Waiting`: the caller decides whether a loader goes on.
    async fn open_watched(
        &self,
        network: Network,
        fingerprint: Fingerprint,
        config: bark::Config,
        mnemonic: &bark::bip39::Mnemonic,
        mode: OpenMode,
    ) -> Result<Opened, OpenError> {
        self.advance(
            |now| matches!(now, WalletState::Closed),
            WalletState::Opening(fingerprint),
        )
        .await;
        let opened = self.open(network, config, mnemonic, mode).await;
        if opened.is_err() {
            self.advance(
                |now| matches!(now, WalletState::Opening(f) if *f == fingerprint),
                WalletState::Waiting(fingerprint),
            )
            .await;
        }
        // On success the wallet stays `Opening` until it is installed (`install`).
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
        // The BIP-39 seed once for both wallets: each derivation is 2,048 rounds of
        // HMAC-SHA512, CPU a start shares with the requests it is already serving.
        let seed = zeroize::Zeroizing::new(mnemonic.to_seed(""));
        let mut onchain =
            bark::onchain::OnchainWallet::load_or_create(network, *seed, persister.clone())
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
            bark::WalletSeed::new_from_seed(network, &seed),
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
            wallet: LoadedWallet {
                wallet,
                onchain,
                autopilot: super::autopilot::Autopilot::new(self.autopilot_policy.clone()),
            },
            recovery,
        })
    }

    /// Make an opened wallet the loaded one (the caller holds the lifecycle lock), if
    /// it is still the one being opened (not deleted meanwhile): record how its
    /// creation went, then start the event recorder, fail the refreshes and boards a
    /// crash left without their state (`rounds`, `boards`), then start the work that
    /// makes bark notify, so none of its notifications can be missed. Whether it was
    /// installed.
    async fn install(self: &Arc<Self>, opened: Opened, fingerprint: Fingerprint) -> bool {
        let ours =
            move |now: &WalletState| matches!(now, WalletState::Opening(f) if *f == fingerprint);
        if !ours(&self.state.borrow()) {
            return false;
        }
        if let Some(found) = opened.recovery {
            if let Err(e) = self
                .store
                .finish_wallet_creation(found.record.clone())
                .await
            {
                // The store failing is fatal (the daemon stops); the next start
                // creates the wallet again, recovery included.
                tracing::error!(error = %e, "cannot record the wallet's creation");
                self.advance(ours, WalletState::Closed).await;
                return false;
            }
            self.announce_recovery(&found).await;
        }
        let recorder = self.start_recorder(&opened.wallet.wallet).await;
        // Between the two: its notifications are recorded, and no join or mailbox message
        // can be under way.
        self.repair_what_a_crash_left(&opened.wallet.wallet).await;
        let tasks = self.start_wallet_tasks(opened.wallet.clone()).await;
        let session = Arc::new(Session::new(
            fingerprint,
            opened.wallet,
            recorder,
            tasks,
            Arc::clone(&self.tasks),
        ));
        let installed = self
            .advance(ours, WalletState::Loaded(Arc::clone(&session)))
            .await;
        if !installed {
            session.close().await;
        }
        installed
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
        // Closing drops the session whole (its tasks, recorder, autopilot memory, chain
        // view) and the backup key: the next wallet may have another Ark server, and
        // nothing of this one may carry over to it.
        self.unload().await;
        self.seeds.forget_given();
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

    /// Close the wallet, whatever state it is in (shutdown, delete): a session's tasks
    /// stop, and its event recorder after recording what bark sent until then; a
    /// loader stops at its next step.
    pub async fn unload(&self) {
        self.advance(|_| true, WalletState::Closed).await;
    }

    /// What a kill or a power cut can leave half-done in bark's own writes, finished or
    /// failed at load: refreshes with no round state
    /// ([`Engine::fail_orphaned_round_movements`]), boards with no wallet action
    /// ([`Engine::fail_orphaned_board_movements`]) and incoming arkoor payments with no
    /// amounts ([`Engine::repair_interrupted_arkoor_receives`]). All start from the
    /// pending movements, listed in one scan of the history.
    async fn repair_what_a_crash_left(&self, wallet: &bark::Wallet) {
        use bark::subsystem::Subsystem;
        let subsystems = [
            Subsystem::ROUND.as_name(),
            Subsystem::BOARD.as_name(),
            Subsystem::ARKOOR.as_name(),
        ];
        match self.store.pending_movements(&subsystems).await {
            Ok(pending) => {
                self.fail_orphaned_round_movements(wallet, &pending).await;
                self.fail_orphaned_board_movements(wallet, &pending).await;
                self.repair_interrupted_arkoor_receives(wallet, &pending)
                    .await;
            }
            Err(e) => tracing::error!(error = %e,
                "cannot list the movements a crash may have left pending; \
                 they stay as they are until the next load"),
        }
    }

    async fn start_recorder(&self, wallet: &bark::Wallet) -> Option<Recorder> {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        match self.events.spawn_recorder(wallet, stopped).await {
            Ok(task) => Some(Recorder { stop, task }),
            Err(e) => {
                // The store failing is fatal (the daemon stops); say what it cost.
                tracing::error!(error = %e, "cannot start recording wallet events");
                None
            }
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
mod tests;

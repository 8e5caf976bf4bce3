//! Creating (or importing) the wallet: the checks of the datadir, the seed and
//! `config.toml` written first, the record, and the open that creates the wallet in
//! bark (with seed recovery for an import) before the request is answered.

use std::path::PathBuf;
use std::sync::Arc;

use bitcoin::bip32::Fingerprint;

use super::{OpenError, OpenMode, with_user_agent};
use crate::engine::{BitcoindAuth, ChainSource, CreateWallet, Engine, EngineError, WalletConfig};
use crate::fsutil;
use crate::store::InitialScan;

impl Engine {
    /// Create (or import) the wallet, and open it before answering.
    ///
    /// The seed (sealed, or barkd's plaintext file when no key source is configured)
    /// and `config.toml` are written before the wallet is recorded in the store, so a
    /// crash in between leaves a seed without a wallet (which the next create refuses
    /// to overwrite), never a wallet without its seed. The work runs in a task of its
    /// own: a client that goes away, or the request time limit, must not cut a creation
    /// off half-way.
    pub async fn create(self: &Arc<Self>, req: CreateWallet) -> Result<Fingerprint, EngineError> {
        let engine = Arc::clone(self);
        tokio::spawn(async move { engine.create_now(req).await })
            .await
            .map_err(|e| EngineError::Internal {
                context: "creating the wallet",
                source: e.into(),
            })?
    }

    async fn create_now(self: &Arc<Self>, req: CreateWallet) -> Result<Fingerprint, EngineError> {
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
        let config = match super::bark_config::load(req.network, &config_path) {
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
        let mnemonic = match (req.mnemonic, req.new_seed) {
            (Some(m), _) | (None, Some(m)) => m,
            (None, None) => new_mnemonic()?,
        };
        let fingerprint = bark::WalletSeed::new_from_mnemonic(req.network, &mnemonic).fingerprint();
        let mut written_seed = None;
        if !seed_file_exists {
            let adds_passphrase = req.seed_passphrase.is_some();
            let seeds = match req.seed_passphrase {
                Some(passphrase) => self.seeds.with_given(passphrase),
                None => self.seeds.clone(),
            };
            let sealing = seeds.clone();
            let phrase = zeroize::Zeroizing::new(mnemonic.to_string());
            let location = tokio::task::spawn_blocking(move || {
                sealing.create_sealed(&phrase, adds_passphrase)
            })
            .await
            .map_err(|e| EngineError::Internal {
                context: "storing the seed",
                source: e.into(),
            })??;
            if adds_passphrase {
                self.seeds.keep_given(&seeds);
            }
            let file = self.seeds.path_of(location).to_path_buf();
            written_seed = Some(RemoveOnDrop(Some(file)));
        } else if req.seed_passphrase.is_some() {
            return Err(EngineError::InvalidRequest(
                "seed_passphrase seals a new seed, but the datadir holds one already".into(),
            ));
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
            .open_watched(req.network, fingerprint, config.clone(), &mnemonic, mode)
            .await
        {
            Ok(opened) => {
                self.hold_backup_key(fingerprint, &mnemonic);
                self.install(opened, fingerprint).await;
                tracing::info!(%fingerprint, imported, "wallet created");
                Ok(fingerprint)
            }
            // A storage failure is fatal (the daemon stops), never a reason to go on.
            Err(OpenError::Store(e)) => {
                self.unload().await;
                Err(EngineError::Store(e))
            }
            Err(e) if req.force => {
                tracing::warn!(%fingerprint, error = %e,
                    "wallet created; it loads once its chain source and Ark server answer");
                self.hold_backup_key(fingerprint, &mnemonic);
                self.spawn_loader(req.network, fingerprint, config, mnemonic, mode)
                    .await;
                Ok(fingerprint)
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot create the wallet");
                // Nothing is left: not the record, not what bark or the on-chain scan
                // stored, then not the files this call wrote (in that order: a crash in
                // between leaves a seed without a wallet, never the reverse).
                self.unload().await;
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
}

/// bark's `config.toml` for a new wallet (the format `bark::Config` reads, and
/// `bark_config`).
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

/// A new 12-word phrase from the system's randomness.
pub fn new_mnemonic() -> Result<bark::bip39::Mnemonic, EngineError> {
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

//! The wallet seed at rest.
//!
//! barkd keeps the mnemonic in a plaintext file, so a copied SD card is a stolen wallet.
//! Berth seals it instead (`<datadir>/seed.sealed`) and still restarts unattended: the
//! key comes from key sources that a copy of the card does not carry.
//!
//! - [`envelope`]: the versioned file format (XChaCha20-Poly1305, header as AAD).
//! - [`sources`]: the [`KeySource`] trait and its kinds — a passphrase (Argon2id), a
//!   credential file (systemd `LoadCredentialEncrypted=`), an ATECC608 secure element
//!   on I²C ([`atecc608`]), or several combined (HKDF).
//! - [`vault`]: sealing and opening one envelope file, atomically.
//! - [`Seeds`] (here): the datadir's seed, sealed or barkd's plaintext `mnemonic` file,
//!   and which sources `berth.toml [seed]` configures.
//!
//! The phrase lives in [`Zeroizing`] buffers (and bark's `Mnemonic`, which wipes itself);
//! types that hold secrets have redacted `Debug`. The honest limit: the daemon unlocks
//! without a person, so whoever holds the running box (or the card *and* the secure
//! element, or the card and the host's credential key) can too; this protects a copied
//! card, not a stolen appliance without secure boot (ADR 0002).

use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

pub mod atecc608;
pub mod envelope;
pub mod sources;
pub mod vault;

pub use envelope::{Envelope, Kdf, KdfParams, Sources};
pub use sources::KeySource;
pub use vault::SeedVault;

use crate::fsutil::{self, FsError};
/// The environment variable that gives the seed passphrase.
pub const PASSPHRASE_ENV: &str = "BERTH_SEED_PASSPHRASE";

/// Argon2id costs for a new passphrase-sealed seed: 64 MiB, 3 passes, 1 lane. Sized to
/// unlock in well under 2 s on a Raspberry Pi 4 (docs/seed.md shows the arithmetic).
pub const DEFAULT_ARGON2: KdfParams = KdfParams {
    memory_kib: 64 * 1024,
    iterations: 3,
    parallelism: 1,
};

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("the seed envelope is unreadable: {0}")]
    Malformed(String),
    #[error(
        "cannot unlock the seed: wrong key (a wrong passphrase or credential, another \
         secure element, or a modified envelope)"
    )]
    WrongKey,
    #[error("the seed is bound to secure element {sealed_to}, but the one found is {found}")]
    WrongBinding { sealed_to: String, found: String },
    #[error(
        "the seed is sealed with {sealed_with}, but berthd has {configured}: configure \
         the same key sources in berth.toml [seed] (a passphrase comes from {PASSPHRASE_ENV} \
         or [seed] passphrase_file)"
    )]
    MissingSource {
        sealed_with: String,
        configured: String,
    },
    /// The seed is sealed with a passphrase and none is configured or was given: berthd
    /// starts locked and waits for one (`Engine::unlock`).
    #[error(
        "the seed needs its passphrase: unlock it in the console or with POST \
         /api/v1/wallet/unlock, or set {PASSPHRASE_ENV} or berth.toml [seed] passphrase_file"
    )]
    PassphraseNeeded,
    #[error("{0}")]
    Source(String),
    #[error("the secure element failed: {0}")]
    SecureElement(#[from] atecc608::Error),
    #[error(transparent)]
    File(#[from] FsError),
}

impl KeyError {
    fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> KeyError {
        let path = path.to_path_buf();
        move |source| KeyError::File(FsError::Io { what, path, source })
    }
}

/// The secure element's connection: `/dev/i2c-N`, the chip's address and the slot that
/// holds the key (provisioned beforehand; see `atecc608`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecureElementSettings {
    pub bus: PathBuf,
    pub address: u8,
    pub slot: Option<u8>,
}

/// What `berth.toml [seed]` and the environment say about the seed's key.
#[derive(Clone, Default)]
pub struct SeedSettings {
    /// The sources that seal a new seed; empty: barkd's plaintext file.
    pub seal_with: Option<Sources>,
    /// Sources added to `seal_with` for a new seed if they answer at that moment (on
    /// the appliance, the secure element: fitted on some boxes, not on others).
    pub seal_when_present: Option<Sources>,
    pub passphrase: Option<Zeroizing<String>>,
    pub passphrase_file: Option<PathBuf>,
    /// The credential's file: `$CREDENTIALS_DIRECTORY/<name>` or a path.
    pub credential: Option<PathBuf>,
    pub secure_element: Option<SecureElementSettings>,
    pub argon2: Option<KdfParams>,
}

impl std::fmt::Debug for SeedSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeedSettings")
            .field("seal_with", &self.seal_with.map(Sources::names))
            .field(
                "seal_when_present",
                &self.seal_when_present.map(Sources::names),
            )
            .field(
                "passphrase",
                &self.passphrase.as_ref().map(|_| "<redacted>"),
            )
            .field("passphrase_file", &self.passphrase_file)
            .field("credential", &self.credential)
            .field("secure_element", &self.secure_element)
            .field("argon2", &self.argon2)
            .finish()
    }
}

/// Where a datadir's seed is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedLocation {
    Sealed,
    /// barkd's plaintext `mnemonic` file.
    Plaintext,
}

/// What `berthd seed status` shows: nothing secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeedStatus {
    None,
    Plaintext,
    Sealed {
        version: u8,
        sources: Vec<&'static str>,
        /// Hex; the secure element's serial, or empty.
        binding: String,
        kdf: Kdf,
    },
}

/// Where a wallet's seed is kept (the datadir's `Layout` names them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedFiles {
    /// The sealed envelope (its vault keeps the one being replaced beside it).
    pub sealed: PathBuf,
    /// barkd's plaintext `mnemonic` file.
    pub plaintext: PathBuf,
}

/// Opens the secure element named by the settings: the real I²C bus, or (tests) a fake
/// chip behind the same driver.
pub type SecureElementOpener = std::sync::Arc<
    dyn Fn(&SecureElementSettings) -> Result<Box<dyn KeySource>, KeyError> + Send + Sync,
>;

/// The datadir's seed: sealed when key sources are configured, else barkd's plaintext
/// `mnemonic` file. All calls block (file I/O, Argon2id, I²C): run them on a blocking
/// thread.
#[derive(Clone)]
pub struct Seeds {
    files: SeedFiles,
    settings: SeedSettings,
    /// A passphrase a person gave while berthd runs (the console's unlock page, or a
    /// create that adds one), used when the settings give none. Shared by every clone;
    /// held for the process's life, as the unsealed seed itself is.
    given: std::sync::Arc<std::sync::Mutex<Option<Zeroizing<String>>>>,
    open_secure_element: SecureElementOpener,
}

impl std::fmt::Debug for Seeds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seeds")
            .field("files", &self.files)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Seeds {
    pub fn new(files: SeedFiles, settings: SeedSettings) -> Seeds {
        Seeds {
            files,
            settings,
            given: Default::default(),
            open_secure_element: std::sync::Arc::new(open_i2c_secure_element),
        }
    }

    /// These seeds with `passphrase` given (not yet kept: see [`Seeds::keep_given`]),
    /// to try it without changing what the running daemon uses.
    pub fn with_given(&self, passphrase: Zeroizing<String>) -> Seeds {
        Seeds {
            given: std::sync::Arc::new(std::sync::Mutex::new(Some(passphrase))),
            ..self.clone()
        }
    }

    /// Keep the passphrase `tried` was given (it opened the seed, or sealed a new one)
    /// for every later read of these seeds.
    pub fn keep_given(&self, tried: &Seeds) {
        let passphrase = tried
            .given
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        *self.given.lock().unwrap_or_else(|e| e.into_inner()) = passphrase;
    }

    /// Forget a given passphrase (the wallet was deleted).
    pub fn forget_given(&self) {
        *self.given.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The same seeds, with the secure element opened by `open` (tests: a fake chip).
    pub fn with_secure_element(mut self, open: SecureElementOpener) -> Seeds {
        self.open_secure_element = open;
        self
    }

    pub fn vault(&self) -> SeedVault {
        SeedVault::new(self.files.sealed.clone())
    }

    fn plaintext_path(&self) -> PathBuf {
        self.files.plaintext.clone()
    }

    /// The file a seed at `location` is in.
    pub fn path_of(&self, location: SeedLocation) -> &Path {
        match location {
            SeedLocation::Sealed => &self.files.sealed,
            SeedLocation::Plaintext => &self.files.plaintext,
        }
    }

    /// Whether the seed is sealed, plaintext, or absent. Sealed wins when both exist
    /// (a `seed seal` interrupted before it removed the plaintext).
    pub fn location(&self) -> Option<SeedLocation> {
        if self.vault().exists() {
            Some(SeedLocation::Sealed)
        } else if self.plaintext_path().exists() {
            Some(SeedLocation::Plaintext)
        } else {
            None
        }
    }

    /// The sources a new seed is sealed with, if any, not counting the optional ones.
    pub fn seals_with(&self) -> Option<Sources> {
        self.settings.seal_with
    }

    /// The sources added to those for a new seed if they answer when it is sealed.
    pub fn seals_when_present(&self) -> Option<Sources> {
        self.settings.seal_when_present
    }

    /// The sources a seed sealed now gets: the configured ones, plus each optional one
    /// that answers (logged either way, so the owner can see why a chip was left out).
    fn sources_for_new_seed(&self) -> Option<Sources> {
        let mut sources = self.settings.seal_with;
        let Some(optional) = self.settings.seal_when_present else {
            return sources;
        };
        for kind in [
            Sources::PASSPHRASE,
            Sources::CREDENTIAL,
            Sources::SECURE_ELEMENT,
        ] {
            if !optional.contains(kind) || sources.is_some_and(|s| s.contains(kind)) {
                continue;
            }
            match self.probe(kind) {
                Ok(()) => {
                    tracing::info!(target: "berth::keys", source = %kind.names().join("+"),
                        "an optional seed key source answers: the new seed is sealed with it too");
                    sources = Some(sources.map_or(kind, |s| s.union(kind)));
                }
                Err(e) => {
                    tracing::info!(target: "berth::keys", source = %kind.names().join("+"),
                        reason = %e, "an optional seed key source does not answer: not used");
                }
            }
        }
        sources
    }

    /// Whether `kind` can give a key now, without using it (a secure element's key
    /// may have a limited number of uses): a passphrase is configured, the credential
    /// file is there, the chip answers with its serial number.
    fn probe(&self, kind: Sources) -> Result<(), KeyError> {
        if kind == Sources::PASSPHRASE {
            self.passphrase().map(drop)
        } else if kind == Sources::CREDENTIAL {
            let path = self.credential_path()?;
            std::fs::metadata(&path)
                .map(drop)
                .map_err(|e| KeyError::Source(format!("{}: {e}", path.display())))
        } else {
            self.secure_element()?.binding().map(drop)
        }
    }

    /// The phrase, unsealed (or read from the plaintext file).
    pub fn read(&self) -> Result<Zeroizing<String>, KeyError> {
        match self.location() {
            Some(SeedLocation::Sealed) => {
                let vault = self.vault();
                let sealed_with = vault.envelope()?.sources;
                let mut source = self.source(sealed_with)?;
                vault.open(source.as_mut())
            }
            Some(SeedLocation::Plaintext) => {
                let path = self.plaintext_path();
                let text = Zeroizing::new(
                    std::fs::read_to_string(&path).map_err(KeyError::io("cannot read", &path))?,
                );
                Ok(Zeroizing::new(text.trim().to_owned()))
            }
            None => Err(KeyError::Source("the datadir holds no seed".into())),
        }
    }

    /// Store a new wallet's phrase: sealed with the configured sources, else (no
    /// source configured at all) in barkd's plaintext file, with a warning. Never
    /// overwrites a seed. Returns where it went.
    pub fn create(&self, phrase: &str) -> Result<SeedLocation, KeyError> {
        self.create_sealed(phrase, false)
    }

    /// [`Seeds::create`], and with `add_passphrase` the given passphrase
    /// ([`Seeds::with_given`]) seals it too, on top of the configured sources.
    pub fn create_sealed(
        &self,
        phrase: &str,
        add_passphrase: bool,
    ) -> Result<SeedLocation, KeyError> {
        if self.location().is_some() {
            return Err(KeyError::Source("the datadir already holds a seed".into()));
        }
        let mut sources = self.sources_for_new_seed();
        if add_passphrase {
            sources = Some(sources.map_or(Sources::PASSPHRASE, |s| s.union(Sources::PASSPHRASE)));
        }
        match sources {
            Some(sources) => {
                let mut source = self.source(sources)?;
                self.vault()
                    .seal(phrase, source.as_mut(), self.kdf_for(sources))?;
                tracing::info!(target: "berth::keys", sources = %sources.names().join("+"),
                    "seed sealed");
                Ok(SeedLocation::Sealed)
            }
            None => {
                tracing::warn!(target: "berth::keys",
                    "no seed key source is configured: storing the seed in the datadir's \
                     plaintext mnemonic file (set {PASSPHRASE_ENV} or berth.toml [seed] sources)");
                fsutil::write_atomically(&self.plaintext_path(), phrase.as_bytes(), 0o600)?;
                Ok(SeedLocation::Plaintext)
            }
        }
    }

    /// `berthd seed seal`: seal barkd's plaintext file with the configured sources and
    /// remove the plaintext only once the envelope has read back.
    pub fn seal_plaintext(&self) -> Result<Sources, KeyError> {
        let Some(sources) = self.sources_for_new_seed() else {
            return Err(KeyError::Source(format!(
                "no key source is configured: set {PASSPHRASE_ENV}, or berth.toml [seed] sources"
            )));
        };
        let path = self.plaintext_path();
        match self.location() {
            None => return Err(KeyError::Source("the datadir holds no seed".into())),
            Some(SeedLocation::Sealed) if !path.exists() => {
                return Err(KeyError::Source("the seed is sealed already".into()));
            }
            // An earlier `seed seal` stopped before removing the plaintext: check the
            // envelope holds the same phrase, then finish.
            Some(SeedLocation::Sealed) => {
                let sealed = self.read()?;
                let plain = Zeroizing::new(
                    std::fs::read_to_string(&path).map_err(KeyError::io("cannot read", &path))?,
                );
                if sealed.as_str() != plain.trim() {
                    return Err(KeyError::Source(
                        "seed.sealed and mnemonic hold different seeds: move one out of the datadir"
                            .into(),
                    ));
                }
            }
            Some(SeedLocation::Plaintext) => {
                let phrase = self.read()?;
                let mut source = self.source(sources)?;
                self.vault()
                    .seal(&phrase, source.as_mut(), self.kdf_for(sources))?;
            }
        }
        std::fs::remove_file(&path).map_err(KeyError::io("cannot remove", &path))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(KeyError::io("cannot sync", dir))?;
        Ok(sources)
    }

    /// Remove every copy of the seed (wallet deletion).
    pub fn remove(&self) -> Result<(), KeyError> {
        let vault = self.vault();
        for path in [
            vault.path().to_path_buf(),
            vault.previous_path(),
            self.plaintext_path(),
        ] {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(KeyError::io("cannot remove", &path)(e)),
            }
        }
        Ok(())
    }

    pub fn status(&self) -> Result<SeedStatus, KeyError> {
        Ok(match self.location() {
            None => SeedStatus::None,
            Some(SeedLocation::Plaintext) => SeedStatus::Plaintext,
            Some(SeedLocation::Sealed) => {
                let envelope = self.vault().envelope()?;
                SeedStatus::Sealed {
                    version: envelope.version,
                    sources: envelope.sources.names(),
                    binding: vault::hex(&envelope.binding),
                    kdf: envelope.kdf,
                }
            }
        })
    }

    fn kdf_for(&self, sources: Sources) -> Kdf {
        if sources.contains(Sources::PASSPHRASE) {
            Kdf::Argon2id(self.settings.argon2.unwrap_or(DEFAULT_ARGON2))
        } else {
            Kdf::None
        }
    }

    /// The key source for `sources`, from the settings.
    fn source(&self, sources: Sources) -> Result<Box<dyn KeySource>, KeyError> {
        let mut parts: Vec<Box<dyn KeySource>> = Vec::new();
        if sources.contains(Sources::PASSPHRASE) {
            parts.push(Box::new(sources::Passphrase::new(self.passphrase()?)?));
        }
        if sources.contains(Sources::CREDENTIAL) {
            parts.push(Box::new(sources::CredentialFile::new(
                self.credential_path()?,
            )));
        }
        if sources.contains(Sources::SECURE_ELEMENT) {
            parts.push(self.secure_element()?);
        }
        match parts.len() {
            1 => Ok(parts.remove(0)),
            _ => Ok(Box::new(sources::Combined::new(parts)?)),
        }
    }

    fn credential_path(&self) -> Result<PathBuf, KeyError> {
        self.settings.credential.clone().ok_or_else(|| {
            KeyError::Source(
                "the seed needs its credential, but $CREDENTIALS_DIRECTORY is not set and \
                 berth.toml [seed] credential is not a path (on the appliance, systemd \
                 decrypts /etc/credstore.encrypted/berth-seed for berthd.service)"
                    .into(),
            )
        })
    }

    fn passphrase(&self) -> Result<Zeroizing<String>, KeyError> {
        if let Some(passphrase) = &self.settings.passphrase {
            return Ok(passphrase.clone());
        }
        let Some(path) = &self.settings.passphrase_file else {
            let given = self.given.lock().unwrap_or_else(|e| e.into_inner());
            return given.clone().ok_or(KeyError::PassphraseNeeded);
        };
        let text = Zeroizing::new(
            std::fs::read_to_string(path).map_err(KeyError::io("cannot read", path))?,
        );
        // A trailing newline from `echo` or an editor is not part of the passphrase.
        Ok(Zeroizing::new(
            text.trim_end_matches(['\r', '\n']).to_owned(),
        ))
    }

    fn secure_element(&self) -> Result<Box<dyn KeySource>, KeyError> {
        let Some(settings) = &self.settings.secure_element else {
            return Err(KeyError::Source("no secure element is configured".into()));
        };
        (self.open_secure_element)(settings)
    }
}

/// The secure element on its I²C bus (`/dev/i2c-N`).
fn open_i2c_secure_element(
    settings: &SecureElementSettings,
) -> Result<Box<dyn KeySource>, KeyError> {
    let slot = settings.slot.ok_or_else(|| {
        KeyError::Source(
            "set berth.toml [seed] secure_element_slot to the slot provisioned with the \
             seed key"
                .into(),
        )
    })?;
    let bus = linux_embedded_hal::I2cdev::new(&settings.bus).map_err(|e| {
        KeyError::Source(format!(
            "cannot open the secure element's bus {}: {e}",
            settings.bus.display()
        ))
    })?;
    let chip = atecc608::Atecc608::new(bus, linux_embedded_hal::Delay, settings.address);
    Ok(Box::new(sources::SecureElement::new(chip, slot)))
}

#[cfg(test)]
mod tests;

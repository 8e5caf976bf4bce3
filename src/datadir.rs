//! The data directory: every file Berth keeps in it, by name ([`Layout`]), and the API's
//! bearer token (barkd's format). Other modules are handed the paths they need; how a
//! file is written safely is `fsutil`'s business.
//!
//! Layout (barkd-compatible names where barkd has the file):
//! - `auth_token`: the API bearer token (barkd's format, see [`AuthToken`]), 0600.
//! - `config.toml`: bark's wallet configuration (barkd's file, read as is).
//! - `mnemonic`: barkd's plaintext seed file, read when present (written only when no
//!   seed key source is configured).
//! - `seed.sealed` (and `seed.sealed.prev` while it is replaced): the sealed seed
//!   (`keys`).
//! - `berth.redb`: the wallet database (`docs/storage.md`).
//! - `berth.toml`: Berth's own settings (`config`; `docs/configuration.md`).
//! - `tls/`: the LAN listener's generated certificates (`tls`).
//! - `control.sock`: the local control socket (`net::control`; bound in
//!   `control.sock.tmp/` and moved into place).
//! - `barkd.lock`: barkd's own instance lock, held (flock, with the holder's pid in it)
//!   by the running daemon, so a barkd and a berthd refuse each other's datadir and a
//!   second berthd refuses too. It survives a wallet delete.
//! - `berthd.lock`: retired (berthd before issue 18 locked this file instead of
//!   barkd's, so a barkd could run beside it). A leftover one is removed at start.
//! - `debug.log`: the log file, unless logging goes elsewhere.
//! - `card-setup-request`: the owner asked in the console for the settings on the
//!   appliance's card to be applied at its next start (`card_setup`); the appliance's
//!   `apply-setup` takes it away at that start.
//! - `update/`: a system update bundle uploaded and checked (`bundle.raucb`), the
//!   owner's request to install it (`install-request`, which root's
//!   `berth-update-request` service takes), and what the appliance's root side writes
//!   back across the restart (`install-pending`, `outcome`, kept as `last-outcome`
//!   once told; `system_update`).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::fsutil::{self, FsError, InstanceLock};

/// barkd's instance lock (`bark-cli`'s `BARKD_LOCK_FILE`): one datadir, one daemon.
const LOCK_FILE: &str = "barkd.lock";
/// The instance lock of berthd before it took barkd's; retired.
const RETIRED_LOCK_FILE: &str = "berthd.lock";

#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error("{0} does not hold a valid auth token")]
    BadToken(PathBuf),
    #[error("cannot make an auth token: the operating system gave no random bytes")]
    NoRandomness,
}

/// Where everything lives in a datadir: the one place that names its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub fn new(root: PathBuf) -> Layout {
        Layout { root }
    }

    /// barkd's default datadir: `~/.bark` (or `./.bark` without a home directory).
    pub fn default_root() -> PathBuf {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."))
            .join(".bark")
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The API's bearer token (barkd's `auth_token`).
    pub fn auth_token(&self) -> PathBuf {
        self.root.join("auth_token")
    }

    /// bark's wallet configuration (barkd's `config.toml`).
    pub fn bark_config(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// Where the seed is kept: sealed, or barkd's plaintext `mnemonic`.
    pub fn seed_files(&self) -> crate::keys::SeedFiles {
        crate::keys::SeedFiles {
            sealed: self.root.join("seed.sealed"),
            plaintext: self.root.join("mnemonic"),
        }
    }

    /// The wallet database.
    pub fn database(&self) -> PathBuf {
        self.root.join("berth.redb")
    }

    /// Berth's own settings file in the datadir (the last of its layers).
    pub fn berth_toml(&self) -> PathBuf {
        self.root.join("berth.toml")
    }

    /// The generated TLS certificates' directory.
    pub fn tls_dir(&self) -> PathBuf {
        self.root.join("tls")
    }

    /// The local control socket.
    pub fn control_socket(&self) -> PathBuf {
        self.root.join("control.sock")
    }

    /// The open claim: the hash of the code that claims the box (`access::claim`).
    pub fn claim(&self) -> PathBuf {
        self.root.join("claim")
    }

    /// The log file, unless `--logfile` names another.
    pub fn log_file(&self) -> PathBuf {
        self.root.join("debug.log")
    }

    /// The owner's request to apply the card's settings at the next start (`card_setup`).
    pub fn card_setup_request(&self) -> PathBuf {
        self.root.join(crate::card_setup::REQUEST_FILE)
    }

    /// Where an uploaded system update waits (`system_update`).
    pub fn system_update_dir(&self) -> PathBuf {
        self.root.join("update")
    }

    /// Everything above, and the locks: the entries Berth knows.
    fn known_entries(&self) -> Vec<PathBuf> {
        let seed = self.seed_files();
        let previous_seed = crate::keys::SeedVault::new(seed.sealed.clone()).previous_path();
        vec![
            self.auth_token(),
            self.bark_config(),
            seed.plaintext,
            seed.sealed,
            previous_seed,
            self.database(),
            self.root.join(LOCK_FILE),
            self.root.join(RETIRED_LOCK_FILE),
            self.log_file(),
            self.berth_toml(),
            self.tls_dir(),
            self.control_socket(),
            self.claim(),
            self.card_setup_request(),
            self.system_update_dir(),
        ]
    }

    /// The datadir's entries berthd does not know, sorted. Logs (`*.log`) and the
    /// temporaries of `fsutil::write_atomically` are known.
    pub fn unexpected_entries(&self) -> Result<Vec<String>, DataDirError> {
        let known = self.known_entries();
        let mut unexpected = Vec::new();
        let listing = fsutil::io("cannot list datadir", &self.root);
        let entries = std::fs::read_dir(&self.root).map_err(listing)?;
        for entry in entries {
            let entry = entry.map_err(fsutil::io("cannot list datadir", &self.root))?;
            let path = self.root.join(entry.file_name());
            let is_known = known
                .iter()
                .any(|k| *k == path || fsutil::temporary_of(k) == path);
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_known && !name.ends_with(".log") {
                unexpected.push(name);
            }
        }
        unexpected.sort();
        Ok(unexpected)
    }

    /// Create the datadir (0700) if it does not exist yet.
    pub fn ensure(&self) -> Result<(), DataDirError> {
        Ok(fsutil::ensure_private_dir(&self.root)?)
    }

    /// Take other local users' access off the datadir and what Berth keeps in it: the
    /// directory itself (0700), every known file ([`Self::known_entries`], 0600 for one
    /// left 0644 by barkd or an older berthd, or made under a loose umask) and everything
    /// under `tls/`. Entries Berth does not know are left alone: in a 0700 directory no
    /// one else reaches them. What changed, for the log.
    pub fn make_private(&self) -> Result<Vec<fsutil::Tightened>, DataDirError> {
        let mut changed: Vec<fsutil::Tightened> =
            fsutil::make_private(&self.root)?.into_iter().collect();
        for entry in self.known_entries() {
            if entry == self.tls_dir() {
                changed.extend(fsutil::make_private_tree(&entry)?);
            } else {
                changed.extend(fsutil::make_private(&entry)?);
            }
        }
        Ok(changed)
    }

    /// Refuse a datadir another user owns (`fsutil::check_owner`).
    pub fn check_owner(&self) -> Result<(), DataDirError> {
        Ok(fsutil::check_owner(&self.root)?)
    }

    /// Take the datadir's instance lock, barkd's `barkd.lock`, or say who holds it.
    pub fn lock(&self) -> Result<InstanceLock, DataDirError> {
        Ok(fsutil::lock_instance(
            &self.root,
            LOCK_FILE,
            RETIRED_LOCK_FILE,
        )?)
    }

    /// Read the datadir's token (trimmed; used as is, as barkd does), or create one.
    pub fn load_or_create_token(&self) -> Result<AuthToken, DataDirError> {
        let path = self.auth_token();
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let token = text.trim();
                if token.is_empty() {
                    return Err(DataDirError::BadToken(path));
                }
                Ok(AuthToken(token.to_string()))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let token = AuthToken::random()?;
                fsutil::write_secret_file(&path, token.expose().as_bytes())?;
                Ok(token)
            }
            Err(e) => Err(fsutil::io("cannot read", &path)(e).into()),
        }
    }

    /// Replace the datadir's token and return it.
    pub fn refresh_token(&self, secret: Option<[u8; 32]>) -> Result<AuthToken, DataDirError> {
        let token = match secret {
            Some(secret) => AuthToken::from_secret(&secret),
            None => AuthToken::random()?,
        };
        fsutil::write_secret_file(&self.auth_token(), token.expose().as_bytes())?;
        Ok(token)
    }
}

/// The API bearer token: base64url (no padding) of a version byte `0x00` followed by a
/// 32-byte secret — barkd's format, so a barkd datadir's token keeps working.
// No `PartialEq`: a bearer token is compared only in constant time (`access::authenticate`).
#[derive(Clone)]
pub struct AuthToken(String);

impl AuthToken {
    pub fn from_secret(secret: &[u8; 32]) -> Self {
        let mut raw = [0u8; 33];
        raw[1..].copy_from_slice(secret);
        AuthToken(URL_SAFE_NO_PAD.encode(raw))
    }

    /// A new token from the operating system's random source; an error, not a panic,
    /// where it has none (a board that cannot seed its RNG is told, not crashed).
    pub fn random() -> Result<Self, DataDirError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|_| DataDirError::NoRandomness)?;
        Ok(Self::from_secret(&secret))
    }

    /// The token as clients send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

// Never print the token by accident.
impl std::fmt::Debug for AuthToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lock is barkd's file: while berthd holds it, barkd's own lock type (what
    /// barkd 0.8 takes at start) is refused, and the other way round; the refusal uses
    /// barkd's words and names the holder's pid. (flock is per open file, so two opens
    /// in one process conflict like two processes.)
    #[test]
    fn the_instance_lock_is_barkds() {
        use bark::lock_manager::PidLockError;
        use bark::lock_manager::pid_flock::FlockPidLockManager;
        let dir = tempfile::tempdir().expect("tempdir");

        let held = Layout::new(dir.path().to_path_buf())
            .lock()
            .expect("first lock");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("barkd.lock")).expect("lock file"),
            std::process::id().to_string()
        );
        match FlockPidLockManager::new_with_lock_file(dir.path(), "barkd.lock") {
            Err(PidLockError::AlreadyHeld { pid, .. }) => {
                assert_eq!(pid, Some(std::process::id()))
            }
            other => panic!("barkd's lock must be refused, got {:?}", other.err()),
        }
        let refused = Layout::new(dir.path().to_path_buf())
            .lock()
            .expect_err("a second lock")
            .to_string();
        assert!(
            refused.contains("another barkd is already running")
                && refused.contains(&format!("(pid {})", std::process::id())),
            "{refused}"
        );
        drop(held);

        let barkd = FlockPidLockManager::new_with_lock_file(dir.path(), "barkd.lock")
            .expect("barkd takes it once berthd is gone");
        let refused = Layout::new(dir.path().to_path_buf())
            .lock()
            .expect_err("berthd beside barkd")
            .to_string();
        assert!(
            refused.contains("another barkd is already running"),
            "{refused}"
        );
        drop(barkd);
        Layout::new(dir.path().to_path_buf())
            .lock()
            .expect("free again");
    }

    /// A leftover `berthd.lock` is removed; one an older berthd still holds refuses the
    /// start, so an upgrade under a running daemon cannot let a second one in.
    #[test]
    fn the_retired_lock_is_removed_unless_held() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = dir.path().join("berthd.lock");
        let holder = std::fs::File::create(&old).expect("old lock");
        holder.lock().expect("held by an older berthd");
        let refused = Layout::new(dir.path().to_path_buf())
            .lock()
            .expect_err("an older berthd runs");
        assert!(
            matches!(
                refused,
                DataDirError::Fs(FsError::OlderBerthdRunning { .. })
            ),
            "{refused}"
        );
        assert!(
            refused
                .to_string()
                .contains("another barkd is already running"),
            "{refused}"
        );
        drop(holder);
        let _held = Layout::new(dir.path().to_path_buf())
            .lock()
            .expect("lock once it is free");
        assert!(!old.exists(), "the retired lock file is removed");
    }

    /// Files Berth writes, their temporaries and logs are known; anything else is not.
    #[test]
    fn only_berths_own_entries_are_expected() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = Layout::new(dir.path().to_path_buf());
        for path in [
            layout.auth_token(),
            fsutil::temporary_of(&layout.bark_config()),
            layout.seed_files().sealed,
            dir.path().join("seed.sealed.prev"),
            layout.database(),
            dir.path().join("other.log"),
        ] {
            std::fs::write(path, b"x").expect("write");
        }
        std::fs::create_dir(layout.tls_dir()).expect("tls");
        assert_eq!(
            layout.unexpected_entries().expect("list"),
            Vec::<String>::new()
        );
        std::fs::write(dir.path().join("bark.sqlite"), b"x").expect("write");
        assert_eq!(
            layout.unexpected_entries().expect("list"),
            vec!["bark.sqlite"]
        );
    }
}

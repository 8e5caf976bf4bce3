//! The data directory: its layout, its single-instance lock and the secret files in it.
//!
//! Layout (barkd-compatible names where barkd has the file):
//! - `auth_token`: the API bearer token (barkd's format, see [`AuthToken`]), 0600.
//! - `config.toml`: bark's wallet configuration (barkd's file, read as is).
//! - `mnemonic`: barkd's plaintext seed file, read when present (written only when no
//!   seed key source is configured).
//! - `seed.sealed` (and `seed.sealed.prev` while it is replaced): the sealed seed
//!   (`keys`).
//! - `berth.redb`: the wallet database (`docs/storage.md`).
//! - `barkd.lock`: barkd's own instance lock, held (flock, with the holder's pid in it)
//!   by the running daemon, so a barkd and a berthd refuse each other's datadir and a
//!   second berthd refuses too. It survives a wallet delete.
//! - `berthd.lock`: retired (berthd before issue 18 locked this file instead of
//!   barkd's, so a barkd could run beside it). A leftover one is removed at start.
//! - `debug.log`: the log file, unless logging goes elsewhere.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

pub const AUTH_TOKEN_FILE: &str = "auth_token";
pub const CONFIG_FILE: &str = "config.toml";
pub const MNEMONIC_FILE: &str = "mnemonic";
pub const DB_FILE: &str = "berth.redb";
/// barkd's instance lock (`bark-cli`'s `BARKD_LOCK_FILE`): one datadir, one daemon.
pub const LOCK_FILE: &str = "barkd.lock";
/// The instance lock of berthd before it took barkd's; retired.
const RETIRED_LOCK_FILE: &str = "berthd.lock";
pub const LOG_FILE: &str = "debug.log";

#[derive(Debug, thiserror::Error)]
pub enum DataDirError {
    /// barkd's words, so scripts that look for them see the same refusal; and which
    /// file is held, since it may be a barkd or a berthd.
    #[error(
        "another barkd is already running on datadir {}{}: a barkd or a berthd holds {}",
        .datadir.display(),
        .pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        .datadir.join(LOCK_FILE).display()
    )]
    AlreadyRunning { datadir: PathBuf, pid: Option<u32> },
    /// A berthd from before the switch to barkd's lock still runs on the datadir.
    #[error(
        "another barkd is already running on datadir {}: an older berthd holds {}",
        .0.display(),
        .0.join(RETIRED_LOCK_FILE).display()
    )]
    OlderBerthdRunning(PathBuf),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} does not hold a valid auth token")]
    BadToken(PathBuf),
    #[error("{}", foreign_owner_message(.path, *.owner_uid, .owner_name.as_deref(), *.uid))]
    ForeignOwner {
        path: PathBuf,
        owner_uid: u32,
        /// The owner's name in `/etc/passwd`, when it has one.
        owner_name: Option<String>,
        /// Who this berthd runs as (effective uid).
        uid: u32,
    },
}

/// The files berthd keeps in a datadir. Anything else (barkd's SQLite database, say)
/// belongs to someone else, and creating a wallet beside it needs `force`.
const KNOWN_FILES: &[&str] = &[
    AUTH_TOKEN_FILE,
    CONFIG_FILE,
    MNEMONIC_FILE,
    crate::keys::SEALED_SEED_FILE,
    crate::keys::PREVIOUS_SEALED_SEED_FILE,
    DB_FILE,
    LOCK_FILE,
    RETIRED_LOCK_FILE,
    LOG_FILE,
    crate::config::BERTH_TOML,
    crate::tls::TLS_DIR,
    crate::net::control::CONTROL_SOCKET,
];

/// The datadir's entries berthd does not know, sorted. Logs (`*.log`) and the
/// temporaries of [`write_atomically`] are known.
pub fn unexpected_entries(path: &Path) -> Result<Vec<String>, DataDirError> {
    let mut unexpected = Vec::new();
    for entry in std::fs::read_dir(path).map_err(io("cannot list datadir", path))? {
        let entry = entry.map_err(io("cannot list datadir", path))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let known = KNOWN_FILES.iter().any(|known| {
            name == *known || temporary_of(Path::new(known)).as_os_str() == name.as_str()
        });
        if !known && !name.ends_with(".log") {
            unexpected.push(name);
        }
    }
    unexpected.sort();
    Ok(unexpected)
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> DataDirError {
    let path = path.to_path_buf();
    move |source| DataDirError::Io { what, path, source }
}

/// barkd's default: `~/.bark` (or `./.bark` without a home directory).
pub fn default_path() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."))
        .join(".bark")
}

/// Create the directory (0700) if it does not exist. An existing directory keeps its
/// permissions: the operator may have chosen them.
pub fn ensure(path: &Path) -> Result<(), DataDirError> {
    if path.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(path).map_err(io("cannot create datadir", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
        .map_err(io("cannot restrict datadir", path))
}

/// Refuse an existing datadir that another user owns.
///
/// Under systemd the datadir is the `berth` user's. An operator running `berthd pair`,
/// `tls show` or `seed seal` as root there would leave root-owned files (a CA, a
/// renewed leaf, an envelope) the daemon can then not read, and it would fail at its
/// next start, far from the cause. A directory that does not exist yet is fine: berthd
/// makes it, as whoever runs it.
pub fn check_owner(path: &Path) -> Result<(), DataDirError> {
    use std::os::unix::fs::MetadataExt;
    let owner_uid = match std::fs::metadata(path) {
        Ok(meta) => meta.uid(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("cannot inspect datadir", path)(e)),
    };
    let uid = rustix::process::geteuid().as_raw();
    if owner_uid == uid {
        return Ok(());
    }
    Err(DataDirError::ForeignOwner {
        path: path.to_path_buf(),
        owner_uid,
        owner_name: user_name(owner_uid),
        uid,
    })
}

fn foreign_owner_message(
    path: &Path,
    owner_uid: u32,
    owner_name: Option<&str>,
    uid: u32,
) -> String {
    let (owner, run_as) = match owner_name {
        Some(name) => (
            format!("user {name} (uid {owner_uid})"),
            format!("that user (e.g. `runuser -u {name} -- berthd ...`)"),
        ),
        None => (format!("uid {owner_uid}"), format!("uid {owner_uid}")),
    };
    format!(
        "{} belongs to {owner} and this berthd runs as uid {uid}: files it made there would \
         be unusable to the daemon; run it as {run_as}",
        path.display()
    )
}

/// The name of `uid` in `/etc/passwd`, if it has one there (sysusers puts `berth` there).
fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let found: u32 = fields.nth(1)?.parse().ok()?;
        (found == uid).then(|| name.to_string())
    })
}

/// The running daemon's claim on a datadir; released when dropped or on exit (also on
/// SIGKILL: the kernel drops the flock with the process).
pub struct InstanceLock {
    _held: bark::lock_manager::pid_flock::FlockPidLockManager,
}

impl std::fmt::Debug for InstanceLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InstanceLock")
    }
}

/// Take the datadir's instance lock, barkd's `barkd.lock`, or say who holds it.
///
/// bark's own lock type does the locking, so the file (flock, the holder's pid written
/// in it) is exactly the one barkd 0.8 takes: each refuses while the other runs.
pub fn lock(path: &Path) -> Result<InstanceLock, DataDirError> {
    use bark::lock_manager::PidLockError;
    use bark::lock_manager::pid_flock::FlockPidLockManager;
    retire_old_lock(path)?;
    match FlockPidLockManager::new_with_lock_file(path, LOCK_FILE) {
        Ok(held) => Ok(InstanceLock { _held: held }),
        Err(PidLockError::AlreadyHeld { pid, .. }) => Err(DataDirError::AlreadyRunning {
            datadir: path.to_path_buf(),
            pid,
        }),
        Err(e) => Err(DataDirError::Io {
            what: "cannot lock",
            path: path.join(LOCK_FILE),
            source: std::io::Error::other(format!("{e:#}")),
        }),
    }
}

/// Remove the retired `berthd.lock`, unless an older berthd still holds it: upgrading
/// the binary under a running daemon must not let a second one in.
fn retire_old_lock(path: &Path) -> Result<(), DataDirError> {
    let old = path.join(RETIRED_LOCK_FILE);
    let file = match OpenOptions::new().write(true).open(&old) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("cannot open the retired lock file", &old)(e)),
    };
    match file.try_lock() {
        Ok(()) => std::fs::remove_file(&old).map_err(io("cannot remove", &old)),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(DataDirError::OlderBerthdRunning(path.to_path_buf()))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(io("cannot lock", &old)(e)),
    }
}

/// Write a secret file (0600) the way a power cut cannot half-write
/// ([`write_atomically`]).
pub fn write_secret_file(path: &Path, contents: &[u8]) -> Result<(), DataDirError> {
    write_atomically(path, contents, 0o600)
}

/// Write a file the way a power cut cannot half-write: a fresh temporary file
/// (`<name>.tmp`, with `mode`), fsync, rename over the target, fsync the directory.
pub fn write_atomically(path: &Path, contents: &[u8], mode: u32) -> Result<(), DataDirError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = temporary_of(path);
    let _ = std::fs::remove_file(&tmp);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(io("cannot create", &tmp))?;
    file.write_all(contents).map_err(io("cannot write", &tmp))?;
    file.sync_all().map_err(io("cannot sync", &tmp))?;
    std::fs::rename(&tmp, path).map_err(io("cannot replace", path))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("cannot sync directory", dir))
}

/// The temporary [`write_atomically`] uses for `path`: the name with `.tmp` appended
/// (not replacing an extension: `ca.pem` and `ca.key` must not share one).
fn temporary_of(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// The API bearer token: base64url (no padding) of a version byte `0x00` followed by a
/// 32-byte secret — barkd's format, so a barkd datadir's token keeps working.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthToken(String);

impl AuthToken {
    pub fn from_secret(secret: &[u8; 32]) -> Self {
        let mut raw = [0u8; 33];
        raw[1..].copy_from_slice(secret);
        AuthToken(URL_SAFE_NO_PAD.encode(raw))
    }

    pub fn random() -> Self {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).expect("the OS random source is available");
        Self::from_secret(&secret)
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

/// Read the datadir's token (trimmed; used as is, as barkd does), or create one.
pub fn load_or_create_token(datadir: &Path) -> Result<AuthToken, DataDirError> {
    let path = datadir.join(AUTH_TOKEN_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let token = text.trim();
            if token.is_empty() {
                return Err(DataDirError::BadToken(path));
            }
            Ok(AuthToken(token.to_string()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let token = AuthToken::random();
            write_secret_file(&path, token.expose().as_bytes())?;
            Ok(token)
        }
        Err(e) => Err(io("cannot read", &path)(e)),
    }
}

/// Replace the datadir's token and return it.
pub fn refresh_token(datadir: &Path, secret: Option<[u8; 32]>) -> Result<AuthToken, DataDirError> {
    let token = match secret {
        Some(secret) => AuthToken::from_secret(&secret),
        None => AuthToken::random(),
    };
    write_secret_file(&datadir.join(AUTH_TOKEN_FILE), token.expose().as_bytes())?;
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_owner_is_named_with_how_to_run_as_them() {
        let named = DataDirError::ForeignOwner {
            path: PathBuf::from("/var/lib/berth"),
            owner_uid: 988,
            owner_name: Some("berth".into()),
            uid: 0,
        }
        .to_string();
        assert_eq!(
            named,
            "/var/lib/berth belongs to user berth (uid 988) and this berthd runs as uid 0: files \
             it made there would be unusable to the daemon; run it as that user (e.g. `runuser -u \
             berth -- berthd ...`)"
        );
        // An owner with no name in /etc/passwd: no runuser hint that could not work.
        let unnamed = DataDirError::ForeignOwner {
            path: PathBuf::from("/data"),
            owner_uid: 4242,
            owner_name: None,
            uid: 0,
        }
        .to_string();
        assert!(unnamed.contains("belongs to uid 4242 "), "{unnamed}");
        assert!(unnamed.ends_with("run it as uid 4242"), "{unnamed}");
    }

    /// The lock is barkd's file: while berthd holds it, barkd's own lock type (what
    /// barkd 0.8 takes at start) is refused, and the other way round; the refusal uses
    /// barkd's words and names the holder's pid. (flock is per open file, so two opens
    /// in one process conflict like two processes.)
    #[test]
    fn the_instance_lock_is_barkds() {
        use bark::lock_manager::PidLockError;
        use bark::lock_manager::pid_flock::FlockPidLockManager;
        let dir = tempfile::tempdir().expect("tempdir");

        let held = lock(dir.path()).expect("first lock");
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
        let refused = lock(dir.path()).expect_err("a second lock").to_string();
        assert!(
            refused.contains("another barkd is already running")
                && refused.contains(&format!("(pid {})", std::process::id())),
            "{refused}"
        );
        drop(held);

        let barkd = FlockPidLockManager::new_with_lock_file(dir.path(), "barkd.lock")
            .expect("barkd takes it once berthd is gone");
        let refused = lock(dir.path())
            .expect_err("berthd beside barkd")
            .to_string();
        assert!(
            refused.contains("another barkd is already running"),
            "{refused}"
        );
        drop(barkd);
        lock(dir.path()).expect("free again");
    }

    /// A leftover `berthd.lock` is removed; one an older berthd still holds refuses the
    /// start, so an upgrade under a running daemon cannot let a second one in.
    #[test]
    fn the_retired_lock_is_removed_unless_held() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = dir.path().join("berthd.lock");
        let holder = File::create(&old).expect("old lock");
        holder.lock().expect("held by an older berthd");
        let refused = lock(dir.path()).expect_err("an older berthd runs");
        assert!(
            matches!(refused, DataDirError::OlderBerthdRunning(_)),
            "{refused}"
        );
        assert!(
            refused
                .to_string()
                .contains("another barkd is already running"),
            "{refused}"
        );
        drop(holder);
        let _held = lock(dir.path()).expect("lock once it is free");
        assert!(!old.exists(), "the retired lock file is removed");
    }

    #[test]
    fn user_names_come_from_passwd() {
        // uid 0 is root on every Linux system with an /etc/passwd.
        if std::path::Path::new("/etc/passwd").exists() {
            assert_eq!(user_name(0).as_deref(), Some("root"));
        }
        assert_eq!(user_name(u32::MAX - 7), None);
    }
}

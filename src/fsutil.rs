//! File-system helpers every part of Berth that writes files shares: the process's
//! umask, atomic writes, the owner check, private directories and files, and the
//! datadir's instance lock. It depends on nothing of Berth's; which files exist, and
//! where, is `datadir::Layout`'s business.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}", foreign_owner_message(.path, *.owner_uid, .owner_name.as_deref(), *.uid))]
    ForeignOwner {
        path: PathBuf,
        owner_uid: u32,
        /// The owner's name in `/etc/passwd`, when it has one.
        owner_name: Option<String>,
        /// Who this berthd runs as (effective uid).
        uid: u32,
    },
    #[error(
        "{} (mode {mode:04o}) is open to other local users and cannot be made private \
         ({source}): make it this user's (chown) or remove the group's and others' access \
         (chmod go=)",
        .path.display()
    )]
    NotPrivate {
        path: PathBuf,
        mode: u32,
        source: std::io::Error,
    },
    /// barkd's words, so scripts that look for them see the same refusal; and which
    /// file is held, since the holder may be a barkd or a berthd.
    #[error(
        "another barkd is already running on datadir {}{}: a barkd or a berthd holds {}",
        .dir.display(),
        .pid.map(|p| format!(" (pid {p})")).unwrap_or_default(),
        .lock.display()
    )]
    AlreadyRunning {
        dir: PathBuf,
        lock: PathBuf,
        pid: Option<u32>,
    },
    /// A berthd from before the switch to barkd's lock still runs on the directory.
    #[error(
        "another barkd is already running on datadir {}: an older berthd holds {}",
        .dir.display(),
        .lock.display()
    )]
    OlderBerthdRunning { dir: PathBuf, lock: PathBuf },
}

/// Make every file and directory this process creates private to its user, whatever
/// umask it inherited (022 is the usual one, and would leave the wallet database and the
/// log readable by every local user). Call it first thing, before any thread starts: the
/// umask is the process's, and files made by code we do not control (redb's database,
/// bark's lock file, the control socket at bind time) get their mode only from it.
pub fn restrict_umask() {
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// A permission change [`make_private`] made: the mode before and after (permission
/// bits only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tightened {
    pub path: PathBuf,
    pub was: u32,
    pub now: u32,
}

/// Take the group's and others' permission bits off `path`, if it has any (0644 becomes
/// 0600, 0755 0700); what changed, if anything. A missing path is fine. A symbolic link
/// is left alone: its target is not ours to change (and a link's own mode means
/// nothing).
pub fn make_private(path: &Path) -> Result<Option<Tightened>, FsError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io("cannot inspect", path)(e)),
    };
    if meta.file_type().is_symlink() {
        return Ok(None);
    }
    let was = meta.permissions().mode() & 0o7777;
    if was & 0o077 == 0 {
        return Ok(None);
    }
    // Set-id and sticky bits go too: nothing in a datadir needs them.
    let now = was & 0o700;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(now)).map_err(|source| {
        FsError::NotPrivate {
            path: path.to_path_buf(),
            mode: was,
            source,
        }
    })?;
    Ok(Some(Tightened {
        path: path.to_path_buf(),
        was,
        now,
    }))
}

/// [`make_private`] on `dir` and everything under it (symbolic links are not followed).
pub fn make_private_tree(dir: &Path) -> Result<Vec<Tightened>, FsError> {
    let mut changed: Vec<Tightened> = make_private(dir)?.into_iter().collect();
    let is_dir = std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.is_dir());
    if !is_dir {
        return Ok(changed);
    }
    let entries = std::fs::read_dir(dir).map_err(io("cannot list", dir))?;
    for entry in entries {
        let entry = entry.map_err(io("cannot list", dir))?;
        changed.extend(make_private_tree(&entry.path())?);
    }
    Ok(changed)
}

/// Turns an I/O error into an [`FsError`] saying what was done to which file.
pub fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> FsError {
    let path = path.to_path_buf();
    move |source| FsError::Io { what, path, source }
}

/// Write a secret file (0600) the way a power cut cannot half-write
/// ([`write_atomically`]).
pub fn write_secret_file(path: &Path, contents: &[u8]) -> Result<(), FsError> {
    write_atomically(path, contents, 0o600)
}

/// Write a file the way a power cut cannot half-write: a fresh temporary file
/// ([`temporary_of`], with `mode`), fsync, rename over the target, fsync the directory.
pub fn write_atomically(path: &Path, contents: &[u8], mode: u32) -> Result<(), FsError> {
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

/// fsync a directory, so a rename or a new file in it survives a power cut.
pub fn sync_dir(dir: &Path) -> Result<(), FsError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("cannot sync directory", dir))
}

/// The temporary [`write_atomically`] uses for `path`: the name with `.tmp` appended
/// (not replacing an extension: `ca.pem` and `ca.key` must not share one).
pub fn temporary_of(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Create the directory (0700) if it does not exist. An existing one is left as it is
/// here; the daemon makes it private at start (`datadir::Layout::make_private`).
pub fn ensure_private_dir(path: &Path) -> Result<(), FsError> {
    if path.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(path).map_err(io("cannot create", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
        .map_err(io("cannot restrict", path))
}

/// Refuse an existing directory that another user owns.
///
/// Under systemd the datadir is the `berth` user's. An operator running `berthd pair`,
/// `tls show` or `seed seal` as root there would leave root-owned files (a CA, a
/// renewed leaf, an envelope) the daemon can then not read, and it would fail at its
/// next start, far from the cause. A directory that does not exist yet is fine: berthd
/// makes it, as whoever runs it.
pub fn check_owner(path: &Path) -> Result<(), FsError> {
    use std::os::unix::fs::MetadataExt;
    let owner_uid = match std::fs::metadata(path) {
        Ok(meta) => meta.uid(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("cannot inspect", path)(e)),
    };
    let uid = rustix::process::geteuid().as_raw();
    if owner_uid == uid {
        return Ok(());
    }
    Err(FsError::ForeignOwner {
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

/// The running daemon's claim on a directory; released when dropped or on exit (also
/// on SIGKILL: the kernel drops the flock with the process).
pub struct InstanceLock {
    _held: bark::lock_manager::pid_flock::FlockPidLockManager,
}

impl std::fmt::Debug for InstanceLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InstanceLock")
    }
}

/// Take `dir`'s instance lock, the file `lock_file` in it, or say who holds it. A
/// leftover `retired_file` (the lock an older version took) is removed first, unless
/// it is still held: upgrading the binary under a running daemon must not let a second
/// one in.
///
/// bark's own lock type does the locking, so the file (flock, the holder's pid written
/// in it) is exactly the one barkd 0.8 takes as `barkd.lock`: each refuses while the
/// other runs.
pub fn lock_instance(
    dir: &Path,
    lock_file: &str,
    retired_file: &str,
) -> Result<InstanceLock, FsError> {
    use bark::lock_manager::PidLockError;
    use bark::lock_manager::pid_flock::FlockPidLockManager;
    retire_old_lock(dir, retired_file)?;
    match FlockPidLockManager::new_with_lock_file(dir, lock_file) {
        Ok(held) => Ok(InstanceLock { _held: held }),
        Err(PidLockError::AlreadyHeld { pid, .. }) => Err(FsError::AlreadyRunning {
            dir: dir.to_path_buf(),
            lock: dir.join(lock_file),
            pid,
        }),
        Err(e) => Err(FsError::Io {
            what: "cannot lock",
            path: dir.join(lock_file),
            source: std::io::Error::other(format!("{e:#}")),
        }),
    }
}

fn retire_old_lock(dir: &Path, retired_file: &str) -> Result<(), FsError> {
    let old = dir.join(retired_file);
    let file = match OpenOptions::new().write(true).open(&old) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("cannot open the retired lock file", &old)(e)),
    };
    match file.try_lock() {
        Ok(()) => std::fs::remove_file(&old).map_err(io("cannot remove", &old)),
        Err(std::fs::TryLockError::WouldBlock) => Err(FsError::OlderBerthdRunning {
            dir: dir.to_path_buf(),
            lock: old,
        }),
        Err(std::fs::TryLockError::Error(e)) => Err(io("cannot lock", &old)(e)),
    }
}

/// Free and total bytes of the filesystem holding `dir` (free as an unprivileged
/// process may use it: what is left for berthd, not root's reserved blocks).
pub fn space(dir: &Path) -> std::io::Result<(u64, u64)> {
    let stat = rustix::fs::statvfs(dir)?;
    Ok((
        stat.f_bavail.saturating_mul(stat.f_frsize),
        stat.f_blocks.saturating_mul(stat.f_frsize),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_owner_is_named_with_how_to_run_as_them() {
        let named = FsError::ForeignOwner {
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
        let unnamed = FsError::ForeignOwner {
            path: PathBuf::from("/data"),
            owner_uid: 4242,
            owner_name: None,
            uid: 0,
        }
        .to_string();
        assert!(unnamed.contains("belongs to uid 4242 "), "{unnamed}");
        assert!(unnamed.ends_with("run it as uid 4242"), "{unnamed}");
    }

    #[test]
    fn user_names_come_from_passwd() {
        // uid 0 is root on every Linux system with an /etc/passwd.
        if std::path::Path::new("/etc/passwd").exists() {
            assert_eq!(user_name(0).as_deref(), Some("root"));
        }
        assert_eq!(user_name(u32::MAX - 7), None);
    }

    #[test]
    fn a_write_replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ca.pem");
        write_atomically(&path, b"first", 0o644).expect("write");
        write_secret_file(&path, b"second").expect("replace");
        assert_eq!(std::fs::read(&path).expect("read"), b"second");
        assert!(!temporary_of(&path).exists());
        assert_eq!(temporary_of(&path).file_name(), Some("ca.pem.tmp".as_ref()));
    }

    /// Group and other bits come off files and directories, recursively; the owner's
    /// stay; symbolic links and what they point to are left alone; what changed is said.
    #[test]
    fn make_private_takes_off_group_and_other_bits_only() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("d");
        let mode = |path: &Path| {
            std::fs::symlink_metadata(path)
                .expect("metadata")
                .permissions()
                .mode()
                & 0o7777
        };
        let chmod = |path: &Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod")
        };
        std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
        std::fs::write(dir.join("sub/file"), b"x").expect("write");
        std::fs::write(dir.join("private"), b"x").expect("write");
        let outside = tmp.path().join("outside");
        std::fs::write(&outside, b"x").expect("write");
        std::os::unix::fs::symlink(&outside, dir.join("link")).expect("symlink");
        chmod(&dir, 0o755);
        chmod(&dir.join("sub"), 0o2775);
        chmod(&dir.join("sub/file"), 0o644);
        chmod(&dir.join("private"), 0o600);
        chmod(&outside, 0o644);

        let mut changed = make_private_tree(&dir).expect("tighten");
        changed.sort_by(|a, b| a.path.cmp(&b.path));
        let summary: Vec<(PathBuf, u32, u32)> = changed
            .into_iter()
            .map(|t| (t.path, t.was, t.now))
            .collect();
        assert_eq!(
            summary,
            vec![
                (dir.clone(), 0o755, 0o700),
                (dir.join("sub"), 0o2775, 0o700),
                (dir.join("sub/file"), 0o644, 0o600),
            ]
        );
        assert_eq!(mode(&dir.join("private")), 0o600);
        assert_eq!(mode(&outside), 0o644, "a link's target is not ours");
        assert_eq!(make_private_tree(&dir).expect("again"), Vec::new());
        assert_eq!(make_private(&dir.join("missing")).expect("missing"), None);
    }
}

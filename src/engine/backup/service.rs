//! The daemon's backups (`berth.toml [backup]`): written to a directory (a mounted USB
//! stick or NAS share) after the wallet's state changes and at least once a day,
//! verified before they count, the newest `keep` kept; and on demand, a fresh backup
//! for the API to hand out.
//!
//! What it promises (`docs/operations.md`, "Backups"):
//! - **It never stops or slows the wallet.** A backup reads the store in one read
//!   transaction (redb's readers never block its writer) on a thread of its own at a
//!   lower CPU priority; one runs at a time. A failure is logged, counted, shown in
//!   `/health` and `/metrics` and raised once as a `backup-failed` event; the wallet
//!   goes on, and the service tries again with backoff (1 minute, doubling, at most an
//!   hour).
//! - **Only verified backups count.** A file gets its final name once it was read back
//!   and restored into a scratch database in the datadir and checked
//!   (`backup::write_file`). At start the `keep` newest existing backups are verified
//!   again (a USB stick can rot).
//! - **Nothing is deleted before a newer backup is verified**, and only this wallet's
//!   files (by the fingerprint in their name) are ever deleted.
//! - **Changes are debounced**: a backup starts `debounce_secs` after the first write
//!   it will carry, and when the state turns out to be the newest backup's (the
//!   contents' digest is the same) nothing is written. Once a day a backup is written
//!   whatever happened, so the target is known to work.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::engine::backup::{self, BackupError, BackupKey, BackupReport, HeldKey};
use crate::events::EventHub;
use crate::events::vocabulary::{Alert, EventKind};
use crate::store::Store;

/// File names: `berth-<fingerprint>-<UTC time>.berthbackup`.
const PREFIX: &str = "berth-";
const SUFFIX: &str = ".berthbackup";
const TIME_FORMAT: &str = "%Y%m%dT%H%M%S%.3fZ";

/// Most backups listed (the newest); a directory may hold anything.
pub const MAX_LISTED: usize = 1000;

/// Longest wait before retrying a failing backup.
const MAX_RETRY: Duration = Duration::from_secs(3600);
const FIRST_RETRY: Duration = Duration::from_secs(60);

/// How the service is set up (`berth.toml [backup]`).
#[derive(Debug, Clone)]
pub struct BackupSettings {
    /// Where scheduled backups go; `None`: none are written (downloads still work).
    pub directory: Option<PathBuf>,
    /// Backups of this wallet kept in the directory.
    pub keep: usize,
    /// Wait after the first change before a backup.
    pub debounce: Duration,
    /// A backup at least this often.
    pub interval: Duration,
}

/// One backup file in the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupFile {
    pub name: String,
    /// The wallet it belongs to (from the name).
    pub fingerprint: String,
    /// When it was taken (from the name).
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub size: u64,
    /// Read back in full and checked by this berthd: when written, or since it started.
    pub verified: bool,
}

/// What the service has done, for `/health`, `/metrics` and the API.
#[derive(Debug, Clone, Default)]
pub struct BackupStatus {
    /// Scheduled backups are configured.
    pub configured: bool,
    pub directory: Option<PathBuf>,
    /// The newest backup of this wallet known to be verified: its name and time.
    pub newest_verified: Option<(String, chrono::DateTime<chrono::Utc>)>,
    /// Backups written and verified since start (scheduled and downloads).
    pub written: u64,
    /// Scheduled backups that failed since start.
    pub failures: u64,
    pub consecutive_failures: u32,
    pub last_error: Option<String>,
    pub last_attempt_at: Option<SystemTime>,
    /// Of the last backup written: how long it took (with its check) and its size.
    pub last_duration: Option<Duration>,
    pub last_size: Option<u64>,
}

/// Why the API could not have a backup.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("no wallet: there is nothing to back up")]
    NoWallet,
    #[error("no backup directory is configured ([backup] directory in berth.toml)")]
    NotConfigured,
    #[error("{0}")]
    Failed(String),
}

/// Verified files by name: their contents' digest.
type Verified = BTreeMap<String, [u8; 32]>;

pub struct Backups {
    settings: BackupSettings,
    store: Store,
    datadir: PathBuf,
    key: tokio::sync::watch::Receiver<HeldKey>,
    events: Arc<EventHub>,
    status: Mutex<BackupStatus>,
    verified: Mutex<Verified>,
    /// One backup at a time: scheduled, on request, or a download.
    running: tokio::sync::Mutex<()>,
}

/// What a scheduled run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Written(BackupFile),
    /// The state is the newest backup's: nothing written.
    Unchanged,
}

impl Backups {
    pub fn new(
        settings: BackupSettings,
        store: Store,
        datadir: PathBuf,
        key: tokio::sync::watch::Receiver<HeldKey>,
        events: Arc<EventHub>,
    ) -> Arc<Backups> {
        let status = BackupStatus {
            configured: settings.directory.is_some(),
            directory: settings.directory.clone(),
            ..BackupStatus::default()
        };
        Arc::new(Backups {
            settings,
            store,
            datadir,
            key,
            events,
            status: Mutex::new(status),
            verified: Mutex::new(BTreeMap::new()),
            running: tokio::sync::Mutex::new(()),
        })
    }

    pub fn status(&self) -> BackupStatus {
        lock(&self.status).clone()
    }

    /// How long after a backup the next one is due at the latest.
    pub fn interval(&self) -> Duration {
        self.settings.interval
    }

    /// The wallet's backup key (waited for while it is derived); `None` without a
    /// wallet.
    async fn current_key(&self) -> Option<Arc<BackupKey>> {
        HeldKey::wait(&mut self.key.clone()).await
    }

    /// This wallet's backups in the directory, newest first (at most [`MAX_LISTED`]);
    /// empty without a directory or a wallet, or when the directory cannot be read.
    pub async fn list(&self) -> Result<Vec<BackupFile>, ServiceError> {
        let (Some(dir), Some(key)) = (self.settings.directory.clone(), self.current_key().await)
        else {
            return Ok(Vec::new());
        };
        let verified = lock(&self.verified).clone();
        tokio::task::spawn_blocking(move || {
            // A directory that cannot be read (the stick is unplugged) lists nothing;
            // the schedule's `last_error` says why.
            let mut files = list_dir(&dir, key.fingerprint()).unwrap_or_default();
            for file in &mut files {
                file.verified = verified.contains_key(&file.name);
            }
            files.truncate(MAX_LISTED);
            Ok(files)
        })
        .await
        .map_err(|e| ServiceError::Failed(format!("listing backups: {e}")))?
    }

    /// Write a fresh backup to the directory now (`POST /api/v1/backups`).
    pub async fn back_up_now(self: &Arc<Self>) -> Result<BackupFile, ServiceError> {
        if self.settings.directory.is_none() {
            return Err(ServiceError::NotConfigured);
        }
        let key = self.current_key().await.ok_or(ServiceError::NoWallet)?;
        match self.run(key, true).await? {
            Outcome::Written(file) => Ok(file),
            Outcome::Unchanged => Err(ServiceError::Failed("nothing was written".into())),
        }
    }

    /// A fresh backup, written and verified in the datadir and unlinked at once: the
    /// open file is all that is left of it, to stream to a client. Its name for the
    /// client, and the file.
    pub async fn fresh(&self) -> Result<(String, u64, std::fs::File), ServiceError> {
        let key = self.current_key().await.ok_or(ServiceError::NoWallet)?;
        let _one = self.running.lock().await;
        let (store, datadir) = (self.store.clone(), self.datadir.clone());
        let started = Instant::now();
        let result = on_background_thread(move || {
            let name = file_name(key.fingerprint(), chrono::Utc::now());
            let mut suffix = [0u8; 8];
            getrandom::fill(&mut suffix).map_err(|e| format!("no randomness: {e}"))?;
            let path = datadir.join(format!(".download-{}{SUFFIX}", backup::hex(&suffix)));
            check_space(&datadir, &store, None, "the datadir")?;
            let report = backup::write_file(&store, &datadir, &key, &path, &datadir)
                .map_err(|e| e.to_string())?;
            let file = std::fs::File::open(&path);
            // Unlinked whatever happens: the open handle keeps the contents readable.
            let _ = std::fs::remove_file(&path);
            let file = file.map_err(|e| format!("reading the backup back: {e}"))?;
            Ok((name, report.size, file))
        })
        .await;
        match result {
            Ok(done) => {
                let mut status = lock(&self.status);
                status.written += 1;
                status.last_duration = Some(started.elapsed());
                status.last_size = Some(done.1);
                Ok(done)
            }
            Err(e) => Err(ServiceError::Failed(e)),
        }
    }

    /// Run the schedule until the returned handle is aborted. Without a directory it
    /// returns at once.
    pub fn spawn(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let this = Arc::clone(self);
        tokio::spawn(async move { this.schedule().await })
    }

    async fn schedule(self: Arc<Self>) {
        let Some(dir) = self.settings.directory.clone() else {
            return;
        };
        let mut key_rx = self.key.clone();
        let mut commits = self.store.commits();
        commits.mark_unchanged();
        let mut checked_for: Option<String> = None;
        // At start (and for a new wallet) the state is compared with the newest backup
        // once the debounce has passed.
        let mut dirty_since = Some(Instant::now());
        let mut next_full = Instant::now();
        let mut retry_at: Option<Instant> = None;
        loop {
            let HeldKey::Ready(key) = key_rx.borrow_and_update().clone() else {
                if key_rx.changed().await.is_err() {
                    return;
                }
                continue;
            };
            if checked_for.as_deref() != Some(key.fingerprint()) {
                // The existing backups: verified again, the newest sets when the next
                // full backup is due.
                checked_for = Some(key.fingerprint().to_owned());
                self.check_existing(&dir, Arc::clone(&key)).await;
                next_full = match lock(&self.status).newest_verified.as_ref() {
                    Some((_, at)) => {
                        let age = (chrono::Utc::now() - *at).to_std().unwrap_or_default();
                        Instant::now() + self.settings.interval.saturating_sub(age)
                    }
                    None => Instant::now(),
                };
                dirty_since = Some(Instant::now());
                retry_at = None;
            }
            let due = match retry_at {
                Some(at) => at,
                None => dirty_since
                    .map(|t| t + self.settings.debounce)
                    .map_or(next_full, |d| d.min(next_full)),
            };
            tokio::select! {
                _ = tokio::time::sleep_until(due.into()) => {}
                changed = commits.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    dirty_since.get_or_insert_with(Instant::now);
                    continue;
                }
                changed = key_rx.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    continue;
                }
            }
            let full = Instant::now() >= next_full;
            match self.run(key, full).await {
                Ok(_) => {
                    dirty_since = None;
                    retry_at = None;
                    if full {
                        next_full = Instant::now() + self.settings.interval;
                    }
                }
                Err(_) => {
                    let failures = lock(&self.status).consecutive_failures;
                    let wait = FIRST_RETRY
                        .saturating_mul(1 << failures.saturating_sub(1).min(10))
                        .min(MAX_RETRY);
                    retry_at = Some(Instant::now() + wait);
                }
            }
        }
    }

    /// Verify the wallet's backups in the directory, newest first, and remember which
    /// passed; the first that passes is the newest verified backup.
    async fn check_existing(&self, dir: &Path, key: Arc<BackupKey>) {
        let _one = self.running.lock().await;
        let (dir, datadir, keep) = (dir.to_path_buf(), self.datadir.clone(), self.settings.keep);
        let checked = on_background_thread(move || {
            clean_leftovers(&datadir, &dir);
            let files = list_dir(&dir, key.fingerprint())?;
            let mut verified = Vec::new();
            // The ones kept: older ones go at the next backup anyway.
            for file in files.into_iter().take(keep.max(1)) {
                let path = dir.join(&file.name);
                match backup::verify_file(&path, &key, backup::Scratch::for_file(&path, &datadir)) {
                    Ok(report) => verified.push((file, report.content_digest)),
                    Err(e) => tracing::warn!(target: "berth::backup", file = %file.name,
                        error = %e, "a backup in the backup directory fails its check"),
                }
            }
            Ok(verified)
        })
        .await;
        match checked {
            Ok(files) => {
                if let Some((newest, _)) = files.first() {
                    lock(&self.status).newest_verified =
                        Some((newest.name.clone(), newest.created_at));
                    tracing::info!(target: "berth::backup", verified = files.len(),
                        newest = %newest.name, "checked the existing backups");
                }
                *lock(&self.verified) = files
                    .into_iter()
                    .map(|(f, digest)| (f.name, digest))
                    .collect();
            }
            // Reported by the first scheduled run, which meets the same problem.
            Err(e) => tracing::warn!(target: "berth::backup", error = %e,
                "cannot check the existing backups"),
        }
    }

    /// One scheduled backup: skipped when the state is the newest backup's (unless
    /// `full`), else written, verified, and older ones beyond `keep` removed.
    async fn run(
        self: &Arc<Self>,
        key: Arc<BackupKey>,
        full: bool,
    ) -> Result<Outcome, ServiceError> {
        let dir = self
            .settings
            .directory
            .clone()
            .ok_or(ServiceError::NotConfigured)?;
        let _one = self.running.lock().await;
        let newest = {
            let status = lock(&self.status);
            let verified = lock(&self.verified);
            status
                .newest_verified
                .as_ref()
                .and_then(|(name, _)| verified.get(name).copied())
        };
        let last_size = lock(&self.status).last_size;
        let (store, datadir, keep) = (self.store.clone(), self.datadir.clone(), self.settings.keep);
        let started = Instant::now();
        lock(&self.status).last_attempt_at = Some(SystemTime::now());
        let result = on_background_thread(move || {
            if !full && let Some(newest) = newest {
                let now = backup::content_digest(&store, &datadir).map_err(|e| e.to_string())?;
                if now == newest {
                    return Ok(None);
                }
            }
            let written = write_into(&store, &datadir, &key, &dir, last_size)?;
            let removed = rotate(&dir, key.fingerprint(), keep, &written.0.name);
            Ok(Some((written, removed)))
        })
        .await;
        match result {
            Ok(None) => {
                tracing::debug!(target: "berth::backup", took_ms = started.elapsed().as_millis() as u64,
                    "the state is the newest backup's: nothing written");
                self.succeeded(None);
                Ok(Outcome::Unchanged)
            }
            Ok(Some(((file, report), removed))) => {
                {
                    let mut verified = lock(&self.verified);
                    verified.insert(file.name.clone(), report.content_digest);
                    for name in &removed {
                        verified.remove(name);
                    }
                }
                tracing::info!(target: "berth::backup", file = %file.name, size = file.size,
                    took_ms = started.elapsed().as_millis() as u64, removed = removed.len(),
                    "backup written and verified");
                self.succeeded(Some((&file, started.elapsed())));
                Ok(Outcome::Written(file))
            }
            Err(error) => {
                self.failed(&error).await;
                Err(ServiceError::Failed(error))
            }
        }
    }

    fn succeeded(&self, written: Option<(&BackupFile, Duration)>) {
        let mut status = lock(&self.status);
        if status.consecutive_failures > 0 {
            tracing::info!(target: "berth::backup", "backups work again");
        }
        status.consecutive_failures = 0;
        status.last_error = None;
        if let Some((file, took)) = written {
            status.written += 1;
            status.newest_verified = Some((file.name.clone(), file.created_at));
            status.last_duration = Some(took);
            status.last_size = Some(file.size);
        }
    }

    /// Count a failure; the first of a run of them raises `backup-failed`.
    async fn failed(&self, error: &str) {
        let first = {
            let mut status = lock(&self.status);
            status.failures += 1;
            status.consecutive_failures = status.consecutive_failures.saturating_add(1);
            status.last_error = Some(error.to_owned());
            status.consecutive_failures == 1
        };
        tracing::error!(target: "berth::backup", %error, "backup failed; the wallet goes on, and the backup is tried again");
        if first {
            let alert = Alert {
                message: format!("A backup failed: {error}"),
                ..Alert::default()
            };
            if let Err(e) = self.events.alert(EventKind::BackupFailed, alert).await {
                tracing::error!(target: "berth::backup", error = %e, "cannot record the backup-failed event");
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Run `f` on a thread of its own at a lower CPU priority (nice 10), so a backup
/// yields the cores to the wallet, and wait for it without blocking the runtime.
async fn on_background_thread<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("berth-backup".into())
        .spawn(move || {
            // Linux: the priority of this thread only. Failing to lower it is harmless.
            let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 10);
            let _ = tx.send(f());
        })
        .map_err(|e| format!("cannot start the backup thread: {e}"))?;
    rx.await
        .unwrap_or_else(|_| Err("the backup thread stopped unexpectedly".into()))
}

fn file_name(fingerprint: &str, at: chrono::DateTime<chrono::Utc>) -> String {
    format!("{PREFIX}{fingerprint}-{}{SUFFIX}", at.format(TIME_FORMAT))
}

/// The fingerprint and time a backup's file name carries.
fn parse_name(name: &str) -> Option<(&str, chrono::DateTime<chrono::Utc>)> {
    let rest = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    let (fingerprint, time) = rest.split_once('-')?;
    let time = chrono::NaiveDateTime::parse_from_str(time, TIME_FORMAT).ok()?;
    Some((fingerprint, time.and_utc()))
}

/// The backups of wallet `fingerprint` in `dir`, newest first. Dot files (backups
/// being written) and anything else are left out.
fn list_dir(dir: &Path, fingerprint: &str) -> Result<Vec<BackupFile>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| describe_dir_error(dir, &e))?;
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((fp, created_at)) = parse_name(&name) else {
            continue;
        };
        if fp != fingerprint {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        files.push(BackupFile {
            fingerprint: fp.to_owned(),
            name,
            created_at,
            size: meta.len(),
            verified: false,
        });
    }
    // Names sort by time within one wallet.
    files.sort_by(|a, b| b.name.cmp(&a.name));
    Ok(files)
}

fn describe_dir_error(dir: &Path, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "the backup directory {} does not exist (is the drive mounted?)",
            dir.display()
        ),
        _ => format!("cannot read the backup directory {}: {e}", dir.display()),
    }
}

/// Check that `dir`'s filesystem has room for a backup: about the last one's size
/// (or, before the first, the database's), with a quarter to spare and 1 MiB.
fn check_space(
    dir: &Path,
    store: &Store,
    last_size: Option<u64>,
    what: &str,
) -> Result<(), String> {
    let estimate = last_size
        .or_else(|| std::fs::metadata(store.path()).ok().map(|m| m.len()))
        .unwrap_or(0);
    let needed = estimate + estimate / 4 + (1 << 20);
    let stat = rustix::fs::statvfs(dir).map_err(|e| {
        format!(
            "cannot check the free space of {what} {}: {e}",
            dir.display()
        )
    })?;
    let free = stat.f_bavail.saturating_mul(stat.f_frsize);
    if free < needed {
        return Err(format!(
            "not enough free space in {what} {}: {free} bytes free, about {needed} needed",
            dir.display()
        ));
    }
    Ok(())
}

/// Write and verify a backup in `dir` (the scratch database goes in the datadir).
fn write_into(
    store: &Store,
    datadir: &Path,
    key: &BackupKey,
    dir: &Path,
    last_size: Option<u64>,
) -> Result<(BackupFile, BackupReport), String> {
    let meta = std::fs::metadata(dir).map_err(|e| describe_dir_error(dir, &e))?;
    if !meta.is_dir() {
        return Err(format!(
            "the backup directory {} is not a directory",
            dir.display()
        ));
    }
    check_space(dir, store, last_size, "the backup directory")?;
    // The scratch copy a check restores into.
    check_space(datadir, store, None, "the datadir")?;
    let created_at = chrono::Utc::now();
    let name = file_name(key.fingerprint(), created_at);
    let report = backup::write_file(store, datadir, key, &dir.join(&name), datadir)
        .map_err(|e| describe_write_error(dir, &e))?;
    // The name's time, rounded as the name has it (what a listing shows).
    let created_at = parse_name(&name).map_or(created_at, |(_, at)| at);
    let file = BackupFile {
        fingerprint: key.fingerprint().to_owned(),
        name,
        created_at,
        size: report.size,
        verified: true,
    };
    Ok((file, report))
}

fn describe_write_error(dir: &Path, e: &BackupError) -> String {
    let io = match e {
        BackupError::Io { source, .. } => Some(source.kind()),
        BackupError::File(crate::fsutil::FsError::Io { source, .. }) => Some(source.kind()),
        _ => None,
    };
    match io {
        Some(std::io::ErrorKind::ReadOnlyFilesystem) => {
            format!("the backup directory {} is read-only", dir.display())
        }
        Some(std::io::ErrorKind::StorageFull) => {
            format!("the backup directory {} is full", dir.display())
        }
        Some(std::io::ErrorKind::PermissionDenied) => {
            format!(
                "berthd may not write to the backup directory {}",
                dir.display()
            )
        }
        _ => e.to_string(),
    }
}

/// Remove wallet `fingerprint`'s backups beyond the newest `keep` (never `just_written`);
/// the names removed.
fn rotate(dir: &Path, fingerprint: &str, keep: usize, just_written: &str) -> Vec<String> {
    let Ok(files) = list_dir(dir, fingerprint) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for file in files.into_iter().skip(keep.max(1)) {
        if file.name == just_written {
            continue;
        }
        match std::fs::remove_file(dir.join(&file.name)) {
            Ok(()) => removed.push(file.name),
            Err(e) => tracing::warn!(target: "berth::backup", file = %file.name, error = %e,
                "cannot remove an old backup"),
        }
    }
    if !removed.is_empty() {
        let _ = crate::fsutil::sync_dir(dir);
    }
    removed
}

/// Remove what an interrupted backup left: scratch databases and downloads in the
/// datadir, partial files in the backup directory.
fn clean_leftovers(datadir: &Path, dir: &Path) {
    let stale = |dir: &Path, is_ours: &dyn Fn(&str) -> bool| {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_ours(&name) {
                continue;
            }
            let path = entry.path();
            let removed = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            if removed.is_ok() {
                tracing::info!(target: "berth::backup", file = %path.display(),
                    "removed what an interrupted backup left");
            }
        }
    };
    stale(datadir, &|n| {
        n.starts_with(".backup-verify-")
            || (n.starts_with(".download-") && n.ends_with(SUFFIX))
            || (n.starts_with("..download-") && n.ends_with(".partial"))
    });
    stale(dir, &|n| {
        n.starts_with(&format!(".{PREFIX}")) && n.ends_with(&format!("{SUFFIX}.partial"))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_wallet_and_the_time_and_sort_by_time() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-11-25T11:40:58.123Z")
            .expect("time")
            .with_timezone(&chrono::Utc);
        let name = file_name("0a1b2c3d", at);
        assert_eq!(name, "berth-0a1b2c3d-20261125T114058.123Z.berthbackup");
        assert_eq!(parse_name(&name), Some(("0a1b2c3d", at)));
        let later = file_name("0a1b2c3d", at + chrono::Duration::milliseconds(1));
        assert!(later > name);
        for other in [
            ".berth-0a1b2c3d-20261125T114058.123Z.berthbackup.partial",
            "berth-0a1b2c3d.berthbackup",
            "notes.txt",
            "berth-0a1b2c3d-yesterday.berthbackup",
        ] {
            assert_eq!(parse_name(other), None, "{other}");
        }
    }
}

//! A redb storage backend that fails an fsync on demand, for the daemon-level fault
//! tests (`tests/integration/disk_faults.rs`). Like Bitcoin Core's `-dbcrashratio`, it ships in the
//! release binary so that the binary users run is the one tested, and it is off unless
//! [`FAULTS_ENV`] names a trigger file (berthd then warns at start).
//!
//! While the trigger file exists, the next `sync_data` fails with the error the file
//! names (`eio`, the default, or `enospc`), and the trigger file is removed (one fault
//! per trigger). Before failing, the backend puts back everything written since the last
//! fsync that succeeded: after a failed fsync Linux may have dropped the dirty pages and
//! marked them clean, so what reaches the disk is the state of the last successful fsync,
//! and a database that relied on anything newer would lose it at the next power cut.
//!
//! A failed fsync must never be retried (the retry would report success over lost
//! pages). redb refuses every call after an I/O error and the store stops the daemon
//! (`StoreError::Fatal`); this backend checks that nothing in the process works around
//! them: any later `sync_data`, on any backend, writes [`RETRIED`] to stderr and fails.

use std::fs::OpenOptions;
use std::io;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use redb::backends::FileBackend;
use redb::{BackendError, StorageBackend};

/// The environment variable naming the trigger file.
pub const FAULTS_ENV: &str = "BERTH_STORE_FAULTS";

/// What the backend writes to stderr if an fsync follows a failed one.
pub const RETRIED: &str = "store fault injection: an fsync was attempted after a failed fsync";

/// Set once an injected fsync failure happened in this process.
static FAILED: AtomicBool = AtomicBool::new(false);

/// The file backend redb would use, with injected fsync failures.
#[derive(Debug)]
pub(crate) struct FaultyBackend {
    file: FileBackend,
    trigger: PathBuf,
    /// What to put back if the next fsync fails. It holds at most what is written
    /// between two fsyncs: one commit, since the store commits every transaction durably.
    undo: Mutex<Undo>,
}

#[derive(Debug)]
struct Undo {
    /// The file's length at the last successful fsync.
    synced_len: u64,
    /// The bytes each write since then replaced, oldest first.
    replaced: Vec<(u64, Vec<u8>)>,
}

impl FaultyBackend {
    /// Open (or create) the database file at `path` as redb's `Builder::create` does.
    pub(crate) fn open(path: &Path, trigger: PathBuf) -> io::Result<FaultyBackend> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let file = FileBackend::new(file).map_err(io::Error::other)?;
        let synced_len = file.len()?;
        Ok(FaultyBackend {
            file,
            trigger,
            undo: Mutex::new(Undo {
                synced_len,
                replaced: Vec::new(),
            }),
        })
    }

    fn undo(&self) -> std::sync::MutexGuard<'_, Undo> {
        self.undo.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remember the bytes at `offset..offset + len` that are about to be replaced.
    fn remember(&self, undo: &mut Undo, offset: u64, len: u64) -> io::Result<()> {
        let end = self.file.len()?.min(offset.saturating_add(len));
        if end > offset {
            let mut old = vec![0; (end - offset) as usize];
            self.file.read(offset, &mut old)?;
            undo.replaced.push((offset, old));
        }
        Ok(())
    }

    /// Put the file back as it was at the last successful fsync.
    fn roll_back(&self, undo: &mut Undo) -> io::Result<()> {
        for (offset, old) in undo.replaced.drain(..).rev() {
            self.file.write(offset, &old)?;
        }
        self.file.set_len(undo.synced_len)
    }
}

impl StorageBackend for FaultyBackend {
    fn len(&self) -> Result<u64, io::Error> {
        self.file.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        self.file.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        let mut undo = self.undo();
        let now = self.file.len()?;
        if len < now {
            self.remember(&mut undo, len, now - len)?;
        }
        self.file.set_len(len)
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        if FAILED.load(Ordering::SeqCst) {
            eprintln!("{RETRIED}");
            return Err(io::Error::from_raw_os_error(
                rustix::io::Errno::IO.raw_os_error(),
            ));
        }
        let mut undo = self.undo();
        if let Ok(kind) = std::fs::read_to_string(&self.trigger) {
            let _ = std::fs::remove_file(&self.trigger);
            let errno = match kind.trim() {
                "enospc" => rustix::io::Errno::NOSPC,
                _ => rustix::io::Errno::IO,
            };
            FAILED.store(true, Ordering::SeqCst);
            self.roll_back(&mut undo)?;
            return Err(io::Error::from_raw_os_error(errno.raw_os_error()));
        }
        self.file.sync_data()?;
        undo.replaced.clear();
        undo.synced_len = self.file.len()?;
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        let mut undo = self.undo();
        self.remember(&mut undo, offset, data.len() as u64)?;
        self.file.write(offset, data)
    }

    fn close(&self) -> Result<(), io::Error> {
        self.file.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.file.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.file.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.file.query_lock_range(start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A triggered fsync fails with the named error, and the file is back as it was at
    /// the last fsync that succeeded.
    #[test]
    fn a_triggered_fsync_fails_and_rolls_the_file_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let trigger = dir.path().join("trigger");
        let path = dir.path().join("f");
        let backend = FaultyBackend::open(&path, trigger.clone()).expect("open");
        backend.set_len(8).expect("grow");
        backend.write(0, b"durable!").expect("write");
        backend.sync_data().expect("sync");

        backend.write(0, b"lost").expect("write");
        backend.set_len(16).expect("grow");
        backend.write(8, b"lost too").expect("write");
        std::fs::write(&trigger, "enospc").expect("trigger");
        let failed = backend.sync_data().expect_err("injected");
        assert_eq!(
            failed.raw_os_error(),
            Some(rustix::io::Errno::NOSPC.raw_os_error())
        );
        assert!(!trigger.exists(), "one fault per trigger");
        assert_eq!(std::fs::read(&path).expect("read"), b"durable!");
        // Every later fsync fails: nothing may retry the failed one.
        assert!(backend.sync_data().is_err());
    }
}

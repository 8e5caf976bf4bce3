//! The store's error type.
//!
//! Two families matter to callers:
//! - [`StoreError::Fatal`]: the storage layer itself failed (an I/O error, a failed
//!   fsync, corruption). redb poisons its handle after such an error and Linux may have
//!   dropped the dirty pages, so retrying is unsafe. The store refuses every later call
//!   and signals [`crate::store::Store::fatal`]; the daemon stops and systemd restarts
//!   it, and redb recovers from the last durable commit.
//! - everything else: a precondition of the operation did not hold (a VTXO not in an
//!   allowed state, an unknown id, a record that does not decode). The transaction was
//!   aborted and nothing changed.

use std::fmt;

/// What went wrong in the store. Messages never carry record contents (a round state
/// holds secret keys), only names, ids and reasons.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The storage layer failed. Do not retry; stop the process.
    #[error("storage failure while {context}: {reason}")]
    Fatal {
        context: &'static str,
        reason: String,
    },

    /// The disk is full: a write failed with ENOSPC. Fatal like any I/O error (redb
    /// poisons its handle), but told apart so clients learn why (507).
    #[error("storage failure while {context}: the disk is full")]
    DiskFull { context: &'static str },

    /// An earlier fatal error poisoned the store; no further access is attempted.
    #[error("store is stopped after an earlier storage failure: {0}")]
    Poisoned(String),

    /// The database was written by a newer Berth; opening it could lose data.
    #[error(
        "database schema version {found} is newer than this berthd supports ({supported}); \
         upgrade berthd or restore a backup made by this version"
    )]
    NewerSchema { found: u64, supported: u64 },

    /// Another process (or another handle in this one) has the database open.
    #[error("the wallet database {path} is already open by another process")]
    AlreadyOpen { path: String },

    /// A stored value could not be decoded.
    #[error("cannot decode {what}: {reason}")]
    Decode { what: &'static str, reason: String },

    /// A value could not be encoded for storage.
    #[error("cannot encode {what}: {reason}")]
    Encode { what: &'static str, reason: String },

    /// A record the operation needs does not exist.
    #[error("{0} not found")]
    NotFound(String),

    /// The operation's precondition did not hold; nothing was written.
    #[error("{0}")]
    Rejected(String),

    /// A device with this id is already paired; nothing was written.
    #[error("device {0} is already paired")]
    DeviceExists(String),

    /// Another paired device already has this token hash; nothing was written.
    #[error("another paired device already has this token hash")]
    TokenHashTaken,

    /// As many devices as allowed are paired; nothing was written.
    #[error("{max} devices are paired, the most allowed; remove one first")]
    TooManyDevices { max: usize },

    /// A consistency invariant between tables does not hold (see `verify_invariants`).
    #[error("store invariant violated: {0}")]
    Invariant(String),
}

impl StoreError {
    /// True when the process must stop rather than carry on or retry.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            StoreError::Fatal { .. } | StoreError::DiskFull { .. } | StoreError::Poisoned(_)
        )
    }

    pub(crate) fn decode(what: &'static str, reason: impl fmt::Display) -> Self {
        StoreError::Decode {
            what,
            reason: reason.to_string(),
        }
    }

    pub(crate) fn encode(what: &'static str, reason: impl fmt::Display) -> Self {
        StoreError::Encode {
            what,
            reason: reason.to_string(),
        }
    }
}

/// Classify a redb error. Every redb error type converts into `redb::Error`, so one
/// exhaustive match decides what is fatal: a new redb variant fails to compile here.
pub(crate) fn from_redb(context: &'static str, err: impl Into<redb::Error>) -> StoreError {
    let err: redb::Error = err.into();
    let fatal = |reason: String| StoreError::Fatal { context, reason };
    match err {
        redb::Error::Io(e) if e.kind() == std::io::ErrorKind::StorageFull => {
            StoreError::DiskFull { context }
        }
        redb::Error::Io(e) => fatal(format!("I/O error: {e}")),
        redb::Error::PreviousIo => fatal("an earlier I/O error poisoned the database".into()),
        redb::Error::Corrupted(msg) => fatal(format!("database corrupted: {msg}")),
        redb::Error::DatabaseClosed => fatal("database closed".into()),
        redb::Error::LockPoisoned(loc) => fatal(format!("lock poisoned at {loc}")),
        redb::Error::TransactionPoisoned => fatal("transaction poisoned".into()),
        redb::Error::RepairAborted => fatal("repair aborted".into()),
        redb::Error::UpgradeRequired(v) => {
            fatal(format!("file format {v} needs a manual redb upgrade"))
        }
        redb::Error::DatabaseAlreadyOpen => StoreError::AlreadyOpen {
            path: String::new(),
        },
        redb::Error::ValueTooLarge(n) => {
            StoreError::Rejected(format!("value of {n} bytes is too large to store"))
        }
        other @ (redb::Error::InvalidSavepoint
        | redb::Error::ImmediateDurabilityRequired
        | redb::Error::PersistentSavepointModified
        | redb::Error::PersistentSavepointExists
        | redb::Error::EphemeralSavepointExists
        | redb::Error::TransactionInProgress
        | redb::Error::UnorderedKey
        | redb::Error::TableTypeMismatch { .. }
        | redb::Error::TableIsMultimap(_)
        | redb::Error::TableIsNotMultimap(_)
        | redb::Error::TypeDefinitionChanged { .. }
        | redb::Error::TableDoesNotExist(_)
        | redb::Error::TableExists(_)
        | redb::Error::TableAlreadyOpen(_, _)
        | redb::Error::ReadTransactionStillInUse(_)
        | redb::Error::Unsupported) => fatal(format!("schema or usage error: {other}")),
        other => fatal(format!("unexpected storage error: {other}")),
    }
}

/// `.ctx("doing X")` on any redb result: classify the error with what we were doing.
pub(crate) trait RedbResultExt<T> {
    fn ctx(self, context: &'static str) -> Result<T, StoreError>;
}

impl<T, E: Into<redb::Error>> RedbResultExt<T> for Result<T, E> {
    fn ctx(self, context: &'static str) -> Result<T, StoreError> {
        self.map_err(|e| from_redb(context, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full disk is told apart from other I/O errors, and both are fatal.
    #[test]
    fn a_full_disk_is_its_own_fatal_error() {
        let full = from_redb(
            "writing",
            redb::StorageError::Io(std::io::Error::from_raw_os_error(
                rustix::io::Errno::NOSPC.raw_os_error(),
            )),
        );
        assert!(matches!(full, StoreError::DiskFull { .. }), "{full:?}");
        assert!(full.is_fatal());
        let io = from_redb(
            "writing",
            redb::StorageError::Io(std::io::Error::from_raw_os_error(
                rustix::io::Errno::IO.raw_os_error(),
            )),
        );
        assert!(matches!(io, StoreError::Fatal { .. }), "{io:?}");
        assert!(io.is_fatal());
    }
}

//! The wallet database: every piece of wallet state in one redb file.
//!
//! - [`schema`]: every table, with its key and value types.
//! - [`codec`]: the versioned envelope every value is stored in, and its record kinds.
//! - [`records`]: the values of Berth's own records.
//! - [`bark`](self::bark): `bark::persist::BarkPersister` implemented directly on those
//!   tables, one write transaction per trait method.
//! - [`migrations`]: schema version check and migrations, in one transaction at open.
//! - [`idempotency`], [`tokens`] (paired devices), `events`, [`setup`] (how the wallet
//!   was created, and what its seed recovery found): Berth's own tables.
//! - [`faults`]: the fault-injecting storage backend of the daemon-level fault tests.
//!
//! Threading: redb calls block (page I/O, fsync), so every transaction runs on tokio's
//! blocking pool. Write transactions are also serialised by a FIFO async mutex, so
//! writes are applied in the order their callers asked for them and at most one
//! blocking thread waits on redb's writer lock.
//!
//! Durability: every write transaction commits with `Durability::Immediate` — when a
//! method returns `Ok`, its change survives a power cut. A storage failure (I/O error,
//! failed fsync, corruption) is fatal: the store refuses every later call and resolves
//! [`Store::fatal`], and the daemon stops instead of retrying.

pub mod approvals;
mod bark;
pub mod codec;
pub mod error;
mod events;
pub mod faults;
pub mod idempotency;
pub mod labels;
pub mod migrations;
pub mod nwc;
pub mod records;
pub mod schema;
pub mod setup;
pub mod snapshot;
pub mod spending;
pub mod tokens;
pub mod vocabulary;
pub mod webhooks;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{Database, Durability, ReadableDatabase, ReadableTable, ReadableTableMetadata};

pub use self::bark::{ChainView, InitialScan};
pub use self::error::StoreError;
use self::error::{RedbResultExt, from_redb};
pub use self::events::{EventBounds, EventPage, EventRetention};
pub use self::records::{DeviceRecord, Recovery, RecoveryCounts};
use self::schema::*;
pub use self::setup::WalletRecord;

/// Now, as every time in the store is kept: Unix time in microseconds (0 for a clock
/// before 1970).
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Default redb page cache: enough for a wallet's working set on a small board
/// (redb's own default is 1 GiB).
pub const DEFAULT_CACHE_SIZE: usize = 16 * 1024 * 1024;

/// How to open the store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Bytes of page cache redb may use.
    pub cache_size: usize,
    /// Verify every page of the file at open (redb's `check_integrity`), as `berthd
    /// store check` and a backup's verification do. Its cost grows with the file (about
    /// 40 ms for a wallet of 10,000 movements here), so the daemon's start does not:
    /// redb itself detects an unclean shutdown and repairs the file at open.
    pub full_check: bool,
    /// Fail an fsync when this file appears: the fault tests' backend
    /// ([`faults`], `BERTH_STORE_FAULTS`). `None` in every real use.
    pub fault_trigger: Option<PathBuf>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            cache_size: DEFAULT_CACHE_SIZE,
            full_check: false,
            fault_trigger: None,
        }
    }
}

/// What [`Store::open`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenReport {
    /// `false` when a full check (`StoreConfig::full_check`) found damage and redb
    /// repaired it; `true` otherwise (also when no full check ran).
    pub integrity_ok: bool,
    /// Schema version found in the file (0 for a new file).
    pub schema_found: u64,
    /// Schema version now.
    pub schema_now: u64,
}

/// Handle to the wallet database. Cheap to clone; all clones share one redb handle.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    db: Database,
    path: PathBuf,
    /// FIFO order for write transactions (tokio's mutex is fair).
    write_order: tokio::sync::Mutex<()>,
    /// `Some(reason)` once a fatal storage error happened.
    fatal: tokio::sync::watch::Sender<Option<String>>,
    /// Write transactions committed since the store was opened: a backup is due when
    /// this moved (`engine::backup::service`).
    commits: tokio::sync::watch::Sender<u64>,
    /// Decoded VTXO rows, so listings and the balance do not decode every VTXO's
    /// public keys on each call.
    vtxo_rows: VtxoRowMemo,
    /// The last balance computed, with what it was computed at (`bark::balance`).
    balance: bark::BalanceMemo,
}

/// Decoded VTXO rows, each kept with the exact bytes it was decoded from: an entry is
/// used only while the stored bytes are the same, so it can never be stale and needs
/// no invalidation. Decoding a VTXO parses several compressed public keys (a square
/// root each), which made a 2,000-VTXO balance cost ~25 ms of CPU.
struct VtxoRowMemo(std::sync::Mutex<std::collections::HashMap<VtxoKey, MemoisedRow>>);

/// A decoded row and the stored bytes it was decoded from.
type MemoisedRow = (Box<[u8]>, records::VtxoRow);

/// Most rows kept (a few hundred bytes each).
const VTXO_ROW_MEMO_CAPACITY: usize = 8192;

impl VtxoRowMemo {
    fn decode(
        &self,
        id: VtxoKey,
        stored: &codec::Envelope<'_, codec::VtxoRowRecord>,
    ) -> Result<records::VtxoRow, StoreError> {
        {
            let rows = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((bytes, row)) = rows.get(&id)
                && **bytes == *stored.as_bytes()
            {
                return Ok(row.clone());
            }
        }
        let row = stored.decode()?;
        let mut rows = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if rows.len() >= VTXO_ROW_MEMO_CAPACITY {
            rows.clear();
        }
        rows.insert(id, (stored.as_bytes().into(), row.clone()));
        Ok(row)
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Decode a stored VTXO row, reusing the last decoding of the same bytes.
    pub(crate) fn decode_vtxo_row(
        &self,
        id: VtxoKey,
        stored: &codec::Envelope<'_, codec::VtxoRowRecord>,
    ) -> Result<records::VtxoRow, StoreError> {
        self.inner.vtxo_rows.decode(id, stored)
    }

    /// Open or create the database at `path`: explicit cache size, repair after an
    /// unclean shutdown if needed, a full integrity check if `config.full_check`, then
    /// the schema version check and migrations (a write only when there is one to run). Blocks; see [`Store::open_async`].
    pub fn open(path: &Path, config: &StoreConfig) -> Result<(Store, OpenReport), StoreError> {
        const CTX: &str = "opening the wallet database";
        let mut builder = Database::builder();
        builder.set_cache_size(config.cache_size);
        // Recovery after an unclean shutdown is redb's normal path, not damage.
        builder.set_repair_callback(|session| {
            tracing::warn!(
                progress = session.progress(),
                "repairing the wallet database after an unclean shutdown"
            );
        });
        let created = match &config.fault_trigger {
            None => builder.create(path),
            Some(trigger) => {
                tracing::warn!(trigger = %trigger.display(), "store fault injection is on: an fsync fails when the trigger file appears (for tests only)");
                let backend = faults::FaultyBackend::open(path, trigger.clone())
                    .map_err(|e| from_redb(CTX, e))?;
                builder.create_with_backend(backend)
            }
        };
        let db = created.map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => StoreError::AlreadyOpen {
                path: path.display().to_string(),
            },
            other => from_redb(CTX, other),
        })?;
        Store::over(db, path, config)
    }

    /// A store over a database already open (a backup's copy rebuilt in memory, to be
    /// checked): the checks and migrations of [`Store::open`]. `path` names it in
    /// messages.
    pub(crate) fn over(
        mut db: Database,
        path: &Path,
        config: &StoreConfig,
    ) -> Result<(Store, OpenReport), StoreError> {
        const CTX: &str = "opening the wallet database";
        let integrity_ok = if config.full_check {
            db.check_integrity().map_err(|e| from_redb(CTX, e))?
        } else {
            true
        };
        if !integrity_ok {
            tracing::warn!(path = %path.display(), "wallet database failed its integrity check and was repaired");
        }
        let schema = migrations::prepare(&db)?;
        let (fatal, _) = tokio::sync::watch::channel(None);
        let store = Store {
            inner: Arc::new(Inner {
                db,
                path: path.to_path_buf(),
                write_order: tokio::sync::Mutex::new(()),
                fatal,
                commits: tokio::sync::watch::Sender::new(0),
                vtxo_rows: VtxoRowMemo(Default::default()),
                balance: bark::BalanceMemo::default(),
            }),
        };
        let report = OpenReport {
            integrity_ok,
            schema_found: schema.found,
            schema_now: schema.now,
        };
        Ok((store, report))
    }

    /// [`Store::open`] on the blocking pool.
    pub async fn open_async(
        path: &Path,
        config: &StoreConfig,
    ) -> Result<(Store, OpenReport), StoreError> {
        let (path, config) = (path.to_path_buf(), config.clone());
        tokio::task::spawn_blocking(move || Store::open(&path, &config))
            .await
            .map_err(|e| StoreError::Fatal {
                context: "opening the wallet database",
                reason: format!("open task failed: {e}"),
            })?
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The fatal storage error that stopped the store, if one happened (`/health`).
    pub fn failure(&self) -> Option<String> {
        self.inner.fatal.borrow().clone()
    }

    /// Resolves with the reason once a fatal storage error has happened. The daemon
    /// selects on this and stops.
    pub async fn fatal(&self) -> String {
        let mut rx = self.inner.fatal.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(reason) => reason.clone().unwrap_or_default(),
            // The sender lives as long as `self`; unreachable while we hold a handle.
            Err(_) => String::from("store dropped"),
        }
    }

    /// Counts the write transactions committed since the store was opened; it changes
    /// after each commit.
    pub fn commits(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.commits.subscribe()
    }

    /// How many write transactions have committed so far (what [`Store::commits`]
    /// sends). Read it *before* a read transaction begins, and whatever that read sees
    /// is at least as new as this count: a cache keyed by it is never served stale.
    pub fn commit_count(&self) -> u64 {
        *self.inner.commits.borrow()
    }

    /// Run `f` in one write transaction on the blocking pool and commit it durably.
    /// `f` returning an error aborts the transaction: nothing it wrote is kept.
    pub(crate) async fn write<T, F>(&self, context: &'static str, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&redb::WriteTransaction) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let _order = self.inner.write_order.lock().await;
        let inner = Arc::clone(&self.inner);
        join(
            &self.inner,
            context,
            tokio::task::spawn_blocking(move || inner.write_blocking(context, f)).await,
        )
    }

    /// Run `f` in one read transaction (a consistent snapshot) on the blocking pool.
    pub(crate) async fn read<T, F>(&self, context: &'static str, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(&redb::ReadTransaction) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        join(
            &self.inner,
            context,
            tokio::task::spawn_blocking(move || inner.read_blocking(context, f)).await,
        )
    }

    /// Copy every table in one read transaction, one entry at a time, to `sink` (a
    /// backup's payload: `crate::engine::backup`). Blocks: run it on a blocking thread.
    pub fn snapshot_blocking(
        &self,
        sink: &mut dyn FnMut(snapshot::SnapshotItem<'_>) -> std::io::Result<()>,
    ) -> Result<snapshot::SnapshotSummary, snapshot::SnapshotError> {
        self.inner.check_alive()?;
        snapshot::copy_all(&self.inner.db, sink).map_err(|e| match e {
            snapshot::SnapshotError::Store(e) => self.inner.note(e).into(),
            other => other,
        })
    }

    /// Check that the tables agree with each other (the promises of `docs/reliability.md`):
    /// every VTXO has exactly one state-index entry matching its one current state, a
    /// full record and a history ending in that state; no lock is held by a movement
    /// that does not exist; movement and round ids never exceed their counters; every
    /// index entry points at a live record that still carries it; every paired device
    /// has its token row and every token row names a device carrying that hash.
    pub async fn verify_invariants(&self) -> Result<InvariantReport, StoreError> {
        self.read("verifying store invariants", invariants::verify)
            .await
    }

    /// [`Store::verify_invariants`] on the calling thread (blocks), for callers that
    /// are on a blocking thread already (a backup's check).
    pub fn verify_invariants_blocking(&self) -> Result<InvariantReport, StoreError> {
        self.inner
            .read_blocking("verifying store invariants", invariants::verify)
    }
}

/// Unwrap a blocking transaction task. A panic inside a transaction closure leaves
/// nothing committed, but it means a bug in the store: it stops the store exactly like
/// a storage failure rather than letting the daemon carry on.
fn join<T>(
    inner: &Inner,
    context: &'static str,
    res: Result<Result<T, StoreError>, tokio::task::JoinError>,
) -> Result<T, StoreError> {
    res.map_err(|e| {
        inner.note(StoreError::Fatal {
            context,
            reason: format!("store task failed: {e}"),
        })
    })?
}

impl Inner {
    fn check_alive(&self) -> Result<(), StoreError> {
        match &*self.fatal.borrow() {
            Some(reason) => Err(StoreError::Poisoned(reason.clone())),
            None => Ok(()),
        }
    }

    /// Remember a fatal error: later calls fail fast and `Store::fatal` resolves.
    fn note(&self, err: StoreError) -> StoreError {
        if err.is_fatal() {
            let reason = err.to_string();
            tracing::error!(error = %reason, "wallet database failed; stopping all access");
            self.fatal.send_if_modified(|slot| {
                if slot.is_none() {
                    *slot = Some(reason);
                    true
                } else {
                    false
                }
            });
        }
        err
    }

    fn write_blocking<T>(
        &self,
        context: &'static str,
        f: impl FnOnce(&redb::WriteTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.check_alive()?;
        let mut tx = self
            .db
            .begin_write()
            .map_err(|e| self.note(from_redb(context, e)))?;
        tx.set_durability(Durability::Immediate)
            .map_err(|e| self.note(from_redb(context, e)))?;
        match f(&tx) {
            Ok(value) => {
                tx.commit().map_err(|e| self.note(from_redb(context, e)))?;
                self.commits.send_modify(|n| *n = n.wrapping_add(1));
                Ok(value)
            }
            Err(err) => {
                // Abort explicitly so an abort failure (I/O) is seen, not swallowed by Drop.
                if let Err(abort) = tx.abort() {
                    self.note(from_redb(context, abort));
                }
                Err(self.note(err))
            }
        }
    }

    fn read_blocking<T>(
        &self,
        context: &'static str,
        f: impl FnOnce(&redb::ReadTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.check_alive()?;
        let tx = self
            .db
            .begin_read()
            .map_err(|e| self.note(from_redb(context, e)))?;
        f(&tx).map_err(|e| self.note(e))
    }
}

/// Counts seen by [`Store::verify_invariants`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InvariantReport {
    pub vtxos: u64,
    pub movements: u64,
    pub round_states: u64,
    pub events: u64,
    pub devices: u64,
    pub nwc_connections: u64,
}

mod invariants {
    use std::collections::BTreeSet;

    use ::bark::vtxo::{VtxoLockHolder, VtxoState};

    use super::*;
    use crate::store::bark::{payment_method_index_keys, vtxo_state_index_key, vtxo_totals_key};

    const CTX: &str = "verifying store invariants";

    fn bad(msg: String) -> StoreError {
        StoreError::Invariant(msg)
    }

    pub(super) fn verify(tx: &redb::ReadTransaction) -> Result<InvariantReport, StoreError> {
        let vtxos = tx.open_table(VTXOS).ctx(CTX)?;
        let full = tx.open_table(VTXOS_FULL).ctx(CTX)?;
        let history = tx.open_table(VTXO_STATE_HISTORY).ctx(CTX)?;
        let by_state = tx.open_table(VTXOS_BY_STATE).ctx(CTX)?;
        let movements = tx.open_table(MOVEMENTS).ctx(CTX)?;
        let meta = tx.open_table(META).ctx(CTX)?;
        let counter = |name| -> Result<u64, StoreError> {
            Ok(meta.get(name).ctx(CTX)?.map(|v| v.value()).unwrap_or(0))
        };

        let mut report = InvariantReport::default();
        let mut totals = std::collections::BTreeMap::<(u8, u16), (u64, u64)>::new();
        for row in vtxos.iter().ctx(CTX)? {
            let (key, value) = row.ctx(CTX)?;
            let key = key.value();
            let row = value.value().decode()?;
            report.vtxos += 1;
            let id = row.bare.id();
            if id.to_bytes() != key {
                return Err(bad(format!("vtxo row {id} is stored under another key")));
            }
            if full.get(key).ctx(CTX)?.is_none() {
                return Err(bad(format!("vtxo {id} has no full record")));
            }
            let index_key = vtxo_state_index_key(&row.bare, row.state.kind());
            if by_state.get(index_key).ctx(CTX)?.is_none() {
                return Err(bad(format!("vtxo {id} is missing from the state index")));
            }
            let last = history
                .range((key, 0)..=(key, u32::MAX))
                .ctx(CTX)?
                .next_back();
            let last = match last {
                Some(entry) => entry.ctx(CTX)?.1.value().decode()?,
                None => return Err(bad(format!("vtxo {id} has no state history"))),
            };
            if last != row.state {
                return Err(bad(format!("vtxo {id} history does not end in its state")));
            }
            let total = totals
                .entry(vtxo_totals_key(&row, row.state.kind()))
                .or_default();
            total.0 += 1;
            total.1 += row.bare.amount().to_sat();
            if let VtxoState::Locked {
                holder: Some(VtxoLockHolder::Movement { id: m }),
            } = &row.state
                && movements.get(m.0).ctx(CTX)?.is_none()
            {
                return Err(bad(format!("vtxo {id} is locked by missing movement {m}")));
            }
        }
        // With one matching entry per row above, equal counts mean no stray entries:
        // a VTXO can never be listed under two states at once.
        if by_state.len().ctx(CTX)? != report.vtxos {
            return Err(bad(
                "the state index has entries for no vtxo or a stale state".into(),
            ));
        }
        let mut stored_totals = std::collections::BTreeMap::new();
        for entry in tx.open_table(VTXO_TOTALS).ctx(CTX)?.iter().ctx(CTX)? {
            let (key, total) = entry.ctx(CTX)?;
            stored_totals.insert(key.value(), total.value());
        }
        if stored_totals != totals {
            return Err(bad("the vtxo totals disagree with the vtxos".into()));
        }

        let last_movement = counter(meta_keys::LAST_MOVEMENT_ID)?;
        let mut pm_keys = BTreeSet::new();
        for row in movements.iter().ctx(CTX)? {
            let (id, value) = row.ctx(CTX)?;
            let movement = value.value().decode()?;
            report.movements += 1;
            if u64::from(id.value()) > last_movement || movement.id.0 != id.value() {
                return Err(bad(format!(
                    "movement {} is beyond the id counter",
                    id.value()
                )));
            }
            pm_keys.extend(payment_method_index_keys(&movement));
        }
        let pm_index = tx.open_table(MOVEMENTS_BY_PAYMENT_METHOD).ctx(CTX)?;
        let mut indexed = BTreeSet::new();
        for entry in pm_index.iter().ctx(CTX)? {
            indexed.insert(entry.ctx(CTX)?.0.value());
        }
        if indexed != pm_keys {
            return Err(bad("payment method index disagrees with movements".into()));
        }
        let by_action = tx.open_table(MOVEMENTS_BY_ACTION).ctx(CTX)?;
        for entry in by_action.iter().ctx(CTX)? {
            let (action, id) = entry.ctx(CTX)?;
            if movements.get(id.value()).ctx(CTX)?.is_none() {
                return Err(bad(format!(
                    "action {} owns a missing movement",
                    action.value()
                )));
            }
        }

        let last_round = counter(meta_keys::LAST_ROUND_STATE_ID)?;
        let rounds = tx.open_table(ROUND_STATES).ctx(CTX)?;
        for entry in rounds.iter().ctx(CTX)? {
            let id = entry.ctx(CTX)?.0.value();
            report.round_states += 1;
            if u64::from(id) > last_round {
                return Err(bad(format!("round state {id} is beyond the id counter")));
            }
        }

        let keys = tx.open_table(VTXO_KEYS).ctx(CTX)?;
        let keys_by_index = tx.open_table(VTXO_KEYS_BY_INDEX).ctx(CTX)?;
        for entry in keys.iter().ctx(CTX)? {
            let (pk, idx) = entry.ctx(CTX)?;
            if keys_by_index
                .get((idx.value(), pk.value()))
                .ctx(CTX)?
                .is_none()
            {
                return Err(bad(format!("vtxo key {} is not indexed", idx.value())));
            }
        }
        if keys.len().ctx(CTX)? != keys_by_index.len().ctx(CTX)? {
            return Err(bad("vtxo key index has stale entries".into()));
        }

        // The event log: ids dense between the pruned mark and the counter, times
        // strictly increasing with ids, and the time index naming each event once.
        let events = tx.open_table(EVENTS).ctx(CTX)?;
        let by_time = tx.open_table(EVENTS_BY_TIME).ctx(CTX)?;
        let mut expected_id = counter(meta_keys::EVENTS_PRUNED_THROUGH_ID)? + 1;
        let mut previous_at = counter(meta_keys::EVENTS_PRUNED_THROUGH_AT)?;
        for entry in events.iter().ctx(CTX)? {
            let (id, value) = entry.ctx(CTX)?;
            let (id, event) = (id.value(), value.value().decode()?);
            report.events += 1;
            if id != expected_id {
                return Err(bad(format!("event {expected_id} is missing from the log")));
            }
            if event.at_us <= previous_at {
                return Err(bad(format!("event {id} is not later than the one before")));
            }
            if by_time.get(event.at_us).ctx(CTX)?.map(|v| v.value()) != Some(id) {
                return Err(bad(format!("event {id} is not in the time index")));
            }
            expected_id += 1;
            previous_at = event.at_us;
        }
        // Pruning never passes the newest event, so the last present (or last pruned)
        // id is the counter.
        if expected_id - 1 != counter(meta_keys::LAST_EVENT_ID)? {
            return Err(bad("the event log does not end at its id counter".into()));
        }
        if by_time.len().ctx(CTX)? != report.events {
            return Err(bad("the event time index has stale entries".into()));
        }

        report.devices = crate::store::tokens::verify(tx, CTX)?;
        report.nwc_connections = crate::store::nwc::verify(tx, CTX)?;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failed transaction of the fatal kind stops the store for good: later calls are
    /// refused without touching redb, and `fatal()` resolves for the daemon to stop.
    #[tokio::test]
    async fn a_fatal_failure_poisons_the_store() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) =
            Store::open(&dir.path().join("w.redb"), &StoreConfig::default()).expect("open");

        // An ordinary refusal is not fatal: the store carries on.
        let refused: Result<(), _> = store
            .write("refusing", |_| Err(StoreError::Rejected("no".into())))
            .await;
        assert!(matches!(refused, Err(StoreError::Rejected(_))));
        store
            .read("reading", |_| Ok(()))
            .await
            .expect("still usable");

        // A panicking transaction is treated like a storage failure.
        let failed: Result<(), _> = store.write("panicking", |_| panic!("injected")).await;
        assert!(
            matches!(failed, Err(StoreError::Fatal { .. })),
            "{failed:?}"
        );
        let reason = tokio::time::timeout(std::time::Duration::from_secs(5), store.fatal())
            .await
            .expect("fatal() resolves");
        assert!(reason.contains("panicking"), "{reason}");
        let later = store.read("reading", |_| Ok(())).await;
        assert!(matches!(later, Err(StoreError::Poisoned(_))), "{later:?}");
    }
}

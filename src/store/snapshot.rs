//! A consistent copy of every table, for backups (`crate::engine::backup`), and the way back:
//! a new database file built from such a copy.
//!
//! The copy is taken in one read transaction, so it is one committed state of the
//! whole file even while writes go on (redb's MVCC: a reader sees the snapshot it
//! began with). Entries are copied as the bytes redb stores, through [`RawAs`], which
//! gives a table its own type names, widths and key order without decoding a value:
//! nothing is parsed on the way out, and a restored file is byte for byte what was
//! copied. Both directions stream: the copy hands out one entry at a time, and a
//! restore writes in bounded batches.

use std::cmp::Ordering;
use std::marker::PhantomData;
use std::path::Path;

use redb::{Durability, Key, ReadableDatabase, ReadableTable, TableDefinition, TableHandle, Value};

use crate::store::error::{RedbResultExt, StoreError, from_redb};
use crate::store::schema::*;

/// A table's stored bytes under the redb types of `T`: the same type name, width, niche
/// and key order, so redb accepts it as that table, but values stay undecoded bytes.
pub struct RawAs<T>(PhantomData<T>);

impl<T> std::fmt::Debug for RawAs<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RawAs")
    }
}

impl<T: Value + 'static> Value for RawAs<T> {
    type SelfType<'a>
        = &'a [u8]
    where
        Self: 'a;
    type AsBytes<'a>
        = &'a [u8]
    where
        Self: 'a;
    const NICHE: Option<&'static [u8]> = T::NICHE;

    fn fixed_width() -> Option<usize> {
        T::fixed_width()
    }

    fn from_bytes<'a>(data: &'a [u8]) -> &'a [u8]
    where
        Self: 'a,
    {
        data
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a &'b [u8]) -> &'a [u8]
    where
        Self: 'b,
    {
        value
    }

    fn type_name() -> redb::TypeName {
        T::type_name()
    }
}

impl<T: Key + 'static> Key for RawAs<T> {
    fn compare(data1: &[u8], data2: &[u8]) -> Ordering {
        T::compare(data1, data2)
    }

    fn separator<'a>(left: &'a [u8], right: &'a [u8]) -> std::borrow::Cow<'a, [u8]> {
        T::separator(left, right)
    }

    fn min_encoded_key() -> Option<std::borrow::Cow<'static, [u8]>> {
        T::min_encoded_key()
    }
}

/// One step of a copy: a table begins, one of its entries, or it ends.
#[derive(Debug)]
pub enum SnapshotItem<'a> {
    Table(&'a str),
    Entry { key: &'a [u8], value: &'a [u8] },
    EndTable { entries: u64 },
}

/// What a copy held: the schema version, the wallet (if any) and entries per table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotSummary {
    pub schema_version: u64,
    /// The wallet's network and fingerprint, from its properties; `None` without one.
    pub wallet: Option<SnapshotWallet>,
    /// Entries per table, in the order they were copied.
    pub tables: Vec<(String, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotWallet {
    pub network: String,
    pub fingerprint: String,
}

/// Every table this code knows, current or retired, in copy order. A table's name is
/// never reused (`schema.rs`), so a name fixes its types in every schema version.
macro_rules! every_table {
    ($mac:ident) => {
        $mac!(
            META,
            PROPERTIES,
            BDK_CHANGESET,
            VTXOS,
            VTXOS_FULL,
            VTXO_STATE_HISTORY,
            VTXOS_BY_STATE,
            VTXO_KEYS,
            VTXO_KEYS_BY_INDEX,
            MOVEMENTS,
            MOVEMENTS_BY_PAYMENT_METHOD,
            MOVEMENTS_BY_ACTION,
            ROUND_STATES,
            WALLET_ACTION_CHECKPOINTS,
            PAID_INVOICES,
            SETTLED_LIGHTNING_RECEIVES,
            EXITS,
            EXIT_CHILD_TXS,
            EVENTS,
            EVENTS_BY_TIME,
            IDEMPOTENCY_KEYS,
            IDEMPOTENCY_KEYS_BY_TIME,
            DEVICES,
            TOKENS,
            WALLET_SETUP,
            VTXO_TOTALS,
            NWC_CONNECTIONS,
            NWC_REQUESTS,
            NWC_REQUESTS_BY_TIME,
            SPENDING_RULES,
            SPENDING_RESERVATIONS,
            SPENDING_APPROVALS,
            LABELS,
            WEBHOOKS,
            WEBHOOK_DELIVERIES
        )
    };
}

/// The raw twin of a typed table definition (same name, same redb types).
fn raw<'a, K: Key + 'static, V: Value + 'static>(
    name: &'a str,
    _typed: TableDefinition<'_, K, V>,
) -> TableDefinition<'a, RawAs<K>, RawAs<V>> {
    TableDefinition::new(name)
}

const CTX: &str = "copying the wallet database";

fn copy_table<K: Key + 'static, V: Value + 'static>(
    tx: &redb::ReadTransaction,
    def: TableDefinition<'_, K, V>,
    sink: &mut dyn FnMut(SnapshotItem<'_>) -> std::io::Result<()>,
) -> Result<u64, SnapshotError> {
    let name = def.name().to_owned();
    let table = match tx.open_table(raw(&name, def)) {
        Ok(table) => table,
        // Only a database older than the table lacks it; there is nothing to copy.
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
        Err(e) => return Err(from_redb(CTX, e).into()),
    };
    sink(SnapshotItem::Table(&name))?;
    let mut entries = 0u64;
    for entry in table.iter().ctx(CTX)? {
        let (key, value) = entry.ctx(CTX)?;
        sink(SnapshotItem::Entry {
            key: key.value(),
            value: value.value(),
        })?;
        entries += 1;
    }
    sink(SnapshotItem::EndTable { entries })?;
    Ok(entries)
}

/// Why a copy or a restore stopped.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The sink (or the source, for a restore) failed: a full disk, a broken stream.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Invalid(String),
}

/// Copy every table of `db` in one read transaction, handing each step to `sink`.
/// (`Store::snapshot_blocking` is the way for an open store.)
pub fn copy_all(
    db: &redb::Database,
    sink: &mut dyn FnMut(SnapshotItem<'_>) -> std::io::Result<()>,
) -> Result<SnapshotSummary, SnapshotError> {
    let tx = db.begin_read().map_err(|e| from_redb(CTX, e))?;
    let schema_version = tx
        .open_table(META)
        .ctx(CTX)?
        .get(meta_keys::SCHEMA_VERSION)
        .ctx(CTX)?
        .map(|v| v.value())
        .unwrap_or(0);
    let wallet = match tx.open_table(PROPERTIES).ctx(CTX)?.get(()).ctx(CTX)? {
        Some(stored) => {
            let properties = stored.value().decode()?;
            Some(SnapshotWallet {
                network: properties.network.to_string(),
                fingerprint: properties.fingerprint.to_string(),
            })
        }
        None => None,
    };
    let mut tables = Vec::new();
    macro_rules! copy_each {
        ($($def:ident),*) => {
            $(
                let entries = copy_table(&tx, $def, sink)?;
                tables.push(($def.name().to_owned(), entries));
            )*
        };
    }
    every_table!(copy_each);
    Ok(SnapshotSummary {
        schema_version,
        wallet,
        tables,
    })
}

/// Bytes of entries written per restore transaction: bounds the memory a restore
/// holds, whatever the wallet's size.
const RESTORE_BATCH_BYTES: usize = 1 << 20;

/// Builds a new database file from a copy, a table at a time, in bounded batches. The
/// file is usable only after [`Restorer::finish`] (its last commit is the durable one);
/// the caller writes it under a temporary name and renames it into place.
pub struct Restorer {
    db: redb::Database,
    table: Option<String>,
    batch: Vec<(Vec<u8>, Vec<u8>)>,
    batch_bytes: usize,
    entries: u64,
    tables: Vec<(String, u64)>,
}

impl Restorer {
    /// Create the file at `path`, which must not exist.
    pub fn create(path: &Path) -> Result<Restorer, SnapshotError> {
        const CTX: &str = "creating the restored wallet database";
        if path.exists() {
            return Err(SnapshotError::Invalid(format!(
                "{} exists already",
                path.display()
            )));
        }
        let db = Self::builder()
            .create(path)
            .map_err(|e| from_redb(CTX, e))?;
        Ok(Self::over(db))
    }

    /// A database in memory, for a check that keeps nothing (a backup's verification):
    /// nothing reaches the disk, which on the box is the card that wears.
    pub fn create_in_memory() -> Result<Restorer, SnapshotError> {
        let db = Self::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(|e| from_redb("creating a database in memory", e))?;
        Ok(Self::over(db))
    }

    fn builder() -> redb::Builder {
        let mut builder = redb::Database::builder();
        // The restore writes in batches and reads nothing back: a small cache does.
        builder.set_cache_size(1 << 20);
        builder
    }

    fn over(db: redb::Database) -> Restorer {
        Restorer {
            db,
            table: None,
            batch: Vec::new(),
            batch_bytes: 0,
            entries: 0,
            tables: Vec::new(),
        }
    }

    /// The next entries belong to table `name`.
    pub fn begin_table(&mut self, name: &str) -> Result<(), SnapshotError> {
        if self.table.is_some() {
            return Err(SnapshotError::Invalid(format!(
                "table {name} begins inside another"
            )));
        }
        if !known_table(name) {
            return Err(SnapshotError::Invalid(format!(
                "unknown table {name:?}: the backup was made by a newer berthd"
            )));
        }
        if self.tables.iter().any(|(seen, _)| seen == name) {
            return Err(SnapshotError::Invalid(format!(
                "table {name} appears twice"
            )));
        }
        self.table = Some(name.to_owned());
        self.entries = 0;
        Ok(())
    }

    pub fn entry(&mut self, key: &[u8], value: &[u8]) -> Result<(), SnapshotError> {
        if self.table.is_none() {
            return Err(SnapshotError::Invalid("an entry outside any table".into()));
        }
        self.batch_bytes += key.len() + value.len();
        self.batch.push((key.to_vec(), value.to_vec()));
        self.entries += 1;
        if self.batch_bytes >= RESTORE_BATCH_BYTES {
            self.flush(Durability::None)?;
        }
        Ok(())
    }

    /// The table ends with `entries` entries, as the copy counted them.
    pub fn end_table(&mut self, entries: u64) -> Result<(), SnapshotError> {
        let Some(name) = self.table.clone() else {
            return Err(SnapshotError::Invalid(
                "a table ends that never began".into(),
            ));
        };
        if entries != self.entries {
            return Err(SnapshotError::Invalid(format!(
                "table {name} holds {} entries, its end says {entries}",
                self.entries
            )));
        }
        // An empty table is created too, as the copy had it.
        self.flush(Durability::None)?;
        self.tables.push((name, entries));
        self.table = None;
        Ok(())
    }

    /// Make everything durable and close the file. Returns entries per table.
    pub fn finish(self) -> Result<Vec<(String, u64)>, SnapshotError> {
        self.finish_open().map(|(_, tables)| tables)
    }

    /// [`Restorer::finish`], keeping the database open (one in memory is gone once
    /// closed): the database and the entries per table.
    pub fn finish_open(self) -> Result<(redb::Database, Vec<(String, u64)>), SnapshotError> {
        if let Some(name) = &self.table {
            return Err(SnapshotError::Invalid(format!("table {name} never ends")));
        }
        const CTX: &str = "finishing the restored wallet database";
        let mut tx = self.db.begin_write().map_err(|e| from_redb(CTX, e))?;
        tx.set_durability(Durability::Immediate)
            .map_err(|e| from_redb(CTX, e))?;
        tx.commit().map_err(|e| from_redb(CTX, e))?;
        Ok((self.db, self.tables))
    }

    fn flush(&mut self, durability: Durability) -> Result<(), SnapshotError> {
        const CTX: &str = "writing the restored wallet database";
        let Some(name) = self.table.as_deref() else {
            return Ok(());
        };
        let mut tx = self.db.begin_write().map_err(|e| from_redb(CTX, e))?;
        tx.set_durability(durability)
            .map_err(|e| from_redb(CTX, e))?;
        insert_batch(&tx, name, &self.batch)?;
        tx.commit().map_err(|e| from_redb(CTX, e))?;
        self.batch.clear();
        self.batch_bytes = 0;
        Ok(())
    }
}

fn known_table(name: &str) -> bool {
    macro_rules! any_named {
        ($($def:ident),*) => {
            false $(|| name == $def.name())*
        };
    }
    every_table!(any_named)
}

fn insert_batch(
    tx: &redb::WriteTransaction,
    name: &str,
    batch: &[(Vec<u8>, Vec<u8>)],
) -> Result<(), SnapshotError> {
    fn insert<K: Key + 'static, V: Value + 'static>(
        tx: &redb::WriteTransaction,
        def: TableDefinition<'_, K, V>,
        batch: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<(), SnapshotError> {
        let name = def.name().to_owned();
        let mut table = tx.open_table(raw(&name, def)).ctx(CTX)?;
        for (key, value) in batch {
            check_width::<K>(&name, "key", key)?;
            check_width::<V>(&name, "value", value)?;
            if table
                .insert(key.as_slice(), value.as_slice())
                .ctx(CTX)?
                .is_some()
            {
                return Err(SnapshotError::Invalid(format!(
                    "table {name} holds a key twice"
                )));
            }
        }
        Ok(())
    }
    macro_rules! insert_into {
        ($($def:ident),*) => {
            $(
                if name == $def.name() {
                    return insert(tx, $def, batch);
                }
            )*
        };
    }
    every_table!(insert_into);
    Err(SnapshotError::Invalid(format!("unknown table {name:?}")))
}

/// A fixed-width type's bytes must have its width: redb would otherwise misread them.
fn check_width<T: Value>(table: &str, what: &str, bytes: &[u8]) -> Result<(), SnapshotError> {
    match T::fixed_width() {
        Some(width) if width != bytes.len() => Err(SnapshotError::Invalid(format!(
            "table {table}: a {what} of {} bytes where the type has {width}",
            bytes.len()
        ))),
        _ => Ok(()),
    }
}

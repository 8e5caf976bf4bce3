//! Helpers the concerns share: the id counters in `META`, and decoded reads.

use redb::{ReadableTable, WriteTransaction};

use crate::store::codec::{Record, Stored};
use crate::store::error::{RedbResultExt, StoreError};
use crate::store::schema::*;

pub(super) fn next_counter(
    tx: &WriteTransaction,
    name: &str,
    ctx: &'static str,
) -> Result<u64, StoreError> {
    let mut meta = tx.open_table(META).ctx(ctx)?;
    let next = meta.get(name).ctx(ctx)?.map(|v| v.value()).unwrap_or(0) + 1;
    meta.insert(name, next).ctx(ctx)?;
    Ok(next)
}

pub(super) fn next_u32_id(
    tx: &WriteTransaction,
    name: &str,
    ctx: &'static str,
) -> Result<u32, StoreError> {
    u32::try_from(next_counter(tx, name, ctx)?)
        .map_err(|_| StoreError::Rejected(format!("{name} exhausted the 32-bit id space")))
}

/// Get one row by key from a table of record kind `R`, decoded.
pub(super) fn get_decoded<K, R>(
    table: &impl ReadableTable<K, Stored<R>>,
    key: K::SelfType<'_>,
    ctx: &'static str,
) -> Result<Option<R::Value>, StoreError>
where
    K: redb::Key + 'static,
    R: Record,
{
    table
        .get(key)
        .ctx(ctx)?
        .map(|v| v.value().decode())
        .transpose()
}

/// Every value of a table of record kind `R`, decoded, in key order.
pub(super) fn all_decoded<K, R>(
    table: &impl ReadableTable<K, Stored<R>>,
    ctx: &'static str,
) -> Result<Vec<R::Value>, StoreError>
where
    K: redb::Key + 'static,
    R: Record,
{
    let mut out = Vec::new();
    for entry in table.iter().ctx(ctx)? {
        out.push(entry.ctx(ctx)?.1.value().decode()?);
    }
    Ok(out)
}

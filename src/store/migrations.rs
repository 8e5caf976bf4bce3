//! Schema versioning. One write transaction reads the file's schema version, runs every
//! migration from it up to [`SCHEMA_VERSION`], and writes the new version, so a crash
//! mid-migration leaves the old version intact. A file from a newer Berth is refused.

use redb::{Database, ReadableDatabase, ReadableTable};

use crate::store::error::{StoreError, from_redb};
use crate::store::schema::{self, META, SCHEMA_VERSION, meta_keys};

/// One step: brings a version `N - 1` file to version `N` inside the caller's transaction.
type Migration = fn(&redb::WriteTransaction) -> Result<(), StoreError>;

/// `MIGRATIONS[i]` migrates version `i` to `i + 1`. Version 0 is an empty file.
const MIGRATIONS: [Migration; SCHEMA_VERSION as usize] = [
    create_v1,
    add_berth_tables,
    add_device_tables,
    add_wallet_setup,
    add_vtxo_totals,
    add_nwc_tables,
    add_spending_tables,
    add_approvals_and_labels,
    add_webhooks,
];

fn create_v1(tx: &redb::WriteTransaction) -> Result<(), StoreError> {
    schema::create_all(tx).map_err(|e| from_redb("creating the schema", e))
}

/// Version 2: Berth's own tables, the durable event log and the idempotency keys.
/// Additive: they start empty.
fn add_berth_tables(tx: &redb::WriteTransaction) -> Result<(), StoreError> {
    const CTX: &str = "adding the event log and idempotency keys";
    let e = |e| from_redb(CTX, e);
    tx.open_table(schema::EVENTS).map_err(e)?;
    tx.open_table(schema::EVENTS_BY_TIME).map_err(e)?;
    tx.open_table(schema::IDEMPOTENCY_KEYS).map_err(e)?;
    tx.open_table(schema::IDEMPOTENCY_KEYS_BY_TIME).map_err(e)?;
    Ok(())
}

/// Version 3: paired devices and their token hashes. Additive: they start empty.
fn add_device_tables(tx: &redb::WriteTransaction) -> Result<(), StoreError> {
    const CTX: &str = "adding the device tables";
    let e = |e| from_redb(CTX, e);
    tx.open_table(schema::DEVICES).map_err(e)?;
    tx.open_table(schema::TOKENS).map_err(e)?;
    Ok(())
}

/// Version 4: the wallet's setup record (creation and seed recovery). Additive: a
/// wallet that exists already has none, and its bark properties still say it exists.
fn add_wallet_setup(tx: &redb::WriteTransaction) -> Result<(), StoreError> {
    tx.open_table(schema::WALLET_SETUP)
        .map_err(|e| from_redb("adding the wallet setup table", e))?;
    Ok(())
}

/// Version 5: the VTXO totals by state and exit depth, counted from the VTXOs the file
/// holds (one pass over the rows, inside the migration's transaction).
fn add_vtxo_totals(tx: &redb::WriteTransaction) -> Result<(), StoreError> {
    const CTX: &str = "adding the vtxo totals";
    let e = |e| from_redb(CTX, e);
    let rows = tx.open_table(schema::VTXOS).map_err(e)?;
    let mut totals = std::collections::BTreeMap::<(u8, u16), (u64, u64)>::new();
    for entry in rows.iter().map_err(|e| from_redb(CTX, e))? {
        let row = entry.map_err(|e| from_redb(CTX, e))?.1.value().decode()?;
        let total = totals
            .entry(crate::store::bark::vtxo_totals_key(&row, row.state.kind()))
            .or_default();
        total.0 += 1;
        total.1 += row.bare.amount().to_sat();
    }
    let mut table = tx.open_table(schema::VTXO_TOTALS).map_err(e)?;
    for (key, total) in totals {
        table.insert(key, total).map_err(|e| from_redb(CTX, e))?;
    }
    Ok(())
}

/// Version 6: Nostr Wallet Connect's connections and payment requests. Additive: they
/// start empty.
fn add_nwc_tables(tx: &redb::WriteTransaction) -> Result<(), StoreError> {
    const CTX: &str = "adding the Nostr Wallet Connect tables";
    let e = |e| from_redb(CTX, e);
    tx.open_table(schema::NWC_CONNECTIONS).map_err(e)?;
    tx.open_table(schema::NWC_REQUESTS).map_err(e)?;
    tx.open_table(schema::NWC_REQUESTS_BY_TIME).map_err(e)?;
    Ok(())
}

/// Version 7: devices' spending rules and the payments reserved against them.
/// Additive: they start empty.
fn add_spending_tables(tx: &redb::WriteTransaction) -> Result<(), StoreError> {
    const CTX: &str = "adding the spending rules tables";
    let e = |e| from_redb(CTX, e);
    tx.open_table(schema::SPENDING_RULES).map_err(e)?;
    tx.open_table(schema::SPENDING_RESERVATIONS).map_err(e)?;
    Ok(())
}

/// Version 8: payments held for the owner's approval, and imported labels. Additive:
/// they start empty.
fn add_approvals_and_labels(tx: &redb::WriteTransaction) -> Result<(), StoreError> {
    const CTX: &str = "adding the approvals and labels tables";
    let e = |e| from_redb(CTX, e);
    tx.open_table(schema::SPENDING_APPROVALS).map_err(e)?;
    tx.open_table(schema::LABELS).map_err(e)?;
    Ok(())
}

/// What opening did to the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaOutcome {
    pub found: u64,
    pub now: u64,
}

/// Version 9: webhook endpoints and their deliveries. Additive: they start empty.
fn add_webhooks(tx: &redb::WriteTransaction) -> Result<(), StoreError> {
    const CTX: &str = "adding the webhook tables";
    let e = |e| from_redb(CTX, e);
    tx.open_table(schema::WEBHOOKS).map_err(e)?;
    tx.open_table(schema::WEBHOOK_DELIVERIES).map_err(e)?;
    Ok(())
}

/// Check the schema version and migrate to [`SCHEMA_VERSION`] in one transaction.
pub fn prepare(db: &Database) -> Result<SchemaOutcome, StoreError> {
    const CTX: &str = "checking the schema version";
    // The common case, a file already at this version, needs no write (and so no
    // fsync at every start).
    let current = db
        .begin_read()
        .map_err(|e| from_redb(CTX, e))
        .and_then(|tx| match tx.open_table(META) {
            Ok(meta) => Ok(meta
                .get(meta_keys::SCHEMA_VERSION)
                .map_err(|e| from_redb(CTX, e))?
                .map(|v| v.value())),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
            Err(e) => Err(from_redb(CTX, e)),
        })?;
    if current == Some(SCHEMA_VERSION) {
        return Ok(SchemaOutcome {
            found: SCHEMA_VERSION,
            now: SCHEMA_VERSION,
        });
    }
    let tx = db.begin_write().map_err(|e| from_redb(CTX, e))?;
    let found = {
        let meta = tx.open_table(META).map_err(|e| from_redb(CTX, e))?;
        let found = meta
            .get(meta_keys::SCHEMA_VERSION)
            .map_err(|e| from_redb(CTX, e))?
            .map(|v| v.value());
        found.unwrap_or(0)
    };
    if found > SCHEMA_VERSION {
        // Dropping the transaction aborts it: nothing in the file changes.
        return Err(StoreError::NewerSchema {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (from, step) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tracing::info!(from, to = from + 1, "migrating wallet database schema");
        step(&tx)?;
    }
    if found < SCHEMA_VERSION {
        let mut meta = tx.open_table(META).map_err(|e| from_redb(CTX, e))?;
        meta.insert(meta_keys::SCHEMA_VERSION, SCHEMA_VERSION)
            .map_err(|e| from_redb(CTX, e))?;
    }
    tx.commit().map_err(|e| from_redb(CTX, e))?;
    Ok(SchemaOutcome {
        found,
        now: SCHEMA_VERSION,
    })
}

//! Paired devices and the hashes of their bearer tokens.
//!
//! Two tables, always changed together in one write transaction:
//! - [`DEVICES`]: device id → [`DeviceRecord`];
//! - [`TOKENS`]: SHA-256 of the device's bearer token → device id, so a request's token
//!   is found by hashing it and looking the hash up (the token itself is never stored).
//!
//! Every device has exactly one token row and every token row names a device carrying
//! that hash; `Store::verify_invariants` checks both directions.
//!
//! Devices are access to the appliance, not wallet state: deleting the wallet
//! (`Store::wipe_wallet`) leaves both tables alone. What a device may do (its scopes)
//! and how ids, names and tokens are made is the caller's business; the store keeps
//! the records well-formed and the pair consistent.

use redb::{ReadableTable, ReadableTableMetadata};

use crate::store::Store;
use crate::store::codec::Envelope;
use crate::store::error::{RedbResultExt, StoreError};
pub use crate::store::records::{DEVICE_ID_LEN, DeviceRecord, MAX_DEVICE_NAME_LEN};
use crate::store::schema::{DEVICES, TOKENS};

/// Refuse a record whose id or name the store cannot keep.
fn check_record(record: &DeviceRecord) -> Result<(), StoreError> {
    let id_ok = record.id.len() == DEVICE_ID_LEN
        && record
            .id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !id_ok {
        return Err(StoreError::Rejected(format!(
            "a device id is {DEVICE_ID_LEN} lowercase hex characters"
        )));
    }
    if record.name.len() > MAX_DEVICE_NAME_LEN {
        return Err(StoreError::Rejected(format!(
            "a device name is at most {MAX_DEVICE_NAME_LEN} bytes"
        )));
    }
    Ok(())
}

/// Write both rows of a new device inside the caller's transaction. The duplicate
/// checks are the inserts themselves: a refusal returns an error after the device row
/// may already be written, and the caller's transaction abort undoes it.
fn insert_pair(
    tx: &redb::WriteTransaction,
    record: &DeviceRecord,
    max_devices: usize,
    ctx: &'static str,
) -> Result<(), StoreError> {
    let mut devices = tx.open_table(DEVICES).ctx(ctx)?;
    let mut tokens = tx.open_table(TOKENS).ctx(ctx)?;
    let paired = devices.len().ctx(ctx)?;
    let encoded = Envelope::encode(record)?;
    if devices
        .insert(record.id.as_str(), encoded)
        .ctx(ctx)?
        .is_some()
    {
        return Err(StoreError::DeviceExists(record.id.clone()));
    }
    if tokens
        .insert(record.token_hash, record.id.as_str())
        .ctx(ctx)?
        .is_some()
    {
        return Err(StoreError::TokenHashTaken);
    }
    if paired >= u64::try_from(max_devices).unwrap_or(u64::MAX) {
        return Err(StoreError::TooManyDevices { max: max_devices });
    }
    Ok(())
}

/// Remove both rows of device `id` inside the caller's transaction.
fn remove_pair(
    tx: &redb::WriteTransaction,
    id: &str,
    ctx: &'static str,
) -> Result<Option<DeviceRecord>, StoreError> {
    let mut devices = tx.open_table(DEVICES).ctx(ctx)?;
    let Some(record) = devices
        .remove(id)
        .ctx(ctx)?
        .map(|v| v.value().decode())
        .transpose()?
    else {
        return Ok(None);
    };
    crate::store::spending::forget_device(tx, id, ctx)?;
    crate::store::webhooks::forget_device(tx, id, ctx)?;
    let mut tokens = tx.open_table(TOKENS).ctx(ctx)?;
    let owner = tokens
        .get(record.token_hash)
        .ctx(ctx)?
        .map(|v| v.value().to_owned());
    if owner.as_deref() == Some(id) {
        tokens.remove(record.token_hash).ctx(ctx)?;
    } else {
        // A broken pair (verify_invariants reports it). Removing the device still
        // revokes it; a token row naming another device is not ours to remove.
        tracing::warn!(
            target: "berth::store",
            device = id,
            "removed device had no token row of its own"
        );
    }
    Ok(Some(record))
}

impl Store {
    /// Pair a device: its record and its token row, in one durable transaction.
    ///
    /// Refused, with nothing written, when the id is not [`DEVICE_ID_LEN`] lowercase
    /// hex characters or the name is longer than [`MAX_DEVICE_NAME_LEN`] bytes
    /// ([`StoreError::Rejected`]), the id is already paired
    /// ([`StoreError::DeviceExists`]), another device has the same token hash
    /// ([`StoreError::TokenHashTaken`]), or `max_devices` devices are already paired
    /// ([`StoreError::TooManyDevices`]). The checks run in that order.
    pub async fn add_device(
        &self,
        record: DeviceRecord,
        max_devices: usize,
    ) -> Result<(), StoreError> {
        const CTX: &str = "pairing a device";
        check_record(&record)?;
        self.write(CTX, move |tx| insert_pair(tx, &record, max_devices, CTX))
            .await
    }

    /// Every paired device, oldest first (by `created_at_us`, then id).
    pub async fn devices(&self) -> Result<Vec<DeviceRecord>, StoreError> {
        const CTX: &str = "listing paired devices";
        self.read(CTX, |tx| {
            let devices = tx.open_table(DEVICES).ctx(CTX)?;
            let mut out = Vec::new();
            for entry in devices.iter().ctx(CTX)? {
                out.push(entry.ctx(CTX)?.1.value().decode()?);
            }
            // Keys are ids, so the table is in id order; pairing order is the caller's.
            out.sort_by(|a: &DeviceRecord, b| {
                (a.created_at_us, &a.id).cmp(&(b.created_at_us, &b.id))
            });
            Ok(out)
        })
        .await
    }

    /// Unpair device `id`: its record and its token row, in one durable transaction.
    /// Returns the removed record, or `None` (nothing written) for an unknown id.
    pub async fn remove_device(&self, id: &str) -> Result<Option<DeviceRecord>, StoreError> {
        const CTX: &str = "removing a paired device";
        let id = id.to_owned();
        self.write(CTX, move |tx| remove_pair(tx, &id, CTX)).await
    }
}

/// Check the pair inside a read transaction (part of `Store::verify_invariants`):
/// every device is stored under its own id and has its token row, and every token row
/// names a device carrying that hash. Returns the number of devices.
pub(super) fn verify(tx: &redb::ReadTransaction, ctx: &'static str) -> Result<u64, StoreError> {
    let bad = |msg: String| StoreError::Invariant(msg);
    let devices = tx.open_table(DEVICES).ctx(ctx)?;
    let tokens = tx.open_table(TOKENS).ctx(ctx)?;
    let mut count = 0;
    for entry in devices.iter().ctx(ctx)? {
        let (key, value) = entry.ctx(ctx)?;
        let (key, record) = (key.value(), value.value().decode()?);
        count += 1;
        if record.id != key {
            return Err(bad(format!("device {key} is stored under another id")));
        }
        let owner = tokens.get(record.token_hash).ctx(ctx)?;
        if owner.as_ref().map(|v| v.value()) != Some(key) {
            return Err(bad(format!("device {key} has no token row")));
        }
    }
    for entry in tokens.iter().ctx(ctx)? {
        let (hash, id) = entry.ctx(ctx)?;
        let (hash, id) = (hash.value(), id.value());
        let carries = devices
            .get(id)
            .ctx(ctx)?
            .map(|v| v.value().decode())
            .transpose()?
            .is_some_and(|record| record.token_hash == hash);
        if !carries {
            return Err(bad(format!(
                "a token row names device {id}, which does not carry it"
            )));
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::store::StoreConfig;

    fn device(n: u8, at_us: u64) -> DeviceRecord {
        DeviceRecord {
            id: format!("{n:02x}").repeat(DEVICE_ID_LEN / 2),
            name: format!("phone {n}"),
            scopes: n,
            token_hash: [n; 32],
            created_at_us: at_us,
            console_session: n.is_multiple_of(2),
        }
    }

    async fn open(path: &Path) -> Store {
        Store::open_async(path, &StoreConfig::default())
            .await
            .expect("open")
            .0
    }

    /// The raw rows: (device ids, (token hash, device id) pairs).
    async fn rows(store: &Store) -> (Vec<String>, Vec<([u8; 32], String)>) {
        store
            .read("reading raw device rows", |tx| {
                let mut ids = Vec::new();
                for e in tx.open_table(DEVICES).ctx("t")?.iter().ctx("t")? {
                    ids.push(e.ctx("t")?.0.value().to_owned());
                }
                let mut hashes = Vec::new();
                for e in tx.open_table(TOKENS).ctx("t")?.iter().ctx("t")? {
                    let (h, id) = e.ctx("t")?;
                    hashes.push((h.value(), id.value().to_owned()));
                }
                Ok((ids, hashes))
            })
            .await
            .expect("read rows")
    }

    #[tokio::test]
    async fn devices_round_trip_oldest_first_and_survive_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("db");
        {
            let store = open(&path).await;
            assert_eq!(store.devices().await.expect("list"), vec![]);
            // Ids sort the other way round from pairing time.
            store.add_device(device(9, 100), 10).await.expect("add 9");
            store.add_device(device(2, 200), 10).await.expect("add 2");
            store.add_device(device(5, 300), 10).await.expect("add 5");
            let listed = store.devices().await.expect("list");
            assert_eq!(listed, vec![device(9, 100), device(2, 200), device(5, 300)]);
            // The token index names each device by its hash, and no other hash.
            let (_, hashes) = rows(&store).await;
            assert!(hashes.contains(&([2; 32], device(2, 0).id)));
            assert!(!hashes.iter().any(|(h, _)| *h == [7; 32]));
            assert_eq!(
                store.remove_device(&device(2, 0).id).await.expect("remove"),
                Some(device(2, 200))
            );
            let (_, hashes) = rows(&store).await;
            assert!(!hashes.iter().any(|(h, _)| *h == [2; 32]));
            let report = store.verify_invariants().await.expect("invariants");
            assert_eq!(report.devices, 2);
        }
        let store = open(&path).await;
        assert_eq!(
            store.devices().await.expect("list"),
            vec![device(9, 100), device(5, 300)]
        );
        let (ids, hashes) = rows(&store).await;
        assert_eq!(ids, vec![device(5, 0).id, device(9, 0).id]);
        assert_eq!(
            hashes,
            vec![([5; 32], device(5, 0).id), ([9; 32], device(9, 0).id)]
        );
    }

    #[tokio::test]
    async fn duplicates_the_cap_and_bad_records_are_refused_without_a_trace() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(&dir.path().join("db")).await;
        store.add_device(device(1, 10), 2).await.expect("add");

        // Same id, other hash: the existing record is kept as it was.
        let same_id = DeviceRecord {
            token_hash: [0xee; 32],
            name: "impostor".into(),
            ..device(1, 20)
        };
        let err = store.add_device(same_id, 2).await.expect_err("dup id");
        assert!(matches!(&err, StoreError::DeviceExists(id) if *id == device(1, 0).id));
        // Other id, same hash: the refusal comes after the new device row was
        // inserted, so this also shows the transaction drops it.
        let same_hash = DeviceRecord {
            token_hash: [1; 32],
            ..device(3, 20)
        };
        let err = store.add_device(same_hash, 2).await.expect_err("dup hash");
        assert!(matches!(err, StoreError::TokenHashTaken), "{err:?}");
        assert_eq!(
            rows(&store).await,
            (vec![device(1, 0).id], vec![([1; 32], device(1, 0).id)])
        );
        assert_eq!(store.devices().await.expect("list"), vec![device(1, 10)]);

        store.add_device(device(2, 30), 2).await.expect("second");
        let err = store.add_device(device(3, 40), 2).await.expect_err("cap");
        assert!(
            matches!(err, StoreError::TooManyDevices { max: 2 }),
            "{err:?}"
        );
        let err = store.add_device(device(3, 40), 0).await.expect_err("cap 0");
        assert!(
            matches!(err, StoreError::TooManyDevices { max: 0 }),
            "{err:?}"
        );

        for bad in [
            DeviceRecord {
                id: "ABCDEF0123456789".into(),
                ..device(4, 50)
            },
            DeviceRecord {
                id: "abc".into(),
                ..device(4, 50)
            },
            DeviceRecord {
                name: "x".repeat(MAX_DEVICE_NAME_LEN + 1),
                ..device(4, 50)
            },
        ] {
            let err = store.add_device(bad, 10).await.expect_err("bad record");
            assert!(matches!(err, StoreError::Rejected(_)), "{err:?}");
        }
        // A name of exactly the limit (multi-byte characters count in bytes) is kept.
        let long = DeviceRecord {
            name: "é".repeat(MAX_DEVICE_NAME_LEN / 2),
            ..device(4, 50)
        };
        store.add_device(long.clone(), 10).await.expect("64 bytes");

        assert_eq!(store.devices().await.expect("list").len(), 3);
        assert_eq!(
            store
                .remove_device("0123456789abcdef")
                .await
                .expect("remove"),
            None
        );
        assert_eq!(store.devices().await.expect("list").len(), 3);
        store.verify_invariants().await.expect("invariants");
    }

    /// A transaction that fails after writing a pair (or removing one) keeps neither
    /// row's change.
    #[tokio::test]
    async fn both_rows_change_or_neither() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(&dir.path().join("db")).await;
        let failed: Result<(), _> = store
            .write("pairing then failing", |tx| {
                insert_pair(tx, &device(1, 10), 10, "t")?;
                Err(StoreError::Rejected("injected".into()))
            })
            .await;
        assert!(matches!(failed, Err(StoreError::Rejected(_))));
        assert_eq!(rows(&store).await, (vec![], vec![]));

        store.add_device(device(1, 10), 10).await.expect("add");
        let failed: Result<(), _> = store
            .write("unpairing then failing", |tx| {
                remove_pair(tx, &device(1, 0).id, "t")?;
                Err(StoreError::Rejected("injected".into()))
            })
            .await;
        assert!(matches!(failed, Err(StoreError::Rejected(_))));
        assert_eq!(
            rows(&store).await,
            (vec![device(1, 0).id], vec![([1; 32], device(1, 0).id)])
        );
    }

    #[tokio::test]
    async fn a_broken_pair_is_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(&dir.path().join("db")).await;
        store.add_device(device(1, 10), 10).await.expect("add");
        store.add_device(device(2, 20), 10).await.expect("add");
        store.verify_invariants().await.expect("whole pairs");

        // A device without its token row.
        store
            .write("breaking a pair", |tx| {
                tx.open_table(TOKENS).ctx("t")?.remove([1; 32]).ctx("t")?;
                Ok(())
            })
            .await
            .expect("break");
        let err = store
            .verify_invariants()
            .await
            .expect_err("missing token row");
        assert!(
            matches!(&err, StoreError::Invariant(m) if m.contains("no token row")),
            "{err:?}"
        );
        // Removing it still works, and leaves the other device's row alone.
        assert!(
            store
                .remove_device(&device(1, 0).id)
                .await
                .expect("remove")
                .is_some()
        );
        store.verify_invariants().await.expect("consistent again");

        // A token row naming a device that does not exist.
        store
            .write("adding a stray token row", |tx| {
                tx.open_table(TOKENS)
                    .ctx("t")?
                    .insert([7; 32], "0707070707070707")
                    .ctx("t")?;
                Ok(())
            })
            .await
            .expect("stray");
        let err = store
            .verify_invariants()
            .await
            .expect_err("stray token row");
        assert!(
            matches!(&err, StoreError::Invariant(m) if m.contains("does not carry it")),
            "{err:?}"
        );
    }

    /// Devices are access to the appliance, not wallet state.
    #[tokio::test]
    async fn deleting_the_wallet_keeps_devices() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open(&dir.path().join("db")).await;
        store.add_device(device(1, 10), 10).await.expect("add");
        store.wipe_wallet().await.expect("wipe");
        assert_eq!(store.devices().await.expect("list"), vec![device(1, 10)]);
        let (_, hashes) = rows(&store).await;
        assert_eq!(
            hashes,
            vec![([1; 32], device(1, 0).id)],
            "its token row too"
        );
        store.verify_invariants().await.expect("invariants");
    }
}

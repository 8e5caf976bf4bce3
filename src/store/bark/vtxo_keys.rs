//! VTXO public keys and their derivation indexes, with the index-ordered table kept in
//! the same transaction.

use bitcoin::secp256k1::PublicKey;
use redb::ReadableTable;

use crate::store::Store;
use crate::store::error::RedbResultExt;
use crate::store::schema::*;

/// `BarkPersister::store_vtxo_key`.
pub(super) async fn store_key(
    store: &Store,
    index: u32,
    public_key: PublicKey,
) -> anyhow::Result<()> {
    store_keys(store, &[(index, public_key)]).await
}

/// `BarkPersister::store_vtxo_keys`.
pub(super) async fn store_keys(store: &Store, keys: &[(u32, PublicKey)]) -> anyhow::Result<()> {
    const CTX: &str = "storing vtxo keys";
    let keys = keys.to_vec();
    store
        .write(CTX, move |tx| {
            let mut by_pk = tx.open_table(VTXO_KEYS).ctx(CTX)?;
            let mut by_index = tx.open_table(VTXO_KEYS_BY_INDEX).ctx(CTX)?;
            for (index, pk) in keys {
                let pk = pk.serialize();
                if let Some(old) = by_pk.insert(pk, index).ctx(CTX)? {
                    let old = old.value();
                    by_index.remove((old, pk)).ctx(CTX)?;
                }
                by_index.insert((index, pk), ()).ctx(CTX)?;
            }
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::get_last_vtxo_key_index`.
pub(super) async fn last_index(store: &Store) -> anyhow::Result<Option<u32>> {
    const CTX: &str = "reading the last vtxo key index";
    Ok(store
        .read(CTX, |tx| {
            let by_index = tx.open_table(VTXO_KEYS_BY_INDEX).ctx(CTX)?;
            Ok(by_index.last().ctx(CTX)?.map(|(k, _)| k.value().0))
        })
        .await?)
}

/// `BarkPersister::get_public_key_idx`.
pub(super) async fn index_of(store: &Store, public_key: &PublicKey) -> anyhow::Result<Option<u32>> {
    const CTX: &str = "looking up a vtxo key";
    let pk = public_key.serialize();
    Ok(store
        .read(CTX, move |tx| {
            Ok(tx
                .open_table(VTXO_KEYS)
                .ctx(CTX)?
                .get(pk)
                .ctx(CTX)?
                .map(|v| v.value()))
        })
        .await?)
}

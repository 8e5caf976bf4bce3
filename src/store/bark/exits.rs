//! Unilateral exits: one entry per VTXO being exited, and the child transactions of
//! exit transactions.

use ark::VtxoId;
use bark::exit::{ExitStateKind, ExitTxOrigin};
use bark::persist::models::{SerdeExitChildTx, StoredExit};
use bitcoin::hashes::Hash;
use bitcoin::{Transaction, Txid};

use super::tables::{all_decoded, get_decoded};
use crate::store::Store;
use crate::store::codec::Envelope;
use crate::store::error::RedbResultExt;
use crate::store::schema::*;

/// `BarkPersister::store_exit_vtxo_entry`.
pub(super) async fn put(store: &Store, exit: &StoredExit) -> anyhow::Result<()> {
    const CTX: &str = "storing an exit";
    let encoded = Envelope::encode(exit)?;
    let key = exit.vtxo_id.to_bytes();
    store
        .write(CTX, move |tx| {
            tx.open_table(EXITS)
                .ctx(CTX)?
                .insert(key, encoded)
                .ctx(CTX)?;
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::remove_exit_vtxo_entry`.
pub(super) async fn remove(store: &Store, id: &VtxoId) -> anyhow::Result<()> {
    const CTX: &str = "removing an exit";
    let key = id.to_bytes();
    store
        .write(CTX, move |tx| {
            tx.open_table(EXITS).ctx(CTX)?.remove(key).ctx(CTX)?;
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::get_exit_vtxo_entries`.
///
/// VTXO id order.
pub(super) async fn entries(store: &Store) -> anyhow::Result<Vec<StoredExit>> {
    const CTX: &str = "listing exits";
    Ok(store
        .read(CTX, |tx| all_decoded(&tx.open_table(EXITS).ctx(CTX)?, CTX))
        .await?)
}

/// `BarkPersister::get_exit_vtxo_entries_with_states`.
pub(super) async fn entries_with_states(
    store: &Store,
    states: &[ExitStateKind],
) -> anyhow::Result<Vec<StoredExit>> {
    // Exits are few (one per VTXO being exited); a scan is cheaper than an index
    // that every exit state change would have to maintain.
    let mut all = entries(store).await?;
    all.retain(|e| states.contains(&e.state.kind()));
    Ok(all)
}

/// `BarkPersister::get_exit_vtxo_entry`.
pub(super) async fn entry(store: &Store, id: &VtxoId) -> anyhow::Result<Option<StoredExit>> {
    const CTX: &str = "reading an exit";
    let key = id.to_bytes();
    Ok(store
        .read(CTX, move |tx| {
            get_decoded(&tx.open_table(EXITS).ctx(CTX)?, key, CTX)
        })
        .await?)
}

/// `BarkPersister::store_exit_child_tx`.
pub(super) async fn store_child_tx(
    store: &Store,
    exit_txid: Txid,
    child_tx: &Transaction,
    origin: ExitTxOrigin,
) -> anyhow::Result<()> {
    const CTX: &str = "storing an exit child transaction";
    let encoded = Envelope::encode(&SerdeExitChildTx {
        child_tx: child_tx.clone(),
        origin,
    })?;
    store
        .write(CTX, move |tx| {
            let mut table = tx.open_table(EXIT_CHILD_TXS).ctx(CTX)?;
            table.insert(exit_txid.to_byte_array(), encoded).ctx(CTX)?;
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::get_exit_child_tx`.
pub(super) async fn child_tx(
    store: &Store,
    exit_txid: Txid,
) -> anyhow::Result<Option<(Transaction, ExitTxOrigin)>> {
    const CTX: &str = "reading an exit child transaction";
    let child = store
        .read(CTX, move |tx| {
            get_decoded(
                &tx.open_table(EXIT_CHILD_TXS).ctx(CTX)?,
                exit_txid.to_byte_array(),
                CTX,
            )
        })
        .await?;
    Ok(child.map(|c| (c.child_tx, c.origin)))
}

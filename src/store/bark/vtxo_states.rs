//! VTXO state changes and locks, each batch in one transaction, through
//! [`VtxoTables`](super::vtxos::VtxoTables).

use ark::VtxoId;
use bark::WalletVtxo;
use bark::vtxo::{VtxoLockHolder, VtxoState, VtxoStateKind};

use super::vtxos::VtxoTables;
use crate::store::Store;

/// `BarkPersister::update_vtxo_state_checked`.
pub(super) async fn update_checked(
    store: &Store,
    vtxo_id: VtxoId,
    new_state: VtxoState,
    allowed_old_states: &[VtxoStateKind],
) -> anyhow::Result<WalletVtxo> {
    const CTX: &str = "updating a vtxo state";
    let allowed = allowed_old_states.to_vec();
    let row = store
        .write(CTX, move |tx| {
            let mut tables = VtxoTables::open(tx, CTX)?;
            tables.transition(vtxo_id, &new_state, &allowed)
        })
        .await?;
    Ok(row.to_wallet_vtxo())
}

/// `BarkPersister::release_vtxo_lock`.
pub(super) async fn release_lock(
    store: &Store,
    vtxo_id: VtxoId,
    holder: Option<&VtxoLockHolder>,
) -> anyhow::Result<()> {
    const CTX: &str = "releasing a vtxo lock";
    let expected = VtxoState::Locked {
        holder: holder.cloned(),
    };
    store
        .write(CTX, move |tx| {
            let mut tables = VtxoTables::open(tx, CTX)?;
            // Anything but a lock by exactly this holder is left alone.
            if let Some(row) = tables.get(vtxo_id)?
                && row.state == expected
            {
                tables.set_state(row, VtxoState::Spendable)?;
            }
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::update_vtxo_states_checked`.
pub(super) async fn update_many_checked(
    store: &Store,
    vtxo_ids: &[VtxoId],
    new_state: VtxoState,
    allowed_old_states: &[VtxoStateKind],
) -> anyhow::Result<()> {
    const CTX: &str = "updating vtxo states";
    let (ids, allowed) = (vtxo_ids.to_vec(), allowed_old_states.to_vec());
    store
        .write(CTX, move |tx| {
            let mut tables = VtxoTables::open(tx, CTX)?;
            // One transaction: if any VTXO is refused, the abort undoes the others.
            for id in ids {
                tables.transition(id, &new_state, &allowed)?;
            }
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::steal_lock_to_spent`.
///
/// One transaction, unlike the trait's default (a read, then a separate write).
pub(super) async fn steal_lock_to_spent(store: &Store, vtxo_ids: &[VtxoId]) -> anyhow::Result<()> {
    force_state(store, vtxo_ids, VtxoState::Spent).await
}

/// `BarkPersister::steal_lock`.
///
/// One transaction, unlike the trait's default (a read, then a separate write).
pub(super) async fn steal_lock(
    store: &Store,
    vtxo_ids: &[VtxoId],
    holder: Option<VtxoLockHolder>,
) -> anyhow::Result<()> {
    force_state(store, vtxo_ids, VtxoState::Locked { holder }).await
}

/// Put every listed VTXO except exited ones in `state`, whatever its current state;
/// an unknown id fails the whole call and changes nothing.
async fn force_state(store: &Store, vtxo_ids: &[VtxoId], state: VtxoState) -> anyhow::Result<()> {
    const CTX: &str = "forcing vtxo states";
    let ids = vtxo_ids.to_vec();
    store
        .write(CTX, move |tx| {
            let mut tables = VtxoTables::open(tx, CTX)?;
            for id in ids {
                let row = tables.require(id)?;
                if row.state.kind() != VtxoStateKind::Exited && row.state != state {
                    tables.set_state(row, state.clone())?;
                }
            }
            Ok(())
        })
        .await?;
    Ok(())
}

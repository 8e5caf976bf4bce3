//! Round states: ids from `META`; the records hold secret signing keys.

use bark::persist::models::{RoundStateId, StoredRoundState, Unlocked};
use bark::round::RoundState;
use redb::ReadableTable;

use super::tables::{get_decoded, next_u32_id};
use crate::store::Store;
use crate::store::codec::Envelope;
use crate::store::error::{RedbResultExt, StoreError};
use crate::store::schema::*;

/// `BarkPersister::store_round_state`.
pub(super) async fn put(store: &Store, round_state: &RoundState) -> anyhow::Result<RoundStateId> {
    const CTX: &str = "storing a round state";
    // Encode on the caller's thread: RoundState is not required to be Send.
    let encoded = Envelope::encode(round_state)?;
    Ok(store
        .write(CTX, move |tx| {
            let id = next_u32_id(tx, meta_keys::LAST_ROUND_STATE_ID, CTX)?;
            tx.open_table(ROUND_STATES)
                .ctx(CTX)?
                .insert(id, encoded)
                .ctx(CTX)?;
            Ok(RoundStateId(id))
        })
        .await?)
}

/// `BarkPersister::update_round_state`.
pub(super) async fn update(store: &Store, round_state: &StoredRoundState) -> anyhow::Result<()> {
    const CTX: &str = "updating a round state";
    let id = round_state.id();
    let encoded = Envelope::encode(round_state.state())?;
    store
        .write(CTX, move |tx| {
            let mut table = tx.open_table(ROUND_STATES).ctx(CTX)?;
            if table.get(id.0).ctx(CTX)?.is_none() {
                return Err(StoreError::NotFound(format!("round state {id}")));
            }
            table.insert(id.0, encoded).ctx(CTX)?;
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::remove_round_state`.
pub(super) async fn remove(store: &Store, round_state: &StoredRoundState) -> anyhow::Result<()> {
    const CTX: &str = "removing a round state";
    let id = round_state.id();
    store
        .write(CTX, move |tx| {
            tx.open_table(ROUND_STATES)
                .ctx(CTX)?
                .remove(id.0)
                .ctx(CTX)?;
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::get_round_state_by_id`.
pub(super) async fn by_id(
    store: &Store,
    id: RoundStateId,
) -> anyhow::Result<Option<StoredRoundState<Unlocked>>> {
    const CTX: &str = "reading a round state";
    let state = store
        .read(CTX, move |tx| {
            get_decoded(&tx.open_table(ROUND_STATES).ctx(CTX)?, id.0, CTX)
        })
        .await?;
    Ok(state.map(|s| StoredRoundState::new(id, s)))
}

/// `BarkPersister::get_pending_round_state_ids`.
///
/// Ascending id order.
pub(super) async fn pending_ids(store: &Store) -> anyhow::Result<Vec<RoundStateId>> {
    const CTX: &str = "listing round states";
    Ok(store
        .read(CTX, |tx| {
            let table = tx.open_table(ROUND_STATES).ctx(CTX)?;
            let mut ids = Vec::new();
            for entry in table.iter().ctx(CTX)? {
                ids.push(RoundStateId(entry.ctx(CTX)?.0.value()));
            }
            Ok(ids)
        })
        .await?)
}

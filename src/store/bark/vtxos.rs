//! VTXO rows: storing, reading and listing them, their full records, removal and the
//! `registered` flag; and [`VtxoTables`], which keeps a VTXO's row, state index entry,
//! state history and the totals by state in step on every write (state changes:
//! `vtxo_states`).

use ark::vtxo::{Bare, Full};
use ark::{Vtxo, VtxoId};
use bark::WalletVtxo;
use bark::vtxo::{VtxoState, VtxoStateKind};
use redb::{ReadableTable, WriteTransaction};

use super::tables::{all_decoded, get_decoded};
use crate::store::Store;
use crate::store::codec::{Envelope, Stored};
use crate::store::error::{RedbResultExt, StoreError};
use crate::store::records::VtxoRow;
use crate::store::schema::*;

/// Key of the VTXO state index: state | expiry BE | !amount BE | id. Byte order sorts by
/// state, then expiry ascending, then amount descending, then id.
pub(crate) fn vtxo_state_index_key(vtxo: &Vtxo<Bare>, state: VtxoStateKind) -> VtxoStateIndexKey {
    let mut key = [0u8; 49];
    key[0] = state.as_byte();
    key[1..5].copy_from_slice(&vtxo.expiry_height().to_u32().to_be_bytes());
    key[5..13].copy_from_slice(&(!vtxo.amount().to_sat()).to_be_bytes());
    key[13..].copy_from_slice(&vtxo.id().to_bytes());
    key
}

/// Key of [`VTXO_TOTALS`] a VTXO in `state` counts under.
pub(crate) fn vtxo_totals_key(row: &VtxoRow, state: VtxoStateKind) -> (u8, u16) {
    (state.as_byte(), row.exit_depth)
}

/// Whether a write counts a VTXO into the totals or out of them.
#[derive(Clone, Copy)]
enum Tally {
    In,
    Out,
}

fn vtxo_not_found(id: VtxoId) -> StoreError {
    StoreError::NotFound(format!("vtxo {id}"))
}

/// The VTXO tables a state change touches, opened once per transaction.
pub(super) struct VtxoTables<'t> {
    rows: redb::Table<'t, VtxoKey, Stored<crate::store::codec::VtxoRowRecord>>,
    by_state: redb::Table<'t, VtxoStateIndexKey, ()>,
    totals: redb::Table<'t, (u8, u16), (u64, u64)>,
    history: redb::Table<'t, (VtxoKey, u32), Stored<crate::store::codec::VtxoStateRecord>>,
    ctx: &'static str,
}

impl<'t> VtxoTables<'t> {
    pub(super) fn open(tx: &'t WriteTransaction, ctx: &'static str) -> Result<Self, StoreError> {
        Ok(VtxoTables {
            rows: tx.open_table(VTXOS).ctx(ctx)?,
            by_state: tx.open_table(VTXOS_BY_STATE).ctx(ctx)?,
            totals: tx.open_table(VTXO_TOTALS).ctx(ctx)?,
            history: tx.open_table(VTXO_STATE_HISTORY).ctx(ctx)?,
            ctx,
        })
    }

    pub(super) fn get(&self, id: VtxoId) -> Result<Option<VtxoRow>, StoreError> {
        self.rows
            .get(id.to_bytes())
            .ctx(self.ctx)?
            .map(|v| v.value().decode())
            .transpose()
    }

    pub(super) fn require(&self, id: VtxoId) -> Result<VtxoRow, StoreError> {
        self.get(id)?.ok_or_else(|| vtxo_not_found(id))
    }

    fn append_history(&mut self, key: VtxoKey, state: &VtxoState) -> Result<(), StoreError> {
        let seq = match self
            .history
            .range((key, 0)..=(key, u32::MAX))
            .ctx(self.ctx)?
            .next_back()
        {
            Some(last) => last.ctx(self.ctx)?.0.value().1 + 1,
            None => 0,
        };
        self.history
            .insert((key, seq), Envelope::encode(state)?)
            .ctx(self.ctx)?;
        Ok(())
    }

    /// Count `row`, in its current state, into or out of [`VTXO_TOTALS`].
    fn tally(&mut self, row: &VtxoRow, tally: Tally) -> Result<(), StoreError> {
        let key = vtxo_totals_key(row, row.state.kind());
        let amount = row.bare.amount().to_sat();
        let (count, sum) = self
            .totals
            .get(key)
            .ctx(self.ctx)?
            .map(|v| v.value())
            .unwrap_or((0, 0));
        let next = match tally {
            Tally::In => count.checked_add(1).zip(sum.checked_add(amount)),
            Tally::Out => count.checked_sub(1).zip(sum.checked_sub(amount)),
        };
        match next {
            Some((0, _)) => {
                self.totals.remove(key).ctx(self.ctx)?;
            }
            Some(next) => {
                self.totals.insert(key, next).ctx(self.ctx)?;
            }
            // Only a file whose totals disagree with its rows gets here; refuse the
            // write rather than make the disagreement worse.
            None => {
                return Err(StoreError::Invariant(format!(
                    "vtxo {}: the totals of its state do not count it",
                    row.bare.id()
                )));
            }
        }
        Ok(())
    }

    /// Insert a new VTXO row with its index entry, first history entry and totals.
    fn insert_new(&mut self, row: &VtxoRow) -> Result<(), StoreError> {
        let key = row.bare.id().to_bytes();
        self.rows
            .insert(key, Envelope::encode(row)?)
            .ctx(self.ctx)?;
        self.by_state
            .insert(vtxo_state_index_key(&row.bare, row.state.kind()), ())
            .ctx(self.ctx)?;
        self.tally(row, Tally::In)?;
        self.append_history(key, &row.state)
    }

    /// Move `row` to `new_state`: row, index entry, totals and history change together.
    pub(super) fn set_state(
        &mut self,
        mut row: VtxoRow,
        new_state: VtxoState,
    ) -> Result<VtxoRow, StoreError> {
        let key = row.bare.id().to_bytes();
        self.by_state
            .remove(vtxo_state_index_key(&row.bare, row.state.kind()))
            .ctx(self.ctx)?;
        self.tally(&row, Tally::Out)?;
        row.state = new_state;
        self.by_state
            .insert(vtxo_state_index_key(&row.bare, row.state.kind()), ())
            .ctx(self.ctx)?;
        self.tally(&row, Tally::In)?;
        self.rows
            .insert(key, Envelope::encode(&row)?)
            .ctx(self.ctx)?;
        self.append_history(key, &row.state)?;
        Ok(row)
    }

    /// The checked transition of `update_vtxo_state_checked`: a VTXO already in exactly
    /// `new_state` is left alone (retries are no-ops); otherwise its current kind must be
    /// in `allowed`.
    pub(super) fn transition(
        &mut self,
        id: VtxoId,
        new_state: &VtxoState,
        allowed: &[VtxoStateKind],
    ) -> Result<VtxoRow, StoreError> {
        let row = self.require(id)?;
        check_transition(id, &row, new_state, allowed)?;
        if row.state == *new_state {
            Ok(row)
        } else {
            self.set_state(row, new_state.clone())
        }
    }
}

fn check_transition(
    id: VtxoId,
    row: &VtxoRow,
    new_state: &VtxoState,
    allowed: &[VtxoStateKind],
) -> Result<(), StoreError> {
    if row.state == *new_state || allowed.contains(&row.state.kind()) {
        Ok(())
    } else {
        Err(StoreError::Rejected(format!(
            "vtxo {id}: current state {:?} not in allowed states {allowed:?}",
            row.state.kind()
        )))
    }
}

/// Sort order of `get_vtxos_by_state`: expiry ascending, then amount descending.
fn sort_by_expiry_then_amount(vtxos: &mut [WalletVtxo]) {
    vtxos.sort_by(|a, b| {
        a.vtxo
            .expiry_height()
            .cmp(&b.vtxo.expiry_height())
            .then(b.vtxo.amount().cmp(&a.vtxo.amount()))
    });
}

/// `BarkPersister::store_vtxos`.
pub(super) async fn put(store: &Store, vtxos: &[(&Vtxo<Full>, &VtxoState)]) -> anyhow::Result<()> {
    const CTX: &str = "storing vtxos";
    // Encode (and compute the exit summaries) before taking the writer.
    let mut batch = Vec::with_capacity(vtxos.len());
    for (vtxo, state) in vtxos {
        let row = VtxoRow::from_full(vtxo, (*state).clone());
        batch.push((
            row,
            Envelope::<crate::store::codec::FullVtxoRecord>::encode(vtxo)?,
        ));
    }
    store
        .write(CTX, move |tx| {
            let mut tables = VtxoTables::open(tx, CTX)?;
            let mut full = tx.open_table(VTXOS_FULL).ctx(CTX)?;
            for (row, full_encoded) in batch {
                let key = row.bare.id().to_bytes();
                // Idempotent: an existing VTXO keeps its record and its state.
                if tables.rows.get(key).ctx(CTX)?.is_some() {
                    continue;
                }
                tables.insert_new(&row)?;
                full.insert(key, full_encoded).ctx(CTX)?;
            }
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::get_wallet_vtxo`.
pub(super) async fn wallet_vtxo(store: &Store, id: VtxoId) -> anyhow::Result<Option<WalletVtxo>> {
    const CTX: &str = "reading a vtxo";
    let handle = store.clone();
    let row = store
        .read(CTX, move |tx| {
            let table = tx.open_table(VTXOS).ctx(CTX)?;
            let key = id.to_bytes();
            let stored = table.get(key).ctx(CTX)?;
            stored
                .map(|v| handle.decode_vtxo_row(key, &v.value()))
                .transpose()
        })
        .await?;
    Ok(row.map(|r| r.to_wallet_vtxo()))
}

/// `BarkPersister::get_wallet_vtxos`.
pub(super) async fn wallet_vtxos(store: &Store, ids: &[VtxoId]) -> anyhow::Result<Vec<WalletVtxo>> {
    const CTX: &str = "reading vtxos";
    let ids = ids.to_vec();
    let handle = store.clone();
    Ok(store
        .read(CTX, move |tx| {
            let table = tx.open_table(VTXOS).ctx(CTX)?;
            ids.iter()
                .map(|id| {
                    let key = id.to_bytes();
                    let stored = table
                        .get(key)
                        .ctx(CTX)?
                        .ok_or_else(|| vtxo_not_found(*id))?;
                    Ok(handle
                        .decode_vtxo_row(key, &stored.value())?
                        .to_wallet_vtxo())
                })
                .collect()
        })
        .await?)
}

/// `BarkPersister::get_all_vtxos`.
///
/// Ordered by state, then expiry ascending, then amount descending, then id.
pub(super) async fn all(store: &Store) -> anyhow::Result<Vec<WalletVtxo>> {
    const CTX: &str = "listing vtxos";
    let handle = store.clone();
    Ok(store
        .read(CTX, move |tx| {
            let table = tx.open_table(VTXOS).ctx(CTX)?;
            let mut rows = Vec::new();
            for entry in table.iter().ctx(CTX)? {
                let (key, value) = entry.ctx(CTX)?;
                let row = handle.decode_vtxo_row(key.value(), &value.value())?;
                rows.push((vtxo_state_index_key(&row.bare, row.state.kind()), row));
            }
            rows.sort_unstable_by_key(|(key, _)| *key);
            Ok(rows.into_iter().map(|(_, r)| r.to_wallet_vtxo()).collect())
        })
        .await?)
}

/// `BarkPersister::get_vtxos_by_state`.
pub(super) async fn by_state(
    store: &Store,
    state: &[VtxoStateKind],
) -> anyhow::Result<Vec<WalletVtxo>> {
    const CTX: &str = "listing vtxos by state";
    let states = state.to_vec();
    let handle = store.clone();
    let mut out: Vec<WalletVtxo> = store
        .read(CTX, move |tx| {
            let index = tx.open_table(VTXOS_BY_STATE).ctx(CTX)?;
            let rows = tx.open_table(VTXOS).ctx(CTX)?;
            let mut out = Vec::new();
            for kind in states {
                let mut lo = [0u8; 49];
                lo[0] = kind.as_byte();
                let mut hi = [0xffu8; 49];
                hi[0] = kind.as_byte();
                for entry in index.range(lo..=hi).ctx(CTX)? {
                    let key = entry.ctx(CTX)?.0.value();
                    let mut id = [0u8; 36];
                    id.copy_from_slice(&key[13..]);
                    let stored = rows.get(id).ctx(CTX)?.ok_or_else(|| {
                        StoreError::Invariant("state index names a missing vtxo".into())
                    })?;
                    out.push(
                        handle
                            .decode_vtxo_row(id, &stored.value())?
                            .to_wallet_vtxo(),
                    );
                }
            }
            Ok(out)
        })
        .await?;
    // Each state's range is already in this order; merging several needs a sort.
    sort_by_expiry_then_amount(&mut out);
    Ok(out)
}

/// `BarkPersister::get_full_vtxo`.
pub(super) async fn full_vtxo(store: &Store, id: VtxoId) -> anyhow::Result<Option<Vtxo<Full>>> {
    const CTX: &str = "reading a full vtxo";
    Ok(store
        .read(CTX, move |tx| {
            get_decoded(&tx.open_table(VTXOS_FULL).ctx(CTX)?, id.to_bytes(), CTX)
        })
        .await?)
}

/// `BarkPersister::get_full_vtxos`.
pub(super) async fn full_vtxos(store: &Store, ids: &[VtxoId]) -> anyhow::Result<Vec<Vtxo<Full>>> {
    const CTX: &str = "reading full vtxos";
    let ids = ids.to_vec();
    Ok(store
        .read(CTX, move |tx| {
            let table = tx.open_table(VTXOS_FULL).ctx(CTX)?;
            ids.iter()
                .map(|id| {
                    get_decoded(&table, id.to_bytes(), CTX)?.ok_or_else(|| vtxo_not_found(*id))
                })
                .collect()
        })
        .await?)
}

/// `BarkPersister::remove_vtxo`.
pub(super) async fn remove(store: &Store, id: VtxoId) -> anyhow::Result<Option<Vtxo<Full>>> {
    const CTX: &str = "removing a vtxo";
    Ok(store
        .write(CTX, move |tx| {
            let key = id.to_bytes();
            let mut tables = VtxoTables::open(tx, CTX)?;
            let Some(row) = tables.get(id)? else {
                return Ok(None);
            };
            tables.rows.remove(key).ctx(CTX)?;
            tables
                .by_state
                .remove(vtxo_state_index_key(&row.bare, row.state.kind()))
                .ctx(CTX)?;
            tables.tally(&row, Tally::Out)?;
            tables
                .history
                .retain_in((key, 0)..=(key, u32::MAX), |_, _| false)
                .ctx(CTX)?;
            let mut full = tx.open_table(VTXOS_FULL).ctx(CTX)?;
            let removed = full
                .remove(key)
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?;
            Ok(removed)
        })
        .await?)
}

/// `BarkPersister::has_spent_vtxo`.
pub(super) async fn has_spent(store: &Store, id: VtxoId) -> anyhow::Result<bool> {
    let vtxo = wallet_vtxo(store, id).await?;
    Ok(vtxo.is_some_and(|v| v.state.kind() == VtxoStateKind::Spent))
}

/// `BarkPersister::mark_vtxos_registered`.
pub(super) async fn mark_registered(store: &Store, vtxo_ids: &[VtxoId]) -> anyhow::Result<()> {
    const CTX: &str = "marking vtxos registered";
    let ids = vtxo_ids.to_vec();
    store
        .write(CTX, move |tx| {
            let mut tables = VtxoTables::open(tx, CTX)?;
            for id in ids {
                let mut row = tables.require(id)?;
                if !row.registered {
                    row.registered = true;
                    tables
                        .rows
                        .insert(id.to_bytes(), Envelope::encode(&row)?)
                        .ctx(CTX)?;
                }
            }
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::get_unregistered_vtxo_ids`.
///
/// VTXO id order.
pub(super) async fn unregistered_ids(store: &Store) -> anyhow::Result<Vec<VtxoId>> {
    const CTX: &str = "listing unregistered vtxos";
    Ok(store
        .read(CTX, |tx| {
            let rows = all_decoded(&tx.open_table(VTXOS).ctx(CTX)?, CTX)?;
            Ok(rows
                .into_iter()
                .filter(|r| !r.registered && r.state.kind() != VtxoStateKind::Spent)
                .map(|r| r.bare.id())
                .collect())
        })
        .await?)
}

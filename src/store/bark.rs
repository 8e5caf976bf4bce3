//! `bark::persist::BarkPersister` on typed redb tables.
//!
//! Every trait method is exactly one redb transaction: a write method that touches
//! several records (a VTXO, its state index entry and its history; a movement and its
//! payment-method index; a batch of VTXO state changes) commits all of them or none.
//!
//! Where the trait documents a contract, we follow the documentation, also where bark's
//! generic `StorageAdaptor` is looser (see `docs/storage.md`, "Semantics"):
//! `init_wallet` refuses a second call, `store_vtxos` leaves an existing VTXO untouched,
//! `store_mailbox_checkpoint` refuses to go backwards, updates of unknown movements and
//! round states are refused instead of creating them, and the payment-method index
//! follows a movement's current destinations.

use std::collections::BTreeSet;

use ark::lightning::{PaymentHash, Preimage};
use ark::vtxo::{Bare, Full};
use ark::{Vtxo, VtxoId};
use async_trait::async_trait;
use bark::WalletProperties;
use bark::WalletVtxo;
use bark::actions::{WalletActionCheckpoint, WalletActionId};
use bark::exit::{ExitStateKind, ExitTxOrigin};
use bark::movement::update::MovementUpdate;
use bark::movement::{Movement, MovementId, MovementStatus, MovementSubsystem, PaymentMethod};
use bark::persist::BarkPersister;
use bark::persist::models::{
    PaidInvoice, RoundStateId, SerdeExitChildTx, SettledLightningReceive, StoredExit,
    StoredRoundState, Unlocked,
};
use bark::round::RoundState;
use bark::vtxo::{VtxoLockHolder, VtxoState, VtxoStateKind};
use bdk_wallet::ChangeSet;
use bdk_wallet::chain::Merge;
use bitcoin::hashes::{Hash, sha256};
use bitcoin::secp256k1::PublicKey;
use bitcoin::{Amount, Transaction, Txid};
use chrono::{DateTime, Local};
use lightning_invoice::Bolt11Invoice;
use redb::{ReadableTable, WriteTransaction};

use crate::store::Store;
use crate::store::codec::{Envelope, Record, Stored};
use crate::store::error::{RedbResultExt, StoreError};
use crate::store::records::{ActionCheckpointRow, VtxoRow};
use crate::store::schema::*;

// --- key encodings -----------------------------------------------------------------

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

/// SHA-256 of a payment method's canonical bytes: type, a 0xfe separator (not valid
/// UTF-8, so no type/value pair can collide), value.
fn payment_method_hash(pm: &PaymentMethod) -> [u8; 32] {
    let mut engine = sha256::Hash::engine();
    bitcoin::hashes::HashEngine::input(&mut engine, pm.type_str().as_bytes());
    bitcoin::hashes::HashEngine::input(&mut engine, &[0xfe]);
    bitcoin::hashes::HashEngine::input(&mut engine, pm.value_string().as_bytes());
    sha256::Hash::from_engine(engine).to_byte_array()
}

fn payment_method_index_key(hash: &[u8; 32], id: u32) -> PaymentMethodIndexKey {
    let mut key = [0u8; 36];
    key[..32].copy_from_slice(hash);
    key[32..].copy_from_slice(&id.to_be_bytes());
    key
}

/// The payment-method index entries a movement should have: one per distinct payment
/// method it sent to or received on.
pub(crate) fn payment_method_index_keys(m: &Movement) -> BTreeSet<PaymentMethodIndexKey> {
    m.sent_to
        .iter()
        .chain(m.received_on.iter())
        .map(|d| payment_method_index_key(&payment_method_hash(&d.destination), m.id.0))
        .collect()
}

fn vtxo_not_found(id: VtxoId) -> StoreError {
    StoreError::NotFound(format!("vtxo {id}"))
}

// --- write-side helpers ------------------------------------------------------------

fn next_counter(tx: &WriteTransaction, name: &str, ctx: &'static str) -> Result<u64, StoreError> {
    let mut meta = tx.open_table(META).ctx(ctx)?;
    let next = meta.get(name).ctx(ctx)?.map(|v| v.value()).unwrap_or(0) + 1;
    meta.insert(name, next).ctx(ctx)?;
    Ok(next)
}

fn next_u32_id(tx: &WriteTransaction, name: &str, ctx: &'static str) -> Result<u32, StoreError> {
    u32::try_from(next_counter(tx, name, ctx)?)
        .map_err(|_| StoreError::Rejected(format!("{name} exhausted the 32-bit id space")))
}

/// The VTXO tables a state change touches, opened once per transaction.
struct VtxoTables<'t> {
    rows: redb::Table<'t, VtxoKey, Stored<crate::store::codec::VtxoRowRecord>>,
    by_state: redb::Table<'t, VtxoStateIndexKey, ()>,
    history: redb::Table<'t, (VtxoKey, u32), Stored<crate::store::codec::VtxoStateRecord>>,
    ctx: &'static str,
}

impl<'t> VtxoTables<'t> {
    fn open(tx: &'t WriteTransaction, ctx: &'static str) -> Result<Self, StoreError> {
        Ok(VtxoTables {
            rows: tx.open_table(VTXOS).ctx(ctx)?,
            by_state: tx.open_table(VTXOS_BY_STATE).ctx(ctx)?,
            history: tx.open_table(VTXO_STATE_HISTORY).ctx(ctx)?,
            ctx,
        })
    }

    fn get(&self, id: VtxoId) -> Result<Option<VtxoRow>, StoreError> {
        self.rows
            .get(id.to_bytes())
            .ctx(self.ctx)?
            .map(|v| v.value().decode())
            .transpose()
    }

    fn require(&self, id: VtxoId) -> Result<VtxoRow, StoreError> {
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

    /// Insert a new VTXO row with its index entry and first history entry.
    fn insert_new(&mut self, row: &VtxoRow) -> Result<(), StoreError> {
        let key = row.bare.id().to_bytes();
        self.rows
            .insert(key, Envelope::encode(row)?)
            .ctx(self.ctx)?;
        self.by_state
            .insert(vtxo_state_index_key(&row.bare, row.state.kind()), ())
            .ctx(self.ctx)?;
        self.append_history(key, &row.state)
    }

    /// Move `row` to `new_state`: row, index entry and history change together.
    fn set_state(&mut self, mut row: VtxoRow, new_state: VtxoState) -> Result<VtxoRow, StoreError> {
        let key = row.bare.id().to_bytes();
        self.by_state
            .remove(vtxo_state_index_key(&row.bare, row.state.kind()))
            .ctx(self.ctx)?;
        row.state = new_state;
        self.by_state
            .insert(vtxo_state_index_key(&row.bare, row.state.kind()), ())
            .ctx(self.ctx)?;
        self.rows
            .insert(key, Envelope::encode(&row)?)
            .ctx(self.ctx)?;
        self.append_history(key, &row.state)?;
        Ok(row)
    }

    /// The checked transition of `update_vtxo_state_checked`: a VTXO already in exactly
    /// `new_state` is left alone (retries are no-ops); otherwise its current kind must be
    /// in `allowed`.
    fn transition(
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

/// Write a movement and bring its payment-method index in line with its destinations.
fn put_movement(
    tx: &WriteTransaction,
    movement: &Movement,
    ctx: &'static str,
) -> Result<(), StoreError> {
    let mut movements = tx.open_table(MOVEMENTS).ctx(ctx)?;
    let mut index = tx.open_table(MOVEMENTS_BY_PAYMENT_METHOD).ctx(ctx)?;
    let old = match movements.get(movement.id.0).ctx(ctx)? {
        Some(v) => payment_method_index_keys(&v.value().decode()?),
        None => BTreeSet::new(),
    };
    let new = payment_method_index_keys(movement);
    for stale in old.difference(&new) {
        index.remove(stale).ctx(ctx)?;
    }
    for added in new.difference(&old) {
        index.insert(added, ()).ctx(ctx)?;
    }
    movements
        .insert(movement.id.0, Envelope::encode(movement)?)
        .ctx(ctx)?;
    Ok(())
}

fn read_movement(
    table: &impl ReadableTable<u32, Stored<crate::store::codec::MovementRecord>>,
    id: u32,
    ctx: &'static str,
) -> Result<Option<Movement>, StoreError> {
    table
        .get(id)
        .ctx(ctx)?
        .map(|v| v.value().decode())
        .transpose()
}

fn set_properties(
    tx: &WriteTransaction,
    ctx: &'static str,
    change: impl FnOnce(&mut WalletProperties),
) -> Result<(), StoreError> {
    let mut table = tx.open_table(PROPERTIES).ctx(ctx)?;
    let mut props = match table.get(()).ctx(ctx)? {
        Some(v) => v.value().decode()?,
        None => return Err(StoreError::Rejected("wallet not initialized".into())),
    };
    change(&mut props);
    table.insert((), Envelope::encode(&props)?).ctx(ctx)?;
    Ok(())
}

/// Get one row by key from a table of record kind `R`, decoded.
fn get_decoded<K, R>(
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
fn all_decoded<K, R>(
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

/// Sort order of `get_vtxos_by_state`: expiry ascending, then amount descending.
fn sort_by_expiry_then_amount(vtxos: &mut [WalletVtxo]) {
    vtxos.sort_by(|a, b| {
        a.vtxo
            .expiry_height()
            .cmp(&b.vtxo.expiry_height())
            .then(b.vtxo.amount().cmp(&a.vtxo.amount()))
    });
}

// --- the persister -----------------------------------------------------------------

#[async_trait]
impl BarkPersister for Store {
    async fn init_wallet(&self, properties: &WalletProperties) -> anyhow::Result<()> {
        const CTX: &str = "initialising the wallet";
        let props = properties.clone();
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(PROPERTIES).ctx(CTX)?;
            if table.get(()).ctx(CTX)?.is_some() {
                return Err(StoreError::Rejected("wallet is already initialized".into()));
            }
            table.insert((), Envelope::encode(&props)?).ctx(CTX)?;
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn initialize_bdk_wallet(&self) -> anyhow::Result<ChangeSet> {
        const CTX: &str = "reading the on-chain wallet state";
        let changeset = self
            .read(CTX, |tx| {
                let table = tx.open_table(BDK_CHANGESET).ctx(CTX)?;
                get_decoded(&table, (), CTX)
            })
            .await?;
        Ok(changeset.unwrap_or_default())
    }

    async fn store_bdk_wallet_changeset(&self, changeset: &ChangeSet) -> anyhow::Result<()> {
        const CTX: &str = "storing the on-chain wallet state";
        let changeset = changeset.clone();
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(BDK_CHANGESET).ctx(CTX)?;
            let mut merged: ChangeSet = get_decoded(&table, (), CTX)?.unwrap_or_default();
            merged.merge(changeset);
            table.insert((), Envelope::encode(&merged)?).ctx(CTX)?;
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn read_properties(&self) -> anyhow::Result<Option<WalletProperties>> {
        const CTX: &str = "reading wallet properties";
        Ok(self
            .read(CTX, |tx| {
                let table = tx.open_table(PROPERTIES).ctx(CTX)?;
                get_decoded(&table, (), CTX)
            })
            .await?)
    }

    async fn set_server_pubkey(&self, server_pubkey: PublicKey) -> anyhow::Result<()> {
        const CTX: &str = "storing the server public key";
        self.write(CTX, move |tx| {
            set_properties(tx, CTX, |p| p.server_pubkey = Some(server_pubkey))
        })
        .await?;
        Ok(())
    }

    async fn set_server_mailbox_pubkey(
        &self,
        server_mailbox_pubkey: PublicKey,
    ) -> anyhow::Result<()> {
        const CTX: &str = "storing the server mailbox public key";
        self.write(CTX, move |tx| {
            set_properties(tx, CTX, |p| {
                p.server_mailbox_pubkey = Some(server_mailbox_pubkey)
            })
        })
        .await?;
        Ok(())
    }

    async fn create_new_movement(
        &self,
        status: MovementStatus,
        subsystem: &MovementSubsystem,
        time: DateTime<Local>,
        action_id: Option<&str>,
    ) -> anyhow::Result<MovementId> {
        const CTX: &str = "creating a movement";
        let subsystem = subsystem.clone();
        let action_id = action_id.map(str::to_owned);
        Ok(self
            .write(CTX, move |tx| {
                let id = MovementId(next_u32_id(tx, meta_keys::LAST_MOVEMENT_ID, CTX)?);
                put_movement(tx, &Movement::new(id, status, &subsystem, time), CTX)?;
                if let Some(action_id) = action_id {
                    let mut by_action = tx.open_table(MOVEMENTS_BY_ACTION).ctx(CTX)?;
                    by_action.insert(action_id.as_str(), id.0).ctx(CTX)?;
                }
                Ok(id)
            })
            .await?)
    }

    async fn get_or_create_movement_for_action(
        &self,
        subsystem: &MovementSubsystem,
        time: DateTime<Local>,
        action_id: &str,
        update: MovementUpdate,
    ) -> anyhow::Result<(MovementId, bool)> {
        const CTX: &str = "creating the movement of a wallet action";
        let subsystem = subsystem.clone();
        let action_id = action_id.to_owned();
        Ok(self
            .write(CTX, move |tx| {
                let mut by_action = tx.open_table(MOVEMENTS_BY_ACTION).ctx(CTX)?;
                if let Some(existing) = by_action.get(action_id.as_str()).ctx(CTX)? {
                    return Ok((MovementId(existing.value()), false));
                }
                let id = MovementId(next_u32_id(tx, meta_keys::LAST_MOVEMENT_ID, CTX)?);
                let mut movement = Movement::new(id, MovementStatus::Pending, &subsystem, time);
                update.apply_to(&mut movement, time);
                put_movement(tx, &movement, CTX)?;
                by_action.insert(action_id.as_str(), id.0).ctx(CTX)?;
                Ok((id, true))
            })
            .await?)
    }

    async fn get_movement_id_by_action(
        &self,
        action_id: &str,
    ) -> anyhow::Result<Option<MovementId>> {
        const CTX: &str = "looking up the movement of an action";
        let action_id = action_id.to_owned();
        Ok(self
            .read(CTX, move |tx| {
                let by_action = tx.open_table(MOVEMENTS_BY_ACTION).ctx(CTX)?;
                Ok(by_action
                    .get(action_id.as_str())
                    .ctx(CTX)?
                    .map(|v| MovementId(v.value())))
            })
            .await?)
    }

    async fn update_movement(&self, movement: &Movement) -> anyhow::Result<()> {
        const CTX: &str = "updating a movement";
        let movement = movement.clone();
        self.write(CTX, move |tx| {
            // Only movements handed out by create may be updated: an unknown id would
            // otherwise appear beyond the id counter.
            let exists = tx
                .open_table(MOVEMENTS)
                .ctx(CTX)?
                .get(movement.id.0)
                .ctx(CTX)?
                .is_some();
            if !exists {
                return Err(StoreError::NotFound(format!("movement {}", movement.id)));
            }
            put_movement(tx, &movement, CTX)
        })
        .await?;
        Ok(())
    }

    async fn get_movement_by_id(&self, movement_id: MovementId) -> anyhow::Result<Movement> {
        const CTX: &str = "reading a movement";
        Ok(self
            .read(CTX, move |tx| {
                let table = tx.open_table(MOVEMENTS).ctx(CTX)?;
                read_movement(&table, movement_id.0, CTX)?
                    .ok_or_else(|| StoreError::NotFound(format!("movement {movement_id}")))
            })
            .await?)
    }

    /// Newest first (created_at descending, then id descending).
    async fn get_all_movements(&self) -> anyhow::Result<Vec<Movement>> {
        const CTX: &str = "listing movements";
        let mut all = self
            .read(CTX, |tx| {
                all_decoded(&tx.open_table(MOVEMENTS).ctx(CTX)?, CTX)
            })
            .await?;
        all.sort_by(|a, b| {
            b.time
                .created_at
                .cmp(&a.time.created_at)
                .then(b.id.cmp(&a.id))
        });
        Ok(all)
    }

    /// Oldest movement id first.
    async fn get_movements_by_payment_method(
        &self,
        payment_method: &PaymentMethod,
    ) -> anyhow::Result<Vec<Movement>> {
        const CTX: &str = "listing movements by payment method";
        let hash = payment_method_hash(payment_method);
        Ok(self
            .read(CTX, move |tx| {
                let index = tx.open_table(MOVEMENTS_BY_PAYMENT_METHOD).ctx(CTX)?;
                let movements = tx.open_table(MOVEMENTS).ctx(CTX)?;
                let range =
                    payment_method_index_key(&hash, 0)..=payment_method_index_key(&hash, u32::MAX);
                let mut out = Vec::new();
                for entry in index.range(range).ctx(CTX)? {
                    let key = entry.ctx(CTX)?.0.value();
                    let id = u32::from_be_bytes([key[32], key[33], key[34], key[35]]);
                    let movement = read_movement(&movements, id, CTX)?.ok_or_else(|| {
                        StoreError::Invariant(format!(
                            "payment method index names missing movement {id}"
                        ))
                    })?;
                    out.push(movement);
                }
                Ok(out)
            })
            .await?)
    }

    async fn store_round_state(&self, round_state: &RoundState) -> anyhow::Result<RoundStateId> {
        const CTX: &str = "storing a round state";
        // Encode on the caller's thread: RoundState is not required to be Send.
        let encoded = Envelope::encode(round_state)?;
        Ok(self
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

    async fn update_round_state(&self, round_state: &StoredRoundState) -> anyhow::Result<()> {
        const CTX: &str = "updating a round state";
        let id = round_state.id();
        let encoded = Envelope::encode(round_state.state())?;
        self.write(CTX, move |tx| {
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

    async fn remove_round_state(&self, round_state: &StoredRoundState) -> anyhow::Result<()> {
        const CTX: &str = "removing a round state";
        let id = round_state.id();
        self.write(CTX, move |tx| {
            tx.open_table(ROUND_STATES)
                .ctx(CTX)?
                .remove(id.0)
                .ctx(CTX)?;
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn get_round_state_by_id(
        &self,
        id: RoundStateId,
    ) -> anyhow::Result<Option<StoredRoundState<Unlocked>>> {
        const CTX: &str = "reading a round state";
        let state = self
            .read(CTX, move |tx| {
                get_decoded(&tx.open_table(ROUND_STATES).ctx(CTX)?, id.0, CTX)
            })
            .await?;
        Ok(state.map(|s| StoredRoundState::new(id, s)))
    }

    /// Ascending id order.
    async fn get_pending_round_state_ids(&self) -> anyhow::Result<Vec<RoundStateId>> {
        const CTX: &str = "listing round states";
        Ok(self
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

    async fn store_vtxos(&self, vtxos: &[(&Vtxo<Full>, &VtxoState)]) -> anyhow::Result<()> {
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
        self.write(CTX, move |tx| {
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

    async fn get_wallet_vtxo(&self, id: VtxoId) -> anyhow::Result<Option<WalletVtxo>> {
        const CTX: &str = "reading a vtxo";
        let store = self.clone();
        let row = self
            .read(CTX, move |tx| {
                let table = tx.open_table(VTXOS).ctx(CTX)?;
                let key = id.to_bytes();
                let stored = table.get(key).ctx(CTX)?;
                stored
                    .map(|v| store.decode_vtxo_row(key, &v.value()))
                    .transpose()
            })
            .await?;
        Ok(row.map(|r| r.to_wallet_vtxo()))
    }

    async fn get_wallet_vtxos(&self, ids: &[VtxoId]) -> anyhow::Result<Vec<WalletVtxo>> {
        const CTX: &str = "reading vtxos";
        let ids = ids.to_vec();
        let store = self.clone();
        Ok(self
            .read(CTX, move |tx| {
                let table = tx.open_table(VTXOS).ctx(CTX)?;
                ids.iter()
                    .map(|id| {
                        let key = id.to_bytes();
                        let stored = table
                            .get(key)
                            .ctx(CTX)?
                            .ok_or_else(|| vtxo_not_found(*id))?;
                        Ok(store
                            .decode_vtxo_row(key, &stored.value())?
                            .to_wallet_vtxo())
                    })
                    .collect()
            })
            .await?)
    }

    /// Ordered by state, then expiry ascending, then amount descending, then id.
    async fn get_all_vtxos(&self) -> anyhow::Result<Vec<WalletVtxo>> {
        const CTX: &str = "listing vtxos";
        let store = self.clone();
        Ok(self
            .read(CTX, move |tx| {
                let table = tx.open_table(VTXOS).ctx(CTX)?;
                let mut rows = Vec::new();
                for entry in table.iter().ctx(CTX)? {
                    let (key, value) = entry.ctx(CTX)?;
                    let row = store.decode_vtxo_row(key.value(), &value.value())?;
                    rows.push((vtxo_state_index_key(&row.bare, row.state.kind()), row));
                }
                rows.sort_unstable_by_key(|(key, _)| *key);
                Ok(rows.into_iter().map(|(_, r)| r.to_wallet_vtxo()).collect())
            })
            .await?)
    }

    async fn get_vtxos_by_state(&self, state: &[VtxoStateKind]) -> anyhow::Result<Vec<WalletVtxo>> {
        const CTX: &str = "listing vtxos by state";
        let states = state.to_vec();
        let store = self.clone();
        let mut out: Vec<WalletVtxo> = self
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
                        out.push(store.decode_vtxo_row(id, &stored.value())?.to_wallet_vtxo());
                    }
                }
                Ok(out)
            })
            .await?;
        // Each state's range is already in this order; merging several needs a sort.
        sort_by_expiry_then_amount(&mut out);
        Ok(out)
    }

    async fn get_full_vtxo(&self, id: VtxoId) -> anyhow::Result<Option<Vtxo<Full>>> {
        const CTX: &str = "reading a full vtxo";
        Ok(self
            .read(CTX, move |tx| {
                get_decoded(&tx.open_table(VTXOS_FULL).ctx(CTX)?, id.to_bytes(), CTX)
            })
            .await?)
    }

    async fn get_full_vtxos(&self, ids: &[VtxoId]) -> anyhow::Result<Vec<Vtxo<Full>>> {
        const CTX: &str = "reading full vtxos";
        let ids = ids.to_vec();
        Ok(self
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

    async fn remove_vtxo(&self, id: VtxoId) -> anyhow::Result<Option<Vtxo<Full>>> {
        const CTX: &str = "removing a vtxo";
        Ok(self
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

    async fn has_spent_vtxo(&self, id: VtxoId) -> anyhow::Result<bool> {
        let vtxo = self.get_wallet_vtxo(id).await?;
        Ok(vtxo.is_some_and(|v| v.state.kind() == VtxoStateKind::Spent))
    }

    async fn store_vtxo_key(&self, index: u32, public_key: PublicKey) -> anyhow::Result<()> {
        self.store_vtxo_keys(&[(index, public_key)]).await
    }

    async fn store_vtxo_keys(&self, keys: &[(u32, PublicKey)]) -> anyhow::Result<()> {
        const CTX: &str = "storing vtxo keys";
        let keys = keys.to_vec();
        self.write(CTX, move |tx| {
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

    async fn get_last_vtxo_key_index(&self) -> anyhow::Result<Option<u32>> {
        const CTX: &str = "reading the last vtxo key index";
        Ok(self
            .read(CTX, |tx| {
                let by_index = tx.open_table(VTXO_KEYS_BY_INDEX).ctx(CTX)?;
                Ok(by_index.last().ctx(CTX)?.map(|(k, _)| k.value().0))
            })
            .await?)
    }

    async fn get_public_key_idx(&self, public_key: &PublicKey) -> anyhow::Result<Option<u32>> {
        const CTX: &str = "looking up a vtxo key";
        let pk = public_key.serialize();
        Ok(self
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

    async fn get_mailbox_checkpoint(&self) -> anyhow::Result<u64> {
        const CTX: &str = "reading the mailbox checkpoint";
        Ok(self
            .read(CTX, |tx| {
                let meta = tx.open_table(META).ctx(CTX)?;
                Ok(meta
                    .get(meta_keys::MAILBOX_CHECKPOINT)
                    .ctx(CTX)?
                    .map(|v| v.value())
                    .unwrap_or(0))
            })
            .await?)
    }

    /// Refuses to go backwards (the trait's contract); storing the same value again is
    /// an accepted no-op so a retried sync does not fail.
    async fn store_mailbox_checkpoint(&self, checkpoint: u64) -> anyhow::Result<()> {
        const CTX: &str = "storing the mailbox checkpoint";
        self.write(CTX, move |tx| {
            let mut meta = tx.open_table(META).ctx(CTX)?;
            let current = meta
                .get(meta_keys::MAILBOX_CHECKPOINT)
                .ctx(CTX)?
                .map(|v| v.value())
                .unwrap_or(0);
            if checkpoint < current {
                return Err(StoreError::Rejected(format!(
                    "mailbox checkpoint {checkpoint} is behind the stored {current}"
                )));
            }
            meta.insert(meta_keys::MAILBOX_CHECKPOINT, checkpoint)
                .ctx(CTX)?;
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn upsert_wallet_action_checkpoint(
        &self,
        id: &WalletActionId,
        checkpoint: &WalletActionCheckpoint,
    ) -> anyhow::Result<()> {
        const CTX: &str = "storing a wallet action checkpoint";
        let (id, checkpoint) = (id.clone(), checkpoint.clone());
        self.write(CTX, move |tx| {
            let existing_seq = {
                let table = tx.open_table(WALLET_ACTION_CHECKPOINTS).ctx(CTX)?;
                get_decoded(&table, id.as_str(), CTX)?.map(|row| row.created_seq)
            };
            let created_seq = match existing_seq {
                Some(seq) => seq,
                None => next_counter(tx, meta_keys::LAST_ACTION_SEQ, CTX)?,
            };
            let row = ActionCheckpointRow {
                created_seq,
                checkpoint,
            };
            let mut table = tx.open_table(WALLET_ACTION_CHECKPOINTS).ctx(CTX)?;
            table
                .insert(id.as_str(), Envelope::encode(&row)?)
                .ctx(CTX)?;
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn get_wallet_action_checkpoint(
        &self,
        id: &WalletActionId,
    ) -> anyhow::Result<Option<WalletActionCheckpoint>> {
        const CTX: &str = "reading a wallet action checkpoint";
        let id = id.clone();
        let row = self
            .read(CTX, move |tx| {
                get_decoded(
                    &tx.open_table(WALLET_ACTION_CHECKPOINTS).ctx(CTX)?,
                    id.as_str(),
                    CTX,
                )
            })
            .await?;
        Ok(row.map(|r| r.checkpoint))
    }

    /// Oldest first, by when each action was first checkpointed.
    async fn get_all_wallet_action_checkpoints(
        &self,
    ) -> anyhow::Result<Vec<WalletActionCheckpoint>> {
        const CTX: &str = "listing wallet action checkpoints";
        let mut rows = self
            .read(CTX, |tx| {
                all_decoded(&tx.open_table(WALLET_ACTION_CHECKPOINTS).ctx(CTX)?, CTX)
            })
            .await?;
        rows.sort_by_key(|r| r.created_seq);
        Ok(rows.into_iter().map(|r| r.checkpoint).collect())
    }

    async fn remove_wallet_action_checkpoint(&self, id: &WalletActionId) -> anyhow::Result<()> {
        const CTX: &str = "removing a wallet action checkpoint";
        let id = id.clone();
        self.write(CTX, move |tx| {
            tx.open_table(WALLET_ACTION_CHECKPOINTS)
                .ctx(CTX)?
                .remove(id.as_str())
                .ctx(CTX)?;
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn record_paid_invoice(
        &self,
        payment_hash: PaymentHash,
        preimage: Preimage,
    ) -> anyhow::Result<()> {
        const CTX: &str = "recording a paid invoice";
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(PAID_INVOICES).ctx(CTX)?;
            let key = payment_hash.to_byte_array();
            // Idempotent: the first record (and its paid_at) wins.
            if table.get(key).ctx(CTX)?.is_none() {
                let paid = PaidInvoice {
                    payment_hash,
                    preimage,
                    paid_at: Local::now(),
                };
                table.insert(key, Envelope::encode(&paid)?).ctx(CTX)?;
            }
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn get_paid_invoice(
        &self,
        payment_hash: PaymentHash,
    ) -> anyhow::Result<Option<PaidInvoice>> {
        const CTX: &str = "reading a paid invoice";
        Ok(self
            .read(CTX, move |tx| {
                get_decoded(
                    &tx.open_table(PAID_INVOICES).ctx(CTX)?,
                    payment_hash.to_byte_array(),
                    CTX,
                )
            })
            .await?)
    }

    async fn record_settled_lightning_receive(
        &self,
        payment_hash: PaymentHash,
        preimage: Preimage,
        invoice: &Bolt11Invoice,
        amount: Amount,
    ) -> anyhow::Result<()> {
        const CTX: &str = "recording a settled lightning receive";
        let invoice = invoice.clone();
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(SETTLED_LIGHTNING_RECEIVES).ctx(CTX)?;
            let key = payment_hash.to_byte_array();
            if table.get(key).ctx(CTX)?.is_none() {
                let settled = SettledLightningReceive {
                    payment_hash,
                    preimage,
                    invoice,
                    amount,
                    settled_at: Local::now(),
                };
                table.insert(key, Envelope::encode(&settled)?).ctx(CTX)?;
            }
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn get_settled_lightning_receive(
        &self,
        payment_hash: PaymentHash,
    ) -> anyhow::Result<Option<SettledLightningReceive>> {
        const CTX: &str = "reading a settled lightning receive";
        Ok(self
            .read(CTX, move |tx| {
                let table = tx.open_table(SETTLED_LIGHTNING_RECEIVES).ctx(CTX)?;
                get_decoded(&table, payment_hash.to_byte_array(), CTX)
            })
            .await?)
    }

    async fn store_exit_vtxo_entry(&self, exit: &StoredExit) -> anyhow::Result<()> {
        const CTX: &str = "storing an exit";
        let encoded = Envelope::encode(exit)?;
        let key = exit.vtxo_id.to_bytes();
        self.write(CTX, move |tx| {
            tx.open_table(EXITS)
                .ctx(CTX)?
                .insert(key, encoded)
                .ctx(CTX)?;
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn remove_exit_vtxo_entry(&self, id: &VtxoId) -> anyhow::Result<()> {
        const CTX: &str = "removing an exit";
        let key = id.to_bytes();
        self.write(CTX, move |tx| {
            tx.open_table(EXITS).ctx(CTX)?.remove(key).ctx(CTX)?;
            Ok(())
        })
        .await?;
        Ok(())
    }

    /// VTXO id order.
    async fn get_exit_vtxo_entries(&self) -> anyhow::Result<Vec<StoredExit>> {
        const CTX: &str = "listing exits";
        Ok(self
            .read(CTX, |tx| all_decoded(&tx.open_table(EXITS).ctx(CTX)?, CTX))
            .await?)
    }

    async fn get_exit_vtxo_entries_with_states(
        &self,
        states: &[ExitStateKind],
    ) -> anyhow::Result<Vec<StoredExit>> {
        // Exits are few (one per VTXO being exited); a scan is cheaper than an index
        // that every exit state change would have to maintain.
        let mut all = self.get_exit_vtxo_entries().await?;
        all.retain(|e| states.contains(&e.state.kind()));
        Ok(all)
    }

    async fn get_exit_vtxo_entry(&self, id: &VtxoId) -> anyhow::Result<Option<StoredExit>> {
        const CTX: &str = "reading an exit";
        let key = id.to_bytes();
        Ok(self
            .read(CTX, move |tx| {
                get_decoded(&tx.open_table(EXITS).ctx(CTX)?, key, CTX)
            })
            .await?)
    }

    async fn store_exit_child_tx(
        &self,
        exit_txid: Txid,
        child_tx: &Transaction,
        origin: ExitTxOrigin,
    ) -> anyhow::Result<()> {
        const CTX: &str = "storing an exit child transaction";
        let encoded = Envelope::encode(&SerdeExitChildTx {
            child_tx: child_tx.clone(),
            origin,
        })?;
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(EXIT_CHILD_TXS).ctx(CTX)?;
            table.insert(exit_txid.to_byte_array(), encoded).ctx(CTX)?;
            Ok(())
        })
        .await?;
        Ok(())
    }

    async fn get_exit_child_tx(
        &self,
        exit_txid: Txid,
    ) -> anyhow::Result<Option<(Transaction, ExitTxOrigin)>> {
        const CTX: &str = "reading an exit child transaction";
        let child = self
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

    async fn update_vtxo_state_checked(
        &self,
        vtxo_id: VtxoId,
        new_state: VtxoState,
        allowed_old_states: &[VtxoStateKind],
    ) -> anyhow::Result<WalletVtxo> {
        const CTX: &str = "updating a vtxo state";
        let allowed = allowed_old_states.to_vec();
        let row = self
            .write(CTX, move |tx| {
                let mut tables = VtxoTables::open(tx, CTX)?;
                tables.transition(vtxo_id, &new_state, &allowed)
            })
            .await?;
        Ok(row.to_wallet_vtxo())
    }

    async fn release_vtxo_lock(
        &self,
        vtxo_id: VtxoId,
        holder: Option<&VtxoLockHolder>,
    ) -> anyhow::Result<()> {
        const CTX: &str = "releasing a vtxo lock";
        let expected = VtxoState::Locked {
            holder: holder.cloned(),
        };
        self.write(CTX, move |tx| {
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

    async fn update_vtxo_states_checked(
        &self,
        vtxo_ids: &[VtxoId],
        new_state: VtxoState,
        allowed_old_states: &[VtxoStateKind],
    ) -> anyhow::Result<()> {
        const CTX: &str = "updating vtxo states";
        let (ids, allowed) = (vtxo_ids.to_vec(), allowed_old_states.to_vec());
        self.write(CTX, move |tx| {
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

    /// One transaction, unlike the trait's default (a read, then a separate write).
    async fn steal_lock_to_spent(&self, vtxo_ids: &[VtxoId]) -> anyhow::Result<()> {
        self.force_state(vtxo_ids, VtxoState::Spent).await
    }

    /// One transaction, unlike the trait's default (a read, then a separate write).
    async fn steal_lock(
        &self,
        vtxo_ids: &[VtxoId],
        holder: Option<VtxoLockHolder>,
    ) -> anyhow::Result<()> {
        self.force_state(vtxo_ids, VtxoState::Locked { holder })
            .await
    }

    async fn mark_vtxos_registered(&self, vtxo_ids: &[VtxoId]) -> anyhow::Result<()> {
        const CTX: &str = "marking vtxos registered";
        let ids = vtxo_ids.to_vec();
        self.write(CTX, move |tx| {
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

    /// VTXO id order.
    async fn get_unregistered_vtxo_ids(&self) -> anyhow::Result<Vec<VtxoId>> {
        const CTX: &str = "listing unregistered vtxos";
        Ok(self
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
}

impl Store {
    /// Put every listed VTXO except exited ones in `state`, whatever its current state;
    /// an unknown id fails the whole call and changes nothing.
    async fn force_state(&self, vtxo_ids: &[VtxoId], state: VtxoState) -> anyhow::Result<()> {
        const CTX: &str = "forcing vtxo states";
        let ids = vtxo_ids.to_vec();
        self.write(CTX, move |tx| {
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
}

impl Store {
    /// Remove the wallet: every bark table emptied in one transaction, the mailbox
    /// checkpoint reset, its setup record and any first on-chain scan still to run
    /// removed, and the event log (which describes that wallet) cleared. Id counters are
    /// kept, so ids are never reused. Berth's other tables are untouched: idempotency
    /// keys, and paired devices with their tokens (access to the appliance, not wallet
    /// state).
    pub async fn wipe_wallet(&self) -> Result<(), StoreError> {
        const CTX: &str = "deleting the wallet";
        self.write(CTX, |tx| {
            clear_ark_state(tx, CTX)?;
            tx.delete_table(BDK_CHANGESET).ctx(CTX)?;
            tx.delete_table(WALLET_SETUP).ctx(CTX)?;
            tx.open_table(META)
                .ctx(CTX)?
                .remove(meta_keys::INITIAL_SCAN_FROM)
                .ctx(CTX)?;
            create_all(tx).ctx(CTX)?;
            super::events::clear(tx, CTX)
        })
        .await
    }
}

/// Empty every table of bark's Ark wallet (its properties, VTXOs and keys, movements,
/// rounds, actions, Lightning records, exits) and reset the mailbox checkpoint, inside
/// the caller's transaction. The on-chain (BDK) state is left alone.
pub(super) fn clear_ark_state(
    tx: &redb::WriteTransaction,
    ctx: &'static str,
) -> Result<(), StoreError> {
    tx.delete_table(PROPERTIES).ctx(ctx)?;
    tx.delete_table(VTXOS).ctx(ctx)?;
    tx.delete_table(VTXOS_FULL).ctx(ctx)?;
    tx.delete_table(VTXO_STATE_HISTORY).ctx(ctx)?;
    tx.delete_table(VTXOS_BY_STATE).ctx(ctx)?;
    tx.delete_table(VTXO_KEYS).ctx(ctx)?;
    tx.delete_table(VTXO_KEYS_BY_INDEX).ctx(ctx)?;
    tx.delete_table(MOVEMENTS).ctx(ctx)?;
    tx.delete_table(MOVEMENTS_BY_PAYMENT_METHOD).ctx(ctx)?;
    tx.delete_table(MOVEMENTS_BY_ACTION).ctx(ctx)?;
    tx.delete_table(ROUND_STATES).ctx(ctx)?;
    tx.delete_table(WALLET_ACTION_CHECKPOINTS).ctx(ctx)?;
    tx.delete_table(PAID_INVOICES).ctx(ctx)?;
    tx.delete_table(SETTLED_LIGHTNING_RECEIVES).ctx(ctx)?;
    tx.delete_table(EXITS).ctx(ctx)?;
    tx.delete_table(EXIT_CHILD_TXS).ctx(ctx)?;
    tx.open_table(META)
        .ctx(ctx)?
        .remove(meta_keys::MAILBOX_CHECKPOINT)
        .ctx(ctx)?;
    create_all(tx).ctx(ctx)?;
    Ok(())
}

/// Where a new wallet's first on-chain scan starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitialScan {
    /// From the chain tip: a freshly generated seed has no history.
    FromTip,
    /// From this block height (an imported seed's birthday; 0 = genesis).
    FromHeight(u32),
}

impl InitialScan {
    /// Its value in [`meta_keys::INITIAL_SCAN_FROM`].
    pub(super) fn encode(self) -> u64 {
        match self {
            InitialScan::FromTip => u64::MAX,
            InitialScan::FromHeight(h) => u64::from(h),
        }
    }
}

impl Store {
    /// Up to `limit` movements with ids below `before` (all when `None`), newest id
    /// first: a page of the history that reads only what it returns.
    pub async fn movements_before(
        &self,
        before: Option<u32>,
        limit: usize,
    ) -> Result<Vec<Movement>, StoreError> {
        const CTX: &str = "listing a page of movements";
        self.read(CTX, move |tx| {
            let table = tx.open_table(MOVEMENTS).ctx(CTX)?;
            let range = match before {
                Some(before) => table.range(..before).ctx(CTX)?,
                None => table.range::<u32>(..).ctx(CTX)?,
            };
            let mut out = Vec::with_capacity(limit.min(1024));
            for entry in range.rev().take(limit) {
                out.push(entry.ctx(CTX)?.1.value().decode()?);
            }
            Ok(out)
        })
        .await
    }

    /// The newest movement id handed out (0: none yet).
    pub async fn last_movement_id(&self) -> Result<u32, StoreError> {
        const CTX: &str = "reading the movement counter";
        self.read(CTX, |tx| {
            let meta = tx.open_table(META).ctx(CTX)?;
            let last = meta
                .get(meta_keys::LAST_MOVEMENT_ID)
                .ctx(CTX)?
                .map(|v| v.value())
                .unwrap_or(0);
            Ok(u32::try_from(last).unwrap_or(u32::MAX))
        })
        .await
    }

    /// The first on-chain scan still to run, if any.
    pub async fn initial_scan(&self) -> Result<Option<InitialScan>, StoreError> {
        const CTX: &str = "reading the initial scan";
        self.read(CTX, |tx| {
            let meta = tx.open_table(META).ctx(CTX)?;
            let value = meta
                .get(meta_keys::INITIAL_SCAN_FROM)
                .ctx(CTX)?
                .map(|v| v.value());
            Ok(value.map(|v| match u32::try_from(v) {
                Ok(h) => InitialScan::FromHeight(h),
                Err(_) => InitialScan::FromTip,
            }))
        })
        .await
    }

    /// The first on-chain scan has run.
    pub async fn clear_initial_scan(&self) -> Result<(), StoreError> {
        const CTX: &str = "clearing the initial scan";
        self.write(CTX, |tx| {
            tx.open_table(META)
                .ctx(CTX)?
                .remove(meta_keys::INITIAL_SCAN_FROM)
                .ctx(CTX)?;
            Ok(())
        })
        .await
    }
}

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
//!
//! Durability is the store's (`crate::store`): each transaction commits with
//! `Durability::Immediate`, so a method that returned `Ok` survives a power cut.
//!
//! The trait implementation below only delegates, one function per method, to the file
//! of its concern:
//! - `wallet`: wallet properties, server keys, the on-chain (BDK) changeset; also where
//!   the first on-chain scan starts ([`InitialScan`]) and deleting the wallet
//!   (`Store::wipe_wallet`, `clear_ark_state`).
//! - `movements`: movements and their payment-method and action indexes.
//! - `rounds`: round states.
//! - `vtxos`: VTXO rows and full records, and `VtxoTables`, which keeps a VTXO's row,
//!   state index entry and history in step.
//! - `vtxo_states`: VTXO state changes and locks.
//! - `vtxo_keys`: VTXO public keys and their derivation indexes.
//! - `checkpoints`: the mailbox checkpoint and wallet action checkpoints.
//! - `lightning`: paid invoices and settled Lightning receives.
//! - `exits`: exit entries and exit child transactions.
//! - `tables`: helpers they share (id counters in `META`, decoded reads).

mod balance;
mod checkpoints;
mod exits;
mod lightning;
mod movements;
mod rounds;
mod tables;
mod vtxo_keys;
mod vtxo_states;
mod vtxos;
mod wallet;

use ark::lightning::{PaymentHash, Preimage};
use ark::vtxo::Full;
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
    PaidInvoice, RoundStateId, SettledLightningReceive, StoredExit, StoredRoundState, Unlocked,
};
use bark::round::RoundState;
use bark::vtxo::{VtxoLockHolder, VtxoState, VtxoStateKind};
use bdk_wallet::ChangeSet;
use bitcoin::secp256k1::PublicKey;
use bitcoin::{Amount, Transaction, Txid};
use chrono::{DateTime, Local};
use lightning_invoice::Bolt11Invoice;

pub(crate) use self::balance::BalanceMemo;
pub use self::balance::ChainView;
pub(crate) use self::movements::payment_method_index_keys;
pub(crate) use self::vtxos::{vtxo_state_index_key, vtxo_totals_key};
pub use self::wallet::InitialScan;
pub(in crate::store) use self::wallet::clear_ark_state;
use crate::store::Store;

#[async_trait]
impl BarkPersister for Store {
    // wallet.rs

    async fn init_wallet(&self, properties: &WalletProperties) -> anyhow::Result<()> {
        wallet::init(self, properties).await
    }

    async fn initialize_bdk_wallet(&self) -> anyhow::Result<ChangeSet> {
        wallet::bdk_changeset(self).await
    }

    async fn store_bdk_wallet_changeset(&self, changeset: &ChangeSet) -> anyhow::Result<()> {
        wallet::merge_bdk_changeset(self, changeset).await
    }

    async fn read_properties(&self) -> anyhow::Result<Option<WalletProperties>> {
        wallet::properties(self).await
    }

    async fn set_server_pubkey(&self, server_pubkey: PublicKey) -> anyhow::Result<()> {
        wallet::set_server_pubkey(self, server_pubkey).await
    }

    async fn set_server_mailbox_pubkey(
        &self,
        server_mailbox_pubkey: PublicKey,
    ) -> anyhow::Result<()> {
        wallet::set_server_mailbox_pubkey(self, server_mailbox_pubkey).await
    }

    // movements.rs

    async fn create_new_movement(
        &self,
        status: MovementStatus,
        subsystem: &MovementSubsystem,
        time: DateTime<Local>,
        action_id: Option<&str>,
    ) -> anyhow::Result<MovementId> {
        movements::create(self, status, subsystem, time, action_id).await
    }

    async fn get_or_create_movement_for_action(
        &self,
        subsystem: &MovementSubsystem,
        time: DateTime<Local>,
        action_id: &str,
        update: MovementUpdate,
    ) -> anyhow::Result<(MovementId, bool)> {
        movements::get_or_create_for_action(self, subsystem, time, action_id, update).await
    }

    async fn get_movement_id_by_action(
        &self,
        action_id: &str,
    ) -> anyhow::Result<Option<MovementId>> {
        movements::id_by_action(self, action_id).await
    }

    async fn update_movement(&self, movement: &Movement) -> anyhow::Result<()> {
        movements::update(self, movement).await
    }

    async fn get_movement_by_id(&self, movement_id: MovementId) -> anyhow::Result<Movement> {
        movements::by_id(self, movement_id).await
    }

    async fn get_all_movements(&self) -> anyhow::Result<Vec<Movement>> {
        movements::all(self).await
    }

    async fn get_movements_by_payment_method(
        &self,
        payment_method: &PaymentMethod,
    ) -> anyhow::Result<Vec<Movement>> {
        movements::by_payment_method(self, payment_method).await
    }

    // rounds.rs

    async fn store_round_state(&self, round_state: &RoundState) -> anyhow::Result<RoundStateId> {
        rounds::put(self, round_state).await
    }

    async fn update_round_state(&self, round_state: &StoredRoundState) -> anyhow::Result<()> {
        rounds::update(self, round_state).await
    }

    async fn remove_round_state(&self, round_state: &StoredRoundState) -> anyhow::Result<()> {
        rounds::remove(self, round_state).await
    }

    async fn get_round_state_by_id(
        &self,
        id: RoundStateId,
    ) -> anyhow::Result<Option<StoredRoundState<Unlocked>>> {
        rounds::by_id(self, id).await
    }

    async fn get_pending_round_state_ids(&self) -> anyhow::Result<Vec<RoundStateId>> {
        rounds::pending_ids(self).await
    }

    // vtxos.rs

    async fn store_vtxos(&self, vtxos: &[(&Vtxo<Full>, &VtxoState)]) -> anyhow::Result<()> {
        vtxos::put(self, vtxos).await
    }

    async fn get_wallet_vtxo(&self, id: VtxoId) -> anyhow::Result<Option<WalletVtxo>> {
        vtxos::wallet_vtxo(self, id).await
    }

    async fn get_wallet_vtxos(&self, ids: &[VtxoId]) -> anyhow::Result<Vec<WalletVtxo>> {
        vtxos::wallet_vtxos(self, ids).await
    }

    async fn get_all_vtxos(&self) -> anyhow::Result<Vec<WalletVtxo>> {
        vtxos::all(self).await
    }

    async fn get_vtxos_by_state(&self, state: &[VtxoStateKind]) -> anyhow::Result<Vec<WalletVtxo>> {
        vtxos::by_state(self, state).await
    }

    async fn get_full_vtxo(&self, id: VtxoId) -> anyhow::Result<Option<Vtxo<Full>>> {
        vtxos::full_vtxo(self, id).await
    }

    async fn get_full_vtxos(&self, ids: &[VtxoId]) -> anyhow::Result<Vec<Vtxo<Full>>> {
        vtxos::full_vtxos(self, ids).await
    }

    async fn remove_vtxo(&self, id: VtxoId) -> anyhow::Result<Option<Vtxo<Full>>> {
        vtxos::remove(self, id).await
    }

    async fn has_spent_vtxo(&self, id: VtxoId) -> anyhow::Result<bool> {
        vtxos::has_spent(self, id).await
    }

    async fn mark_vtxos_registered(&self, vtxo_ids: &[VtxoId]) -> anyhow::Result<()> {
        vtxos::mark_registered(self, vtxo_ids).await
    }

    async fn get_unregistered_vtxo_ids(&self) -> anyhow::Result<Vec<VtxoId>> {
        vtxos::unregistered_ids(self).await
    }

    // vtxo_states.rs

    async fn update_vtxo_state_checked(
        &self,
        vtxo_id: VtxoId,
        new_state: VtxoState,
        allowed_old_states: &[VtxoStateKind],
    ) -> anyhow::Result<WalletVtxo> {
        vtxo_states::update_checked(self, vtxo_id, new_state, allowed_old_states).await
    }

    async fn release_vtxo_lock(
        &self,
        vtxo_id: VtxoId,
        holder: Option<&VtxoLockHolder>,
    ) -> anyhow::Result<()> {
        vtxo_states::release_lock(self, vtxo_id, holder).await
    }

    async fn update_vtxo_states_checked(
        &self,
        vtxo_ids: &[VtxoId],
        new_state: VtxoState,
        allowed_old_states: &[VtxoStateKind],
    ) -> anyhow::Result<()> {
        vtxo_states::update_many_checked(self, vtxo_ids, new_state, allowed_old_states).await
    }

    async fn steal_lock_to_spent(&self, vtxo_ids: &[VtxoId]) -> anyhow::Result<()> {
        vtxo_states::steal_lock_to_spent(self, vtxo_ids).await
    }

    async fn steal_lock(
        &self,
        vtxo_ids: &[VtxoId],
        holder: Option<VtxoLockHolder>,
    ) -> anyhow::Result<()> {
        vtxo_states::steal_lock(self, vtxo_ids, holder).await
    }

    // vtxo_keys.rs

    async fn store_vtxo_key(&self, index: u32, public_key: PublicKey) -> anyhow::Result<()> {
        vtxo_keys::store_key(self, index, public_key).await
    }

    async fn store_vtxo_keys(&self, keys: &[(u32, PublicKey)]) -> anyhow::Result<()> {
        vtxo_keys::store_keys(self, keys).await
    }

    async fn get_last_vtxo_key_index(&self) -> anyhow::Result<Option<u32>> {
        vtxo_keys::last_index(self).await
    }

    async fn get_public_key_idx(&self, public_key: &PublicKey) -> anyhow::Result<Option<u32>> {
        vtxo_keys::index_of(self, public_key).await
    }

    // checkpoints.rs

    async fn get_mailbox_checkpoint(&self) -> anyhow::Result<u64> {
        checkpoints::mailbox(self).await
    }

    async fn store_mailbox_checkpoint(&self, checkpoint: u64) -> anyhow::Result<()> {
        checkpoints::store_mailbox(self, checkpoint).await
    }

    async fn upsert_wallet_action_checkpoint(
        &self,
        id: &WalletActionId,
        checkpoint: &WalletActionCheckpoint,
    ) -> anyhow::Result<()> {
        checkpoints::upsert_action(self, id, checkpoint).await
    }

    async fn get_wallet_action_checkpoint(
        &self,
        id: &WalletActionId,
    ) -> anyhow::Result<Option<WalletActionCheckpoint>> {
        checkpoints::action(self, id).await
    }

    async fn get_all_wallet_action_checkpoints(
        &self,
    ) -> anyhow::Result<Vec<WalletActionCheckpoint>> {
        checkpoints::all_actions(self).await
    }

    async fn remove_wallet_action_checkpoint(&self, id: &WalletActionId) -> anyhow::Result<()> {
        checkpoints::remove_action(self, id).await
    }

    // lightning.rs

    async fn record_paid_invoice(
        &self,
        payment_hash: PaymentHash,
        preimage: Preimage,
    ) -> anyhow::Result<()> {
        lightning::record_paid_invoice(self, payment_hash, preimage).await
    }

    async fn get_paid_invoice(
        &self,
        payment_hash: PaymentHash,
    ) -> anyhow::Result<Option<PaidInvoice>> {
        lightning::paid_invoice(self, payment_hash).await
    }

    async fn record_settled_lightning_receive(
        &self,
        payment_hash: PaymentHash,
        preimage: Preimage,
        invoice: &Bolt11Invoice,
        amount: Amount,
    ) -> anyhow::Result<()> {
        lightning::record_settled_receive(self, payment_hash, preimage, invoice, amount).await
    }

    async fn get_settled_lightning_receive(
        &self,
        payment_hash: PaymentHash,
    ) -> anyhow::Result<Option<SettledLightningReceive>> {
        lightning::settled_receive(self, payment_hash).await
    }

    // exits.rs

    async fn store_exit_vtxo_entry(&self, exit: &StoredExit) -> anyhow::Result<()> {
        exits::put(self, exit).await
    }

    async fn remove_exit_vtxo_entry(&self, id: &VtxoId) -> anyhow::Result<()> {
        exits::remove(self, id).await
    }

    async fn get_exit_vtxo_entries(&self) -> anyhow::Result<Vec<StoredExit>> {
        exits::entries(self).await
    }

    async fn get_exit_vtxo_entries_with_states(
        &self,
        states: &[ExitStateKind],
    ) -> anyhow::Result<Vec<StoredExit>> {
        exits::entries_with_states(self, states).await
    }

    async fn get_exit_vtxo_entry(&self, id: &VtxoId) -> anyhow::Result<Option<StoredExit>> {
        exits::entry(self, id).await
    }

    async fn store_exit_child_tx(
        &self,
        exit_txid: Txid,
        child_tx: &Transaction,
        origin: ExitTxOrigin,
    ) -> anyhow::Result<()> {
        exits::store_child_tx(self, exit_txid, child_tx, origin).await
    }

    async fn get_exit_child_tx(
        &self,
        exit_txid: Txid,
    ) -> anyhow::Result<Option<(Transaction, ExitTxOrigin)>> {
        exits::child_tx(self, exit_txid).await
    }
}

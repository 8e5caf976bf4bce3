//! Every redb table of the wallet database, in one place.
//!
//! Rules (see `docs/storage.md`, which documents each table's key and value encoding):
//! - A table name is never reused. A retired table stays listed at the bottom with
//!   "do not reuse".
//! - Keys that are ids are fixed-width big-endian binary, so redb's byte order is the
//!   id's natural order.
//! - Values are [`Stored`] envelopes (version byte + payload) unless they are plain
//!   integers or unit.
//! - Secondary indexes are maintained in the same write transaction as their primary
//!   table; `Store::verify_invariants` checks they agree.

use redb::TableDefinition;

use crate::store::codec::{
    ActionCheckpointRecord, ApprovalRecordKind, BdkChangeSetRecord, DeviceRecordKind, EventRecord,
    ExitChildTxRecord, ExitRecord, FullVtxoRecord, IdempotencyRecord, LabelRecordKind,
    MovementRecord, NwcConnectionRecordKind, NwcRequestRecordKind, PaidInvoiceRecord,
    PropertiesRecord, RoundStateRecord, SettledReceiveRecord, SpendReservationRecordKind,
    SpendingRulesRecordKind, Stored, VtxoRowRecord, VtxoStateRecord, WalletSetupRecord,
    WebhookDeliveryRecordKind, WebhookRecordKind,
};

/// The schema version this code writes. Bump it together with a migration in
/// `migrations.rs`; a database with a higher version is refused.
pub const SCHEMA_VERSION: u64 = 9;

/// A VTXO id as `VtxoId::to_bytes`: txid (32 bytes) + output index (u32 little-endian,
/// ark's encoding). Not ordered by output index; nothing relies on that.
pub type VtxoKey = [u8; 36];
/// Key of [`VTXOS_BY_STATE`]: state byte | expiry height u32 BE | !amount u64 BE | VTXO id.
/// Byte order = state, then expiry ascending, then amount descending, then id.
pub type VtxoStateIndexKey = [u8; 49];
/// Key of [`MOVEMENTS_BY_PAYMENT_METHOD`]: SHA-256 of the payment method's canonical
/// bytes (type, 0xfe, value) | movement id u32 BE.
pub type PaymentMethodIndexKey = [u8; 36];

// --- bookkeeping -------------------------------------------------------------------

/// Store-wide counters and the schema version, by name (see `meta_keys`).
// <&str, u64>
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// Names used in [`META`].
pub mod meta_keys {
    /// Schema version of the file (`SCHEMA_VERSION` when written by this code).
    pub const SCHEMA_VERSION: &str = "schema_version";
    /// Last movement id handed out (ids start at 1 and only grow).
    pub const LAST_MOVEMENT_ID: &str = "last_movement_id";
    /// Last round state id handed out (ids start at 1 and only grow).
    pub const LAST_ROUND_STATE_ID: &str = "last_round_state_id";
    /// Last creation sequence number given to a wallet action checkpoint.
    pub const LAST_ACTION_SEQ: &str = "last_action_checkpoint_seq";
    /// The mailbox checkpoint (absent = 0).
    pub const MAILBOX_CHECKPOINT: &str = "mailbox_checkpoint";
    /// Set while a new wallet's first on-chain scan is still to run: the block height
    /// to scan from, or `u64::MAX` for "from the chain tip" (a fresh seed has no past).
    pub const INITIAL_SCAN_FROM: &str = "initial_scan_from";
    /// The chain tip the wallet last saw (since schema version 5; absent: none yet).
    /// With [`MAX_VTXO_EXIT_DEPTH`] it is what the balance is judged against while the
    /// chain source is unreachable. Removed with the wallet.
    pub const LAST_SEEN_TIP: &str = "last_seen_tip";
    /// The Ark server's `max_vtxo_exit_depth` as last seen (since schema version 5).
    /// Removed with the wallet.
    pub const MAX_VTXO_EXIT_DEPTH: &str = "max_vtxo_exit_depth";
    /// Last event id handed out (ids start at 1 and only grow, across wallet deletes).
    pub const LAST_EVENT_ID: &str = "last_event_id";
    /// Highest event id removed from the log (retention or wallet delete); absent = 0.
    /// A reader whose cursor is below it missed events.
    pub const EVENTS_PRUNED_THROUGH_ID: &str = "events_pruned_through_id";
    /// Timestamp (µs since the epoch) of the event at `EVENTS_PRUNED_THROUGH_ID`.
    pub const EVENTS_PRUNED_THROUGH_AT: &str = "events_pruned_through_at_us";
    /// Last webhook delivery id handed out (since schema version 9; absent = 0).
    pub const LAST_WEBHOOK_DELIVERY_ID: &str = "last_webhook_delivery_id";
}

// --- bark wallet state -------------------------------------------------------------

/// The wallet's properties (network, fingerprint, server keys). At most one row.
// <(), Stored<PropertiesRecord>>
pub const PROPERTIES: TableDefinition<(), Stored<PropertiesRecord>> =
    TableDefinition::new("wallet_properties");

/// The on-chain (BDK) wallet state: all changesets merged into one. At most one row.
// <(), Stored<BdkChangeSetRecord>>
pub const BDK_CHANGESET: TableDefinition<(), Stored<BdkChangeSetRecord>> =
    TableDefinition::new("bdk_changeset");

/// VTXOs as listings need them: bare VTXO, exit summaries, registered flag, state.
// <VtxoKey, Stored<VtxoRowRecord>>
pub const VTXOS: TableDefinition<VtxoKey, Stored<VtxoRowRecord>> = TableDefinition::new("vtxos");

/// Full VTXOs with their genesis chain, read only for exits, sends and registration.
// <VtxoKey, Stored<FullVtxoRecord>>
pub const VTXOS_FULL: TableDefinition<VtxoKey, Stored<FullVtxoRecord>> =
    TableDefinition::new("vtxos_full");

/// Every state a VTXO has been in, oldest first (audit trail; the last equals VTXOS).
// <(VtxoKey, u32 sequence), Stored<VtxoStateRecord>>
pub const VTXO_STATE_HISTORY: TableDefinition<(VtxoKey, u32), Stored<VtxoStateRecord>> =
    TableDefinition::new("vtxo_state_history");

/// Index: VTXOs by current state, expiry ascending, amount descending.
// <VtxoStateIndexKey, ()>
pub const VTXOS_BY_STATE: TableDefinition<VtxoStateIndexKey, ()> =
    TableDefinition::new("vtxos_by_state");

/// What the balance needs of the VTXOs, kept with them (since schema version 5): the
/// number of VTXOs and their amount, by state and exit depth. Changed in the same
/// transaction as every [`VTXOS`] write that adds, removes or moves a VTXO between
/// states; an entry whose count falls to zero is removed.
// <(u8 state kind, u16 exit depth), (u64 count, u64 amount in sats)>
pub const VTXO_TOTALS: TableDefinition<(u8, u16), (u64, u64)> = TableDefinition::new("vtxo_totals");

/// VTXO key derivation: public key (33-byte compressed) to derivation index.
// <[u8; 33], u32>
pub const VTXO_KEYS: TableDefinition<[u8; 33], u32> = TableDefinition::new("vtxo_keys");

/// Index: derivation index and public key, so the highest index is the last key.
// <(u32, [u8; 33]), ()>
pub const VTXO_KEYS_BY_INDEX: TableDefinition<(u32, [u8; 33]), ()> =
    TableDefinition::new("vtxo_keys_by_index");

/// Movements (the wallet's history) by id.
// <u32 movement id, Stored<MovementRecord>>
pub const MOVEMENTS: TableDefinition<u32, Stored<MovementRecord>> =
    TableDefinition::new("movements");

/// Index: movements by each payment method they sent to or received on.
// <PaymentMethodIndexKey, ()>
pub const MOVEMENTS_BY_PAYMENT_METHOD: TableDefinition<PaymentMethodIndexKey, ()> =
    TableDefinition::new("movements_by_payment_method");

/// Index: the movement a wallet action owns, by action id.
// <&str action id, u32 movement id>
pub const MOVEMENTS_BY_ACTION: TableDefinition<&str, u32> =
    TableDefinition::new("movements_by_action");

/// Round participations still pending, by round state id.
// <u32 round state id, Stored<RoundStateRecord>>
pub const ROUND_STATES: TableDefinition<u32, Stored<RoundStateRecord>> =
    TableDefinition::new("round_states");

/// In-flight wallet actions (Lightning sends and receives, offboards) by action id.
// <&str action id, Stored<ActionCheckpointRecord>>
pub const WALLET_ACTION_CHECKPOINTS: TableDefinition<&str, Stored<ActionCheckpointRecord>> =
    TableDefinition::new("wallet_action_checkpoints");

/// Settled outgoing Lightning payments, by payment hash. Never deleted.
// <[u8; 32] payment hash, Stored<PaidInvoiceRecord>>
pub const PAID_INVOICES: TableDefinition<[u8; 32], Stored<PaidInvoiceRecord>> =
    TableDefinition::new("paid_invoices");

/// Settled incoming Lightning payments, by payment hash. Never deleted.
// <[u8; 32] payment hash, Stored<SettledReceiveRecord>>
pub const SETTLED_LIGHTNING_RECEIVES: TableDefinition<[u8; 32], Stored<SettledReceiveRecord>> =
    TableDefinition::new("settled_lightning_receives");

/// Unilateral exits in progress or done, by VTXO id.
// <VtxoKey, Stored<ExitRecord>>
pub const EXITS: TableDefinition<VtxoKey, Stored<ExitRecord>> = TableDefinition::new("exits");

/// CPFP child transactions of exit transactions, by the exit transaction's txid.
// <[u8; 32] exit txid, Stored<ExitChildTxRecord>>
pub const EXIT_CHILD_TXS: TableDefinition<[u8; 32], Stored<ExitChildTxRecord>> =
    TableDefinition::new("exit_child_txs");

// --- Berth's own tables ------------------------------------------------------------
//
// Berth's own data lives here, in the same file, so that a wallet change and its
// effect on them can share one transaction.

/// The event log: every wallet notification, by event id (since schema version 2).
/// Ids and timestamps both strictly increase, so id order is time order.
// <u64 event id, Stored<EventRecord>>
pub const EVENTS: TableDefinition<u64, Stored<EventRecord>> = TableDefinition::new("events");

/// Index: event id by timestamp (µs since the epoch), for `since=` queries.
// <u64 timestamp µs, u64 event id>
pub const EVENTS_BY_TIME: TableDefinition<u64, u64> = TableDefinition::new("events_by_time");

/// Idempotency keys of fund-moving requests, by SHA-256 of the key (since schema
/// version 2).
// <[u8; 32] key hash, Stored<IdempotencyRecord>>
pub const IDEMPOTENCY_KEYS: TableDefinition<[u8; 32], Stored<IdempotencyRecord>> =
    TableDefinition::new("idempotency_keys");

/// Index: idempotency keys by when they were claimed, for expiry.
// <(u64 claimed at µs, [u8; 32] key hash), ()>
pub const IDEMPOTENCY_KEYS_BY_TIME: TableDefinition<(u64, [u8; 32]), ()> =
    TableDefinition::new("idempotency_keys_by_time");

/// Paired devices by device id (16 lowercase hex characters), since schema version 3.
/// Always changed in the same transaction as [`TOKENS`]; not wallet state, so deleting
/// the wallet keeps them.
// <&str device id, Stored<DeviceRecordKind>>
pub const DEVICES: TableDefinition<&str, Stored<DeviceRecordKind>> =
    TableDefinition::new("devices");

/// Index: the device a bearer token belongs to, by SHA-256 of the token (since schema
/// version 3). Exactly one row per [`DEVICES`] row, naming it.
// <[u8; 32] token hash, &str device id>
pub const TOKENS: TableDefinition<[u8; 32], &str> = TableDefinition::new("tokens");

/// How the wallet came to be (since schema version 4): the network, fingerprint and
/// origin (new or imported seed) that `create` recorded, and, once bark has created and
/// first opened the wallet, how seed recovery went. At most one row; deleted with the
/// wallet. A wallet made before version 4 has none (its bark properties say it exists).
// <(), Stored<WalletSetupRecord>>
pub const WALLET_SETUP: TableDefinition<(), Stored<WalletSetupRecord>> =
    TableDefinition::new("wallet_setup");

/// Nostr Wallet Connect connections by id (16 lowercase hex characters), since schema
/// version 6. Not wallet state: deleting the wallet keeps them (like devices).
// <&str connection id, Stored<NwcConnectionRecordKind>>
pub const NWC_CONNECTIONS: TableDefinition<&str, Stored<NwcConnectionRecordKind>> =
    TableDefinition::new("nwc_connections");

/// Payments requested over Nostr Wallet Connect, by the request event's id (since
/// schema version 6): written before the payment, answered after, so a request is
/// paid at most once. Pruned by age once answered ([`NWC_REQUESTS_BY_TIME`]).
// <[u8; 32] event id, Stored<NwcRequestRecordKind>>
pub const NWC_REQUESTS: TableDefinition<[u8; 32], Stored<NwcRequestRecordKind>> =
    TableDefinition::new("nwc_requests");

/// Paired devices' spending rules, by device id (since schema version 7).
// <&str device id, Stored<SpendingRulesRecordKind>>
pub const SPENDING_RULES: TableDefinition<&str, Stored<SpendingRulesRecordKind>> =
    TableDefinition::new("spending_rules");

/// Payments reserved against a device's budgets whose outcome is not known yet, by a
/// random id (since schema version 7).
// <[u8; 16] reservation id, Stored<SpendReservationRecordKind>>
pub const SPENDING_RESERVATIONS: TableDefinition<[u8; 16], Stored<SpendReservationRecordKind>> =
    TableDefinition::new("spending_reservations");

/// Payments held for the owner's approval, pending or ended (kept for the record, a
/// bounded number), by a random id (since schema version 8).
// <[u8; 16] approval id, Stored<ApprovalRecordKind>>
pub const SPENDING_APPROVALS: TableDefinition<[u8; 16], Stored<ApprovalRecordKind>> =
    TableDefinition::new("spending_approvals");

/// BIP-329 labels imported by the owner, by `<type>:<ref>` (since schema version 8):
/// kept whether or not a movement has the reference yet.
// <&str "<type>:<ref>", Stored<LabelRecordKind>>
pub const LABELS: TableDefinition<&str, Stored<LabelRecordKind>> = TableDefinition::new("labels");

/// Index: NWC requests by when they were received, for pruning. One row per
/// [`NWC_REQUESTS`] row.
// <(u64 received at µs, [u8; 32] event id), ()>
pub const NWC_REQUESTS_BY_TIME: TableDefinition<(u64, [u8; 32]), ()> =
    TableDefinition::new("nwc_requests_by_time");

/// Webhook endpoints the owner registered, by id (16 lowercase hex characters), with
/// each one's delivery cursor (since schema version 9). Not wallet state: deleting the
/// wallet keeps them.
// <&str webhook id, Stored<WebhookRecordKind>>
pub const WEBHOOKS: TableDefinition<&str, Stored<WebhookRecordKind>> =
    TableDefinition::new("webhooks");

/// Every attempt to deliver an event to a webhook, by endpoint and delivery id (ids
/// only grow, across endpoints); the newest few hundred per endpoint are kept, and an
/// endpoint's rows go with it (since schema version 9).
// <(&str webhook id, u64 delivery id), Stored<WebhookDeliveryRecordKind>>
pub const WEBHOOK_DELIVERIES: TableDefinition<(&str, u64), Stored<WebhookDeliveryRecordKind>> =
    TableDefinition::new("webhook_deliveries");

// --- retired tables (do not reuse these names) -------------------------------------
//
// (none yet)

/// Open (creating if needed) every table, so a fresh file has the full schema and a
/// read transaction never meets a missing table.
pub fn create_all(tx: &redb::WriteTransaction) -> Result<(), redb::TableError> {
    tx.open_table(META)?;
    tx.open_table(PROPERTIES)?;
    tx.open_table(BDK_CHANGESET)?;
    tx.open_table(VTXOS)?;
    tx.open_table(VTXOS_FULL)?;
    tx.open_table(VTXO_STATE_HISTORY)?;
    tx.open_table(VTXOS_BY_STATE)?;
    tx.open_table(VTXO_TOTALS)?;
    tx.open_table(VTXO_KEYS)?;
    tx.open_table(VTXO_KEYS_BY_INDEX)?;
    tx.open_table(MOVEMENTS)?;
    tx.open_table(MOVEMENTS_BY_PAYMENT_METHOD)?;
    tx.open_table(MOVEMENTS_BY_ACTION)?;
    tx.open_table(ROUND_STATES)?;
    tx.open_table(WALLET_ACTION_CHECKPOINTS)?;
    tx.open_table(PAID_INVOICES)?;
    tx.open_table(SETTLED_LIGHTNING_RECEIVES)?;
    tx.open_table(EXITS)?;
    tx.open_table(EXIT_CHILD_TXS)?;
    tx.open_table(EVENTS)?;
    tx.open_table(EVENTS_BY_TIME)?;
    tx.open_table(IDEMPOTENCY_KEYS)?;
    tx.open_table(IDEMPOTENCY_KEYS_BY_TIME)?;
    tx.open_table(DEVICES)?;
    tx.open_table(TOKENS)?;
    tx.open_table(WALLET_SETUP)?;
    tx.open_table(NWC_CONNECTIONS)?;
    tx.open_table(NWC_REQUESTS)?;
    tx.open_table(NWC_REQUESTS_BY_TIME)?;
    tx.open_table(SPENDING_RULES)?;
    tx.open_table(SPENDING_RESERVATIONS)?;
    tx.open_table(SPENDING_APPROVALS)?;
    tx.open_table(LABELS)?;
    tx.open_table(WEBHOOKS)?;
    tx.open_table(WEBHOOK_DELIVERIES)?;
    Ok(())
}

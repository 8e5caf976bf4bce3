//! The values Berth stores, apart from bark's own types: plain data with serde (or, for
//! [`VtxoRow`], a fixed binary layout in `codec`). Each is the value of one record kind
//! in `codec` and one table in `schema`; `docs/storage.md` documents their encodings.
//! Nothing here reads or writes the database.

use ark::Vtxo;
use ark::vtxo::{Bare, Full};
use bark::vtxo::VtxoState;
use bitcoin::Network;
use bitcoin::Weight;
use bitcoin::bip32::Fingerprint;

use crate::store::vocabulary::{Alert, EventKind};

/// A wallet action checkpoint with the order it was first stored in, so listings can
/// be oldest first (the trait's contract) while upserts keep the original position.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ActionCheckpointRow {
    pub created_seq: u64,
    pub checkpoint: bark::actions::WalletActionCheckpoint,
}

/// One entry of the event log. The movement is bark's own type, so an event renders
/// with the same code as the history, whatever the API's shape becomes.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoredEvent {
    /// Microseconds since the Unix epoch; strictly greater than the previous event's.
    pub at_us: u64,
    pub kind: EventKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub movement: Option<bark::movement::Movement>,
    /// What an alert says (alert kinds only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert: Option<Alert>,
}

/// A claimed idempotency key: which request claimed it, when, and how it went.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IdempotencyEntry {
    /// Microseconds since the Unix epoch.
    pub at_us: u64,
    /// SHA-256 of the request (method, path, body).
    pub request: [u8; 32],
    pub state: IdempotencyState,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum IdempotencyState {
    InFlight,
    /// berthd stopped while the request ran.
    Interrupted,
    /// It succeeded with this answer (a JSON body).
    Done {
        status: u16,
        body: Vec<u8>,
    },
}

/// What listings need of a VTXO: the bare VTXO, the exit summaries bark caches, the
/// `registered` flag and the current state. The full VTXO lives in its own table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VtxoRow {
    pub bare: Vtxo<Bare>,
    pub exit_depth: u16,
    pub exit_tx_weight: Weight,
    pub registered: bool,
    pub state: VtxoState,
}

impl VtxoRow {
    pub fn from_full(vtxo: &Vtxo<Full>, state: VtxoState) -> Self {
        VtxoRow {
            bare: vtxo.to_bare(),
            exit_depth: vtxo.exit_depth(),
            exit_tx_weight: vtxo.transactions().map(|t| t.tx.weight()).sum(),
            registered: false,
            state,
        }
    }

    pub fn to_wallet_vtxo(&self) -> bark::WalletVtxo {
        bark::WalletVtxo {
            vtxo: self.bare.clone(),
            state: self.state.clone(),
            exit_depth: self.exit_depth,
            exit_tx_weight: self.exit_tx_weight,
            registered: self.registered,
        }
    }
}

/// The row of `WALLET_SETUP` (`store::setup`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WalletSetup {
    pub network: Network,
    pub fingerprint: Fingerprint,
    /// Imported from a phrase: seed recovery runs when bark creates it.
    pub imported: bool,
    /// `None` while the creation is unfinished: bark has not yet created the wallet and
    /// opened it (with its seed recovery) to the end.
    pub recovery: Option<Recovery>,
}

/// How seed recovery went, when bark created the wallet.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum Recovery {
    /// Not run: a newly generated seed has nothing to recover.
    NotRun { at_us: u64 },
    /// The scan stopped with an error before it could report anything.
    Failed { at_us: u64, reason: String },
    /// The scan ran to its end; the counts say what it found.
    Finished { at_us: u64, counts: RecoveryCounts },
}

/// What a finished scan found, by what became of each VTXO (bark's `RecoveryReport`,
/// with the undecided ones split by whether the server returned them at all).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecoveryCounts {
    /// Restored as spendable.
    pub recovered: u32,
    pub recovered_sat: u64,
    /// Returned by the server (or carried by the mailbox), but the server did not say
    /// whether they are unspent: kept locked, not spendable.
    pub unconfirmed: u32,
    pub unconfirmed_sat: u64,
    /// Named in the mailboxes, but the server could not return them.
    pub unavailable: u32,
    /// Not derivable from the seed within the key gap limit.
    pub beyond_gap_limit: u32,
    /// Spent, or in a flow that settles elsewhere, by the server's word.
    pub spent: u32,
    /// Exited on-chain already.
    pub exited: u32,
    /// Unknown to the server.
    pub unknown_to_server: u32,
}

impl RecoveryCounts {
    /// VTXOs recovery came across, whatever became of them.
    pub fn found(&self) -> u32 {
        self.recovered
            + self.unconfirmed
            + self.unavailable
            + self.beyond_gap_limit
            + self.spent
            + self.exited
            + self.unknown_to_server
    }

    /// VTXOs that may be the wallet's money but were not restored as spendable.
    pub fn not_restored(&self) -> u32 {
        self.unconfirmed + self.unavailable + self.beyond_gap_limit
    }
}

/// Length of a device id: 16 lowercase hex characters.
pub const DEVICE_ID_LEN: usize = 16;

/// Longest device name the store accepts, in bytes (UTF-8).
pub const MAX_DEVICE_NAME_LEN: usize = 64;

/// A paired device. Stored as JSON (record kind `berth.device`, version 1); a field
/// added later gets a serde default, so older records keep decoding.
///
/// `Debug` prints every field: `token_hash` is a SHA-256 of the token, not the token.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceRecord {
    /// 16 lowercase hex characters, chosen by the caller.
    pub id: String,
    /// Human-readable name, at most [`MAX_DEVICE_NAME_LEN`] bytes.
    pub name: String,
    /// What the device may do, as a bit set the store does not interpret.
    pub scopes: u8,
    /// SHA-256 of the device's bearer token.
    pub token_hash: [u8; 32],
    /// When the device was paired, in microseconds since the Unix epoch.
    pub created_at_us: u64,
    /// A web console session (a browser signed in), which expires (`console::session`),
    /// rather than a paired phone or app. False in records written before it existed.
    #[serde(default)]
    pub console_session: bool,
}

/// A paired device's spending rules (`engine::spending`) and where its budgets stand.
/// Stored as JSON (record kind `berth.spending_rules`, version 1); a field added later
/// gets a serde default.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SpendingRulesRecord {
    /// The most one payment may be.
    pub max_payment_sat: Option<u64>,
    pub budgets: Vec<BudgetRecord>,
    /// The kinds of payment allowed (`ark`, `lightning`, `onchain`, `offboard`,
    /// `exit`); `None`: every kind.
    pub kinds: Option<Vec<String>>,
    /// What happens to a payment over a limit: `refuse`, or `approve` (it waits for
    /// the owner's approval).
    pub over_limit: String,
    /// The most one payment's fee may be (absent in records written before it existed).
    #[serde(default)]
    pub max_fee_sat: Option<u64>,
    /// The device sees only its own payments in the history and the events.
    #[serde(default)]
    pub own_history: bool,
}

/// One budget of a device: at most `amount_sat` per `period`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BudgetRecord {
    pub amount_sat: u64,
    /// `day`, `week`, `month` or `year`: calendar periods in the box's time zone.
    pub period: String,
    /// Spent or reserved in the period that began at `period_start_us`.
    pub used_sat: u64,
    pub period_start_us: u64,
}

/// A payment reserved against a device's budgets, its outcome not known yet. Stored as
/// JSON (record kind `berth.spend_reservation`, version 1).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SpendReservationRecord {
    pub device_id: String,
    /// The payment's kind (`ark`, `lightning`, ...).
    pub kind: String,
    pub amount_sat: u64,
    pub at_us: u64,
    /// Each budget it was taken from: (period, the period's start), so it is given
    /// back only within the same period.
    pub taken: Vec<(String, u64)>,
    /// What the payment became in the wallet, once known: its movement, its payment
    /// hash (Lightning).
    pub movement_id: Option<u32>,
    pub payment_hash: Option<[u8; 32]>,
}

/// A BIP-329 label record as imported (`engine::labels`). Stored as JSON (record kind
/// `berth.label`, version 1), keyed by its type and reference.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LabelRecord {
    /// `tx`, `addr`, `pubkey`, `input`, `output` or `xpub`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(rename = "ref")]
    pub reference: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spendable: Option<bool>,
}

/// A payment held for the owner's approval (`engine::spending::approvals`). Stored as
/// JSON (record kind `berth.spend_approval`, version 1).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApprovalRecord {
    pub device_id: String,
    /// The payment's kind (`ark`, `lightning`, ...).
    pub kind: String,
    pub amount_sat: Option<u64>,
    /// The fee cap in force when it was asked, which binds the approved payment.
    pub max_fee_sat: Option<u64>,
    /// Where the payment goes, as the request named it (for the owner to read).
    pub destination: Option<String>,
    /// The rule it is over, as a refusal would have said.
    pub reason: String,
    pub created_at_us: u64,
    pub expires_at_us: u64,
    /// `pending`, `approved`, `denied`, `expired` or `executed`.
    pub state: String,
    pub decided_at_us: Option<u64>,
    /// Set in the transaction that lets the approved payment run: it runs once.
    pub started: bool,
    /// The request to run once approved, exactly as it was made.
    pub request: HeldRequestRecord,
    /// The approved request's answer, once it ran.
    pub result: Option<HeldAnswerRecord>,
}

/// A request held for approval: what the API layer needs to run it again, unchanged.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HeldRequestRecord {
    pub method: String,
    pub path: String,
    /// The JSON body, as received.
    pub body: String,
    /// The request's `Idempotency-Key`, as the idempotency records keep it (a hash in
    /// the caller's namespace), whose answer becomes the final one.
    pub idempotency_key: Option<[u8; 32]>,
    /// A Nostr Wallet Connect payment instead (the key of its request's record, in
    /// `nwc_requests`): `method` is the NIP-47 method, `path` empty, `body` the
    /// invoice's parameters; `nwc` runs it again and answers the app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nwc_key: Option<[u8; 32]>,
}

/// An HTTP answer: status and JSON body.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HeldAnswerRecord {
    pub status: u16,
    pub body: String,
}

/// A Nostr Wallet Connect connection (`nwc`): one app's access to the wallet. Stored as
/// JSON (record kind `berth.nwc_connection`, version 1), keyed by `id`; a field added
/// later gets a serde default. What the fields mean (methods, limits, the budget's
/// renewal) is `nwc`'s business; the store keeps the record whole and changes it only
/// inside one transaction.
///
/// `Debug` leaves out `service_secret`: the wallet service's key for this connection.
/// The client's secret is never stored (only its public key).
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NwcConnectionRecord {
    /// 16 lowercase hex characters.
    pub id: String,
    pub name: String,
    /// The secret key the wallet service signs and encrypts with for this connection.
    pub service_secret: [u8; 32],
    /// The x-only public key the client signs its requests with.
    pub client_pubkey: [u8; 32],
    /// The methods granted.
    pub methods: Vec<String>,
    pub max_payment_msat: Option<u64>,
    pub budget_msat: Option<u64>,
    /// `daily`, `weekly`, `monthly`, `yearly` or `never`.
    pub budget_renewal: String,
    /// Spent (or reserved for a payment under way) in the current budget period.
    pub budget_used_msat: u64,
    /// When the current budget period began, µs since the epoch.
    pub budget_period_start_us: u64,
    /// Everything paid through this connection, ever.
    pub spent_total_msat: u64,
    pub relays: Vec<String>,
    pub created_at_us: u64,
    pub expires_at_us: Option<u64>,
    /// Set when the owner revoked it: requests are answered `UNAUTHORIZED` from then
    /// on, and the record is kept until it is purged.
    pub revoked_at_us: Option<u64>,
    pub last_used_at_us: Option<u64>,
    /// Payments requested through this connection (counted when one begins).
    pub payments: u64,
}

impl std::fmt::Debug for NwcConnectionRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NwcConnectionRecord")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("methods", &self.methods)
            .field("revoked_at_us", &self.revoked_at_us)
            .finish_non_exhaustive()
    }
}

/// A payment requested over Nostr Wallet Connect, by the request event's id: written
/// before the wallet is asked to pay, so that a request delivered again (by another
/// relay, or after a crash) is answered from here and never paid twice. Stored as JSON
/// (record kind `berth.nwc_request`, version 1).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NwcRequestRecord {
    pub connection_id: String,
    pub received_at_us: u64,
    pub method: String,
    /// What the payment took of the connection's budget, in the period that began at
    /// `budget_period_start_us`: given back there if it fails.
    pub reserved_msat: u64,
    pub budget_period_start_us: u64,
    pub payment_hash: Option<[u8; 32]>,
    /// The request was encrypted under NIP-04 (otherwise NIP-44): its answer is too.
    #[serde(default)]
    pub nip04: bool,
    /// The response's content (its JSON, before encryption), once there is one; `None`
    /// while the payment is under way, or was when berthd stopped.
    pub answer: Option<String>,
    /// One invoice of a `multi_pay_invoice`: the request's id (the row's key is made
    /// from it and `d`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<[u8; 32]>,
    /// One invoice of a `multi_pay_invoice`: its answer's `d` tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d: Option<String>,
    /// The payment waits for the owner's approval (the approval's id): it is answered
    /// when the owner decides, not from bark's state before then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<[u8; 16]>,
}

/// A webhook endpoint the owner registered (`webhooks`), with where its delivery
/// stands. Stored as JSON (record kind `berth.webhook`, version 1). Its `Debug` leaves
/// the secrets out.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WebhookRecord {
    pub url: String,
    /// The event types it receives (`*`: all of them).
    pub events: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The signing secret (`whsec_` and base64).
    pub secret: String,
    /// The secret before the last rotation, still signed with until `until_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_secret: Option<PreviousSecret>,
    pub created_at_us: u64,
    /// Set when the owner paused it or when it failed for too long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<Disabled>,
    /// Every event of the log up to this id has been delivered or was not for it.
    pub cursor: u64,
    /// Attempts made so far at the event after the cursor (0: none failed).
    #[serde(default)]
    pub failed_attempts: u32,
    /// When the first of those failed attempts was (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failing_since_us: Option<u64>,
    /// Not before this time is the next attempt made (µs; 0: at once).
    #[serde(default)]
    pub next_attempt_us: u64,
    /// Events the owner asked to be delivered again, by id, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redeliver: Vec<u64>,
    /// Set when this is a paired device's push subscription (`webhooks::push`) rather
    /// than an owner's webhook: then `events` is unused and `secret` signs nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<PushTarget>,
}

/// Whose push subscription an endpoint is, and what it hears.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PushTarget {
    pub device_id: String,
    /// The categories it chose (`webhooks::push::Category` names).
    pub categories: Vec<String>,
    /// Amounts and reasons in the text (else generic sentences).
    pub details: bool,
}

/// A rotated secret, signed with beside the new one for a while (`Debug` leaves it out).
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PreviousSecret {
    pub secret: String,
    pub until_us: u64,
}

impl std::fmt::Debug for WebhookRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookRecord")
            .field("url", &"<withheld>")
            .field("events", &self.events)
            .field("description", &self.description)
            .field("secret", &"<withheld>")
            .field("previous_secret", &self.previous_secret)
            .field("created_at_us", &self.created_at_us)
            .field("disabled", &self.disabled)
            .field("cursor", &self.cursor)
            .field("failed_attempts", &self.failed_attempts)
            .field("failing_since_us", &self.failing_since_us)
            .field("next_attempt_us", &self.next_attempt_us)
            .field("redeliver", &self.redeliver)
            .field("push", &self.push)
            .finish()
    }
}

impl std::fmt::Debug for PreviousSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreviousSecret")
            .field("secret", &"<withheld>")
            .field("until_us", &self.until_us)
            .finish()
    }
}

/// Why and since when an endpoint receives nothing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Disabled {
    pub at_us: u64,
    pub reason: String,
    /// `true` when berthd disabled it (it kept failing), `false` when the owner did.
    pub by_failures: bool,
}

/// One attempt to deliver an event to a webhook endpoint. Stored as JSON (record kind
/// `berth.webhook_delivery`, version 1).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WebhookDeliveryRecord {
    /// The event of the log delivered.
    pub event_id: u64,
    /// Its type.
    pub event_type: String,
    /// 1 for the first attempt at this event, counting on through retries (a
    /// redelivery the owner asked for counts from 1 again).
    pub attempt: u32,
    pub at_us: u64,
    /// `delivered` or `failed`.
    pub status: String,
    /// The endpoint's HTTP status, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_code: Option<u16>,
    /// Why it failed, for people (no answer, refused by the policy, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub latency_ms: u64,
    /// `true` when the owner asked for this delivery again.
    #[serde(default)]
    pub redelivery: bool,
}

//! Value encodings: every stored value sits in a versioned envelope we control.
//!
//! Layout of every value: `[record version: u8][payload]`. The payload format is fixed
//! per (record kind, version) and documented in `docs/storage.md`. A reader that meets a
//! version it does not know refuses the value with a clear error instead of guessing.
//!
//! The redb value type is [`Stored<R>`]: a typed table `TableDefinition<K, Stored<R>>`
//! hands back an [`Envelope`] that decodes into `R::Value` on demand. redb records the
//! type name of every table's value, so opening a table with the wrong record kind
//! fails instead of misreading bytes.
//!
//! Payloads are either
//! - JSON of bark's own serde types, for records bark defines and promises to keep
//!   readable (its serialisation compatibility tests pin these shapes), or
//! - bark/ark's consensus-style protocol encoding for VTXOs (compact, stable, and what
//!   the Ark protocol itself uses), or
//! - a small fixed binary layout of our own ([`VtxoRow`]).

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use ark::vtxo::{Bare, Full};
use ark::{ProtocolEncoding, Vtxo};
use bitcoin::Weight;

use crate::store::error::StoreError;
use crate::store::records::{
    ActionCheckpointRow, ApprovalRecord, DeviceRecord, IdempotencyEntry, LabelRecord,
    NwcConnectionRecord, NwcRequestRecord, SpendReservationRecord, SpendingRulesRecord,
    StoredEvent, VtxoRow, WalletSetup, WebhookDeliveryRecord, WebhookRecord,
};

/// One kind of stored record: its Rust type, its redb type name and its encoding.
pub trait Record: 'static {
    /// The decoded value.
    type Value;
    /// Stable, unique name recorded by redb for tables of this record.
    const TYPE_NAME: &'static str;
    /// The version written by this code.
    const VERSION: u8;
    /// Append the payload (without the version byte) to `out`.
    fn encode_payload(value: &Self::Value, out: &mut Vec<u8>) -> Result<(), StoreError>;
    /// Decode a payload written as `version`.
    fn decode_payload(version: u8, payload: &[u8]) -> Result<Self::Value, StoreError>;
}

/// An encoded value of record kind `R`, borrowed from the database or owned.
pub struct Envelope<'a, R> {
    bytes: Cow<'a, [u8]>,
    _kind: PhantomData<fn() -> R>,
}

impl<R: Record> Envelope<'static, R> {
    /// Encode `value` at the current version.
    pub fn encode(value: &R::Value) -> Result<Self, StoreError> {
        let mut bytes = Vec::with_capacity(64);
        bytes.push(R::VERSION);
        R::encode_payload(value, &mut bytes)?;
        Ok(Envelope {
            bytes: Cow::Owned(bytes),
            _kind: PhantomData,
        })
    }
}

impl<R: Record> Envelope<'_, R> {
    /// The stored bytes (version byte and payload).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Decode the value, whatever version of ours wrote it.
    pub fn decode(&self) -> Result<R::Value, StoreError> {
        let (version, payload) = self.versioned_payload()?;
        R::decode_payload(version, payload)
    }

    /// The version byte, checked to be one of ours, and the payload after it.
    fn versioned_payload(&self) -> Result<(u8, &[u8]), StoreError> {
        let Some((&version, payload)) = self.bytes.split_first() else {
            return Err(StoreError::decode(R::TYPE_NAME, "empty value"));
        };
        if version == 0 || version > R::VERSION {
            return Err(StoreError::decode(
                R::TYPE_NAME,
                format!(
                    "unknown record version {version} (this code writes {})",
                    R::VERSION
                ),
            ));
        }
        Ok((version, payload))
    }
}

// Values may hold secrets (round states carry signing keys): never print contents.
impl<R: Record> fmt::Debug for Envelope<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Envelope<{}>({} bytes)", R::TYPE_NAME, self.bytes.len())
    }
}

/// The redb value type of a table holding records of kind `R`.
pub struct Stored<R>(PhantomData<fn() -> R>);

impl<R: Record> fmt::Debug for Stored<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Stored<{}>", R::TYPE_NAME)
    }
}

impl<R: Record> redb::Value for Stored<R> {
    type SelfType<'a>
        = Envelope<'a, R>
    where
        Self: 'a;
    type AsBytes<'a>
        = &'a [u8]
    where
        Self: 'a;

    fn fixed_width() -> Option<usize> {
        None
    }

    fn from_bytes<'a>(data: &'a [u8]) -> Envelope<'a, R>
    where
        Self: 'a,
    {
        Envelope {
            bytes: Cow::Borrowed(data),
            _kind: PhantomData,
        }
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a Envelope<'b, R>) -> &'a [u8]
    where
        Self: 'b,
    {
        value.bytes.as_ref()
    }

    fn type_name() -> redb::TypeName {
        redb::TypeName::new(R::TYPE_NAME)
    }
}

fn json_encode<T: serde::Serialize>(
    what: &'static str,
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), StoreError> {
    serde_json::to_writer(out, value).map_err(|e| StoreError::encode(what, e))
}

fn json_decode<T: serde::de::DeserializeOwned>(
    what: &'static str,
    payload: &[u8],
) -> Result<T, StoreError> {
    serde_json::from_slice(payload).map_err(|e| StoreError::decode(what, e))
}

/// Declare a record kind whose version-1 payload is the JSON of a bark serde type.
macro_rules! json_record {
    ($(#[$doc:meta])* $kind:ident, $value:ty, $name:literal) => {
        $(#[$doc])*
        pub enum $kind {}
        impl Record for $kind {
            type Value = $value;
            const TYPE_NAME: &'static str = $name;
            const VERSION: u8 = 1;
            fn encode_payload(value: &$value, out: &mut Vec<u8>) -> Result<(), StoreError> {
                json_encode($name, value, out)
            }
            fn decode_payload(_version: u8, payload: &[u8]) -> Result<$value, StoreError> {
                json_decode($name, payload)
            }
        }
    };
}

json_record!(
    /// `bark::WalletProperties` as JSON.
    PropertiesRecord, bark::WalletProperties, "berth.wallet_properties"
);
json_record!(
    /// The merged `bdk_wallet::ChangeSet` as JSON.
    BdkChangeSetRecord, bdk_wallet::ChangeSet, "berth.bdk_changeset"
);
json_record!(
    /// `bark::movement::Movement` as JSON.
    MovementRecord, bark::movement::Movement, "berth.movement"
);
/// A movement's status and subsystem, read without the rest of it: what a scan for
/// the movements of one subsystem in one status filters on. The full decode builds
/// every destination (parsing invoices and offers) and VTXO id list, which such a
/// scan would throw away for all but a handful of movements.
#[derive(Debug, serde::Deserialize)]
pub struct MovementHead {
    pub status: bark::movement::MovementStatus,
    pub subsystem: bark::movement::MovementSubsystem,
}

impl Envelope<'_, MovementRecord> {
    /// The [`MovementHead`] of this movement. Every version so far is JSON of bark's
    /// `Movement`, whose `status` and `subsystem` fields the head reads (serde skips
    /// the other fields without building them).
    pub fn decode_head(&self) -> Result<MovementHead, StoreError> {
        // A new version of the record must teach this function how its head reads.
        const _: () = assert!(<MovementRecord as Record>::VERSION == 1);
        let (_version, payload) = self.versioned_payload()?;
        json_decode(MovementRecord::TYPE_NAME, payload)
    }
}

/// The VTXOs a movement produced, read without the rest of it: what the scan for VTXOs
/// no movement accounts for needs from each movement of the history.
#[derive(Debug, serde::Deserialize)]
pub struct MovementOutputs {
    pub output_vtxos: Vec<ark::VtxoId>,
}

impl Envelope<'_, MovementRecord> {
    /// The [`MovementOutputs`] of this movement (see [`Self::decode_head`] for why a
    /// partial read of the JSON is sound).
    pub fn decode_outputs(&self) -> Result<MovementOutputs, StoreError> {
        const _: () = assert!(<MovementRecord as Record>::VERSION == 1);
        let (_version, payload) = self.versioned_payload()?;
        json_decode(MovementRecord::TYPE_NAME, payload)
    }
}

json_record!(
    /// One entry of a VTXO's state history: `bark::vtxo::VtxoState` as JSON.
    VtxoStateRecord, bark::vtxo::VtxoState, "berth.vtxo_state"
);
json_record!(
    /// `bark::persist::models::StoredExit` as JSON.
    ExitRecord, bark::persist::models::StoredExit, "berth.exit"
);
json_record!(
    /// `bark::persist::models::SerdeExitChildTx` (child tx + origin) as JSON.
    ExitChildTxRecord, bark::persist::models::SerdeExitChildTx, "berth.exit_child_tx"
);
json_record!(
    /// `bark::persist::models::PaidInvoice` as JSON.
    PaidInvoiceRecord, bark::persist::models::PaidInvoice, "berth.paid_invoice"
);
json_record!(
    /// `bark::persist::models::SettledLightningReceive` as JSON.
    SettledReceiveRecord, bark::persist::models::SettledLightningReceive,
    "berth.settled_lightning_receive"
);

json_record!(
    /// [`ActionCheckpointRow`] as JSON.
    ActionCheckpointRecord, ActionCheckpointRow, "berth.wallet_action_checkpoint"
);

json_record!(
    /// [`StoredEvent`] as JSON.
    EventRecord, StoredEvent, "berth.event"
);

json_record!(
    /// [`IdempotencyEntry`] as JSON.
    IdempotencyRecord, IdempotencyEntry, "berth.idempotency_key"
);

json_record!(
    /// [`WalletSetup`] as JSON.
    WalletSetupRecord, WalletSetup, "berth.wallet_setup"
);

json_record!(
    /// [`DeviceRecord`] as JSON. (The value type already has the plain name, so the
    /// kind is `...Kind`.)
    DeviceRecordKind, DeviceRecord, "berth.device"
);

json_record!(
    /// [`NwcConnectionRecord`] as JSON.
    NwcConnectionRecordKind, NwcConnectionRecord, "berth.nwc_connection"
);

json_record!(
    /// [`NwcRequestRecord`] as JSON.
    NwcRequestRecordKind, NwcRequestRecord, "berth.nwc_request"
);

json_record!(
    /// [`SpendingRulesRecord`] as JSON.
    SpendingRulesRecordKind, SpendingRulesRecord, "berth.spending_rules"
);

json_record!(
    /// [`WebhookRecord`] as JSON.
    WebhookRecordKind, WebhookRecord, "berth.webhook"
);

json_record!(
    /// [`WebhookDeliveryRecord`] as JSON.
    WebhookDeliveryRecordKind, WebhookDeliveryRecord, "berth.webhook_delivery"
);

json_record!(
    /// [`LabelRecord`] as JSON.
    LabelRecordKind, LabelRecord, "berth.label"
);

json_record!(
    /// [`ApprovalRecord`] as JSON.
    ApprovalRecordKind, ApprovalRecord, "berth.spend_approval"
);

json_record!(
    /// [`SpendReservationRecord`] as JSON.
    SpendReservationRecordKind, SpendReservationRecord, "berth.spend_reservation"
);

/// A round state. bark's `RoundState` has no serde of its own; its persistence model
/// `SerdeRoundState` does, and is what every bark backend stores.
pub enum RoundStateRecord {}
impl Record for RoundStateRecord {
    type Value = bark::round::RoundState;
    const TYPE_NAME: &'static str = "berth.round_state";
    const VERSION: u8 = 1;
    fn encode_payload(value: &Self::Value, out: &mut Vec<u8>) -> Result<(), StoreError> {
        json_encode(
            Self::TYPE_NAME,
            &bark::persist::models::SerdeRoundState::from(value),
            out,
        )
    }
    fn decode_payload(_version: u8, payload: &[u8]) -> Result<Self::Value, StoreError> {
        let serde: bark::persist::models::SerdeRoundState<'_> =
            json_decode(Self::TYPE_NAME, payload)?;
        Ok(serde.into())
    }
}

/// A full VTXO (with its genesis chain), in ark's protocol encoding. Read only when an
/// operation needs the exit chain; listings use [`VtxoRow`].
pub enum FullVtxoRecord {}
impl Record for FullVtxoRecord {
    type Value = Vtxo<Full>;
    const TYPE_NAME: &'static str = "berth.vtxo_full";
    const VERSION: u8 = 1;
    fn encode_payload(value: &Self::Value, out: &mut Vec<u8>) -> Result<(), StoreError> {
        value
            .encode(out)
            .map_err(|e| StoreError::encode(Self::TYPE_NAME, e))
    }
    fn decode_payload(_version: u8, payload: &[u8]) -> Result<Self::Value, StoreError> {
        Vtxo::<Full>::deserialize(payload).map_err(|e| StoreError::decode(Self::TYPE_NAME, e))
    }
}

/// Version 1 payload: `exit_depth u16 BE | exit_tx_weight u64 BE | registered u8 |
/// state_len u16 BE | state (VtxoState JSON) | bare VTXO (ark protocol encoding)`.
pub enum VtxoRowRecord {}
impl Record for VtxoRowRecord {
    type Value = VtxoRow;
    const TYPE_NAME: &'static str = "berth.vtxo";
    const VERSION: u8 = 1;
    fn encode_payload(row: &VtxoRow, out: &mut Vec<u8>) -> Result<(), StoreError> {
        let state =
            serde_json::to_vec(&row.state).map_err(|e| StoreError::encode(Self::TYPE_NAME, e))?;
        let state_len = u16::try_from(state.len())
            .map_err(|_| StoreError::encode(Self::TYPE_NAME, "state too large"))?;
        out.extend_from_slice(&row.exit_depth.to_be_bytes());
        out.extend_from_slice(&row.exit_tx_weight.to_wu().to_be_bytes());
        out.push(u8::from(row.registered));
        out.extend_from_slice(&state_len.to_be_bytes());
        out.extend_from_slice(&state);
        row.bare
            .encode(out)
            .map_err(|e| StoreError::encode(Self::TYPE_NAME, e))
    }
    fn decode_payload(_version: u8, p: &[u8]) -> Result<VtxoRow, StoreError> {
        let short = || StoreError::decode(Self::TYPE_NAME, "truncated record");
        let (depth, p) = p.split_first_chunk::<2>().ok_or_else(short)?;
        let (weight, p) = p.split_first_chunk::<8>().ok_or_else(short)?;
        let (registered, p) = p.split_first().ok_or_else(short)?;
        let (state_len, p) = p.split_first_chunk::<2>().ok_or_else(short)?;
        let state_len = usize::from(u16::from_be_bytes(*state_len));
        let (state, bare) = p.split_at_checked(state_len).ok_or_else(short)?;
        Ok(VtxoRow {
            bare: Vtxo::<Bare>::deserialize(bare)
                .map_err(|e| StoreError::decode(Self::TYPE_NAME, e))?,
            exit_depth: u16::from_be_bytes(*depth),
            exit_tx_weight: Weight::from_wu(u64::from_be_bytes(*weight)),
            registered: match registered {
                0 => false,
                1 => true,
                b => return Err(StoreError::decode(Self::TYPE_NAME, format!("bad flag {b}"))),
            },
            state: json_decode(Self::TYPE_NAME, state)?,
        })
    }
}

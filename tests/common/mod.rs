//! Fixtures shared by the store tests. Each test file uses a subset.
#![allow(dead_code)]

pub mod big_wallet;
pub mod ops;
pub mod vtxos;
pub mod wallet_datadir;

use std::sync::LazyLock;

use ark::VtxoId;
use ark::lightning::{PaymentHash, Preimage};
use bark::actions::WalletActionCheckpoint;
use bark::actions::board::{Board, Progress};
use bark::movement::{MovementId, MovementSubsystem};
use bark::round::RoundState;
use berth::store::{Store, StoreConfig};
use bitcoin::hashes::{Hash, sha256};
use bitcoin::secp256k1::{Keypair, PublicKey, Secp256k1, SecretKey};
use bitcoin::{Amount, Network};
use lightning_invoice::{Bolt11Invoice, Currency, InvoiceBuilder, PaymentSecret};

/// A fresh store in its own temporary directory (kept alive by the returned guard).
pub fn fresh_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) =
        Store::open(&dir.path().join("wallet.redb"), &StoreConfig::default()).expect("open store");
    (dir, store)
}

pub fn properties() -> bark::WalletProperties {
    bark::WalletProperties {
        network: Network::Regtest,
        fingerprint: Default::default(),
        server_pubkey: None,
        server_mailbox_pubkey: None,
    }
}

/// The public key of secret key `[n; 32]` (n ≥ 1).
pub fn pubkey(n: u8) -> PublicKey {
    let sk = SecretKey::from_slice(&[n; 32]).expect("valid secret key");
    Keypair::from_secret_key(&Secp256k1::new(), &sk).public_key()
}

pub fn subsystem() -> MovementSubsystem {
    MovementSubsystem {
        name: "berth-test".into(),
        kind: "unit".into(),
    }
}

/// Now, truncated to milliseconds (a stable value to compare after a round-trip).
pub fn now_ms() -> chrono::DateTime<chrono::Local> {
    let ms = chrono::Local::now().timestamp_millis();
    chrono::DateTime::from_timestamp_millis(ms)
        .expect("valid time")
        .with_timezone(&chrono::Local)
}

pub fn payment_hash(n: u8) -> PaymentHash {
    PaymentHash::from_slice(&[n; 32]).expect("32 bytes")
}

pub fn preimage(n: u8) -> Preimage {
    Preimage::from_slice(&[n; 32]).expect("32 bytes")
}

/// A signed regtest BOLT11 invoice of our own making.
pub static INVOICE: LazyLock<Bolt11Invoice> = LazyLock::new(|| {
    let secp = Secp256k1::new();
    let key = SecretKey::from_slice(&[0x42; 32]).expect("valid secret key");
    InvoiceBuilder::new(Currency::Regtest)
        .description("berth test".into())
        .payment_hash(sha256::Hash::hash(&[7u8; 32]))
        .payment_secret(PaymentSecret([9u8; 32]))
        .duration_since_epoch(std::time::Duration::from_secs(1_700_000_000))
        .min_final_cltv_expiry_delta(144)
        .amount_milli_satoshis(21_000)
        .build_signed(|hash| secp.sign_ecdsa_recoverable(hash, &key))
        .expect("invoice builds")
});

/// A board checkpoint, the simplest wallet action checkpoint bark has.
pub fn board_checkpoint(id: &str, vtxo_id: VtxoId, note: Option<&str>) -> WalletActionCheckpoint {
    WalletActionCheckpoint::Board(Board {
        id: id.to_string(),
        funding_tx: None,
        funding_psbt: None,
        vtxo_id,
        amount: Amount::from_sat(50_000),
        movement_id: MovementId::new(1),
        progress: Progress::Confirming {
            last_park_error: note.map(str::to_string),
        },
    })
}

pub fn round_state(done: bool) -> RoundState {
    // RoundState's fields are crate-private in bark; its persistence model is the
    // public way in, and what every bark backend stores anyway.
    let json = serde_json::json!({
        "done": done,
        "participation": { "inputs": [], "outputs": [] },
        "movement_id": null,
        "flow": "InteractivePending",
        "new_vtxos": [],
        "sent_forfeit_sigs": false,
    });
    serde_json::from_value::<bark::persist::models::SerdeRoundState>(json)
        .expect("round state model parses")
        .into()
}

/// A round state's stored form, for comparisons (`RoundState` has no `PartialEq`).
pub fn round_json(state: &RoundState) -> String {
    serde_json::to_string(&bark::persist::models::SerdeRoundState::from(state))
        .expect("round state serialises")
}

/// A lock guard for `StoredRoundState::lock` (update and remove take a locked state).
#[derive(Debug)]
pub struct TestGuard;
impl bark::lock_manager::LockGuard for TestGuard {}

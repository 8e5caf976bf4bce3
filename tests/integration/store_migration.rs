//! Schema versions on disk: committed databases written by earlier schema versions
//! open, migrate to the current version and read back what they hold; one claiming a
//! higher version is refused with a clear error and left untouched.
//!
//! The fixtures are committed files under `tests/fixtures/`, `store-v<N>.redb` written
//! by the code of schema version N. Before bumping the schema version, write the
//! current version's fixture (old fixtures stay, new ones are added) with:
//! `cargo test --test integration -- --ignored store_migration::tool_write_fixtures`

use crate::common;

use std::path::{Path, PathBuf};

use ark::test_util::VTXO_VECTORS;
use bark::movement::MovementStatus;
use bark::persist::BarkPersister;
use bark::vtxo::{VtxoState, VtxoStateKind};
use berth::events::EventKind;
use berth::store::idempotency::Claim;
use berth::store::schema::{META, SCHEMA_VERSION, meta_keys};
use berth::store::{
    DeviceRecord, EventRetention, InitialScan, Recovery, RecoveryCounts, Store, StoreConfig,
    StoreError,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Open a copy: opening may repair or migrate, and the committed file must not change.
fn copy_of(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    std::fs::copy(fixture(name), &path).expect("copy fixture");
    (dir, path)
}

/// Open a copy of the fixture written at schema version `found`: it migrates to the
/// current version and passes the integrity and invariant checks.
async fn open_migrated(found: u64) -> (tempfile::TempDir, Store) {
    let (dir, path) = copy_of(&format!("store-v{found}.redb"));
    let (db, report) = Store::open_async(&path, &StoreConfig::default())
        .await
        .expect("open");
    assert_eq!(
        (report.schema_found, report.schema_now),
        (found, SCHEMA_VERSION)
    );
    assert!(report.integrity_ok);
    db.verify_invariants().await.expect("invariants");
    (dir, db)
}

/// The bark wallet state every fixture holds (see `tool_write_fixtures`).
async fn assert_wallet_state(db: &Store) {
    assert_eq!(
        db.read_properties().await.expect("props"),
        Some(common::properties())
    );
    let v = &VTXO_VECTORS;
    let spendable = db
        .get_vtxos_by_state(&[VtxoStateKind::Spendable])
        .await
        .expect("vtxos");
    assert_eq!(
        spendable.iter().map(|w| w.vtxo.id()).collect::<Vec<_>>(),
        vec![v.board_vtxo.id()]
    );
    let spent = db
        .get_wallet_vtxo(v.round1_vtxo.id())
        .await
        .expect("read")
        .expect("present");
    assert_eq!(spent.state, VtxoState::Spent);
    let movements = db.get_all_movements().await.expect("movements");
    assert_eq!(movements.len(), 2);
    assert_eq!(db.get_mailbox_checkpoint().await.expect("mailbox"), 7);
    assert_eq!(db.get_last_vtxo_key_index().await.expect("keys"), Some(3));
    assert_eq!(
        db.get_pending_round_state_ids()
            .await
            .expect("rounds")
            .len(),
        1
    );
}

/// The device the tests pair on a migrated file (there were no device tables before
/// version 3); `tool_write_fixtures` pairs it too, from version 3 on.
fn fixture_device() -> DeviceRecord {
    DeviceRecord {
        id: "00112233445566ff".into(),
        name: "fixture phone".into(),
        scopes: 0b11,
        token_hash: [0x3f; 32],
        created_at_us: FIXTURE_AT_US,
        console_session: false,
    }
}

/// The seed recovery `tool_write_fixtures` records (since version 4).
/// The Nostr Wallet Connect connection of the fixtures (since version 6).
fn fixture_connection() -> berth::store::nwc::NwcConnectionRecord {
    berth::store::nwc::NwcConnectionRecord {
        id: "00112233445566aa".into(),
        name: "app".into(),
        service_secret: [7; 32],
        client_pubkey: [8; 32],
        methods: vec!["get_info".into()],
        max_payment_msat: None,
        budget_msat: None,
        budget_renewal: "never".into(),
        budget_used_msat: 0,
        budget_period_start_us: 0,
        spent_total_msat: 0,
        relays: vec!["wss://relay.example/".into()],
        created_at_us: FIXTURE_AT_US,
        expires_at_us: None,
        revoked_at_us: None,
        last_used_at_us: None,
        payments: 0,
    }
}

fn fixture_recovery() -> Recovery {
    Recovery::Finished {
        at_us: FIXTURE_AT_US,
        counts: RecoveryCounts {
            recovered: 1,
            recovered_sat: 10_000,
            unavailable: 1,
            ..RecoveryCounts::default()
        },
    }
}

async fn pair_after_migration(db: &Store) {
    assert_eq!(db.devices().await.expect("devices"), vec![]);
    db.add_device(fixture_device(), 8).await.expect("pair");
    assert_eq!(db.devices().await.expect("devices"), vec![fixture_device()]);
    db.verify_invariants().await.expect("invariants");
}

#[tokio::test]
async fn version_1_fixture_migrates_and_reads_back() {
    let (_dir, db) = open_migrated(1).await;
    assert_wallet_state(&db).await;
    pair_after_migration(&db).await;
}

/// Version 2 added the event log and the idempotency keys; migrating to version 3
/// (the device tables) keeps them.
#[tokio::test]
async fn version_2_fixture_migrates_and_keeps_berth_tables() {
    let (_dir, db) = open_migrated(2).await;
    assert_wallet_state(&db).await;
    let page = db.events_after(0, 10).await.expect("events");
    assert_eq!(
        page.events
            .iter()
            .map(|(id, e)| (*id, e.kind, e.at_us))
            .collect::<Vec<_>>(),
        vec![(1, EventKind::ChannelLagging, FIXTURE_AT_US)]
    );
    let (key, request) = FIXTURE_KEY;
    assert_eq!(
        db.claim_idempotency_key(key, request, FIXTURE_AT_US + 1, 3_600_000_000)
            .await
            .expect("claim"),
        Claim::Replay {
            status: 200,
            body: b"{}".to_vec()
        }
    );
    pair_after_migration(&db).await;
}

/// Version 4 added the wallet's setup record; a wallet from before it (version 3) is
/// known by bark's properties, as created, and its paired device is kept.
#[tokio::test]
async fn version_3_fixture_migrates_and_keeps_its_wallet_and_devices() {
    let (_dir, db) = open_migrated(3).await;
    assert_wallet_state(&db).await;
    let record = db.wallet_record().await.expect("read").expect("a wallet");
    assert_eq!(
        (
            record.fingerprint,
            record.created,
            record.imported,
            record.recovery
        ),
        (common::properties().fingerprint, true, false, None)
    );
    assert_eq!(db.devices().await.expect("devices"), vec![fixture_device()]);
}

/// Version 5 added the VTXO totals the balance reads: counted from the VTXOs at
/// migration (the invariant check in `open_migrated` compares them with the rows), so
/// the balance of a migrated wallet is the one its VTXOs make.
#[tokio::test]
async fn version_4_fixture_migrates_and_counts_its_vtxos_into_the_totals() {
    let (_dir, db) = open_migrated(4).await;
    assert_wallet_state(&db).await;
    assert!(db.wallet_record().await.expect("read").is_some());
    let balance = db.ark_balance(None, None).await.expect("balance");
    // The board VTXO is spendable, the round VTXO spent.
    assert_eq!(balance.spendable, VTXO_VECTORS.board_vtxo.amount());
    assert_eq!(balance.total(), VTXO_VECTORS.board_vtxo.amount());
    assert_eq!(db.chain_view().await.expect("view"), Default::default());
}

/// Version 6 added Nostr Wallet Connect's tables, empty at migration; a version-5
/// wallet keeps its state, its devices and its balance, and takes a connection after.
#[tokio::test]
async fn version_5_fixture_migrates_with_empty_wallet_connections() {
    let (_dir, db) = open_migrated(5).await;
    assert_wallet_state(&db).await;
    assert_eq!(db.devices().await.expect("devices"), vec![fixture_device()]);
    let balance = db.ark_balance(None, None).await.expect("balance");
    assert_eq!(balance.spendable, VTXO_VECTORS.board_vtxo.amount());
    assert!(db.nwc_connections().await.expect("connections").is_empty());
    assert!(db.nwc_unanswered().await.expect("requests").is_empty());
    let connection = fixture_connection();
    db.nwc_add_connection(connection.clone(), 8)
        .await
        .expect("add");
    assert_eq!(
        db.nwc_connections().await.expect("connections"),
        vec![connection]
    );
    db.verify_invariants().await.expect("invariants");
}

/// The spending rules of the fixtures (since version 7).
fn fixture_rules() -> berth::store::spending::SpendingRulesRecord {
    berth::store::spending::SpendingRulesRecord {
        max_payment_sat: Some(1_000),
        budgets: vec![berth::store::spending::BudgetRecord {
            amount_sat: 5_000,
            period: "week".into(),
            used_sat: 0,
            period_start_us: FIXTURE_AT_US,
        }],
        kinds: Some(vec!["ark".into()]),
        over_limit: "refuse".into(),
        max_fee_sat: None,
        own_history: false,
    }
}

/// Version 7 added the devices' spending rules, empty at migration; a version-6 box
/// keeps its wallet, devices and wallet connections, and takes rules after.
#[tokio::test]
async fn version_6_fixture_migrates_and_keeps_its_wallet_connections() {
    let (_dir, db) = open_migrated(6).await;
    assert_wallet_state(&db).await;
    assert_eq!(db.devices().await.expect("devices"), vec![fixture_device()]);
    assert_eq!(
        db.nwc_connections().await.expect("connections"),
        vec![fixture_connection()]
    );
    let device = fixture_device().id;
    assert_eq!(db.spending_rules(&device).await.expect("rules"), None);
    assert!(
        db.spending_reservations()
            .await
            .expect("reservations")
            .is_empty()
    );
    assert!(
        db.set_spending_rules(&device, |_| Some(fixture_rules()))
            .await
            .expect("set")
    );
    assert_eq!(
        db.spending_rules(&device).await.expect("rules"),
        Some(fixture_rules())
    );
    db.verify_invariants().await.expect("invariants");
}

/// Version 8 added the approvals and labels tables, empty at migration; a version-7 box keeps its
/// devices' rules (written before `max_fee_sat` existed: none) and holds approvals after.
#[tokio::test]
async fn version_7_fixture_migrates_and_keeps_its_spending_rules() {
    let (_dir, db) = open_migrated(7).await;
    assert_wallet_state(&db).await;
    let device = fixture_device().id;
    assert_eq!(
        db.spending_rules(&device).await.expect("rules"),
        Some(fixture_rules())
    );
    assert!(db.approvals().await.expect("approvals").is_empty());
    assert!(db.labels().await.expect("labels").is_empty());
    let approval = berth::store::approvals::ApprovalRecord {
        device_id: device,
        kind: "ark".into(),
        amount_sat: Some(2_000),
        max_fee_sat: None,
        destination: None,
        reason: "over".into(),
        created_at_us: FIXTURE_AT_US,
        expires_at_us: FIXTURE_AT_US + 1,
        state: "pending".into(),
        decided_at_us: None,
        started: false,
        request: berth::store::approvals::HeldRequestRecord {
            method: "POST".into(),
            path: "/api/v1/wallet/send".into(),
            body: "{}".into(),
            idempotency_key: None,
            nwc_key: None,
        },
        result: None,
    };
    assert_eq!(
        db.approval_hold([7; 16], approval.clone(), 5, 50)
            .await
            .expect("hold"),
        berth::store::approvals::Held::Held
    );
    assert_eq!(
        db.approvals().await.expect("approvals"),
        vec![([7; 16], approval)]
    );
    db.verify_invariants().await.expect("invariants");
}

/// Version 9 added the webhook tables, empty at migration; a version-8 box keeps its
/// rules and registers webhooks after.
#[tokio::test]
async fn version_8_fixture_migrates_and_takes_webhooks() {
    use berth::store::webhooks::{Added, WebhookRecord};
    let (_dir, db) = open_migrated(8).await;
    assert_wallet_state(&db).await;
    assert_eq!(
        db.spending_rules(&fixture_device().id)
            .await
            .expect("rules"),
        Some(fixture_rules())
    );
    assert!(db.webhooks().await.expect("webhooks").is_empty());
    let webhook = WebhookRecord {
        url: "http://192.168.1.20:8123/api/webhook/berth".into(),
        events: vec!["*".into()],
        description: None,
        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
        previous_secret: None,
        created_at_us: FIXTURE_AT_US,
        disabled: None,
        cursor: 1,
        failed_attempts: 0,
        failing_since_us: None,
        next_attempt_us: 0,
        redeliver: Vec::new(),
        push: None,
    };
    assert_eq!(
        db.add_webhook("0123456789abcdef".into(), webhook.clone(), 16)
            .await
            .expect("add"),
        Added::Added
    );
    assert_eq!(
        db.webhooks().await.expect("webhooks"),
        vec![("0123456789abcdef".to_string(), webhook)]
    );
    db.verify_invariants().await.expect("invariants");
}

#[tokio::test]
async fn newer_version_fixture_is_refused_and_left_alone() {
    let (_dir, path) = copy_of("store-v999.redb");
    match Store::open(&path, &StoreConfig::default()) {
        Err(StoreError::NewerSchema {
            found: 999,
            supported,
        }) => assert_eq!(supported, SCHEMA_VERSION),
        other => panic!("expected NewerSchema, got {:?}", other.map(|(_, r)| r)),
    }
    let message = StoreError::NewerSchema {
        found: 999,
        supported: SCHEMA_VERSION,
    }
    .to_string();
    assert!(
        message.contains("newer") && message.contains("999"),
        "{message}"
    );
    // The refusal must not have migrated anything: the version is still 999.
    let db = redb::Database::open(&path).expect("raw open");
    let tx = redb::ReadableDatabase::begin_read(&db).expect("read tx");
    let meta = tx.open_table(META).expect("meta");
    let version = redb::ReadableTable::get(&meta, meta_keys::SCHEMA_VERSION).expect("get");
    assert_eq!(version.map(|v| v.value()), Some(999));
}

/// When the fixtures' event and idempotency key were written (µs since the epoch).
const FIXTURE_AT_US: u64 = 1_700_000_000_000_000;
/// The fixtures' idempotency key and request hashes.
const FIXTURE_KEY: ([u8; 32], [u8; 32]) = ([0x1d; 32], [0x2e; 32]);

/// Writes `store-v<SCHEMA_VERSION>.redb` (the current version's fixture; older ones
/// stay as they are) and `store-v999.redb`. Ignored: run by hand before bumping the
/// schema version, so the version being left has a fixture written by its own code.
#[tokio::test]
#[ignore = "tool: writes tests/fixtures, run by hand when the schema version changes"]
async fn tool_write_fixtures() {
    let v = &VTXO_VECTORS;
    let path = fixture(&format!("store-v{SCHEMA_VERSION}.redb"));
    let _ = std::fs::remove_file(&path);
    {
        let (db, _) = Store::open_async(&path, &StoreConfig::default())
            .await
            .expect("create");
        // The setup record (since version 4), around bark's own create.
        db.begin_wallet_creation(
            common::properties().network,
            common::properties().fingerprint,
            true,
            InitialScan::FromTip,
        )
        .await
        .expect("begin");
        db.init_wallet(&common::properties()).await.expect("init");
        db.finish_wallet_creation(fixture_recovery())
            .await
            .expect("finish");
        db.clear_initial_scan().await.expect("scan done");
        db.store_vtxos(&[
            (&v.board_vtxo, &VtxoState::Spendable),
            (&v.round1_vtxo, &VtxoState::Spendable),
        ])
        .await
        .expect("vtxos");
        db.update_vtxo_state_checked(v.round1_vtxo.id(), VtxoState::Spent, VtxoStateKind::ALL)
            .await
            .expect("spend");
        for _ in 0..2 {
            db.create_new_movement(
                MovementStatus::Successful,
                &common::subsystem(),
                common::now_ms(),
                None,
            )
            .await
            .expect("movement");
        }
        db.store_mailbox_checkpoint(7).await.expect("mailbox");
        db.store_vtxo_keys(&[(0, common::pubkey(1)), (3, common::pubkey(2))])
            .await
            .expect("keys");
        db.store_round_state(&common::round_state(false))
            .await
            .expect("round");
        // Berth's own tables (since version 2).
        db.append_event(
            EventKind::ChannelLagging,
            None,
            FIXTURE_AT_US,
            EventRetention::default(),
        )
        .await
        .expect("event");
        let (key, request) = FIXTURE_KEY;
        db.claim_idempotency_key(key, request, FIXTURE_AT_US, u64::MAX)
            .await
            .expect("claim");
        db.finish_idempotency_key(key, Some((200, b"{}".to_vec())))
            .await
            .expect("finish");
        // Paired devices (since version 3).
        db.add_device(fixture_device(), 8).await.expect("device");
        // A wallet connection (since version 6).
        db.nwc_add_connection(fixture_connection(), 8)
            .await
            .expect("connection");
        // The device's spending rules (since version 7).
        assert!(
            db.set_spending_rules(&fixture_device().id, |_| Some(fixture_rules()))
                .await
                .expect("rules")
        );
    }
    let newer = fixture("store-v999.redb");
    std::fs::copy(&path, &newer).expect("copy");
    let db = redb::Database::create(&newer).expect("raw open");
    let tx = db.begin_write().expect("write tx");
    tx.open_table(META)
        .expect("meta")
        .insert(meta_keys::SCHEMA_VERSION, 999u64)
        .expect("bump");
    tx.commit().expect("commit");
}

//! Schema versions on disk: a committed database written at the current schema version
//! opens and reads back what it holds; one claiming a higher version is refused with a
//! clear error and left untouched.
//!
//! The fixtures are committed files under `tests/fixtures/`. Regenerate them (only when
//! the schema version changes — old fixtures stay, new ones are added) with:
//! `cargo test --test store_migration -- --ignored write_fixtures`

mod common;

use std::path::{Path, PathBuf};

use ark::test_util::VTXO_VECTORS;
use bark::movement::MovementStatus;
use bark::persist::BarkPersister;
use bark::vtxo::{VtxoState, VtxoStateKind};
use berth::store::schema::{META, SCHEMA_VERSION, meta_keys};
use berth::store::{Store, StoreConfig, StoreError};

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

#[tokio::test]
async fn current_version_fixture_opens_and_reads_back() {
    let (_dir, path) = copy_of("store-v1.redb");
    let (db, report) = Store::open_async(&path, &StoreConfig::default())
        .await
        .expect("open v1");
    assert_eq!(
        (report.schema_found, report.schema_now),
        (1, SCHEMA_VERSION)
    );
    assert!(report.integrity_ok);
    db.verify_invariants().await.expect("invariants");

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

/// Writes the fixtures. Ignored: run by hand when adding a schema version.
#[tokio::test]
#[ignore = "writes tests/fixtures; run by hand when the schema version changes"]
async fn write_fixtures() {
    let v = &VTXO_VECTORS;
    let path = fixture("store-v1.redb");
    let _ = std::fs::remove_file(&path);
    {
        let (db, _) = Store::open_async(&path, &StoreConfig::default())
            .await
            .expect("create");
        db.init_wallet(&common::properties()).await.expect("init");
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

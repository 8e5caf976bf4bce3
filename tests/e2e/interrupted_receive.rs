//! Scenario 19: an incoming arkoor payment cut off between its movement's two writes.
//! bark 0.8 stores the package's VTXOs, creates a pending `bark.arkoor`/`receive`
//! movement, and only then fills it in as successful and advances the mailbox
//! checkpoint; a SIGKILL between the last two left the money spendable but the payment
//! pending and empty for good (seen in `scripts/chaos`): the server redelivers the
//! package and bark skips VTXOs it holds. berthd finishes such a movement with its
//! package when it loads the wallet (`engine::arkoor_receives`, docs/reliability.md).
//!
//! The kill is not left to chance: the receiver is stopped cleanly, and its store is
//! put back to what such a kill leaves, the movement as bark creates it and the
//! mailbox checkpoint before the package.

use std::path::Path;
use std::time::Instant;

use bark::movement::{MovementId, MovementStatus, MovementSubsystem};
use bark::persist::BarkPersister;
use berth::store::schema::{META, meta_keys};
use berth::store::{Store, StoreConfig};
use bitcoin::SignedAmount;
use serde_json::{Value, json};

use crate::stack::{Berthd, Stack, wait_for};

fn store_path(datadir: &Path) -> std::path::PathBuf {
    datadir.join("berth.redb")
}

/// Put `datadir`'s store (berthd stopped) back to what a kill between bark's creation
/// of receive movement `id` and its update leaves: the movement pending and empty, and
/// the mailbox checkpoint not advanced past the package (0: it was the wallet's first
/// mailbox message). Returns the VTXOs the store then holds that no movement produced.
fn undo_receive_update(datadir: &Path, id: u32) -> Vec<String> {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let unproduced = rt.block_on(async {
        let (store, _) = Store::open(&store_path(datadir), &StoreConfig::default())
            .expect("open berthd's store");
        let mut movement = store
            .get_movement_by_id(MovementId(id))
            .await
            .expect("the receive");
        // What MovementManager::new_finished_movement's first write holds.
        movement.status = MovementStatus::Pending;
        movement.output_vtxos.clear();
        movement.received_on.clear();
        movement.intended_balance = SignedAmount::ZERO;
        movement.effective_balance = SignedAmount::ZERO;
        movement.time.completed_at = None;
        store
            .update_movement(&movement)
            .await
            .expect("write it back");
        store
            .vtxos_no_movement_produced()
            .await
            .expect("list vtxos")
            .iter()
            .map(ToString::to_string)
            .collect()
    });
    // bark's persister refuses to move the checkpoint back, as it should; the kill
    // never let it move forward.
    let db = redb::Database::open(store_path(datadir)).expect("open the file");
    let tx = db.begin_write().expect("write transaction");
    tx.open_table(META)
        .expect("meta")
        .insert(meta_keys::MAILBOX_CHECKPOINT, 0)
        .expect("checkpoint");
    tx.commit().expect("commit");
    unproduced
}

/// A pending, empty `bark.arkoor`/`receive` movement with no package behind it (what a
/// kill right after bark created it would leave if its VTXOs were not stored first).
fn write_empty_receive(datadir: &Path) -> u32 {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let (store, _) = Store::open(&store_path(datadir), &StoreConfig::default())
            .expect("open berthd's store");
        store
            .create_new_movement(
                MovementStatus::Pending,
                &MovementSubsystem {
                    name: "bark.arkoor".into(),
                    kind: "receive".into(),
                },
                chrono::Local::now(),
                None,
            )
            .await
            .expect("create the movement")
            .0
    })
}

fn receives(berthd: &Berthd) -> Vec<Value> {
    berthd
        .get_ok("/api/v1/history")
        .as_array()
        .expect("history")
        .iter()
        .filter(|m| m["subsystem"]["name"] == "bark.arkoor" && m["subsystem"]["kind"] == "receive")
        .cloned()
        .collect()
}

fn wait_loaded(berthd: &Berthd) {
    wait_for("the wallet to load", 60, || {
        (berthd.get_ok("/api/v1/wallet")["loaded"] == true).then_some(())
    });
}

#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn a_receive_cut_off_before_its_movement_is_filled_in_is_finished_at_load() {
    let stack = Stack::start("interrupted_receive");
    let started = Instant::now();
    let alice = stack.berthd("alice");
    let mut bob = stack.berthd("bob");
    crate::board_and_confirm(&stack, &alice, 300_000);
    let address = bob.post_ok("/api/v1/wallet/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_string();
    alice.post_ok(
        "/api/v1/wallet/send",
        json!({"destination": address, "amount_sat": 120_000}),
    );
    wait_for("bob to receive the payment", 60, || {
        bob.post_ok("/api/v1/wallet/sync", json!({}));
        let spendable = bob.get_ok("/api/v1/wallet/balance")["spendable_sat"].as_u64()?;
        (spendable == 120_000).then_some(())
    });
    let before = receives(&bob);
    assert_eq!(before.len(), 1, "{before:?}");
    let id = u32::try_from(before[0]["id"].as_u64().expect("id")).expect("u32");
    let vtxos = before[0]["output_vtxos"].clone();
    assert_eq!(vtxos.as_array().map(Vec::len), Some(1), "{before:?}");

    bob.stop();
    let unproduced = undo_receive_update(&bob.datadir, id);
    assert_eq!(
        json!(unproduced),
        vtxos,
        "the store now holds the payment's VTXO with no movement producing it"
    );
    bob.restart();
    wait_loaded(&bob);

    // Without the repair the movement would stay pending and empty for good.
    let after = receives(&bob);
    assert_eq!(after.len(), 1, "one receive, the same: {after:?}");
    let receive = &after[0];
    assert_eq!(receive["id"], id, "{receive}");
    assert_eq!(receive["status"], "successful", "{receive}");
    assert_eq!(receive["effective_balance_sat"], 120_000, "{receive}");
    assert_eq!(receive["intended_balance_sat"], 120_000, "{receive}");
    assert_eq!(receive["output_vtxos"], vtxos, "{receive}");
    assert_eq!(
        receive["received_on"][0]["destination"]["value"],
        address.as_str(),
        "{receive}"
    );
    let (_, updates) =
        bob.get("/api/v1/notifications/wait?after=0&timeout=0&types=movement-updated");
    assert!(
        updates["notifications"].as_array().is_some_and(|n| n
            .iter()
            .any(|n| n["movement"]["id"] == id && n["movement"]["status"] == "successful")),
        "the repair is an event, as bark's own update would be: {updates}"
    );

    // The server delivers the package again from checkpoint 0: bark skips it, and
    // nothing is counted twice.
    bob.post_ok("/api/v1/wallet/sync", json!({}));
    let synced = receives(&bob);
    assert_eq!(synced.len(), 1, "{synced:?}");
    assert_eq!(
        bob.get_ok("/api/v1/wallet/balance")["spendable_sat"],
        120_000
    );

    // An empty receive with nothing behind it is failed, not left pending.
    bob.stop();
    let empty = write_empty_receive(&bob.datadir);
    bob.restart();
    wait_loaded(&bob);
    let history = bob.get_ok("/api/v1/history");
    let failed = history
        .as_array()
        .expect("history")
        .iter()
        .find(|m| m["id"] == empty)
        .unwrap_or_else(|| panic!("movement {empty}: {history}"));
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["effective_balance_sat"], 0, "{failed}");
    assert!(
        !history.to_string().contains(r#""status":"pending""#),
        "nothing left pending: {history}"
    );
    assert_eq!(
        bob.get_ok("/api/v1/wallet/balance")["spendable_sat"],
        120_000
    );

    println!(
        "e2e interrupted receive: stack up in {:.1} s, scenario {:.1} s; movement {id} \
         finished at load, movement {empty} failed",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

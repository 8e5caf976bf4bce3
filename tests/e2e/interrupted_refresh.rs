//! Scenario 18: a refresh cut off between its movement and its round state. bark 0.8's
//! `join_next_round` writes the movement (pending, `bark.round`), then its inputs, then
//! the round state that names it, each in its own transaction; a SIGKILL between the
//! second and the third left a movement pending for good (seen in `scripts/chaos`):
//! bark drives only stored round states. berthd fails such a movement when it loads
//! the wallet (`engine::rounds`, docs/reliability.md).
//!
//! The kill is not left to chance: berthd is stopped cleanly and the movement is
//! written into its store with the same two `BarkPersister` calls bark makes, which
//! is exactly what the database holds after such a kill.

use std::time::Instant;

use bark::movement::update::MovementUpdate;
use bark::movement::{MovementStatus, MovementSubsystem};
use bark::persist::BarkPersister;
use berth::store::{Store, StoreConfig};
use bitcoin::{Amount, SignedAmount};
use serde_json::json;

use crate::stack::Stack;

/// Write into `datadir`'s store (berthd stopped) what a kill after bark's second write
/// of a refresh of `vtxo` leaves: a pending `bark.round`/`refresh` movement with the
/// VTXO as its input, and no round state. Its id.
fn write_orphaned_refresh(datadir: &std::path::Path, vtxo: &str) -> u32 {
    let vtxo: ark::VtxoId = vtxo.parse().expect("a VTXO id");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let (store, _) = Store::open(&datadir.join("berth.redb"), &StoreConfig::default())
            .expect("open berthd's store");
        let now = chrono::Local::now();
        // MovementManager::new_movement_with_update: create, then apply the
        // participation's update (RoundParticipation::to_movement_update; no refresh
        // fee on this server).
        let id = store
            .create_new_movement(
                MovementStatus::Pending,
                &MovementSubsystem {
                    name: "bark.round".into(),
                    kind: "refresh".into(),
                },
                now,
                None,
            )
            .await
            .expect("create the movement");
        let mut movement = store.get_movement_by_id(id).await.expect("read it");
        MovementUpdate::new()
            .consumed_vtxos([vtxo])
            .intended_balance(SignedAmount::ZERO)
            .effective_balance(SignedAmount::ZERO)
            .fee(Amount::ZERO)
            .apply_to(&mut movement, now);
        store.update_movement(&movement).await.expect("update it");
        assert!(
            store
                .get_pending_round_state_ids()
                .await
                .expect("round states")
                .is_empty(),
            "no round state names it"
        );
        id.0
    })
}

#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn a_refresh_cut_off_before_its_round_state_is_failed_at_load() {
    let stack = Stack::start("interrupted_refresh");
    let started = Instant::now();
    // The watchdog and the maintenance refresh stay out of the way: only the API
    // refreshes here.
    let mut alice = stack.berthd_with("alice", "[watchdog]\nenabled = false\n");
    crate::board_and_confirm(&stack, &alice, 300_000);
    let vtxo = crate::first_vtxo_id(&alice);

    alice.stop();
    let orphan = write_orphaned_refresh(&alice.datadir, &vtxo);
    // As a barkd client: the next call at once; one that needs the wallet waits for
    // the load under way, repairs included.
    alice.restart();

    // Without the repair it would stay pending for good (bark never looks at it).
    let failed = alice.movement(orphan);
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["subsystem"]["name"], "bark.round", "{failed}");
    assert_eq!(failed["input_vtxos"], json!([vtxo]), "{failed}");
    let (_, updates) =
        alice.get("/api/v1/notifications/wait?after=0&timeout=0&types=movement-updated");
    assert!(
        updates["notifications"].as_array().is_some_and(|n| n
            .iter()
            .any(|n| n["movement"]["id"] == orphan && n["movement"]["status"] == "failed")),
        "the failure is an event, as bark's own would be: {updates}"
    );
    assert_eq!(alice.get_ok("/api/v1/wallet/rounds"), json!([]));
    let vtxos = alice.get_ok("/api/v1/wallet/vtxos");
    assert_eq!(vtxos[0]["id"], vtxo.as_str(), "{vtxos}");
    assert_eq!(vtxos[0]["state"]["type"], "spendable", "{vtxos}");

    // And the VTXO refreshes as any other.
    let round = alice.post_ok("/api/v1/wallet/refresh/vtxos", json!({"vtxos": [vtxo]}));
    assert_eq!(round["participation"]["inputs"], json!([vtxo]), "{round}");
    stack.finish_round(&alice);
    let vtxos = alice.get_ok("/api/v1/wallet/vtxos");
    assert_eq!(vtxos.as_array().map(Vec::len), Some(1), "{vtxos}");
    assert_ne!(vtxos[0]["id"], vtxo.as_str(), "a new VTXO: {vtxos}");
    assert_eq!(vtxos[0]["state"]["type"], "spendable", "{vtxos}");
    crate::assert_failed_then_done_again(&alice, "bark.round", orphan);

    println!(
        "e2e interrupted refresh: stack up in {:.1} s, scenario {:.1} s; movement {orphan} \
         failed at load",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

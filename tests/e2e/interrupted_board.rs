//! Scenario 22: a board cut off between its movement and its wallet action. bark 0.8's
//! `board` writes the movement (pending, `bark.board`), then the wallet action that
//! stores the VTXO, broadcasts the funding transaction and registers the board, each in
//! its own transaction; a power cut between the two (seen in `image/power-cut-test`)
//! left a board pending for good, its coins never spent: bark drives only stored
//! actions. berthd fails such a movement when it loads the wallet (`engine::boards`,
//! docs/reliability.md).
//!
//! The cut is not left to chance: berthd is stopped cleanly and the movement is written
//! into its store as bark's `MovementManager::new_movement_with_update` writes it, which
//! is exactly what the database holds after such a cut.

use std::time::Instant;

use bark::movement::update::MovementUpdate;
use bark::movement::{MovementStatus, MovementSubsystem};
use bark::persist::BarkPersister;
use berth::store::{Store, StoreConfig};
use bitcoin::hashes::Hash as _;
use bitcoin::{Amount, OutPoint, SignedAmount, Txid};
use serde_json::json;

use crate::stack::Stack;

const BOARDED: u64 = 100_000;

/// Write into `datadir`'s store (berthd stopped) what a cut after bark's first write of
/// a board of `amount` leaves: a pending `bark.board`/`board` movement with its amounts,
/// its VTXO and its funding outpoint (of a transaction that was only ever signed), and
/// no wallet action. Its id.
fn write_orphaned_board(datadir: &std::path::Path, amount: u64) -> u32 {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let (store, _) = Store::open(&datadir.join("berth.redb"), &StoreConfig::default())
            .expect("open berthd's store");
        let now = chrono::Local::now();
        let funding = OutPoint::new(Txid::from_byte_array([0x5a; 32]), 0);
        let id = store
            .create_new_movement(
                MovementStatus::Pending,
                &MovementSubsystem {
                    name: "bark.board".into(),
                    kind: "board".into(),
                },
                now,
                None,
            )
            .await
            .expect("create the movement");
        let mut movement = store.get_movement_by_id(id).await.expect("read it");
        let amount = SignedAmount::from_sat(amount as i64);
        MovementUpdate::new()
            .intended_balance(amount)
            .effective_balance(amount)
            .fee(Amount::ZERO)
            .produced_vtxo(ark::VtxoId::from(funding))
            .metadata([
                ("chain_anchor".into(), json!(funding.to_string())),
                ("onchain_fee_sat".into(), json!(250)),
            ])
            .apply_to(&mut movement, now);
        store.update_movement(&movement).await.expect("update it");
        assert!(
            store
                .get_all_wallet_action_checkpoints()
                .await
                .expect("wallet actions")
                .is_empty(),
            "no wallet action names it"
        );
        id.0
    })
}

#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn a_board_cut_off_before_its_action_is_failed_at_load() {
    let stack = Stack::start("interrupted_board");
    let started = Instant::now();
    // Only the API moves money here.
    let mut alice = stack.berthd_with("alice", "[watchdog]\nenabled = false\n");
    crate::fund_onchain(&stack, &alice, 400_000);
    let onchain = alice.get_ok("/api/v1/onchain/balance");

    alice.stop();
    let orphan = write_orphaned_board(&alice.datadir, BOARDED);
    // As a barkd client: the next call at once; one that needs the wallet waits for
    // the load under way, repairs included.
    alice.restart();

    // Without the repair it would stay pending for good (bark never looks at it).
    let failed = alice.movement(orphan);
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["subsystem"]["name"], "bark.board", "{failed}");
    assert_eq!(
        failed["effective_balance_sat"], 0,
        "nothing was received: {failed}"
    );
    let (_, updates) =
        alice.get("/api/v1/notifications/wait?after=0&timeout=0&types=movement-updated");
    assert!(
        updates["notifications"].as_array().is_some_and(|n| n
            .iter()
            .any(|n| n["movement"]["id"] == orphan && n["movement"]["status"] == "failed")),
        "the failure is an event, as bark's own would be: {updates}"
    );
    assert_eq!(
        alice.get_ok("/api/v1/boards/pending"),
        json!([]),
        "no board pending"
    );
    let balance = alice.get_ok("/api/v1/wallet/balance");
    assert_eq!(balance["pending_board_sat"], 0, "{balance}");
    assert_eq!(balance["spendable_sat"], 0, "{balance}");
    alice.post_ok("/api/v1/onchain/sync", json!({}));
    assert_eq!(
        alice.get_ok("/api/v1/onchain/balance"),
        onchain,
        "the coins it would have spent are still the on-chain wallet's"
    );

    // And the same board runs as any other.
    crate::board_and_confirm(&stack, &alice, BOARDED);
    crate::assert_failed_then_done_again(&alice, "bark.board", orphan);
    println!(
        "e2e interrupted board: stack up in {:.1} s, scenario {:.1} s; movement {orphan} \
         failed at load",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

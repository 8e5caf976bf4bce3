//! A big wallet for the benches: 10,000 movements and 2,000 VTXOs, put in a wallet
//! database through bark's persister trait: Berth's store (benches/api.rs,
//! benches/backup.rs) or barkd's SQLite file (benches/barkd-fill, so barkd serves the
//! same wallet side by side). Needs a `vtxos` module beside it (tests/common/vtxos.rs).

use std::time::Instant;

use bark::movement::{
    Movement, MovementDestination, MovementStatus, MovementSubsystem, PaymentMethod,
};
use bark::persist::BarkPersister;
use bark::vtxo::VtxoState;
use bitcoin::Amount;

use super::vtxos;

pub const MOVEMENTS: usize = 10_000;
pub const VTXOS: usize = 2_000;

pub async fn fill(store: &impl BarkPersister) {
    let subsystem = MovementSubsystem {
        name: "bark.arkoor".into(),
        kind: "receive".into(),
    };
    let started = Instant::now();
    for i in 0..MOVEMENTS {
        let created = chrono::Local::now();
        let id = store
            .create_new_movement(MovementStatus::Pending, &subsystem, created, None)
            .await
            .expect("movement");
        let mut movement = Movement::new(id, MovementStatus::Successful, &subsystem, created);
        movement.time.updated_at = created;
        movement.time.completed_at = Some(created);
        movement.received_on.push(MovementDestination::new(
            PaymentMethod::Custom(format!("bench-{i}")),
            Amount::from_sat(21_000 + i as u64),
        ));
        movement.effective_balance = bitcoin::SignedAmount::from_sat(21_000 + i as i64);
        movement.intended_balance = movement.effective_balance;
        store.update_movement(&movement).await.expect("update");
    }
    println!(
        "stored {MOVEMENTS} movements in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    fill_vtxos(store, VTXOS).await;
}

/// `count` spendable VTXOs, stored 100 at a time.
pub async fn fill_vtxos(store: &impl BarkPersister, count: usize) {
    let started = Instant::now();
    let pool = vtxos::vtxo_pool(count);
    let spendable = VtxoState::Spendable;
    for chunk in pool.chunks(100) {
        let batch: Vec<_> = chunk.iter().map(|v| (v, &spendable)).collect();
        store.store_vtxos(&batch).await.expect("vtxos");
    }
    println!(
        "built and stored {count} VTXOs in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// `count` finished exits (claimed, with the phases before it), stored one at a time
/// as bark does. Their VTXOs are not stored: a finished exit is listed from its own
/// entry, and bark leaves finished exits alone when the wallet opens.
pub async fn fill_exits(store: &impl BarkPersister, count: usize) {
    use bark::exit::{
        ExitAwaitingDeltaState, ExitClaimableState, ExitClaimedState, ExitStartState, ExitState,
    };
    use bark::persist::models::StoredExit;
    use bitcoin::hashes::Hash;
    use bitcoin_ext::{BlockHeight, BlockRef};

    let started = Instant::now();
    for i in 0..count {
        let height = |h: u32| BlockHeight::new(h);
        let txid = bitcoin::Txid::from_byte_array([(i % 251) as u8 + 1; 32]);
        let block = BlockRef {
            height: height(1_200),
            hash: bitcoin::BlockHash::from_byte_array([7; 32]),
        };
        let history: Vec<ExitState> = vec![
            ExitStartState {
                tip_height: height(1_000),
            }
            .into(),
            ExitAwaitingDeltaState {
                tip_height: height(1_010),
                confirmed_block: block,
                claimable_height: height(1_154),
            }
            .into(),
            ExitClaimableState {
                tip_height: height(1_154),
                claimable_since: block,
                last_scanned_block: None,
            }
            .into(),
        ];
        let exit = StoredExit {
            vtxo_id: bitcoin::OutPoint::new(txid, i as u32).into(),
            state: ExitClaimedState {
                tip_height: height(1_200),
                txid,
                block,
            }
            .into(),
            history,
            movement_id: None,
        };
        store.store_exit_vtxo_entry(&exit).await.expect("exit");
    }
    println!(
        "stored {count} exits in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

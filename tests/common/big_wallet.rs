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

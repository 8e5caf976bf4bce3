//! API speed on a big wallet: 10,000 movements and 2,000 VTXOs, put in the store
//! through the store API, then `berthd` (release) serving them to `oha`, a load tool
//! from crates.io (`cargo install oha`).
//!
//! Figures printed, per endpoint (`GET /api/v1/wallet/balance`, `/wallet/vtxos`,
//! `/history?limit=100`): requests per second and latency p50/p99 from one connection
//! (`BERTH_BENCH_REQUESTS / 10` requests) and from 16 (`BERTH_BENCH_REQUESTS`, default
//! 100,000), and berthd's VmRSS before and after each run (memory must stay flat).
//!
//! The wallet must load, so this needs `BITCOIND_EXEC` (its chain source; the Ark
//! server is a dead port, which none of these endpoints needs), and `OHA` (or `oha` on
//! the PATH). Run: `scripts/bench-api`.

#[path = "../tests/harness/mod.rs"]
mod harness;
#[path = "../tests/common/vtxos.rs"]
mod vtxos;

use std::time::Instant;

use bark::movement::{
    Movement, MovementDestination, MovementStatus, MovementSubsystem, PaymentMethod,
};
use bark::persist::BarkPersister;
use bark::vtxo::VtxoState;
use berth::store::Store;
use bitcoin::Amount;

const MOVEMENTS: usize = 10_000;
const VTXOS: usize = 2_000;

async fn fill(store: &Store) {
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
    let started = Instant::now();
    let pool = vtxos::vtxo_pool(VTXOS);
    let spendable = VtxoState::Spendable;
    for chunk in pool.chunks(100) {
        let batch: Vec<_> = chunk.iter().map(|v| (v, &spendable)).collect();
        store.store_vtxos(&batch).await.expect("vtxos");
    }
    println!(
        "built and stored {VTXOS} VTXOs in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let bitcoind = harness::Bitcoind::start("bench-api");
    let oha = std::env::var("OHA").unwrap_or_else(|_| "oha".into());
    let requests: u64 = std::env::var("BERTH_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let (_tmp, datadir) = harness::datadir_with_wallet(&bitcoind);
    harness::with_store(&datadir, async |store| fill(store).await);
    let daemon = harness::Daemon::start(&datadir, &["-q"]);
    harness::wait_loaded(&daemon, &datadir);
    let pid = daemon.child.id();
    let bearer = format!("Authorization: Bearer {}", harness::token(&datadir));
    std::thread::sleep(std::time::Duration::from_secs(1));
    println!(
        "berthd VmRSS with the wallet loaded: {} kB",
        harness::rss_kb(pid)
    );
    for path in [
        "/api/v1/wallet/balance",
        "/api/v1/wallet/vtxos",
        "/api/v1/history?limit=100",
    ] {
        // One client, for latency; sixteen, for throughput (and queueing).
        for (connections, n) in [(1, requests / 10), (16, requests)] {
            let before = harness::rss_kb(pid);
            let url = format!("http://127.0.0.1:{}{path}", daemon.port);
            let measured = harness::oha(
                &oha,
                &[
                    "-c",
                    &connections.to_string(),
                    "-n",
                    &n.max(1).to_string(),
                    "-H",
                    &bearer,
                    &url,
                ],
            );
            println!(
                "{path}, {connections} connection(s), {n} requests: {measured}; VmRSS {before} kB -> {} kB",
                harness::rss_kb(pid),
            );
        }
    }
}

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

#[path = "../tests/common/big_wallet.rs"]
mod big_wallet;
#[path = "../tests/harness/mod.rs"]
mod harness;
#[path = "../tests/common/vtxos.rs"]
mod vtxos;

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
    harness::with_store(&datadir, async |store| big_wallet::fill(store).await);
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

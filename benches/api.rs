//! API speed on a big wallet: 10,000 movements and 2,000 VTXOs, put in the store
//! through the store API, then `berthd` (release) serving them to `oha`, a load tool
//! from crates.io (`cargo install oha`); with `BARKD_EXEC`, barkd 0.8.0 serving the same
//! wallet (filled into its SQLite database by `benches/barkd-fill`), in the same run.
//!
//! Figures printed, per endpoint (`GET /api/v1/wallet/balance`, `/wallet/vtxos`,
//! `/history?limit=100`): requests per second and latency p50/p99 from one connection
//! and from 16, each for `BERTH_BENCH_SECS` seconds (default 10), and the daemon's
//! VmRSS before and after each run (memory must stay flat);
//! then the balance of an empty wallet, and a table of berthd beside barkd, with each
//! daemon's start to `/ping` on its big wallet (median of five starts). Last, the VTXO
//! list of wallets of `BERTH_BENCH_VTXOS` VTXOs (default `100,2000,10000`; none:
//! `BERTH_BENCH_VTXOS=`), and the exits' list of wallets of as many finished exits, from
//! 16 connections, with the cost per item: it must stay flat (`BERTH_BENCH_ONLY=lists`:
//! only these). barkd has no
//! history pages: its `limit` is ignored and it sends the whole history.
//! `BERTH_BENCH_BERTHD` measures another build of berthd (the shipped one:
//! `target/dist/shipped/berthd`, which `scripts/footprint` makes).
//!
//! The wallet must load, so this needs `BITCOIND_EXEC` (its chain source; the Ark
//! server is a dead port, which none of these endpoints needs), and `OHA` (or `oha` on
//! the PATH); for barkd, `BARKD_EXEC` and `BARKD_FILL` (scripts/bench-api builds it).
//! Run: `scripts/bench-api`.

#[path = "../tests/common/big_wallet.rs"]
mod big_wallet;
#[path = "../tests/harness/mod.rs"]
mod harness;
#[path = "../tests/common/vtxos.rs"]
mod vtxos;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use harness::{Daemon, OhaFigures};

const PATHS: [&str; 3] = [
    "/api/v1/wallet/balance",
    "/api/v1/wallet/vtxos",
    "/api/v1/history?limit=100",
];

/// The load runs against one daemon: `(path, connections) -> figures`.
type Runs = Vec<(&'static str, u32, OhaFigures)>;

fn load(oha: &str, daemon: &Daemon, bearer: &str, name: &str, secs: u64) -> Runs {
    let pid = daemon.child.id();
    println!(
        "{name} VmRSS with the wallet loaded: {} kB",
        harness::rss_kb(pid)
    );
    let mut runs = Vec::new();
    for path in PATHS {
        // One client, for latency; sixteen, for throughput (and queueing).
        for connections in [1, 16] {
            let before = harness::rss_kb(pid);
            let url = format!("http://127.0.0.1:{}{path}", daemon.port);
            let measured = harness::oha_figures(
                oha,
                &[
                    "-c",
                    &connections.to_string(),
                    "-z",
                    &format!("{secs}s"),
                    "-H",
                    bearer,
                    &url,
                ],
            );
            println!(
                "{name} {path}, {connections} connection(s), {secs} s: {measured}; VmRSS {before} kB -> {} kB",
                harness::rss_kb(pid),
            );
            runs.push((path, connections, measured));
        }
    }
    runs
}

/// Start to `/ping`, milliseconds: the median of five starts of `bin` on `datadir`,
/// each on a free port, polled every millisecond, stopped (SIGTERM) before the next.
/// berthd and barkd take the same arguments here.
fn start_to_ping_ms(bin: &Path, datadir: &Path) -> f64 {
    let mut times = Vec::new();
    while times.len() < 5 {
        let port = harness::free_port();
        let started = Instant::now();
        let child = Command::new(bin)
            .arg("--datadir")
            .arg(datadir)
            .args(["--port", &port.to_string(), "--quiet", "--no-logfile"])
            .env_remove("BERTH_SEED_PASSPHRASE")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the daemon");
        let mut daemon = Daemon { child, port };
        let answered = loop {
            if let Ok((200, _)) = harness::try_request(port, "GET", "/ping", &[], None) {
                break true;
            }
            // Exited first: the port was taken meanwhile; that start does not count.
            if daemon.child.try_wait().expect("try_wait").is_some() {
                break false;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{} did not answer /ping within 30 s",
                bin.display()
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        let elapsed = started.elapsed();
        if answered {
            daemon.terminate();
            times.push(elapsed.as_secs_f64() * 1000.0);
        }
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// barkd on a free port with this datadir, answering `/ping`.
fn start_barkd(barkd: &str, datadir: &Path) -> Daemon {
    let port = harness::free_port();
    let child = Command::new(barkd)
        .arg("--datadir")
        .arg(datadir)
        .args(["--port", &port.to_string(), "--quiet", "--no-logfile"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start barkd");
    let daemon = Daemon { child, port };
    harness::wait_until("barkd's /ping", 30, || {
        matches!(
            harness::try_request(port, "GET", "/ping", &[], None),
            Ok((200, _))
        )
    });
    daemon
}

/// barkd serving the big wallet: created through its API on `bitcoind`, stopped,
/// filled by `fill` (barkd-fill) in its SQLite database, started again.
fn barkd_with_big_wallet(
    barkd: &str,
    fill: &str,
    bitcoind: &harness::Bitcoind,
) -> (tempfile::TempDir, Daemon, String) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let datadir = tmp.path().join("barkd");
    let daemon = start_barkd(barkd, &datadir);
    let bearer = format!("Bearer {}", harness::token(&datadir));
    let create = serde_json::json!({
        "network": "regtest",
        "ark_server": format!("http://127.0.0.1:{}", harness::free_port()),
        "chain_source": { "bitcoind": {
            "bitcoind": bitcoind.url(),
            "bitcoind_auth": { "cookie": { "cookie": bitcoind.cookie().display().to_string() } },
        } },
        "force": true,
    })
    .to_string();
    let (status, raw) = daemon.post(
        "/api/v1/wallet/create",
        &[("Authorization", &bearer)],
        &create,
    );
    assert_eq!(status, 200, "barkd create: {raw}");
    daemon.terminate();
    let filled = Command::new(fill)
        .arg(datadir.join("db.sqlite"))
        .status()
        .expect("run barkd-fill");
    assert!(filled.success(), "barkd-fill failed");
    let daemon = start_barkd(barkd, &datadir);
    harness::wait_until("barkd's wallet", 60, || {
        daemon
            .get("/api/v1/wallet/balance", &[("Authorization", &bearer)])
            .0
            == 200
    });
    (tmp, daemon, format!("Authorization: {bearer}"))
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let bitcoind = harness::Bitcoind::start("bench-api");
    let oha = std::env::var("OHA").unwrap_or_else(|_| "oha".into());
    let secs: u64 = std::env::var("BERTH_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    if std::env::var("BERTH_BENCH_ONLY").as_deref() == Ok("lists") {
        lists_by_size(&oha, &bitcoind, secs);
        return;
    }

    // The balance of an empty wallet first: what "flat" is measured against.
    let (_empty_tmp, empty) = harness::datadir_with_wallet(&bitcoind);
    let daemon = Daemon::start(&empty, &["-q"]);
    harness::wait_loaded(&daemon, &empty);
    let bearer = format!("Authorization: Bearer {}", harness::token(&empty));
    let url = format!("http://127.0.0.1:{}{}", daemon.port, PATHS[0]);
    let empty_balance = harness::oha_figures(
        &oha,
        &["-c", "16", "-z", &format!("{secs}s"), "-H", &bearer, &url],
    );
    println!(
        "berthd {} of an empty wallet, 16 connections: {empty_balance}",
        PATHS[0]
    );
    drop(daemon);

    let (_tmp, datadir) = harness::datadir_with_wallet(&bitcoind);
    harness::with_store(&datadir, async |store| big_wallet::fill(store).await);
    let started = Instant::now();
    let daemon = Daemon::start(&datadir, &["-q"]);
    harness::wait_loaded(&daemon, &datadir);
    println!(
        "berthd start to a loaded wallet of {} movements: {:.0} ms",
        big_wallet::MOVEMENTS,
        started.elapsed().as_secs_f64() * 1000.0
    );
    let bearer = format!("Authorization: Bearer {}", harness::token(&datadir));
    std::thread::sleep(Duration::from_secs(1));
    let ours = load(&oha, &daemon, &bearer, "berthd", secs);
    daemon.terminate();
    let our_start = start_to_ping_ms(&harness::bin(), &datadir);

    let barkd = std::env::var("BARKD_EXEC").ok();
    let fill = std::env::var("BARKD_FILL").ok();
    let theirs = match (barkd, fill) {
        (Some(barkd), Some(fill)) => {
            let (tmp, daemon, bearer) = barkd_with_big_wallet(&barkd, &fill, &bitcoind);
            std::thread::sleep(Duration::from_secs(1));
            let runs = load(&oha, &daemon, &bearer, "barkd", secs);
            // barkd may still be sending whole histories to oha's last requests and
            // then takes longer than SIGTERM's grace: killed (SQLite recovers).
            drop(daemon);
            let start = start_to_ping_ms(Path::new(&barkd), &tmp.path().join("barkd"));
            Some((runs, start))
        }
        _ => {
            println!("barkd: not measured (set BARKD_EXEC and BARKD_FILL; scripts/bench-api does)");
            None
        }
    };

    println!();
    println!(
        "{:<34} {:>4} {:>22} {:>22}",
        "big wallet", "conn", "berthd req/s, p99", "barkd req/s, p99"
    );
    for (i, (path, connections, figures)) in ours.iter().enumerate() {
        let barkd = theirs.as_ref().map_or("-".to_owned(), |(t, _)| {
            format!("{:.0}, {:.2} ms", t[i].2.requests_per_sec, t[i].2.p99_ms)
        });
        println!(
            "{:<34} {:>4} {:>22} {:>22}",
            path,
            connections,
            format!("{:.0}, {:.2} ms", figures.requests_per_sec, figures.p99_ms),
            barkd
        );
    }
    let (barkd_start, ratio) = theirs
        .as_ref()
        .map_or(("-".to_owned(), "-".to_owned()), |(_, ms)| {
            (format!("{ms:.1} ms"), format!("{:.2}x", our_start / ms))
        });
    println!(
        "{:<34} {:>4} {:>22} {:>22}  berthd/barkd {ratio}",
        "start to /ping (median of 5)",
        "",
        format!("{our_start:.1} ms"),
        barkd_start
    );

    lists_by_size(&oha, &bitcoind, secs);
}

/// `GET /api/v1/wallet/vtxos` and `GET /api/v1/exits/status/all` from 16 connections on
/// wallets of growing numbers of VTXOs (and nothing else) and of finished exits:
/// requests per second, p50 and p99, and p50 per item.
fn lists_by_size(oha: &str, bitcoind: &harness::Bitcoind, secs: u64) {
    let sizes: Vec<usize> = std::env::var("BERTH_BENCH_VTXOS")
        .unwrap_or_else(|_| "100,2000,10000".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    if sizes.is_empty() {
        return;
    }
    println!();
    println!(
        "{:<28} {:>8} {:>10} {:>10} {:>10} {:>16}",
        "list", "items", "req/s", "p50 ms", "p99 ms", "p50 per item µs"
    );
    for (path, what) in [
        ("/api/v1/wallet/vtxos", "VTXOs"),
        ("/api/v1/exits/status/all", "exits"),
    ] {
        for &count in &sizes {
            let (_tmp, datadir) = harness::datadir_with_wallet(bitcoind);
            harness::with_store(&datadir, async |store| match what {
                "VTXOs" => big_wallet::fill_vtxos(store, count).await,
                _ => big_wallet::fill_exits(store, count).await,
            });
            let daemon = Daemon::start(&datadir, &["-q"]);
            harness::wait_loaded(&daemon, &datadir);
            let bearer = format!("Authorization: Bearer {}", harness::token(&datadir));
            let url = format!("http://127.0.0.1:{}{path}", daemon.port);
            let figures = harness::oha_figures(
                oha,
                &["-c", "16", "-z", &format!("{secs}s"), "-H", &bearer, &url],
            );
            println!(
                "{:<28} {:>8} {:>10.0} {:>10.2} {:>10.2} {:>16.3}",
                path,
                count,
                figures.requests_per_sec,
                figures.p50_ms,
                figures.p99_ms,
                figures.p50_ms * 1000.0 / count as f64
            );
            daemon.terminate();
        }
    }
}

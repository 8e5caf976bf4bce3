//! What the box writes to its card (`scripts/measure-writes`, issue 47): berthd and
//! barkd 0.8.0 side by side, in the same run, on the same regtest stack, each with its
//! datadir on a filesystem of its own (ext4, or f2fs to compare, on a loop device, mounted
//! as the image mounts its data partition), so the device's own counter (`/sys/block/<dev>/stat`, sectors
//! written) says what reached the "card": the database's pages, its journal's and the
//! filesystem's, after `syncfs`. Beside it, each process's `write_bytes`
//! (`/proc/<pid>/io`) and its log (stderr, what journald would keep; counted apart, as
//! on the box it goes to another partition or to memory).
//!
//! Phases, each measured for both daemons at once: an idle stretch with a funded,
//! loaded wallet (scaled to an hour), Ark payments (arkoor) to a third wallet, a
//! refresh round both join, Lightning payments (with Core Lightning), and berthd's
//! 1,000 events and backup (barkd has neither). The script makes the filesystems and
//! passes them here.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::stack::{Berthd, Stack, wait_for};
use crate::{board_and_confirm, harness};

/// A daemon's datadir on a filesystem of its own: the mount point and its block device.
struct Card {
    mount: PathBuf,
    device: String,
}

impl Card {
    /// From `BERTH_WRITES_<WHO>`: `<mount point>:<block device name>` (e.g. `/mnt/a:loop3`).
    fn from_env(var: &str) -> Card {
        let value = std::env::var(var)
            .unwrap_or_else(|_| panic!("{var} is unset: run scripts/measure-writes"));
        let (mount, device) = value
            .split_once(':')
            .unwrap_or_else(|| panic!("{var}={value}: expected <mount>:<device>"));
        Card {
            mount: PathBuf::from(mount),
            device: device.to_string(),
        }
    }

    /// Bytes the device has been asked to write since it was set up, after everything
    /// the filesystem holds dirty has gone to it.
    fn written(&self) -> u64 {
        let synced = std::process::Command::new("sync")
            .arg("-f")
            .arg(&self.mount)
            .status()
            .expect("run sync -f");
        assert!(synced.success(), "sync -f {}", self.mount.display());
        let stat = std::fs::read_to_string(format!("/sys/block/{}/stat", self.device))
            .expect("the device's stat");
        // Field 7: sectors written, of 512 bytes whatever the device's own sector size.
        let sectors: u64 = stat
            .split_whitespace()
            .nth(6)
            .and_then(|v| v.parse().ok())
            .expect("sectors written");
        sectors * 512
    }
}

/// One daemon under measurement.
struct Measured {
    name: &'static str,
    daemon: Berthd,
    card: Card,
    log: PathBuf,
}

/// What a daemon had written at one moment.
#[derive(Clone, Copy)]
struct Reading {
    card: u64,
    process: u64,
    log: u64,
    /// berthd's newest event id (barkd keeps no event log).
    event: u64,
}

impl Measured {
    fn read(&self) -> Reading {
        let io = std::fs::read_to_string(format!("/proc/{}/io", self.daemon.pid()))
            .expect("the process's io");
        let process = io
            .lines()
            .find_map(|l| l.strip_prefix("write_bytes:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("write_bytes");
        Reading {
            card: self.card.written(),
            process,
            log: std::fs::metadata(&self.log).map_or(0, |m| m.len()),
            event: if self.name == "berthd" {
                last_event(&self.daemon)
            } else {
                0
            },
        }
    }
}

/// A phase's figures for one daemon: bytes per unit of work.
struct Figures {
    card: f64,
    process: f64,
    log: f64,
    /// Events recorded in the whole phase.
    events: u64,
}

fn per(before: Reading, after: Reading, units: f64) -> Figures {
    Figures {
        card: (after.card - before.card) as f64 / units,
        process: (after.process.saturating_sub(before.process)) as f64 / units,
        log: (after.log - before.log) as f64 / units,
        events: after.event - before.event,
    }
}

/// Run `work` and measure what each daemon wrote meanwhile, per `units`.
fn phase(daemons: &[Measured], units: f64, work: impl FnOnce()) -> Vec<Figures> {
    let before: Vec<Reading> = daemons.iter().map(Measured::read).collect();
    work();
    daemons
        .iter()
        .zip(before)
        .map(|(d, before)| per(before, d.read(), units))
        .collect()
}

fn env_number(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Create the wallet as a barkd client does, naming the server and the chain source.
fn create(stack: &Stack, daemon: &Berthd) {
    daemon.post_ok(
        "/api/v1/wallet/create",
        json!({
            "network": "regtest",
            "ark_server": stack.ark_url,
            "chain_source": { "bitcoind": {
                "bitcoind": stack.bitcoind.url(),
                "bitcoind_auth": { "cookie": {
                    "cookie": stack.bitcoind.cookie().display().to_string()
                } },
            } },
        }),
    );
    wait_for("the wallet to be loaded", 60, || {
        let (status, _) = daemon.get("/api/v1/wallet/balance");
        (status == 200).then_some(())
    });
}

fn ark_address(daemon: &Berthd) -> String {
    daemon.post_ok("/api/v1/wallet/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_string()
}

fn kib(bytes: f64) -> String {
    format!("{:.1}", bytes / 1024.0)
}

fn row(what: &str, figures: &[Figures]) {
    let (ours, theirs) = (&figures[0], figures.get(1));
    let ratio = theirs
        .filter(|t| t.card > 0.0)
        .map_or("-".to_string(), |t| format!("{:.2}", ours.card / t.card));
    println!(
        "{what:<38} {:>11} {:>10} {:>6}   {:>9} {:>9}   {:>8} {:>8}   {:>6}",
        kib(ours.card),
        theirs.map_or("-".into(), |t| kib(t.card)),
        ratio,
        kib(ours.process),
        theirs.map_or("-".into(), |t| kib(t.process)),
        kib(ours.log),
        theirs.map_or("-".into(), |t| kib(t.log)),
        ours.events,
    );
}

/// The figures (`scripts/measure-writes` runs it; a tool, not a test).
#[test]
#[ignore = "tool: scripts/measure-writes runs it (root, loop devices, the regtest stack)"]
fn tool_measure_writes() {
    const TEST: &str = "tool_measure_writes";
    let barkd_exec = PathBuf::from(
        std::env::var_os("BARKD_EXEC")
            .expect("BARKD_EXEC names barkd 0.8.0 (scripts/e2e's header)"),
    );
    let idle_secs = env_number("BERTH_WRITES_IDLE_SECS", 600);
    let payments = env_number("BERTH_WRITES_PAYMENTS", 3);
    let stack = match std::env::var_os("LIGHTNINGD_EXEC") {
        Some(_) => Stack::start_with_lightning(TEST).expect("the Lightning stack"),
        None => Stack::start(TEST),
    };
    let started = Instant::now();

    // Each as an appliance runs it: no log file, the log on stderr (journald's).
    let start = |name: &'static str, program: &Path, var: &str| {
        let card = Card::from_env(var);
        let datadir = card.mount.join("datadir");
        std::fs::create_dir_all(&datadir).expect("datadir");
        let log = stack.dir().join(format!("{name}.stderr"));
        let daemon = Berthd::start_program(name, program, &datadir, &["--no-logfile"], &log);
        Measured {
            name,
            daemon,
            card,
            log,
        }
    };
    let backups = stack.dir().join("backups");
    std::fs::create_dir_all(&backups).expect("backup directory");
    let berthd_card = Card::from_env("BERTH_WRITES_BERTHD");
    std::fs::create_dir_all(berthd_card.mount.join("datadir")).expect("datadir");
    // Backups go to a stick, not the card; written on demand only, in the backup phase.
    std::fs::write(
        berthd_card.mount.join("datadir/berth.toml"),
        format!(
            "[backup]\ndirectory = \"{}\"\ninterval_hours = 168\ndebounce_secs = 86400\n",
            backups.display()
        ),
    )
    .expect("berth.toml");
    let daemons = [
        start("berthd", &harness::bin(), "BERTH_WRITES_BERTHD"),
        start("barkd", &barkd_exec, "BERTH_WRITES_BARKD"),
    ];
    let sink = stack.berthd("sink");
    let sink_address = ark_address(&sink);
    let created = phase(&daemons, 1.0, || {
        for d in &daemons {
            create(&stack, &d.daemon);
        }
    });
    for d in &daemons {
        board_and_confirm(&stack, &d.daemon, 600_000);
    }
    println!(
        "measure-writes: stack, wallets and boards ready in {:.0} s",
        started.elapsed().as_secs_f64()
    );

    // Idle: both wallets loaded and funded, nobody calling; a block every ten minutes,
    // as on a real chain (the first at once).
    std::thread::sleep(Duration::from_secs(5));
    let idle = phase(&daemons, idle_secs as f64 / 3600.0, || {
        let idle_started = Instant::now();
        let mut blocks = 0;
        while idle_started.elapsed() < Duration::from_secs(idle_secs) {
            if idle_started.elapsed() >= Duration::from_secs(600 * blocks) {
                stack.bitcoind.mine(1);
                blocks += 1;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });

    let ark = phase(&daemons, payments as f64, || {
        for d in &daemons {
            for _ in 0..payments {
                d.daemon.post_ok(
                    "/api/v1/wallet/send",
                    json!({"destination": sink_address, "amount_sat": 10_000}),
                );
            }
        }
    });

    let refresh = phase(&daemons, 1.0, || {
        for d in &daemons {
            d.daemon.post_ok("/api/v1/wallet/refresh/all", json!({}));
        }
        stack.trigger_round();
        wait_for("both in the round's funding transaction", 60, || {
            daemons
                .iter()
                .all(|d| d.daemon.get_ok("/api/v1/wallet/rounds")[0]["funding_txid"].is_string())
                .then_some(())
        });
        stack
            .bitcoind
            .wait_for_mempool("the round's funding transaction");
        stack.bitcoind.mine(1);
        wait_for("both refreshes to finish", 60, || {
            daemons
                .iter()
                .all(|d| {
                    d.daemon.post_ok("/api/v1/wallet/sync", json!({}));
                    let rounds = d.daemon.get_ok("/api/v1/wallet/rounds");
                    rounds.as_array().is_some_and(Vec::is_empty)
                })
                .then_some(())
        });
    });

    let lightning = stack.lightning.as_ref().map(|_| {
        let ln = stack.ln();
        stack.lightning_at_tip();
        phase(&daemons, payments as f64, || {
            for d in &daemons {
                for i in 0..payments {
                    let label = format!("{}-{i}", d.name);
                    let (invoice, hash) = ln.external.invoice(Some(20_000_000), &label);
                    d.daemon
                        .post_ok("/api/v1/lightning/pay", json!({"destination": invoice}));
                    wait_for("the Lightning payment to settle", 120, || {
                        let send = d.daemon.get_ok(&format!("/api/v1/lightning/sends/{hash}"));
                        (send["state"] == "paid").then_some(())
                    });
                }
            }
        })
    });

    // berthd alone (barkd keeps no event log): 1,000 events, each a real bark
    // notification, as scripts/bench-events makes them: a movement's metadata updated,
    // which bark commits and berthd records in its log (two durable writes each).
    let movement = daemons[0].daemon.get_ok("/api/v1/history")[0]["id"]
        .as_u64()
        .expect("a movement");
    let events_phase = phase(&daemons[..1], 1.0, || {
        for n in 0..1_000 {
            let (status, body) = daemons[0].daemon.post(
                &format!("/api/v1/history/{movement}/metadata"),
                json!({ "n": n }),
            );
            assert_eq!(status, 200, "metadata update {n}: {body}");
        }
    });

    // berthd alone: barkd has no backups. On the box they go to a stick.
    let backup = phase(&daemons[..1], 1.0, || {
        daemons[0].daemon.post_ok("/api/v1/backups", json!({}));
    });
    let backup_size: u64 = std::fs::read_dir(&backups)
        .expect("backups")
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    let events = last_event(&daemons[0].daemon);

    println!();
    println!(
        "{:<38} {:>11} {:>10} {:>6}   {:>19}   {:>17}   {:>6}",
        "KiB written",
        "card berthd",
        "barkd",
        "ratio",
        "write_bytes berthd/barkd",
        "log berthd/barkd",
        "events"
    );
    row("wallet created", &created);
    row(&format!("idle, per hour ({idle_secs} s measured)"), &idle);
    row(&format!("per Ark payment ({payments} each)"), &ark);
    row("per refresh round", &refresh);
    match &lightning {
        Some(figures) => row(&format!("per Lightning payment ({payments} each)"), figures),
        None => println!("per Lightning payment: not measured (no LIGHTNINGD_EXEC)"),
    }
    row("per 1,000 events (berthd only)", &events_phase);
    row("per backup (berthd only)", &backup);
    println!(
        "the backup file itself (to the stick, not the card): {} KiB; berthd's event log \
         holds {events} events",
        kib(backup_size as f64)
    );
}

/// The newest event id berthd has recorded.
fn last_event(berthd: &Berthd) -> u64 {
    let answer: Value = berthd.get_ok("/api/v1/notifications/wait?timeout=0");
    answer["last_event_id"].as_u64().unwrap_or(0)
}

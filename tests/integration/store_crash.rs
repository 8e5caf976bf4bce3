//! Crash test: a child process applies random operations to a real database file and
//! reports each one after it returns; the parent kills it with SIGKILL at a random
//! point, many times over the same file (an epoch, below). After every kill the
//! reopened store must pass redb's integrity check and our invariants (no VTXO in two
//! states, no lock held by a missing movement, ids within their counters), and hold
//! exactly the operations that were reported — plus, at most, the one that was in
//! flight when the kill landed.
//!
//! The expected state comes from a model: bark's in-memory persister given the same
//! operations, never killed.
//!
//! Each round costs the same whatever its number, so thousands can run
//! (`scripts/soak-store`). The model lives across rounds and is given only each round's
//! reported operations; when the reopened store differs from it, the in-flight operation
//! is applied to it and the states compared again, which is what replaying everything
//! with that operation appended would give. And the state stays bounded: bark's persister
//! has no way to delete a movement, so every `BERTH_CRASH_EPOCH` rounds (default 50; 0 =
//! never) the test starts over from a known state, a new file holding only the prologue
//! and a new model holding the same.
//!
//! Rounds: `BERTH_CRASH_ROUNDS` (default 20). The last line printed is `store-crash:`
//! followed by `key=value` figures (`scripts/soak-store` reads it); `BERTH_CRASH_TIMES`
//! names a file to write each round's wall time to. The first broken promise is counted
//! as a violation, printed in that line, and fails the test.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ark::vtxo::Full;
use ark::{ProtocolEncoding, Vtxo};
use bark::persist::adaptor::StorageAdaptorWrapper;
use bark::persist::adaptor::memory::MemoryStorageAdaptor;
use berth::store::{Store, StoreConfig};
use common::ops::{Op, apply, op_strategy, prologue, snapshot};
use proptest::prelude::Rng;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{RngAlgorithm, TestRng, TestRunner};

const CHILD_ENV: &str = "BERTH_CRASH_CHILD_DIR";
const OPS_PER_ROUND: usize = 60;
/// Rounds over one file before starting over from the known snapshot.
const DEFAULT_EPOCH: usize = 50;

fn db_path(dir: &Path) -> PathBuf {
    dir.join("wallet.redb")
}

fn write_pool(dir: &Path, pool: &[Vtxo<Full>]) {
    let lines: Vec<String> = pool
        .iter()
        .map(|v| bitcoin::hex::DisplayHex::to_lower_hex_string(&v.serialize()))
        .collect();
    std::fs::write(dir.join("pool.hex"), lines.join("\n")).expect("write pool");
}

fn read_pool(dir: &Path) -> Vec<Vtxo<Full>> {
    let text = std::fs::read_to_string(dir.join("pool.hex")).expect("read pool");
    text.lines()
        .map(|l| {
            let bytes: Vec<u8> = bitcoin::hex::FromHex::from_hex(l).expect("hex");
            Vtxo::<Full>::deserialize(&bytes).expect("vtxo")
        })
        .collect()
}

/// The child side: apply `ops.json` in order and print `done <i> ok|err` after each.
/// Runs only when the parent spawns this test binary with `CHILD_ENV` set.
#[test]
#[ignore = "tool: the child process of crash_kill_9_keeps_every_reported_operation"]
fn tool_crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let pool = read_pool(&dir);
    let ops: Vec<Op> = serde_json::from_slice(&std::fs::read(dir.join("ops.json")).expect("ops"))
        .expect("parse ops");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let (db, _) = Store::open_async(&db_path(&dir), &StoreConfig::default())
            .await
            .expect("open");
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready").expect("stdout");
        out.flush().expect("flush");
        for (i, op) in ops.iter().enumerate() {
            let res = apply(&db, op, &pool).await;
            writeln!(out, "done {i} {}", if res.is_ok() { "ok" } else { "err" }).expect("stdout");
            out.flush().expect("flush");
        }
    });
}

/// What the rounds did, for the closing line.
#[derive(Default)]
struct Tally {
    cycles: usize,
    epochs: usize,
    /// Rounds whose child got its SIGKILL (the others finished their batch first).
    sigkills: usize,
    killed_mid_batch: usize,
    /// Operations the child reported as returned (`ok` or `err`) before it was killed.
    acknowledged: usize,
    acknowledged_ok: usize,
    /// In-flight operations (started, not reported) that the reopened store held.
    inflight_found: usize,
    violations: usize,
    /// Wall time of each round: the child's run, the kill, the reopen and every check.
    round_ms: Vec<f64>,
}

impl Tally {
    /// Operations whose effects the reopened stores held: every acknowledged one (the
    /// state equalled the model's after all of them) and the in-flight ones that landed.
    fn found(&self) -> usize {
        self.acknowledged + self.inflight_found
    }

    /// Mean wall time of rounds `range` (clamped to the rounds run), in milliseconds.
    fn mean_ms(&self, range: std::ops::Range<usize>) -> f64 {
        let end = range.end.min(self.round_ms.len());
        let start = range.start.min(end);
        let window = &self.round_ms[start..end];
        if window.is_empty() {
            return 0.0;
        }
        window.iter().sum::<f64>() / window.len() as f64
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Start over from the known snapshot: a new file holding only the prologue, and a model
/// holding the same. The old file is removed first (the parent holds no handle on it).
async fn start_epoch(
    path: &Path,
    pool: &[Vtxo<Full>],
) -> StorageAdaptorWrapper<MemoryStorageAdaptor> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("remove {}: {e}", path.display()),
    }
    let (db, _) = Store::open_async(path, &StoreConfig::default())
        .await
        .expect("open");
    prologue(&db).await;
    let model = StorageAdaptorWrapper::new(MemoryStorageAdaptor::new());
    prologue(&model).await;
    assert_eq!(
        snapshot(&db, pool).await,
        snapshot(&model, pool).await,
        "the prologue differs between the store and the model"
    );
    model
}

/// The kill rounds. `Err` is the first broken promise (counted in `tally.violations`):
/// after it the file and the model no longer describe the same history, so the run
/// stops there.
async fn run_rounds(
    rounds: usize,
    epoch: usize,
    dir: &Path,
    pool: &[Vtxo<Full>],
    tally: &mut Tally,
) -> Result<(), String> {
    let path = db_path(dir);
    let mut runner = TestRunner::new_with_rng(
        Default::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[0x5a; 32]),
    );
    let strategy = op_strategy();
    let full = StoreConfig {
        full_check: true,
        ..StoreConfig::default()
    };
    let mut model = None;

    for round in 0..rounds {
        let started = Instant::now();
        // Every `epoch` rounds (never, with 0) start over from the known snapshot, so
        // the state checked below stays bounded and every round costs the same.
        if model.is_none() || (epoch > 0 && round % epoch == 0) {
            model = Some(start_epoch(&path, pool).await);
            tally.epochs += 1;
        }
        let model = model.as_ref().expect("started above");

        let ops: Vec<Op> = (0..OPS_PER_ROUND)
            .map(|_| strategy.new_tree(&mut runner).expect("op").current())
            .collect();
        std::fs::write(
            dir.join("ops.json"),
            serde_json::to_vec(&ops).expect("json"),
        )
        .expect("ops");
        let kill_after = runner.rng().next_u32() as usize % (OPS_PER_ROUND + 5);
        let extra_delay = Duration::from_micros(u64::from(runner.rng().next_u32() % 3_000));

        let mut child = Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--exact",
                &crate::harness::exact_test_name(module_path!(), "tool_crash_child"),
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut outcomes: Vec<bool> = Vec::new();
        let mut killed = false;
        while let Some(Ok(line)) = lines.next() {
            if let Some(rest) = line.strip_prefix("done ") {
                outcomes.push(rest.ends_with(" ok"));
            }
            let started = line == "ready" || line.starts_with("done ");
            if started && outcomes.len() == kill_after && !killed {
                std::thread::sleep(extra_delay);
                // Child::kill sends SIGKILL to the child's pid on Unix.
                child.kill().expect("kill child");
                killed = true;
            }
        }
        // Lines already written before the kill are still read above: they count.
        let _ = child.wait().expect("wait child");
        let n = outcomes.len();
        tally.cycles += 1;
        tally.sigkills += usize::from(killed);
        if n < ops.len() {
            tally.killed_mid_batch += 1;
        }
        tally.acknowledged += n;
        tally.acknowledged_ok += outcomes.iter().filter(|ok| **ok).count();

        // The model lives as long as the file and takes only this round's operations:
        // its state is what a replay of every operation since the epoch began would give
        // (`apply` depends only on the persister's state and the operation).
        // Every reported operation must have had the same outcome on the model.
        for (i, op) in ops[..n].iter().enumerate() {
            let res = apply(model, op, pool).await;
            if res.is_ok() != outcomes[i] {
                return Err(format!(
                    "round {round} op {i} {op:?}: the store said {}, the model {res:?}",
                    if outcomes[i] { "ok" } else { "err" }
                ));
            }
        }

        let (db, report) = Store::open_async(&path, &full)
            .await
            .map_err(|e| format!("round {round}: reopen after the kill failed: {e}"))?;
        if !report.integrity_ok {
            return Err(format!("round {round}: integrity check failed after kill"));
        }
        db.verify_invariants()
            .await
            .map_err(|e| format!("round {round}: {e}"))?;
        let found = snapshot(&db, pool).await;
        let expected = snapshot(model, pool).await;
        if found != expected {
            // The only other acceptable state: the in-flight operation committed but
            // was not reported before the kill. Applying it to the model gives what a
            // replay of everything with it appended would.
            let Some(inflight) = ops.get(n) else {
                return Err(format!(
                    "round {round}: state differs, nothing in flight\nfound: {found:?}\nexpected: {expected:?}"
                ));
            };
            let _ = apply(model, inflight, pool).await;
            let with_inflight = snapshot(model, pool).await;
            if found != with_inflight {
                return Err(format!(
                    "round {round}: lost or corrupted state\nfound: {found:?}\nexpected: {expected:?}\nor, with the in-flight {inflight:?}: {with_inflight:?}"
                ));
            }
            tally.inflight_found += 1;
        }
        drop(db);
        tally
            .round_ms
            .push(started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_kill_9_keeps_every_reported_operation() {
    let rounds = env_usize("BERTH_CRASH_ROUNDS", 20);
    let epoch = env_usize("BERTH_CRASH_EPOCH", DEFAULT_EPOCH);
    let dir = tempfile::tempdir().expect("tempdir");
    let pool = common::ops::standard_pool();
    write_pool(dir.path(), &pool);

    let wall = Instant::now();
    let mut tally = Tally::default();
    let outcome = run_rounds(rounds, epoch, dir.path(), &pool, &mut tally).await;
    if outcome.is_err() {
        tally.violations += 1;
    }
    let wall_ms = wall.elapsed().as_millis();

    if let Ok(path) = std::env::var("BERTH_CRASH_TIMES") {
        let lines: String = tally
            .round_ms
            .iter()
            .enumerate()
            .map(|(i, ms)| format!("{} {ms:.1}\n", i + 1))
            .collect();
        std::fs::write(&path, lines).expect("write BERTH_CRASH_TIMES");
    }
    // The closing line, one `key=value` per figure (scripts/soak-store reads it).
    let window = 100.min(tally.round_ms.len());
    println!(
        "store-crash: cycles={} epochs={} sigkills={} killed_mid_batch={} acknowledged={} acknowledged_ok={} found={} inflight_found={} violations={} wall_ms={wall_ms} window={window} ms_per_round_first={:.1} ms_per_round_last={:.1}",
        tally.cycles,
        tally.epochs,
        tally.sigkills,
        tally.killed_mid_batch,
        tally.acknowledged,
        tally.acknowledged_ok,
        tally.found(),
        tally.inflight_found,
        tally.violations,
        tally.mean_ms(0..window),
        tally.mean_ms(tally.round_ms.len() - window..tally.round_ms.len()),
    );
    if let Err(violation) = outcome {
        panic!("{violation}");
    }
    assert!(
        tally.killed_mid_batch > 0,
        "the kill never landed before the batch finished"
    );
}

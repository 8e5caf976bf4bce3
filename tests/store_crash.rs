//! Crash test: a child process applies random operations to a real database file and
//! reports each one after it returns; the parent kills it with SIGKILL at a random
//! point, many times over the same file. After every kill the reopened store must pass
//! redb's integrity check and our invariants (no VTXO in two states, no lock held by a
//! missing movement, ids within their counters), and hold exactly the operations that
//! were reported — plus, at most, the one that was in flight when the kill landed.
//!
//! The expected state comes from a model: bark's in-memory persister given the same
//! operations, never killed. It lives across rounds and is given only each round's
//! reported operations; when the reopened store differs from it, the in-flight operation
//! is applied to it and the states compared again, which is what replaying everything
//! with that operation appended would give. Rounds: `BERTH_CRASH_ROUNDS` (default 20).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_kill_9_keeps_every_reported_operation() {
    let rounds: usize = std::env::var("BERTH_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    let dir = tempfile::tempdir().expect("tempdir");
    let pool = common::ops::standard_pool();
    write_pool(dir.path(), &pool);
    {
        let (db, _) = Store::open_async(&db_path(dir.path()), &StoreConfig::default())
            .await
            .expect("open");
        prologue(&db).await;
    }

    let mut runner = TestRunner::new_with_rng(
        Default::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[0x5a; 32]),
    );
    let strategy = op_strategy();
    let model = StorageAdaptorWrapper::new(MemoryStorageAdaptor::new());
    prologue(&model).await;
    let (mut kills_mid_batch, mut inflight_landed, mut survived) = (0, 0, 0);

    for round in 0..rounds {
        let ops: Vec<Op> = (0..OPS_PER_ROUND)
            .map(|_| strategy.new_tree(&mut runner).expect("op").current())
            .collect();
        std::fs::write(
            dir.path().join("ops.json"),
            serde_json::to_vec(&ops).expect("json"),
        )
        .expect("ops");
        let kill_after = runner.rng().next_u32() as usize % (OPS_PER_ROUND + 5);
        let extra_delay = Duration::from_micros(u64::from(runner.rng().next_u32() % 3_000));

        let mut child = Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--exact",
                "tool_crash_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, dir.path())
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
        if n < ops.len() {
            kills_mid_batch += 1;
        }

        // The model takes only this round's operations: its state is what a replay of
        // every operation from the start would give (`apply` depends only on the
        // persister's state and the operation).
        // Every reported operation must have had the same outcome on the model.
        for (i, op) in ops[..n].iter().enumerate() {
            let res = apply(&model, op, &pool).await;
            assert_eq!(
                res.is_ok(),
                outcomes[i],
                "round {round} op {i} {op:?}: model says {res:?}"
            );
        }
        survived += n;

        let full = StoreConfig {
            full_check: true,
            ..StoreConfig::default()
        };
        let (db, report) = Store::open_async(&db_path(dir.path()), &full)
            .await
            .expect("reopen");
        assert!(
            report.integrity_ok,
            "round {round}: integrity check failed after kill"
        );
        db.verify_invariants()
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        let found = snapshot(&db, &pool).await;
        if found != snapshot(&model, &pool).await {
            // The only other acceptable state: the in-flight operation committed but
            // was not reported before the kill. Applying it to the model gives what a
            // replay of everything with it appended would.
            let inflight = ops
                .get(n)
                .unwrap_or_else(|| panic!("round {round}: state differs, nothing in flight"));
            let _ = apply(&model, inflight, &pool).await;
            assert_eq!(
                found,
                snapshot(&model, &pool).await,
                "round {round}: lost or corrupted state"
            );
            survived += 1;
            inflight_landed += 1;
        }
        drop(db);
    }
    println!(
        "crash test: {rounds} rounds, {kills_mid_batch} killed mid-batch, {inflight_landed} in-flight ops found committed, {survived} ops survived"
    );
    assert!(
        kills_mid_batch > 0,
        "the kill never landed before the batch finished"
    );
}

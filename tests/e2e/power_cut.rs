//! Power cuts while the wallet pays (`image/power-cut-test`, issue 47): the chaos loop
//! (`chaos.rs`: two berthds on the regtest stack making arkoor payments, boards,
//! refreshes in rounds, sends on-chain and, with Core Lightning, Lightning payments,
//! with idempotent retries) with a stronger
//! fault. The box's wallet ("alice") keeps its datadir, and its scheduled backups, on a
//! card made and mounted as the appliance's data partition (`card.rs`), every write and
//! flush of it recorded. At a random moment of each cycle the power goes: berthd dies,
//! and the card is left holding what a card that honours flushes and nothing else could
//! hold (the record replayed up to the last flush before that moment, or into the
//! writes after it). Then, as the box would after the power comes back: the boot's
//! filesystem check, a full one, the card mounted (the journal recovered), the newest
//! backup verified (`berthd backup verify`), `berthd store check`, berthd started; and
//! the chaos loop's checks: every acknowledged payment in the history exactly once, a
//! cut-off request retried with its key never run twice, balances equal to the
//! movements and agreeing between the two wallets and with the chain.
//!
//! `POWER_CUT_CYCLES` (default 20), `POWER_CUT_SEED` (printed; repeats a run's
//! choices), `BERTH_POWER_CUT_MOUNT_OPTIONS` (default the image's fstab options, to try
//! others: `data=journal`, `commit=`), `BERTH_POWER_CUT_FS` (`ext4`, the image's, or
//! `f2fs`, which `image/power-cut-test` runs under User-mode Linux).

use std::path::PathBuf;

use crate::card::{BOX_MOUNT_OPTIONS, Filesystem, LoggedCard};
use crate::chaos::{Fault, Rng, loop_stack, run_loop, seed};
use crate::harness;
use crate::stack::Berthd;

/// The power cut: always the box's wallet, whoever acts.
struct PowerCut {
    card: LoggedCard,
    backups: PathBuf,
    cuts: u64,
    at_flush: u64,
    kept_after_flush: u64,
    lost: u64,
    repaired_at_boot: u64,
    backups_verified: u64,
}

impl Fault for PowerCut {
    fn name(&self) -> &'static str {
        "power cut"
    }

    fn victim(&mut self, _rng: &mut Rng, _actor: usize) -> usize {
        0
    }

    fn strike(&mut self, victim: &mut Berthd, rng: &mut Rng) -> (Vec<String>, String) {
        // Half the cuts at the next write to reach the card (most likely inside a
        // commit), the others where the loop's random wait ended.
        if rng.below(2) == 0 {
            self.card.await_write(std::time::Duration::from_millis(500));
        }
        // The moment first: whatever reaches the card after it never did.
        let moment = self.card.moment();
        victim.kill();
        let cut = self.card.cut(moment, rng.next());
        self.cuts += 1;
        if cut.kept_after_flush == 0 {
            self.at_flush += 1;
        }
        self.kept_after_flush += cut.kept_after_flush as u64;
        self.lost += cut.lost as u64;
        if cut.preen != 0 {
            self.repaired_at_boot += 1;
        }
        let mut wrong = cut.problems.clone();
        if wrong.is_empty() {
            match self.verify_newest_backup(&victim.datadir) {
                Ok(true) => self.backups_verified += 1,
                Ok(false) => {}
                Err(e) => wrong.push(e),
            }
        }
        let said = format!(
            " ({} writes and flushes recorded, {} flushes; kept {} writes past the last flush, lost {}; the boot's check {})",
            cut.recorded, cut.flushes, cut.kept_after_flush, cut.lost, cut.preen
        );
        (wrong, said)
    }
}

impl PowerCut {
    /// The newest backup on the card, verified; `false` when none was written yet.
    fn verify_newest_backup(&self, datadir: &std::path::Path) -> Result<bool, String> {
        let newest = std::fs::read_dir(&self.backups)
            .map_err(|e| format!("the backup directory after the cut: {e}"))?
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .max();
        let Some((_, newest)) = newest else {
            return Ok(false);
        };
        let out = harness::berthd(
            datadir,
            &["backup", "verify", &newest.display().to_string()],
        );
        if out.status.success() {
            Ok(true)
        } else {
            Err(format!(
                "the newest backup {} does not verify: {}{}",
                newest.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
}

#[test]
#[ignore = "tool: power cuts over real payments, run by image/power-cut-test"]
fn tool_power_cut_loop() {
    let filesystem = Filesystem::from_env("BERTH_POWER_CUT_FS");
    let missing = LoggedCard::missing(filesystem);
    assert!(
        missing.is_empty(),
        "a recording card needs {}: run image/power-cut-test",
        missing.join(", ")
    );
    let cycles: u64 = std::env::var("POWER_CUT_CYCLES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(20);
    let seed = seed("POWER_CUT");
    let options = std::env::var("BERTH_POWER_CUT_MOUNT_OPTIONS")
        .unwrap_or_else(|_| BOX_MOUNT_OPTIONS.to_owned());
    println!(
        "power-cut: seed {seed}, {cycles} cycles, the card {} mounted {options} \
         (POWER_CUT_SEED={seed} repeats this run)",
        filesystem.name()
    );
    let stack = loop_stack("power-cut", "tool_power_cut_loop");
    let card = LoggedCard::new(&stack.dir().join("card"), 1024, filesystem, &options);
    let backups = card.mount.join("backups");
    std::fs::create_dir_all(&backups).expect("backup directory");
    // Backups a second after a change, so that cuts fall among them too.
    let datadir = stack.datadir_at(
        &card.mount.join("berth"),
        &format!(
            "[backup]\ndirectory = \"{}\"\ndebounce_secs = 1\n",
            backups.display()
        ),
    );
    // The configuration is on the card before berthd starts, as image/build and the
    // first boot leave it (written without a sync, a cut in the first seconds empties
    // it, which is the test's doing, not berthd's).
    card.sync();
    let mut fault = PowerCut {
        card,
        backups,
        cuts: 0,
        at_flush: 0,
        kept_after_flush: 0,
        lost: 0,
        repaired_at_boot: 0,
        backups_verified: 0,
    };
    let alice = stack.berthd_in("alice", &datadir, &stack.dir().join("alice.stderr"));
    let mut wallets = [alice, stack.berthd("bob")];
    run_loop("power-cut", &stack, &mut wallets, cycles, seed, &mut fault);
    println!(
        "power-cut: {} cuts: {} at a flush point, the others keeping {} writes past it \
         ({} lost); {} repaired by the boot's check, 0 unmountable, 0 damaged; \
         {} newest backups verified (seed {seed}, {})",
        fault.cuts,
        fault.at_flush,
        fault.kept_after_flush,
        fault.lost,
        fault.repaired_at_boot,
        fault.backups_verified,
        filesystem.name()
    );
    // berthd goes before its card.
    drop(wallets);
}

/// The card alone: what was flushed survives a cut, what was not may not, and the
/// filesystem is whole either way. Needs root, FUSE and qemu-storage-daemon (skipped
/// without them, saying which).
#[test]
fn a_cut_card_keeps_what_was_flushed() {
    const TEST: &str = "power_cut::a_cut_card_keeps_what_was_flushed";
    let missing = LoggedCard::missing(Filesystem::Ext4);
    if !missing.is_empty() {
        harness::skip(
            TEST,
            &format!("a recording card needs {}", missing.join(", ")),
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // A long journal commit interval: no commit of ext4's own (a flush) falls between
    // the test's writes and its cuts.
    let mut card = LoggedCard::new(
        dir.path(),
        64,
        Filesystem::Ext4,
        &format!("{BOX_MOUNT_OPTIONS},commit=60"),
    );
    let synced = card.mount.join("synced");
    let unsynced = card.mount.join("unsynced");
    std::fs::write(&synced, b"kept").expect("write");
    std::fs::File::open(&synced)
        .and_then(|f| f.sync_all())
        .expect("fsync");
    // The directory entry too, as a careful writer does.
    std::fs::File::open(&card.mount)
        .and_then(|d| d.sync_all())
        .expect("fsync the directory");
    std::fs::write(&unsynced, vec![7u8; 1 << 20]).expect("write");
    let moment = card.moment();
    // At the last flush: the synced file whole, the filesystem clean at boot.
    let cut = card.cut(moment, 0);
    eprintln!("the cut at the last flush: {cut:?}");
    assert!(cut.problems.is_empty(), "{cut:?}");
    assert!(
        cut.flushes > 0,
        "the fsyncs were recorded as flushes: {cut:?}"
    );
    assert_eq!(cut.kept_after_flush, 0, "{cut:?}");
    assert_eq!(
        std::fs::read(&synced).expect("the synced file after the cut"),
        b"kept"
    );
    // The unsynced megabyte was never flushed: it is lost, or (page cache) not yet
    // written at all; either way not half there as garbage the filesystem trusts.
    if let Ok(content) = std::fs::read(&unsynced) {
        assert!(
            content.iter().all(|b| *b == 7) || content.is_empty(),
            "an unsynced file after the cut is empty or whole, never other bytes"
        );
    }
    // Writes after the last flush, kept in part: a file written and synced, then
    // overwritten in place straight to the card (O_DIRECT) with no flush after. A cut
    // into those writes leaves each block old or new, nothing else, and the filesystem
    // mounts and checks clean.
    let after = card.mount.join("after");
    std::fs::write(&after, vec![1u8; 256 << 10]).expect("write");
    let sync = |path: &std::path::Path| {
        let ok = std::process::Command::new("sync")
            .arg(path)
            .status()
            .expect("sync");
        assert!(ok.success());
    };
    sync(&after);
    sync(&card.mount);
    let ok = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "head -c {} /dev/zero | tr '\\0' '\\2' | dd of={} bs=4096 oflag=direct conv=notrunc status=none",
            256 << 10,
            after.display()
        ))
        .status()
        .expect("dd");
    assert!(ok.success());
    let moment = card.moment();
    let cut = card.cut(moment, 7);
    eprintln!("the cut into unflushed writes: {cut:?}");
    assert!(cut.problems.is_empty(), "{cut:?}");
    assert!(
        cut.kept_after_flush > 0,
        "the cut fell among the unflushed overwrites: {cut:?}"
    );
    let content = std::fs::read(&after).expect("the overwritten file after the cut");
    assert_eq!(content.len(), 256 << 10);
    assert!(
        content.iter().all(|b| *b == 1 || *b == 2),
        "each block old or new"
    );
    assert_eq!(
        std::fs::read(&synced).expect("the synced file after the second cut"),
        b"kept"
    );
}

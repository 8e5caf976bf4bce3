//! Backup and verify on a big wallet (10,000 movements, 2,000 VTXOs), with the release
//! `berthd` as a user runs it: `berthd backup create` and `berthd backup verify`, each
//! timed and its peak RSS read by GNU time. Prints both, the backup's size, and the
//! peak RSS of the same commands on an empty wallet (the process's own floor), so the
//! extra memory the backup costs shows. Run: `scripts/bench-backup` (it installs GNU
//! time when missing).

// Only its `fill`: the exits are the API bench's.
#[allow(dead_code)]
#[path = "../tests/common/big_wallet.rs"]
mod big_wallet;
#[path = "../tests/harness/mod.rs"]
mod harness;
#[path = "../tests/common/vtxos.rs"]
mod vtxos;

use std::path::Path;
use std::process::Command;

use bark::persist::BarkPersister;

const MNEMONIC: &str =
    "legal winner thank year wave sausage worth useful legal winner thank yellow";

/// A datadir with a wallet (MNEMONIC's, in barkd's plaintext file), filled or empty.
fn datadir(big: bool) -> (tempfile::TempDir, std::path::PathBuf) {
    let (tmp, datadir) = harness::new_datadir();
    std::fs::create_dir_all(&datadir).expect("datadir");
    std::fs::write(datadir.join("mnemonic"), MNEMONIC).expect("mnemonic");
    harness::with_store(&datadir, async |store| {
        let mnemonic = bip39::Mnemonic::parse(MNEMONIC).expect("valid");
        let network = bitcoin::Network::Regtest;
        store
            .init_wallet(&bark::WalletProperties {
                network,
                fingerprint: bark::WalletSeed::new_from_mnemonic(network, &mnemonic).fingerprint(),
                server_pubkey: None,
                server_mailbox_pubkey: None,
            })
            .await
            .expect("init");
        if big {
            big_wallet::fill(store).await;
        }
    });
    (tmp, datadir)
}

/// Run `berthd ARGS` under GNU time: (seconds, peak RSS in KiB, stdout).
fn timed(datadir: &Path, args: &[&str]) -> (f64, u64, String) {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%e %M"])
        .arg(harness::BIN)
        .arg("--datadir")
        .arg(datadir)
        .args(args)
        .output()
        .expect("/usr/bin/time: run scripts/bench-backup, which installs it");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "berthd {args:?}: {stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    let mut parts = last.split_whitespace();
    let secs = parts
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN);
    let kib = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    (secs, kib, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    for (label, big) in [
        ("empty wallet", false),
        ("10,000 movements, 2,000 VTXOs", true),
    ] {
        let (_tmp, datadir) = datadir(big);
        let out = tempfile::tempdir().expect("tempdir");
        let file = out.path().join("wallet.berthbackup");
        let file = file.to_str().expect("utf-8");
        let db = std::fs::metadata(datadir.join("berth.redb"))
            .expect("db")
            .len();
        let (create_s, create_kib, said) = timed(&datadir, &["backup", "create", file]);
        let size = std::fs::metadata(file).expect("backup").len();
        let (verify_s, verify_kib, _) = timed(&datadir, &["backup", "verify", file]);
        println!("{label}: database {db} bytes; backup {size} bytes");
        println!(
            "  backup create (write + read back + verify): {create_s:.2} s, peak RSS {create_kib} KiB"
        );
        println!("  backup verify: {verify_s:.2} s, peak RSS {verify_kib} KiB");
        print!("  {said}");
    }
}

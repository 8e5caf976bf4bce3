//! Disk faults at the daemon level (`docs/reliability.md`, promises 4 and 5), on the
//! real berthd:
//! - a full disk: berthd on a small tmpfs the test fills. Changes are refused with 507
//!   and a `disk-full` alert, reads go on, and once space is freed berthd takes changes
//!   again; the database passes `berthd store check` throughout.
//! - a failed fsync, injected through the fault-injecting redb backend berthd carries
//!   (`store::faults`, `BERTH_STORE_FAULTS`): berthd answers 503/507, exits non-zero
//!   without ever trying the fsync again, and a restart finds every acknowledged change.
//!
//! Acknowledged changes are paired devices (`POST /api/v1/pair`): a write to the wallet
//! database any berthd makes without an Ark server or a chain source.

use crate::harness;

use std::path::{Path, PathBuf};
use std::process::Command;

use harness::{Daemon, bearer, berthd, json_of, open_window, skip, token, uri_param};

/// A tmpfs of `mib` MiB mounted by the test, unmounted when dropped.
struct SmallDisk {
    _dir: tempfile::TempDir,
    mount: PathBuf,
}

impl SmallDisk {
    /// `None` when this machine does not let the test mount one (not root, no
    /// CAP_SYS_ADMIN in a container).
    fn mount(mib: u64) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().expect("tempdir");
        let mount = dir.path().join("disk");
        std::fs::create_dir(&mount).expect("mount point");
        let mounted = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={mib}m,mode=0700"),
                "tmpfs",
            ])
            .arg(&mount)
            .output()
            .ok()?;
        if !mounted.status.success() {
            eprintln!("mount: {}", String::from_utf8_lossy(&mounted.stderr));
            return None;
        }
        Some(SmallDisk { _dir: dir, mount })
    }

    fn free(&self) -> u64 {
        berth::api::disk::space(&self.mount).expect("statvfs").0
    }

    /// Write a ballast file until less than `left` bytes are free.
    fn fill_until(&self, left: u64) -> PathBuf {
        use std::io::Write as _;
        let path = self.mount.join("ballast");
        let mut file = std::fs::File::create(&path).expect("ballast");
        let chunk = vec![0x5a_u8; 1 << 20];
        while self.free() >= left {
            file.write_all(&chunk).expect("fill the disk");
        }
        file.sync_all().expect("sync the ballast");
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
    }
}

/// Pair a device named `name`: the status and the answer.
fn pair(daemon: &Daemon, datadir: &Path, name: &str) -> (u16, serde_json::Value) {
    let uri = open_window(datadir, "read");
    let code = uri_param(&uri, "t");
    let (status, raw) = daemon.post(
        "/api/v1/pair",
        &[],
        &format!(r#"{{"code":"{code}","name":"{name}"}}"#),
    );
    (status, json_of(&raw))
}

/// The names of the paired devices, as the API lists them.
fn device_names(daemon: &Daemon, admin: &str) -> Vec<String> {
    let (status, raw) = daemon.get("/api/v1/devices", &[("Authorization", admin)]);
    assert_eq!(status, 200, "{raw}");
    let mut names: Vec<String> = json_of(&raw)
        .as_array()
        .expect("a list")
        .iter()
        .map(|d| d["name"].as_str().expect("name").to_string())
        .collect();
    names.sort();
    names
}

fn store_check(datadir: &Path) {
    let out = berthd(datadir, &["store", "check"]);
    assert!(
        out.status.success(),
        "store check: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_full_disk_refuses_changes_keeps_reads_and_takes_changes_again_once_freed() {
    const TEST: &str = "a_full_disk_refuses_changes_keeps_reads_and_takes_changes_again_once_freed";
    let Some(disk) = SmallDisk::mount(128) else {
        skip(
            TEST,
            "cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)",
        );
        return;
    };
    let datadir = disk.mount.join("berth");
    let daemon = Daemon::start(&datadir, &[]);
    let admin = bearer(&token(&datadir));
    let (status, answer) = pair(&daemon, &datadir, "before");
    assert_eq!(status, 200, "{answer}");

    // Into the reserve (64 MiB), with room to spare for berthd's own small writes.
    let ballast = disk.fill_until(48 << 20);
    let (status, answer) = pair(&daemon, &datadir, "while-full");
    assert_eq!(status, 507, "{answer}");
    assert_eq!(answer["code"], "insufficient_storage", "{answer}");
    let message = answer["message"].as_str().expect("message");
    assert!(message.contains("the disk is full"), "{message}");

    // Reads go on.
    assert_eq!(device_names(&daemon, &admin), ["before"]);
    let (status, raw) = daemon.get("/health", &[("Authorization", &admin)]);
    assert_eq!(status, 503, "{raw}");
    let health = json_of(&raw);
    assert_eq!(health["status"], "failing", "{health}");
    assert!(
        health["reasons"]
            .as_array()
            .expect("reasons")
            .iter()
            .any(|r| r.as_str().is_some_and(|r| r.contains("refuses changes"))),
        "{health}"
    );
    // The alert, once, for a client that asked for it.
    let (status, raw) = daemon.get(
        "/api/v1/notifications/wait?types=disk-full&timeout=10",
        &[("Authorization", &admin)],
    );
    assert_eq!(status, 200, "{raw}");
    let alerts = json_of(&raw)["notifications"].clone();
    let alerts = alerts.as_array().expect("notifications");
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0]["type"], "disk-full");
    assert!(
        alerts[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("refuses changes")),
        "{alerts:?}"
    );
    let (status, _) = pair(&daemon, &datadir, "still-full");
    assert_eq!(status, 507, "a second refusal");

    // Space comes back: changes are taken again, with no restart.
    std::fs::remove_file(ballast).expect("free the disk");
    let (status, answer) = pair(&daemon, &datadir, "after");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(device_names(&daemon, &admin), ["after", "before"]);

    let (status, _) = daemon.terminate();
    assert!(status.success(), "berthd stopped cleanly: {status}");
    store_check(&datadir);
}

/// Fail an fsync of the wallet database with `kind` (`eio`, `enospc`) while berthd
/// runs: it must stop with a non-zero exit, never fsync again, and come back with every
/// change it acknowledged.
fn an_injected_fsync_failure(kind: &str, expected_status: u16) {
    let dir = tempfile::tempdir().expect("tempdir");
    let datadir = dir.path().join("berth");
    let trigger = dir.path().join("fail-next-fsync");
    let log = dir.path().join("berthd.log");
    let faults = [(
        berth::store::faults::FAULTS_ENV,
        trigger.to_str().expect("utf-8 path"),
    )];
    let mut daemon = Daemon::start_logged(&datadir, &[], &faults, &log);
    let admin = bearer(&token(&datadir));
    let mut acknowledged = Vec::new();
    for n in 0..3 {
        let name = format!("acknowledged-{n}");
        let (status, answer) = pair(&daemon, &datadir, &name);
        assert_eq!(status, 200, "{answer}");
        acknowledged.push(name);
    }

    std::fs::write(&trigger, kind).expect("arm the fault");
    let (status, answer) = pair(&daemon, &datadir, "failed");
    assert_eq!(status, expected_status, "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .is_some_and(|m| !m.contains("I/O error") && !m.contains("redb")),
        "no internals in the answer: {answer}"
    );
    let exit = daemon
        .wait_exit(20)
        .expect("berthd stops after the failure");
    assert!(!exit.success(), "a non-zero exit for systemd: {exit}");
    let printed = std::fs::read_to_string(&log).expect("log");
    assert!(
        printed.contains("stopped after a wallet database failure"),
        "{printed}"
    );
    assert!(
        !printed.contains(berth::store::faults::RETRIED),
        "the failed fsync was tried again: {printed}"
    );
    assert!(!trigger.exists(), "the fault was injected");

    // What systemd's restart does: the same datadir, no fault.
    store_check(&datadir);
    let daemon = Daemon::start(&datadir, &[]);
    let mut expected = acknowledged.clone();
    expected.sort();
    assert_eq!(device_names(&daemon, &admin), expected);
    let (status, answer) = pair(&daemon, &datadir, "after-restart");
    assert_eq!(status, 200, "{answer}");
    let (status, _) = daemon.terminate();
    assert!(status.success());
    store_check(&datadir);
}

#[test]
fn an_fsync_failing_with_eio_stops_berthd_which_comes_back_with_every_acknowledged_change() {
    an_injected_fsync_failure("eio", 503);
}

#[test]
fn an_fsync_failing_with_enospc_answers_507_and_berthd_comes_back_whole() {
    an_injected_fsync_failure("enospc", 507);
}

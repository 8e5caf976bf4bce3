//! systemd integration: the real berthd against a real `NOTIFY_SOCKET` (READY, STATUS,
//! WATCHDOG, STOPPING), the journal detection, and the unit files checked by systemd's
//! own tools (`systemd-analyze verify` and `security`, `systemd-sysusers`,
//! `systemd-tmpfiles`; counted as skipped where they are not installed, which
//! `scripts/ensure-deps` prevents).

use crate::harness;

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use harness::*;

const BIN: &str = env!("CARGO_BIN_EXE_berthd");

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Datagrams received until `until` matches one, or `secs` pass.
fn receive_until(socket: &UnixDatagram, secs: u64, until: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        if let Ok(n) = socket.recv(&mut buf) {
            let message = String::from_utf8_lossy(&buf[..n]).into_owned();
            let done = until(&message);
            got.push(message);
            if done {
                break;
            }
        }
    }
    got
}

#[test]
fn berthd_tells_systemd_it_is_ready_alive_and_stopping() {
    let (tmp, datadir) = new_datadir();
    let socket_path = tmp.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind the notify socket");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let notify = socket_path.to_string_lossy().into_owned();
    let started = Instant::now();
    // WatchdogSec=1s: a ping every half second. WATCHDOG_PID is left unset (systemd sets
    // it to the service's pid; berthd checks it when present).
    let daemon = Daemon::try_start_with_env(
        &datadir,
        &["--no-logfile"],
        &[
            ("NOTIFY_SOCKET", notify.as_str()),
            ("WATCHDOG_USEC", "1000000"),
        ],
    )
    .expect("starts");
    let startup = receive_until(&socket, 10, |m| m.contains("READY=1"));
    let ready_after = started.elapsed();
    assert!(
        startup
            .iter()
            .any(|m| m == "STATUS=opening the wallet database"),
        "{startup:?}"
    );
    let ready = startup.last().expect("a READY message");
    assert!(
        ready.starts_with("READY=1\nSTATUS=serving on http://"),
        "{startup:?}"
    );
    // READY only once the API answers.
    assert_eq!(daemon.get("/ping", &[]).0, 200);

    let pings = receive_until(&socket, 5, {
        let count = std::cell::Cell::new(0);
        move |m| {
            if m == "WATCHDOG=1" {
                count.set(count.get() + 1);
            }
            count.get() >= 3
        }
    });
    let watchdog = pings.iter().filter(|m| *m == "WATCHDOG=1").count();
    assert!(
        watchdog >= 3,
        "three pings within 5 s at a 0.5 s interval: {pings:?}"
    );

    let pid = daemon.child.id();
    let (status, _) = daemon.terminate();
    assert_eq!(status.code(), Some(0));
    let stopping = receive_until(&socket, 2, |m| m.starts_with("STOPPING=1"));
    assert!(
        stopping.iter().any(|m| m.starts_with("STOPPING=1")),
        "STOPPING after SIGTERM (pid {pid}): {stopping:?}"
    );
    println!(
        "systemd notify: READY {:.0} ms after spawn",
        ready_after.as_secs_f64() * 1000.0
    );
}

#[test]
fn a_watchdog_meant_for_another_process_is_ignored() {
    let (tmp, datadir) = new_datadir();
    let socket_path = tmp.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind");
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let notify = socket_path.to_string_lossy().into_owned();
    let daemon = Daemon::try_start_with_env(
        &datadir,
        &["--no-logfile"],
        &[
            ("NOTIFY_SOCKET", notify.as_str()),
            ("WATCHDOG_USEC", "200000"),
            ("WATCHDOG_PID", "1"),
        ],
    )
    .expect("starts");
    let seen = receive_until(&socket, 2, |_| false);
    assert!(seen.iter().any(|m| m.starts_with("READY=1")), "{seen:?}");
    assert!(!seen.iter().any(|m| m == "WATCHDOG=1"), "{seen:?}");
    drop(daemon);
}

#[test]
fn journal_stream_of_another_stream_keeps_logging_to_stderr() {
    // systemd's JOURNAL_STREAM inherited by a process whose stderr goes elsewhere (a
    // pipe here): berthd must see that it is not the journal and keep its terminal
    // output.
    use std::io::{BufRead, BufReader};
    let (_tmp, datadir) = new_datadir();
    let mut child = Command::new(BIN)
        .arg("--datadir")
        .arg(&datadir)
        .args(["--port", &free_port().to_string(), "--no-logfile"])
        .env("JOURNAL_STREAM", "1:2")
        .env_remove("NOTIFY_SOCKET")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            let done = line.contains("Server starting on");
            seen.push(line);
            if done {
                break;
            }
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        seen.iter().any(|l| l.contains("Server starting on")),
        "terminal logs on stderr: {seen:?}"
    );
}

/// `name` on the PATH; `None` when it is not installed, after recording `test` as
/// skipped.
fn tool(test: &str, name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file());
    if found.is_none() {
        harness::skip(test, &format!("{name} is not installed"));
    }
    found
}

/// The unit with ExecStart pointing at the built binary (verify checks it exists),
/// with its drop-in directory, in a temporary directory.
fn unit_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let unit = std::fs::read_to_string(repo("systemd/berthd.service")).expect("unit");
    let path = dir.path().join("berthd.service");
    std::fs::write(&path, unit.replace("/usr/bin/berthd", BIN)).expect("write");
    let drop_ins = dir.path().join("berthd.service.d");
    std::fs::create_dir(&drop_ins).expect("dir");
    for entry in std::fs::read_dir(repo("systemd/berthd.service.d")).expect("drop-ins") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), drop_ins.join(entry.file_name())).expect("copy");
    }
    (dir, path)
}

#[test]
fn the_unit_verifies_and_its_exposure_is_ok() {
    let Some(analyze) = tool(
        "the_unit_verifies_and_its_exposure_is_ok",
        "systemd-analyze",
    ) else {
        return;
    };
    let (_dir, unit) = unit_copy();
    let verify = Command::new(&analyze)
        .arg("verify")
        .arg(&unit)
        .output()
        .expect("systemd-analyze verify");
    assert!(
        verify.status.success() && verify.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    let security = Command::new(&analyze)
        .args(["security", "--offline=yes", "--no-pager"])
        .arg(&unit)
        .output()
        .expect("systemd-analyze security");
    let report = String::from_utf8_lossy(&security.stdout);
    let overall = report
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .unwrap_or_else(|| panic!("no overall score: {report}"));
    println!("systemd-analyze security: {overall}");
    assert!(
        overall.contains(" OK") || overall.contains(" SAFE"),
        "exposure must be OK or better: {overall}"
    );
}

#[test]
fn sysusers_and_tmpfiles_make_the_user_and_the_datadir() {
    const TEST: &str = "sysusers_and_tmpfiles_make_the_user_and_the_datadir";
    let (Some(sysusers), Some(tmpfiles)) = (
        tool(TEST, "systemd-sysusers"),
        tool(TEST, "systemd-tmpfiles"),
    ) else {
        return;
    };
    let root = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(root.path().join("etc")).expect("etc");
    let users = Command::new(sysusers)
        .arg(format!("--root={}", root.path().display()))
        .arg(repo("systemd/berthd.sysusers.conf"))
        .output()
        .expect("systemd-sysusers");
    assert!(
        users.status.success(),
        "{}",
        String::from_utf8_lossy(&users.stderr)
    );
    let passwd = std::fs::read_to_string(root.path().join("etc/passwd")).expect("passwd");
    assert!(
        passwd.contains("berth:x:") && passwd.contains(":/var/lib/berth:"),
        "{passwd}"
    );
    let group = std::fs::read_to_string(root.path().join("etc/group")).expect("group");
    assert!(
        group
            .lines()
            .any(|l| l.starts_with("i2c:") && l.ends_with("berth")),
        "{group}"
    );

    let files = Command::new(tmpfiles)
        .arg(format!("--root={}", root.path().display()))
        .arg("--create")
        .arg(repo("systemd/berthd.tmpfiles.conf"))
        .output()
        .expect("systemd-tmpfiles");
    assert!(
        files.status.success(),
        "{}",
        String::from_utf8_lossy(&files.stderr)
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(root.path().join("var/lib/berth"))
        .expect("datadir")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
}

/// Every board's berth.toml drop-ins (the common layer, then the board's) are valid
/// configuration, and turn on what the appliance needs.
#[test]
fn board_overlays_hold_valid_configuration() {
    for board in ["rpi4", "rpi5", "generic-arm64"] {
        let etc = tempfile::tempdir().expect("tempdir");
        let drop_ins = etc.path().join("berth.toml.d");
        std::fs::create_dir(&drop_ins).expect("dir");
        for layer in ["common", board] {
            let dir = repo(&format!("board/{layer}/etc/berth/berth.toml.d"));
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries {
                let entry = entry.expect("entry");
                std::fs::copy(entry.path(), drop_ins.join(entry.file_name())).expect("copy");
            }
        }
        let datadir = tempfile::tempdir().expect("tempdir");
        let settings = berth::config::BerthToml::load_layered(
            &datadir.path().join("berth.toml"),
            Some(etc.path()),
        )
        .unwrap_or_else(|e| panic!("{board}: {e}"));
        assert!(settings.discovery.mdns, "{board}: mDNS on");
        assert!(settings.watchdog.enabled, "{board}: watchdog on");
        if board.starts_with("rpi") {
            assert_eq!(settings.seed.i2c_bus, Path::new("/dev/i2c-1"), "{board}");
        }
        // A wallet made on the box is sealed with the machine's credential, and with
        // the secure element where one answers: never the plaintext file.
        use berth::config::SeedSource;
        assert_eq!(settings.seed.sources, [SeedSource::Credential], "{board}");
        assert_eq!(
            settings.seed.optional_sources,
            [SeedSource::SecureElement],
            "{board}"
        );
    }
}

/// The first-boot unit that makes the seed's credential verifies, runs before berthd
/// and never replaces a credential (or makes one while a sealed seed waits for the old).
#[test]
fn the_seed_credential_unit_verifies_and_never_replaces_a_key() {
    let Some(analyze) = tool(
        "the_seed_credential_unit_verifies_and_never_replaces_a_key",
        "systemd-analyze",
    ) else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let name = "berth-seed-credential.service";
    let unit =
        std::fs::read_to_string(repo(&format!("board/common/usr/lib/systemd/system/{name}")))
            .expect("unit");
    for condition in [
        "ConditionPathExists=!/etc/credstore.encrypted/berth-seed",
        "ConditionPathExists=!/var/lib/berth/seed.sealed",
        "Before=berthd.service",
        "WantedBy=berthd.service",
    ] {
        assert!(unit.lines().any(|l| l == condition), "{name}: {condition}");
    }
    let script = repo("board/common/usr/lib/berth/make-seed-credential");
    std::fs::write(
        dir.path().join(name),
        unit.replace(
            "/usr/lib/berth/make-seed-credential",
            &script.to_string_lossy(),
        ),
    )
    .expect("write");
    let verify = Command::new(&analyze)
        .arg("verify")
        .arg(dir.path().join(name))
        .output()
        .expect("systemd-analyze verify");
    let stderr = String::from_utf8_lossy(&verify.stderr);
    // berthd.service itself is not installed on this machine: only that may be said.
    let complaints: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.contains("berthd.service"))
        .collect();
    assert!(verify.status.success() && complaints.is_empty(), "{stderr}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&script)
        .expect("script")
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "the script is executable");
}

//! The `berthd` process contract, tested on the real binary (see `harness`).

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;

use crate::harness;

use harness::*;

#[test]
fn ping_auth_matrix_and_error_shapes() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let good = format!("Bearer {}", token(&datadir));

    assert_eq!(daemon.get("/ping", &[]).0, 200, "/ping needs no credential");

    let cases: &[(&str, &[(&str, &str)])] = &[
        ("no header", &[]),
        (
            "wrong token",
            &[(
                "Authorization",
                "Bearer AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
            )],
        ),
        ("empty bearer", &[("Authorization", "Bearer ")]),
        ("basic scheme", &[("Authorization", "Basic dXNlcjpwYXNz")]),
        (
            "lowercase scheme",
            &[("Authorization", &good.replacen("Bearer", "bearer", 1))],
        ),
    ];
    for (name, headers) in cases {
        let (status, raw) = daemon.get("/api/v1/wallet", headers);
        assert_eq!(status, 401, "{name}: {raw}");
        assert!(
            json_of(&raw)["message"].is_string(),
            "{name}: 401 carries a JSON message"
        );
        assert!(
            !raw.contains(&token(&datadir)),
            "{name}: the token never appears in a response"
        );
    }
    let (status, raw) = daemon.get(
        "/api/v1/wallet",
        &[("Authorization", &good), ("Authorization", &good)],
    );
    assert_eq!(
        status, 401,
        "a duplicated Authorization header is refused: {raw}"
    );
    let (status, raw) = daemon.get("/no/such/path", &[]);
    assert_eq!(status, 401, "unknown paths are behind auth too: {raw}");

    let auth = [("Authorization", good.as_str())];
    let (status, raw) = daemon.get("/api/v1/wallet", &auth);
    assert_eq!(status, 200, "{raw}");
    assert_eq!(
        json_of(&raw),
        serde_json::json!({ "fingerprint": null, "loaded": false, "locked": false, "recovery": null })
    );

    // barkd's deprecated exit list moved permanently, query kept.
    let (status, raw) = daemon.get("/api/v1/exits/status?history=true", &auth);
    assert_eq!(status, 308, "{raw}");
    assert!(
        raw.contains("location: /api/v1/exits/status/all?history=true"),
        "{raw}"
    );
    // Verifying a signature needs no wallet: a malformed one is a 400, not a 422.
    let (status, raw) = daemon.post(
        "/api/v1/message/verify",
        &auth,
        r#"{"message": "hi", "signature": "zz", "pubkey": "02"}"#,
    );
    assert_eq!(status, 400, "{raw}");

    let (status, raw) = daemon.get("/no/such/path", &auth);
    assert_eq!(status, 404, "{raw}");
    let body = json_of(&raw);
    assert!(body["message"].is_string(), "{raw}");
    assert_eq!(
        body["resources"],
        serde_json::json!([]),
        "barkd's 404 shape: {raw}"
    );

    // Known operations answer 422 while there is no wallet.
    for path in [
        "/api/v1/wallet/balance",
        "/api/v1/wallet/vtxos",
        "/api/v1/bitcoin/tip",
    ] {
        let (status, raw) = daemon.get(path, &auth);
        assert_eq!(status, 422, "{path}: {raw}");
        assert!(
            json_of(&raw)["message"]
                .as_str()
                .is_some_and(|m| m.contains("wallet")),
            "{raw}"
        );
    }
    let (status, raw) = request(
        daemon.port,
        "POST",
        "/api/v1/wallet/sync",
        &auth,
        Some("{}"),
    );
    assert_eq!(status, 422, "{raw}");
    // Without --expose-mnemonic the mnemonic endpoint does not exist.
    assert_eq!(daemon.get("/api/v1/wallet/mnemonic", &auth).0, 404);

    let (status, elapsed) = daemon.terminate();
    assert!(status.success(), "SIGTERM exits 0, got {status}");
    assert!(
        elapsed < Duration::from_secs(10),
        "shutdown took {elapsed:?}"
    );
}

#[test]
fn token_file_format_permissions_and_reuse() {
    let (_tmp, datadir) = new_datadir();
    let first = {
        let daemon = Daemon::start(&datadir, &[]);
        let mode = std::fs::metadata(&datadir)
            .expect("datadir")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "a created datadir is owner-only");
        let file = datadir.join("auth_token");
        assert_eq!(
            std::fs::metadata(&file)
                .expect("token")
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
        let t = token(&datadir);
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&t)
            .expect("base64url");
        assert_eq!(
            (raw.len(), raw[0]),
            (33, 0),
            "version byte 0 + 32-byte secret"
        );
        assert_eq!(daemon.terminate().0.code(), Some(0));
        t
    };
    let daemon = Daemon::start(&datadir, &[]);
    assert_eq!(token(&datadir), first, "the token survives a restart");
    let auth = format!("Bearer {first}");
    assert_eq!(
        daemon.get("/api/v1/wallet", &[("Authorization", &auth)]).0,
        200
    );
    drop(daemon);

    // A token file written by hand (with a trailing newline) is used as is.
    std::fs::write(datadir.join("auth_token"), "my-own-token\n").expect("write");
    let daemon = Daemon::start(&datadir, &[]);
    assert_eq!(
        daemon
            .get(
                "/api/v1/wallet",
                &[("Authorization", "Bearer my-own-token")]
            )
            .0,
        200
    );
}

#[test]
fn secret_show_and_refresh() {
    let (_tmp, datadir) = new_datadir();
    let shown = berthd(&datadir, &["secret", "show"]);
    assert!(shown.status.success());
    let shown = String::from_utf8(shown.stdout).expect("utf8");
    assert_eq!(
        shown.trim(),
        token(&datadir),
        "show creates and prints the token"
    );

    let secret = "11".repeat(32);
    let refreshed = berthd(&datadir, &["secret", "refresh", "--secret", &secret]);
    assert!(refreshed.status.success());
    let mut raw = vec![0u8];
    raw.extend([0x11u8; 32]);
    let expected = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
    assert_eq!(
        String::from_utf8(refreshed.stdout).expect("utf8").trim(),
        expected
    );
    assert_eq!(token(&datadir), expected);

    let random = berthd(&datadir, &["secret", "refresh"]);
    assert!(random.status.success());
    assert_ne!(
        token(&datadir),
        expected,
        "refresh without --secret makes a new one"
    );

    let bad = berthd(&datadir, &["secret", "refresh", "--secret", "abcd"]);
    assert!(!bad.status.success(), "a short secret is refused");
}

#[test]
fn a_datadir_another_user_owns_is_refused_before_anything_is_written() {
    // As on the appliance: the datadir is the service user's, and root runs a command.
    let (_tmp, datadir) = new_datadir();
    std::fs::create_dir_all(&datadir).expect("mkdir");
    const NOBODY: u32 = 65534;
    if let Err(e) = std::os::unix::fs::chown(&datadir, Some(NOBODY), Some(NOBODY)) {
        harness::skip(
            "a_datadir_another_user_owns_is_refused_before_anything_is_written",
            &format!("cannot chown as this user ({e})"),
        );
        return;
    }
    for args in [
        &["tls", "show"][..],
        &["secret", "show"],
        &["seed", "status"],
        &["--port", "0"],
    ] {
        let out = berthd(&datadir, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{args:?} runs in another user's datadir"
        );
        assert!(
            stderr.contains("belongs to")
                && stderr.contains("uid 65534")
                && stderr.contains("runuser -u"),
            "{args:?}: {stderr}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(&datadir).expect("ls").collect();
    assert!(left.is_empty(), "nothing was written: {left:?}");

    // Its owner is served as before.
    let own_uid = rustix::process::geteuid().as_raw();
    std::os::unix::fs::chown(&datadir, Some(own_uid), None).expect("chown back");
    assert!(berthd(&datadir, &["tls", "show"]).status.success());
}

#[test]
fn no_auth_rules() {
    let (_tmp, datadir) = new_datadir();
    let refused = Command::new(BIN)
        .arg("--datadir")
        .arg(&datadir)
        .args([
            "--no-auth",
            "--host",
            "0.0.0.0",
            "--port",
            &free_port().to_string(),
        ])
        .output()
        .expect("run");
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("refusing to start"), "{err}");

    let daemon = Daemon::start(&datadir, &["--no-auth"]);
    assert_eq!(
        daemon.get("/api/v1/wallet", &[]).0,
        200,
        "--no-auth on loopback serves without a token"
    );
    drop(daemon);

    // Also plain HTTP on 0.0.0.0, where TLS is otherwise on: something in front of
    // berthd protects the port, as barkd's flag says.
    let daemon = Daemon::start(
        &datadir,
        &["--dangerously-allow-remote-no-auth", "--host", "0.0.0.0"],
    );
    assert_eq!(daemon.get("/api/v1/wallet", &[]).0, 200);
}

#[test]
fn second_instance_is_refused() {
    let (_tmp, datadir) = new_datadir();
    let first = Daemon::start(&datadir, &[]);
    match Daemon::try_start(&datadir, &[]) {
        Err(out) => assert!(
            out.contains("another barkd is already running")
                && out.contains(&format!("(pid {})", first.child.id())),
            "barkd's words and the holder's pid: {out}"
        ),
        Ok(_) => panic!("a second berthd on the same datadir must not start"),
    }
}

/// barkd 0.8 takes `barkd.lock` with bark's own lock type at start: while that lock
/// is held (here by this test process, through the same bark code barkd runs), berthd
/// refuses with barkd's words; while berthd runs, bark's lock is refused. The lock file
/// survives a wallet delete (`docs/operations.md`).
#[test]
fn berthd_and_barkd_share_one_lock() {
    use bark::lock_manager::PidLockError;
    use bark::lock_manager::pid_flock::FlockPidLockManager;
    let (_tmp, datadir) = new_datadir();
    let barkd = FlockPidLockManager::new_with_lock_file(&datadir, "barkd.lock").expect("lock");
    match Daemon::try_start(&datadir, &[]) {
        Err(out) => assert!(
            out.contains("another barkd is already running")
                && out.contains(&format!("(pid {})", std::process::id())),
            "{out}"
        ),
        Ok(_) => panic!("berthd must not start beside a barkd"),
    }
    drop(barkd);

    let daemon = Daemon::start(&datadir, &[]);
    match FlockPidLockManager::new_with_lock_file(&datadir, "barkd.lock") {
        Err(PidLockError::AlreadyHeld { pid, .. }) => assert_eq!(pid, Some(daemon.child.id())),
        other => panic!("barkd must not start beside berthd: {:?}", other.err()),
    }
    assert!(
        !datadir.join("berthd.lock").exists(),
        "the retired lock file is not made"
    );
}

/// The same against a real barkd 0.8.0 (`cargo install bark-cli --version 0.8.0`, or
/// `BARKD=1` for the regtest stack script): each refuses the other's datadir.
#[test]
#[ignore = "needs BARKD_EXEC: run scripts/e2e"]
fn a_real_barkd_and_berthd_refuse_each_other() {
    let barkd_exec = std::env::var_os("BARKD_EXEC").expect("BARKD_EXEC names a barkd binary");
    let (_tmp, datadir) = new_datadir();
    let barkd_port = free_port().to_string();
    let run_barkd = || {
        std::process::Command::new(&barkd_exec)
            .args(["--datadir"])
            .arg(&datadir)
            .args(["--port", &barkd_port, "--no-logfile"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn barkd")
    };
    let mut barkd = run_barkd();
    wait_until("barkd to answer /ping", 30, || {
        try_request(barkd_port.parse().expect("port"), "GET", "/ping", &[], None).is_ok()
    });
    match Daemon::try_start(&datadir, &[]) {
        Err(out) => assert!(out.contains("another barkd is already running"), "{out}"),
        Ok(_) => panic!("berthd must not start beside a real barkd"),
    }
    barkd.kill().expect("stop barkd");
    barkd.wait().expect("reap barkd");

    let _berthd = Daemon::start(&datadir, &[]);
    let refused = run_barkd().wait_with_output().expect("barkd runs");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "barkd must refuse: {stderr}");
    assert!(
        stderr.contains("another barkd is already running"),
        "{stderr}"
    );
}

#[test]
fn cors_is_deny_all_unless_origins_are_given() {
    let (_tmp, datadir) = new_datadir();
    let preflight = [
        ("Origin", "http://app.example"),
        ("Access-Control-Request-Method", "GET"),
        ("Access-Control-Request-Headers", "authorization"),
    ];
    {
        let daemon = Daemon::start(&datadir, &[]);
        let (_, raw) = request(daemon.port, "OPTIONS", "/api/v1/wallet", &preflight, None);
        assert!(
            !raw.to_ascii_lowercase()
                .contains("access-control-allow-origin"),
            "{raw}"
        );
    }
    let daemon = Daemon::start(
        &datadir,
        &[
            "--allowed-origins",
            "http://app.example,http://other.example:8080",
        ],
    );
    let (_, raw) = request(daemon.port, "OPTIONS", "/api/v1/wallet", &preflight, None);
    assert!(
        raw.to_ascii_lowercase()
            .contains("access-control-allow-origin: http://app.example"),
        "{raw}"
    );

    let bad = berthd(
        &datadir,
        &[
            "--allowed-origins",
            "app.example",
            "--port",
            &free_port().to_string(),
        ],
    );
    assert!(
        !bad.status.success(),
        "an origin without a scheme is refused"
    );
}

#[test]
fn mnemonic_endpoint_exists_only_when_exposed_and_store_check_reads_the_datadir() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &["--expose-mnemonic"]);
    let auth = format!("Bearer {}", token(&datadir));
    let (status, raw) = daemon.get("/api/v1/wallet/mnemonic", &[("Authorization", &auth)]);
    assert_eq!(status, 422, "exposed, but there is no wallet yet: {raw}");
    assert_eq!(daemon.terminate().0.code(), Some(0));

    let out = berthd(&datadir, &["store", "check"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("integrity: ok") && text.contains("invariants: ok"),
        "{text}"
    );
    assert!(
        datadir.join("debug.log").exists(),
        "the log file is written by default"
    );
}

#[test]
fn berth_toml_is_read_and_a_bad_one_refused() {
    let (_tmp, datadir) = new_datadir();
    std::fs::create_dir_all(&datadir).expect("mkdir");
    std::fs::write(datadir.join("berth.toml"), "[store]\ncache_size_mib = 4\n").expect("write");
    drop(Daemon::start(&datadir, &[]));
    std::fs::write(datadir.join("berth.toml"), "[store]\ncache_size = 4\n").expect("write");
    match Daemon::try_start(&datadir, &[]) {
        Err(out) => assert!(
            out.contains("berth.toml") && out.contains("cache_size"),
            "{out}"
        ),
        Ok(_) => panic!("a berth.toml with an unknown key must refuse to start"),
    }
}

#[test]
fn lightning_input_is_checked_before_anything_else() {
    use lightning_invoice::Currency;
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = [("Authorization", bearer.as_str())];
    let regtest = invoice(Currency::Regtest, Some(50_000_000), 3);
    let any_amount = invoice(Currency::Regtest, None, 4);
    let pay = |body: serde_json::Value| {
        let (status, raw) = daemon.post("/api/v1/lightning/pay", &auth, &body.to_string());
        (
            status,
            json_of(&raw)["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    };
    let bad: &[(&str, serde_json::Value, &str)] = &[
        (
            "garbage",
            serde_json::json!({"destination": "not a destination"}),
            "destination",
        ),
        (
            "no destination",
            serde_json::json!({"amount_sat": 1}),
            "destination",
        ),
        (
            "comment on an invoice",
            serde_json::json!({"destination": regtest, "comment": "hi"}),
            "comment",
        ),
        (
            "zero amount",
            serde_json::json!({"destination": any_amount, "amount_sat": 0}),
            "amount_sat",
        ),
        (
            "more than all bitcoin",
            serde_json::json!({"destination": any_amount, "amount_sat": 2_100_000_000_000_001u64}),
            "amount_sat",
        ),
        (
            "negative amount",
            serde_json::json!({"destination": any_amount, "amount_sat": -5}),
            "amount_sat",
        ),
        (
            "address without amount",
            serde_json::json!({"destination": "satoshi@example.com"}),
            "amount_sat",
        ),
        (
            "lnurl without amount",
            serde_json::json!({"destination": "LNURL1DP68GURN8GHJ7UM9WFMXJCM99E3K7MF0V9CXJ0M385EKVCENXC6R2C35XVUKXEFCV5MKVV34X5EKZD3EV56NYD3HXQURZEPEXEJXXEPNXSCRVWFNV9NXZCN9XQ6XYEFHVGCXXCMYXYMNSERXFQ5FNS"}),
            "amount_sat",
        ),
    ];
    for (what, body, field) in bad {
        let (status, message) = pay(body.clone());
        assert_eq!(status, 400, "{what}: {message}");
        assert!(
            message.contains(field),
            "{what}: the message names {field}: {message}"
        );
    }
    // Well-formed, but there is no wallet.
    let (status, message) = pay(serde_json::json!({"destination": format!("lightning:{regtest}")}));
    assert_eq!(status, 422, "{message}");
    let (status, raw) = daemon.post(
        "/api/v1/wallet/send",
        &auth,
        &serde_json::json!({"destination": regtest, "comment": "hi"}).to_string(),
    );
    assert_eq!(status, 400, "wallet/send keeps the same rules: {raw}");

    for path in [
        "/api/v1/lightning/receives/nothex",
        "/api/v1/lightning/sends/lno1zzz",
        "/api/v1/lightning/receives/abcd",
    ] {
        let (status, raw) = daemon.get(path, &auth);
        assert_eq!(status, 400, "{path}: {raw}");
    }
    let hash = invoice_hash(3);
    for path in [
        format!("/api/v1/lightning/sends/{hash}"),
        format!("/api/v1/lightning/sends/{regtest}"),
        format!("/api/v1/lightning/receives/{hash}"),
        "/api/v1/lightning/receives".to_string(),
    ] {
        let (status, raw) = daemon.get(&path, &auth);
        assert_eq!(status, 422, "no wallet: {path}: {raw}");
    }
    for (path, body) in [
        (
            "/api/v1/lightning/receives/invoice",
            serde_json::json!({"amount_sat": 0}),
        ),
        (
            "/api/v1/lightning/receives/invoice",
            serde_json::json!({"amount_sat": 1000, "description": "x".repeat(700)}),
        ),
        (
            "/api/v1/lightning/receives/invoice/for-address",
            serde_json::json!({"amount_sat": 1000, "address": "bcrt1qnotark"}),
        ),
        (
            "/api/v1/lightning/receives/invoice/for-address",
            serde_json::json!({"amount_sat": 1000}),
        ),
    ] {
        let (status, raw) = daemon.post(path, &auth, &body.to_string());
        assert_eq!(status, 400, "{path} {body}: {raw}");
    }
}

#[test]
fn idempotency_keys_are_checked_and_a_failure_frees_the_key() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let bearer = format!("Bearer {}", token(&datadir));
    let send = |key: &str, body: &str| {
        daemon.post(
            "/api/v1/boards/board-amount",
            &[("Authorization", &bearer), ("Idempotency-Key", key)],
            body,
        )
    };
    let body = r#"{"amount_sat": 100000}"#;
    for bad in ["", &"k".repeat(256), "has space"] {
        let (status, raw) = send(bad, body);
        assert_eq!(status, 400, "key {bad:?}: {raw}");
    }
    // No wallet: a 422, which frees the key; the same key then runs again (and is
    // not answered from a replay).
    for _ in 0..2 {
        let (status, raw) = send("retry-1", body);
        assert_eq!(status, 422, "{raw}");
        assert!(
            !raw.to_ascii_lowercase().contains("idempotent-replayed"),
            "{raw}"
        );
    }
    let (status, raw) = send("retry-1", r#"{"amount_sat": 5}"#);
    assert_eq!(status, 422, "a freed key takes another request too: {raw}");
    assert!(
        json_of(&raw)["message"]
            .as_str()
            .is_some_and(|m| !m.contains("Idempotency")),
        "{raw}"
    );
}

#[test]
fn a_request_cut_short_by_a_restart_is_never_run_again_under_its_key() {
    use berth::api::idempotency::{TTL, key_hash, request_hash};
    let (_tmp, datadir) = new_datadir();
    // Start once so the datadir exists, then leave a claimed, unfinished key behind,
    // as a crash in the middle of a payment would.
    let (status, _) = Daemon::start(&datadir, &[]).terminate();
    assert_eq!(status.code(), Some(0));
    let path = "/api/v1/onchain/send";
    let body = r#"{"destination":"bcrt1qexample","amount_sat":1000}"#;
    with_store(&datadir, async |store| {
        let now = u64::try_from(chrono::Utc::now().timestamp_micros()).expect("time");
        let ttl = u64::try_from(TTL.as_micros()).expect("ttl");
        let claim = store
            .claim_idempotency_key(
                key_hash(&berth::access::Credential::Admin, "pay-1"),
                request_hash("POST", path, body.as_bytes()),
                now,
                ttl,
            )
            .await
            .expect("claim");
        assert_eq!(claim, berth::store::idempotency::Claim::Claimed);
    });

    let daemon = Daemon::start(&datadir, &[]);
    let bearer = format!("Bearer {}", token(&datadir));
    let send = |body: &str| {
        daemon.post(
            path,
            &[("Authorization", &bearer), ("Idempotency-Key", "pay-1")],
            body,
        )
    };
    let (status, raw) = send(body);
    assert_eq!(status, 409, "outcome unknown: not run again: {raw}");
    let message = json_of(&raw)["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(message.contains("restart"), "{message}");
    assert_eq!(json_of(&raw)["code"], "conflict", "{raw}");
    let (status, raw) = send(r#"{"destination":"bcrt1qother","amount_sat":1000}"#);
    assert_eq!(status, 422, "another request under the same key: {raw}");
    assert!(
        json_of(&raw)["message"]
            .as_str()
            .is_some_and(|m| m.contains("different request")),
        "{raw}"
    );
}

/// Start, SIGTERM, start again on the same datadir: the second start finds the
/// database closed cleanly and repairs nothing. (The API's routes, held by the
/// approvals' runner, once kept the store open past the end: every start repaired
/// the database, a walk of the whole file on a big wallet.)
fn restarts_without_a_repair(datadir: &std::path::Path, loaded: bool) {
    let log = datadir.join("second-start.log");
    for start in ["first", "second"] {
        let daemon = Daemon::start_logged(datadir, &[], &[], &log);
        if loaded {
            wait_loaded(&daemon, datadir);
        }
        let (status, _) = daemon.terminate();
        assert!(status.success(), "{start} stop: {status}");
        let text = std::fs::read_to_string(&log).expect("log");
        assert!(
            !text.contains("repairing"),
            "the {start} start repaired the database: {text}"
        );
        assert!(text.contains("berthd stopped"), "{text}");
    }
}

#[test]
fn a_stopped_daemon_leaves_its_database_closed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    restarts_without_a_repair(tmp.path(), false);
}

#[test]
#[ignore = "needs BITCOIND_EXEC: run scripts/e2e"]
fn a_stopped_daemon_with_a_loaded_wallet_leaves_its_database_closed() {
    let bitcoind = Bitcoind::start("a_stopped_daemon_with_a_loaded_wallet");
    let (_tmp, datadir) = datadir_with_wallet(&bitcoind);
    restarts_without_a_repair(&datadir, true);
}

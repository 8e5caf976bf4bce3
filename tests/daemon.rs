//! The `berthd` process contract, tested on the real binary: a temporary datadir, a
//! free loopback port, raw HTTP/1.1 over a TCP socket (so malformed and duplicated
//! headers can be sent exactly).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;

const BIN: &str = env!("CARGO_BIN_EXE_berthd");

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

struct Daemon {
    child: Child,
    port: u16,
}

impl Daemon {
    fn start(datadir: &Path, args: &[&str]) -> Daemon {
        Self::try_start(datadir, args).unwrap_or_else(|out| panic!("berthd did not start: {out}"))
    }

    /// Start and wait for `/ping`; on failure, what the process printed.
    fn try_start(datadir: &Path, args: &[&str]) -> Result<Daemon, String> {
        let port = free_port();
        let mut child = Command::new(BIN)
            .arg("--datadir")
            .arg(datadir)
            .args(["--port", &port.to_string()])
            .args(args)
            .env_remove("BARKD_EXPOSE_MNEMONIC")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn berthd");
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait().expect("try_wait") {
                let mut err = String::new();
                child
                    .stderr
                    .take()
                    .expect("stderr")
                    .read_to_string(&mut err)
                    .expect("read stderr");
                return Err(format!("exited with {status}: {err}"));
            }
            if let Ok((200, _)) = try_request(port, "GET", "/ping", &[], None) {
                return Ok(Daemon { child, port });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        Err("no /ping answer within 20 s".into())
    }

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        request(self.port, "GET", path, headers, None)
    }

    /// SIGTERM, then the exit status and how long it took.
    fn terminate(mut self) -> (std::process::ExitStatus, Duration) {
        let start = Instant::now();
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return (status, start.elapsed());
            }
            assert!(Instant::now() < deadline, "berthd ignored SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn try_request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body.unwrap_or(""));
    stream.write_all(req.as_bytes())?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, raw))
}

fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> (u16, String) {
    try_request(port, method, path, headers, body).expect("request")
}

fn body_of(raw: &str) -> &str {
    raw.split("\r\n\r\n").nth(1).unwrap_or("")
}

fn json_of(raw: &str) -> serde_json::Value {
    serde_json::from_str(body_of(raw)).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"))
}

fn token(datadir: &Path) -> String {
    std::fs::read_to_string(datadir.join("auth_token"))
        .expect("token file")
        .trim()
        .to_string()
}

fn berthd(datadir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--datadir")
        .arg(datadir)
        .args(args)
        .output()
        .expect("run berthd")
}

fn new_datadir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let datadir = dir.path().join("data");
    (dir, datadir)
}

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
    assert_eq!(json_of(&raw), serde_json::json!({ "fingerprint": null }));

    let (status, raw) = daemon.get("/no/such/path", &auth);
    assert_eq!(status, 404, "{raw}");
    assert!(json_of(&raw)["message"].is_string());

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

    let daemon = Daemon::start(
        &datadir,
        &["--dangerously-allow-remote-no-auth", "--host", "0.0.0.0"],
    );
    assert_eq!(daemon.get("/api/v1/wallet", &[]).0, 200);
}

#[test]
fn second_instance_is_refused() {
    let (_tmp, datadir) = new_datadir();
    let _first = Daemon::start(&datadir, &[]);
    match Daemon::try_start(&datadir, &[]) {
        Err(out) => assert!(out.contains("already running"), "{out}"),
        Ok(_) => panic!("a second berthd on the same datadir must not start"),
    }
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

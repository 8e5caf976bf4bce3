//! Running the real `berthd` binary in tests: a temporary datadir, a free loopback
//! port, raw HTTP/1.1 over a TCP socket (so malformed and duplicated headers can be
//! sent exactly).
#![allow(dead_code)]

pub mod browser;
pub mod nwc;
pub mod tls;
pub mod webhooks;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_berthd");

/// The berthd that [`Daemon`] and [`berthd`] run: `BERTH_BENCH_BERTHD` when set (a
/// bench measuring another build of it, such as the shipped `dist` profile's), else
/// the one cargo built with this test or bench.
pub fn bin() -> PathBuf {
    std::env::var_os("BERTH_BENCH_BERTHD").map_or_else(|| PathBuf::from(BIN), PathBuf::from)
}

/// A port no socket holds on any address: asked of the wildcard address, because a
/// daemon bound to 0.0.0.0 collides with a port used on any address (the tests' own
/// clients from 127.0.0.2 hold ephemeral ports that 127.0.0.1 alone would not show).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

pub struct Daemon {
    pub child: Child,
    pub port: u16,
}

/// Reads a child's stderr to the end on a thread, keeping the last 64 KiB: a pipe
/// nobody reads fills up and then blocks every log write of the daemon.
fn drain(mut stderr: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        const KEEP: usize = 64 * 1024;
        let mut kept = Vec::new();
        let mut buf = [0u8; 8192];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&buf[..n]);
            if kept.len() > 2 * KEEP {
                kept.drain(..kept.len() - KEEP);
            }
        }
        String::from_utf8_lossy(&kept).into_owned()
    })
}

impl Daemon {
    /// Start berthd on a free port without waiting for it (output discarded): for
    /// daemons that answer only over TLS, which the caller waits for.
    pub fn spawn(datadir: &Path, args: &[&str]) -> Daemon {
        Self::spawn_with(datadir, args, Stdio::null(), &[])
    }

    /// berthd on a free port with this datadir, arguments and extra environment, its
    /// stderr to `stderr`. The caller's seed settings never leak in.
    fn spawn_with(datadir: &Path, args: &[&str], stderr: Stdio, env: &[(&str, &str)]) -> Daemon {
        Self::spawn_program(&bin(), datadir, args, stderr, env)
    }

    /// `program` (berthd, or barkd for a comparison: both take `--datadir` and `--port`).
    fn spawn_program(
        program: &Path,
        datadir: &Path,
        args: &[&str],
        stderr: Stdio,
        env: &[(&str, &str)],
    ) -> Daemon {
        let port = free_port();
        let child = Command::new(program)
            .arg("--datadir")
            .arg(datadir)
            .args(["--port", &port.to_string()])
            .args(args)
            .env_remove("BARKD_EXPOSE_MNEMONIC")
            .env_remove("BERTH_SEED_PASSPHRASE")
            .env_remove("CREDENTIALS_DIRECTORY")
            .env_remove("CONFIGURATION_DIRECTORY")
            // Under a systemd-run test runner these would reach our test daemons.
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .env_remove("JOURNAL_STREAM")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn berthd");
        Daemon { child, port }
    }

    pub fn start(datadir: &Path, args: &[&str]) -> Daemon {
        Self::try_start(datadir, args).unwrap_or_else(|out| panic!("berthd did not start: {out}"))
    }

    /// Start and wait for `/ping`; on failure, what the process printed.
    pub fn try_start(datadir: &Path, args: &[&str]) -> Result<Daemon, String> {
        Self::try_start_with_env(datadir, args, &[])
    }

    /// [`Daemon::try_start`] with extra environment variables.
    pub fn try_start_with_env(
        datadir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Daemon, String> {
        // A free port can be taken between `free_port` and berthd's bind (the tests'
        // own clients get ephemeral ports from the same range): then try another one.
        for _ in 0..4 {
            match Self::start_once(datadir, args, env) {
                Err(out) if out.contains("Address already in use") => continue,
                other => return other,
            }
        }
        Self::start_once(datadir, args, env)
    }

    fn start_once(datadir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Daemon, String> {
        let mut daemon = Self::spawn_with(datadir, args, Stdio::piped(), env);
        let stderr = drain(daemon.child.stderr.take().expect("stderr"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(status) = daemon.child.try_wait().expect("try_wait") {
                let err = stderr.join().unwrap_or_default();
                return Err(format!("exited with {status}: {err}"));
            }
            if let Ok((200, _)) = try_request(daemon.port, "GET", "/ping", &[], None) {
                return Ok(daemon);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // Dropping the daemon kills it.
        Err("no /ping answer within 20 s".into())
    }

    /// Start with extra environment, berthd's stderr going to the file `log`, and wait
    /// for `/ping`.
    pub fn start_logged(datadir: &Path, args: &[&str], env: &[(&str, &str)], log: &Path) -> Daemon {
        Self::start_program_logged(&bin(), datadir, args, env, log)
    }

    /// [`Daemon::start_logged`] of another program that serves barkd's API (barkd).
    pub fn start_program_logged(
        program: &Path,
        datadir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        log: &Path,
    ) -> Daemon {
        let create = || std::fs::File::create(log).expect("create the log");
        Self::start_program_into(program, datadir, args, env, &create, log)
    }

    /// [`Daemon::start_logged`], its stderr appended to `log` (a restart keeps the
    /// earlier runs' log before its own).
    pub fn start_logged_appending(datadir: &Path, args: &[&str], log: &Path) -> Daemon {
        let append = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .expect("open the log")
        };
        Self::start_program_into(&bin(), datadir, args, &[], &append, log)
    }

    /// Start `program` with its stderr into the file `open` gives (`log`), and wait for
    /// `/ping`; a start that lost its free port to another process is tried again on
    /// another (as [`Daemon::try_start_with_env`] does).
    fn start_program_into(
        program: &Path,
        datadir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        open: &dyn Fn() -> std::fs::File,
        log: &Path,
    ) -> Daemon {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let file = open();
            let from = file.metadata().map_or(0, |m| m.len()) as usize;
            let mut daemon = Self::spawn_program(program, datadir, args, Stdio::from(file), env);
            let mut exited = None;
            wait_until("the daemon answers /ping", 30, || {
                exited = daemon.child.try_wait().expect("try_wait");
                exited.is_some()
                    || matches!(
                        try_request(daemon.port, "GET", "/ping", &[], None),
                        Ok((200, _))
                    )
            });
            let Some(status) = exited else {
                return daemon;
            };
            let printed = std::fs::read(log).unwrap_or_default();
            let printed = String::from_utf8_lossy(printed.get(from..).unwrap_or_default());
            if attempts < 5 && printed.contains("Address already in use") {
                continue;
            }
            panic!("{} exited with {status}: {printed}", program.display());
        }
    }

    /// Wait up to `secs` for the process to exit on its own: its exit status.
    pub fn wait_exit(&mut self, secs: u64) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        request(self.port, "GET", path, headers, None)
    }

    /// SIGTERM, then the exit status and how long it took.
    pub fn terminate(mut self) -> (std::process::ExitStatus, Duration) {
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

pub fn try_request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    // Long enough for wallet operations that talk to the Ark server (e2e).
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    stream.write_all(raw_request("127.0.0.1", method, path, headers, body).as_bytes())?;
    // A binary body (a backup download) is kept lossily: use `get_bytes` for its bytes.
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    Ok((status_of(&raw), raw))
}

/// A GET whose body may be binary: the status, the head (status line and headers) and
/// the body's bytes.
pub fn get_bytes(port: u16, path: &str, headers: &[(&str, &str)]) -> (u16, String, Vec<u8>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    stream
        .write_all(raw_request("127.0.0.1", "GET", path, headers, None).as_bytes())
        .expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(raw.len(), |p| p + 4);
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    (status_of(&head), head, raw[split..].to_vec())
}

/// A POST of an HTML form (`application/x-www-form-urlencoded`), as a browser sends it.
pub fn post_form(port: u16, path: &str, headers: &[(&str, &str)], form: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let mut req =
        format!("POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    for (name, value) in headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str(&format!(
        "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
        form.len()
    ));
    stream.write_all(req.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read");
    let raw = String::from_utf8_lossy(&raw).into_owned();
    (status_of(&raw), raw)
}

/// An HTTP/1.1 request as sent on the wire, `Connection: close`, a JSON body if any.
pub fn raw_request(
    host: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> String {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
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
    req
}

/// The status code of a raw HTTP response (0 when there is none).
pub fn status_of(raw: &str) -> u16 {
    raw.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> (u16, String) {
    try_request(port, method, path, headers, body).expect("request")
}

/// A JSON call with `bearer`: the status and the JSON body (`null` when empty).
pub fn json_call(
    daemon: &Daemon,
    method: &str,
    path: &str,
    bearer: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let body = body.map(|b| b.to_string());
    let (status, raw) = request(
        daemon.port,
        method,
        path,
        &[
            ("Authorization", bearer),
            ("Content-Type", "application/json"),
        ],
        body.as_deref(),
    );
    let value = if body_of(&raw).is_empty() {
        serde_json::Value::Null
    } else {
        json_of(&raw)
    };
    (status, value)
}

pub fn body_of(raw: &str) -> &str {
    raw.split("\r\n\r\n").nth(1).unwrap_or("")
}

pub fn json_of(raw: &str) -> serde_json::Value {
    serde_json::from_str(body_of(raw)).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"))
}

pub fn token(datadir: &Path) -> String {
    std::fs::read_to_string(datadir.join("auth_token"))
        .expect("token file")
        .trim()
        .to_string()
}

pub fn berthd(datadir: &Path, args: &[&str]) -> Output {
    berthd_with_env(datadir, args, &[])
}

/// Run a `berthd` command with extra environment (and none of the caller's seed settings).
pub fn berthd_with_env(datadir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(bin())
        .arg("--datadir")
        .arg(datadir)
        .args(args)
        .env_remove("BERTH_SEED_PASSPHRASE")
        .env_remove("CREDENTIALS_DIRECTORY")
        .env_remove("CONFIGURATION_DIRECTORY")
        .envs(env.iter().copied())
        .output()
        .expect("run berthd")
}

pub fn new_datadir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let datadir = dir.path().join("data");
    (dir, datadir)
}

/// Whether a `/health` report is short of `ready` only because of the disk: on a test
/// machine that is low on space, the verdict is right and the test is not about it.
pub fn only_disk_is_short(health: &serde_json::Value) -> bool {
    health["reasons"].as_array().is_some_and(|r| {
        !r.is_empty()
            && r.iter()
                .all(|r| r.as_str().is_some_and(|r| r.starts_with("the disk is")))
    })
}

pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// Open a pairing window with `berthd pair`: the URI it printed.
pub fn open_window(datadir: &Path, scopes: &str) -> String {
    let out = berthd(datadir, &["pair", "--scopes", scopes]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "berthd pair failed: {}{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find(|l| l.starts_with("berth://pair?"))
        .unwrap_or_else(|| panic!("no URI in: {stdout}"))
        .to_string()
}

/// Sign a browser in to the console of the daemon on `port` as a new device with
/// `scopes`: a pairing window opened on the box, its code posted to the sign-in form
/// from the console's own origin. The session cookie (`name=value`) the answer sets.
pub fn console_session(port: u16, datadir: &Path, scopes: &str, name: &str) -> String {
    let uri = open_window(datadir, scopes);
    let code = uri_param(&uri, "t");
    let (status, raw) = post_form(
        port,
        "/console/sign-in",
        &[("Origin", &format!("http://127.0.0.1:{port}"))],
        &format!("code={code}&name={name}"),
    );
    assert_eq!(status, 303, "{raw}");
    raw.lines()
        .find_map(|l| {
            let (header, value) = l.split_once(':')?;
            header
                .eq_ignore_ascii_case("set-cookie")
                .then(|| value.trim())
        })
        .and_then(|v| v.split(';').next())
        .unwrap_or_else(|| panic!("no session cookie: {raw}"))
        .to_owned()
}

pub fn uri_param<'a>(uri: &'a str, key: &str) -> &'a str {
    uri.split(['?', '&'])
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {uri}"))
}

/// Pair a device with `scopes` (comma-separated) on a running plain-HTTP daemon: its
/// `Authorization` value and its id.
pub fn pair_device(daemon: &Daemon, datadir: &Path, scopes: &str) -> (String, String) {
    let uri = open_window(datadir, scopes);
    let code = uri_param(&uri, "t");
    let (status, raw) = daemon.post(
        "/api/v1/pair",
        &[],
        &format!(r#"{{"code":"{code}","name":"{scopes}"}}"#),
    );
    assert_eq!(status, 200, "{raw}");
    let paired = json_of(&raw);
    (
        bearer(paired["token"].as_str().expect("token")),
        paired["device"]["id"].as_str().expect("id").to_string(),
    )
}

/// A blocking TCP connection to loopback `port` from the source address `source` (any
/// of 127.0.0.0/8 works on Linux), as a second machine on the LAN would connect.
pub fn connect_from(source: &str, port: u16) -> TcpStream {
    let socket = std::net::SocketAddr::new(source.parse().expect("source ip"), 0);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    let stream = rt
        .block_on(async {
            let s = tokio::net::TcpSocket::new_v4()?;
            s.bind(socket)?;
            s.connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
                .await?
                .into_std()
        })
        .expect("connect from the source address");
    stream.set_nonblocking(false).expect("blocking");
    stream
}

/// A new datadir holding this `berth.toml`.
pub fn datadir_with_berth_toml(toml: &str) -> (tempfile::TempDir, PathBuf) {
    let (dir, datadir) = new_datadir();
    std::fs::create_dir_all(&datadir).expect("datadir");
    std::fs::write(datadir.join("berth.toml"), toml).expect("berth.toml");
    (dir, datadir)
}

/// berthd on a datadir holding `berth_toml`, with extra environment `env` (its stderr
/// in `berthd.log` beside the datadir), and a regtest wallet whose chain source and
/// Ark server are dead URLs: it exists and holds nothing, and anything that needs the
/// wallet open answers that it is not loaded. With the admin bearer.
pub fn berthd_with_offline_wallet(
    berth_toml: &str,
    env: &[(&str, &str)],
) -> (tempfile::TempDir, PathBuf, Daemon, String) {
    let (tmp, datadir) = datadir_with_berth_toml(berth_toml);
    let daemon = Daemon::start_logged(&datadir, &["-q"], env, &tmp.path().join("berthd.log"));
    let bearer = format!("Bearer {}", token(&datadir));
    let dead = || format!("http://127.0.0.1:{}", free_port());
    let create = serde_json::json!({
        "network": "regtest",
        "ark_server": dead(),
        "chain_source": { "esplora": { "url": dead() } },
        "force": true,
    });
    let (status, raw) = daemon.post(
        "/api/v1/wallet/create",
        &[("Authorization", &bearer)],
        &create.to_string(),
    );
    assert_eq!(status, 200, "{raw}");
    (tmp, datadir, daemon, bearer)
}

impl Daemon {
    pub fn post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        request(self.port, "POST", path, headers, Some(body))
    }
}

/// Whether `name` is a program on `PATH`.
pub fn installed(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
}

/// For a test that cannot run on this machine (a tool or a capability it lacks): say
/// why on stderr and, when `scripts/test` runs the suite, add a line to
/// `$BERTH_SKIP_LOG`, so that its closing line counts the test as skipped, not passed.
/// The test returns right after.
pub fn skip(test: &str, reason: &str) {
    eprintln!("skipped {test}: {reason}");
    if let Some(log) = std::env::var_os("BERTH_SKIP_LOG") {
        use std::io::Write as _;
        let line = format!("{test}\t{reason}\n");
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        written.expect("append to BERTH_SKIP_LOG");
    }
}

/// A regtest bitcoind from `BITCOIND_EXEC`, on free loopback ports with cookie auth.
/// Tests that need one are `#[ignore]`d (see `scripts/test`); run with the variable
/// set (`scripts/e2e`), a missing one fails the test.
pub struct Bitcoind {
    child: Child,
    pub rpc_port: u16,
    pub datadir: tempfile::TempDir,
}

impl Bitcoind {
    pub fn start(test: &str) -> Bitcoind {
        let exec = std::env::var_os("BITCOIND_EXEC").unwrap_or_else(|| {
            panic!(
                "{test} needs BITCOIND_EXEC, a regtest bitcoind: run it with scripts/e2e \
                 (docs/testing.md)"
            )
        });
        let datadir = tempfile::tempdir().expect("tempdir");
        let rpc_port = free_port();
        let child = Command::new(exec)
            .arg("-regtest")
            .arg(format!("-datadir={}", datadir.path().display()))
            .arg(format!("-rpcport={rpc_port}"))
            .args([
                "-listen=0",
                "-server",
                "-txindex",
                "-fallbackfee=0.0001",
                "-printtoconsole=0",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("BITCOIND_EXEC is set but bitcoind does not start");
        let bitcoind = Bitcoind {
            child,
            rpc_port,
            datadir,
        };
        // Ready when its RPC answers with the cookie's credentials, as a wallet's chain
        // source would first use it: a test must not race bitcoind's start.
        wait_until("bitcoind's RPC", 60, || bitcoind.rpc_answers());
        bitcoind
    }

    fn basic_auth(&self) -> Option<String> {
        use base64::Engine as _;
        let cookie = std::fs::read_to_string(self.cookie()).ok()?;
        Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(cookie.trim())
        ))
    }

    fn rpc_answers(&self) -> bool {
        let Some(basic) = self.basic_auth() else {
            return false;
        };
        let call = r#"{"jsonrpc":"1.0","id":"ready","method":"getblockcount","params":[]}"#;
        matches!(
            try_request(
                self.rpc_port,
                "POST",
                "/",
                &[("Authorization", &basic)],
                Some(call)
            ),
            Ok((200, _))
        )
    }

    /// Call `method` with `params` (a JSON array); its `result`. Panics on an error.
    pub fn rpc(&self, method: &str, params: &str) -> serde_json::Value {
        let basic = self.basic_auth().expect("bitcoind's cookie");
        let call =
            format!(r#"{{"jsonrpc":"1.0","id":"test","method":"{method}","params":{params}}}"#);
        let (status, raw) = request(
            self.rpc_port,
            "POST",
            "/",
            &[("Authorization", &basic)],
            Some(&call),
        );
        assert_eq!(status, 200, "{method}: {raw}");
        json_of(&raw)["result"].clone()
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.rpc_port)
    }

    pub fn cookie(&self) -> PathBuf {
        self.datadir.path().join("regtest").join(".cookie")
    }
}

impl Drop for Bitcoind {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Poll `check` until it is true or `secs` pass; panics with `what` on timeout.
pub fn wait_until(what: &str, secs: u64, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("timed out after {secs} s waiting for {what}");
}

/// Read SSE lines from a raw connection until `events` data lines were seen; returns
/// (id, data) pairs.
pub fn read_sse(
    port: u16,
    headers: &[(&str, &str)],
    query: &str,
    events: usize,
) -> Vec<(Option<u64>, serde_json::Value)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut head = format!("GET /api/v1/notifications/sse?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("write");
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).expect("status line");
    assert!(status.contains(" 200 "), "{status}");
    let mut out = Vec::new();
    let mut id = None;
    let mut line = String::new();
    while out.len() < events {
        line.clear();
        reader
            .read_line(&mut line)
            .expect("an SSE line within 10 s");
        let line = line.trim_end();
        if let Some(v) = line
            .strip_prefix("id: ")
            .or_else(|| line.strip_prefix("id:"))
        {
            id = v.trim().parse().ok();
        } else if let Some(v) = line
            .strip_prefix("data: ")
            .or_else(|| line.strip_prefix("data:"))
        {
            out.push((
                id.take(),
                serde_json::from_str(v.trim()).expect("JSON data"),
            ));
        }
    }
    out
}

/// A BOLT11 invoice for `currency`, signed by a throwaway key, for `amount_msat`
/// (none: an any-amount invoice); `seed` makes its payment hash distinct. Nobody can
/// pay it: it is for starting payments and checking what berthd makes of them.
pub fn invoice(
    currency: lightning_invoice::Currency,
    amount_msat: Option<u64>,
    seed: u8,
) -> String {
    use bitcoin::hashes::{Hash, sha256};
    use bitcoin::secp256k1::{Secp256k1, SecretKey};
    let secp = Secp256k1::new();
    let key = SecretKey::from_slice(&[seed.max(1); 32]).expect("key");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock");
    let builder = lightning_invoice::InvoiceBuilder::new(currency)
        .description("berth test".into())
        .payment_hash(sha256::Hash::hash(&[seed, 0x42]))
        .payment_secret(lightning_invoice::PaymentSecret([seed; 32]))
        .duration_since_epoch(now)
        .min_final_cltv_expiry_delta(18);
    let signed = match amount_msat {
        Some(msat) => builder
            .amount_milli_satoshis(msat)
            .build_signed(|hash| secp.sign_ecdsa_recoverable(hash, &key)),
        None => builder.build_signed(|hash| secp.sign_ecdsa_recoverable(hash, &key)),
    };
    signed.expect("invoice builds").to_string()
}

/// The payment hash of an invoice made by [`invoice`] with `seed`.
pub fn invoice_hash(seed: u8) -> String {
    use bitcoin::hashes::{Hash, sha256};
    sha256::Hash::hash(&[seed, 0x42]).to_string()
}

/// Create a regtest wallet on `daemon` whose chain source is `bitcoind` and whose Ark
/// server is a dead port (`force`): a new seed needs no server to be created, so it is
/// loaded when create returns, and can do everything that does not need the server.
pub fn create_wallet_without_server(daemon: &Daemon, datadir: &Path, bitcoind: &Bitcoind) {
    let bearer = format!("Bearer {}", token(datadir));
    let create = serde_json::json!({
        "network": "regtest",
        "ark_server": format!("http://127.0.0.1:{}", free_port()),
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
    assert_eq!(status, 200, "{raw}");
    let (_, raw) = daemon.get("/api/v1/wallet", &[("Authorization", &bearer)]);
    if json_of(&raw)["loaded"] != serde_json::Value::Bool(true) {
        let log = std::fs::read_to_string(datadir.join("debug.log")).unwrap_or_default();
        panic!("not loaded when create returns: {raw}\n{log}");
    }
}

/// Wait until the daemon's wallet is loaded.
pub fn wait_loaded(daemon: &Daemon, datadir: &Path) {
    let bearer = format!("Bearer {}", token(datadir));
    wait_until("the wallet to load", 60, || {
        json_of(
            &daemon
                .get("/api/v1/wallet", &[("Authorization", &bearer)])
                .1,
        )["loaded"]
            == serde_json::Value::Bool(true)
    });
}

/// A datadir holding a wallet made by [`create_wallet_without_server`], with berthd
/// stopped again (so its store can be filled through the store API).
pub fn datadir_with_wallet(bitcoind: &Bitcoind) -> (tempfile::TempDir, PathBuf) {
    let (tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &["-q"]);
    create_wallet_without_server(&daemon, &datadir, bitcoind);
    let (status, _) = daemon.terminate();
    assert_eq!(status.code(), Some(0), "berthd stopped cleanly");
    (tmp, datadir)
}

/// Run `f` on the datadir's store (berthd must be stopped), on a runtime of its own.
pub fn with_store<T>(datadir: &Path, f: impl AsyncFnOnce(&berth::store::Store) -> T) -> T {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let (store, _) = berth::store::Store::open_async(
            &datadir.join("berth.redb"),
            &berth::store::StoreConfig::default(),
        )
        .await
        .expect("open the store");
        f(&store).await
    })
}

/// VmRSS of a process, kB (0 when it cannot be read).
pub fn rss_kb(pid: u32) -> u64 {
    status_kb(pid, "VmRSS")
}

/// A kB figure of a process's `/proc/<pid>/status` (`VmRSS`, `RssAnon`, `VmHWM`...),
/// 0 when it cannot be read.
pub fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.split(':').next() == Some(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// A new pending movement in `store` (subsystem `berth-test`, this `kind`), as bark
/// would record one; its id.
pub async fn new_movement(store: &berth::store::Store, kind: &str) -> bark::movement::MovementId {
    use bark::persist::BarkPersister;
    let subsystem = bark::movement::MovementSubsystem {
        name: "berth-test".into(),
        kind: kind.into(),
    };
    store
        .create_new_movement(
            bark::movement::MovementStatus::Pending,
            &subsystem,
            chrono::Local::now(),
            None,
        )
        .await
        .expect("a new movement")
}

// ---- TLS: the daemon's listener as a paired phone sees it (a pinned CA) ----

/// The datadir's CA, once the daemon has written it.
pub fn ca_pem(datadir: &Path) -> String {
    let path = datadir.join("tls").join("ca.pem");
    wait_until("the CA certificate", 20, || path.exists());
    std::fs::read_to_string(path).expect("ca.pem")
}

/// A TLS client session to the daemon at `ip`, checking the chain against the pinned
/// CA and (when `check_name`) that the certificate is valid for `name`.
pub fn tls_connect(
    ip: IpAddr,
    port: u16,
    config: Arc<rustls::ClientConfig>,
    name: &str,
) -> std::io::Result<rustls::StreamOwned<rustls::ClientConnection, TcpStream>> {
    let tcp = TcpStream::connect((ip, port))?;
    tcp.set_read_timeout(Some(Duration::from_secs(30)))?;
    let server_name = rustls::pki_types::ServerName::try_from(name.to_string())
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let connection = rustls::ClientConnection::new(config, server_name)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    // Drive the handshake now, so a certificate error shows here.
    while stream.conn.is_handshaking() {
        stream
            .conn
            .complete_io(&mut stream.sock)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
    }
    Ok(stream)
}

/// One HTTP/1.1 request over a fresh pinned TLS connection: status and raw response.
pub fn tls_request(
    port: u16,
    config: Arc<rustls::ClientConfig>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut stream = tls_connect("127.0.0.1".parse().expect("ip"), port, config, "localhost")?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
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
    let mut raw = Vec::new();
    // A peer that closes without close_notify is fine for a Connection: close answer.
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {}
        Err(e) => return Err(e),
    }
    let raw = String::from_utf8_lossy(&raw).into_owned();
    Ok((status_of(&raw), raw))
}

/// Start a daemon serving TLS and wait until it answers `/ping` over it.
pub fn start_tls(datadir: &Path, args: &[&str]) -> (Daemon, Arc<rustls::ClientConfig>, String) {
    let daemon = Daemon::spawn(datadir, args);
    let port = daemon.port;
    let ca = ca_pem(datadir);
    let config = tls::pinned_client_config(&ca, true);
    wait_until("/ping over TLS", 20, || {
        matches!(
            tls_request(port, Arc::clone(&config), "GET", "/ping", &[], None),
            Ok((200, _))
        )
    });
    (daemon, config, ca)
}

// ---- Load generation for the benches (`oha`, from crates.io) ----

/// Run `oha` (the binary `oha`) with `args` (connections, requests, headers, URL…) and
/// say what it measured: requests per second, p50/p99 latency and status codes.
/// What one `oha` run measured.
pub struct OhaFigures {
    pub requests_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Status code to count, as oha reports it.
    pub statuses: serde_json::Value,
}

impl std::fmt::Display for OhaFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.0} req/s, p50 {:.2} ms, p99 {:.2} ms, status codes {}",
            self.requests_per_sec, self.p50_ms, self.p99_ms, self.statuses
        )
    }
}

pub fn oha(oha: &str, args: &[&str]) -> String {
    oha_figures(oha, args).to_string()
}

/// Run `oha` with `args`; its figures.
pub fn oha_figures(oha: &str, args: &[&str]) -> OhaFigures {
    let out = Command::new(oha)
        .args(["--no-tui", "--output-format", "json"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {oha} (cargo install oha): {e}"));
    assert!(
        out.status.success(),
        "oha failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("oha's JSON report");
    let pct = |p: &str| report["latencyPercentiles"][p].as_f64().unwrap_or(f64::NAN) * 1000.0;
    OhaFigures {
        requests_per_sec: report["summary"]["requestsPerSec"]
            .as_f64()
            .unwrap_or(f64::NAN),
        p50_ms: pct("p50"),
        p99_ms: pct("p99"),
        statuses: report["statusCodeDistribution"].clone(),
    }
}

/// The test `name` of the module whose `module_path!()` is `module`, by the full name a
/// test binary's `--exact` takes (the module path without the crate's name): for a test
/// that runs its own binary again to run one of its tools.
pub fn exact_test_name(module: &str, name: &str) -> String {
    let module = module.split_once("::").map_or("", |(_, m)| m);
    if module.is_empty() {
        name.to_string()
    } else {
        format!("{module}::{name}")
    }
}

/// A regtest Ark address of another server, with a delivery no server knows: it
/// parses, and nobody could pay it. For checking what berthd does before a payment
/// reaches the wallet (spending rules, approvals).
pub fn foreign_ark_address() -> String {
    use bitcoin::secp256k1::{PublicKey, Secp256k1, SecretKey};
    let secp = Secp256k1::new();
    let key =
        |b: u8| PublicKey::from_secret_key(&secp, &SecretKey::from_slice(&[b; 32]).expect("key"));
    ark::Address::builder()
        .testnet(true)
        .server_pubkey(key(1))
        .pubkey_policy(key(2))
        .delivery(ark::address::VtxoDelivery::Unknown {
            delivery_type: 0x7f,
            data: Vec::new(),
        })
        .into_address()
        .expect("address")
        .to_string()
}

/// CSV text as Python's `csv.DictReader` reads it: a list of rows by column name.
pub fn python_csv(text: &str) -> serde_json::Value {
    use std::io::Write as _;
    let mut child = std::process::Command::new("python3")
        .args([
            "-c",
            "import csv, json, sys; r = csv.DictReader(sys.stdin); \
             print(json.dumps({'columns': r.fieldnames, 'rows': list(r)}))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("python3 ran");
    assert!(out.status.success(), "python's csv refused it");
    serde_json::from_slice(&out.stdout).expect("json")
}

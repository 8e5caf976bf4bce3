//! Nostr Wallet Connect's test tools, for `tests/integration/nwc.rs` and the e2e
//! scenario: a real relay (`nostr-relay` from PyPI, a process of its own on loopback,
//! stopped by pid) and the client library apps use (Alby's `@getalby/sdk`, driven by
//! node through `tests/nwc/client.mjs`). `scripts/ensure-deps` installs both; a test
//! without them is skipped ([`Tools::find`]) and says so.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::{free_port, skip, wait_until};

/// Where `scripts/ensure-deps` puts the relay and the client.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub struct Tools {
    pub relay: PathBuf,
    pub client: PathBuf,
}

impl Tools {
    pub fn find(test: &str) -> Option<Tools> {
        let relay = std::env::var_os("BERTH_NOSTR_RELAY")
            .map(PathBuf::from)
            .unwrap_or_else(|| root().join("target/nwc-tools/venv/bin/nostr-relay"));
        let client = root().join("tests/nwc/client.mjs");
        let node_modules = root().join("tests/nwc/node_modules/@getalby/sdk");
        let node = Command::new("node").arg("--version").output().is_ok();
        let missing = if !relay.exists() {
            Some(format!("no nostr-relay at {}", relay.display()))
        } else if !node {
            Some("no node".to_string())
        } else if !node_modules.exists() {
            Some("tests/nwc has no node_modules (npm ci)".to_string())
        } else {
            None
        };
        match missing {
            Some(why) => {
                skip(
                    test,
                    &format!("needs the NWC test tools: {why}; run scripts/ensure-deps"),
                );
                None
            }
            None => Some(Tools { relay, client }),
        }
    }

    /// Run the client; its one line of JSON.
    pub fn client(&self, args: &[&str]) -> Value {
        let out = Command::new("node")
            .arg(&self.client)
            .args(args)
            .current_dir(root().join("tests/nwc"))
            .stderr(Stdio::piped())
            .output()
            .expect("run node");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout.lines().last().unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|e| {
            panic!(
                "the client printed no JSON ({e}): {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    pub fn call(&self, uri: &str, method: &str, params: Value) -> Value {
        self.client(&["call", uri, method, &params.to_string()])
    }

    /// An app listening for the wallet's notifications (under NIP-04 with `nip04`),
    /// subscribed when this returns; [`Listener::collected`] gives what came.
    pub fn listen(&self, uri: &str, count: usize, timeout_ms: u64, nip04: bool) -> Listener {
        let mut args = vec![
            "listen".to_string(),
            uri.to_string(),
            count.to_string(),
            timeout_ms.to_string(),
        ];
        if nip04 {
            args.push("nip04".into());
        }
        let mut child = Command::new("node")
            .arg(&self.client)
            .args(&args)
            .current_dir(root().join("tests/nwc"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run node");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let ready = lines.next().and_then(Result::ok).unwrap_or_default();
        assert!(
            ready.contains("\"ready\":true"),
            "the listener did not subscribe: {ready}"
        );
        Listener { child, lines }
    }

    pub fn raw(&self, uri: &str, method: &str, params: Value, options: Value) -> Value {
        self.client(&[
            "raw",
            uri,
            method,
            &params.to_string(),
            &options.to_string(),
        ])
    }
}

/// A running `listen` of the client.
pub struct Listener {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Listener {
    /// The notifications that came (waits for the count or the timeout).
    pub fn collected(mut self) -> Vec<Value> {
        let line = self.lines.next().and_then(Result::ok).unwrap_or_default();
        let _ = self.child.wait();
        let out: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the listener printed no JSON ({e}): {line}"));
        out["notifications"]
            .as_array()
            .unwrap_or_else(|| panic!("no notifications: {out}"))
            .clone()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A relay process on loopback, its own database in a temporary directory.
pub struct Relay {
    child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
    binary: PathBuf,
}

impl Relay {
    pub fn start(tools: &Tools) -> Relay {
        let dir = tempfile::tempdir().expect("tempdir");
        Relay::start_in(tools.relay.clone(), dir, free_port())
    }

    fn start_in(binary: PathBuf, dir: tempfile::TempDir, port: u16) -> Relay {
        let child = Relay::spawn(&binary, dir.path(), port);
        Relay {
            child,
            port,
            dir,
            binary,
        }
    }

    fn spawn(binary: &Path, dir: &Path, port: u16) -> Child {
        let config = dir.join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "DEBUG: false\n\
                 max_event_size: 65536\n\
                 storage:\n  sqlalchemy.url: sqlite+aiosqlite:///{db}\n  validators:\n    \
                 - nostr_relay.validators.is_not_too_large\n    - nostr_relay.validators.is_signed\n\
                 verification:\n  nip05_verification: disabled\n\
                 gunicorn:\n  bind: 127.0.0.1:{port}\n  workers: 1\n  loglevel: warning\n\
                 authentication:\n  enabled: false\n",
                db = dir.join("nostr.sqlite3").display()
            ),
        )
        .expect("relay config");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("relay.log"))
            .expect("log");
        let child = Command::new(binary)
            .args(["-c"])
            .arg(&config)
            .args(["serve", "--use-uvicorn"])
            .current_dir(dir)
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start nostr-relay");
        wait_until("the relay to listen", 60, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        child
    }

    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}", self.port)
    }

    /// Stop it (by pid) and start it again on the same port, with the same database.
    pub fn restart(&mut self) {
        self.stop();
        self.child = Relay::spawn(&self.binary, self.dir.path(), self.port);
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The client's first step, as an app takes it the moment it has the URI: the info
/// event (the SDK waits up to 10 s for it to reach the relay, and no longer).
pub fn wait_for_info(tools: &Tools, uri: &str) -> Value {
    let info = tools.client(&["info", uri]);
    assert!(info.get("error").is_none(), "no info event: {info}");
    info
}

pub fn code(answer: &Value) -> &str {
    answer["error"]["code"].as_str().unwrap_or("(no error)")
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

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

#[derive(Clone)]
pub struct Tools {
    pub relay: PathBuf,
    pub client: PathBuf,
    /// Extra environment of the client (`NODE_EXTRA_CA_CERTS` for a TLS relay).
    pub env: Vec<(String, String)>,
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
            None => Some(Tools {
                relay,
                client,
                env: Vec::new(),
            }),
        }
    }

    /// The same tools, the client trusting the CA in `ca` (a relay's test CA).
    pub fn trusting(&self, ca: &Path) -> Tools {
        let mut tools = self.clone();
        tools
            .env
            .push(("NODE_EXTRA_CA_CERTS".into(), ca.display().to_string()));
        tools
    }

    /// Run the client; its one line of JSON.
    pub fn client(&self, args: &[&str]) -> Value {
        let out = Command::new("node")
            .arg(&self.client)
            .args(args)
            .current_dir(root().join("tests/nwc"))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
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
            .envs(self.env.iter().map(|(k, v)| (k, v)))
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

/// How a test relay is stricter than the default: TLS (`wss://`), and NIP-42.
#[derive(Clone, Default)]
pub struct Strict {
    /// The certificate chain and key it serves (see [`TestCa`]).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Every event but an app's requests (kind 23194) is taken only from a connection
    /// that authenticated (NIP-42) as the event's author: the wallet's info events,
    /// responses and notifications are refused unless berthd answered the challenge.
    /// Reading stays open (Alby's SDK does not authenticate). The rule is
    /// `tests/nwc/relay_auth/berth_relay_auth.py`, nostr-relay's own authenticator
    /// interface.
    pub auth: bool,
}

/// A relay process on loopback, its own database in a temporary directory.
pub struct Relay {
    child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
    binary: PathBuf,
    strict: Strict,
}

impl Relay {
    pub fn start(tools: &Tools) -> Relay {
        Relay::start_strict(tools, Strict::default())
    }

    pub fn start_strict(tools: &Tools, strict: Strict) -> Relay {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let child = Relay::spawn(&tools.relay, dir.path(), port, &strict);
        Relay {
            child,
            port,
            dir,
            binary: tools.relay.clone(),
            strict,
        }
    }

    fn spawn(binary: &Path, dir: &Path, port: u16, strict: &Strict) -> Child {
        let config = dir.join("config.yaml");
        // NIP-47 asks relays to take events of 64 KB (a page of list_transactions);
        // nostr-relay's default is 4 KB.
        let mut yaml = format!(
            "DEBUG: false\n\
             max_event_size: 65536\n\
             storage:\n  sqlalchemy.url: sqlite+aiosqlite:///{db}\n  validators:\n    \
             - nostr_relay.validators.is_not_too_large\n    - nostr_relay.validators.is_signed\n\
             verification:\n  nip05_verification: disabled\n\
             gunicorn:\n  bind: 127.0.0.1:{port}\n  workers: 1\n  loglevel: warning\n",
            db = dir.join("nostr.sqlite3").display()
        );
        if let Some((chain, key)) = &strict.tls {
            // `serve --use-uvicorn` hands this section to uvicorn, which names them so.
            yaml.push_str(&format!(
                "  ssl_certfile: {}\n  ssl_keyfile: {}\n",
                chain.display(),
                key.display()
            ));
        }
        if strict.auth {
            // The `relay` tag must name one of these exactly.
            let scheme = if strict.tls.is_some() { "wss" } else { "ws" };
            yaml.push_str(&format!(
                "authentication:\n  enabled: true\n  \
                 authenticator_class: berth_relay_auth.AuthorOnly\n  \
                 relay_urls:\n    - {scheme}://127.0.0.1:{port}\n    - {scheme}://127.0.0.1:{port}/\n  \
                 open_kinds: [23194]\n"
            ));
        } else {
            yaml.push_str("authentication:\n  enabled: false\n");
        }
        std::fs::write(&config, yaml).expect("relay config");
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
            .env("PYTHONPATH", root().join("tests/nwc/relay_auth"))
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
        let scheme = if self.strict.tls.is_some() {
            "wss"
        } else {
            "ws"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// What the relay logged (its refusals and authentications among it).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("relay.log")).unwrap_or_default()
    }

    /// Stop it (by pid) and start it again on the same port, with the same database.
    pub fn restart(&mut self) {
        self.stop();
        self.child = Relay::spawn(&self.binary, self.dir.path(), self.port, &self.strict);
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A CA of the test's own and a certificate it issued for `127.0.0.1`, written to
/// `dir`: `ca` for the clients' trust (berthd's `SSL_CERT_FILE`, node's
/// `NODE_EXTRA_CA_CERTS`), `chain` and `key` for the server.
pub struct TestCa {
    pub ca: PathBuf,
    pub chain: PathBuf,
    pub key: PathBuf,
}

impl TestCa {
    pub fn make(dir: &Path) -> TestCa {
        let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let mut ca_params = rcgen::CertificateParams::default();
        ca_params.distinguished_name = rcgen::DistinguishedName::new();
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "berth test relay CA");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
        let ca = ca_params.self_signed(&ca_key).expect("CA");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let mut params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let leaf = params.signed_by(&key, &issuer).expect("leaf");
        let out = TestCa {
            ca: dir.join("ca.pem"),
            chain: dir.join("relay-chain.pem"),
            key: dir.join("relay-key.pem"),
        };
        std::fs::write(&out.ca, ca.pem()).expect("write the CA");
        std::fs::write(&out.chain, format!("{}{}", leaf.pem(), ca.pem())).expect("chain");
        std::fs::write(&out.key, key.serialize_pem()).expect("key");
        out
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

//! Core Lightning for the regtest stack: the Ark server's node (`internal`, which
//! captaind pays and receives through, with its `cln-grpc` and `hold` plugins) and a
//! node outside (`external`, the payer and payee of the scenarios), with a channel
//! between them. Wired as the Ark server's own test harness wires them
//! (`testing/src/daemon/lightningd.rs` in ark-bitcoin/bark): the same config keys and
//! plugins, the channel opened by the server's node and balanced by one payment, so
//! both sides can pay.
//!
//! Binaries: `LIGHTNINGD_EXEC` (the installed `lightningd`, which finds its subdaemons
//! beside it) and `LIGHTNINGD_PLUGIN_DIR` (`cln-grpc` and `hold`); `bitcoin-cli` is
//! taken from beside `BITCOIND_EXEC`. Without them the Lightning scenarios are skipped
//! (`Lightning::binaries`), never passed. The nodes are driven over their JSON-RPC
//! socket.

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::free_port;
use crate::stack::{Bitcoind, Process, tail, wait_for};

/// Where Core Lightning is installed.
#[derive(Debug, Clone)]
pub struct LightningBinaries {
    pub lightningd: PathBuf,
    pub plugin_dir: PathBuf,
    pub bitcoin_cli: PathBuf,
}

impl LightningBinaries {
    /// From `LIGHTNINGD_EXEC`, `LIGHTNINGD_PLUGIN_DIR` and `BITCOIND_EXEC`; `Err` says
    /// what is missing.
    pub fn from_env() -> Result<LightningBinaries, String> {
        let get = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.exists())
        };
        let (Some(lightningd), Some(plugin_dir)) =
            (get("LIGHTNINGD_EXEC"), get("LIGHTNINGD_PLUGIN_DIR"))
        else {
            return Err(
                "needs LIGHTNINGD_EXEC and LIGHTNINGD_PLUGIN_DIR (Core Lightning with \
                 cln-grpc and hold; docs/testing.md)"
                    .into(),
            );
        };
        for plugin in ["cln-grpc", "hold"] {
            if !plugin_dir.join(plugin).is_file() {
                return Err(format!("no {plugin} in LIGHTNINGD_PLUGIN_DIR"));
            }
        }
        let bitcoin_cli = get("BITCOIND_EXEC")
            .and_then(|b| b.parent().map(|d| d.join("bitcoin-cli")))
            .filter(|p| p.is_file())
            .ok_or("needs bitcoin-cli beside BITCOIND_EXEC (lightningd's bcli plugin runs it)")?;
        Ok(LightningBinaries {
            lightningd,
            plugin_dir,
            bitcoin_cli,
        })
    }
}

/// TLS files a plugin made for its gRPC server: its CA, a client certificate and key.
#[derive(Debug, Clone)]
pub struct GrpcCerts {
    pub uri: String,
    pub ca: PathBuf,
    pub client: PathBuf,
    pub client_key: PathBuf,
}

/// One running lightningd, stopped by pid when dropped.
pub struct Lightningd {
    pub name: String,
    pub dir: PathBuf,
    pub p2p_port: u16,
    grpc_port: u16,
    hold_port: u16,
    log: PathBuf,
    process: Process,
}

impl Lightningd {
    pub fn start(
        bins: &LightningBinaries,
        name: &str,
        dir: &Path,
        bitcoind: &Bitcoind,
    ) -> Lightningd {
        std::fs::create_dir_all(dir).expect("lightningd dir");
        let (grpc_port, hold_port, p2p_port) = (free_port(), free_port(), free_port());
        let config = format!(
            "network=regtest\n\
             bitcoin-datadir={bitcoin_datadir}\n\
             bitcoin-rpcport={rpc}\n\
             bitcoin-cli={cli}\n\
             important-plugin={plugins}/hold\n\
             important-plugin={plugins}/cln-grpc\n\
             alias={name}\n\
             developer\n\
             dev-fast-gossip\n\
             dev-bitcoind-poll=1\n\
             allow-deprecated-apis=false\n\
             log-level=debug\n\
             grpc-port={grpc_port}\n\
             hold-grpc-port={hold_port}\n\
             addr=127.0.0.1:{p2p_port}\n",
            bitcoin_datadir = bitcoind.datadir.display(),
            rpc = bitcoind.rpc_port,
            cli = bins.bitcoin_cli.display(),
            plugins = bins.plugin_dir.display(),
        );
        std::fs::write(dir.join("config"), config).expect("lightningd config");
        let log = dir.join("lightningd.log");
        let process = Process::spawn(
            &format!("lightningd-{name}"),
            Command::new(&bins.lightningd).arg(format!("--lightning-dir={}", dir.display())),
            &log,
        );
        let mut node = Lightningd {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            p2p_port,
            grpc_port,
            hold_port,
            log,
            process,
        };
        let height = bitcoind.height();
        wait_for(
            &format!("lightningd {name} to sync to block {height}"),
            120,
            || {
                node.process.assert_running(&node.log.clone());
                let info = node.try_rpc("getinfo", json!({})).ok()?;
                let synced = info["blockheight"].as_u64()? >= height
                    && info.get("warning_bitcoind_sync").is_none()
                    && info.get("warning_lightningd_sync").is_none();
                // The plugins write their certificates once they run.
                (synced && node.cln_grpc().ca.exists() && node.hold_grpc().ca.exists())
                    .then_some(())
            },
        );
        node
    }

    fn network_dir(&self) -> PathBuf {
        self.dir.join("regtest")
    }

    /// cln-grpc's endpoint: its certificate names `localhost`, not 127.0.0.1.
    pub fn cln_grpc(&self) -> GrpcCerts {
        let d = self.network_dir();
        GrpcCerts {
            uri: format!("https://localhost:{}", self.grpc_port),
            ca: d.join("ca.pem"),
            client: d.join("client.pem"),
            client_key: d.join("client-key.pem"),
        }
    }

    /// The hold plugin's endpoint.
    pub fn hold_grpc(&self) -> GrpcCerts {
        let d = self.network_dir().join("hold");
        GrpcCerts {
            uri: format!("https://localhost:{}", self.hold_port),
            ca: d.join("ca.pem"),
            client: d.join("client.pem"),
            client_key: d.join("client-key.pem"),
        }
    }

    /// The node's JSON-RPC socket.
    pub fn socket(&self) -> PathBuf {
        self.network_dir().join("lightning-rpc")
    }

    /// A JSON-RPC call on the node's socket.
    pub fn try_rpc(&self, method: &str, params: Value) -> Result<Value, String> {
        rpc_on(&self.socket(), method, params)
    }

    pub fn rpc(&self, method: &str, params: Value) -> Value {
        self.try_rpc(method, params).unwrap_or_else(|e| {
            panic!(
                "lightningd {} RPC failed: {e}\n{}",
                self.name,
                tail(&self.log, 30)
            )
        })
    }

    pub fn id(&self) -> String {
        self.rpc("getinfo", json!({}))["id"]
            .as_str()
            .expect("node id")
            .to_string()
    }

    /// Wait until the node has seen block `height` (before paying: a node behind the
    /// chain makes payments fail with `incorrect_cltv_expiry`).
    pub fn wait_for_block(&self, height: u64) {
        self.rpc(
            "waitblockheight",
            json!({"blockheight": height, "timeout": 120}),
        );
    }

    /// A BOLT11 invoice for `msat` (`None`: any amount) and its payment hash.
    pub fn invoice(&self, msat: Option<u64>, label: &str) -> (String, String) {
        let amount = msat.map_or(json!("any"), |m| json!(m));
        let made = self.rpc(
            "invoice",
            json!({"amount_msat": amount, "label": label, "description": format!("berth e2e {label}")}),
        );
        (
            made["bolt11"].as_str().expect("bolt11").to_string(),
            made["payment_hash"]
                .as_str()
                .expect("payment_hash")
                .to_string(),
        )
    }

    /// The status of the invoice labelled `label` (`unpaid`, `paid`, `expired`).
    pub fn invoice_status(&self, label: &str) -> String {
        self.rpc("listinvoices", json!({"label": label}))["invoices"][0]["status"]
            .as_str()
            .unwrap_or("missing")
            .to_string()
    }

    /// Pay a BOLT11 invoice and wait for the outcome (`xpay`: CLN's current payer).
    pub fn pay(&self, bolt11: &str) -> Result<Value, String> {
        self.try_rpc("xpay", json!({"invstring": bolt11}))
    }
}

/// A JSON-RPC call on a node's socket (`Lightningd::socket`).
pub fn rpc_on(socket: &Path, method: &str, params: Value) -> Result<Value, String> {
    let mut stream =
        UnixStream::connect(socket).map_err(|e| format!("{}: {e}", socket.display()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(|e| e.to_string())?;
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    stream
        .write_all(request.to_string().as_bytes())
        .map_err(|e| e.to_string())?;
    // One reply, one JSON object: read until it parses.
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        let n = stream
            .read(&mut buf)
            .map_err(|e| format!("{method}: {e}"))?;
        if n == 0 {
            return Err(format!("{method}: the node closed the socket"));
        }
        raw.extend_from_slice(&buf[..n]);
        let mut stream = serde_json::Deserializer::from_slice(&raw).into_iter::<Value>();
        match stream.next() {
            Some(Ok(reply)) => {
                return match reply.get("error") {
                    Some(error) => Err(format!("{method}: {error}")),
                    None => Ok(reply["result"].clone()),
                };
            }
            Some(Err(e)) if e.is_eof() => continue,
            Some(Err(e)) => return Err(format!("{method}: {e}")),
            None => continue,
        }
    }
}

/// The two nodes and their channel.
pub struct Lightning {
    pub internal: Lightningd,
    pub external: Lightningd,
}

impl Lightning {
    /// Both nodes running and synced, a channel from the server's node to the other
    /// confirmed and announced, and half of it pushed across with one payment, so
    /// either side can pay the other.
    pub fn start(bins: &LightningBinaries, dir: &Path, bitcoind: &Bitcoind) -> Lightning {
        let internal = Lightningd::start(bins, "internal", &dir.join("cln-internal"), bitcoind);
        let external = Lightningd::start(bins, "external", &dir.join("cln-external"), bitcoind);

        let address = internal.rpc("newaddr", json!({"addresstype": "p2tr"}))["p2tr"]
            .as_str()
            .expect("p2tr address")
            .to_string();
        bitcoind.send_to(&address, 12 * 100_000_000);
        let height = bitcoind.mine(6);
        internal.wait_for_block(height);
        wait_for("the server's node to see its funds", 60, || {
            let funds = internal.rpc("listfunds", json!({}));
            funds["outputs"]
                .as_array()
                .is_some_and(|o| o.iter().any(|u| u["status"] == "confirmed"))
                .then_some(())
        });

        internal.rpc(
            "connect",
            json!({"id": external.id(), "host": "127.0.0.1", "port": external.p2p_port}),
        );
        internal.rpc(
            "fundchannel",
            json!({"id": external.id(), "amount": 10 * 100_000_000u64}),
        );
        bitcoind.wait_for_mempool("the channel's funding transaction");
        let height = bitcoind.mine(6);
        internal.wait_for_block(height);
        external.wait_for_block(height);
        wait_for("the channel to be usable and announced", 120, || {
            let channels = internal.rpc("listpeerchannels", json!({}));
            let normal = channels["channels"]
                .as_array()
                .is_some_and(|c| c.iter().any(|ch| ch["state"] == "CHANNELD_NORMAL"));
            let gossip = internal.rpc("listchannels", json!({}));
            let announced = gossip["channels"].as_array().is_some_and(|c| !c.is_empty());
            (normal && announced).then_some(())
        });
        // Push half across: the outside node can then pay the server's invoices.
        let (invoice, _) = external.invoice(Some(5 * 100_000_000 * 1000), "balance");
        internal
            .pay(&invoice)
            .unwrap_or_else(|e| panic!("balancing the channel: {e}"));
        Lightning { internal, external }
    }

    /// The `[[cln_array]]` entry of captaind's config for the server's node.
    pub fn captaind_config(&self) -> String {
        let grpc = self.internal.cln_grpc();
        let hold = self.internal.hold_grpc();
        format!(
            "\n[[cln_array]]\n\
             uri = \"{}\"\n\
             priority = 1\n\
             server_cert_path = \"{}\"\n\
             client_cert_path = \"{}\"\n\
             client_key_path = \"{}\"\n\
             hold_invoice.uri = \"{}\"\n\
             hold_invoice.server_cert_path = \"{}\"\n\
             hold_invoice.client_cert_path = \"{}\"\n\
             hold_invoice.client_key_path = \"{}\"\n",
            grpc.uri,
            grpc.ca.display(),
            grpc.client.display(),
            grpc.client_key.display(),
            hold.uri,
            hold.ca.display(),
            hold.client.display(),
            hold.client_key.display(),
        )
    }
}

impl Lightningd {
    /// A BOLT12 offer for any amount.
    pub fn offer(&self, description: &str) -> String {
        self.rpc(
            "offer",
            json!({"amount": "any", "description": description}),
        )["bolt12"]
            .as_str()
            .expect("bolt12")
            .to_string()
    }

    /// The paid BOLT12 invoices of an offer: their amounts in msat.
    pub fn offer_payments(&self, bolt12: &str) -> Vec<u64> {
        let offer_id = self.rpc("decode", json!({"string": bolt12}))["offer_id"]
            .as_str()
            .expect("offer_id")
            .to_string();
        self.rpc("listinvoices", json!({"offer_id": offer_id}))["invoices"]
            .as_array()
            .expect("invoices")
            .iter()
            .filter(|i| i["status"] == "paid")
            .filter_map(|i| i["amount_received_msat"].as_u64())
            .collect()
    }
}

/// What the LNURL server was asked for: the callback's amounts (msat) and comments.
#[derive(Debug, Default, Clone)]
pub struct LnurlCalls {
    pub amounts: Vec<u64>,
    pub comments: Vec<String>,
    pub labels: Vec<String>,
}

/// An LNURL-pay server (LUD-06, with LUD-12 comments) on loopback whose invoices the
/// outside node issues, over plain HTTP: an LNURL may name any URL, and a loopback
/// server has no certificate a public CA signed. Serves until the test ends.
pub struct LnurlServer {
    pub port: u16,
    pub calls: std::sync::Arc<std::sync::Mutex<LnurlCalls>>,
}

/// The payRequest's metadata; the invoice commits to its hash (LUD-06).
const LNURL_METADATA: &str = r#"[["text/plain","berth e2e LNURL payee"]]"#;
/// The longest comment the server takes (LUD-12 `commentAllowed`).
pub const LNURL_COMMENT_ALLOWED: usize = 32;

impl LnurlServer {
    pub fn start(payee: &Lightningd) -> LnurlServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind LNURL server");
        let port = listener.local_addr().expect("addr").port();
        let calls = std::sync::Arc::new(std::sync::Mutex::new(LnurlCalls::default()));
        let (socket, seen) = (payee.socket(), std::sync::Arc::clone(&calls));
        std::thread::spawn(move || {
            let base = format!("http://127.0.0.1:{port}");
            for mut stream in listener.incoming().flatten() {
                serve_lnurl(&mut stream, &base, &socket, &seen);
            }
        });
        LnurlServer { port, calls }
    }

    /// The same server over HTTPS on `127.0.0.1:443`, as the host `localhost` of the
    /// Lightning address `alice@localhost` (LUD-16 always resolves to
    /// `https://<domain>/.well-known/lnurlp/<user>`, port 443). Its certificate comes from
    /// a CA made here, written to `ca_file` for berthd's `SSL_CERT_FILE`. `Err` when port
    /// 443 cannot be bound (not root).
    pub fn start_https(payee: &Lightningd, ca_file: &Path) -> Result<LnurlServer, String> {
        let listener = std::net::TcpListener::bind("127.0.0.1:443")
            .map_err(|e| format!("cannot listen on 127.0.0.1:443 ({e}); run as root"))?;
        let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let mut ca_params = rcgen::CertificateParams::default();
        ca_params.distinguished_name = rcgen::DistinguishedName::new();
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "berth e2e LNURL CA");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
        let ca = ca_params.self_signed(&ca_key).expect("CA");
        std::fs::write(ca_file, ca.pem()).expect("write the CA");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let leaf = params.signed_by(&key, &issuer).expect("leaf");
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone(), ca.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .expect("server config");
        let config = std::sync::Arc::new(config);
        let calls = std::sync::Arc::new(std::sync::Mutex::new(LnurlCalls::default()));
        let (socket, seen) = (payee.socket(), std::sync::Arc::clone(&calls));
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let Ok(conn) = rustls::ServerConnection::new(std::sync::Arc::clone(&config)) else {
                    continue;
                };
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                serve_lnurl(&mut tls, "https://localhost", &socket, &seen);
                tls.conn.send_close_notify();
                let _ = tls.flush();
            }
        });
        Ok(LnurlServer { port: 443, calls })
    }

    /// The `lnurl1…` link of the pay endpoint.
    pub fn lnurl(&self) -> String {
        bark::lnurllib::lnurl::LnUrl::from_url(format!(
            "http://127.0.0.1:{}/lnurlp/alice",
            self.port
        ))
        .encode()
    }

    pub fn calls(&self) -> LnurlCalls {
        self.calls.lock().expect("calls").clone()
    }
}

fn serve_lnurl(
    stream: &mut (impl std::io::Read + std::io::Write),
    base: &str,
    payee: &Path,
    calls: &std::sync::Mutex<LnurlCalls>,
) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let target = head.split_whitespace().nth(1).unwrap_or("/").to_string();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let param = |name: &str| {
        query.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            (k == name).then(|| percent_decode(v))
        })
    };
    let (status, body) = match path {
        "/lnurlp/alice" | "/.well-known/lnurlp/alice" => (
            "200 OK",
            json!({
                "tag": "payRequest",
                "callback": format!("{base}/lnurlp/alice/callback"),
                "minSendable": 1_000,
                "maxSendable": 100_000_000_000u64,
                "metadata": LNURL_METADATA,
                "commentAllowed": LNURL_COMMENT_ALLOWED,
            }),
        ),
        "/lnurlp/alice/callback" => {
            let amount = param("amount").and_then(|a| a.parse::<u64>().ok());
            let comment = param("comment");
            match amount {
                Some(msat)
                    if comment
                        .as_ref()
                        .is_none_or(|c| c.len() <= LNURL_COMMENT_ALLOWED) =>
                {
                    let mut seen = calls.lock().expect("calls");
                    let label = format!("lnurl-{}", seen.amounts.len());
                    let made = rpc_on(
                        payee,
                        "invoice",
                        json!({"amount_msat": msat, "label": label, "description": LNURL_METADATA, "deschashonly": true}),
                    );
                    seen.amounts.push(msat);
                    seen.comments.extend(comment);
                    seen.labels.push(label);
                    match made {
                        Ok(invoice) => ("200 OK", json!({"pr": invoice["bolt11"], "routes": []})),
                        Err(e) => ("200 OK", json!({"status": "ERROR", "reason": e})),
                    }
                }
                _ => (
                    "200 OK",
                    json!({"status": "ERROR", "reason": "bad amount or comment"}),
                ),
            }
        }
        _ => (
            "404 Not Found",
            json!({"status": "ERROR", "reason": "not found"}),
        ),
    };
    let body = body.to_string();
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

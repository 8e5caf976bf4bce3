//! The egress policy on the real binary (issue 39, `src/net/egress.rs`): a phone with
//! the `send` scope cannot make berthd fetch from the home network, follow a redirect
//! elsewhere, swallow a huge answer or hang on a silent server. A real LNURL-pay server
//! on loopback (plain HTTP: the owner allows loopback where a test needs it) counts the
//! connections it accepts, so "refused" means nothing was connected to.
//!
//! berthd asks the payee's server for an invoice before it needs the wallet, so these
//! run without one: a resolved payment then ends in 422 "no wallet".

use crate::harness;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use harness::{Daemon, datadir_with_berth_toml, json_of, token};

/// How the test LNURL server answers.
#[derive(Clone)]
enum Behaviour {
    /// LUD-06: the pay request, then an invoice for the amount asked.
    Pays,
    /// A redirect of every request to this URL.
    RedirectsTo(String),
    /// 10 MiB of JSON-ish bytes, without a length.
    Floods,
    /// Takes the request and never answers.
    Silent,
}

/// A loopback LNURL-pay server: the connections it accepted and the paths it was asked.
struct LnurlServer {
    port: u16,
    connections: Arc<AtomicUsize>,
    paths: Arc<Mutex<Vec<String>>>,
}

impl LnurlServer {
    fn start(behaviour: Behaviour) -> LnurlServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let (seen, asked) = (Arc::clone(&connections), Arc::clone(&paths));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                seen.fetch_add(1, Ordering::SeqCst);
                let (behaviour, asked) = (behaviour.clone(), Arc::clone(&asked));
                std::thread::spawn(move || serve(stream, port, &behaviour, &asked));
            }
        });
        LnurlServer {
            port,
            connections,
            paths,
        }
    }

    /// The `lnurl1…` link of its pay endpoint.
    fn lnurl(&self) -> String {
        bark::lnurllib::lnurl::LnUrl::from_url(format!(
            "http://127.0.0.1:{}/lnurlp/alice",
            self.port
        ))
        .to_string()
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn paths(&self) -> Vec<String> {
        self.paths.lock().expect("paths").clone()
    }
}

const METADATA: &str = r#"[["text/plain","berth egress test"]]"#;

fn serve(mut stream: TcpStream, port: u16, behaviour: &Behaviour, asked: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    // The headers, up to the blank line.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    asked.lock().expect("paths").push(path.clone());
    let reply = |stream: &mut TcpStream, status: &str, headers: &str, body: &str| {
        let _ = write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n{headers}\r\n{body}",
            body.len()
        );
    };
    match behaviour {
        Behaviour::Pays if path.starts_with("/lnurlp/alice/callback") => {
            let msat: u64 = path
                .split("amount=")
                .nth(1)
                .and_then(|a| a.split('&').next())
                .and_then(|a| a.parse().ok())
                .unwrap_or(0);
            let pr = harness::invoice(lightning_invoice::Currency::Regtest, Some(msat), 9);
            reply(
                &mut stream,
                "200 OK",
                "",
                &serde_json::json!({"pr": pr, "routes": []}).to_string(),
            );
        }
        Behaviour::Pays => {
            let body = serde_json::json!({
                "tag": "payRequest",
                "callback": format!("http://127.0.0.1:{port}/lnurlp/alice/callback"),
                "minSendable": 1_000,
                "maxSendable": 1_000_000_000,
                "metadata": METADATA,
                "commentAllowed": 32,
            });
            reply(&mut stream, "200 OK", "", &body.to_string());
        }
        Behaviour::RedirectsTo(to) => {
            reply(&mut stream, "302 Found", &format!("Location: {to}\r\n"), "");
        }
        Behaviour::Floods => {
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
            );
            let chunk = vec![b'x'; 64 * 1024];
            for _ in 0..160 {
                if stream.write_all(&chunk).is_err() {
                    return;
                }
            }
        }
        Behaviour::Silent => std::thread::sleep(Duration::from_secs(60)),
    }
}

/// A berthd whose `berth.toml` allows these egress destinations.
fn berthd(allow: &[&str]) -> (tempfile::TempDir, std::path::PathBuf, Daemon) {
    let list: Vec<String> = allow.iter().map(|a| format!("{a:?}")).collect();
    // Nothing allowed: the default, no section at all.
    let toml = match allow {
        [] => String::new(),
        _ => format!("[egress]\nallow = [{}]\n", list.join(", ")),
    };
    let (tmp, datadir) = datadir_with_berth_toml(&toml);
    let daemon = Daemon::start(&datadir, &[]);
    (tmp, datadir, daemon)
}

/// `POST /api/v1/lightning/pay` with the admin token: the status and body.
fn pay(daemon: &Daemon, datadir: &Path, destination: &str) -> (u16, serde_json::Value) {
    let bearer = format!("Bearer {}", token(datadir));
    let body = serde_json::json!({"destination": destination, "amount_sat": 1_000}).to_string();
    let (status, raw) = daemon.post(
        "/api/v1/lightning/pay",
        &[
            ("Authorization", &bearer),
            ("Content-Type", "application/json"),
        ],
        &body,
    );
    (status, json_of(&raw))
}

/// `user@host` Lightning addresses and LNURLs that point into the home network or at
/// the box itself are refused at once, with the rule, before anything is connected to.
#[test]
fn destinations_inside_the_home_network_are_refused_without_a_connection() {
    let server = LnurlServer::start(Behaviour::Pays);
    let (_tmp, datadir, daemon) = berthd(&[]);
    let lnurl_https = bark::lnurllib::lnurl::LnUrl::from_url(format!(
        "https://127.0.0.1:{}/lnurlp/alice",
        server.port
    ))
    .to_string();
    let private =
        bark::lnurllib::lnurl::LnUrl::from_url("https://192.168.1.1/lnurlp/x".into()).to_string();
    for (destination, rule) in [
        (server.lnurl(), "plain http"),
        (lnurl_https, "not a public address"),
        (private, "not a public address"),
        ("alice@localhost".to_string(), "not public"),
        ("alice@10.0.0.5".to_string(), "not a public address"),
    ] {
        let asked = Instant::now();
        let (status, body) = pay(&daemon, &datadir, &destination);
        assert_eq!(status, 400, "{destination}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains(rule), "{destination}: {body}");
        assert!(message.contains("does not fetch"), "{destination}: {body}");
        assert!(
            asked.elapsed() < Duration::from_secs(2),
            "refused at once, not after a timeout: {:?}",
            asked.elapsed()
        );
    }
    assert_eq!(server.connections(), 0, "nothing was connected to");
}

/// With loopback allowed in berth.toml, the same LNURL is fetched: the pay request, then
/// the callback for the amount asked; berthd then needs its wallet (there is none).
#[test]
fn a_destination_the_owner_allows_is_fetched() {
    let server = LnurlServer::start(Behaviour::Pays);
    let (_tmp, datadir, daemon) = berthd(&["127.0.0.1"]);
    let (status, body) = pay(&daemon, &datadir, &server.lnurl());
    assert_eq!(status, 422, "resolved, then no wallet to pay with: {body}");
    let paths = server.paths();
    assert_eq!(paths.len(), 2, "{paths:?}");
    assert_eq!(paths[0], "/lnurlp/alice");
    assert!(
        paths[1].starts_with("/lnurlp/alice/callback?amount=1000000"),
        "{paths:?}"
    );
}

/// A redirect to another host is refused, and that host is never connected to.
#[test]
fn a_redirect_to_another_host_is_refused() {
    let elsewhere = LnurlServer::start(Behaviour::Pays);
    let redirecting = LnurlServer::start(Behaviour::RedirectsTo(format!(
        "http://localhost:{}/lnurlp/alice",
        elsewhere.port
    )));
    let (_tmp, datadir, daemon) = berthd(&["127.0.0.1", "localhost"]);
    let (status, body) = pay(&daemon, &datadir, &redirecting.lnurl());
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("redirected to another host")),
        "{body}"
    );
    assert_eq!(redirecting.connections(), 1);
    assert_eq!(elsewhere.connections(), 0, "the other host was not reached");
}

/// A 10 MiB answer is cut off at 64 KiB: a 503, and berthd's memory barely moves.
#[test]
fn a_huge_answer_is_cut_off() {
    let server = LnurlServer::start(Behaviour::Floods);
    let (_tmp, datadir, daemon) = berthd(&["127.0.0.1"]);
    let pid = daemon.child.id();
    // One first, so that what the first fetch allocates for good is not counted.
    let (status, body) = pay(&daemon, &datadir, &server.lnurl());
    assert_eq!(status, 503, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("larger than 64 KiB")),
        "{body}"
    );
    let before = harness::rss_kb(pid);
    for _ in 0..5 {
        let (status, _) = pay(&daemon, &datadir, &server.lnurl());
        assert_eq!(status, 503);
    }
    let after = harness::rss_kb(pid);
    println!("egress: VmRSS {before} kB before five 10 MiB answers, {after} kB after");
    assert!(
        after < before + 2 * 1024,
        "VmRSS rose by {} kB",
        after.saturating_sub(before)
    );
}

/// A server that takes the request and never answers is given up on within the
/// policy's 15 s; meanwhile a credential has at most two fetches under way.
#[test]
fn a_silent_server_times_out_and_a_credential_fetches_two_at_once() {
    let server = LnurlServer::start(Behaviour::Silent);
    let (_tmp, datadir, daemon) = berthd(&["127.0.0.1"]);
    let daemon = Arc::new(daemon);
    let asked = Instant::now();
    let calls: Vec<_> = (0..2)
        .map(|_| {
            let (daemon, datadir, lnurl) = (Arc::clone(&daemon), datadir.clone(), server.lnurl());
            std::thread::spawn(move || pay(&daemon, &datadir, &lnurl))
        })
        .collect();
    harness::wait_until("both fetches under way", 10, || server.connections() == 2);
    let (status, body) = pay(&daemon, &datadir, &server.lnurl());
    assert_eq!(status, 429, "a third fetch of the same credential: {body}");
    for call in calls {
        let (status, body) = call.join().expect("call");
        assert_eq!(status, 503, "{body}");
        assert!(
            body["message"]
                .as_str()
                .is_some_and(|m| m.contains("no answer")),
            "{body}"
        );
    }
    let waited = asked.elapsed();
    println!("egress: a silent server given up on after {waited:?}");
    assert!(waited < Duration::from_secs(20), "{waited:?}");
    assert!(waited >= Duration::from_secs(14), "{waited:?}");
    assert_eq!(server.connections(), 2, "the third never connected");
}

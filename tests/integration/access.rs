//! The access model against a guest on the LAN or a second device, on the real binary
//! (`docs/lan.md`, "What a LAN attacker or a second device cannot do"): idempotency
//! records belong to their credential and answer only after the scope check, `/health`
//! keeps the wallet's facts from anonymous callers, revocation ends tickets and live
//! streams at once, requests must name this machine in `Host`, and one source cannot
//! take every connection slot.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;

use crate::harness;

use harness::*;

const SEND: &str = "/api/v1/onchain/send";
const BODY: &str = r#"{"destination":"bcrt1qexample","amount_sat":1000}"#;

#[test]
fn idempotency_records_are_their_credentials_own_and_answer_only_after_the_scope_check() {
    use berth::access::Credential;
    use berth::api::idempotency::{TTL, key_hash, request_hash};
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let (phone, phone_id) = pair_device(&daemon, &datadir, "read,send");
    let (other, _) = pair_device(&daemon, &datadir, "send");
    let (display, _) = pair_device(&daemon, &datadir, "read");
    let (status, _) = daemon.terminate();
    assert_eq!(status.code(), Some(0));

    // Left behind by earlier requests: the admin's finished payment (a stored answer
    // with a txid), the admin's payment cut short by a restart, and the phone's.
    with_store(&datadir, async |store| {
        let now = u64::try_from(chrono::Utc::now().timestamp_micros()).expect("time");
        let ttl = u64::try_from(TTL.as_micros()).expect("ttl");
        let request = request_hash("POST", SEND, BODY.as_bytes());
        let admin = Credential::Admin;
        let phone = Credential::Device(phone_id.clone());
        for (owner, key) in [(&admin, "paid"), (&admin, "cut"), (&phone, "phone-cut")] {
            store
                .claim_idempotency_key(key_hash(owner, key), request, now, ttl)
                .await
                .expect("claim");
        }
        store
            .finish_idempotency_key(
                key_hash(&admin, "paid"),
                Some((200, br#"{"txid":"the-admins-secret-txid"}"#.to_vec())),
            )
            .await
            .expect("finish");
    });

    let daemon = Daemon::start(&datadir, &[]);
    let admin = bearer(&token(&datadir));
    let send = |auth: &str, key: &str| {
        daemon.post(
            SEND,
            &[("Authorization", auth), ("Idempotency-Key", key)],
            BODY,
        )
    };
    // The owner gets its answer again.
    let (status, raw) = send(&admin, "paid");
    assert_eq!(status, 200, "{raw}");
    assert!(raw.contains("the-admins-secret-txid"), "{raw}");
    assert!(
        raw.to_ascii_lowercase()
            .contains("idempotent-replayed: true")
    );
    // Another credential with the same key runs its own request (no wallet here: 422)
    // and learns nothing of the admin's.
    for key in ["paid", "cut"] {
        let (status, raw) = send(&phone, key);
        assert_eq!(status, 422, "{key}: {raw}");
        assert!(!raw.contains("secret"), "{raw}");
        assert!(!raw.to_ascii_lowercase().contains("idempotent-replayed"));
    }
    let (status, raw) = send(&admin, "cut");
    assert_eq!(status, 409, "the admin's own key, cut short: {raw}");
    // The phone's key is the phone's: 409 for it, unknown to everyone else.
    assert_eq!(send(&phone, "phone-cut").0, 409);
    assert_eq!(send(&other, "phone-cut").0, 422);
    assert_eq!(send(&admin, "phone-cut").0, 422);
    // A credential without the route's scope is refused before any key is looked at:
    // no replay, no 409, not even a 400 for a malformed key.
    for key in ["paid", "cut", "phone-cut", "not a valid key"] {
        let (status, raw) = send(&display, key);
        assert_eq!(status, 403, "{key}: {raw}");
        assert!(!raw.contains("secret"), "{raw}");
    }
    assert_eq!(send(&admin, "not a valid key").0, 400);
}

/// The top-level keys of a JSON object.
fn keys(value: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

#[test]
fn health_gives_anonymous_callers_the_verdict_and_its_reasons_only() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let (display, _) = pair_device(&daemon, &datadir, "read");
    let (till, _) = pair_device(&daemon, &datadir, "receive");
    let admin = bearer(&token(&datadir));
    let health = |headers: &[(&str, &str)]| {
        let (status, raw) = daemon.get("/health", headers);
        assert!(status == 200 || status == 503, "{raw}");
        json_of(&raw)
    };
    for headers in [&[][..], &[("Authorization", till.as_str())][..]] {
        let body = health(headers);
        assert_eq!(keys(&body), ["reasons", "status"], "{body}");
    }
    for auth in [&admin, &display] {
        let body = health(&[("Authorization", auth)]);
        for detail in [
            "wallet",
            "ark_server",
            "exit_reserve",
            "vtxo_expiry",
            "exits",
            "store",
            "disk",
            "tasks",
        ] {
            assert!(body.get(detail).is_some(), "{detail} for a reader: {body}");
        }
    }
    // A wrong credential is refused, as everywhere, and counts as a guess.
    let (status, _) = daemon.get(
        "/health",
        &[(
            "Authorization",
            "Bearer AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        )],
    );
    assert_eq!(status, 401);
}

/// Open an SSE stream with `auth`; the reader, past the response head.
fn open_sse(port: u16, auth: &str) -> BufReader<TcpStream> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let head = format!(
        "GET /api/v1/notifications/sse HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Authorization: {auth}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).expect("write");
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).expect("status line");
    assert!(line.contains(" 200 "), "{line}");
    while line != "\r\n" {
        line.clear();
        reader.read_line(&mut line).expect("header");
    }
    reader
}

/// Whether the stream ends within `limit` (keep-alive comments do not count).
fn ends_within(reader: &mut BufReader<TcpStream>, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; 256];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        // Each read waits at most until the deadline, not the connection's timeout.
        reader
            .get_ref()
            .set_read_timeout(Some(left))
            .expect("timeout");
        match reader.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
}

#[test]
fn revoking_a_device_ends_its_tickets_and_its_live_streams_at_once() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let admin = bearer(&token(&datadir));
    let (phone, phone_id) = pair_device(&daemon, &datadir, "read");
    let ticket = |auth: &str| {
        let (status, raw) = daemon.get(
            "/api/v1/notifications/ws/ticket",
            &[("Authorization", auth)],
        );
        assert_eq!(status, 200, "{raw}");
        json_of(&raw).as_str().expect("ticket").to_string()
    };
    let ws_url = |ticket: &str| {
        format!(
            "ws://127.0.0.1:{}/api/v1/notifications/ws?ticket={ticket}",
            daemon.port
        )
    };

    // A credential holds 16 unused tickets: a 17th drops its own oldest, nobody else's.
    let admins_ticket = ticket(&admin);
    let first = ticket(&phone);
    let spare: Vec<String> = (0..16).map(|_| ticket(&phone)).collect();
    let (mut phone_ws, mut admin_ws) = rt.block_on(async {
        let err = tokio_tungstenite::connect_async(ws_url(&first))
            .await
            .expect_err("the oldest of 17 is gone");
        assert!(err.to_string().contains("401"), "{err}");
        let (phone_ws, _) = tokio_tungstenite::connect_async(ws_url(&spare[0]))
            .await
            .expect("the phone's socket");
        let (admin_ws, _) = tokio_tungstenite::connect_async(ws_url(&admins_ticket))
            .await
            .expect("the admin's ticket survived the phone's 17");
        (phone_ws, admin_ws)
    });
    let mut phone_sse = open_sse(daemon.port, &phone);
    let mut admin_sse = open_sse(daemon.port, &admin);
    let port = daemon.port;
    let phone_wait = {
        let phone = phone.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let answer = request(
                port,
                "GET",
                "/api/v1/notifications/wait?timeout=30",
                &[("Authorization", &phone)],
                None,
            );
            (answer, started.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(300));

    let revoked_at = Instant::now();
    let (status, raw) = request(
        port,
        "DELETE",
        &format!("/api/v1/devices/{phone_id}"),
        &[("Authorization", &admin)],
        None,
    );
    assert_eq!(status, 200, "{raw}");

    // The long-poll is answered at once, refused.
    let ((status, raw), waited) = phone_wait.join().expect("long-poll");
    assert_eq!(status, 401, "{raw}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    // The SSE stream ends; the admin's goes on.
    assert!(ends_within(&mut phone_sse, Duration::from_secs(5)));
    assert!(revoked_at.elapsed() < Duration::from_secs(10));
    assert!(!ends_within(&mut admin_sse, Duration::from_millis(500)));
    rt.block_on(async {
        // The websocket is closed with a policy-violation frame; the admin's stays open.
        let frame = tokio::time::timeout(Duration::from_secs(5), phone_ws.next())
            .await
            .expect("closed within 5 s");
        match frame {
            Some(Ok(tokio_tungstenite::tungstenite::Message::Close(Some(close)))) => {
                assert_eq!(u16::from(close.code), 1008, "{close:?}");
                assert!(close.reason.contains("revoked"), "{close:?}");
            }
            other => panic!("expected a close frame, got {other:?}"),
        }
        assert!(
            tokio::time::timeout(Duration::from_millis(500), admin_ws.next())
                .await
                .is_err(),
            "the admin's socket is untouched"
        );
        // Its unused tickets are void.
        let err = tokio_tungstenite::connect_async(ws_url(&spare[1]))
            .await
            .expect_err("a revoked device's ticket");
        assert!(err.to_string().contains("401"), "{err}");
    });
}

/// A raw request with `Host: host` (none when `None`): the status.
fn with_host(port: u16, path: &str, host: Option<&str>, auth: Option<&str>) -> u16 {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut req = match host {
        Some(host) => format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"),
        None => format!("GET {path} HTTP/1.0\r\n"),
    };
    if let Some(auth) = auth {
        req.push_str(&format!("Authorization: {auth}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).expect("write");
    let mut raw = String::new();
    let _ = stream.read_to_string(&mut raw);
    status_of(&raw)
}

#[test]
fn a_request_must_name_this_machine_in_its_host() {
    let (_tmp, datadir) =
        datadir_with_berth_toml("[server]\nallowed_hosts = [\"wallet.example.org\"]\n");
    // --no-auth: what a DNS-rebinding page would reach if Host were not checked.
    let daemon = Daemon::start(&datadir, &["--no-auth"]);
    let port = daemon.port;
    let hostname = berth::tls::hostname();
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        format!("{hostname}:{port}"),
        format!("{hostname}.local:{port}"),
        "wallet.example.org".to_string(),
    ] {
        assert_eq!(with_host(port, "/health", Some(&host), None), 200, "{host}");
    }
    assert_eq!(
        with_host(port, "/health", None, None),
        200,
        "no Host at all"
    );
    for host in [
        format!("rebind.attacker.example:{port}"),
        "attacker.example".to_string(),
        format!("{hostname}.attacker.example"),
        "192.0.2.1".to_string(),
    ] {
        for path in ["/health", "/api/v1/wallet", "/ping"] {
            assert_eq!(
                with_host(port, path, Some(&host), None),
                421,
                "{host} {path}"
            );
        }
    }
}

#[test]
fn one_source_cannot_take_every_connection_slot() {
    let (_tmp, datadir) = datadir_with_berth_toml("[server]\nmax_connections_per_source = 4\n");
    let daemon = Daemon::start(&datadir, &[]);
    let port = daemon.port;
    let ping = |stream: &mut TcpStream| -> bool {
        let _ = stream.write_all(b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        let mut buf = [0u8; 512];
        matches!(stream.read(&mut buf), Ok(n) if n > 0 && String::from_utf8_lossy(&buf[..n]).contains("pong"))
    };
    let connect = || {
        let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        s
    };
    // The harness's own /ping connections may still be closing on berthd's side: a
    // place frees when berthd sees the close, so wait for each of the four.
    let mut held: Vec<TcpStream> = Vec::new();
    while held.len() < 4 {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let mut s = connect();
            if ping(&mut s) {
                held.push(s);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "connection {} within the share",
                held.len() + 1
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let mut fifth = connect();
    assert!(!ping(&mut fifth), "beyond the share: closed");
    // Another source address (127.0.0.2, loopback too) has its own share.
    let mut other = connect_from("127.0.0.2", port);
    other
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    assert!(ping(&mut other), "another source is served");
    // A closed connection gives its place back.
    drop(held.pop());
    std::thread::sleep(Duration::from_millis(200));
    let mut again = connect();
    assert!(ping(&mut again), "a freed place is taken again");
}

/// Every answer says `X-Content-Type-Options: nosniff`, the refusals before any route
/// too: a browser never sniffs a JSON error or an event's text into a page (issue 39).
#[test]
fn every_answer_forbids_content_sniffing() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let bearer = format!("Bearer {}", token(&datadir));
    let port = daemon.port;
    let answers = [
        request(port, "GET", "/ping", &[], None),
        request(port, "GET", "/api/v1/wallet/balance", &[], None),
        request(
            port,
            "GET",
            "/api/v1/no/such/path",
            &[("Authorization", &bearer)],
            None,
        ),
        request(port, "GET", "/", &[], None),
        misdirected(port),
    ];
    assert_eq!(answers[4].0, 421, "{}", answers[4].1);
    for (status, raw) in answers {
        assert!(
            raw.to_ascii_lowercase()
                .contains("x-content-type-options: nosniff"),
            "{status}: {raw}"
        );
    }
}

/// A request that names another host: the raw answer (a 421).
fn misdirected(port: u16) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut raw = String::new();
    let _ = stream.read_to_string(&mut raw);
    (status_of(&raw), raw)
}

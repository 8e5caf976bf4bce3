//! LAN access on the real binary: TLS by default off loopback with a pinned local CA,
//! certificate renewal without a restart, pairing, per-device scopes across the whole
//! route table, revocation, auth-failure backoff, and the listener's limits (slow
//! headers, large bodies, idle connections, unfinished handshakes).

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth::access::scopes::Scopes;

use crate::harness;

use harness::*;

fn log_of(datadir: &Path) -> String {
    std::fs::read_to_string(datadir.join("debug.log")).unwrap_or_default()
}

/// Whether the local CA may sign for `ip` (its name constraints, `docs/lan.md`): the
/// private, loopback and link-local ranges.
fn in_private_ranges(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_private() || v4.is_loopback() || v4.is_link_local(),
        IpAddr::V6(v6) => {
            (v6.segments()[0] & 0xfe00) == 0xfc00
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6.is_loopback()
        }
    }
}

#[test]
fn plain_http_off_loopback_needs_a_flag_that_says_so() {
    let (_tmp, datadir) = new_datadir();
    let out = berthd(&datadir, &["--host", "0.0.0.0", "--no-tls"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--dangerously-allow-plaintext-lan"),
        "the refusal names the flag: {err}"
    );
    // The dangerous flag alone (without --no-tls) is a usage error.
    let out = berthd(&datadir, &["--dangerously-allow-plaintext-lan"]);
    assert!(!out.status.success());

    let daemon = Daemon::start(
        &datadir,
        &[
            "--host",
            "0.0.0.0",
            "--no-tls",
            "--dangerously-allow-plaintext-lan",
        ],
    );
    assert_eq!(daemon.get("/ping", &[]).0, 200);
    let log = log_of(&datadir);
    assert!(
        log.contains(&format!(
            "Server starting on http://0.0.0.0:{}",
            daemon.port
        )),
        "{log}"
    );
    // barkd's `--dangerously-allow-remote-no-auth` on 0.0.0.0 serving plain HTTP is
    // `tests/integration/daemon.rs`'s auth-disabling test.
}

#[test]
fn tls_on_the_lan_with_a_pinned_ca_by_ip_and_by_name() {
    let (_tmp, datadir) = new_datadir();
    let (daemon, config, ca) = start_tls(&datadir, &["--host", "0.0.0.0"]);
    let log = log_of(&datadir);
    assert!(
        log.contains(&format!(
            "Server starting on https://0.0.0.0:{}",
            daemon.port
        )),
        "{log}"
    );

    // Plain HTTP to a TLS port gets no HTTP answer.
    assert!(
        !matches!(
            try_request(daemon.port, "GET", "/ping", &[], None),
            Ok((200, _))
        ),
        "no plain HTTP on a TLS listener"
    );

    // By name, checking the name; and by every address, checking the address.
    let localhost: IpAddr = "127.0.0.1".parse().expect("ip");
    for name in ["localhost", "127.0.0.1"] {
        tls_connect(localhost, daemon.port, Arc::clone(&config), name)
            .unwrap_or_else(|e| panic!("connect as {name}: {e}"));
    }
    let lan: Vec<IpAddr> = if_addrs::get_if_addrs()
        .expect("interfaces")
        .into_iter()
        .map(|i| i.ip())
        .filter(|ip| !ip.is_loopback())
        .filter(|ip| !matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80))
        .collect();
    println!("LAN addresses checked: {lan:?}");
    let pin_only = harness::tls::pinned_client_config(&ca, false);
    for ip in &lan {
        // Connected over loopback, checking the certificate for the LAN address (the
        // daemon listens on IPv4 only here, and IPv6 may not be routed). An address
        // outside the local CA's name constraints (a public one) is not in the leaf:
        // such a client reaches the box by pin, or by name.
        let by_name = tls_connect(localhost, daemon.port, Arc::clone(&config), &ip.to_string());
        if in_private_ranges(ip) {
            by_name.unwrap_or_else(|e| panic!("the certificate is not valid for {ip}: {e}"));
        } else {
            assert!(by_name.is_err(), "{ip} is public and not in the leaf");
        }
        if ip.is_ipv4() {
            let checking = if in_private_ranges(ip) {
                Arc::clone(&config)
            } else {
                Arc::clone(&pin_only)
            };
            tls_connect(*ip, daemon.port, checking, &ip.to_string())
                .unwrap_or_else(|e| panic!("cannot connect by {ip}: {e}"));
        }
    }
    // A name the certificate does not hold fails with name checks, passes on the pin.
    assert!(tls_connect(localhost, daemon.port, Arc::clone(&config), "example.com").is_err());
    tls_connect(localhost, daemon.port, pin_only, "example.com").expect("pin only");

    // Another CA is refused.
    let (_other_tmp, other) = new_datadir();
    std::fs::create_dir_all(&other).expect("mkdir");
    assert!(berthd(&other, &["tls", "show"]).status.success());
    let other_ca = std::fs::read_to_string(other.join("tls/ca.pem")).expect("other ca");
    let stranger = harness::tls::pinned_client_config(&other_ca, false);
    assert!(tls_connect(localhost, daemon.port, stranger, "localhost").is_err());

    // h2 when offered by ALPN.
    let mut h2 = (*harness::tls::pinned_client_config(&ca, true)).clone();
    h2.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let stream = tls_connect(localhost, daemon.port, Arc::new(h2), "localhost").expect("h2");
    assert_eq!(stream.conn.alpn_protocol(), Some(&b"h2"[..]));

    // `berthd tls show` prints the pin the daemon logged, and keys are private.
    let out = berthd(&datadir, &["tls", "show"]);
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    let pin = shown
        .lines()
        .find_map(|l| l.strip_prefix("pin: "))
        .unwrap_or_else(|| panic!("no pin in {shown}"))
        .to_string();
    assert!(pin.starts_with("sha256/") && pin.len() == 7 + 43, "{pin}");
    assert!(log_of(&datadir).contains(&pin), "the log names the pin");
    use std::os::unix::fs::PermissionsExt;
    for key in ["ca.key", "leaf.key"] {
        let mode = std::fs::metadata(datadir.join("tls").join(key))
            .expect("key")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{key}");
    }
}

#[test]
fn a_renewed_leaf_is_served_without_a_restart_and_the_pin_still_holds() {
    // Below 30 days of validity a leaf is due for renewal at every check.
    let (_tmp, datadir) = datadir_with_berth_toml("[tls]\nleaf_validity_days = 20\n");
    let (daemon, config, _ca) = start_tls(&datadir, &["--tls"]);
    let localhost: IpAddr = "127.0.0.1".parse().expect("ip");
    let served = |config: &Arc<rustls::ClientConfig>| {
        let stream =
            tls_connect(localhost, daemon.port, Arc::clone(config), "localhost").expect("tls");
        stream
            .conn
            .peer_certificates()
            .and_then(|c| c.first())
            .map(|c| c.as_ref().to_vec())
            .expect("leaf")
    };
    let before = served(&config);
    let status = Command::new("kill")
        .args(["-HUP", &daemon.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    wait_until("a renewed leaf", 20, || served(&config) != before);
    // Same pin (same CA), new leaf, same process.
    assert_eq!(
        tls_request(daemon.port, Arc::clone(&config), "GET", "/ping", &[], None)
            .expect("ping")
            .0,
        200
    );
    assert!(log_of(&datadir).contains("TLS certificate renewed"));
}

#[test]
fn pairing_gives_a_scoped_device_token_once_and_revocation_is_immediate() {
    let (_tmp, datadir) = new_datadir();
    let (daemon, config, _ca) = start_tls(&datadir, &["--tls"]);
    let admin = bearer(&token(&datadir));
    let req = |method: &str, path: &str, auth: Option<&str>, body: Option<&str>| {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        tls_request(
            daemon.port,
            Arc::clone(&config),
            method,
            path,
            &headers,
            body,
        )
        .expect("request")
    };

    // No window: the endpoint does not exist.
    let pair_body = |code: &str| format!(r#"{{"code":"{code}","name":"Test phone"}}"#);
    assert_eq!(
        req("POST", "/api/v1/pair", None, Some(&pair_body("x"))).0,
        404
    );

    let uri = open_window(&datadir, "read");
    let shown = String::from_utf8_lossy(&berthd(&datadir, &["tls", "show"]).stdout).into_owned();
    let pin = uri_param(&uri, "pin");
    assert!(shown.contains(pin), "the URI carries the CA pin");
    assert_eq!(uri_param(&uri, "v"), "1");
    assert!(uri_param(&uri, "a").ends_with(&format!(":{}", daemon.port)));
    let exp: u64 = uri_param(&uri, "exp").parse().expect("exp");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    assert!((now + 590..=now + 610).contains(&exp), "10 minutes");
    let code = uri_param(&uri, "t").to_string();

    // A wrong code while the window is open: 401. The right one: a token, once.
    assert_eq!(
        req("POST", "/api/v1/pair", None, Some(&pair_body("wrong"))).0,
        401
    );
    let (status, raw) = req("POST", "/api/v1/pair", None, Some(&pair_body(&code)));
    assert_eq!(status, 200, "{raw}");
    let paired = json_of(&raw);
    let device_token = paired["token"].as_str().expect("token").to_string();
    let device_id = paired["device"]["id"].as_str().expect("id").to_string();
    assert_eq!(paired["device"]["scopes"], serde_json::json!(["read"]));
    assert_eq!(paired["device"]["name"], "Test phone");
    assert_eq!(
        req("POST", "/api/v1/pair", None, Some(&pair_body(&code))).0,
        404
    );

    // The device reads, but may not receive, and is listed for the admin.
    let device = bearer(&device_token);
    assert_eq!(req("GET", "/api/v1/wallet", Some(&device), None).0, 200);
    let (status, raw) = req("POST", "/api/v1/wallet/addresses/next", Some(&device), None);
    assert_eq!(status, 403, "{raw}");
    assert!(raw.contains("receive"), "{raw}");
    assert_eq!(req("GET", "/api/v1/devices", Some(&device), None).0, 403);
    let (status, raw) = req("GET", "/api/v1/devices", Some(&admin), None);
    assert_eq!(status, 200);
    let list = json_of(&raw);
    assert_eq!(list[0]["id"], device_id.as_str());
    assert!(!raw.contains(&device_token), "tokens are never listed");

    // Survives a restart (stored hashed in redb), then revoked: 401 at once.
    drop(daemon);
    let (daemon, config, _ca) = start_tls(&datadir, &["--tls"]);
    let req = |method: &str, path: &str, auth: Option<&str>| {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        tls_request(
            daemon.port,
            Arc::clone(&config),
            method,
            path,
            &headers,
            None,
        )
        .expect("request")
    };
    assert_eq!(req("GET", "/api/v1/wallet", Some(&device)).0, 200);
    let (status, raw) = req(
        "DELETE",
        &format!("/api/v1/devices/{device_id}"),
        Some(&admin),
    );
    assert_eq!(status, 200, "{raw}");
    assert_eq!(req("GET", "/api/v1/wallet", Some(&device)).0, 401);
    assert_eq!(
        req(
            "DELETE",
            &format!("/api/v1/devices/{device_id}"),
            Some(&admin)
        )
        .0,
        404
    );
    let db = std::fs::read(datadir.join("berth.redb")).expect("db");
    assert!(
        !db.windows(device_token.len())
            .any(|w| w == device_token.as_bytes()),
        "the token is not stored"
    );
}

/// Send a request and read only the status line (streams never end).
fn status_only(port: u16, method: &str, path: &str, auth: &str) -> u16 {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let body = if method == "GET" || method == "DELETE" {
        ""
    } else {
        "{}"
    };
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: {auth}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(req.as_bytes()).expect("write");
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => line.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&line)
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[test]
fn every_route_enforces_its_scope_for_device_tokens() {
    let (_tmp, datadir) = new_datadir();
    // Plain loopback HTTP: scopes do not depend on the transport, and it is faster.
    let daemon = Daemon::start(&datadir, &[]);
    let mut tokens = Vec::new();
    for scopes in ["read", "receive", "send", "admin", "read,receive,send"] {
        let uri = open_window(&datadir, scopes);
        let code = uri_param(&uri, "t");
        let (status, raw) = daemon.post(
            "/api/v1/pair",
            &[],
            &format!(r#"{{"code":"{code}","name":"{scopes}"}}"#),
        );
        assert_eq!(status, 200, "{raw}");
        let token = json_of(&raw)["token"].as_str().expect("token").to_string();
        let names: Vec<&str> = scopes.split(',').collect();
        tokens.push((Scopes::parse(&names).expect("scopes"), bearer(&token)));
    }
    let table = berth::api::route_table();
    let scoped = table.iter().filter_map(|route| match route.access {
        berth::api::routes::Access::Scoped { scope, .. } => {
            Some((route.method.as_str(), route.path.as_str(), scope))
        }
        berth::api::routes::Access::Public => None,
    });
    for (method, path, needed) in scoped {
        let concrete = path
            .replace("{vtxo_id}", "x")
            .replace("{id}", "x")
            .replace("{identifier}", "x")
            .replace("{index}", "0");
        // Long-polls answer at once with timeout=0.
        let concrete = if concrete.ends_with("/notifications/wait") {
            format!("{concrete}?timeout=0")
        } else {
            concrete
        };
        for (scopes, auth) in &tokens {
            let status = status_only(daemon.port, method, &concrete, auth);
            if scopes.allows(needed) {
                assert!(
                    status != 401 && status != 403 && status != 0,
                    "{method} {path} with {scopes:?}: {status}, expected to pass the scope check"
                );
            } else {
                assert_eq!(
                    status, 403,
                    "{method} {path} needs {needed:?}; {scopes:?} got {status}"
                );
            }
        }
    }
}

#[test]
fn auth_failures_back_off_guessers_but_never_lock_out_a_valid_credential() {
    let (_tmp, datadir) = new_datadir();
    let daemon = Daemon::start(&datadir, &[]);
    let admin = bearer(&token(&datadir));
    let (display, _) = pair_device(&daemon, &datadir, "read");
    let wrong = bearer("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    let get = |auth: &str| daemon.get("/api/v1/wallet", &[("Authorization", auth)]);
    // Missing credentials are not guesses: never blocked.
    for _ in 0..10 {
        assert_eq!(daemon.get("/api/v1/wallet", &[]).0, 401);
    }
    for _ in 0..berth::access::backoff::FREE_FAILURES {
        assert_eq!(get(&wrong).0, 401);
    }
    let (status, raw) = get(&wrong);
    assert_eq!(
        status, 401,
        "the failure that starts the block is answered: {raw}"
    );
    let (status, raw) = get(&wrong);
    assert_eq!(status, 429, "blocked: {raw}");
    assert!(raw.to_ascii_lowercase().contains("retry-after: 1"), "{raw}");
    // The owner and every other valid credential from this address are still served.
    assert_eq!(get(&admin).0, 200, "the admin token is never locked out");
    assert_eq!(get(&display).0, 200, "nor a device token");
    // A success with some credential does not wipe the guesser's count: still blocked.
    assert_eq!(get(&wrong).0, 429, "a success does not clear the record");
    std::thread::sleep(Duration::from_millis(1100));
    // The block passed, but the count did not: the next wrong guess blocks for twice
    // as long.
    assert_eq!(get(&wrong).0, 401);
    assert_eq!(get(&display).0, 200);
    let (status, raw) = get(&wrong);
    assert_eq!(status, 429, "{raw}");
    assert!(raw.to_ascii_lowercase().contains("retry-after: 2"), "{raw}");
    // Pairing codes are credentials too: while blocked, a wrong code is 429 and the
    // right one pairs.
    let uri = open_window(&datadir, "read");
    let pair = |code: &str| {
        daemon.post(
            "/api/v1/pair",
            &[],
            &format!(r#"{{"code":"{code}","name":"Phone"}}"#),
        )
    };
    assert_eq!(pair("not-the-code").0, 429);
    let (status, raw) = pair(uri_param(&uri, "t"));
    assert_eq!(status, 200, "the right code from a blocked address: {raw}");
}

#[test]
fn slow_headers_are_cut_off_and_large_bodies_refused() {
    let (_tmp, datadir) = datadir_with_berth_toml("[server]\nheader_read_timeout_secs = 2\n");
    let daemon = Daemon::start(&datadir, &[]);
    let good = bearer(&token(&datadir));

    // One byte a second: cut off at the 2 s timeout, long before the headers end.
    let mut slow = TcpStream::connect(("127.0.0.1", daemon.port)).expect("connect");
    let started = Instant::now();
    let request =
        b"GET /api/v1/wallet HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let mut cut_off = None;
    for byte in request {
        if slow.write_all(&[*byte]).is_err() {
            cut_off = Some(started.elapsed());
            break;
        }
        slow.set_read_timeout(Some(Duration::from_millis(1000)))
            .expect("timeout");
        let mut buf = [0u8; 256];
        match slow.read(&mut buf) {
            // Closed (0) or answered 408: cut off.
            Ok(n) => {
                let answer = String::from_utf8_lossy(&buf[..n]).into_owned();
                assert!(n == 0 || answer.contains("408"), "{answer}");
                cut_off = Some(started.elapsed());
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => {
                cut_off = Some(started.elapsed());
                break;
            }
        }
    }
    let cut_off = cut_off.expect("the slow client was never cut off");
    assert!(
        cut_off >= Duration::from_millis(1500) && cut_off < Duration::from_secs(6),
        "cut off after {cut_off:?}"
    );

    // 10 MB declared: 413 before the body is read.
    let mut big = TcpStream::connect(("127.0.0.1", daemon.port)).expect("connect");
    big.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let head = format!(
        "POST /api/v1/wallet/send HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {good}\r\n\
         Content-Type: application/json\r\nContent-Length: 10000000\r\n\r\n"
    );
    big.write_all(head.as_bytes()).expect("head");
    let _ = big.write_all(&vec![b' '; 64 * 1024]);
    let mut answer = String::new();
    let _ = big.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");

    // 2 MB chunked (no Content-Length): cut off while being read, also 413.
    let mut chunked = TcpStream::connect(("127.0.0.1", daemon.port)).expect("connect");
    chunked
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let head = format!(
        "POST /api/v1/wallet/send HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {good}\r\n\
         Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    chunked.write_all(head.as_bytes()).expect("head");
    let chunk = vec![b' '; 64 * 1024];
    for _ in 0..32 {
        if chunked
            .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .and_then(|()| chunked.write_all(&chunk))
            .and_then(|()| chunked.write_all(b"\r\n"))
            .is_err()
        {
            break;
        }
    }
    let _ = chunked.write_all(b"0\r\n\r\n");
    let mut answer = String::new();
    let _ = chunked.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
}

#[test]
fn a_request_past_its_time_limit_is_answered_503() {
    // The shortest limit allowed, against a long-poll that would wait 30 s.
    let (_tmp, datadir) = datadir_with_berth_toml("[server]\nrequest_timeout_secs = 5\n");
    let daemon = Daemon::start(&datadir, &[]);
    let good = bearer(&token(&datadir));
    let started = Instant::now();
    let (status, raw) = daemon.get(
        "/api/v1/notifications/wait?timeout=30",
        &[("Authorization", &good)],
    );
    let took = started.elapsed();
    assert_eq!(status, 503, "{raw}");
    assert!(raw.contains("within 5 s"), "{raw}");
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(15),
        "answered after {took:?}"
    );
    // Within the limit, the same endpoint answers normally.
    let (status, _) = daemon.get(
        "/api/v1/notifications/wait?timeout=1",
        &[("Authorization", &good)],
    );
    assert_eq!(status, 200);
}

#[test]
fn idle_connections_and_unfinished_handshakes_do_not_stop_a_client() {
    let (_tmp, datadir) = new_datadir();
    let (daemon, config, _ca) = start_tls(&datadir, &["--tls"]);
    // Both this process and berthd hold every connection: scale down (and say so) if
    // the open-files limit cannot take 1,200 (`scripts/test` raises it first).
    let limit = open_files_limit();
    let (idle, handshakes) = if limit >= 1400 {
        (1000, 200)
    } else {
        let idle = limit.saturating_sub(200) * 5 / 6;
        eprintln!(
            "open-files limit {limit}: {idle} idle connections and {} handshakes",
            idle / 5
        );
        (idle, idle / 5)
    };
    // The attacker is another machine (127.0.0.2): it may hold its share of the
    // connection slots (1,024 by default; beyond it its connections are closed), and
    // the client (127.0.0.1) must still be served.
    let mut held = Vec::new();
    for _ in 0..idle {
        held.push(connect_from("127.0.0.2", daemon.port));
    }
    // Handshakes that start (a ClientHello's first bytes) and never finish.
    for _ in 0..handshakes {
        let mut s = connect_from("127.0.0.2", daemon.port);
        // Past the source's share the connection is closed: a failed write is fine.
        let _ = s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00]);
        held.push(s);
    }
    let started = Instant::now();
    let (status, _) = tls_request(daemon.port, Arc::clone(&config), "GET", "/ping", &[], None)
        .expect("a legitimate client");
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "served in {:?}",
        started.elapsed()
    );
    drop(held);
}

#[test]
fn no_token_code_or_ticket_reaches_the_logs() {
    let (_tmp, datadir) = new_datadir();
    let port = free_port();
    let mut child = Command::new(BIN)
        .arg("--datadir")
        .arg(&datadir)
        .args(["--port", &port.to_string(), "--verbose"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Read both pipes as the daemon writes them: a full pipe would block its logging.
    let read_all = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stderr = read_all(Box::new(child.stderr.take().expect("stderr")));
    let stdout = read_all(Box::new(child.stdout.take().expect("stdout")));
    let daemon = Daemon { child, port };
    wait_until("/ping", 20, || {
        matches!(try_request(port, "GET", "/ping", &[], None), Ok((200, _)))
    });
    let admin_token = token(&datadir);
    let admin = bearer(&admin_token);

    let uri = open_window(&datadir, "read,send");
    let code = uri_param(&uri, "t").to_string();
    let (_, raw) = daemon.post(
        "/api/v1/pair",
        &[],
        &format!(r#"{{"code":"{code}","name":"phone"}}"#),
    );
    let device_token = json_of(&raw)["token"].as_str().expect("token").to_string();
    let device = bearer(&device_token);
    let (_, raw) = daemon.get(
        "/api/v1/notifications/ws/ticket",
        &[("Authorization", &device)],
    );
    let ticket: String = serde_json::from_str(body_of(&raw)).expect("ticket");
    daemon.get(&format!("/api/v1/notifications/ws?ticket={ticket}"), &[]);
    daemon.get("/api/v1/wallet", &[("Authorization", &device)]);
    daemon.get("/api/v1/wallet", &[("Authorization", &format!("{admin}x"))]);
    daemon.post(
        "/api/v1/wallet/addresses/next",
        &[("Authorization", &device)],
        "{}",
    );
    let (status, _) = daemon.terminate();
    assert!(status.success());
    let mut logs = log_of(&datadir);
    logs.push_str(&stderr.join().unwrap_or_default());
    logs.push_str(&stdout.join().unwrap_or_default());
    assert!(logs.contains("device paired"), "the log was captured");
    for (what, secret) in [
        ("admin token", admin_token.as_str()),
        ("device token", device_token.as_str()),
        ("pairing code", code.as_str()),
        ("websocket ticket", ticket.as_str()),
    ] {
        assert!(!logs.contains(secret), "the {what} appears in the logs");
    }
}

/// This process's soft limit on open files.
fn open_files_limit() -> usize {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(1024)
}

#[test]
fn the_tls_listener_is_announced_by_dns_sd_when_switched_on() {
    if berth::net::mdns::multicast_interface().is_none() {
        harness::skip(
            "the_tls_listener_is_announced_by_dns_sd_when_switched_on",
            "no multicast-capable interface, nothing can be announced",
        );
        return;
    }
    let (_tmp, datadir) = datadir_with_berth_toml("[discovery]\nmdns = true\n");
    let browser = mdns_sd::ServiceDaemon::new().expect("browser");
    let events = browser
        .browse(berth::net::mdns::SERVICE_TYPE)
        .expect("browse");
    let (daemon, _config, _ca) = start_tls(&datadir, &["--tls"]);
    let shown = String::from_utf8_lossy(&berthd(&datadir, &["tls", "show"]).stdout).into_owned();
    let pin = shown
        .lines()
        .find_map(|l| l.strip_prefix("pin: "))
        .expect("pin")
        .to_string();
    let prefix = berth::net::mdns::pin_prefix(&pin).expect("prefix");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok(mdns_sd::ServiceEvent::ServiceResolved(s)) if s.get_port() == daemon.port => {
                assert_eq!(s.get_property_val_str("v"), Some("1"));
                assert_eq!(s.get_property_val_str("pin"), Some(prefix.as_str()));
                break;
            }
            Ok(_) => {}
            Err(e) => panic!("the daemon was not announced within 10 s: {e}"),
        }
    }
    let _ = browser.shutdown();
}

#[test]
fn websockets_work_over_tls() {
    let (_tmp, datadir) = new_datadir();
    let (daemon, config, _ca) = start_tls(&datadir, &["--tls"]);
    let (status, raw) = tls_request(
        daemon.port,
        Arc::clone(&config),
        "GET",
        "/api/v1/notifications/ws/ticket",
        &[("Authorization", &bearer(&token(&datadir)))],
        None,
    )
    .expect("ticket");
    assert_eq!(status, 200, "{raw}");
    let ticket: String = serde_json::from_str(body_of(&raw)).expect("ticket");
    let port = daemon.port;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        let connector = tokio_rustls::TlsConnector::from(config);
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        let tls = connector.connect(name, tcp).await.expect("TLS");
        let url = format!("wss://localhost:{port}/api/v1/notifications/ws?ticket={ticket}");
        let (socket, response) = tokio_tungstenite::client_async(url, tls)
            .await
            .expect("websocket upgrade over TLS");
        assert_eq!(response.status(), 101);
        drop(socket);
    });
}

#[test]
fn a_user_supplied_certificate_is_served() {
    // Another datadir's generated leaf and key stand in for the operator's own files.
    let (_other_tmp, other) = new_datadir();
    std::fs::create_dir_all(&other).expect("mkdir");
    assert!(berthd(&other, &["tls", "show"]).status.success());
    let other_ca = std::fs::read_to_string(other.join("tls/ca.pem")).expect("ca");

    let (_tmp, datadir) = datadir_with_berth_toml(&format!(
        "[tls]\ncert_file = {:?}\nkey_file = {:?}\n",
        other.join("tls/leaf.pem"),
        other.join("tls/leaf.key")
    ));
    let daemon = Daemon::spawn(&datadir, &["--tls"]);
    let port = daemon.port;
    let config = harness::tls::pinned_client_config(&other_ca, true);
    wait_until("/ping over the user's certificate", 20, || {
        matches!(
            tls_request(port, Arc::clone(&config), "GET", "/ping", &[], None),
            Ok((200, _))
        )
    });
    assert!(
        !datadir.join("tls").exists(),
        "no local CA is made when the operator supplies a certificate"
    );
}

/// The pin `berthd tls show` prints.
fn shown_pin(datadir: &Path) -> String {
    let out = berthd(datadir, &["tls", "show"]);
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{shown}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    shown
        .lines()
        .find_map(|l| l.strip_prefix("pin: "))
        .unwrap_or_else(|| panic!("no pin in {shown}"))
        .to_string()
}

/// A leaf for `name` signed with the datadir's own CA key (what someone who copied
/// `tls/ca.key` off the card could make), and whether webpki, the verifier rustls and
/// the test client use, accepts it under that CA.
fn forged_leaf_verifies(datadir: &Path, name: &str) -> Result<(), webpki::Error> {
    use rustls::pki_types::pem::PemObject as _;
    let ca_key = std::fs::read_to_string(datadir.join("tls/ca.key")).expect("ca.key");
    let ca_key = rcgen::KeyPair::from_pem(&ca_key).expect("CA key");
    let mut issuer_params = rcgen::CertificateParams::default();
    issuer_params.distinguished_name = rcgen::DistinguishedName::new();
    issuer_params.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!("Berth local CA {}", berth::tls::hostname()),
    );
    let issuer = rcgen::Issuer::new(issuer_params, ca_key);
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let mut params = rcgen::CertificateParams::new(vec![name.to_string()]).expect("params");
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let leaf = params.signed_by(&key, &issuer).expect("sign");

    let ca = rustls::pki_types::CertificateDer::from_pem_slice(ca_pem(datadir).as_bytes())
        .expect("ca.pem");
    let anchors = [webpki::anchor_from_trusted_cert(&ca).expect("anchor")];
    webpki::EndEntityCert::try_from(leaf.der())
        .expect("leaf")
        .verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            &[],
            rustls::pki_types::UnixTime::now(),
            webpki::KeyUsage::server_auth(),
            None,
            None,
        )
        .map(|_| ())
}

/// The CA a fresh berthd makes carries critical name constraints: its host name,
/// `local`, `localhost` and the private, loopback and link-local ranges (read back with
/// x509-parser), which `berthd tls show` prints. A leaf for example.com (or a public
/// address) signed with its key is refused by webpki; one for the box is accepted; and
/// a real TLS client still reaches berthd by its names.
#[test]
fn the_local_ca_can_sign_only_for_the_box_and_the_lan() {
    use x509_parser::prelude::{FromDer as _, GeneralName, X509Certificate};
    let (_tmp, datadir) = new_datadir();
    let (daemon, config, ca) = start_tls(&datadir, &["--tls"]);
    let hostname = berth::tls::hostname();

    let der = rustls::pki_types::pem::PemObject::from_pem_slice(ca.as_bytes())
        .map(|der: rustls::pki_types::CertificateDer<'static>| der)
        .expect("ca.pem");
    let (_, x509) = X509Certificate::from_der(&der).expect("a certificate");
    let constraints = x509
        .name_constraints()
        .expect("readable")
        .expect("name constraints");
    assert!(constraints.critical, "the name constraints are critical");
    assert!(constraints.value.excluded_subtrees.is_none());
    let permitted: Vec<String> = constraints
        .value
        .permitted_subtrees
        .as_ref()
        .expect("permitted subtrees")
        .iter()
        .map(|subtree| match &subtree.base {
            GeneralName::DNSName(name) => name.to_string(),
            GeneralName::IPAddress(bytes) => format!("{bytes:02x?}"),
            other => panic!("unexpected subtree {other:?}"),
        })
        .collect();
    let range = |addr: &[u8], mask: &[u8]| format!("{:02x?}", [addr, mask].concat());
    assert_eq!(
        permitted,
        [
            hostname.clone(),
            "local".into(),
            "localhost".into(),
            range(&[10, 0, 0, 0], &[255, 0, 0, 0]),
            range(&[172, 16, 0, 0], &[255, 240, 0, 0]),
            range(&[192, 168, 0, 0], &[255, 255, 0, 0]),
            range(&[127, 0, 0, 0], &[255, 0, 0, 0]),
            range(&[169, 254, 0, 0], &[255, 255, 0, 0]),
            range(
                &"fc00::".parse::<std::net::Ipv6Addr>().expect("ip").octets(),
                &"fe00::".parse::<std::net::Ipv6Addr>().expect("ip").octets()
            ),
            range(
                &"fe80::".parse::<std::net::Ipv6Addr>().expect("ip").octets(),
                &"ffc0::".parse::<std::net::Ipv6Addr>().expect("ip").octets()
            ),
            range(&std::net::Ipv6Addr::LOCALHOST.octets(), &[0xff; 16]),
        ]
    );
    let out = berthd(&datadir, &["tls", "show"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains(&format!(
            "CA may sign for: {hostname}, local, localhost, 10.0.0.0/8, 172.16.0.0/12, \
             192.168.0.0/16, 127.0.0.0/8, 169.254.0.0/16, fc00::/7, fe80::/10, ::1/128"
        )),
        "{shown}"
    );

    assert_eq!(
        forged_leaf_verifies(&datadir, "example.com"),
        Err(webpki::Error::NameConstraintViolation)
    );
    assert_eq!(
        forged_leaf_verifies(&datadir, "8.8.8.8"),
        Err(webpki::Error::NameConstraintViolation)
    );
    assert_eq!(forged_leaf_verifies(&datadir, "other-box.local"), Ok(()));

    let localhost: IpAddr = "127.0.0.1".parse().expect("ip");
    for name in [
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        hostname.clone(),
        format!("{hostname}.local"),
    ] {
        tls_connect(localhost, daemon.port, Arc::clone(&config), &name)
            .unwrap_or_else(|e| panic!("connect as {name}: {e}"));
    }
}

/// A datadir with a CA from before name constraints (made here with rcgen, the way
/// older berthds made theirs): the first start replaces it, once, with a new key, says
/// so in the log with both pins, and serves a leaf of the new CA; `berthd tls show`
/// prints the new pin; a client pinning the old CA is refused; a second start keeps the
/// new CA.
#[test]
fn a_ca_without_name_constraints_is_replaced_once() {
    let (_tmp, datadir) = new_datadir();
    let tls = datadir.join("tls");
    std::fs::create_dir_all(&tls).expect("mkdir");
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!("Berth local CA {}", berth::tls::hostname()),
    );
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let old = params.self_signed(&key).expect("old CA");
    std::fs::write(tls.join("ca.pem"), old.pem()).expect("ca.pem");
    std::fs::write(tls.join("ca.key"), key.serialize_pem()).expect("ca.key");
    let old_pin = berth::tls::spki_pin(old.der()).expect("pin");

    let daemon = Daemon::spawn(&datadir, &["--tls"]);
    let port = daemon.port;
    wait_until("a new CA", 20, || {
        std::fs::read_to_string(tls.join("ca.pem")).is_ok_and(|pem| pem != old.pem())
    });
    let new_ca = ca_pem(&datadir);
    let config = harness::tls::pinned_client_config(&new_ca, true);
    wait_until("/ping over TLS", 20, || {
        matches!(
            tls_request(port, Arc::clone(&config), "GET", "/ping", &[], None),
            Ok((200, _))
        )
    });
    let pin = shown_pin(&datadir);
    assert_ne!(pin, old_pin);
    let log = log_of(&datadir);
    assert!(
        log.lines().any(|l| l.contains("replaced the local CA")
            && l.contains("paired phones must pair again")
            && l.contains(&format!("old_pin={old_pin}"))
            && l.contains(&format!("pin={pin}"))),
        "{log}"
    );
    let localhost: IpAddr = "127.0.0.1".parse().expect("ip");
    let stale = harness::tls::pinned_client_config(&old.pem(), false);
    assert!(tls_connect(localhost, port, stale, "localhost").is_err());
    daemon.terminate();

    let before = log_of(&datadir).len();
    let (daemon, _config, ca) = start_tls(&datadir, &["--tls"]);
    assert_eq!(ca, new_ca, "kept");
    assert_eq!(shown_pin(&datadir), pin);
    assert!(!log_of(&datadir)[before..].contains("replaced the local CA"));
    daemon.terminate();
}

/// On the TLS listener a console form must come from an `https` page of the box: the
/// same host and port over plain `http` (a spoofed `.local` page on the LAN, say) is
/// another origin and changes nothing (issue 39).
#[test]
fn a_console_form_over_tls_must_come_from_an_https_page() {
    let (_tmp, datadir) = new_datadir();
    let (daemon, config, _ca) = start_tls(&datadir, &["--tls"]);
    let post = |origin: &str| {
        tls_request(
            daemon.port,
            Arc::clone(&config),
            "POST",
            "/console/sign-in",
            &[("Origin", origin)],
            Some("code=x&name=y"),
        )
        .expect("request")
    };
    let (status, raw) = post("http://localhost");
    assert_eq!(status, 403, "plain http is another origin: {raw}");
    let (status, raw) = post("https://localhost");
    assert_ne!(status, 403, "the box's own https origin: {raw}");
}

//! TLS cost on the real binary (release): what a phone pays to connect, what TLS costs
//! per request against plain loopback HTTP, and what idle TLS connections cost in
//! memory.
//!
//! Figures printed:
//! - a new connection and its first request (`GET /ping`), 1,000 times one after
//!   another: plain TCP vs a TLS handshake (rustls client pinning the CA), p50/p99;
//! - requests per second and p50/p99 under `oha` (16 connections,
//!   `BERTH_BENCH_REQUESTS`, default 20,000, of `GET /api/v1/wallet` with the token):
//!   plain, TLS with HTTP/1.1, TLS with h2, and with a new connection per request;
//! - berthd's VmRSS idle, with 200 idle TLS connections, and after they close.
//!
//! Needs `OHA` (or `oha` on the PATH; `cargo install oha --locked`). Run:
//! `scripts/bench-tls`.

#[path = "../tests/harness/mod.rs"]
mod harness;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{what}: p50 {:.2} ms, p99 {:.2} ms ({} connections)",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples.len()
    );
}

fn plain_ping(port: u16) -> Duration {
    let started = Instant::now();
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    // The address it connects to: the allowed-hosts check refuses any other name (it
    // exempts /ping today, which a bench should not rely on).
    let request =
        format!("GET /ping HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read");
    assert!(out.starts_with(b"HTTP/1.1 200"));
    started.elapsed()
}

fn tls_ping(port: u16, config: &Arc<rustls::ClientConfig>) -> Duration {
    let started = Instant::now();
    let (status, _) = harness::tls_request(port, Arc::clone(config), "GET", "/ping", &[], None)
        .expect("TLS ping");
    assert_eq!(status, 200);
    started.elapsed()
}

fn oha(oha: &str, label: &str, url: &str, bearer: &str, n: u64, extra: &[&str]) {
    let n = n.to_string();
    let mut args = vec!["--insecure", "-c", "16", "-n", &n, "-H", bearer];
    args.extend_from_slice(extra);
    args.push(url);
    println!("{label}: {}", harness::oha(oha, &args));
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let oha_bin = std::env::var("OHA").unwrap_or_else(|_| "oha".into());
    let requests: u64 = std::env::var("BERTH_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);

    let (_plain_tmp, plain_dir) = harness::new_datadir();
    let plain = harness::Daemon::start(&plain_dir, &["-q"]);
    let (_tls_tmp, tls_dir) = harness::new_datadir();
    let (tls, config, _ca) = harness::start_tls(&tls_dir, &["--tls", "-q"]);

    // Warm both up (first-connection costs, page faults).
    for _ in 0..50 {
        plain_ping(plain.port);
        tls_ping(tls.port, &config);
    }
    report(
        "new connection + first request, plain HTTP",
        (0..1000).map(|_| plain_ping(plain.port)).collect(),
    );
    report(
        "new connection + first request, TLS handshake (P-256, TLS 1.3)",
        (0..1000).map(|_| tls_ping(tls.port, &config)).collect(),
    );

    let plain_bearer = format!("Authorization: Bearer {}", harness::token(&plain_dir));
    let tls_bearer = format!("Authorization: Bearer {}", harness::token(&tls_dir));
    let plain_url = format!("http://127.0.0.1:{}/api/v1/wallet", plain.port);
    let tls_url = format!("https://127.0.0.1:{}/api/v1/wallet", tls.port);
    oha(
        &oha_bin,
        "plain HTTP/1.1, keep-alive",
        &plain_url,
        &plain_bearer,
        requests,
        &[],
    );
    oha(
        &oha_bin,
        "TLS HTTP/1.1, keep-alive",
        &tls_url,
        &tls_bearer,
        requests,
        &[],
    );
    oha(
        &oha_bin,
        "TLS h2",
        &tls_url,
        &tls_bearer,
        requests,
        &["--http2"],
    );
    oha(
        &oha_bin,
        "plain HTTP/1.1, a new connection per request",
        &plain_url,
        &plain_bearer,
        requests / 4,
        &["--disable-keepalive"],
    );
    oha(
        &oha_bin,
        "TLS HTTP/1.1, a new connection (handshake) per request",
        &tls_url,
        &tls_bearer,
        requests / 4,
        &["--disable-keepalive"],
    );

    let pid = tls.child.id();
    std::thread::sleep(Duration::from_secs(1));
    let idle = harness::rss_kb(pid);
    let localhost = "127.0.0.1".parse().expect("ip");
    let held: Vec<_> = (0..200)
        .map(|_| harness::tls_connect(localhost, tls.port, Arc::clone(&config), "localhost"))
        .collect::<Result<_, _>>()
        .expect("200 TLS connections");
    std::thread::sleep(Duration::from_secs(1));
    let with_200 = harness::rss_kb(pid);
    drop(held);
    std::thread::sleep(Duration::from_secs(2));
    let after = harness::rss_kb(pid);
    println!(
        "berthd VmRSS: idle {idle} kB, with 200 idle TLS connections {with_200} kB \
         ({:.1} kB each), after they close {after} kB",
        (with_200 as f64 - idle as f64) / 200.0
    );
}

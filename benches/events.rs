//! Event delivery under load: 1,000 long-polls and 200 websockets held open on one
//! berthd while wallet events are appended at 100 per second.
//!
//! The events are real bark notifications: each is a metadata update of one movement
//! (`POST /api/v1/history/1/metadata` with `{"n": i, "t": <send time, ns>}`), which bark
//! commits and announces and berthd records in its log. So a wallet must be loaded,
//! which needs a chain source: set `BITCOIND_EXEC` (a regtest node is started on free
//! ports; the Ark server address is a dead port, which nothing here needs).
//!
//! Figures printed:
//! - delivery latency p50/p99/max per transport, from just before the update request
//!   is sent until a client holds the notification (so it includes bark's commit and
//!   the log append, two durable writes);
//! - the update request's own latency, and the achieved event rate;
//! - berthd's VmRSS (and its anonymous part, RssAnon) before the clients connect, at
//!   its peak during the run, and then every 5 s for 60 s after every client left, with
//!   the time until VmRSS was back within 5 MiB of the figure before the clients (the
//!   memory an allocator gives back after a load spike; docs/adr/0007).
//!
//! "Before the clients" is a box that has been in use, then idle: first one long-poll
//! and one websocket receive enough events to fill the event log's in-memory window
//! (`events::RECENT_CAPACITY`), then they leave and berthd rests 30 s. A box just
//! started on a new wallet has an empty window and has not yet run its event-delivery
//! code, so the burst's figures would otherwise count the wallet's own growth (about
//! 8 MB on 30 Nov 2026: the window of the newest events, redb's cache of the pages written, the code
//! paged in) as memory the burst kept. The figure straight after start is printed too.
//!
//! Run: `scripts/bench-events` (or `BITCOIND_EXEC=... cargo bench --bench events`).
//! `BERTH_BENCH_POLLS`, `BERTH_BENCH_SOCKETS`, `BERTH_BENCH_RATE` and
//! `BERTH_BENCH_SECS` change the load (defaults 1000, 200, 100, 20). The clients run in
//! this process on the same machine, so they compete with berthd for the CPU.
//! berthd inherits this process's environment (`_RJEM_MALLOC_CONF` changes its
//! allocator's settings); `BERTH_BENCH_BERTHD` runs another build of it (such as
//! `target/dist/shipped/berthd`).

#[path = "../tests/harness/mod.rs"]
mod harness;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::StreamExt as _;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use berth::access::tickets::MAX_TICKETS_PER_CREDENTIAL;
use harness::{Bitcoind, Daemon, json_of, request, token};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// CPU seconds (user + system) `pid` has used.
fn cpu_secs(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(") ").map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// Every `"t":<digits>` in `body`: the send times of the updates it carries. A scan,
/// not a parse, so the clients spend little CPU.
fn send_times(body: &str) -> impl Iterator<Item = u64> + '_ {
    body.match_indices("\"t\":").filter_map(|(i, m)| {
        let digits: String = body[i + m.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

/// Latencies in µs, one shared sink per transport.
#[derive(Default)]
struct Sink(std::sync::Mutex<Vec<u64>>);

impl Sink {
    fn record(&self, sent_ns: u64) {
        let micros = now_ns().saturating_sub(sent_ns) / 1000;
        self.0.lock().expect("sink").push(micros);
    }

    fn report(&self, what: &str, expected: u64) {
        let mut v = self.0.lock().expect("sink").clone();
        v.sort_unstable();
        let pct = |p: f64| {
            v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0)
        };
        println!(
            "{what}: {} deliveries (expected {expected}); latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            v.len(),
            pct(0.50) as f64 / 1000.0,
            pct(0.99) as f64 / 1000.0,
            v.last().copied().unwrap_or(0) as f64 / 1000.0,
        );
    }
}

/// One long-poll client on a keep-alive connection: `wait?after=<cursor>` in a loop.
async fn long_poll(
    port: u16,
    bearer: String,
    mut cursor: u64,
    sink: Arc<Sink>,
    stop: Arc<AtomicBool>,
) {
    let Ok(stream) = TcpStream::connect(("127.0.0.1", port)).await else {
        return;
    };
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    while !stop.load(Ordering::Relaxed) {
        let req = format!(
            "GET /api/v1/notifications/wait?after={cursor}&types=movement-updated&timeout=5 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: {bearer}\r\n\r\n"
        );
        if write.write_all(req.as_bytes()).await.is_err() {
            return;
        }
        let mut length = 0usize;
        let mut status = String::new();
        if read.read_line(&mut status).await.unwrap_or(0) == 0 {
            return;
        }
        // A refused request would otherwise be retried in a tight loop, counted as
        // nothing delivered.
        if !status.starts_with("HTTP/1.1 200") {
            eprintln!("a long-poll was answered {}", status.trim_end());
            return;
        }
        loop {
            let mut line = String::new();
            if read.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        if read.read_exact(&mut body).await.is_err() {
            return;
        }
        let body = String::from_utf8_lossy(&body);
        for sent in send_times(&body) {
            sink.record(sent);
        }
        if let Some(i) = body.find("\"last_event_id\":") {
            let digits: String = body[i + 16..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            cursor = digits.parse().unwrap_or(cursor);
        }
    }
}

/// One websocket client; `tried` counts it once its connection attempt is over.
async fn socket(
    port: u16,
    ticket: String,
    cursor: u64,
    sink: Arc<Sink>,
    stop: Arc<AtomicBool>,
    tried: Arc<AtomicU64>,
) {
    let url = format!(
        "ws://127.0.0.1:{port}/api/v1/notifications/ws?ticket={ticket}&after={cursor}&types=movement-updated"
    );
    let connected = tokio_tungstenite::connect_async(url).await;
    tried.fetch_add(1, Ordering::Relaxed);
    let Ok((mut ws, _)) = connected else {
        eprintln!("a websocket did not connect");
        return;
    };
    while !stop.load(Ordering::Relaxed) {
        match tokio::time::timeout(Duration::from_millis(500), ws.next()).await {
            Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Text(text)))) => {
                for sent in send_times(&text) {
                    sink.record(sent);
                }
            }
            Ok(Some(Ok(_))) | Err(_) => {}
            Ok(_) => return,
        }
    }
    let _ = ws.close(None).await;
}

/// Appends `count` events at `rate` per second, numbered from `first`: each a metadata
/// update of movement 1 carrying its send time. Returns each request's latency in µs.
fn append_events(port: u16, auth: &[(&str, &str)], first: u64, count: u64, rate: u64) -> Vec<u64> {
    let interval = Duration::from_nanos(1_000_000_000 / rate);
    let started = Instant::now();
    let mut request_us = Vec::with_capacity(count as usize);
    for i in 0..count {
        let due = started + interval * i as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let t = now_ns();
        let body = serde_json::json!({ "n": first + i, "t": t }).to_string();
        let (status, raw) = request(
            port,
            "POST",
            "/api/v1/history/1/metadata",
            auth,
            Some(&body),
        );
        assert_eq!(status, 200, "{raw}");
        request_us.push((now_ns() - t) / 1000);
    }
    request_us
}

/// The newest event id berthd has: pages read without waiting until one is empty (a
/// page holds at most `events::MAX_PAGE`, and its `last_event_id` is its own last).
fn last_event_id(daemon: &Daemon, auth: &[(&str, &str)]) -> u64 {
    let mut cursor = 0;
    loop {
        let path = format!("/api/v1/notifications/wait?after={cursor}&timeout=0");
        let next = json_of(&daemon.get(&path, auth).1)["last_event_id"]
            .as_u64()
            .unwrap_or(cursor);
        if next <= cursor {
            return cursor;
        }
        cursor = next;
    }
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        // `cargo test --benches` builds and runs this; the load run is for `cargo bench`.
        return;
    }
    let bitcoind = Bitcoind::start("bench-events");
    let polls = env_or("BERTH_BENCH_POLLS", 1000);
    let sockets = env_or("BERTH_BENCH_SOCKETS", 200);
    let rate = env_or("BERTH_BENCH_RATE", 100).max(1);
    let secs = env_or("BERTH_BENCH_SECS", 20);
    // A loaded wallet with one movement to annotate.
    let (_tmp, datadir) = harness::datadir_with_wallet(&bitcoind);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = [("Authorization", bearer.as_str())];
    harness::with_store(&datadir, async |store| {
        harness::new_movement(store, "events").await
    });
    let daemon = Daemon::start(&datadir, &["-q"]);
    let port = daemon.port;
    let pid = daemon.child.id();
    harness::wait_loaded(&daemon, &datadir);
    std::thread::sleep(Duration::from_secs(1));
    let rss_started = harness::rss_kb(pid);
    let anon_started = harness::status_kb(pid, "RssAnon");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");

    // A box in use: one long-poll and one websocket receive a window's worth of events,
    // then leave, and berthd rests.
    let warm_cursor = last_event_id(&daemon, &auth);
    let warm_stop = Arc::new(AtomicBool::new(false));
    let warm_tried = Arc::new(AtomicU64::new(0));
    let warm_sink = Arc::new(Sink::default());
    let ticket = json_of(&daemon.get("/api/v1/notifications/ws/ticket", &auth).1)
        .as_str()
        .expect("ticket")
        .to_string();
    let warm_clients = [
        rt.spawn(long_poll(
            port,
            bearer.clone(),
            warm_cursor,
            Arc::clone(&warm_sink),
            Arc::clone(&warm_stop),
        )),
        rt.spawn(socket(
            port,
            ticket,
            warm_cursor,
            Arc::clone(&warm_sink),
            Arc::clone(&warm_stop),
            Arc::clone(&warm_tried),
        )),
    ];
    harness::wait_until("the warm-up websocket to connect", 30, || {
        warm_tried.load(Ordering::Relaxed) >= 1
    });
    let warm_events = berth::events::RECENT_CAPACITY as u64 + 76;
    append_events(port, &auth, 1, warm_events, rate);
    // The log records the updates behind bark's commits: wait until it stops growing.
    let mut recorded = (last_event_id(&daemon, &auth), Instant::now());
    while recorded.1.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(500));
        let id = last_event_id(&daemon, &auth);
        if id != recorded.0 {
            recorded = (id, Instant::now());
        }
    }
    eprintln!(
        "warm-up: {warm_events} updates, events {warm_cursor}..{}",
        recorded.0
    );
    std::thread::sleep(Duration::from_secs(2));
    warm_stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        for client in warm_clients {
            let _ = tokio::time::timeout(Duration::from_secs(10), client).await;
        }
    });
    // 30 s: the blocking pool's idle threads end after 10 s, handing their thread caches
    // back, and what is then free is given back 5 s later (dirty_decay_ms).
    std::thread::sleep(Duration::from_secs(30));
    let cursor = last_event_id(&daemon, &auth);
    let rss_before = harness::rss_kb(pid);
    let anon_before = harness::status_kb(pid, "RssAnon");
    let polled = Arc::new(Sink::default());
    let streamed = Arc::new(Sink::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for _ in 0..polls {
        clients.push(rt.spawn(long_poll(
            port,
            bearer.clone(),
            cursor,
            Arc::clone(&polled),
            Arc::clone(&stop),
        )));
    }
    // A credential holds at most 16 unused tickets (access::tickets): the sockets connect
    // in batches of that many, each batch's tickets taken once the last batch used theirs.
    let tried = Arc::new(AtomicU64::new(0));
    let mut spawned = 0;
    while spawned < sockets {
        let batch = (sockets - spawned).min(MAX_TICKETS_PER_CREDENTIAL as u64);
        for _ in 0..batch {
            let ticket = json_of(&daemon.get("/api/v1/notifications/ws/ticket", &auth).1)
                .as_str()
                .expect("ticket")
                .to_string();
            clients.push(rt.spawn(socket(
                port,
                ticket,
                cursor,
                Arc::clone(&streamed),
                Arc::clone(&stop),
                Arc::clone(&tried),
            )));
        }
        spawned += batch;
        harness::wait_until("a batch of websockets to connect", 30, || {
            tried.load(Ordering::Relaxed) >= spawned
        });
    }
    std::thread::sleep(Duration::from_secs(3));
    let rss_connected = harness::rss_kb(pid);

    // The writer: `rate` updates per second for `secs` seconds, on their own thread.
    let peak = Arc::new(AtomicU64::new(rss_connected));
    let peak_anon = Arc::new(AtomicU64::new(harness::status_kb(pid, "RssAnon")));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, peak_anon, sampling) = (
            Arc::clone(&peak),
            Arc::clone(&peak_anon),
            Arc::clone(&sampling),
        );
        std::thread::spawn(move || {
            while sampling.load(Ordering::Relaxed) {
                peak.fetch_max(harness::rss_kb(pid), Ordering::Relaxed);
                peak_anon.fetch_max(harness::status_kb(pid, "RssAnon"), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let cpu_start = (cpu_secs(&pid.to_string()), cpu_secs("self"));
    let total = rate * secs;
    let started = Instant::now();
    let mut request_us = append_events(port, &auth, warm_events + 1, total, rate);
    let elapsed = started.elapsed();
    let cpu_end = (cpu_secs(&pid.to_string()), cpu_secs("self"));
    // Let the last events arrive.
    std::thread::sleep(Duration::from_secs(2));
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.join();
    stop.store(true, Ordering::Relaxed);
    rt.block_on(async {
        for client in clients {
            let _ = tokio::time::timeout(Duration::from_secs(10), client).await;
        }
    });
    // Memory given back once the clients are gone: VmRSS every second for 60 s (every
    // fifth printed), and the first second it is within 5 MiB of the figure before the
    // clients connected.
    const WITHIN_KB: u64 = 5 * 1024;
    let left = Instant::now();
    let mut back_after = None;
    let mut after = vec![format!("0 s {}", harness::rss_kb(pid))];
    for second in 1..=60u64 {
        if let Some(wait) =
            (left + Duration::from_secs(second)).checked_duration_since(Instant::now())
        {
            std::thread::sleep(wait);
        }
        let rss = harness::rss_kb(pid);
        if back_after.is_none() && rss <= rss_before + WITHIN_KB {
            back_after = Some(second);
        }
        if second % 5 == 0 {
            after.push(format!("{second} s {rss}"));
        }
    }
    let rss_after = harness::rss_kb(pid);
    let anon_after = harness::status_kb(pid, "RssAnon");

    request_us.sort_unstable();
    println!(
        "load: {polls} long-polls, {sockets} websockets; {total} events in {:.1} s ({:.1}/s)",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64()
    );
    println!(
        "update request (bark commit + log append): p50 {:.1} ms, p99 {:.1} ms",
        request_us[request_us.len() / 2] as f64 / 1000.0,
        request_us[request_us.len() * 99 / 100] as f64 / 1000.0
    );
    println!(
        "CPU while appending: berthd {:.0}%, these clients {:.0}% (of one core; the machine has {})",
        100.0 * (cpu_end.0 - cpu_start.0) / elapsed.as_secs_f64(),
        100.0 * (cpu_end.1 - cpu_start.1) / elapsed.as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    polled.report("long-poll delivery", total * polls);
    streamed.report("websocket delivery", total * sockets);
    println!(
        "berthd VmRSS: {} kB before clients, {} kB with clients connected, {} kB peak while appending, {} kB 60 s after they left (growth at peak {} kB)",
        rss_before,
        rss_connected,
        peak.load(Ordering::Relaxed),
        rss_after,
        peak.load(Ordering::Relaxed).saturating_sub(rss_before)
    );
    println!(
        "berthd RssAnon: {anon_before} kB before clients, {} kB peak, {anon_after} kB 60 s after they left",
        peak_anon.load(Ordering::Relaxed),
    );
    println!(
        "berthd straight after start, before the warm-up's {warm_events} events: VmRSS {rss_started} kB, RssAnon {anon_started} kB"
    );
    println!(
        "berthd VmRSS after the clients left (kB): {}",
        after.join(", ")
    );
    match back_after {
        Some(second) => {
            println!("berthd VmRSS back within 5 MiB of before the clients: after {second} s")
        }
        None => println!("berthd VmRSS back within 5 MiB of before the clients: not within 60 s"),
    }
}

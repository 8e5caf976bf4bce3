//! Wallet notifications through the real `berthd`: the durable event log behind the
//! long-poll, the websocket (tickets) and Server-Sent Events.
//!
//! Most tests seed the log through the store API while berthd is stopped (the log is
//! a redb file like the rest), so they need nothing but the binary. The live test
//! drives real bark notifications (movement metadata updates) and needs
//! `BITCOIND_EXEC` for the wallet's chain source: it is `#[ignore]`d, and run by
//! `scripts/e2e`.

use std::path::Path;
use std::time::{Duration, Instant};

use bark::persist::BarkPersister;
use berth::events::EventKind;
use berth::store::{EventRetention, Store, StoreConfig};
use futures_util::StreamExt as _;
use serde_json::Value;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::harness;

use harness::*;

/// Append `n` movement-created events (with real movements) to the datadir's log,
/// while berthd is not running. Returns each event's id and timestamp (µs).
async fn seed(datadir: &Path, n: usize) -> Vec<(u64, u64)> {
    std::fs::create_dir_all(datadir).expect("datadir");
    let (store, _) = Store::open_async(&datadir.join("berth.redb"), &StoreConfig::default())
        .await
        .expect("open store");
    let mut out = Vec::new();
    for _ in 0..n {
        let id = new_movement(&store, "seed").await;
        let movement = store.get_movement_by_id(id).await.expect("read movement");
        let now_us = u64::try_from(chrono::Utc::now().timestamp_micros()).expect("after 1970");
        let (event_id, event) = store
            .append_event(
                EventKind::MovementCreated,
                Some(movement),
                now_us,
                EventRetention::default(),
            )
            .await
            .expect("append");
        out.push((event_id, event.at_us));
    }
    out
}

fn rfc3339(at_us: u64) -> String {
    chrono::DateTime::from_timestamp_micros(i64::try_from(at_us).expect("fits"))
        .expect("valid")
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// Percent-encode what a query value cannot hold as is (`+` and `:` in a timestamp).
fn query_value(v: &str) -> String {
    v.replace('%', "%25")
        .replace('+', "%2B")
        .replace(':', "%3A")
}

struct Client {
    port: u16,
    bearer: String,
}

impl Client {
    fn new(daemon: &Daemon, datadir: &Path) -> Self {
        Client {
            port: daemon.port,
            bearer: format!("Bearer {}", token(datadir)),
        }
    }

    fn get(&self, path: &str) -> (u16, String) {
        request(
            self.port,
            "GET",
            path,
            &[("Authorization", &self.bearer)],
            None,
        )
    }

    fn wait(&self, query: &str) -> Value {
        let (status, raw) = self.get(&format!("/api/v1/notifications/wait?{query}"));
        assert_eq!(status, 200, "wait?{query}: {raw}");
        json_of(&raw)
    }

    fn ticket(&self) -> String {
        let (status, raw) = self.get("/api/v1/notifications/ws/ticket");
        assert_eq!(status, 200, "{raw}");
        assert!(
            raw.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "the ticket is a JSON string, as barkd sends it: {raw}"
        );
        json_of(&raw).as_str().expect("a JSON string").to_string()
    }

    fn ws_url(&self, query: &str) -> String {
        format!(
            "ws://127.0.0.1:{}/api/v1/notifications/ws?{query}",
            self.port
        )
    }
}

/// The movement ids of `notifications` (an array), with `type` checked.
fn movement_ids(notifications: &Value, kind: &str) -> Vec<u64> {
    notifications
        .as_array()
        .expect("array")
        .iter()
        .map(|n| {
            assert_eq!(n["type"], kind, "{n}");
            n["movement"]["id"].as_u64().expect("movement id")
        })
        .collect()
}

fn types(notifications: &Value) -> Vec<String> {
    notifications
        .as_array()
        .expect("array")
        .iter()
        .map(|n| n["type"].as_str().expect("type").to_string())
        .collect()
}

#[test]
fn long_poll_resumes_after_a_time_or_an_id_in_order() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (_tmp, datadir) = new_datadir();
    let seeded = rt.block_on(seed(&datadir, 5));
    let daemon = Daemon::start(&datadir, &[]);
    let client = Client::new(&daemon, &datadir);

    // Without `since`: everything kept, oldest first.
    let all = client.wait("");
    assert_eq!(
        movement_ids(&all["notifications"], "movement-created"),
        vec![1, 2, 3, 4, 5]
    );
    assert_eq!(all["last_event_id"], 5);
    let last_pushed_at = all["last_pushed_at"].as_str().expect("last_pushed_at");
    assert_eq!(last_pushed_at, rfc3339(seeded[4].1));

    // After a time: strictly after it, whatever its precision.
    let since = rfc3339(seeded[2].1);
    let after_third = client.wait(&format!("since={}", query_value(&since)));
    assert_eq!(
        movement_ids(&after_third["notifications"], "movement-created"),
        vec![4, 5]
    );
    let nanos = since.replace('Z', "999Z");
    let same = client.wait(&format!("since={}", query_value(&nanos)));
    assert_eq!(
        movement_ids(&same["notifications"], "movement-created"),
        vec![4, 5]
    );
    let offset = chrono::DateTime::parse_from_rfc3339(&since)
        .expect("parse")
        .with_timezone(&chrono::FixedOffset::east_opt(2 * 3600).expect("offset"))
        .to_rfc3339_opts(chrono::SecondsFormat::Micros, false);
    let same = client.wait(&format!("since={}", query_value(&offset)));
    assert_eq!(
        movement_ids(&same["notifications"], "movement-created"),
        vec![4, 5],
        "{offset}"
    );

    // After an id: exactly after it.
    let after = client.wait("after=3");
    assert_eq!(
        movement_ids(&after["notifications"], "movement-created"),
        vec![4, 5]
    );

    // Nothing new: the window passes and `last_pushed_at` is the given `since`.
    let started = Instant::now();
    let empty = client.wait(&format!("since={}&timeout=1", query_value(last_pushed_at)));
    assert!(started.elapsed() >= Duration::from_millis(900), "it waited");
    assert_eq!(empty["notifications"], serde_json::json!([]));
    assert_eq!(empty["last_pushed_at"], last_pushed_at);
    let empty = client.wait("after=5&timeout=0");
    assert_eq!(empty["notifications"], serde_json::json!([]));
    assert_eq!(empty["last_pushed_at"], Value::Null);

    // A filter that matches nothing waits the window out.
    let none = client.wait("types=movement-updated&timeout=1");
    assert_eq!(none["notifications"], serde_json::json!([]));

    for bad in [
        "since=yesterday",
        "since=2026-13-01T00:00:00Z",
        "after=-1",
        "after=1&since=2026-01-01T00:00:00Z",
        "timeout=31",
        "types=movement-deleted",
        "types=",
    ] {
        let (status, raw) = client.get(&format!("/api/v1/notifications/wait?{bad}"));
        assert_eq!(status, 400, "{bad}: {raw}");
        assert!(json_of(&raw)["message"].is_string(), "{raw}");
    }
    let (status, _) = request(daemon.port, "GET", "/api/v1/notifications/wait", &[], None);
    assert_eq!(status, 401, "the long-poll needs the token");
}

#[test]
fn the_log_survives_restarts_and_a_reader_behind_retention_is_told() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (_tmp, datadir) = new_datadir();
    let seeded = rt.block_on(seed(&datadir, 5));
    // Keep three: pruned when berthd starts.
    std::fs::write(datadir.join("berth.toml"), "[events]\nmax_count = 3\n").expect("berth.toml");
    let daemon = Daemon::start(&datadir, &[]);
    let client = Client::new(&daemon, &datadir);

    let all = client.wait("");
    assert_eq!(
        movement_ids(&all["notifications"], "movement-created"),
        vec![3, 4, 5],
        "without a starting point: what is kept, no lagging"
    );
    let behind = client.wait("after=1");
    assert_eq!(
        types(&behind["notifications"]),
        vec![
            "channel-lagging",
            "movement-created",
            "movement-created",
            "movement-created"
        ]
    );
    let caught_up = client.wait("after=2");
    assert_eq!(
        movement_ids(&caught_up["notifications"], "movement-created"),
        vec![3, 4, 5]
    );
    let since_first = client.wait(&format!("since={}", query_value(&rfc3339(seeded[0].1))));
    assert_eq!(types(&since_first["notifications"])[0], "channel-lagging");
    let lagging_filtered = client.wait("after=1&types=movement-created");
    assert_eq!(
        types(&lagging_filtered["notifications"]),
        vec!["movement-created"; 3],
        "a client that did not ask for channel-lagging does not get it"
    );

    let (status, _) = daemon.terminate();
    assert_eq!(status.code(), Some(0));
    rt.block_on(seed(&datadir, 2));
    let daemon = Daemon::start(&datadir, &[]);
    let client = Client::new(&daemon, &datadir);
    let resumed = client.wait("after=5");
    assert_eq!(
        movement_ids(&resumed["notifications"], "movement-created"),
        vec![6, 7],
        "ids continue across restarts"
    );
    assert_eq!(resumed["last_event_id"], 7);
}

async fn next_text(
    ws: &mut (impl futures_util::Stream<Item = Result<Message, tungstenite::Error>> + Unpin),
) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("a frame within 10 s")
            .expect("stream open")
            .expect("frame");
        match msg {
            Message::Text(text) => return serde_json::from_str(&text).expect("JSON frame"),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

fn http_status(err: &tungstenite::Error) -> Option<u16> {
    match err {
        tungstenite::Error::Http(response) => Some(response.status().as_u16()),
        _ => None,
    }
}

#[test]
fn websocket_tickets_work_once_and_a_socket_replays_from_an_id() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (_tmp, datadir) = new_datadir();
    rt.block_on(seed(&datadir, 4));
    let daemon = Daemon::start(&datadir, &[]);
    let client = Client::new(&daemon, &datadir);
    rt.block_on(async {
        let forged = "ab".repeat(32);
        let err = tokio_tungstenite::connect_async(client.ws_url(&format!("ticket={forged}")))
            .await
            .expect_err("a forged ticket");
        assert_eq!(http_status(&err), Some(401), "{err}");
        let err = tokio_tungstenite::connect_async(client.ws_url("after=0"))
            .await
            .expect_err("no ticket");
        assert_eq!(http_status(&err), Some(400), "{err}");

        let ticket = client.ticket();
        assert_eq!(ticket.len(), 64);
        assert!(ticket.bytes().all(|b| b.is_ascii_hexdigit()));
        let (mut ws, _) =
            tokio_tungstenite::connect_async(client.ws_url(&format!("ticket={ticket}&after=1")))
                .await
                .expect("a fresh ticket opens the socket");
        for expected in [2, 3, 4] {
            let n = next_text(&mut ws).await;
            assert_eq!(
                (n["type"].as_str(), n["movement"]["id"].as_u64()),
                (Some("movement-created"), Some(expected))
            );
        }
        let err = tokio_tungstenite::connect_async(client.ws_url(&format!("ticket={ticket}")))
            .await
            .expect_err("a used ticket");
        assert_eq!(http_status(&err), Some(401), "{err}");
        ws.close(None).await.expect("close");
    });
}

#[test]
fn server_sent_events_resume_from_last_event_id() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (_tmp, datadir) = new_datadir();
    rt.block_on(seed(&datadir, 4));
    let daemon = Daemon::start(&datadir, &[]);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = ("Authorization", bearer.as_str());
    let got = read_sse(daemon.port, &[auth], "after=1", 3);
    let ids: Vec<Option<u64>> = got.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, vec![Some(2), Some(3), Some(4)]);
    assert_eq!(got[0].1["type"], "movement-created");
    // A reconnecting EventSource sends Last-Event-ID, which wins over the URL's `after`.
    let got = read_sse(daemon.port, &[auth, ("Last-Event-ID", "3")], "after=1", 1);
    assert_eq!(got[0].0, Some(4));
    let (status, _) = request(
        daemon.port,
        "GET",
        "/api/v1/notifications/sse",
        &[("Authorization", &bearer), ("Last-Event-ID", "x")],
        None,
    );
    assert_eq!(status, 400);
}

#[test]
fn shutdown_answers_long_polls_and_closes_sockets_promptly() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (_tmp, datadir) = new_datadir();
    rt.block_on(seed(&datadir, 1));
    let daemon = Daemon::start(&datadir, &[]);
    let client = Client::new(&daemon, &datadir);
    let port = daemon.port;
    let bearer = client.bearer.clone();
    let poll = std::thread::spawn(move || {
        let started = Instant::now();
        let (status, raw) = request(
            port,
            "GET",
            "/api/v1/notifications/wait?after=1",
            &[("Authorization", &bearer)],
            None,
        );
        (status, raw, started.elapsed())
    });
    rt.block_on(async {
        let ticket = client.ticket();
        let (mut ws, _) =
            tokio_tungstenite::connect_async(client.ws_url(&format!("ticket={ticket}")))
                .await
                .expect("socket");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (status, elapsed) = daemon.terminate();
        assert_eq!(status.code(), Some(0));
        assert!(
            elapsed < Duration::from_secs(5),
            "stopping took {elapsed:?}"
        );
        let frame = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("a frame before the deadline");
        match frame {
            Some(Ok(Message::Close(Some(close)))) => {
                assert_eq!(u16::from(close.code), 1001, "going away: {close:?}");
            }
            other => panic!("expected a close frame, got {other:?}"),
        }
    });
    let (status, raw, elapsed) = poll.join().expect("poll thread");
    assert_eq!(status, 200, "{raw}");
    assert_eq!(json_of(&raw)["notifications"], serde_json::json!([]));
    assert!(
        elapsed < Duration::from_secs(5),
        "the long-poll waited {elapsed:?}"
    );
}

/// Real bark notifications (metadata updates of a movement, each a `movement-updated`)
/// appended while a websocket replays from the start: every update arrives once, in
/// order, across the switch from the log to live delivery; the long-poll and SSE see
/// them too.
#[test]
#[ignore = "needs BITCOIND_EXEC: run scripts/e2e"]
fn live_events_reach_every_transport_without_gap_or_repeat() {
    let bitcoind = Bitcoind::start("live_events_reach_every_transport");
    let (_tmp, datadir) = datadir_with_wallet(&bitcoind);
    // One movement to annotate (nothing else makes one without an Ark server).
    with_store(&datadir, async |store| new_movement(store, "live").await);
    let daemon = Daemon::start(&datadir, &[]);
    let client = Client::new(&daemon, &datadir);
    wait_loaded(&daemon, &datadir);
    let start = client.wait("timeout=0")["last_event_id"]
        .as_u64()
        .unwrap_or(0);

    const UPDATES: u64 = 60;
    let port = daemon.port;
    let bearer = client.bearer.clone();
    let writer = std::thread::spawn(move || {
        for n in 1..=UPDATES {
            let (status, raw) = request(
                port,
                "POST",
                "/api/v1/history/1/metadata",
                &[("Authorization", &bearer)],
                Some(&serde_json::json!({ "n": n }).to_string()),
            );
            assert_eq!(status, 200, "{raw}");
        }
    });
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        // Connect while updates are being appended: the replay from `start` turns into
        // live delivery somewhere in the middle.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let ticket = client.ticket();
        let (mut ws, _) = tokio_tungstenite::connect_async(
            client.ws_url(&format!("ticket={ticket}&after={start}")),
        )
        .await
        .expect("socket");
        for n in 1..=UPDATES {
            let frame = next_text(&mut ws).await;
            assert_eq!(frame["type"], "movement-updated", "{frame}");
            assert_eq!(
                frame["movement"]["metadata"]["n"], n,
                "update {n} in order, once"
            );
        }
    });
    writer.join().expect("writer");

    let polled = client.wait(&format!("after={start}"));
    let ns: Vec<u64> = polled["notifications"]
        .as_array()
        .expect("array")
        .iter()
        .map(|n| n["movement"]["metadata"]["n"].as_u64().expect("n"))
        .collect();
    assert_eq!(ns, (1..=UPDATES).collect::<Vec<_>>());
    let sse = read_sse(
        daemon.port,
        &[("Authorization", &client.bearer)],
        &format!("after={start}"),
        UPDATES as usize,
    );
    assert_eq!(sse.last().map(|(id, _)| *id), Some(Some(start + UPDATES)));
}

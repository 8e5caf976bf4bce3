//! Relays that do not behave: one that lies (forged signatures, strangers' requests,
//! garbage), floods (a thousand requests from the app, tens of thousands of events
//! nobody asked for), sends a message larger than berthd reads, and one that stalls
//! the handshake. No relay does these on request, so the relay here is a websocket
//! server of the test's own that sends what a broken or hostile relay would; berthd is
//! the real binary, and what it must do is the issue's: bounded memory, the wallet
//! never blocked, nothing answered that should not be, and back on its feet after.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use nostr::nips::nip44;
use nostr::{Event, EventBuilder, JsonUtil, Keys, Kind, PublicKey, SecretKey, Tag, TagKind};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

use super::{berthd_with_wallet, connect};
use crate::harness::*;

/// A request from `client` to `service`, as an app makes it (NIP-44).
fn app_request(client: &Keys, service: &PublicKey, method: &str, nonce: u32) -> Event {
    let content = json!({ "method": method, "params": {}, "nonce": nonce }).to_string();
    let sealed =
        nip44::encrypt(client.secret_key(), service, content, nip44::Version::V2).expect("encrypt");
    EventBuilder::new(Kind::from(23194), sealed)
        .tags([
            Tag::public_key(*service),
            Tag::custom(TagKind::custom("encryption"), ["nip44_v2"]),
        ])
        .sign_with_keys(client)
        .expect("sign")
}

/// An event as a relay delivers it on berthd's subscription.
fn delivered(event: &Value) -> Message {
    Message::text(json!(["EVENT", "berth-nwc", event]).to_string())
}

fn value(event: &Event) -> Value {
    serde_json::from_str(&event.as_json()).expect("event JSON")
}

/// What berthd sent the relay, as JSON, in order.
#[derive(Clone, Default)]
struct Heard(Arc<Mutex<Vec<Value>>>);

impl Heard {
    fn all(&self) -> Vec<Value> {
        self.0.lock().expect("heard").clone()
    }

    /// The events berthd published of `kind`.
    fn events(&self, kind: u64) -> Vec<Value> {
        self.all()
            .into_iter()
            .filter(|m| m[0] == "EVENT" && m[1]["kind"] == kind)
            .map(|m| m[1].clone())
            .collect()
    }

    /// Responses (23195) to the request `id`.
    fn answers_to(&self, id: &str) -> Vec<Value> {
        self.events(23195)
            .into_iter()
            .filter(|e| {
                e["tags"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t[0] == "e" && t[1] == id))
            })
            .collect()
    }
}

/// The relay's side of one accepted connection: a task that keeps what berthd sends,
/// and the sink to send to it.
struct Session {
    sink: futures_util::stream::SplitSink<WebSocketStream<TcpStream>, Message>,
    heard: Heard,
}

async fn accept(listener: &TcpListener) -> TcpStream {
    let (stream, _) = tokio::time::timeout(Duration::from_secs(30), listener.accept())
        .await
        .expect("berthd connects within 30 s")
        .expect("accept");
    stream
}

async fn session(stream: TcpStream) -> Session {
    let socket = tokio_tungstenite::accept_async(stream)
        .await
        .expect("websocket handshake");
    let (sink, mut stream) = socket.split();
    let heard = Heard::default();
    let kept = heard.clone();
    tokio::spawn(async move {
        while let Some(Ok(message)) = stream.next().await {
            if let Message::Text(text) = message
                && let Ok(value) = serde_json::from_str::<Value>(text.as_str())
            {
                kept.0.lock().expect("heard").push(value);
            }
        }
    });
    Session { sink, heard }
}

async fn wait_until_async<T>(what: &str, secs: u64, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(found) = check() {
            return found;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// This relay's entry in `/health`.
fn relay_health(port: u16, bearer: &str) -> Value {
    // 503 while the wallet waits for its (dead) chain source; the body is the same.
    let (status, raw) = request(port, "GET", "/health", &[("Authorization", bearer)], None);
    assert!(matches!(status, 200 | 503), "{raw}");
    json_of(&raw)["nwc_relays"][0].clone()
}

/// `/health`'s entry for the relay once `ready` holds, looked at every 50 ms (off the
/// runtime: the request is blocking).
async fn health_when(
    port: u16,
    bearer: &str,
    what: &'static str,
    secs: u64,
    ready: impl Fn(&Value) -> bool + Send + 'static,
) -> Value {
    let bearer = bearer.to_string();
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let health = relay_health(port, &bearer);
            if ready(&health) {
                return health;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {health}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await
    .expect("health")
}

#[test]
fn a_relay_that_lies_floods_or_stalls_costs_bounded_memory_and_never_blocks_the_wallet() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let listener = runtime
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let url = format!(
        "ws://127.0.0.1:{}",
        listener.local_addr().expect("address").port()
    );
    let (_tmp, _datadir, daemon, bearer) = berthd_with_wallet(&url);
    let (uri, _) = connect(&daemon, &bearer, json!({ "name": "Rogue" }));
    let service = PublicKey::from_hex(
        uri.trim_start_matches("nostr+walletconnect://")
            .split('?')
            .next()
            .expect("service key"),
    )
    .expect("service key");
    let client = Keys::new(SecretKey::from_hex(uri_param(&uri, "secret")).expect("secret"));
    let pid = daemon.child.id();
    let port = daemon.port;

    runtime.block_on(async {
        let mut relay = session(accept(&listener).await).await;
        // berthd subscribes to its requests and publishes the connection's info.
        wait_until_async("the subscription and the info event", 20, || {
            let heard = relay.heard.all();
            let subscribed = heard
                .iter()
                .any(|m| m[0] == "REQ" && m[2]["#p"].to_string().contains(&service.to_hex()));
            (subscribed && !relay.heard.events(13194).is_empty()).then_some(())
        })
        .await;

        // Lies: a request with a forged signature, one from a stranger, one of the
        // wrong kind, garbage. None is answered; a true request after them is.
        let mut forged = value(&app_request(&client, &service, "get_balance", 1));
        let sig = forged["sig"].as_str().expect("sig").to_string();
        forged["sig"] = json!(format!(
            "{}{}",
            &sig[..127],
            if sig.ends_with('0') { '1' } else { '0' }
        ));
        let stranger = value(&app_request(&Keys::generate(), &service, "get_balance", 2));
        let mut wrong_kind = value(&app_request(&client, &service, "get_balance", 3));
        wrong_kind["kind"] = json!(1);
        let good = app_request(&client, &service, "get_balance", 4);
        for message in [
            delivered(&forged),
            delivered(&stranger),
            delivered(&wrong_kind),
            Message::text("not json at all"),
            Message::text(r#"["EVENT","berth-nwc",{"id":"zz"}]"#),
            Message::text(r#"["AUTH"]"#),
            delivered(&value(&good)),
        ] {
            relay.sink.send(message).await.expect("send");
        }
        let answer = wait_until_async("the true request's answer", 20, || {
            relay.heard.answers_to(&good.id.to_hex()).pop()
        })
        .await;
        let opened = nip44::decrypt(
            client.secret_key(),
            &service,
            answer["content"].as_str().expect("content"),
        )
        .expect("decrypt");
        let opened: Value = serde_json::from_str(&opened).expect("answer JSON");
        assert_eq!(opened["result"]["balance"], 0, "{opened}");
        tokio::time::sleep(Duration::from_secs(2)).await;
        for lie in [&forged, &stranger, &wrong_kind] {
            let id = lie["id"].as_str().expect("id");
            assert!(
                relay.heard.answers_to(id).is_empty(),
                "answered a lie: {lie}"
            );
        }

        // A flood: a thousand requests from the app and fifty thousand events nobody
        // asked for, as fast as the socket takes them, while the API is asked for
        // its health every 50 ms.
        let flood: Vec<Event> = (0..1000)
            .map(|n| app_request(&client, &service, "get_info", 100 + n))
            .collect();
        let noise = Message::text(
            json!([
                "EVENT",
                "berth-nwc",
                value(
                    &EventBuilder::text_note("x".repeat(200))
                        .sign_with_keys(&Keys::generate())
                        .expect("note")
                )
            ])
            .to_string(),
        );
        let anon_before = status_kb(pid, "RssAnon");
        let probing = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let probe = {
            let probing = Arc::clone(&probing);
            let bearer = bearer.clone();
            std::thread::spawn(move || {
                let mut slowest = Duration::ZERO;
                while probing.load(std::sync::atomic::Ordering::Relaxed) {
                    let asked = Instant::now();
                    let (status, _) =
                        request(port, "GET", "/health", &[("Authorization", &bearer)], None);
                    assert!(matches!(status, 200 | 503), "/health: {status}");
                    slowest = slowest.max(asked.elapsed());
                    std::thread::sleep(Duration::from_millis(50));
                }
                slowest
            })
        };
        let flooded = Instant::now();
        for (n, event) in flood.iter().enumerate() {
            relay
                .sink
                .feed(delivered(&value(event)))
                .await
                .expect("send");
            for _ in 0..50 {
                relay.sink.feed(noise.clone()).await.expect("send");
            }
            if n % 20 == 0 {
                relay.sink.flush().await.expect("flush");
            }
        }
        relay.sink.flush().await.expect("flush");
        let sent_in = flooded.elapsed();
        // Every answer berthd gives comes within a few seconds of the flood's end.
        let mut answered = 0;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let now = relay.heard.events(23195).len();
            if now == answered && now > 0 {
                break;
            }
            answered = now;
        }
        probing.store(false, std::sync::atomic::Ordering::Relaxed);
        let slowest = probe.join().expect("probe");
        let anon_after = status_kb(pid, "RssAnon");
        let (mut results, mut limited) = (0, 0);
        for event in &flood {
            for answer in relay.heard.answers_to(&event.id.to_hex()) {
                let opened = nip44::decrypt(
                    client.secret_key(),
                    &service,
                    answer["content"].as_str().expect("content"),
                )
                .expect("decrypt");
                let opened: Value = serde_json::from_str(&opened).expect("JSON");
                if opened["result"].is_object() {
                    results += 1;
                } else {
                    assert_eq!(opened["error"]["code"], "RATE_LIMITED", "{opened}");
                    limited += 1;
                }
            }
        }
        let flood_secs = flooded.elapsed().as_secs_f64();
        eprintln!(
            "nwc rogue relay: 1,000 requests + 50,000 stray events sent in {:.1} s; \
             {results} answered, {limited} RATE_LIMITED, {} dropped; /health slowest \
             {:.0} ms; RssAnon {anon_before} -> {anon_after} kB",
            sent_in.as_secs_f64(),
            1000 - results - limited,
            slowest.as_secs_f64() * 1000.0
        );
        // The app's burst, and what refills while the flood lasts (2 a second).
        assert!(results >= 1, "some requests were served");
        assert!(
            f64::from(results) <= 30.0 + 2.0 * flood_secs + 1.0,
            "{results} served: over the rate limit"
        );
        assert!(limited >= 1, "the rest were refused or dropped, not served");
        assert!(
            slowest < Duration::from_secs(2),
            "the API waited {slowest:?} during the flood"
        );
        assert!(
            anon_after < anon_before + 32 * 1024,
            "anonymous memory grew from {anon_before} to {anon_after} kB"
        );

        // A message larger than berthd reads ends the connection; it comes back.
        relay
            .sink
            .send(Message::text("x".repeat(300 * 1024)))
            .await
            .expect("send");
        let dropped = health_when(port, &bearer, "berthd to drop the connection", 10, |h| {
            h["connected"] == false
        })
        .await;
        assert!(dropped["error"].is_string(), "{dropped}");

        // A relay that accepts the connection and never answers the handshake: given
        // up within berthd's connect timeout (15 s), then tried again.
        let stalled = accept(&listener).await;
        let waited = Instant::now();
        let given_up = health_when(port, &bearer, "berthd to give up the handshake", 30, |h| {
            h["error"]
                .as_str()
                .is_some_and(|e| e.contains("no connection within 15 s"))
        })
        .await;
        assert!(waited.elapsed() >= Duration::from_secs(14), "{given_up}");
        drop(stalled);
        let mut back = session(accept(&listener).await).await;
        wait_until_async("the subscription again", 20, || {
            back.heard.all().iter().any(|m| m[0] == "REQ").then_some(())
        })
        .await;
        let again = app_request(&client, &service, "get_info", 9999);
        back.sink
            .send(delivered(&value(&again)))
            .await
            .expect("send");
        wait_until_async("an answer on the new connection", 20, || {
            back.heard.answers_to(&again.id.to_hex()).pop()
        })
        .await;
    });
    let health = relay_health(port, &bearer);
    assert_eq!(health["connected"], true, "{health}");
}

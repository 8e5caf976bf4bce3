//! One relay: an outbound websocket that berthd keeps open for as long as a connection
//! names the relay. Our own, small, on tokio-tungstenite (ADR 0009):
//!
//! - **Out through the egress policy**: `wss` (TLS with the web's roots and the OS's),
//!   plain `ws` only to a host the owner allows; the name resolved through the policy,
//!   so no DNS answer can take it into the home network; connect, TLS and the
//!   websocket handshake within [`CONNECT_WITHIN`].
//! - **Subscribed to requests**: one subscription, kind 23194 `#p` the service keys of
//!   the connections on this relay, `since` a little before the newest request it saw
//!   (so nothing sent while it was away is missed), replaced whenever the connections
//!   change; each connection's info event published on connecting and on every change.
//! - **NIP-42**: when the relay sends a challenge, berthd authenticates as each service
//!   key (the `relay` tag is the relay's URL as configured, normalised) and subscribes
//!   and publishes again; on connecting it waits [`AUTH_GRACE`] for a challenge first.
//! - **Bounded**: a message of at most [`MAX_MESSAGE`] bytes (larger ones end the
//!   connection), at most [`OUTBOX`] events waiting to be sent (more are dropped: a
//!   client asks again), requests handed on without waiting (a full queue drops them).
//!   A relay that says nothing for [`SILENT_FOR`], pings included, or takes no message
//!   for [`SEND_WITHIN`], is reconnected.
//! - **Reconnected** with exponential backoff (1 s doubling to 60 s) and jitter.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use nostr::{
    ClientMessage, Event, EventBuilder, Filter, JsonUtil, Kind, RelayMessage, RelayUrl,
    SubscriptionId, Timestamp,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use url::Url;

use crate::net::egress::Egress;
use crate::nwc::protocol::KIND_REQUEST;
use crate::nwc::{Incoming, Snapshot};

/// Connect, TLS and websocket handshake, all within this.
pub const CONNECT_WITHIN: Duration = Duration::from_secs(15);
/// The largest message (and frame) read from a relay.
pub const MAX_MESSAGE: usize = 256 * 1024;
/// Events waiting to be sent to one relay.
pub const OUTBOX: usize = 256;
/// A relay silent this long (no message, no pong) is reconnected.
pub const SILENT_FOR: Duration = Duration::from_secs(90);
/// A relay that takes no message for this long (its end of the connection stopped
/// reading) is reconnected: a send never waits longer.
pub const SEND_WITHIN: Duration = Duration::from_secs(30);
/// How long berthd waits, on connecting, for a relay's NIP-42 challenge before it
/// subscribes and publishes.
const AUTH_GRACE: Duration = Duration::from_millis(500);
/// How often berthd pings a relay.
const PING_EVERY: Duration = Duration::from_secs(30);
/// Backoff between attempts: from the first, doubling, to the most.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MOST: Duration = Duration::from_secs(60);
/// How far before the newest request seen a new subscription starts, at the least
/// (relays' clocks and delivery order differ); the request window when it is wider,
/// so that an app whose clock is behind, within the window, is still heard (a relay
/// applies `since` to live events too).
const SINCE_SLACK: u64 = 60;
/// The subscription's id (one per relay connection).
const SUBSCRIPTION: &str = "berth-nwc";

/// Where a relay connection is, for `/health` and `/metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayState {
    Connecting,
    Connected { since: std::time::SystemTime },
    Waiting { attempts: u32, error: String },
}

/// The task's side of one relay: what it reports and what it sends.
pub(super) struct RelayTask {
    pub url: Url,
    pub egress: Arc<Egress>,
    pub snapshot: watch::Receiver<Arc<Snapshot>>,
    pub outbox: mpsc::Receiver<Arc<str>>,
    pub incoming: mpsc::Sender<Incoming>,
    pub state: watch::Sender<RelayState>,
    /// `[nwc] request_window_secs`.
    pub window: Duration,
}

/// The stream under the websocket: TCP, or TLS over TCP.
pub(super) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl RelayTask {
    /// Keep the relay connected until the task is aborted.
    pub async fn run(mut self) {
        let mut attempts: u32 = 0;
        // The newest request seen, across reconnections.
        let mut newest: Option<Timestamp> = None;
        loop {
            self.state.send_replace(RelayState::Connecting);
            let reason = match tokio::time::timeout(CONNECT_WITHIN, self.connect()).await {
                Err(_) => format!("no connection within {} s", CONNECT_WITHIN.as_secs()),
                Ok(Err(e)) => e,
                Ok(Ok(socket)) => {
                    attempts = 0;
                    self.state.send_replace(RelayState::Connected {
                        since: std::time::SystemTime::now(),
                    });
                    tracing::info!(target: "berth::nwc", relay = %self.url, "connected to the relay");
                    self.session(socket, &mut newest).await
                }
            };
            attempts = attempts.saturating_add(1);
            tracing::warn!(target: "berth::nwc", relay = %self.url, error = %reason, attempts,
                "the relay connection ended; connecting again");
            self.state.send_replace(RelayState::Waiting {
                attempts,
                error: reason,
            });
            tokio::time::sleep(backoff(attempts)).await;
        }
    }

    async fn connect(&self) -> Result<tokio_tungstenite::WebSocketStream<Box<dyn Io>>, String> {
        self.egress
            .check_websocket(&self.url)
            .map_err(|e| e.to_string())?;
        let addresses = self
            .egress
            .resolve(&self.url)
            .await
            .map_err(|e| e.to_string())?;
        let mut last = String::from("no address");
        let mut tcp = None;
        for address in addresses {
            match tokio::net::TcpStream::connect(address).await {
                Ok(stream) => {
                    tcp = Some(stream);
                    break;
                }
                Err(e) => last = format!("cannot connect to {address}: {e}"),
            }
        }
        let tcp = tcp.ok_or(last)?;
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Io> = if self.url.scheme() == "wss" {
            let host = self.url.host_str().unwrap_or_default().to_string();
            let name = rustls::pki_types::ServerName::try_from(host)
                .map_err(|e| format!("not a name for TLS: {e}"))?;
            let config = RELAY_TLS.as_ref().map_err(Clone::clone)?;
            let tls = tokio_rustls::TlsConnector::from(Arc::clone(config))
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS: {e}"))?;
            Box::new(tls)
        } else {
            Box::new(tcp)
        };
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE));
        let (socket, _) =
            tokio_tungstenite::client_async_with_config(self.url.as_str(), stream, Some(config))
                .await
                .map_err(|e| format!("websocket handshake: {e}"))?;
        Ok(socket)
    }

    /// One connection, until it fails; returns why.
    async fn session(
        &mut self,
        socket: tokio_tungstenite::WebSocketStream<Box<dyn Io>>,
        newest: &mut Option<Timestamp>,
    ) -> String {
        let (mut sink, mut stream) = socket.split();
        let mut snapshot = self.snapshot.borrow_and_update().clone();
        // A relay that requires NIP-42 sends its challenge as the connection opens:
        // answered before anything is published, nothing is refused (and some relays
        // slow a connection down for every event they refuse). Any other first message
        // is read as usual once the greeting is out.
        let first = match tokio::time::timeout(AUTH_GRACE, stream.next()).await {
            Err(_) => None,
            Ok(None) => return "the relay closed the connection".into(),
            Ok(Some(Err(e))) => return format!("reading: {e}"),
            Ok(Some(Ok(Message::Text(text)))) => Some(text),
            Ok(Some(Ok(_))) => None,
        };
        let challenged = first.as_ref().is_some_and(|text| {
            matches!(
                RelayMessage::from_json(text.as_str()),
                Ok(RelayMessage::Auth { .. })
            )
        });
        let mut opening = Vec::new();
        if !challenged {
            opening = self.greeting(&snapshot, *newest);
        }
        if let Some(text) = first {
            // A challenge's answer carries the greeting.
            opening.extend(self.on_message(text.as_str(), &snapshot, newest));
        }
        for text in opening {
            if let Err(why) = send(&mut sink, Message::text(text)).await {
                return why;
            }
        }
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        let mut heard = tokio::time::Instant::now();
        loop {
            tokio::select! {
                message = stream.next() => {
                    heard = tokio::time::Instant::now();
                    let text = match message {
                        None => return "the relay closed the connection".into(),
                        Some(Err(e)) => return format!("reading: {e}"),
                        Some(Ok(Message::Text(text))) => text,
                        Some(Ok(Message::Close(_))) => return "the relay closed the connection".into(),
                        Some(Ok(_)) => continue,
                    };
                    let replies = self.on_message(text.as_str(), &snapshot, newest);
                    for reply in replies {
                        if let Err(why) = send(&mut sink, Message::text(reply)).await {
                            return why;
                        }
                    }
                }
                outgoing = self.outbox.recv() => {
                    let Some(text) = outgoing else { return "berthd is stopping".into() };
                    if let Err(why) = send(&mut sink, Message::text(text.to_string())).await {
                        return why;
                    }
                }
                changed = self.snapshot.changed() => {
                    if changed.is_err() {
                        return "berthd is stopping".into();
                    }
                    snapshot = self.snapshot.borrow_and_update().clone();
                    for text in self.greeting(&snapshot, *newest) {
                        if let Err(why) = send(&mut sink, Message::text(text)).await {
                            return why;
                        }
                    }
                }
                _ = ping.tick() => {
                    if heard.elapsed() > SILENT_FOR {
                        return format!("the relay was silent for {} s", SILENT_FOR.as_secs());
                    }
                    if let Err(why) = send(&mut sink, Message::Ping(Vec::new().into())).await {
                        return why;
                    }
                }
            }
        }
    }

    /// What berthd sends on connecting and when the connections change: the
    /// subscription (replacing the last) and the info event of every connection on
    /// this relay.
    fn greeting(&self, snapshot: &Snapshot, newest: Option<Timestamp>) -> Vec<String> {
        let keys: Vec<nostr::PublicKey> = snapshot
            .on_relay(&self.url)
            .map(|c| c.keys.public_key())
            .collect();
        let mut out = Vec::with_capacity(keys.len() + 1);
        if keys.is_empty() {
            out.push(ClientMessage::close(SubscriptionId::new(SUBSCRIPTION)).as_json());
            return out;
        }
        let before = SINCE_SLACK.max(self.window.as_secs());
        let since = Timestamp::from(
            newest
                .unwrap_or_else(Timestamp::now)
                .as_secs()
                .saturating_sub(before),
        );
        let filter = Filter::new()
            .kind(Kind::from(KIND_REQUEST))
            .pubkeys(keys)
            .since(since);
        out.push(ClientMessage::req(SubscriptionId::new(SUBSCRIPTION), vec![filter]).as_json());
        for connection in snapshot.on_relay(&self.url) {
            if let Some(info) = &connection.info {
                out.push(ClientMessage::event(info.clone()).as_json());
            }
        }
        out
    }

    /// Read one message from the relay; returns what to send back.
    fn on_message(
        &self,
        text: &str,
        snapshot: &Snapshot,
        newest: &mut Option<Timestamp>,
    ) -> Vec<String> {
        let message = match RelayMessage::from_json(text) {
            Ok(message) => message,
            Err(e) => {
                // Some relays refuse an event with an `OK` that names no event (an
                // empty id); the reason is still worth the owner's log.
                if let Some(reason) = refusal_without_id(text) {
                    tracing::warn!(target: "berth::nwc", relay = %self.url, message = %truncate(&reason),
                        "the relay refused an event");
                } else {
                    tracing::debug!(target: "berth::nwc", relay = %self.url, error = %e, "an unreadable message from the relay");
                }
                return Vec::new();
            }
        };
        match message {
            RelayMessage::Event { event, .. } => {
                let event: Event = event.into_owned();
                if event.kind != Kind::from(KIND_REQUEST) {
                    return Vec::new();
                }
                // Known service key and its own client only; anything else is not
                // answered (nor its signature checked: that costs).
                let Some(connection) = snapshot.for_request(&event) else {
                    return Vec::new();
                };
                if event.verify().is_err() {
                    tracing::debug!(target: "berth::nwc", relay = %self.url, "a request with a bad signature");
                    return Vec::new();
                }
                // Never past the box's clock: a request dated in the future would move
                // the next subscription's `since` past every honest one.
                let seen = event.created_at.min(Timestamp::now());
                if newest.is_none_or(|n| seen > n) {
                    *newest = Some(seen);
                }
                let incoming = Incoming {
                    event,
                    connection,
                    relay: self.url.clone(),
                };
                if self.incoming.try_send(incoming).is_err() {
                    tracing::warn!(target: "berth::nwc", relay = %self.url,
                        "too many requests waiting; one was dropped");
                }
                Vec::new()
            }
            RelayMessage::Auth { challenge } => {
                let Ok(relay) = RelayUrl::parse(self.url.as_str()) else {
                    return Vec::new();
                };
                let mut out: Vec<String> = snapshot
                    .on_relay(&self.url)
                    .filter_map(|c| {
                        EventBuilder::auth(challenge.to_string(), relay.clone())
                            .sign_with_keys(&c.keys)
                            .ok()
                    })
                    .map(|auth| ClientMessage::auth(auth).as_json())
                    .collect();
                // The subscription again: a relay that wanted AUTH may have closed it.
                out.extend(self.greeting(snapshot, *newest));
                out
            }
            RelayMessage::Closed { message, .. } => {
                tracing::warn!(target: "berth::nwc", relay = %self.url, message = %truncate(&message),
                    "the relay closed the subscription");
                Vec::new()
            }
            RelayMessage::Ok {
                status: false,
                message,
                ..
            } => {
                tracing::warn!(target: "berth::nwc", relay = %self.url, message = %truncate(&message),
                    "the relay refused an event");
                Vec::new()
            }
            RelayMessage::Notice(message) => {
                tracing::debug!(target: "berth::nwc", relay = %self.url, message = %truncate(&message),
                    "notice from the relay");
                Vec::new()
            }
            _ => Vec::new(),
        }
    }
}

/// Send one message, within [`SEND_WITHIN`]; `Err` with why the connection is over.
async fn send<S>(sink: &mut S, message: Message) -> Result<(), String>
where
    S: futures_util::Sink<Message> + Unpin,
    S::Error: std::fmt::Display,
{
    match tokio::time::timeout(SEND_WITHIN, sink.send(message)).await {
        Err(_) => Err(format!(
            "the relay took no message for {} s",
            SEND_WITHIN.as_secs()
        )),
        Ok(Err(e)) => Err(format!("sending: {e}")),
        Ok(Ok(())) => Ok(()),
    }
}

/// The reason of an `["OK", <id>, false, <reason>]` whose id is not one.
fn refusal_without_id(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let parts = value.as_array()?;
    (parts.first()?.as_str()? == "OK" && !parts.get(2)?.as_bool()?).then(|| {
        parts
            .get(3)
            .and_then(|r| r.as_str())
            .unwrap_or_default()
            .to_owned()
    })
}

/// At most 200 characters of what a relay said, for the log.
fn truncate(s: &str) -> String {
    s.chars().take(200).collect()
}

/// How long to wait before attempt `attempts + 1`: doubling from 1 s to 60 s, each
/// time with up to half of it again at random, so a box's relays (and many boxes
/// after one relay's restart) do not all come back in step.
fn backoff(attempts: u32) -> Duration {
    let base = BACKOFF_FIRST
        .saturating_mul(1u32 << attempts.saturating_sub(1).min(6))
        .min(BACKOFF_MOST);
    let mut byte = [0u8; 1];
    let _ = getrandom::fill(&mut byte);
    base + base.mul_f64(f64::from(byte[0]) / 510.0)
}

/// The TLS settings for relays, made at the first connection to a `wss` relay rather
/// than at the start: reading the OS's store is tens of files and milliseconds that
/// the start, and `/ping`, need not wait for.
static RELAY_TLS: std::sync::LazyLock<Result<Arc<rustls::ClientConfig>, String>> =
    std::sync::LazyLock::new(|| tls_config().map(Arc::new));

/// The TLS settings for relays: the web's roots (compiled in) and the OS's store
/// (ADR 0006), ring as everywhere else.
pub fn tls_config() -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let native = rustls_native_certs::load_native_certs();
    for cert in native.certs {
        let _ = roots.add(cert);
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS settings for relays: {e}"))
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_naming_no_event_is_still_read() {
        assert_eq!(
            refusal_without_id(r#"["OK","",false,"invalid: too large"]"#).as_deref(),
            Some("invalid: too large")
        );
        assert_eq!(refusal_without_id(r#"["OK","",true,""]"#), None);
        assert_eq!(refusal_without_id(r#"["NOTICE","x"]"#), None);
    }

    #[test]
    fn backoff_doubles_to_a_minute_with_jitter() {
        for (attempts, base) in [(1, 1), (2, 2), (3, 4), (7, 60), (50, 60)] {
            let wait = backoff(attempts);
            let base = Duration::from_secs(base);
            assert!(
                wait >= base && wait <= base + base / 2,
                "{attempts}: {wait:?}"
            );
        }
    }
}

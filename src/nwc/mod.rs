//! Nostr Wallet Connect (NIP-47): the wallet, reached by apps from anywhere, with no
//! port opened. berthd keeps outbound websockets to Nostr relays (`relay.rs`) and
//! answers the encrypted requests of apps that hold a connection's secret.
//!
//! - **Connections** are made by the owner (`POST /api/v1/nwc/connections`, the
//!   console): each has its own service key (so a leaked URI tells nothing of any
//!   other), the methods it may call, a per-payment limit and a budget that renews
//!   (`budget.rs`), an expiry, and its relays. berthd keeps the client's public key,
//!   never its secret, which is shown once, in the URI.
//! - **Requests** arrive from every relay of their connection; the first copy is
//!   handled, later ones get the same answer. A request is refused when its
//!   `expiration` has passed or it is older (or newer) than `[nwc]
//!   request_window_secs` (an answer saying so, never the action); a request from a
//!   key that is no connection's client is not answered. Each connection may make
//!   [`BURST`] requests at once and [`PER_MINUTE`] a minute (`RATE_LIMITED`).
//! - **Payments are made at most once**: the request's id is recorded, in the same
//!   transaction that checks the connection and takes the amount from its budget,
//!   before bark is asked to pay; the answer is recorded before it is sent. A request
//!   seen again is answered from the record; one left unanswered by a crash is
//!   resolved from the payment's own state in bark (paid: its preimage; never made:
//!   `PAYMENT_FAILED`, the budget given back) — never paid a second time.
//!
//! Here: the service's state, its start and stop, and the snapshot of connections the
//! relay tasks read. `connections.rs` makes, lists and revokes connections;
//! `requests.rs` takes a request from a relay to its answer; `methods.rs` executes the
//! methods that read and receive, `payments.rs` those that pay; `transactions.rs` the
//! wallet's Lightning payments as NIP-47 transactions; `approvals.rs` the payments that
//! wait for the owner's approval; `notifications.rs` tells apps of
//! payments; `errors.rs` what each error code means (and `docs/nwc.md`); `budget.rs`
//! the limits; `protocol.rs` the messages; `relay.rs` one relay.

mod approvals;
mod budget;
mod connections;
mod errors;
mod methods;
mod notifications;
mod payments;
pub mod protocol;
mod relay;
mod requests;
pub mod transactions;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use nostr::{Event, Keys, PublicKey, SecretKey};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use url::Url;

pub use budget::Renewal;
pub use connections::{ConnectionView, NewConnection, NwcError};
pub use relay::RelayState;
use requests::{Bucket, Recent};

use crate::engine::Engine;
use crate::events::EventHub;
use crate::net::egress::Egress;
use crate::store::nwc::NwcConnectionRecord;
use crate::store::{Store, StoreError, now_us};

/// Connections at most, revoked ones included until they are purged.
pub const MAX_CONNECTIONS: usize = 64;
/// Distinct relays at most, over every connection.
pub const MAX_RELAYS: usize = 8;
/// Relays one connection may name.
pub const MAX_RELAYS_PER_CONNECTION: usize = 4;
/// Longest connection name, in bytes.
pub const MAX_NAME: usize = 64;
/// Requests one connection may have in a burst, and per minute.
pub const BURST: f64 = 30.0;
pub const PER_MINUTE: f64 = 120.0;
/// Requests handled at once, over every connection.
const HANDLED_AT_ONCE: usize = 8;
/// Requests waiting to be handled.
const QUEUE: usize = 256;
/// Request ids remembered in memory (answered or under way), to answer copies.
const REMEMBERED: usize = 4096;
/// Answered payment records are kept this long, then forgotten; revoked connections
/// a month.
const KEEP_ANSWERS: Duration = Duration::from_secs(48 * 3600);
const KEEP_REVOKED: Duration = Duration::from_secs(30 * 86_400);

/// `[nwc]` in `berth.toml`, as the service uses it.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The relays a connection uses when its request names none.
    pub relays: Vec<String>,
    /// How far a request's `created_at` may be from now, either way.
    pub request_window: Duration,
}

impl From<&crate::config::NwcSection> for Settings {
    fn from(section: &crate::config::NwcSection) -> Settings {
        Settings {
            relays: section.relays.clone(),
            request_window: Duration::from_secs(section.request_window_secs.get()),
        }
    }
}

/// One connection as the relays and the handlers see it.
pub struct Connection {
    pub record: NwcConnectionRecord,
    pub keys: Keys,
    pub client: PublicKey,
    pub relays: Vec<Url>,
    /// Its info event, signed (none for a revoked or expired connection).
    pub info: Option<Event>,
}

/// Every stored connection, by service key: rebuilt whenever one is made or revoked,
/// and handed to the relay tasks through a `watch`.
#[derive(Default)]
pub struct Snapshot {
    by_service: HashMap<PublicKey, Arc<Connection>>,
}

impl Snapshot {
    fn on_relay<'a>(&'a self, url: &'a Url) -> impl Iterator<Item = &'a Arc<Connection>> + 'a {
        self.by_service
            .values()
            .filter(move |c| c.relays.contains(url))
    }

    /// The connection a request is for, if it is signed by that connection's client.
    fn for_request(&self, event: &Event) -> Option<Arc<Connection>> {
        let service = protocol::addressed_to(event)?;
        self.by_service
            .get(&service)
            .filter(|c| c.client == event.pubkey)
            .cloned()
    }

    fn relays(&self) -> BTreeSet<Url> {
        self.by_service
            .values()
            .flat_map(|c| c.relays.iter().cloned())
            .collect()
    }
}

/// A request as a relay hands it on.
pub(crate) struct Incoming {
    event: Event,
    connection: Arc<Connection>,
    relay: Url,
}

/// A relay task, its outbox and its state.
struct RelayHandle {
    outbox: mpsc::Sender<Arc<str>>,
    state: watch::Receiver<RelayState>,
    task: JoinHandle<()>,
}

/// The Nostr Wallet Connect service.
pub struct Nwc {
    store: Store,
    engine: Arc<Engine>,
    events: Arc<EventHub>,
    egress: Arc<Egress>,
    settings: Settings,
    snapshot: watch::Sender<Arc<Snapshot>>,
    relays: Mutex<HashMap<Url, RelayHandle>>,
    incoming: mpsc::Sender<Incoming>,
    queue: Mutex<Option<mpsc::Receiver<Incoming>>>,
    recent: Mutex<Recent>,
    buckets: Mutex<HashMap<String, Bucket>>,
    /// When each connection was last used (reads are not written to the store).
    last_used: Mutex<HashMap<String, u64>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Payments being waited for (each until bark settles it), apart from the
    /// handlers so that a slow one holds no handler's place.
    settling: Mutex<tokio::task::JoinSet<()>>,
}

fn from_us(us: u64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_micros(i64::try_from(us).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Nwc {
    pub fn new(
        store: Store,
        engine: Arc<Engine>,
        events: Arc<EventHub>,
        egress: Arc<Egress>,
        settings: Settings,
    ) -> Result<Arc<Nwc>, String> {
        let (incoming, queue) = mpsc::channel(QUEUE);
        Ok(Arc::new(Nwc {
            store,
            engine,
            events,
            egress,
            settings,
            snapshot: watch::Sender::new(Arc::new(Snapshot::default())),
            relays: Mutex::new(HashMap::new()),
            incoming,
            queue: Mutex::new(Some(queue)),
            recent: Mutex::new(Recent::default()),
            buckets: Mutex::new(HashMap::new()),
            last_used: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
            settling: Mutex::new(tokio::task::JoinSet::new()),
        }))
    }

    /// Load the connections, connect to their relays, and start answering (and
    /// finishing the payments a stop left unanswered).
    pub async fn start(self: &Arc<Self>) -> Result<(), StoreError> {
        self.reload().await?;
        let mut tasks = lock(&self.tasks);
        if let Some(queue) = lock(&self.queue).take() {
            tasks.push(tokio::spawn(Arc::clone(self).dispatch(queue)));
        }
        tasks.push(tokio::spawn(Arc::clone(self).finish_unanswered()));
        tasks.push(tokio::spawn(Arc::clone(self).notify()));
        tasks.push(tokio::spawn(Arc::clone(self).purge_now_and_then()));
        Ok(())
    }

    /// Stop every relay and every request under way (a payment under way is finished
    /// at the next start, from its record).
    pub fn stop(&self) {
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
        lock(&self.settling).abort_all();
        for (_, relay) in lock(&self.relays).drain() {
            relay.task.abort();
        }
    }

    /// Each relay's state, for `/health` and `/metrics`.
    pub fn relay_states(&self) -> Vec<(String, RelayState)> {
        let mut out: Vec<(String, RelayState)> = lock(&self.relays)
            .iter()
            .map(|(url, r)| (url.to_string(), r.state.borrow().clone()))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Rebuild the snapshot from the store and bring the relay tasks in line with it.
    async fn reload(&self) -> Result<(), StoreError> {
        let now = Utc::now();
        let mut by_service = HashMap::new();
        for record in self.store.nwc_connections().await? {
            let Ok(secret) = SecretKey::from_slice(&record.service_secret) else {
                tracing::error!(target: "berth::nwc", id = %record.id, "a connection's service key is not a key");
                continue;
            };
            let Ok(client) = PublicKey::from_slice(&record.client_pubkey) else {
                continue;
            };
            let keys = Keys::new(secret);
            let info = budget::usable(&record, now)
                .ok()
                .and_then(|()| protocol::info_event(&keys, &record.methods).ok());
            let relays = record
                .relays
                .iter()
                .filter_map(|r| Url::parse(r).ok())
                .collect();
            by_service.insert(
                keys.public_key(),
                Arc::new(Connection {
                    record,
                    keys,
                    client,
                    relays,
                    info,
                }),
            );
        }
        let snapshot = Arc::new(Snapshot { by_service });
        let wanted = snapshot.relays();
        self.snapshot.send_replace(snapshot);
        let mut relays = lock(&self.relays);
        relays.retain(|url, relay| {
            let keep = wanted.contains(url);
            if !keep {
                relay.task.abort();
            }
            keep
        });
        for url in wanted {
            if relays.contains_key(&url) {
                continue;
            }
            let (outbox_tx, outbox) = mpsc::channel(relay::OUTBOX);
            let (state_tx, state) = watch::channel(RelayState::Connecting);
            let task = relay::RelayTask {
                url: url.clone(),
                egress: Arc::clone(&self.egress),
                snapshot: self.snapshot.subscribe(),
                outbox,
                incoming: self.incoming.clone(),
                state: state_tx,
                window: self.settings.request_window,
            };
            relays.insert(
                url,
                RelayHandle {
                    outbox: outbox_tx,
                    state,
                    task: tokio::spawn(task.run()),
                },
            );
        }
        Ok(())
    }

    /// Forget old answers and long-revoked connections, hourly.
    async fn purge_now_and_then(self: Arc<Self>) {
        loop {
            let now = now_us();
            let before = now.saturating_sub(KEEP_ANSWERS.as_micros() as u64);
            let revoked = now.saturating_sub(KEEP_REVOKED.as_micros() as u64);
            match self.store.nwc_purge(before, revoked, 10_000).await {
                Ok((requests, connections)) => {
                    tracing::debug!(target: "berth::nwc", requests, connections, "old records forgotten");
                    // A connection revoked long ago is gone: stop listening for it.
                    if connections > 0
                        && let Err(e) = self.reload().await
                    {
                        tracing::warn!(target: "berth::nwc", error = %e, "cannot reload the connections");
                    }
                }
                Err(e) => {
                    tracing::warn!(target: "berth::nwc", error = %e, "cannot forget old payment records")
                }
            }
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    }
}

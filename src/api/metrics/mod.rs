//! Prometheus metrics for `GET /metrics`, in the text exposition format 0.0.4, written
//! by the `prometheus-client` crate.
//!
//! Three inputs, each a [`Collector`] that [`render`] registers in a [`Registry`] and
//! `prometheus-client` encodes:
//! - [`WalletMetrics`], a snapshot the engine fills at scrape time (balances by state,
//!   VTXO value by blocks to expiry, exits by phase, refresh outcomes);
//! - [`RequestMetrics`], counted by the [`record`] middleware as requests are served
//!   (counts by method, route and status class; a latency histogram by method and
//!   route);
//! - the process's resident memory ([`rss_bytes`]).
//!
//! Every metric name starts with `berth_`. Series come out sorted by their labels, so
//! the same state always renders to the same text.
//!
//! # What the crate does and what this module does
//!
//! `prometheus-client` writes all of the text: the `# HELP` and `# TYPE` lines, the
//! `_total` suffix of counters (so counters are named here without it), label value
//! escaping, number formatting, and a histogram's cumulative `_bucket` series with
//! `le="+Inf"`, `_sum` and `_count`. Its [`Histogram`] also counts the request
//! latencies. What stays here is what is ours: which families exist and when, their
//! help texts, and the bounded, ordered store of request series.
//!
//! # Design
//!
//! - **A registry per scrape.** The wallet's numbers come from async engine calls,
//!   and a collector's `encode` is synchronous, so the handler takes the snapshot
//!   first and [`render`] then builds a [`Registry`] from three collectors, in this
//!   order: the snapshot (by value), a handle to the long-lived request series, and
//!   the resident memory. A registry is a short list of boxes, so building one per
//!   scrape costs nothing worth measuring, and there is no shared mutable "last
//!   snapshot" slot: concurrent scrapes cannot see each other's wallet numbers.
//! - **Collectors, not [`Registry::register`].** A collector's families are written
//!   with the help text exactly as given (`register` appends a full stop) and in the
//!   order the collector writes them; families a collector does not write are absent.
//!   That is how the wallet families are left out while no wallet is loaded and the
//!   request families until a request was counted.
//! - **Request series in our own map, not a `Family`.** The crate's `Family` keeps
//!   its series in a `HashMap`: it has no bound, and it writes them in hash order.
//!   The request series need both a bound ([`MAX_SERIES`], see [`RequestMetrics`])
//!   and a stable order (sorted by method and route, so a scrape is diffable and
//!   tests compare whole texts). So [`RequestMetrics`] keeps them in `BTreeMap`s
//!   under one mutex and encodes them through the crate's collector interface.
//! - **Text format 0.0.4, not OpenMetrics.** `prometheus-client`'s default encoder
//!   (`encoding::text`) writes OpenMetrics 1.0 (a `# EOF` line, `_total` left off
//!   counters' `# HELP`/`# TYPE` lines), which must be served as
//!   `application/openmetrics-text`. This module uses `encoding::prometheus_text`
//!   instead and serves [`CONTENT_TYPE`] (the crate's constant for that format,
//!   `text/plain; version=0.0.4; charset=utf-8`): the same bytes and the same
//!   `Content-Type` as before the crate, which every Prometheus version scrapes.
//!
//! # Installing the middleware
//!
//! [`record`] goes on the router that holds every route, with `Router::layer` (not
//! `route_layer`), after the last `.route`, `.nest`, `.merge` and `.fallback`:
//!
//! ```ignore
//! app = app.layer(axum::middleware::from_fn_with_state(
//!     request_metrics.clone(),
//!     metrics::record,
//! ));
//! ```
//!
//! axum applies `Router::layer` to each route and to the fallback separately, inside
//! the routing step, so a routed request reaches the middleware with its
//! `MatchedPath` (the route template) and a request no route matched reaches it
//! without one (counted as `unmatched`). `route_layer` would also see the matched
//! path but never the fallback, so 404s would go uncounted. A layer wrapped around the
//! router as a whole (a tower layer on the finished service) runs before routing and
//! sees no matched path at all. Layers added after this one (CORS, for instance)
//! wrap it, and what they answer themselves (preflights) is not counted; layers added
//! before it (auth, the request limits) are inside it, so their 401s, 413s and 503s
//! are counted under the route.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric as _, prometheus_text};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The `Content-Type` of the rendered text: the Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// Most (method, route) series [`RequestMetrics`] keeps apart; beyond, requests are
/// counted under the route [`OVERFLOW_ROUTE`].
pub const MAX_SERIES: usize = 512;

/// The route of requests no route matched.
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// The route of requests beyond [`MAX_SERIES`].
pub const OVERFLOW_ROUTE: &str = "other";

/// Upper bounds of the latency buckets, in seconds (`+Inf` follows).
const LATENCY_BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Upper bounds of the VTXO expiry buckets, in blocks (`+Inf` follows): two hours,
/// six hours, half a day, a day, two days, a week, four weeks.
const EXPIRY_BUCKETS: [i64; 7] = [12, 36, 72, 144, 288, 1008, 4032];

/// What the wallet reports at scrape time; the engine fills it. As a [`Collector`] it
/// writes the wallet families (only when `loaded`) and `berth_wallet_loaded`.
#[derive(Debug, Clone, Default)]
pub struct WalletMetrics {
    /// Whether a wallet is loaded; when false the wallet families are omitted.
    pub loaded: bool,
    /// Sats by state, e.g. ("spendable", 1000), ("pending_in_round", 0), ("pending_lightning_send", 0),
    /// ("pending_exit", 0), ("onchain_confirmed", 0), ("onchain_unconfirmed", 0).
    pub balances: Vec<(&'static str, u64)>,
    /// (blocks until expiry, sats) of every unspent VTXO; negative = already expired.
    pub vtxo_expiries: Vec<(i64, u64)>,
    /// Exit counts by phase, e.g. ("start", 1), ("processing", 0), ("awaiting-delta", 0), ("claimable", 2), ("claim-in-progress", 0), ("claimed", 0).
    pub exits: Vec<(&'static str, u64)>,
    /// Refresh rounds the wallet joined successfully / that failed, since start.
    pub refresh_successes: u64,
    pub refresh_failures: u64,
    /// The scheduled backups; their families are written only when configured.
    pub backup: BackupMetrics,
    /// Each Nostr Wallet Connect relay and whether berthd is connected to it.
    pub nwc_relays: Vec<(String, bool)>,
    /// Each Nostr Wallet Connect connection's payments: (id, name, payments, sats paid).
    pub nwc_connections: Vec<(String, String, u64, u64)>,
}

/// The backup service's counts (`engine::backup::service`), whether or not a wallet is loaded.
#[derive(Debug, Clone, Default)]
pub struct BackupMetrics {
    pub configured: bool,
    /// Seconds since the epoch of the newest verified backup.
    pub newest_verified_at: Option<i64>,
    pub written: u64,
    pub failures: u64,
    pub consecutive_failures: u32,
    pub last_duration_seconds: Option<f64>,
    pub last_size_bytes: Option<u64>,
}

impl From<crate::engine::backup::service::BackupStatus> for BackupMetrics {
    fn from(s: crate::engine::backup::service::BackupStatus) -> Self {
        BackupMetrics {
            configured: s.configured,
            newest_verified_at: s.newest_verified.map(|(_, at)| at.timestamp()),
            written: s.written,
            failures: s.failures,
            consecutive_failures: s.consecutive_failures,
            last_duration_seconds: s.last_duration.map(|d| d.as_secs_f64()),
            last_size_bytes: s.last_size,
        }
    }
}

impl BackupMetrics {
    fn encode(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        if !self.configured {
            return Ok(());
        }
        if let Some(at) = self.newest_verified_at {
            ConstGauge::new(at).encode(encoder.encode_descriptor(
                "berth_backup_newest_verified_timestamp_seconds",
                "When the newest verified backup was taken, in seconds since the epoch.",
                None,
                MetricType::Gauge,
            )?)?;
        }
        ConstCounter::new(self.written).encode(encoder.encode_descriptor(
            "berth_backups_written",
            "Backups written and verified since the daemon started.",
            None,
            MetricType::Counter,
        )?)?;
        ConstCounter::new(self.failures).encode(encoder.encode_descriptor(
            "berth_backup_failures",
            "Scheduled backups that failed since the daemon started.",
            None,
            MetricType::Counter,
        )?)?;
        ConstGauge::new(i64::from(self.consecutive_failures)).encode(
            encoder.encode_descriptor(
                "berth_backup_consecutive_failures",
                "Scheduled backups that failed in a row; 0 when the last one worked.",
                None,
                MetricType::Gauge,
            )?,
        )?;
        if let Some(seconds) = self.last_duration_seconds {
            ConstGauge::new(seconds).encode(encoder.encode_descriptor(
                "berth_backup_last_duration_seconds",
                "How long the last backup took to write and verify.",
                None,
                MetricType::Gauge,
            )?)?;
        }
        if let Some(bytes) = self.last_size_bytes {
            ConstGauge::new(bytes).encode(encoder.encode_descriptor(
                "berth_backup_last_size_bytes",
                "Size of the last backup written, in bytes.",
                None,
                MetricType::Gauge,
            )?)?;
        }
        Ok(())
    }
}

/// `berth_nwc_relay_connected{relay}`, one series per relay some connection names.
fn encode_nwc_relays(relays: &[(String, bool)], encoder: &mut DescriptorEncoder) -> fmt::Result {
    if relays.is_empty() {
        return Ok(());
    }
    let mut family = encoder.encode_descriptor(
        "berth_nwc_relay_connected",
        "Whether berthd is connected to a Nostr Wallet Connect relay (1) or trying again (0).",
        None,
        MetricType::Gauge,
    )?;
    for (relay, connected) in relays {
        ConstGauge::new(i64::from(*connected))
            .encode(family.encode_family(&[("relay", relay.as_str())])?)?;
    }
    Ok(())
}

/// `berth_nwc_payments_total{id,connection}` and `berth_nwc_paid_sats_total{..}`: what
/// each Nostr Wallet Connect connection asked to pay, and paid, since it was made.
fn encode_nwc_connections(
    connections: &[(String, String, u64, u64)],
    encoder: &mut DescriptorEncoder,
) -> fmt::Result {
    if connections.is_empty() {
        return Ok(());
    }
    let mut family = encoder.encode_descriptor(
        "berth_nwc_payments",
        "Payments a Nostr Wallet Connect connection asked for (each counted as it begins).",
        None,
        MetricType::Counter,
    )?;
    for (id, name, payments, _) in connections {
        ConstCounter::new(*payments)
            .encode(family.encode_family(&[("id", id.as_str()), ("connection", name.as_str())])?)?;
    }
    let mut family = encoder.encode_descriptor(
        "berth_nwc_paid_sats",
        "Sats paid through a Nostr Wallet Connect connection (settled payments).",
        None,
        MetricType::Counter,
    )?;
    for (id, name, _, sats) in connections {
        ConstCounter::new(*sats)
            .encode(family.encode_family(&[("id", id.as_str()), ("connection", name.as_str())])?)?;
    }
    Ok(())
}

/// Request counts and latencies by method and route, since start: a cheap handle
/// (clones share the counts), like the crate's own metric types.
///
/// The route is the template axum matched (`/api/v1/wallet/vtxos/{id}`), never the
/// concrete path, and requests no route matched share [`UNMATCHED_ROUTE`], so the set
/// of series is the set of routes. It is bounded anyway ([`MAX_SERIES`], then
/// [`OVERFLOW_ROUTE`]): the key is a string this module does not control, and a
/// future wildcard route or a layer installed where the path is not yet matched must
/// not turn into unbounded memory and an ever-larger scrape on the appliance. With
/// methods outside the standard nine counted as `OTHER`, there are at most
/// `MAX_SERIES` series plus one overflow series per method.
///
/// A plain mutex: it is held for a few map lookups per request, or for one encoding
/// per scrape, and our request rates make contention negligible.
#[derive(Debug, Clone, Default)]
pub struct RequestMetrics {
    series: Arc<Mutex<Series>>,
}

#[derive(Debug, Default)]
struct Series {
    /// Method → route template → counts.
    by_method: BTreeMap<&'static str, BTreeMap<String, RouteStats>>,
    /// Number of (method, route) entries in `by_method`.
    len: usize,
}

#[derive(Debug)]
struct RouteStats {
    /// Responses by status class: index 0 is `1xx`, 8 is `9xx`.
    by_class: [u64; 9],
    /// Time to the response head, in seconds, in [`LATENCY_BUCKETS`].
    latency: Histogram,
}

impl RouteStats {
    fn new() -> Self {
        RouteStats {
            by_class: [0; 9],
            latency: Histogram::new(LATENCY_BUCKETS),
        }
    }

    /// Requests answered (every status has a class).
    #[cfg(test)]
    fn count(&self) -> u64 {
        self.by_class.iter().sum()
    }
}

impl Series {
    /// Apply `update` to the (method, route) entry, made if need be; beyond
    /// [`MAX_SERIES`] entries, a new route goes to [`OVERFLOW_ROUTE`] instead.
    fn update(&mut self, method: &'static str, route: &str, update: impl FnOnce(&mut RouteStats)) {
        let known = self
            .by_method
            .get(method)
            .is_some_and(|routes| routes.contains_key(route));
        let route = if known || self.len < MAX_SERIES {
            route
        } else {
            OVERFLOW_ROUTE
        };
        let routes = self.by_method.entry(method).or_default();
        match routes.get_mut(route) {
            Some(stats) => update(stats),
            None => {
                self.len += 1;
                update(
                    routes
                        .entry(route.to_owned())
                        .or_insert_with(RouteStats::new),
                );
            }
        }
    }
}

impl RequestMetrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Count one response. `route` is the matched route template, `None` when no
    /// route matched.
    pub fn observe(
        &self,
        method: &Method,
        route: Option<&str>,
        status: StatusCode,
        elapsed: Duration,
    ) {
        // `StatusCode` is 100..=999, so the class index is 0..=8.
        let class = usize::from(status.as_u16() / 100).saturating_sub(1);
        let route = route.unwrap_or(UNMATCHED_ROUTE);
        self.lock().update(method_label(method), route, |stats| {
            if let Some(n) = stats.by_class.get_mut(class) {
                *n += 1;
            }
            stats.latency.observe(elapsed.as_secs_f64());
        });
    }

    fn lock(&self) -> MutexGuard<'_, Series> {
        // The counters stay meaningful if a holder panicked mid-update.
        self.series.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `berth_http_requests_total` and `berth_http_request_duration_seconds`, once a
/// request was counted; series sorted by method, then route (then status class).
impl Collector for RequestMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let series = self.lock();
        if series.len == 0 {
            return Ok(());
        }
        let mut family = encoder.encode_descriptor(
            "berth_http_requests",
            "HTTP requests answered, by method, matched route template and status class.",
            None,
            MetricType::Counter,
        )?;
        for (method, routes) in &series.by_method {
            for (route, stats) in routes {
                for (i, n) in stats.by_class.iter().enumerate() {
                    if *n > 0 {
                        let status = format!("{}xx", i + 1);
                        let labels = [
                            ("method", *method),
                            ("route", route.as_str()),
                            ("status", status.as_str()),
                        ];
                        ConstCounter::new(*n).encode(family.encode_family(&labels)?)?;
                    }
                }
            }
        }
        let mut family = encoder.encode_descriptor(
            "berth_http_request_duration_seconds",
            "Time from a request's arrival to its response head, by method and matched route template.",
            None,
            MetricType::Histogram,
        )?;
        for (method, routes) in &series.by_method {
            for (route, stats) in routes {
                let labels = [("method", *method), ("route", route.as_str())];
                stats.latency.encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// The method as a label: the nine standard methods by name, any other as `OTHER`
/// (extension methods are arbitrary tokens a client picks).
fn method_label(method: &Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "CONNECT" => "CONNECT",
        "OPTIONS" => "OPTIONS",
        "TRACE" => "TRACE",
        "PATCH" => "PATCH",
        _ => "OTHER",
    }
}

/// Middleware: count every request it sees in `metrics`, by method, matched route
/// template and status class, and time it.
///
/// Install it with `Router::layer` on the router that holds every route, after the
/// last route, nest, merge and fallback (see the module documentation), so it sees
/// each request after routing: with the `MatchedPath` of the route it was routed to,
/// or without one (then it counts as [`UNMATCHED_ROUTE`]).
///
/// The time is from the request reaching this layer to the response head: a
/// streaming response (SSE, a websocket upgrade) is timed to its head, not to the
/// end of the stream, which is what a latency histogram should show. A request whose
/// client goes away before the response head is not counted.
pub async fn record(
    State(metrics): State<RequestMetrics>,
    request: Request,
    next: Next,
) -> Response {
    let method = request.method().clone();
    // Read before the request moves on; `MatchedPath` is a cheap `Arc<str>` clone.
    let route = request.extensions().get::<MatchedPath>().cloned();
    let started = Instant::now();
    let response = next.run(request).await;
    metrics.observe(
        &method,
        route.as_ref().map(MatchedPath::as_str),
        response.status(),
        started.elapsed(),
    );
    response
}

/// The metrics as Prometheus text (exposition format 0.0.4, [`CONTENT_TYPE`]).
///
/// Families, in this order: `berth_balance_sats`, `berth_vtxo_expiry_blocks`,
/// `berth_vtxo_count`, `berth_exits` and `berth_refresh_total` (only when a wallet is
/// loaded), `berth_wallet_loaded` (always), `berth_http_requests_total` and
/// `berth_http_request_duration_seconds` (once a request was counted),
/// `berth_process_resident_memory_bytes` (when `rss_bytes` is known). Within a
/// family, series are sorted by their labels; a state or phase listed twice in
/// `wallet` is summed into one series. Holds the request counters' lock while it
/// encodes them.
pub fn render(wallet: &WalletMetrics, requests: &RequestMetrics, rss_bytes: Option<u64>) -> String {
    // Collectors are encoded in the order they are registered.
    let mut registry = Registry::default();
    registry.register_collector(Box::new(wallet.clone()));
    registry.register_collector(Box::new(requests.clone()));
    registry.register_collector(Box::new(ResidentMemory(rss_bytes)));
    let mut text = String::with_capacity(8 * 1024);
    // The encoder fails only when its writer does, and writing to a `String` cannot.
    if let Err(e) = prometheus_text::encode(&mut text, &registry) {
        tracing::error!(target: "berth::metrics", error = %e, "cannot encode the metrics");
    }
    text
}

impl Collector for WalletMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        if self.loaded {
            self.encode_wallet(&mut encoder)?;
        }
        let loaded = ConstGauge::new(u64::from(self.loaded));
        loaded.encode(encoder.encode_descriptor(
            "berth_wallet_loaded",
            "1 when a wallet is loaded, 0 when none is.",
            None,
            MetricType::Gauge,
        )?)?;
        self.backup.encode(&mut encoder)?;
        encode_nwc_relays(&self.nwc_relays, &mut encoder)?;
        encode_nwc_connections(&self.nwc_connections, &mut encoder)
    }
}

impl WalletMetrics {
    fn encode_wallet(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let mut family = encoder.encode_descriptor(
            "berth_balance_sats",
            "Wallet balance by state, in sats.",
            None,
            MetricType::Gauge,
        )?;
        for (state, sats) in summed(&self.balances) {
            ConstGauge::new(sats).encode(family.encode_family(&[("state", state)])?)?;
        }

        let mut family = encoder.encode_descriptor(
            "berth_vtxo_expiry_blocks",
            "Value in sats (not a count) of unspent VTXOs expiring within le blocks, cumulative; expired VTXOs count in every bucket.",
            None,
            MetricType::Gauge,
        )?;
        let mut by_bucket = [0u64; EXPIRY_BUCKETS.len() + 1];
        for (blocks, sats) in &self.vtxo_expiries {
            let bucket = EXPIRY_BUCKETS
                .iter()
                .position(|bound| blocks <= bound)
                .unwrap_or(EXPIRY_BUCKETS.len());
            by_bucket[bucket] = by_bucket[bucket].saturating_add(*sats);
        }
        let mut cumulative = 0u64;
        for (i, sats) in by_bucket.iter().enumerate() {
            cumulative = cumulative.saturating_add(*sats);
            let le = match EXPIRY_BUCKETS.get(i) {
                Some(bound) => bound.to_string(),
                None => "+Inf".to_owned(),
            };
            ConstGauge::new(cumulative).encode(family.encode_family(&[("le", le.as_str())])?)?;
        }

        let count = u64::try_from(self.vtxo_expiries.len()).unwrap_or(u64::MAX);
        ConstGauge::new(count).encode(encoder.encode_descriptor(
            "berth_vtxo_count",
            "Number of unspent VTXOs.",
            None,
            MetricType::Gauge,
        )?)?;

        let mut family = encoder.encode_descriptor(
            "berth_exits",
            "Unilateral exits by phase.",
            None,
            MetricType::Gauge,
        )?;
        for (phase, count) in summed(&self.exits) {
            ConstGauge::new(count).encode(family.encode_family(&[("phase", phase)])?)?;
        }

        let mut family = encoder.encode_descriptor(
            "berth_refresh",
            "Refresh rounds the wallet took part in since the daemon started, by outcome.",
            None,
            MetricType::Counter,
        )?;
        for (outcome, n) in [
            ("failure", self.refresh_failures),
            ("success", self.refresh_successes),
        ] {
            ConstCounter::new(n).encode(family.encode_family(&[("outcome", outcome)])?)?;
        }
        Ok(())
    }
}

/// `pairs` sorted by label, a label listed twice summed into one.
fn summed(pairs: &[(&'static str, u64)]) -> BTreeMap<&'static str, u64> {
    let mut sums = BTreeMap::new();
    for (label, n) in pairs {
        let sum: &mut u64 = sums.entry(*label).or_default();
        *sum = sum.saturating_add(*n);
    }
    sums
}

/// `berth_process_resident_memory_bytes`, when known.
#[derive(Debug)]
struct ResidentMemory(Option<u64>);

impl Collector for ResidentMemory {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let Some(bytes) = self.0 else { return Ok(()) };
        ConstGauge::new(bytes).encode(encoder.encode_descriptor(
            "berth_process_resident_memory_bytes",
            "Resident memory of the daemon's process, in bytes.",
            None,
            MetricType::Gauge,
        )?)
    }
}

/// The process's resident memory (`VmRSS` of `/proc/self/status`), in bytes; `None`
/// where there is no procfs or the line is missing. procfs is served from the
/// kernel's memory, not a disk, so this is cheap enough to call on the runtime.
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_rss(&status)
}

/// `VmRSS:   1234 kB` → 1234 × 1024.
fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kb = line.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
    kb.checked_mul(1024)
}

/// `GET /metrics`
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "health",
    summary = "Prometheus metrics",
    description = "Metrics in the Prometheus text format (scope `read`), names prefixed \
        `berth_`: balances by state, VTXO value by blocks to expiry, exits by phase, \
        refresh rounds joined or failed, scheduled backups (newest verified, written, \
        failed), Nostr Wallet Connect relays and each connection's payments, requests and \
        latency by route, resident memory.",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", body = String, content_type = "text/plain"),
    )
)]
pub async fn metrics(
    State(state): State<crate::api::AppState>,
) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    let now = crate::api::status::snapshot(&state, crate::api::status::Reading::WithBalances).await;
    let mut wallet = wallet_metrics(&now);
    wallet.nwc_connections = state.nwc.usage().await;
    let text = render(&wallet, &state.requests, rss_bytes());
    ([(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)], text)
}

/// The snapshot's wallet families: the balances of a loaded wallet (nothing while it is
/// not loaded, as `/health` says), the rest from the autopilot's last check.
fn wallet_metrics(now: &crate::api::status::Snapshot) -> WalletMetrics {
    let backup = now.backup.clone().into();
    let nwc_relays = now
        .nwc_relays
        .iter()
        .map(|(url, state)| {
            (
                url.clone(),
                matches!(state, crate::nwc::RelayState::Connected { .. }),
            )
        })
        .collect();
    let (true, Some(balances)) = (now.wallet.loaded, &now.balances) else {
        return WalletMetrics {
            backup,
            nwc_relays,
            ..WalletMetrics::default()
        };
    };
    let ark = &balances.ark;
    let mut sats = vec![
        ("spendable", ark.spendable.to_sat()),
        ("needs_refresh", ark.needs_refresh.to_sat()),
        ("pending_in_round", ark.pending_in_round.to_sat()),
        ("pending_board", ark.pending_board.to_sat()),
        (
            "pending_lightning_send",
            ark.pending_lightning_send.to_sat(),
        ),
        (
            "claimable_lightning_receive",
            ark.claimable_lightning_receive.to_sat(),
        ),
        ("pending_arkoor_send", ark.pending_arkoor_send.to_sat()),
        ("pending_offboard", ark.pending_offboard.to_sat()),
        ("pending_exit", ark.pending_exit.to_sat()),
    ];
    if let (Some(confirmed), Some(unconfirmed)) =
        (balances.onchain_confirmed(), balances.onchain_unconfirmed())
    {
        sats.push(("onchain_confirmed", confirmed.to_sat()));
        sats.push(("onchain_unconfirmed", unconfirmed.to_sat()));
    }
    let seen = &now.seen;
    WalletMetrics {
        loaded: true,
        balances: sats,
        vtxo_expiries: seen
            .chain_tip
            .map(|tip| {
                seen.vtxos
                    .iter()
                    .map(|v| {
                        let left = crate::engine::autopilot::blocks_to_deadline(v, tip.height);
                        (left, v.amount.to_sat())
                    })
                    .collect()
            })
            .unwrap_or_default(),
        exits: seen.exits_by_phase.clone(),
        refresh_successes: seen.refresh_successes,
        refresh_failures: seen.refresh_failures,
        backup,
        nwc_relays,
        nwc_connections: Vec::new(),
    }
}

#[cfg(test)]
mod tests;

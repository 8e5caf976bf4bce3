//! Prometheus metrics for `GET /metrics`, in the text exposition format 0.0.4.
//!
//! Three inputs, turned into text by [`render`]:
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
//! # Installing the middleware
//!
//! [`record`] goes on the router that holds every route, with `Router::layer` (not
//! `route_layer`), after the last `.route`, `.nest`, `.merge` and `.fallback`:
//!
//! ```ignore
//! app = app.layer(axum::middleware::from_fn_with_state(
//!     Arc::clone(&request_metrics),
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
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

/// The `Content-Type` of the rendered text.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

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

/// What the wallet reports at scrape time; the engine fills it.
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
}

/// Request counts and latencies by method and route, since start.
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
/// A plain mutex: it is held for a few map lookups per request, or for one render per
/// scrape, and our request rates make contention negligible.
#[derive(Debug, Default)]
pub struct RequestMetrics {
    series: Mutex<Series>,
}

#[derive(Debug, Default)]
struct Series {
    /// Method → route template → counts.
    by_method: BTreeMap<&'static str, BTreeMap<String, RouteStats>>,
    /// Number of (method, route) entries in `by_method`.
    len: usize,
}

#[derive(Debug, Default)]
struct RouteStats {
    /// Responses by status class: index 0 is `1xx`, 8 is `9xx`.
    by_class: [u64; 9],
    /// Requests by latency bucket, not cumulative: index `i` counts latencies above
    /// `LATENCY_BUCKETS[i - 1]` and up to `LATENCY_BUCKETS[i]`; the last index counts
    /// those above every bound.
    by_bucket: [u64; LATENCY_BUCKETS.len() + 1],
    total_time: Duration,
    count: u64,
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
                update(routes.entry(route.to_owned()).or_default());
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
        let seconds = elapsed.as_secs_f64();
        let bucket = LATENCY_BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BUCKETS.len());
        let route = route.unwrap_or(UNMATCHED_ROUTE);
        self.lock().update(method_label(method), route, |stats| {
            if let Some(n) = stats.by_class.get_mut(class) {
                *n += 1;
            }
            stats.by_bucket[bucket] += 1;
            stats.total_time = stats.total_time.saturating_add(elapsed);
            stats.count += 1;
        });
    }

    fn lock(&self) -> MutexGuard<'_, Series> {
        // The counters stay meaningful if a holder panicked mid-update.
        self.series.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn render_into(&self, out: &mut String) {
        let series = self.lock();
        if series.len == 0 {
            return;
        }
        let name = "berth_http_requests_total";
        header(
            out,
            name,
            "counter",
            "HTTP requests answered, by method, matched route template and status class.",
        );
        for (method, routes) in &series.by_method {
            for (route, stats) in routes {
                for (i, n) in stats.by_class.iter().enumerate() {
                    if *n > 0 {
                        let status = format!("{}xx", i + 1);
                        sample(
                            out,
                            name,
                            &[("method", method), ("route", route), ("status", &status)],
                            n,
                        );
                    }
                }
            }
        }
        let name = "berth_http_request_duration_seconds";
        header(
            out,
            name,
            "histogram",
            "Time from a request's arrival to its response head, by method and matched route template.",
        );
        let bucket = format!("{name}_bucket");
        for (method, routes) in &series.by_method {
            for (route, stats) in routes {
                let mut cumulative = 0;
                for (i, n) in stats.by_bucket.iter().enumerate() {
                    cumulative += n;
                    let le = match LATENCY_BUCKETS.get(i) {
                        Some(bound) => bound.to_string(),
                        None => "+Inf".to_owned(),
                    };
                    sample(
                        out,
                        &bucket,
                        &[("method", method), ("route", route), ("le", &le)],
                        cumulative,
                    );
                }
                let labels = [("method", *method), ("route", route.as_str())];
                sample(
                    out,
                    &format!("{name}_sum"),
                    &labels,
                    stats.total_time.as_secs_f64(),
                );
                sample(out, &format!("{name}_count"), &labels, stats.count);
            }
        }
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
    State(metrics): State<Arc<RequestMetrics>>,
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
/// writes.
pub fn render(wallet: &WalletMetrics, requests: &RequestMetrics, rss_bytes: Option<u64>) -> String {
    let mut out = String::with_capacity(8 * 1024);
    if wallet.loaded {
        render_wallet(&mut out, wallet);
    }
    let name = "berth_wallet_loaded";
    header(
        &mut out,
        name,
        "gauge",
        "1 when a wallet is loaded, 0 when none is.",
    );
    sample(&mut out, name, &[], u8::from(wallet.loaded));
    requests.render_into(&mut out);
    if let Some(rss) = rss_bytes {
        let name = "berth_process_resident_memory_bytes";
        header(
            &mut out,
            name,
            "gauge",
            "Resident memory of the daemon's process, in bytes.",
        );
        sample(&mut out, name, &[], rss);
    }
    out
}

fn render_wallet(out: &mut String, wallet: &WalletMetrics) {
    let name = "berth_balance_sats";
    header(out, name, "gauge", "Wallet balance by state, in sats.");
    for (state, sats) in summed(&wallet.balances) {
        sample(out, name, &[("state", state)], sats);
    }

    let name = "berth_vtxo_expiry_blocks";
    header(
        out,
        name,
        "gauge",
        "Value in sats (not a count) of unspent VTXOs expiring within le blocks, cumulative; expired VTXOs count in every bucket.",
    );
    let mut by_bucket = [0u64; EXPIRY_BUCKETS.len() + 1];
    for (blocks, sats) in &wallet.vtxo_expiries {
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
        sample(out, name, &[("le", &le)], cumulative);
    }

    let name = "berth_vtxo_count";
    header(out, name, "gauge", "Number of unspent VTXOs.");
    sample(out, name, &[], wallet.vtxo_expiries.len());

    let name = "berth_exits";
    header(out, name, "gauge", "Unilateral exits by phase.");
    for (phase, count) in summed(&wallet.exits) {
        sample(out, name, &[("phase", phase)], count);
    }

    let name = "berth_refresh_total";
    header(
        out,
        name,
        "counter",
        "Refresh rounds the wallet took part in since the daemon started, by outcome.",
    );
    sample(
        out,
        name,
        &[("outcome", "failure")],
        wallet.refresh_failures,
    );
    sample(
        out,
        name,
        &[("outcome", "success")],
        wallet.refresh_successes,
    );
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

/// The `# HELP` and `# TYPE` lines of a family. `help` is our own text: one line,
/// no backslashes.
fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    // Writing to a `String` cannot fail.
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// One sample line: `name{label="value",...} value`.
fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (label, value)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(label);
            out.push_str("=\"");
            escape_label_value(out, value);
            out.push('"');
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// A label value as the text format wants it: backslash, double quote and newline
/// escaped.
fn escape_label_value(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
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
        refresh rounds joined or failed, requests and latency by route, resident memory.",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", body = String, content_type = "text/plain"),
    )
)]
pub async fn metrics(
    State(state): State<crate::api::AppState>,
) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    let wallet = wallet_metrics(&state.engine).await;
    let text = render(&wallet, &state.requests, rss_bytes());
    ([(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)], text)
}

/// What the engine knows now: balances from the wallet, the rest from the
/// autopilot's last check.
async fn wallet_metrics(engine: &crate::engine::Engine) -> WalletMetrics {
    let Ok(balance) = engine.balance().await else {
        return WalletMetrics::default();
    };
    let seen = engine.autopilot_status();
    let mut balances = vec![
        ("spendable", balance.spendable.to_sat()),
        ("needs_refresh", balance.needs_refresh.to_sat()),
        ("pending_in_round", balance.pending_in_round.to_sat()),
        ("pending_board", balance.pending_board.to_sat()),
        (
            "pending_lightning_send",
            balance.pending_lightning_send.to_sat(),
        ),
        (
            "claimable_lightning_receive",
            balance.claimable_lightning_receive.to_sat(),
        ),
        ("pending_arkoor_send", balance.pending_arkoor_send.to_sat()),
        ("pending_offboard", balance.pending_offboard.to_sat()),
        ("pending_exit", balance.pending_exit.to_sat()),
    ];
    if let Ok(onchain) = engine.onchain_balance().await {
        balances.push(("onchain_confirmed", onchain.confirmed.to_sat()));
        balances.push((
            "onchain_unconfirmed",
            (onchain.trusted_pending + onchain.untrusted_pending + onchain.immature).to_sat(),
        ));
    }
    WalletMetrics {
        loaded: true,
        balances,
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use tower::ServiceExt as _;

    fn wallet() -> WalletMetrics {
        WalletMetrics {
            loaded: true,
            balances: vec![("spendable", 1000), ("pending_exit", 20)],
            vtxo_expiries: vec![(100, 500), (-3, 7)],
            exits: vec![("start", 1), ("claimable", 2)],
            refresh_successes: 4,
            refresh_failures: 1,
        }
    }

    #[test]
    fn renders_a_small_snapshot_exactly() {
        let requests = RequestMetrics::new();
        requests.observe(
            &Method::GET,
            Some("/api/v1/wallet/vtxos/{id}"),
            StatusCode::OK,
            Duration::from_millis(20),
        );
        requests.observe(
            &Method::GET,
            Some("/api/v1/wallet/vtxos/{id}"),
            StatusCode::NOT_FOUND,
            Duration::from_millis(300),
        );
        let text = render(&wallet(), &requests, Some(4096));
        let expected = r#"# HELP berth_balance_sats Wallet balance by state, in sats.
# TYPE berth_balance_sats gauge
berth_balance_sats{state="pending_exit"} 20
berth_balance_sats{state="spendable"} 1000
# HELP berth_vtxo_expiry_blocks Value in sats (not a count) of unspent VTXOs expiring within le blocks, cumulative; expired VTXOs count in every bucket.
# TYPE berth_vtxo_expiry_blocks gauge
berth_vtxo_expiry_blocks{le="12"} 7
berth_vtxo_expiry_blocks{le="36"} 7
berth_vtxo_expiry_blocks{le="72"} 7
berth_vtxo_expiry_blocks{le="144"} 507
berth_vtxo_expiry_blocks{le="288"} 507
berth_vtxo_expiry_blocks{le="1008"} 507
berth_vtxo_expiry_blocks{le="4032"} 507
berth_vtxo_expiry_blocks{le="+Inf"} 507
# HELP berth_vtxo_count Number of unspent VTXOs.
# TYPE berth_vtxo_count gauge
berth_vtxo_count 2
# HELP berth_exits Unilateral exits by phase.
# TYPE berth_exits gauge
berth_exits{phase="claimable"} 2
berth_exits{phase="start"} 1
# HELP berth_refresh_total Refresh rounds the wallet took part in since the daemon started, by outcome.
# TYPE berth_refresh_total counter
berth_refresh_total{outcome="failure"} 1
berth_refresh_total{outcome="success"} 4
# HELP berth_wallet_loaded 1 when a wallet is loaded, 0 when none is.
# TYPE berth_wallet_loaded gauge
berth_wallet_loaded 1
# HELP berth_http_requests_total HTTP requests answered, by method, matched route template and status class.
# TYPE berth_http_requests_total counter
berth_http_requests_total{method="GET",route="/api/v1/wallet/vtxos/{id}",status="2xx"} 1
berth_http_requests_total{method="GET",route="/api/v1/wallet/vtxos/{id}",status="4xx"} 1
# HELP berth_http_request_duration_seconds Time from a request's arrival to its response head, by method and matched route template.
# TYPE berth_http_request_duration_seconds histogram
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="0.005"} 0
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="0.01"} 0
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="0.025"} 1
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="0.05"} 1
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="0.1"} 1
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="0.25"} 1
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="0.5"} 2
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="1"} 2
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="2.5"} 2
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="5"} 2
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="10"} 2
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="30"} 2
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="60"} 2
berth_http_request_duration_seconds_bucket{method="GET",route="/api/v1/wallet/vtxos/{id}",le="+Inf"} 2
berth_http_request_duration_seconds_sum{method="GET",route="/api/v1/wallet/vtxos/{id}"} 0.32
berth_http_request_duration_seconds_count{method="GET",route="/api/v1/wallet/vtxos/{id}"} 2
# HELP berth_process_resident_memory_bytes Resident memory of the daemon's process, in bytes.
# TYPE berth_process_resident_memory_bytes gauge
berth_process_resident_memory_bytes 4096
"#;
        assert_eq!(text, expected);
        assert_valid(&text);
    }

    #[test]
    fn without_a_wallet_only_the_loaded_gauge_remains() {
        let text = render(&WalletMetrics::default(), &RequestMetrics::new(), None);
        assert_eq!(
            text,
            "# HELP berth_wallet_loaded 1 when a wallet is loaded, 0 when none is.\n\
             # TYPE berth_wallet_loaded gauge\n\
             berth_wallet_loaded 0\n"
        );
        assert_valid(&text);
    }

    #[test]
    fn label_values_are_escaped() {
        let wallet = WalletMetrics {
            loaded: true,
            balances: vec![("back\\slash \"quoted\"\nnewline", 1)],
            ..WalletMetrics::default()
        };
        let requests = RequestMetrics::new();
        requests.observe(&Method::POST, Some("/a\"b"), StatusCode::OK, Duration::ZERO);
        let text = render(&wallet, &requests, None);
        assert!(
            text.contains(
                "berth_balance_sats{state=\"back\\\\slash \\\"quoted\\\"\\nnewline\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "berth_http_requests_total{method=\"POST\",route=\"/a\\\"b\",status=\"2xx\"} 1\n"
            ),
            "{text}"
        );
        assert_valid(&text);
    }

    #[test]
    fn expiry_buckets_are_cumulative_and_count_expired_vtxos_everywhere() {
        let wallet = WalletMetrics {
            loaded: true,
            vtxo_expiries: vec![
                (-5, 100),
                (0, 200),
                (10, 1),
                (12, 2),
                (13, 4),
                (4032, 8),
                (5000, 16),
            ],
            ..WalletMetrics::default()
        };
        let text = render(&wallet, &RequestMetrics::new(), None);
        let buckets: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("berth_vtxo_expiry_blocks{"))
            .collect();
        assert_eq!(
            buckets,
            [
                "berth_vtxo_expiry_blocks{le=\"12\"} 303",
                "berth_vtxo_expiry_blocks{le=\"36\"} 307",
                "berth_vtxo_expiry_blocks{le=\"72\"} 307",
                "berth_vtxo_expiry_blocks{le=\"144\"} 307",
                "berth_vtxo_expiry_blocks{le=\"288\"} 307",
                "berth_vtxo_expiry_blocks{le=\"1008\"} 307",
                "berth_vtxo_expiry_blocks{le=\"4032\"} 315",
                "berth_vtxo_expiry_blocks{le=\"+Inf\"} 331",
            ]
        );
        assert!(text.contains("berth_vtxo_count 7\n"), "{text}");
    }

    #[test]
    fn repeated_states_are_summed_into_one_series() {
        let wallet = WalletMetrics {
            loaded: true,
            exits: vec![("claimable", 2), ("start", 1), ("claimable", 3)],
            ..WalletMetrics::default()
        };
        let text = render(&wallet, &RequestMetrics::new(), None);
        let exits: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("berth_exits{"))
            .collect();
        assert_eq!(
            exits,
            [
                "berth_exits{phase=\"claimable\"} 5",
                "berth_exits{phase=\"start\"} 1"
            ]
        );
    }

    async fn call(app: &Router, method: Method, uri: &str) -> StatusCode {
        let request = axum::http::Request::builder()
            .method(method)
            .uri(uri)
            .body(Body::empty())
            .expect("request");
        app.clone()
            .oneshot(request)
            .await
            .expect("infallible")
            .status()
    }

    fn routes() -> Router {
        let v1 = Router::new()
            .route("/wallet/vtxos/{id}", get(|| async { "vtxo" }))
            .route(
                "/broken",
                get(|| async { StatusCode::INTERNAL_SERVER_ERROR }),
            );
        Router::new()
            .route("/ping", get(|| async { "pong" }))
            .nest("/api/v1", v1)
    }

    #[tokio::test]
    async fn the_middleware_counts_route_templates_and_unmatched_paths() {
        let metrics = Arc::new(RequestMetrics::new());
        let app = routes().layer(axum::middleware::from_fn_with_state(
            Arc::clone(&metrics),
            record,
        ));
        assert_eq!(
            call(&app, Method::GET, "/api/v1/wallet/vtxos/abc").await,
            StatusCode::OK
        );
        assert_eq!(
            call(&app, Method::GET, "/api/v1/wallet/vtxos/def").await,
            StatusCode::OK
        );
        assert_eq!(
            call(&app, Method::GET, "/api/v1/broken").await,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        assert_eq!(
            call(&app, Method::GET, "/no/such/path").await,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            call(&app, Method::GET, "/another/unknown").await,
            StatusCode::NOT_FOUND
        );
        // The path matches, the method does not: counted under the route.
        assert_eq!(
            call(&app, Method::DELETE, "/ping").await,
            StatusCode::METHOD_NOT_ALLOWED
        );

        let text = render(&WalletMetrics::default(), &metrics, None);
        for line in [
            "berth_http_requests_total{method=\"GET\",route=\"/api/v1/wallet/vtxos/{id}\",status=\"2xx\"} 2\n",
            "berth_http_requests_total{method=\"GET\",route=\"/api/v1/broken\",status=\"5xx\"} 1\n",
            "berth_http_requests_total{method=\"GET\",route=\"unmatched\",status=\"4xx\"} 2\n",
            "berth_http_requests_total{method=\"DELETE\",route=\"/ping\",status=\"4xx\"} 1\n",
            "berth_http_request_duration_seconds_count{method=\"GET\",route=\"/api/v1/wallet/vtxos/{id}\"} 2\n",
            "berth_http_request_duration_seconds_count{method=\"GET\",route=\"unmatched\"} 2\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(
            !text.contains("abc") && !text.contains("/no/such"),
            "{text}"
        );
        assert_eq!(metrics.lock().len, 4);
        assert_valid(&text);
    }

    /// Why the module says `layer`, not `route_layer`: the latter never sees the
    /// fallback, so unknown paths would go uncounted.
    #[tokio::test]
    async fn a_route_layer_sees_templates_but_not_the_fallback() {
        let metrics = Arc::new(RequestMetrics::new());
        let app = routes().route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&metrics),
            record,
        ));
        call(&app, Method::GET, "/api/v1/wallet/vtxos/abc").await;
        call(&app, Method::GET, "/no/such/path").await;
        let text = render(&WalletMetrics::default(), &metrics, None);
        assert!(
            text.contains("berth_http_requests_total{method=\"GET\",route=\"/api/v1/wallet/vtxos/{id}\",status=\"2xx\"} 1\n"),
            "{text}"
        );
        assert!(!text.contains("unmatched"), "{text}");
    }

    #[test]
    fn the_series_are_bounded() {
        let metrics = RequestMetrics::new();
        let extra = 88;
        for i in 0..MAX_SERIES + extra {
            metrics.observe(
                &Method::GET,
                Some(&format!("/r/{i}")),
                StatusCode::OK,
                Duration::ZERO,
            );
        }
        // A known route keeps its own series once the bound is reached.
        metrics.observe(&Method::GET, Some("/r/0"), StatusCode::OK, Duration::ZERO);
        // Extension methods share one label.
        let odd = Method::from_bytes(b"BREW").expect("method");
        metrics.observe(&odd, Some("/r/1"), StatusCode::OK, Duration::ZERO);

        let series = metrics.lock();
        assert_eq!(series.len, MAX_SERIES + 2);
        let get = &series.by_method["GET"];
        assert_eq!(get[OVERFLOW_ROUTE].count, extra as u64);
        assert_eq!(get["/r/0"].count, 2);
        assert!(!get.contains_key(&format!("/r/{MAX_SERIES}")));
        assert_eq!(series.by_method["OTHER"][OVERFLOW_ROUTE].count, 1);
        drop(series);
        assert_valid(&render(&WalletMetrics::default(), &metrics, None));
    }

    #[test]
    fn the_status_class_covers_every_code() {
        let metrics = RequestMetrics::new();
        for code in [100, 101, 204, 308, 429, 503, 599, 999] {
            let status = StatusCode::from_u16(code).expect("status");
            metrics.observe(&Method::GET, None, status, Duration::from_secs(90));
        }
        let text = render(&WalletMetrics::default(), &metrics, None);
        for (class, n) in [
            ("1xx", 2),
            ("2xx", 1),
            ("3xx", 1),
            ("4xx", 1),
            ("5xx", 2),
            ("9xx", 1),
        ] {
            let line = format!(
                "berth_http_requests_total{{method=\"GET\",route=\"unmatched\",status=\"{class}\"}} {n}\n"
            );
            assert!(text.contains(&line), "missing {line:?} in\n{text}");
        }
        // 90 s is above every bound: only +Inf counts it.
        assert!(text.contains("le=\"60\"} 0\n"), "{text}");
        assert!(text.contains("le=\"+Inf\"} 8\n"), "{text}");
        assert_valid(&text);
    }

    #[test]
    fn resident_memory_is_read_in_bytes() {
        let status = "Name:\tberthd\nVmPeak:\t  9000 kB\nVmRSS:\t    1234 kB\nThreads:\t4\n";
        assert_eq!(parse_vm_rss(status), Some(1234 * 1024));
        assert_eq!(parse_vm_rss("Name:\tberthd\n"), None);
        assert_eq!(parse_vm_rss("VmRSS:\tlots kB\n"), None);
        if cfg!(target_os = "linux") {
            assert!(rss_bytes().is_some_and(|b| b > 0));
        }
    }

    #[test]
    fn a_full_rendering_is_valid() {
        let requests = RequestMetrics::new();
        requests.observe(&Method::GET, None, StatusCode::NOT_FOUND, Duration::ZERO);
        requests.observe(
            &Method::POST,
            Some("/api/v1/wallet/send"),
            StatusCode::OK,
            Duration::from_millis(1500),
        );
        assert_valid(&render(&wallet(), &requests, rss_bytes()));
    }

    #[test]
    fn the_format_check_rejects_bad_text() {
        for bad in [
            "berth_x 1\n",
            "# HELP berth_x x\nberth_x 1\n",
            "# HELP berth_x x\n# TYPE berth_x gauge\nberth_x{a=\"b} 1\n",
            "# HELP berth_x x\n# TYPE berth_x gauge\nBerth_x 1\n",
            "# HELP berth_x x\n# TYPE berth_x gauge\nberth_x one\n",
            "# HELP berth_x x\n# TYPE berth_x gauge\nberth_x{a=\"\\q\"} 1\n",
            "# HELP berth_x x\n# TYPE berth_x gauge\nberth_x 1\nberth_x 2\n",
            "# HELP berth_x x\n# TYPE berth_x gauge\n# HELP berth_y y\n# TYPE berth_y gauge\nberth_x 1\n",
        ] {
            assert!(
                std::panic::catch_unwind(|| assert_valid(bad)).is_err(),
                "accepted {bad:?}"
            );
        }
    }

    /// A small check of the text format: comments are `# HELP` / `# TYPE` lines, each
    /// family's HELP and TYPE come before its samples and it is not reopened later,
    /// samples are `name{labels} value` or `name value` with well-formed labels and a
    /// number, and every name is `berth_` and lower-case letters or underscores.
    fn assert_valid(text: &str) {
        fn valid_name(name: &str) -> bool {
            name.strip_prefix("berth_").is_some_and(|rest| {
                !rest.is_empty() && rest.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            })
        }
        assert!(text.ends_with('\n'), "no final newline");
        let mut families: Vec<(String, Option<String>, Option<String>)> = Vec::new();
        let mut seen_series = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(comment) = line.strip_prefix("# ") {
                let (keyword, rest) = comment.split_once(' ').expect("comment keyword");
                let (name, rest) = rest.split_once(' ').expect("comment name");
                assert!(valid_name(name), "bad name in {line:?}");
                match keyword {
                    "HELP" => {
                        assert!(
                            families.iter().all(|(n, _, _)| n != name),
                            "{name} opened twice"
                        );
                        families.push((name.to_owned(), Some(rest.to_owned()), None));
                    }
                    "TYPE" => {
                        let last = families.last_mut().expect("TYPE before HELP");
                        assert_eq!(last.0, name, "TYPE of another family: {line:?}");
                        assert!(last.2.is_none(), "two TYPE lines for {name}");
                        assert!(
                            ["counter", "gauge", "histogram"].contains(&rest),
                            "bad type in {line:?}"
                        );
                        last.2 = Some(rest.to_owned());
                    }
                    _ => panic!("unexpected comment {line:?}"),
                }
                continue;
            }
            assert!(!line.starts_with('#'), "bad comment {line:?}");
            let (series, value) = line.rsplit_once(' ').expect("sample value");
            assert!(
                value == "+Inf" || value.parse::<f64>().is_ok(),
                "bad value in {line:?}"
            );
            let (name, labels) = match series.split_once('{') {
                Some((name, labels)) => {
                    let labels = labels.strip_suffix('}').expect("closing brace");
                    (name, Some(labels))
                }
                None => (series, None),
            };
            assert!(valid_name(name), "bad name in {line:?}");
            let (family, _, kind) = families.last().expect("sample before any HELP");
            assert!(kind.is_some(), "sample before TYPE: {line:?}");
            let base = if kind.as_deref() == Some("histogram") {
                ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix))
                    .unwrap_or(name)
            } else {
                name
            };
            assert_eq!(base, family, "sample outside its family: {line:?}");
            if let Some(labels) = labels {
                let mut rest = labels;
                let mut names = Vec::new();
                while !rest.is_empty() {
                    let (label, after) = rest.split_once("=\"").expect("label=\"");
                    assert!(
                        !label.is_empty()
                            && label.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                        "bad label name in {line:?}"
                    );
                    names.push(label);
                    // The value ends at the first unescaped quote.
                    let mut chars = after.char_indices();
                    let end = loop {
                        match chars.next().expect("unterminated label value") {
                            (_, '\\') => {
                                let (_, escaped) = chars.next().expect("escape");
                                assert!(
                                    ['\\', '"', 'n'].contains(&escaped),
                                    "bad escape in {line:?}"
                                );
                            }
                            (_, '\n') => panic!("raw newline in {line:?}"),
                            (i, '"') => break i,
                            _ => {}
                        }
                    };
                    rest = &after[end + 1..];
                    rest = rest.strip_prefix(',').unwrap_or(rest);
                }
                let mut unique = names.clone();
                unique.sort_unstable();
                unique.dedup();
                assert_eq!(unique.len(), names.len(), "label repeated in {line:?}");
            }
            assert!(
                seen_series.insert(series.to_owned()),
                "series twice: {line:?}"
            );
        }
    }
}

//! The exposition text against a small parser, the bounded request series, and the
//! wallet families.

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
        backup: BackupMetrics {
            configured: true,
            newest_verified_at: Some(1_795_000_000),
            written: 3,
            failures: 2,
            consecutive_failures: 1,
            last_duration_seconds: Some(1.5),
            last_size_bytes: Some(6_700_000),
        },
        nwc_relays: Vec::new(),
        nwc_connections: Vec::new(),
    }
}

#[test]
fn each_nwc_connection_has_its_payments_by_id_and_name() {
    let mut usage = wallet();
    usage.nwc_connections = vec![
        ("00aa".into(), "Alby Go".into(), 3, 1500),
        ("00bb".into(), "Zeus \"home\"".into(), 0, 0),
    ];
    let text = render(&usage, &RequestMetrics::new(), None);
    for line in [
        "berth_nwc_payments_total{id=\"00aa\",connection=\"Alby Go\"} 3",
        "berth_nwc_paid_sats_total{id=\"00aa\",connection=\"Alby Go\"} 1500",
        // A name is a label value: its quotes are escaped.
        "berth_nwc_payments_total{id=\"00bb\",connection=\"Zeus \\\"home\\\"\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in {text}");
    }
    assert!(
        text.contains("# TYPE berth_nwc_payments_total counter"),
        "{text}"
    );
}

#[test]
fn each_nwc_relay_is_one_series_of_whether_it_is_connected() {
    let mut relays = wallet();
    relays.nwc_relays = vec![
        ("wss://relay.example/".into(), true),
        ("ws://192.168.1.9:7777/".into(), false),
    ];
    let text = render(&relays, &RequestMetrics::new(), None);
    assert!(
        text.contains("berth_nwc_relay_connected{relay=\"wss://relay.example/\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("berth_nwc_relay_connected{relay=\"ws://192.168.1.9:7777/\"} 0"),
        "{text}"
    );
    let none = WalletMetrics::default();
    let text = render(&none, &RequestMetrics::new(), None);
    assert!(
        !text.contains("berth_nwc_relay_connected"),
        "no relay, no family: {text}"
    );
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
# HELP berth_backup_newest_verified_timestamp_seconds When the newest verified backup was taken, in seconds since the epoch.
# TYPE berth_backup_newest_verified_timestamp_seconds gauge
berth_backup_newest_verified_timestamp_seconds 1795000000
# HELP berth_backups_written_total Backups written and verified since the daemon started.
# TYPE berth_backups_written_total counter
berth_backups_written_total 3
# HELP berth_backup_failures_total Scheduled backups that failed since the daemon started.
# TYPE berth_backup_failures_total counter
berth_backup_failures_total 2
# HELP berth_backup_consecutive_failures Scheduled backups that failed in a row; 0 when the last one worked.
# TYPE berth_backup_consecutive_failures gauge
berth_backup_consecutive_failures 1
# HELP berth_backup_last_duration_seconds How long the last backup took to write and verify.
# TYPE berth_backup_last_duration_seconds gauge
berth_backup_last_duration_seconds 1.5
# HELP berth_backup_last_size_bytes Size of the last backup written, in bytes.
# TYPE berth_backup_last_size_bytes gauge
berth_backup_last_size_bytes 6700000
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
        text.contains("berth_balance_sats{state=\"back\\\\slash \\\"quoted\\\"\\nnewline\"} 1\n"),
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
    let metrics = RequestMetrics::new();
    let app = routes().layer(axum::middleware::from_fn_with_state(
        metrics.clone(),
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
    let metrics = RequestMetrics::new();
    let app = routes().route_layer(axum::middleware::from_fn_with_state(
        metrics.clone(),
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
    assert_eq!(get[OVERFLOW_ROUTE].count(), extra as u64);
    assert_eq!(get["/r/0"].count(), 2);
    assert!(!get.contains_key(&format!("/r/{MAX_SERIES}")));
    assert_eq!(series.by_method["OTHER"][OVERFLOW_ROUTE].count(), 1);
    drop(series);
    let families = assert_valid(&render(&WalletMetrics::default(), &metrics, None));
    // The scrape shows the same bound: one counter series per (method, route).
    let requests: Vec<&Sample> = families
        .iter()
        .filter(|f| f.name == "berth_http_requests_total")
        .flat_map(|f| &f.samples)
        .collect();
    assert_eq!(requests.len(), MAX_SERIES + 2);
    let overflow = |method: &str| {
        requests
            .iter()
            .find(|s| {
                s.labels.contains(&("method".to_owned(), method.to_owned()))
                    && s.labels
                        .contains(&("route".to_owned(), OVERFLOW_ROUTE.to_owned()))
            })
            .map(|s| s.value)
    };
    assert_eq!(overflow("GET"), Some(extra as f64));
    assert_eq!(overflow("OTHER"), Some(1.0));
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

/// A metric family as [`parse`] reads it.
#[derive(Debug)]
struct Family {
    name: String,
    kind: String,
    samples: Vec<Sample>,
}

#[derive(Debug)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

/// A tiny parser of the text format 0.0.4, as far as the crate writes it for us:
/// each family is a `# HELP` line, its `# TYPE` line, then its samples
/// (`name value` or `name{label="value",...} value`, label values unescaped).
/// Panics on anything else, so a test that parses a scrape also checks its form.
fn parse(text: &str) -> Vec<Family> {
    assert!(text.ends_with('\n'), "no final newline");
    let mut families: Vec<Family> = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, _help) = rest.split_once(' ').expect("HELP name and text");
            let next = lines.next().unwrap_or_default();
            let kind = next
                .strip_prefix(&format!("# TYPE {name} "))
                .unwrap_or_else(|| panic!("the TYPE of {name} must follow its HELP: {next:?}"));
            families.push(Family {
                name: name.to_owned(),
                kind: kind.to_owned(),
                samples: Vec::new(),
            });
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment {line:?}");
        let (series, value) = line.rsplit_once(' ').expect("sample value");
        let value = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line:?}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => {
                let labels = labels.strip_suffix('}').expect("closing brace");
                (name, parse_labels(labels))
            }
            None => (series, Vec::new()),
        };
        let family = families.last_mut().expect("sample before any HELP");
        family.samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    families
}

/// `a="x",b="y\"z"` → [(a, x), (b, y"z)].
fn parse_labels(mut rest: &str) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    while !rest.is_empty() {
        let (label, after) = rest.split_once("=\"").expect("label=\"");
        let mut value = String::new();
        let mut chars = after.char_indices();
        // The value ends at the first unescaped quote.
        let end = loop {
            match chars.next().expect("unterminated label value") {
                (_, '\\') => match chars.next().expect("escape").1 {
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    'n' => value.push('\n'),
                    other => panic!("bad escape \\{other}"),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        labels.push((label.to_owned(), value));
        rest = &after[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    labels
}

/// [`parse`], and what the format leaves to us: every name is `berth_` and
/// lower-case letters or underscores, each family appears once with a type we use,
/// each sample belongs to its family, label names are well-formed and not
/// repeated, and no series appears twice.
fn assert_valid(text: &str) -> Vec<Family> {
    fn valid_name(name: &str) -> bool {
        name.strip_prefix("berth_").is_some_and(|rest| {
            !rest.is_empty() && rest.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        })
    }
    let families = parse(text);
    let mut seen_families = std::collections::HashSet::new();
    let mut seen_series = std::collections::HashSet::new();
    for family in &families {
        assert!(valid_name(&family.name), "bad name {:?}", family.name);
        assert!(
            seen_families.insert(&family.name),
            "{} opened twice",
            family.name
        );
        assert!(
            ["counter", "gauge", "histogram"].contains(&family.kind.as_str()),
            "bad type of {}: {}",
            family.name,
            family.kind
        );
        for sample in &family.samples {
            assert!(valid_name(&sample.name), "bad name {:?}", sample.name);
            let base = if family.kind == "histogram" {
                ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|suffix| sample.name.strip_suffix(suffix))
                    .unwrap_or(&sample.name)
            } else {
                &sample.name
            };
            assert_eq!(base, family.name, "sample outside its family: {sample:?}");
            let mut names: Vec<&str> = sample.labels.iter().map(|(l, _)| l.as_str()).collect();
            assert!(
                names
                    .iter()
                    .all(|l| !l.is_empty()
                        && l.chars().all(|c| c.is_ascii_lowercase() || c == '_')),
                "bad label name in {sample:?}"
            );
            names.sort_unstable();
            names.dedup();
            assert_eq!(
                names.len(),
                sample.labels.len(),
                "label repeated in {sample:?}"
            );
            assert!(
                seen_series.insert((&sample.name, &sample.labels)),
                "series twice: {sample:?}"
            );
        }
    }
    families
}

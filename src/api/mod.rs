//! The HTTP API: barkd's REST contract (`docs/barkd-compatibility.md`), served by axum.
//!
//! Layers, outermost first: the `Host` check (`host`: only names of this machine, against
//! DNS rebinding), CORS (deny unless `--allowed-origins`), the request time
//! and body size limits, bearer-token auth with the per-address failure backoff
//! (everything except `/ping`, the public OpenAPI document, pairing and the
//! notifications websocket, which checks its own single-use ticket), then after
//! routing the scope check (`scopes`). Unknown paths answer 404 JSON. Fund-moving
//! POSTs take an `Idempotency-Key` (`idempotency`). Handlers are thin: parse, one
//! engine call, map to the response type. `control` is the separate router of the
//! local control socket.

pub mod approvals;
pub mod auth;
pub mod control;
pub mod disk;
pub mod error;
pub mod health;
pub mod host;
pub mod idempotency;
pub mod limits;
pub mod metrics;
pub mod openapi;
pub mod routes;
pub mod scopes;
pub mod status;
pub mod v1;

use std::sync::Arc;

use crate::api::routes::route;
use axum::Router;
use axum::http::{HeaderValue, Method, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tower_http::cors::{AllowOrigin, CorsLayer};
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;

use crate::access::backoff::AuthFailures;
use crate::access::devices::Devices;
use crate::access::pairing::PairingCodes;
use crate::access::tickets::TicketBook;
use crate::api::auth::Authenticator;
use crate::api::error::ApiError;
use crate::api::routes::{Documentation, Documenting, RouteTable, Routes, Serving};
use crate::api::v1::notifications::SocketCount;
use crate::engine::Engine;
use crate::events::EventHub;

/// What handlers share.
#[derive(Clone)]
pub struct AppState {
    pub engine: Arc<Engine>,
    /// The one way out for fetches made on a client's behalf (`net::egress`).
    pub egress: Arc<crate::net::egress::Egress>,
    /// Nostr Wallet Connect: its connections (`/api/v1/nwc/connections`).
    pub nwc: Arc<crate::nwc::Nwc>,
    /// Webhook endpoints and their deliveries (`/api/v1/webhooks`).
    pub webhooks: Arc<crate::webhooks::Webhooks>,
    pub events: Arc<EventHub>,
    pub tickets: Arc<TicketBook>,
    /// Open notification websockets (shutdown waits for their goodbyes).
    pub sockets: Arc<SocketCount>,
    pub expose_mnemonic: bool,
    /// Paired devices and their tokens.
    pub devices: Arc<Devices>,
    /// Open pairing codes (opened through the control socket).
    pub pairing: Arc<PairingCodes>,
    /// Failed authentications by address (bearer tokens and pairing codes).
    pub failures: Arc<AuthFailures>,
    /// Request counts and latency by route, for `/metrics`.
    pub requests: metrics::RequestMetrics,
    /// Scheduled backups and fresh ones for download.
    pub backups: Arc<crate::engine::backup::service::Backups>,
    /// The free space kept in reserve: changes are refused inside it (`disk`).
    pub disk: Arc<disk::DiskReserve>,
    /// The box's claim (`POST /api/v1/claim`).
    pub claim: Arc<crate::access::claim::Claim>,
    /// What a pairing link names: the address, host name and TLS pin.
    pub pairing_target: Arc<crate::access::pairing::PairingTarget>,
    /// History pages as sent, until the wallet's database next changes.
    pub history_pages:
        Arc<crate::api::v1::page_cache::PageCache<crate::api::v1::page_cache::PageKey>>,
    /// The VTXO lists as sent, until the wallet's database next changes.
    pub vtxo_lists: Arc<crate::api::v1::page_cache::PageCache<bool>>,
    /// The exits' lists without transactions, as sent, until the database next changes.
    pub exit_lists: Arc<crate::api::v1::page_cache::PageCache<(crate::engine::ExitList, bool)>>,
    /// The configuration in effect (`berth.toml` and its layers, defaults filled in),
    /// as TOML, for the console's settings page.
    pub settings_toml: Arc<str>,
    /// Runs requests the owner approved, and expires the others (`approvals`).
    pub approvals: Arc<approvals::Runner>,
    /// The uploaded system update bundle (`/api/v1/system/update`).
    pub system_update: Arc<crate::system_update::SystemUpdate>,
    /// Wallets the console is creating: the new seed shown to a device, waiting for it
    /// to confirm the phrase, by device id (at most 16, 15 minutes each).
    pub new_wallets: Arc<
        std::sync::Mutex<crate::access::expiring::ExpiringMap<String, crate::engine::CreateWallet>>,
    >,
}

impl AppState {
    /// Enrolling and removing devices (`access::enrolment`), over this daemon's parts.
    pub fn enrolment(&self) -> crate::access::enrolment::Enrolment<'_> {
        crate::access::enrolment::Enrolment {
            devices: &self.devices,
            pairing: &self.pairing,
            claim: &self.claim,
            failures: &self.failures,
            tickets: &self.tickets,
        }
    }
}

/// How the router is put together.
#[derive(Debug, Clone)]
pub struct ApiOptions {
    pub auth: crate::api::auth::AuthPolicy,
    /// Origins allowed by CORS; empty denies every cross-origin request.
    pub allowed_origins: Vec<HeaderValue>,
    /// Names besides the machine's own that `Host` may carry (`host`).
    pub allowed_hosts: host::AllowedHosts,
    pub limits: limits::RequestLimits,
}

/// Every route of the API, declared with who may call it (`routes`); `D`: whether the
/// declarations keep their descriptions for the OpenAPI document (`routes::Documenting`)
/// or drop them (`routes::Serving`).
fn declared<D: Documentation>() -> routes::Declared<D> {
    Routes::new()
        .public(route!(ping))
        .public(route!(health::health))
        .read(route!(metrics::metrics))
        .nest("/api/v1", v1::routes())
        .declared()
}

/// Every operation with its method, path and who may call it.
pub fn route_table() -> RouteTable {
    declared::<Serving>().table
}

/// Berth's OpenAPI document, made from the code: checked in as `docs/openapi.json`,
/// which is what berthd serves at `/api-docs/openapi.json` (it never calls this).
pub fn openapi() -> utoipa::openapi::OpenApi {
    let routes = declared::<Documenting>();
    let table = routes.table.clone();
    let (protected, public) = routes.documented();
    let mut document = OpenApiRouter::<AppState>::with_openapi(openapi::ApiDoc::openapi())
        .merge(protected)
        .merge(public)
        .into_openapi();
    openapi::finish(&mut document, &table);
    document
}

/// The served document, `docs/openapi.json` compressed by build.rs. Serving the
/// checked-in copy rather than making it keeps the describing code out of the binary
/// (1.87 MB; the routes are declared with `routes::Serving`); `tests/integration/openapi.rs`
/// proves the copy is what `openapi()` makes, and that the daemon serves exactly that.
const OPENAPI_ZSTD: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/openapi.json.zst"));

/// `GET /api-docs/openapi.json`: decoded for each request, not kept (~490 KB held for
/// the life of the process would be resident memory spent on a document asked for
/// rarely, by tools, once); decoding and sending it takes under half a millisecond.
/// The bytes are the build's own, so their size needs no bound of its own here.
async fn openapi_document() -> axum::response::Response {
    match zstd::stream::decode_all(OPENAPI_ZSTD) {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        // The bytes are the build's own; if they ever failed to decode, say so.
        Err(e) => ApiError::internal("decoding the OpenAPI document", e).into_response(),
    }
}

/// The API's router, with `beside` (the console's routes) served on the same origin
/// behind the same outer layers (host check, limits, metrics, CORS).
pub fn router(state: AppState, options: ApiOptions, beside: Router<AppState>) -> Router {
    let routes::Declared {
        protected,
        public,
        table,
        ..
    } = declared::<Serving>();
    let table = Arc::new(table);
    let authenticator = Authenticator {
        policy: options.auth,
        devices: Arc::clone(&state.devices),
        failures: Arc::clone(&state.failures),
    };
    let requests = state.requests.clone();
    let refuse_when_full = axum::middleware::from_fn_with_state(
        Arc::clone(&state.disk),
        disk::refuse_changes_when_full,
    );
    // Route layers run last added first: the scope check, then the disk reserve, then
    // the idempotency records, then the approvals, so a caller without the route's
    // scope learns nothing about any key, a change refused for space leaves no key
    // claimed, and a retry of a request held for approval is answered from its key.
    let protected = protected
        .route_layer(axum::middleware::from_fn_with_state(
            (Arc::clone(&state.approvals), Arc::clone(&table)),
            approvals::layer,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            (state.engine.idempotency_keys(), Arc::clone(&table)),
            idempotency::layer,
        ))
        .route_layer(refuse_when_full.clone())
        // After routing, so the matched path names the route.
        .route_layer(axum::middleware::from_fn_with_state(
            table,
            scopes::require_scope,
        ))
        .fallback(|| async { ApiError::not_found("no such endpoint") });
    // Approved requests run again through the same routes and route layers, as the
    // device that made them, without the bearer check (they carry no token).
    state
        .approvals
        .set_routes(protected.clone().with_state(state.clone()));
    let protected = protected.layer(axum::middleware::from_fn_with_state(
        authenticator.clone(),
        auth::require_token,
    ));
    let mut app = public
        .merge(beside)
        .route_layer(refuse_when_full)
        .route("/api-docs/openapi.json", get(openapi_document))
        .merge(protected)
        .with_state(state)
        // `/health` says more to a caller with a credential.
        .layer(axum::Extension(authenticator));
    app = limits::apply(app, options.limits);
    // After every route and the other layers, so it sees matched paths and counts
    // their answers too (`metrics`).
    app = app.layer(axum::middleware::from_fn_with_state(
        requests,
        metrics::record,
    ));
    if !options.allowed_origins.is_empty() {
        app = app.layer(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(options.allowed_origins))
                .allow_methods([Method::GET, Method::POST, Method::DELETE])
                .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE])
                .expose_headers([header::HeaderName::from_static(
                    crate::api::v1::common::NEXT_CURSOR,
                )]),
        );
    }
    // A request for another host is refused before anything looks at it.
    app.layer(axum::middleware::from_fn_with_state(
        Arc::new(options.allowed_hosts),
        host::require_known_host,
    ))
    // Outermost, so that every answer carries it (the refusals above too): a browser
    // must take a body for what its Content-Type says, never sniff a JSON error or an
    // event's text into a page.
    .layer(axum::middleware::map_response(no_sniffing))
}

async fn no_sniffing(mut response: axum::response::Response) -> axum::response::Response {
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    response
}

/// `GET /ping`: no credential; the daemon is ready when this answers.
#[utoipa::path(
    get,
    path = "/ping",
    summary = "Ping",
    description = "Answers `pong` without a credential; the daemon is ready when it does.",
    security(()),
    responses((status = 200, description = "pong", body = String, content_type = "text/plain"))
)]
async fn ping() -> &'static str {
    "pong"
}

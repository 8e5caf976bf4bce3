//! The HTTP API: barkd's REST contract (`../shared/api/`), served by axum.
//!
//! Layers, outermost first: CORS (deny unless `--allowed-origins`), bearer-token auth
//! (everything except `/ping`, the public OpenAPI document and the notifications
//! websocket, which checks its own single-use ticket), then the routes. Unknown paths
//! answer 404 JSON. Fund-moving POSTs take an `Idempotency-Key` (`idempotency`).
//! Handlers are thin: parse, one engine call, map to the response type.

pub mod auth;
pub mod error;
pub mod idempotency;
pub mod openapi;
pub mod tickets;
pub mod v1;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, Method, header};
use axum::routing::get;
use tower_http::cors::{AllowOrigin, CorsLayer};
use utoipa::OpenApi as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::auth::AuthPolicy;
use crate::api::error::ApiError;
use crate::api::tickets::TicketBook;
use crate::api::v1::notifications::SocketCount;
use crate::engine::Engine;
use crate::events::EventHub;

/// What handlers share.
#[derive(Clone)]
pub struct AppState {
    pub engine: Arc<Engine>,
    pub events: Arc<EventHub>,
    pub tickets: Arc<TicketBook>,
    /// Open notification websockets (shutdown waits for their goodbyes).
    pub sockets: Arc<SocketCount>,
    pub expose_mnemonic: bool,
}

/// How the router is put together.
#[derive(Debug, Clone)]
pub struct ApiOptions {
    pub auth: AuthPolicy,
    /// Origins allowed by CORS; empty denies every cross-origin request.
    pub allowed_origins: Vec<HeaderValue>,
}

/// Berth's OpenAPI document, as served at `/api-docs/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut document = OpenApiRouter::<AppState>::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(ping))
        .nest("/api/v1", v1::router().merge(v1::ticket_router()))
        .into_openapi();
    openapi::finish(&mut document);
    document
}

pub fn router(state: AppState, options: ApiOptions) -> Router {
    let (v1_routes, _) = v1::router().split_for_parts();
    let (ticket_routes, _) = v1::ticket_router().split_for_parts();
    // Serialised once: the document is fixed for the life of the process. It is plain
    // data, so serialising it cannot fail in practice; if it ever did, say so.
    let document = match openapi().to_pretty_json() {
        Ok(json) => axum::body::Bytes::from(json),
        Err(e) => {
            tracing::error!(target: "berth::api", error = %e, "cannot serialise the OpenAPI document");
            axum::body::Bytes::from_static(br#"{"message":"the OpenAPI document is unavailable"}"#)
        }
    };
    let protected = Router::new()
        .nest("/api/v1", v1_routes)
        .fallback(|| async { ApiError::not_found("no such endpoint") })
        // Inner to auth: only an authenticated request claims an idempotency key.
        .layer(axum::middleware::from_fn_with_state(
            state.engine.store().clone(),
            idempotency::layer,
        ))
        .layer(axum::middleware::from_fn_with_state(
            options.auth,
            auth::require_token,
        ));
    let mut app = Router::new()
        .route("/ping", get(ping))
        .route(
            "/api-docs/openapi.json",
            get(move || async move { ([(header::CONTENT_TYPE, "application/json")], document) }),
        )
        .nest("/api/v1", ticket_routes)
        .merge(protected)
        .with_state(state);
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
    app
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

//! The HTTP API: barkd's REST contract (`../shared/api/`), served by axum.
//!
//! Layers, outermost first: CORS (deny unless `--allowed-origins`), bearer-token auth
//! (everything except `/ping`), then the routes. Unknown paths answer 404 JSON.
//! Handlers are thin: parse, one engine call, map to the response type.

pub mod auth;
pub mod error;
pub mod v1;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, Method, header};
use axum::routing::get;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::api::auth::AuthPolicy;
use crate::api::error::ApiError;
use crate::engine::Engine;

/// What handlers share.
#[derive(Clone)]
pub struct AppState {
    pub engine: Arc<Engine>,
    pub expose_mnemonic: bool,
}

/// How the router is put together.
#[derive(Debug, Clone)]
pub struct ApiOptions {
    pub auth: AuthPolicy,
    /// Origins allowed by CORS; empty denies every cross-origin request.
    pub allowed_origins: Vec<HeaderValue>,
}

pub fn router(state: AppState, options: ApiOptions) -> Router {
    let protected = Router::new()
        .nest("/api/v1", v1::router())
        .fallback(|| async { ApiError::NotFound("no such endpoint".into()) })
        .layer(axum::middleware::from_fn_with_state(
            options.auth,
            auth::require_token,
        ));
    let mut app = Router::new()
        .route("/ping", get(ping))
        .merge(protected)
        .with_state(state);
    if !options.allowed_origins.is_empty() {
        app = app.layer(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(options.allowed_origins))
                .allow_methods([Method::GET, Method::POST, Method::DELETE])
                .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE]),
        );
    }
    app
}

/// `GET /ping`: no credential; the daemon is ready when this answers.
async fn ping() -> &'static str {
    "pong"
}

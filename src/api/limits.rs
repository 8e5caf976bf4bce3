//! Request limits, applied to every route: a body size limit (413) and a request time
//! limit (503). The listener bounds connections and header reading; these bound what
//! one request may cost once it is in.
//!
//! The time limit is a backstop above every handler's own bound (long-polls end at
//! 30 s, calls to the Ark server at 60 s); it cuts off clients that trickle a body
//! and anything that hangs. Websockets and SSE streams are not affected: their
//! response starts at once.

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::error::ApiError;
pub use crate::net::listener::RequestLimits;

/// The routes that take a system update bundle (`system_update`): the API's and the
/// console's. Their handlers bound the body's size and pace themselves, not these
/// limits.
pub const API_BUNDLE_UPLOAD: &str = "/api/v1/system/update/bundle";
pub const CONSOLE_BUNDLE_UPLOAD: &str = "/console/system/bundle";

/// Wrap `app` in the limits.
pub fn apply(app: Router, limits: RequestLimits) -> Router {
    app.layer(axum::middleware::from_fn(
        move |request: Request, next: Next| limit(limits, request, next),
    ))
    // Bodies without a Content-Length are cut off while being read; the extractor's
    // rejection is a 413 (`ApiError::from(JsonRejection)`).
    .layer(DefaultBodyLimit::max(limits.max_body_bytes))
}

async fn limit(limits: RequestLimits, request: Request, next: Next) -> Response {
    // An update bundle is hundreds of MiB, minutes over Wi-Fi: its handler bounds its
    // size (`[update] max_bundle_mib`) and the pauses between its chunks itself. The
    // tests of `system_update` upload past a small body limit through both routes.
    let path = request.uri().path();
    if path == API_BUNDLE_UPLOAD || path == CONSOLE_BUNDLE_UPLOAD {
        return next.run(request).await;
    }
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.max_body_bytes as u64) {
        return ApiError::PayloadTooLarge.into_response();
    }
    match tokio::time::timeout(limits.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::Unavailable(format!(
            "the request did not complete within {} s",
            limits.request_timeout.as_secs()
        ))
        .into_response(),
    }
}

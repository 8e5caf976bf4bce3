//! A paired device's push subscription (a Berth extension, read scope, the calling
//! device's own): where its push distributor takes messages (UnifiedPush, or an ntfy
//! topic), what it wants to hear, and whether the text may carry amounts. The delivery
//! is `webhooks::push`; `docs/webhooks.md` says what a phone gets.

use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

use crate::access::{Caller, Credential};
use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::routes::{Documentation, Routes, route};
use crate::events::timestamp;
use crate::webhooks::WebhookView;

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .read(route!(set_my_push))
        .read(route!(get_my_push))
        .read(route!(delete_my_push))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PushRequest {
    /// The endpoint the phone's distributor gave it (UnifiedPush), or an ntfy topic URL:
    /// `https://` on the public internet, or a host `[egress] allow` in `berth.toml`
    /// names (a home ntfy server).
    pub url: String,
    /// What to hear: `payments`, `expiry`, `exits`, `backups`, `approvals`, `pairing`,
    /// `system`.
    pub categories: Vec<String>,
    /// Amounts and reasons in the text. Default `false`: generic sentences only, since
    /// a lock screen is not private.
    #[serde(default)]
    pub details: bool,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PushSubscription {
    pub device_id: String,
    pub url: String,
    pub categories: Vec<String>,
    pub details: bool,
    pub enabled: bool,
    /// Why not: berthd disabled it after it failed for about three days (set it again
    /// to resume).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    /// Failed attempts at the push it is sending now (0: none failing).
    pub failed_attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<chrono::DateTime<chrono::Utc>>,
}

impl PushSubscription {
    fn of(view: WebhookView) -> Option<PushSubscription> {
        let r = view.record;
        let target = r.push?;
        Some(PushSubscription {
            device_id: target.device_id,
            url: r.url,
            categories: target.categories,
            details: target.details,
            enabled: r.disabled.is_none(),
            disabled_reason: r.disabled.map(|d| d.reason),
            failed_attempts: r.failed_attempts,
            failing_since: r.failing_since_us.map(timestamp),
        })
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PushRemoved {
    pub message: String,
}

/// The calling device's id; the admin token has none.
fn my_device(caller: &Caller) -> Result<&str, ApiError> {
    match &caller.credential {
        Credential::Device(id) => Ok(id),
        _ => Err(ApiError::WrongState(
            "the admin token has no device: push is set by a paired device for itself".into(),
        )),
    }
}

/// `PUT /api/v1/devices/me/push`
#[utoipa::path(
    put,
    path = "/devices/me/push",
    tag = "devices",
    summary = "Set this device's push notifications",
    description = "Where this device's push messages go and what it hears (read scope; the \
        calling device's own). berthd POSTs each as ntfy's publish format: the text as the body, \
        `Title`, `Priority` and `Tags` headers; a UnifiedPush endpoint takes the text as the \
        push's payload. From the durable event log, retried like webhooks. Approvals are heard \
        only about this device unless it has the admin scope, payments only its own when its \
        rules say `history: own`. Setting it again changes it and resumes it if it was disabled.",
    request_body = PushRequest,
    responses(
        (status = 200, description = "The subscription", body = PushSubscription),
        (status = 400, description = "A URL the egress policy refuses, or an unknown category", body = ErrorResponse),
        (status = 422, description = "Called with the admin token (no device)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn set_my_push(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Json<PushRequest>, JsonRejection>,
) -> Result<Json<PushSubscription>, ApiError> {
    let device = my_device(&caller)?;
    let Json(body) = body?;
    let view = state
        .webhooks
        .set_push(device, body.url, body.categories, body.details)
        .await?;
    PushSubscription::of(view)
        .map(Json)
        .ok_or(ApiError::Internal)
}

/// `GET /api/v1/devices/me/push`
#[utoipa::path(
    get,
    path = "/devices/me/push",
    tag = "devices",
    summary = "This device's push notifications",
    responses(
        (status = 200, description = "The subscription", body = PushSubscription),
        (status = 404, description = "None set", body = NotFoundResponse),
        (status = 422, description = "Called with the admin token (no device)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn get_my_push(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<PushSubscription>, ApiError> {
    let device = my_device(&caller)?;
    state
        .webhooks
        .push_of(device)
        .await?
        .and_then(PushSubscription::of)
        .map(Json)
        .ok_or_else(|| ApiError::not_found("this device has no push notifications set"))
}

/// `DELETE /api/v1/devices/me/push`
#[utoipa::path(
    delete,
    path = "/devices/me/push",
    tag = "devices",
    summary = "Stop this device's push notifications",
    responses(
        (status = 200, description = "Stopped", body = PushRemoved),
        (status = 404, description = "None set", body = NotFoundResponse),
        (status = 422, description = "Called with the admin token (no device)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn delete_my_push(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<PushRemoved>, ApiError> {
    let device = my_device(&caller)?;
    if !state.webhooks.remove_push(device).await? {
        return Err(ApiError::not_found(
            "this device has no push notifications set",
        ));
    }
    Ok(Json(PushRemoved {
        message: "Push notifications stopped".into(),
    }))
}

//! Webhooks (a Berth extension, admin scope): register a URL for the event types it
//! wants (its signing secret shown this once), list, change, pause, remove, rotate the
//! secret, see each delivery attempt, deliver one again, send a test event. The
//! delivery itself is `webhooks`; `docs/webhooks.md` says what a receiver gets.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::routes::{Documentation, Routes, route};
use crate::events::timestamp;
use crate::webhooks::{NewWebhook, WebhookChange, WebhookError, WebhookView};

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .admin(route!(create_webhook))
        .admin(route!(list_webhooks))
        .admin(route!(get_webhook))
        .admin(route!(update_webhook))
        .admin(route!(delete_webhook))
        .admin(route!(rotate_webhook_secret))
        .admin(route!(list_webhook_deliveries))
        .admin(route!(redeliver_webhook_delivery))
        .admin(route!(test_webhook))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookRequest {
    /// Where to POST the events: `http://` or `https://`, any host (the LAN included:
    /// registering it is what allows it).
    pub url: String,
    /// The event types to receive (the notification types, e.g. `movement-created`,
    /// `vtxo-expiring`, `approval-requested`), or `["*"]` for all.
    pub events: Vec<String>,
    /// A note for the owner (at most 256 bytes).
    pub description: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookUpdate {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    /// An empty string removes it.
    pub description: Option<String>,
    /// `false` pauses deliveries; `true` resumes them, also for a webhook berthd
    /// disabled after three days of failures (the event it stopped at is tried again at
    /// once, if the log still holds it).
    pub enabled: Option<bool>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookInfo {
    pub id: String,
    pub url: String,
    pub events: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub enabled: bool,
    /// Why it is not enabled: paused by the owner, or disabled by berthd after
    /// failing for about three days.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// Failed attempts at the event it is delivering now (0: none failing).
    pub failed_attempts: u32,
    /// Since when that event has been failing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<DateTime<Utc>>,
    /// When the next attempt is made (while failing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// A rotated secret still signs beside the new one until then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
}

impl From<WebhookView> for WebhookInfo {
    fn from(v: WebhookView) -> Self {
        let r = v.record;
        let failing = r.failed_attempts > 0;
        WebhookInfo {
            id: v.id,
            url: r.url,
            events: r.events,
            description: r.description,
            enabled: r.disabled.is_none(),
            disabled_reason: r.disabled.as_ref().map(|d| d.reason.clone()),
            disabled_at: r.disabled.as_ref().map(|d| timestamp(d.at_us)),
            created_at: timestamp(r.created_at_us),
            failed_attempts: r.failed_attempts,
            failing_since: r.failing_since_us.map(timestamp),
            next_attempt_at: (failing && r.disabled.is_none() && r.next_attempt_us > 0)
                .then(|| timestamp(r.next_attempt_us)),
            previous_secret_expires_at: r
                .previous_secret
                .as_ref()
                .map(|p| timestamp(p.until_us))
                .filter(|at| *at > Utc::now()),
        }
    }
}

// No `Debug`: it carries the secret.
#[derive(Serialize, utoipa::ToSchema)]
pub struct WebhookCreated {
    /// The signing secret (`whsec_…`, Standard Webhooks). Shown only this once; give it
    /// to the receiver's verifier.
    pub secret: String,
    #[serde(flatten)]
    pub webhook: WebhookInfo,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookDelivery {
    pub id: String,
    pub webhook_id: String,
    /// The event delivered: its id in the event log (the `webhook-id` header is
    /// `msg_<webhook id>_<event id>`) and its type.
    pub event_id: u64,
    pub event_type: String,
    /// 1 for the first attempt at the event, counting on through retries.
    pub attempt: u32,
    /// `delivered` or `failed`.
    pub status: String,
    /// The receiver's HTTP status, when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_code: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub latency_ms: u64,
    pub attempted_at: DateTime<Utc>,
    /// Asked for again by the owner.
    pub redelivery: bool,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesQuery {
    /// Only deliveries older than this one (its `id`), for the next page.
    pub before: Option<u64>,
    /// At most this many, newest first (1 to 500; default 50).
    pub limit: Option<usize>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookQueued {
    pub message: String,
    /// The event that is delivered.
    pub event_id: u64,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookDeleted {
    pub message: String,
}

impl From<WebhookError> for ApiError {
    fn from(e: WebhookError) -> Self {
        match e {
            WebhookError::Invalid(m) => ApiError::BadRequest(m),
            WebhookError::Full(m) | WebhookError::Gone(m) => ApiError::WrongState(m),
            WebhookError::NoSuchWebhook(id) => ApiError::NotFound {
                message: format!("no webhook {id}"),
                resources: vec![id],
            },
            WebhookError::NoSuchDelivery(id) => ApiError::NotFound {
                message: format!("no delivery {id}"),
                resources: vec![id.to_string()],
            },
            WebhookError::Store(e) => ApiError::store("keeping webhooks", e),
        }
    }
}

/// `POST /api/v1/webhooks`
#[utoipa::path(
    post,
    path = "/webhooks",
    tag = "webhooks",
    summary = "Register a webhook",
    description = "Registers a URL that receives the wallet's events of the types named \
        (admin scope), from now on: each a POST of `{\"type\", \"timestamp\", \"data\"}` signed \
        by the Standard Webhooks specification (`webhook-id`, `webhook-timestamp`, \
        `webhook-signature`). The answer's `secret` is shown only this once. Registering a \
        URL allows its host, on the LAN or over plain http included; no redirect is followed.",
    request_body = WebhookRequest,
    responses(
        (status = 200, description = "Registered: the webhook and its secret (shown once)", body = WebhookCreated),
        (status = 400, description = "A bad URL, an unknown event type, a description too long", body = ErrorResponse),
        (status = 422, description = "Too many webhooks", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn create_webhook(
    State(state): State<AppState>,
    body: Result<Json<WebhookRequest>, JsonRejection>,
) -> Result<Json<WebhookCreated>, ApiError> {
    let Json(body) = body?;
    let (view, secret) = state
        .webhooks
        .create(NewWebhook {
            url: body.url,
            events: body.events,
            description: body.description,
        })
        .await?;
    Ok(Json(WebhookCreated {
        secret,
        webhook: view.into(),
    }))
}

/// `GET /api/v1/webhooks`
#[utoipa::path(
    get,
    path = "/webhooks",
    tag = "webhooks",
    summary = "List webhooks",
    description = "Every webhook, oldest first (admin scope), with whether it is failing. \
        Secrets are never shown again.",
    responses(
        (status = 200, description = "The webhooks", body = Vec<WebhookInfo>),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn list_webhooks(
    State(state): State<AppState>,
) -> Result<Json<Vec<WebhookInfo>>, ApiError> {
    let list = state.webhooks.list().await?;
    Ok(Json(list.into_iter().map(WebhookInfo::from).collect()))
}

/// `GET /api/v1/webhooks/{id}`
#[utoipa::path(
    get,
    path = "/webhooks/{id}",
    tag = "webhooks",
    summary = "Show a webhook",
    params(("id" = String, Path, description = "The webhook's id")),
    responses(
        (status = 200, description = "The webhook", body = WebhookInfo),
        (status = 404, description = "No such webhook", body = NotFoundResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn get_webhook(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<WebhookInfo>, ApiError> {
    let Path(id) = id?;
    Ok(Json(state.webhooks.get(&id).await?.into()))
}

/// `PATCH /api/v1/webhooks/{id}`
#[utoipa::path(
    patch,
    path = "/webhooks/{id}",
    tag = "webhooks",
    summary = "Change, pause or resume a webhook",
    description = "Changes what is given (admin scope). `enabled: false` pauses deliveries \
        (events wait in the log, within its retention); `enabled: true` resumes them, also \
        for a webhook berthd disabled.",
    params(("id" = String, Path, description = "The webhook's id")),
    request_body = WebhookUpdate,
    responses(
        (status = 200, description = "The webhook after the change", body = WebhookInfo),
        (status = 400, description = "A bad URL or event type", body = ErrorResponse),
        (status = 404, description = "No such webhook", body = NotFoundResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn update_webhook(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<WebhookUpdate>, JsonRejection>,
) -> Result<Json<WebhookInfo>, ApiError> {
    let Path(id) = id?;
    let Json(body) = body?;
    let view = state
        .webhooks
        .update(
            &id,
            WebhookChange {
                url: body.url,
                events: body.events,
                description: body.description,
                enabled: body.enabled,
            },
        )
        .await?;
    Ok(Json(view.into()))
}

/// `DELETE /api/v1/webhooks/{id}`
#[utoipa::path(
    delete,
    path = "/webhooks/{id}",
    tag = "webhooks",
    summary = "Remove a webhook",
    description = "Removes the webhook and its deliveries (admin scope); a delivery under way \
        is cut off.",
    params(("id" = String, Path, description = "The webhook's id")),
    responses(
        (status = 200, description = "Removed", body = WebhookDeleted),
        (status = 404, description = "No such webhook", body = NotFoundResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn delete_webhook(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<WebhookDeleted>, ApiError> {
    let Path(id) = id?;
    state.webhooks.delete(&id).await?;
    Ok(Json(WebhookDeleted {
        message: "Webhook removed".into(),
    }))
}

/// `POST /api/v1/webhooks/{id}/rotate-secret`
#[utoipa::path(
    post,
    path = "/webhooks/{id}/rotate-secret",
    tag = "webhooks",
    summary = "Rotate a webhook's secret",
    description = "A new secret, shown only this once (admin scope). For 24 hours each \
        delivery carries two signatures, by the new secret and the old, so the receiver can \
        switch to the new one without rejecting an event.",
    params(("id" = String, Path, description = "The webhook's id")),
    responses(
        (status = 200, description = "The new secret and the webhook", body = WebhookCreated),
        (status = 404, description = "No such webhook", body = NotFoundResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn rotate_webhook_secret(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<WebhookCreated>, ApiError> {
    let Path(id) = id?;
    let (view, secret) = state.webhooks.rotate_secret(&id).await?;
    Ok(Json(WebhookCreated {
        secret,
        webhook: view.into(),
    }))
}

/// `GET /api/v1/webhooks/{id}/deliveries`
#[utoipa::path(
    get,
    path = "/webhooks/{id}/deliveries",
    tag = "webhooks",
    summary = "List a webhook's delivery attempts",
    description = "One row per attempt, newest first (admin scope): the event, the attempt's \
        number, how it went, the receiver's status and the time it took. The newest 500 are \
        kept per webhook.",
    params(("id" = String, Path, description = "The webhook's id"), DeliveriesQuery),
    responses(
        (status = 200, description = "The attempts", body = Vec<WebhookDelivery>),
        (status = 404, description = "No such webhook", body = NotFoundResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn list_webhook_deliveries(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<DeliveriesQuery>, QueryRejection>,
) -> Result<Json<Vec<WebhookDelivery>>, ApiError> {
    let Path(id) = id?;
    let Query(q) = query?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::BadRequest("limit is 1 to 500".into()));
    }
    let rows = state.webhooks.deliveries(&id, q.before, limit).await?;
    Ok(Json(
        rows.into_iter()
            .map(|(delivery_id, d)| WebhookDelivery {
                id: delivery_id.to_string(),
                webhook_id: id.clone(),
                event_id: d.event_id,
                event_type: d.event_type,
                attempt: d.attempt,
                status: d.status,
                response_code: d.response_code,
                error: d.error,
                latency_ms: d.latency_ms,
                attempted_at: timestamp(d.at_us),
                redelivery: d.redelivery,
            })
            .collect(),
    ))
}

/// `POST /api/v1/webhooks/{id}/deliveries/{delivery_id}/redeliver`
#[utoipa::path(
    post,
    path = "/webhooks/{id}/deliveries/{delivery_id}/redeliver",
    tag = "webhooks",
    summary = "Deliver an event again",
    description = "Sends the event of this delivery again, once, with the same `webhook-id` \
        (admin scope), ahead of what the webhook has still to receive.",
    params(
        ("id" = String, Path, description = "The webhook's id"),
        ("delivery_id" = u64, Path, description = "The delivery's id"),
    ),
    responses(
        (status = 202, description = "Queued", body = WebhookQueued),
        (status = 404, description = "No such webhook or delivery", body = NotFoundResponse),
        (status = 422, description = "The event left the log, or too many are queued", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn redeliver_webhook_delivery(
    State(state): State<AppState>,
    path: Result<Path<(String, u64)>, PathRejection>,
) -> Result<(StatusCode, Json<WebhookQueued>), ApiError> {
    let Path((id, delivery_id)) = path?;
    let event_id = state.webhooks.redeliver(&id, delivery_id).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(WebhookQueued {
            message: "Queued for delivery".into(),
            event_id,
        }),
    ))
}

/// `POST /api/v1/webhooks/{id}/test`
#[utoipa::path(
    post,
    path = "/webhooks/{id}/test",
    tag = "webhooks",
    summary = "Send a test event",
    description = "Appends an event of type `test` for this webhook alone (admin scope), \
        delivered like any other: signed, retried, in order, listed among the deliveries.",
    params(("id" = String, Path, description = "The webhook's id")),
    responses(
        (status = 202, description = "Queued", body = WebhookQueued),
        (status = 404, description = "No such webhook", body = NotFoundResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn test_webhook(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<(StatusCode, Json<WebhookQueued>), ApiError> {
    let Path(id) = id?;
    let event_id = state.webhooks.test(&id).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(WebhookQueued {
            message: "A test event is on its way".into(),
            event_id,
        }),
    ))
}

//! The webhooks page and each device's push settings (`webhooks`), as the API has them:
//! list the webhooks with how their delivery stands, add one (its secret shown this
//! once), send a test event, pause, resume, remove; one webhook's deliveries with
//! "deliver again", and a new secret. For a paired device, where its push messages go
//! and what it hears, set by the owner on its behalf (a phone with the ntfy app and no
//! wallet app of its own).

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::api::AppState;
use crate::api::error::ApiError;
use crate::console::{Frame, page};
use crate::events::timestamp;
use crate::webhooks::push::Category;
use crate::webhooks::{NewWebhook, WebhookChange, WebhookError, WebhookView};

/// How the page says a time.
fn when(at_us: u64) -> String {
    timestamp(at_us).format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// A webhook in a few words: enabled and fine, failing since, paused, disabled.
fn standing(view: &WebhookView) -> (String, &'static str) {
    let r = &view.record;
    match (&r.disabled, r.failing_since_us) {
        (Some(d), _) if d.by_failures => (format!("Disabled: {}", d.reason), "bad"),
        (Some(_), _) => ("Paused".into(), "warn"),
        (None, Some(since)) => (
            format!(
                "Failing since {} ({} attempts)",
                when(since),
                r.failed_attempts
            ),
            "warn",
        ),
        (None, None) => ("Delivering".into(), "good"),
    }
}

struct WebhookRow {
    id: String,
    url: String,
    events: String,
    description: String,
    status: String,
    /// `good`, `warn` or `bad`: the status badge's colour (the text says it too).
    tone: &'static str,
    enabled: bool,
}

impl From<WebhookView> for WebhookRow {
    fn from(view: WebhookView) -> Self {
        let (status, tone) = standing(&view);
        WebhookRow {
            enabled: view.record.disabled.is_none(),
            events: view.record.events.join(", "),
            description: view.record.description.clone().unwrap_or_default(),
            url: view.record.url,
            id: view.id,
            status,
            tone,
        }
    }
}

/// A secret just made (a new webhook or a rotation): shown once.
struct NewSecret {
    url: String,
    secret: String,
}

#[derive(Template)]
#[template(path = "webhooks.html")]
struct WebhooksPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    webhooks: Vec<WebhookRow>,
    types: Vec<&'static str>,
    created: Option<NewSecret>,
    error: Option<String>,
}

async fn webhooks_page(
    state: &AppState,
    created: Option<NewSecret>,
    error: Option<String>,
) -> Response {
    let list = match state.webhooks.list().await {
        Ok(list) => list,
        Err(e) => return failed(e),
    };
    let frame = Frame::new(state);
    page(
        if error.is_some() {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        },
        &WebhooksPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            webhooks: list.into_iter().map(WebhookRow::from).collect(),
            types: state.webhooks.event_types(),
            created,
            error,
        },
    )
}

/// An error the page cannot show in place: as the API would answer it.
fn failed(e: WebhookError) -> Response {
    let e = ApiError::from(e);
    (e.status(), e.to_string()).into_response()
}

fn back_to(path: String) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, path)]).into_response()
}

/// `GET /console/webhooks`
pub(super) async fn webhooks(State(state): State<AppState>) -> Response {
    webhooks_page(&state, None, None).await
}

/// The add form: the URL, a description, and a checkbox per event type (or all). A
/// form sends a checked box as `name=on`, so the types arrive as the fields' names.
#[derive(Deserialize)]
pub(super) struct AddForm {
    url: String,
    #[serde(default)]
    description: String,
    #[serde(flatten)]
    checked: std::collections::HashMap<String, String>,
}

/// `POST /console/webhooks`: add one; the page shows its secret once.
pub(super) async fn add(
    State(state): State<AppState>,
    form: Result<Form<AddForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return (StatusCode::BAD_REQUEST, "a malformed form").into_response();
    };
    let events: Vec<String> = if form.checked.contains_key("all") {
        vec!["*".into()]
    } else {
        state
            .webhooks
            .event_types()
            .into_iter()
            .filter(|t| form.checked.contains_key(&format!("type-{t}")))
            .map(str::to_string)
            .collect()
    };
    let new = NewWebhook {
        url: form.url.trim().to_string(),
        events,
        description: Some(form.description.trim().to_string()).filter(|d| !d.is_empty()),
    };
    match state.webhooks.create(new).await {
        Ok((view, secret)) => {
            let created = NewSecret {
                url: view.record.url,
                secret,
            };
            webhooks_page(&state, Some(created), None).await
        }
        Err(WebhookError::Invalid(why) | WebhookError::Full(why)) => {
            webhooks_page(&state, None, Some(why)).await
        }
        Err(e) => failed(e),
    }
}

/// `POST /console/webhooks/{id}/test`
pub(super) async fn test(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.webhooks.test(&id).await {
        Ok(_) => back_to(format!("/console/webhooks/{id}")),
        Err(e) => failed(e),
    }
}

async fn set_enabled(state: &AppState, id: &str, enabled: bool) -> Response {
    let change = WebhookChange {
        enabled: Some(enabled),
        ..WebhookChange::default()
    };
    match state.webhooks.update(id, change).await {
        Ok(_) => back_to("/console/webhooks".into()),
        Err(e) => failed(e),
    }
}

/// `POST /console/webhooks/{id}/pause`
pub(super) async fn pause(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    set_enabled(&state, &id, false).await
}

/// `POST /console/webhooks/{id}/resume`
pub(super) async fn resume(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    set_enabled(&state, &id, true).await
}

/// `POST /console/webhooks/{id}/remove`
pub(super) async fn remove(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.webhooks.delete(&id).await {
        Ok(()) => back_to("/console/webhooks".into()),
        Err(e) => failed(e),
    }
}

struct DeliveryRow {
    id: u64,
    at: String,
    event: String,
    attempt: u32,
    outcome: String,
    tone: &'static str,
    latency: String,
}

#[derive(Template)]
#[template(path = "webhook.html")]
struct WebhookPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    webhook: WebhookRow,
    deliveries: Vec<DeliveryRow>,
    rotated: Option<NewSecret>,
    notice: Option<String>,
}

async fn webhook_page(
    state: &AppState,
    id: &str,
    rotated: Option<NewSecret>,
    notice: Option<String>,
) -> Response {
    let view = match state.webhooks.get(id).await {
        Ok(view) => view,
        Err(e) => return failed(e),
    };
    let rows = match state.webhooks.deliveries(id, None, 50).await {
        Ok(rows) => rows,
        Err(e) => return failed(e),
    };
    let deliveries = rows
        .into_iter()
        .map(|(delivery_id, d)| {
            let delivered = d.status == "delivered";
            let outcome = match (&d.response_code, &d.error) {
                (Some(code), _) if delivered => format!("Delivered (HTTP {code})"),
                (_, Some(error)) => format!("Failed: {error}"),
                _ => d.status.clone(),
            };
            DeliveryRow {
                id: delivery_id,
                at: when(d.at_us),
                event: format!(
                    "{} #{}{}",
                    d.event_type,
                    d.event_id,
                    if d.redelivery { " (again)" } else { "" }
                ),
                attempt: d.attempt,
                outcome,
                tone: if delivered { "good" } else { "bad" },
                latency: format!("{} ms", d.latency_ms),
            }
        })
        .collect();
    let frame = Frame::new(state);
    page(
        StatusCode::OK,
        &WebhookPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            webhook: view.into(),
            deliveries,
            rotated,
            notice,
        },
    )
}

/// `GET /console/webhooks/{id}`: its deliveries, newest first.
pub(super) async fn webhook(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    webhook_page(&state, &id, None, None).await
}

/// `POST /console/webhooks/{id}/rotate`: a new secret, shown once.
pub(super) async fn rotate(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.webhooks.rotate_secret(&id).await {
        Ok((view, secret)) => {
            let rotated = NewSecret {
                url: view.record.url,
                secret,
            };
            webhook_page(&state, &id, Some(rotated), None).await
        }
        Err(e) => failed(e),
    }
}

/// `POST /console/webhooks/{id}/deliveries/{delivery}/redeliver`
pub(super) async fn redeliver(
    State(state): State<AppState>,
    Path((id, delivery)): Path<(String, u64)>,
) -> Response {
    match state.webhooks.redeliver(&id, delivery).await {
        Ok(event) => {
            let notice = format!("Event #{event} is on its way again.");
            webhook_page(&state, &id, None, Some(notice)).await
        }
        Err(WebhookError::Gone(why) | WebhookError::Full(why)) => {
            webhook_page(&state, &id, None, Some(why)).await
        }
        Err(e) => failed(e),
    }
}

// ---- a device's push settings -------------------------------------------------------

/// A device's push in a few words, for the devices page.
pub(super) async fn push_summary(state: &AppState, device_id: &str) -> String {
    match state.webhooks.push_of(device_id).await {
        Ok(Some(view)) => {
            let Some(target) = &view.record.push else {
                return "off".into();
            };
            let host = reqwest::Url::parse(&view.record.url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_string))
                .unwrap_or_default();
            let (status, _) = standing(&view);
            let status = if status == "Delivering" {
                String::new()
            } else {
                format!(" ({status})")
            };
            format!("{} to {host}{status}", target.categories.join(", "))
        }
        Ok(None) => "off".into(),
        Err(e) => {
            tracing::error!(target: "berth::console", error = %e, "cannot read a device's push");
            "unknown".into()
        }
    }
}

struct CategoryBox {
    name: &'static str,
    checked: bool,
}

#[derive(Template)]
#[template(path = "push.html")]
struct PushPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    device_id: String,
    device_name: String,
    url: String,
    categories: Vec<CategoryBox>,
    details: bool,
    /// It has a subscription (so it can be stopped).
    set: bool,
    status: String,
    error: Option<String>,
}

async fn push_page(state: &AppState, device_id: &str, error: Option<String>) -> Response {
    let device = match state.devices.list().await {
        Ok(devices) => devices.into_iter().find(|d| d.id == device_id),
        Err(e) => {
            tracing::error!(target: "berth::console", error = %e, "cannot list devices");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let Some(device) = device else {
        return (StatusCode::NOT_FOUND, format!("no device {device_id}")).into_response();
    };
    let current = match state.webhooks.push_of(device_id).await {
        Ok(current) => current,
        Err(e) => return failed(e),
    };
    let chosen: Vec<String> = current
        .as_ref()
        .and_then(|v| v.record.push.as_ref())
        .map(|t| t.categories.clone())
        .unwrap_or_else(|| vec!["payments".into(), "approvals".into()]);
    let frame = Frame::new(state);
    page(
        if error.is_some() {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        },
        &PushPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            device_id: device.id,
            device_name: device.name,
            url: current
                .as_ref()
                .map(|v| v.record.url.clone())
                .unwrap_or_default(),
            categories: Category::ALL
                .iter()
                .map(|c| CategoryBox {
                    name: c.name(),
                    checked: chosen.iter().any(|n| n == c.name()),
                })
                .collect(),
            details: current
                .as_ref()
                .and_then(|v| v.record.push.as_ref())
                .is_some_and(|t| t.details),
            set: current.is_some(),
            status: current
                .as_ref()
                .map(|v| standing(v).0)
                .unwrap_or_else(|| "Off".into()),
            error,
        },
    )
}

/// `GET /console/devices/{id}/push`
pub(super) async fn push(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    push_page(&state, &id, None).await
}

#[derive(Deserialize)]
pub(super) struct PushForm {
    url: String,
    details: Option<String>,
    #[serde(flatten)]
    checked: std::collections::HashMap<String, String>,
}

/// `POST /console/devices/{id}/push`: set it (the same checks as the device's own
/// `PUT /api/v1/devices/me/push`).
pub(super) async fn set_push(
    State(state): State<AppState>,
    Path(id): Path<String>,
    form: Result<Form<PushForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return (StatusCode::BAD_REQUEST, "a malformed form").into_response();
    };
    let categories = Category::ALL
        .iter()
        .filter(|c| form.checked.contains_key(&format!("category-{}", c.name())))
        .map(|c| c.name().to_string())
        .collect();
    match state
        .webhooks
        .set_push(
            &id,
            form.url.trim().to_string(),
            categories,
            form.details.is_some(),
        )
        .await
    {
        Ok(_) => back_to("/console/devices".into()),
        Err(WebhookError::Invalid(why)) => push_page(&state, &id, Some(why)).await,
        Err(e) => failed(e),
    }
}

/// `POST /console/devices/{id}/push/stop`
pub(super) async fn stop_push(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.webhooks.remove_push(&id).await {
        Ok(_) => back_to("/console/devices".into()),
        Err(e) => failed(e),
    }
}

//! Webhooks: the owner registers URLs, and each receives the wallet's events it chose,
//! signed by the Standard Webhooks specification (`sign`), from the durable event log.
//!
//! Each endpoint has its own cursor in the log, kept in the store with the endpoint
//! (`store::webhooks`), and its own task (`deliver`): at least once, in the log's order,
//! the same `webhook-id` on every attempt at an event; retries back off over about
//! three days, after which the endpoint is disabled and a `webhook-disabled` event says
//! so. One endpoint's task never waits for another's, and each has at most one request
//! under way, so a dead endpoint delays nobody else and the number of requests at once
//! is bounded by the number of endpoints ([`MAX_WEBHOOKS`]).
//!
//! Requests go out through the egress policy's way to owner-registered destinations
//! ([`Egress::registered`]): the owner's registration of a URL is what allows its host,
//! loopback, the LAN and plain `http` included; no redirect is followed.
//!
//! A paired phone's push subscription (`push`) is an endpoint of the same kind, with
//! the same cursor, retries and records; what differs is what it hears (the categories
//! the device chose, what it may see), what it gets (a short text, ntfy's format), and
//! where it may go: the phone chose the URL, so it goes through the egress policy like
//! any destination a client names (public `https`, or what `[egress] allow` names).
//!
//! The JSON of an event's `data` is what the barkd transports send for it; the API
//! renders it and hands the renderer in ([`Render`]), so this module does not depend on
//! the API.

mod deliver;
pub mod push;
pub mod sign;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Url;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::events::{Alert, Event, EventHub, EventKind};
use crate::net::egress::{Egress, Limits, Policy};
use crate::store::now_us;
use crate::store::webhooks::{
    Added, Disabled, PreviousSecret, WebhookDeliveryRecord, WebhookRecord,
};
use crate::store::{Store, StoreError};

/// The most endpoints: each has a task and at most one request under way.
pub const MAX_WEBHOOKS: u64 = 16;
/// Push requests under way at once, over every device (one per device at most).
const MAX_PUSH_AT_ONCE: usize = 16;
/// The most event types one endpoint names.
const MAX_EVENT_TYPES: usize = 32;
/// The longest URL and description accepted.
const MAX_URL: usize = 2048;
const MAX_DESCRIPTION: usize = 256;
/// How long a rotated secret still signs beside the new one.
pub const ROTATION_OVERLAP: Duration = Duration::from_secs(24 * 3600);
/// Redeliveries the owner may queue per endpoint.
const MAX_REDELIVERIES: usize = 100;

/// For tests of the retry schedule without waiting days: a factor every retry delay is
/// multiplied by (`0.001`: three days become four minutes). Ships in the release binary
/// like the spending rules' clock offset (the binary tested is the binary run), off
/// unless set, and berthd warns at start when it is.
pub const RETRY_SCALE_ENV: &str = "BERTH_WEBHOOK_RETRY_SCALE";

/// The bounds on one delivery: connect within 5 s, the whole request within 15 s (the
/// Standard Webhooks guidance), at most 16 KiB of the answer read; one request at a
/// time per endpoint.
fn limits() -> Limits {
    Limits {
        connect: Duration::from_secs(5),
        total: Duration::from_secs(15),
        body: 16 * 1024,
        overall: MAX_WEBHOOKS as usize,
        per_caller: 1,
    }
}

/// An event's API type name and its JSON as the barkd transports send it.
pub type Render = fn(&Event) -> (&'static str, &serde_json::value::RawValue);

/// Why a webhook request was refused.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Full(String),
    #[error("no webhook {0}")]
    NoSuchWebhook(String),
    #[error("no delivery {0}")]
    NoSuchDelivery(u64),
    #[error("{0}")]
    Gone(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A new endpoint as the owner asks for it.
#[derive(Debug, Clone)]
pub struct NewWebhook {
    pub url: String,
    pub events: Vec<String>,
    pub description: Option<String>,
}

/// A change to an endpoint; absent fields stay.
#[derive(Debug, Clone, Default)]
pub struct WebhookChange {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub description: Option<String>,
    /// `false` pauses it; `true` resumes it (also one berthd disabled), retrying the
    /// event it stopped at at once.
    pub enabled: Option<bool>,
}

/// An endpoint and its record (the API's views leave the secret out; the record's
/// `Debug` withholds it and the URL).
#[derive(Debug, Clone)]
pub struct WebhookView {
    pub id: String,
    pub record: WebhookRecord,
}

/// Where one endpoint's delivery stands.
#[derive(Debug, Clone)]
pub struct WebhookState {
    pub id: String,
    pub enabled: bool,
    /// berthd disabled it: it failed for about three days.
    pub disabled_by_failures: bool,
    /// Failed attempts at the event it is delivering now.
    pub failed_attempts: u32,
    pub failing_since_us: Option<u64>,
}

/// The service: the endpoints' delivery tasks and what the API asks of them.
pub struct Webhooks {
    store: Store,
    events: Arc<EventHub>,
    egress: Egress,
    /// The way out for push subscriptions: the policy for destinations clients name.
    push_egress: Egress,
    render: Render,
    /// Every retry delay is multiplied by this (1 unless [`RETRY_SCALE_ENV`] is set).
    retry_scale: f64,
    /// One task per endpoint, woken when the owner changes it.
    workers: Mutex<HashMap<String, Worker>>,
}

struct Worker {
    wake: Arc<Notify>,
    task: JoinHandle<()>,
}

/// Every type name an endpoint may ask for: the notification types, and `*` for all.
fn check_events(events: &[String], known: &[&str]) -> Result<(), WebhookError> {
    if events.is_empty() || events.len() > MAX_EVENT_TYPES {
        return Err(WebhookError::Invalid(format!(
            "events names 1 to {MAX_EVENT_TYPES} event types (or \"*\" for all)"
        )));
    }
    for name in events {
        if name != "*" && !known.contains(&name.as_str()) {
            return Err(WebhookError::Invalid(format!(
                "{name:?} is not an event type; the types are {}",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

fn check_url(url: &str) -> Result<(), WebhookError> {
    if url.len() > MAX_URL {
        return Err(WebhookError::Invalid(format!(
            "the URL is longer than {MAX_URL} bytes"
        )));
    }
    let parsed =
        Url::parse(url).map_err(|e| WebhookError::Invalid(format!("the URL is not valid: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
        return Err(WebhookError::Invalid(
            "the URL must be http:// or https:// with a host".into(),
        ));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(WebhookError::Invalid(
            "the URL must not carry a user name or password; the signature authenticates \
             berthd to the receiver"
                .into(),
        ));
    }
    Ok(())
}

fn check_description(description: &Option<String>) -> Result<(), WebhookError> {
    if description
        .as_ref()
        .is_some_and(|d| d.len() > MAX_DESCRIPTION)
    {
        return Err(WebhookError::Invalid(format!(
            "the description is longer than {MAX_DESCRIPTION} bytes"
        )));
    }
    Ok(())
}

/// A push subscription met where only webhooks are meant: to the owner's webhook
/// routes it does not exist.
struct NotWebhook;

fn not_push(r: &WebhookRecord) -> Result<(), NotWebhook> {
    if r.push.is_some() {
        Err(NotWebhook)
    } else {
        Ok(())
    }
}

fn new_id() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The retry scale from the environment (1 when unset or not a positive number).
fn retry_scale_from_env() -> f64 {
    match std::env::var(RETRY_SCALE_ENV)
        .ok()
        .map(|v| v.parse::<f64>())
    {
        Some(Ok(scale)) if scale.is_finite() && scale > 0.0 => {
            tracing::warn!(
                target: "berth::webhooks",
                scale,
                "{RETRY_SCALE_ENV} is set: webhook retries are scaled (for tests only)"
            );
            scale
        }
        _ => 1.0,
    }
}

impl Webhooks {
    pub fn new(
        store: Store,
        events: Arc<EventHub>,
        policy: Policy,
        render: Render,
    ) -> Result<Arc<Webhooks>, String> {
        Ok(Arc::new(Webhooks {
            store,
            events,
            egress: Egress::registered(limits())?,
            push_egress: Egress::new(
                policy,
                Limits {
                    overall: MAX_PUSH_AT_ONCE,
                    ..limits()
                },
            )?,
            render,
            retry_scale: retry_scale_from_env(),
            workers: Mutex::new(HashMap::new()),
        }))
    }

    /// Start a task for every registered endpoint.
    pub async fn start(self: &Arc<Self>) -> Result<(), StoreError> {
        for (id, _) in self.store.webhooks().await? {
            self.spawn(id);
        }
        Ok(())
    }

    /// Stop every task; a delivery under way is cut off and made again at the next
    /// start, under the same id.
    pub fn stop(&self) {
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        for (_, worker) in workers.drain() {
            worker.task.abort();
        }
    }

    fn spawn(self: &Arc<Self>, id: String) {
        let wake = Arc::new(Notify::new());
        let task = tokio::spawn(Arc::clone(self).deliver(id.clone(), Arc::clone(&wake)));
        let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = workers.insert(id, Worker { wake, task }) {
            old.task.abort();
        }
    }

    fn wake(&self, id: &str) {
        let workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(worker) = workers.get(id) {
            worker.wake.notify_one();
        }
    }

    /// The event types an endpoint may name.
    pub fn event_types(&self) -> Vec<&'static str> {
        crate::events::vocabulary::EventKind::ALL
            .iter()
            .filter(|kind| **kind != EventKind::Test)
            .map(|kind| kind.name())
            .collect()
    }

    /// Register an endpoint: its view and its secret (shown this once). It receives
    /// the events appended from now on.
    pub async fn create(
        self: &Arc<Self>,
        new: NewWebhook,
    ) -> Result<(WebhookView, String), WebhookError> {
        check_url(&new.url)?;
        check_events(&new.events, &self.event_types())?;
        check_description(&new.description)?;
        let secret = sign::new_secret();
        let record = WebhookRecord {
            url: new.url,
            events: new.events,
            description: new.description,
            secret: secret.clone(),
            previous_secret: None,
            created_at_us: now_us(),
            disabled: None,
            cursor: self.events.latest_id(),
            failed_attempts: 0,
            failing_since_us: None,
            next_attempt_us: 0,
            redeliver: Vec::new(),
            push: None,
        };
        let id = new_id();
        match self
            .store
            .add_webhook(id.clone(), record.clone(), MAX_WEBHOOKS)
            .await?
        {
            Added::Added => {}
            Added::Full => {
                return Err(WebhookError::Full(format!(
                    "there are {MAX_WEBHOOKS} webhooks already, the most; remove one first"
                )));
            }
        }
        self.spawn(id.clone());
        Ok((WebhookView { id, record }, secret))
    }

    pub async fn list(&self) -> Result<Vec<WebhookView>, WebhookError> {
        let mut all = self.store.webhooks().await?;
        all.retain(|(_, r)| r.push.is_none());
        all.sort_by_key(|(_, r)| r.created_at_us);
        Ok(all
            .into_iter()
            .map(|(id, record)| WebhookView { id, record })
            .collect())
    }

    pub async fn get(&self, id: &str) -> Result<WebhookView, WebhookError> {
        let record = self
            .store
            .webhook(id)
            .await?
            .filter(|r| r.push.is_none())
            .ok_or_else(|| WebhookError::NoSuchWebhook(id.to_string()))?;
        Ok(WebhookView {
            id: id.to_string(),
            record,
        })
    }

    pub async fn update(
        &self,
        id: &str,
        change: WebhookChange,
    ) -> Result<WebhookView, WebhookError> {
        if let Some(url) = &change.url {
            check_url(url)?;
        }
        if let Some(events) = &change.events {
            check_events(events, &self.event_types())?;
        }
        check_description(&change.description)?;
        let now = now_us();
        let missing = || WebhookError::NoSuchWebhook(id.to_string());
        let record = self
            .store
            .update_webhook(id, move |r| {
                not_push(r)?;
                if let Some(url) = change.url {
                    r.url = url;
                }
                if let Some(events) = change.events {
                    r.events = events;
                }
                if let Some(description) = change.description {
                    r.description = Some(description).filter(|d| !d.is_empty());
                }
                match change.enabled {
                    Some(false) if r.disabled.is_none() => {
                        r.disabled = Some(Disabled {
                            at_us: now,
                            reason: "paused by the owner".into(),
                            by_failures: false,
                        });
                    }
                    Some(true) => {
                        r.disabled = None;
                        r.failed_attempts = 0;
                        r.failing_since_us = None;
                        r.next_attempt_us = 0;
                    }
                    _ => {}
                }
                Ok(())
            })
            .await?
            .map_err(|_: NotWebhook| missing())?
            .ok_or_else(missing)?;
        self.wake(id);
        Ok(WebhookView {
            id: id.to_string(),
            record,
        })
    }

    /// Remove an endpoint, its task and its deliveries.
    pub async fn delete(&self, id: &str) -> Result<(), WebhookError> {
        self.get(id).await?;
        if !self.store.remove_webhook(id).await? {
            return Err(WebhookError::NoSuchWebhook(id.to_string()));
        }
        let worker = self
            .workers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        if let Some(worker) = worker {
            worker.task.abort();
        }
        Ok(())
    }

    /// A new secret (returned, shown this once); the old one keeps signing beside it for
    /// [`ROTATION_OVERLAP`], so receivers can switch without losing an event.
    pub async fn rotate_secret(&self, id: &str) -> Result<(WebhookView, String), WebhookError> {
        let secret = sign::new_secret();
        let new = secret.clone();
        let until_us = now_us() + ROTATION_OVERLAP.as_micros() as u64;
        let record = self
            .store
            .update_webhook(id, move |r| {
                not_push(r)?;
                let old = std::mem::replace(&mut r.secret, new);
                r.previous_secret = Some(PreviousSecret {
                    secret: old,
                    until_us,
                });
                Ok::<(), NotWebhook>(())
            })
            .await?
            .ok()
            .flatten()
            .ok_or_else(|| WebhookError::NoSuchWebhook(id.to_string()))?;
        Ok((
            WebhookView {
                id: id.to_string(),
                record,
            },
            secret,
        ))
    }

    /// An endpoint's deliveries, newest first.
    pub async fn deliveries(
        &self,
        id: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(u64, WebhookDeliveryRecord)>, WebhookError> {
        self.get(id).await?;
        Ok(self.store.webhook_deliveries(id, before, limit).await?)
    }

    /// Deliver the event of one of an endpoint's deliveries again (same `webhook-id`),
    /// ahead of what it has still to receive.
    pub async fn redeliver(&self, id: &str, delivery_id: u64) -> Result<u64, WebhookError> {
        self.get(id).await?;
        let delivery = self
            .store
            .webhook_delivery(id, delivery_id)
            .await?
            .ok_or(WebhookError::NoSuchDelivery(delivery_id))?;
        let event_id = delivery.event_id;
        let page = self
            .events
            .read_after(event_id.saturating_sub(1), 1)
            .await?;
        if page.events.first().map(|e| e.id) != Some(event_id) {
            return Err(WebhookError::Gone(format!(
                "event {event_id} is no longer in the event log (retention)"
            )));
        }
        self.store
            .update_webhook(id, move |r| {
                if r.redeliver.len() >= MAX_REDELIVERIES {
                    return Err(WebhookError::Full(format!(
                        "{MAX_REDELIVERIES} redeliveries are queued already"
                    )));
                }
                r.redeliver.push(event_id);
                Ok(())
            })
            .await??
            .ok_or_else(|| WebhookError::NoSuchWebhook(id.to_string()))?;
        self.wake(id);
        Ok(event_id)
    }

    /// Send a `test` event to this endpoint alone, through the log like any other.
    pub async fn test(&self, id: &str) -> Result<u64, WebhookError> {
        self.get(id).await?;
        let event = self
            .events
            .alert(
                EventKind::Test,
                Alert {
                    message: "A test event from berthd".into(),
                    webhook_id: Some(id.to_string()),
                    ..Alert::default()
                },
            )
            .await?;
        Ok(event.id)
    }

    /// Every endpoint's delivery state, for `/health` (no URLs: they may carry a
    /// receiver's token, and `/health`'s reasons are public).
    pub async fn states(&self) -> Vec<WebhookState> {
        match self.store.webhooks().await {
            Ok(all) => all
                .into_iter()
                .map(|(id, r)| WebhookState {
                    id,
                    enabled: r.disabled.is_none(),
                    disabled_by_failures: r.disabled.is_some_and(|d| d.by_failures),
                    failed_attempts: r.failed_attempts,
                    failing_since_us: r.failing_since_us,
                })
                .collect(),
            Err(e) => {
                tracing::warn!(target: "berth::webhooks", error = %e, "cannot read the webhooks");
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_event_types_are_checked() {
        for good in [
            "http://127.0.0.1:8123/api/webhook/x",
            "https://hooks.example/in",
        ] {
            assert!(check_url(good).is_ok(), "{good}");
        }
        for bad in [
            "ftp://x/",
            "not a url",
            "http://user:pw@host/",
            "mailto:a@b",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
        let known = ["movement-created", "vtxo-expiring"];
        assert!(check_events(&["*".into()], &known).is_ok());
        assert!(check_events(&["vtxo-expiring".into()], &known).is_ok());
        assert!(check_events(&[], &known).is_err());
        assert!(check_events(&["payment".into()], &known).is_err());
    }
}

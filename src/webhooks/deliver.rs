//! One endpoint's delivery task: follow the event log from the endpoint's cursor, send
//! each event it subscribed to, and record every attempt with what it did to the
//! cursor in one transaction (`store::webhooks`).
//!
//! - In order: the task sends the event after the cursor until it is delivered (or the
//!   endpoint is disabled); nothing after it goes first. A redelivery the owner asked
//!   for goes ahead of it, once.
//! - At least once, same id: the cursor moves only with a delivered row, so an event
//!   cut off by a crash or a stop is sent again at the next start with the same
//!   `webhook-id` (`msg_<endpoint>_<event id>`).
//! - Retries: [`RETRY_DELAYS`] with ±20 % jitter, the first within 10 s, about three
//!   days in all; then the endpoint is disabled and a `webhook-disabled` event appended.

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Url;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use tokio::sync::Notify;

use super::{Webhooks, now_us, push, sign};
use crate::events::{Alert, Event, EventKind, Woken};
use crate::net::egress::{Egress, EgressError};
use crate::store::webhooks::{Disabled, WebhookDeliveryRecord, WebhookRecord};

/// The wait before each retry of an event that failed: the first within 10 s of the
/// failure, then longer, about three days (71.7 h) in all before the endpoint is
/// disabled. 14 retries, 15 attempts.
pub const RETRY_DELAYS: [Duration; 14] = [
    Duration::from_secs(5),
    Duration::from_secs(30),
    Duration::from_secs(2 * 60),
    Duration::from_secs(10 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(3600),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(4 * 3600),
    Duration::from_secs(8 * 3600),
    Duration::from_secs(8 * 3600),
    Duration::from_secs(12 * 3600),
    Duration::from_secs(12 * 3600),
    Duration::from_secs(12 * 3600),
    Duration::from_secs(12 * 3600),
];

/// Events read from the log at once (each an `Arc` shared with other readers).
const PAGE: usize = 64;
/// How long a wait for new events lasts before the endpoint's record is read again.
const IDLE: Duration = Duration::from_secs(60);
/// After a store error, wait this long before trying again.
const STORE_RETRY: Duration = Duration::from_secs(5);

/// What one attempt came to.
struct Attempt {
    response_code: Option<u16>,
    error: Option<String>,
    latency: Duration,
}

impl Attempt {
    fn delivered(&self) -> bool {
        self.error.is_none()
    }
}

/// The delay before retry `n` (1-based), scaled and with ±20 % jitter.
fn retry_delay(n: u32, scale: f64) -> Option<Duration> {
    let base = RETRY_DELAYS.get(usize::try_from(n).ok()?.checked_sub(1)?)?;
    let mut r = [0u8; 2];
    getrandom::fill(&mut r).expect("the OS random source is available");
    let jitter = 0.8 + 0.4 * f64::from(u16::from_le_bytes(r)) / f64::from(u16::MAX);
    Some(base.mul_f64(jitter * scale))
}

/// What goes out for one event.
enum Payload {
    /// The signed JSON of a webhook.
    Webhook,
    /// A phone's push.
    Push(push::Push),
}

/// Who a push subscription's device is, read with each event (its scopes and rules may
/// change).
struct Device {
    id: String,
    admin: bool,
    own_history: bool,
}

/// What of `event` goes to the endpoint `id` with `record` (`None`: nothing).
fn payload(
    id: &str,
    record: &WebhookRecord,
    device: Option<&Device>,
    event: &Event,
) -> Option<Payload> {
    if let Some(target) = &record.push {
        let device = device?;
        let categories: Vec<push::Category> = target
            .categories
            .iter()
            .filter_map(|c| push::Category::parse(c))
            .collect();
        let listener = push::Listener {
            device_id: &device.id,
            admin: device.admin,
            own_history: device.own_history,
        };
        return push::render(event, &categories, target.details, &listener).map(Payload::Push);
    }
    let wanted = match event.kind {
        EventKind::Test => event.alert.as_ref().and_then(|a| a.webhook_id.as_deref()) == Some(id),
        kind => record
            .events
            .iter()
            .any(|name| name == "*" || name == kind.name()),
    };
    wanted.then_some(Payload::Webhook)
}

/// Payments pushed lately, by movement id: a settled movement is updated again (a label,
/// its connection) and must not be pushed twice. Bounded; forgotten at a restart.
#[derive(Default)]
struct Told {
    ids: std::collections::HashSet<u32>,
    order: std::collections::VecDeque<u32>,
}

impl Told {
    const KEPT: usize = 1024;

    fn contains(&self, event: &Event) -> bool {
        event
            .movement
            .as_ref()
            .is_some_and(|m| self.ids.contains(&m.id.0))
    }

    fn insert(&mut self, event: &Event) {
        let Some(m) = &event.movement else { return };
        if self.ids.insert(m.id.0) {
            self.order.push_back(m.id.0);
            if self.order.len() > Self::KEPT
                && let Some(old) = self.order.pop_front()
            {
                self.ids.remove(&old);
            }
        }
    }
}

/// Sleep until `until_us`, a wake or shutdown; `false` on shutdown.
async fn pause(webhooks: &Webhooks, wake: &Notify, until: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(until) => true,
        _ = wake.notified() => true,
        _ = webhooks.events.stopped() => false,
    }
}

impl Webhooks {
    /// The task of endpoint `id`, until it is removed or berthd stops.
    pub(super) async fn deliver(self: Arc<Self>, id: String, wake: Arc<Notify>) {
        // How far the log has been read past the stored cursor without finding an event
        // for this endpoint (kept in memory: after a restart they are read again).
        let mut skipped_to = 0;
        let mut told = Told::default();
        loop {
            let record = match self.store.webhook(&id).await {
                Ok(Some(record)) => record,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(target: "berth::webhooks", webhook = %id, error = %e, "cannot read the webhook");
                    if !pause(&self, &wake, STORE_RETRY).await {
                        return;
                    }
                    continue;
                }
            };
            if record.disabled.is_some() {
                if !pause(&self, &wake, IDLE).await {
                    return;
                }
                continue;
            }
            let now = now_us();
            if record.next_attempt_us > now {
                let wait = Duration::from_micros(record.next_attempt_us - now);
                if !pause(&self, &wake, wait).await {
                    return;
                }
                continue;
            }
            // Read only when there is something to send: its scopes and rules decide
            // what it hears.
            let device = match &record.push {
                Some(target) => match self.device(&target.device_id).await {
                    Ok(device) => Some(device),
                    Err(e) => {
                        tracing::warn!(target: "berth::webhooks", webhook = %id, error = %e, "cannot read the device");
                        if !pause(&self, &wake, STORE_RETRY).await {
                            return;
                        }
                        continue;
                    }
                },
                None => None,
            };
            // A redelivery the owner asked for goes first.
            if let Some(&event_id) = record.redeliver.first() {
                let event = match self.events.read_after(event_id.saturating_sub(1), 1).await {
                    Ok(page) => page.events.into_iter().next().filter(|e| e.id == event_id),
                    Err(_) => None,
                };
                let sent = event.map(|e| {
                    let payload =
                        payload(&id, &record, device.as_ref(), &e).unwrap_or(Payload::Webhook);
                    (e, payload)
                });
                self.attempt(&id, &record, sent, event_id, true).await;
                continue;
            }
            let from = record.cursor.max(skipped_to);
            let page = match self.events.read_after(from, PAGE).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(target: "berth::webhooks", webhook = %id, error = %e, "cannot read the event log");
                    if !pause(&self, &wake, STORE_RETRY).await {
                        return;
                    }
                    continue;
                }
            };
            if page.events.is_empty() && !page.missed {
                // Wait for the next event, then read the endpoint again: the owner may
                // have changed it (a rotated secret, other types) in the meantime.
                let deadline = tokio::time::Instant::now() + IDLE;
                tokio::select! {
                    waited = self.events.wait_after(from, 1, deadline) => {
                        if matches!(waited, Ok((_, Woken::Shutdown))) {
                            return;
                        }
                    }
                    _ = wake.notified() => {}
                }
                continue;
            }
            if page.missed {
                told = Told::default();
                tracing::warn!(
                    target: "berth::webhooks",
                    webhook = %id,
                    "events after {from} left the log before they were delivered (retention or a \
                     wallet deleted)"
                );
                if page.events.is_empty() {
                    skipped_to = self.events.latest_id();
                    continue;
                }
            }
            let next = page.events.iter().find_map(|e| {
                let payload = payload(&id, &record, device.as_ref(), e)?;
                let again = matches!(payload, Payload::Push(_)) && told.contains(e);
                (!again).then(|| (Arc::clone(e), payload))
            });
            match next {
                Some((event, payload)) => {
                    let event_id = event.id;
                    let pushed = matches!(payload, Payload::Push(_)).then(|| Arc::clone(&event));
                    let delivered = self
                        .attempt(&id, &record, Some((event, payload)), event_id, false)
                        .await;
                    if let (true, Some(event)) = (delivered, pushed) {
                        told.insert(&event);
                    }
                }
                None => skipped_to = page.next_cursor(from),
            }
        }
    }

    /// Send `event` (absent: it left the log) and record how it went: whether it was
    /// delivered.
    async fn attempt(
        &self,
        id: &str,
        record: &WebhookRecord,
        event: Option<(Arc<Event>, Payload)>,
        event_id: u64,
        redelivery: bool,
    ) -> bool {
        let (event_type, attempt) = match &event {
            Some((event, payload)) => {
                let (name, _) = (self.render)(event);
                let attempt = match payload {
                    Payload::Webhook => self.send(id, record, event).await,
                    Payload::Push(push) => self.push(id, record, event, push).await,
                };
                (name, attempt)
            }
            None => (
                "unknown",
                Attempt {
                    response_code: None,
                    error: Some(format!("event {event_id} is no longer in the event log")),
                    latency: Duration::ZERO,
                },
            ),
        };
        let delivered = attempt.delivered();
        let at_us = now_us();
        let number = if redelivery {
            1
        } else {
            record.failed_attempts + 1
        };
        if !delivered {
            tracing::info!(
                target: "berth::webhooks",
                webhook = %id,
                event = event_id,
                attempt = number,
                code = ?attempt.response_code,
                error = attempt.error.as_deref().unwrap_or(""),
                "webhook delivery failed"
            );
        }
        let row = WebhookDeliveryRecord {
            event_id,
            event_type: event_type.to_string(),
            attempt: number,
            at_us,
            status: if delivered { "delivered" } else { "failed" }.into(),
            response_code: attempt.response_code,
            error: attempt.error,
            latency_ms: u64::try_from(attempt.latency.as_millis()).unwrap_or(u64::MAX),
            redelivery,
        };
        // Gone from the log: nothing more to try.
        let settled = delivered || event.is_none();
        let delay = retry_delay(number, self.retry_scale);
        let recorded = self
            .store
            .record_webhook_delivery(id, row, move |r| {
                if redelivery {
                    // Tried once, whatever came of it.
                    if r.redeliver.first() == Some(&event_id) {
                        r.redeliver.remove(0);
                    }
                    return;
                }
                if r.cursor >= event_id {
                    return;
                }
                if settled {
                    r.cursor = event_id;
                    r.failed_attempts = 0;
                    r.failing_since_us = None;
                    r.next_attempt_us = 0;
                    return;
                }
                r.failed_attempts = number;
                r.failing_since_us.get_or_insert(at_us);
                match delay {
                    Some(delay) => {
                        r.next_attempt_us =
                            at_us + u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
                    }
                    None => {
                        r.disabled = Some(Disabled {
                            at_us,
                            reason: format!(
                                "every attempt at event {event_id} failed for about three days"
                            ),
                            by_failures: true,
                        });
                    }
                }
            })
            .await;
        match recorded {
            Ok(Some((_, after)))
                if after
                    .disabled
                    .as_ref()
                    .is_some_and(|d| d.by_failures && d.at_us == at_us) =>
            {
                // The host only, here and in the event: a URL may carry the receiver's
                // token, and the event reaches devices that may read but not administer.
                let host = Url::parse(&after.url)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_string))
                    .unwrap_or_default();
                tracing::warn!(target: "berth::webhooks", webhook = %id, %host, "webhook disabled: it kept failing");
                let alert = Alert {
                    message: format!(
                        "berthd stopped sending webhook {id} (to {host}): it failed for about three \
                         days. Fix the receiver and enable the webhook again to resume."
                    ),
                    webhook_id: Some(id.to_string()),
                    ..Alert::default()
                };
                if let Err(e) = self.events.alert(EventKind::WebhookDisabled, alert).await {
                    tracing::warn!(target: "berth::webhooks", error = %e, "cannot record webhook-disabled");
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(target: "berth::webhooks", webhook = %id, error = %e, "cannot record a webhook delivery");
                tokio::time::sleep(STORE_RETRY).await;
            }
        }
        delivered
    }

    /// The device of a push subscription as it is now.
    async fn device(&self, device_id: &str) -> Result<Device, crate::store::StoreError> {
        let scopes = self
            .store
            .devices()
            .await?
            .into_iter()
            .find(|d| d.id == device_id)
            .map_or(0, |d| d.scopes);
        let own_history = self
            .store
            .spending_rules(device_id)
            .await?
            .is_some_and(|r| r.own_history);
        Ok(Device {
            id: device_id.to_string(),
            admin: crate::access::scopes::Scopes::from_bits(scopes)
                .allows(crate::access::scopes::Scope::Admin),
            own_history,
        })
    }

    /// One push to a phone's distributor, ntfy's way: the text as the body, the title,
    /// priority and tags as headers.
    async fn push(
        &self,
        id: &str,
        record: &WebhookRecord,
        event: &Event,
        push: &push::Push,
    ) -> Attempt {
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        for (name, value) in [
            ("title", push.title.clone()),
            ("priority", push.priority.to_string()),
            ("tags", push.tags.to_string()),
            // For a receiver that deduplicates (a retry carries the same).
            ("x-berth-event", format!("msg_{id}_{}", event.id)),
        ] {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        }
        post(
            &self.push_egress,
            &format!("push:{id}"),
            &record.url,
            headers,
            push.message.clone().into_bytes(),
        )
        .await
    }

    /// One signed POST of `event` to the endpoint.
    async fn send(&self, id: &str, record: &WebhookRecord, event: &Event) -> Attempt {
        let (name, data) = (self.render)(event);
        let body = format!(
            r#"{{"type":"{name}","timestamp":"{}","data":{}}}"#,
            event
                .at()
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            data.get()
        );
        let message_id = format!("msg_{id}_{}", event.id);
        let timestamp = chrono::Utc::now().timestamp();
        let now = now_us();
        let mut secrets = vec![record.secret.as_str()];
        if let Some(previous) = record.previous_secret.as_ref().filter(|p| p.until_us > now) {
            secrets.push(previous.secret.as_str());
        }
        let signature = sign::signature(&secrets, &message_id, timestamp, body.as_bytes());
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in [
            ("webhook-id", message_id),
            ("webhook-timestamp", timestamp.to_string()),
            ("webhook-signature", signature),
        ] {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        }
        post(
            &self.egress,
            &format!("webhook:{id}"),
            &record.url,
            headers,
            body.into_bytes(),
        )
        .await
    }
}

/// One POST through `egress` as an attempt: any 2xx answer is delivered; another
/// status, no answer or a refusal is a failure, with why.
async fn post(
    egress: &Egress,
    caller: &str,
    url: &str,
    headers: HeaderMap,
    body: Vec<u8>,
) -> Attempt {
    let started = Instant::now();
    let sent = match Url::parse(url) {
        Ok(url) => egress.post(caller, &url, headers, body).await,
        Err(e) => Err(EgressError::Refused(format!("the URL is not valid: {e}"))),
    };
    let (response_code, error) = match sent {
        Ok(code) if (200..300).contains(&code) => (Some(code), None),
        Ok(code) => (
            Some(code),
            Some(format!("the receiver answered HTTP {code}")),
        ),
        Err(e) => (None, Some(e.to_string())),
    };
    Attempt {
        response_code,
        error,
        latency: started.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_start_within_ten_seconds_and_last_about_three_days() {
        let first = retry_delay(1, 1.0).expect("a first retry");
        assert!(first >= Duration::from_secs(4) && first <= Duration::from_secs(6));
        let total: Duration = RETRY_DELAYS.iter().sum();
        assert!(
            total > Duration::from_secs(66 * 3600) && total < Duration::from_secs(78 * 3600),
            "{total:?}"
        );
        assert!(retry_delay(RETRY_DELAYS.len() as u32 + 1, 1.0).is_none());
        assert!(retry_delay(0, 1.0).is_none());
        let scaled = retry_delay(1, 0.001).expect("scaled");
        assert!(scaled <= Duration::from_millis(6));
    }
}

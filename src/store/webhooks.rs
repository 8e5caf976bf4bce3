//! Webhook endpoints and their deliveries (`webhooks` delivers): [`WEBHOOKS`], id →
//! [`WebhookRecord`] with the endpoint's cursor in the event log, and
//! [`WEBHOOK_DELIVERIES`], one row per attempt. An attempt's row and what it did to the
//! endpoint's cursor are written in one transaction, so after a crash the cursor never
//! claims an event that has no delivered row, and an event not delivered is tried again
//! under the same id.

use redb::ReadableTable;

use crate::store::Store;
use crate::store::codec::Envelope;
use crate::store::error::{RedbResultExt, StoreError};
pub use crate::store::records::{
    Disabled, PreviousSecret, PushTarget, WebhookDeliveryRecord, WebhookRecord,
};
use crate::store::schema::{META, WEBHOOK_DELIVERIES, WEBHOOKS, meta_keys};

/// Delivery rows kept per endpoint (the newest).
pub const DELIVERIES_KEPT: usize = 500;

/// The endpoint id of device `device_id`'s push subscription (one per device).
pub fn push_id(device_id: &str) -> String {
    format!("push-{device_id}")
}

/// Read endpoint `id` inside `tx`, let `change` change it and write it back: the record
/// after; `None` when there is no such endpoint, or `change`'s error (nothing written
/// either way).
fn change_in<E>(
    tx: &redb::WriteTransaction,
    id: &str,
    ctx: &'static str,
    change: impl FnOnce(&mut WebhookRecord) -> Result<(), E>,
) -> Result<Option<Result<WebhookRecord, E>>, StoreError> {
    let mut table = tx.open_table(WEBHOOKS).ctx(ctx)?;
    let Some(mut record) = table
        .get(id)
        .ctx(ctx)?
        .map(|v| v.value().decode())
        .transpose()?
    else {
        return Ok(None);
    };
    if let Err(e) = change(&mut record) {
        return Ok(Some(Err(e)));
    }
    table.insert(id, Envelope::encode(&record)?).ctx(ctx)?;
    Ok(Some(Ok(record)))
}

/// Remove device `id`'s push subscription and its deliveries, inside the caller's
/// transaction (the device is being unpaired).
pub(super) fn forget_device(
    tx: &redb::WriteTransaction,
    id: &str,
    ctx: &'static str,
) -> Result<(), StoreError> {
    let endpoint = push_id(id);
    tx.open_table(WEBHOOKS)
        .ctx(ctx)?
        .remove(endpoint.as_str())
        .ctx(ctx)?;
    tx.open_table(WEBHOOK_DELIVERIES)
        .ctx(ctx)?
        .retain_in(
            (endpoint.as_str(), 0)..=(endpoint.as_str(), u64::MAX),
            |_, _| false,
        )
        .ctx(ctx)?;
    Ok(())
}

/// What [`Store::add_webhook`] came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Added {
    Added,
    /// There are `max` endpoints already: nothing written.
    Full,
}

impl Store {
    /// Put device `device_id`'s push subscription (replacing its URL and choices, keeping
    /// its cursor and retry state when it had one), if the device is still paired:
    /// the record after, or `None` for an unpaired device.
    pub async fn put_push(
        &self,
        device_id: &str,
        fresh: WebhookRecord,
    ) -> Result<Option<WebhookRecord>, StoreError> {
        const CTX: &str = "setting a device's push";
        let device_id = device_id.to_string();
        self.write(CTX, move |tx| {
            if tx
                .open_table(crate::store::schema::DEVICES)
                .ctx(CTX)?
                .get(device_id.as_str())
                .ctx(CTX)?
                .is_none()
            {
                return Ok(None);
            }
            let id = push_id(&device_id);
            let mut table = tx.open_table(WEBHOOKS).ctx(CTX)?;
            let record = match table
                .get(id.as_str())
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?
            {
                Some(old) => WebhookRecord {
                    url: fresh.url,
                    push: fresh.push,
                    disabled: None,
                    failed_attempts: 0,
                    failing_since_us: None,
                    next_attempt_us: 0,
                    ..old
                },
                None => fresh,
            };
            table
                .insert(id.as_str(), Envelope::encode(&record)?)
                .ctx(CTX)?;
            Ok(Some(record))
        })
        .await
    }

    /// Register an endpoint under `id`, unless there are `max` already.
    pub async fn add_webhook(
        &self,
        id: String,
        record: WebhookRecord,
        max: u64,
    ) -> Result<Added, StoreError> {
        const CTX: &str = "registering a webhook";
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(WEBHOOKS).ctx(CTX)?;
            let mut webhooks = 0;
            for entry in table.iter().ctx(CTX)? {
                if !entry.ctx(CTX)?.0.value().starts_with("push-") {
                    webhooks += 1;
                }
            }
            if webhooks >= max {
                return Ok(Added::Full);
            }
            table
                .insert(id.as_str(), Envelope::encode(&record)?)
                .ctx(CTX)?;
            Ok(Added::Added)
        })
        .await
    }

    /// Every endpoint, by id.
    pub async fn webhooks(&self) -> Result<Vec<(String, WebhookRecord)>, StoreError> {
        const CTX: &str = "listing webhooks";
        self.read(CTX, |tx| {
            let table = tx.open_table(WEBHOOKS).ctx(CTX)?;
            let mut out = Vec::new();
            for entry in table.iter().ctx(CTX)? {
                let (id, record) = entry.ctx(CTX)?;
                out.push((id.value().to_string(), record.value().decode()?));
            }
            Ok(out)
        })
        .await
    }

    /// One endpoint.
    pub async fn webhook(&self, id: &str) -> Result<Option<WebhookRecord>, StoreError> {
        const CTX: &str = "reading a webhook";
        let id = id.to_string();
        self.read(CTX, move |tx| {
            let table = tx.open_table(WEBHOOKS).ctx(CTX)?;
            table
                .get(id.as_str())
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()
        })
        .await
    }

    /// Change an endpoint with `change` in one transaction: the record after, or `None`
    /// when there is no such endpoint. `change` returning an error writes nothing.
    pub async fn update_webhook<E, F>(
        &self,
        id: &str,
        change: F,
    ) -> Result<Result<Option<WebhookRecord>, E>, StoreError>
    where
        F: FnOnce(&mut WebhookRecord) -> Result<(), E> + Send + 'static,
        E: Send + 'static,
    {
        const CTX: &str = "changing a webhook";
        let id = id.to_string();
        self.write(CTX, move |tx| {
            Ok(match change_in(tx, &id, CTX, change)? {
                None => Ok(None),
                Some(changed) => changed.map(Some),
            })
        })
        .await
    }

    /// Remove an endpoint and its delivery rows: `false` when there was none.
    pub async fn remove_webhook(&self, id: &str) -> Result<bool, StoreError> {
        const CTX: &str = "removing a webhook";
        let id = id.to_string();
        self.write(CTX, move |tx| {
            let removed = tx
                .open_table(WEBHOOKS)
                .ctx(CTX)?
                .remove(id.as_str())
                .ctx(CTX)?
                .is_some();
            let mut deliveries = tx.open_table(WEBHOOK_DELIVERIES).ctx(CTX)?;
            deliveries
                .retain_in((id.as_str(), 0)..=(id.as_str(), u64::MAX), |_, _| false)
                .ctx(CTX)?;
            Ok(removed)
        })
        .await
    }

    /// Record one attempt and apply its outcome to the endpoint, in one transaction;
    /// the oldest rows beyond [`DELIVERIES_KEPT`] go. Returns the delivery's id, or
    /// `None` (nothing written) when the endpoint is gone.
    pub async fn record_webhook_delivery<F>(
        &self,
        id: &str,
        delivery: WebhookDeliveryRecord,
        outcome: F,
    ) -> Result<Option<(u64, WebhookRecord)>, StoreError>
    where
        F: FnOnce(&mut WebhookRecord) + Send + 'static,
    {
        const CTX: &str = "recording a webhook delivery";
        let id = id.to_string();
        self.write(CTX, move |tx| {
            let changed = change_in(tx, &id, CTX, |r| {
                outcome(r);
                Ok::<(), std::convert::Infallible>(())
            })?;
            let Some(Ok(record)) = changed else {
                return Ok(None);
            };
            let mut meta = tx.open_table(META).ctx(CTX)?;
            let delivery_id = meta
                .get(meta_keys::LAST_WEBHOOK_DELIVERY_ID)
                .ctx(CTX)?
                .map_or(0, |v| v.value())
                + 1;
            meta.insert(meta_keys::LAST_WEBHOOK_DELIVERY_ID, delivery_id)
                .ctx(CTX)?;
            let mut deliveries = tx.open_table(WEBHOOK_DELIVERIES).ctx(CTX)?;
            deliveries
                .insert((id.as_str(), delivery_id), Envelope::encode(&delivery)?)
                .ctx(CTX)?;
            // Bounded: the rows of this endpoint beyond the newest DELIVERIES_KEPT go.
            let kept = deliveries
                .range((id.as_str(), 0)..=(id.as_str(), u64::MAX))
                .ctx(CTX)?
                .rev()
                .nth(DELIVERIES_KEPT)
                .transpose()
                .ctx(CTX)?
                .map(|(key, _)| key.value().1);
            if let Some(through) = kept {
                deliveries
                    .retain_in((id.as_str(), 0)..=(id.as_str(), through), |_, _| false)
                    .ctx(CTX)?;
            }
            Ok(Some((delivery_id, record)))
        })
        .await
    }

    /// An endpoint's deliveries, newest first: at most `limit`, older than `before`
    /// when given.
    pub async fn webhook_deliveries(
        &self,
        id: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Vec<(u64, WebhookDeliveryRecord)>, StoreError> {
        const CTX: &str = "listing webhook deliveries";
        let id = id.to_string();
        self.read(CTX, move |tx| {
            let table = tx.open_table(WEBHOOK_DELIVERIES).ctx(CTX)?;
            let end = before.unwrap_or(u64::MAX);
            let mut out = Vec::new();
            for entry in table
                .range((id.as_str(), 0)..(id.as_str(), end))
                .ctx(CTX)?
                .rev()
                .take(limit)
            {
                let (key, value) = entry.ctx(CTX)?;
                out.push((key.value().1, value.value().decode()?));
            }
            Ok(out)
        })
        .await
    }

    /// One delivery of an endpoint.
    pub async fn webhook_delivery(
        &self,
        id: &str,
        delivery_id: u64,
    ) -> Result<Option<WebhookDeliveryRecord>, StoreError> {
        const CTX: &str = "reading a webhook delivery";
        let id = id.to_string();
        self.read(CTX, move |tx| {
            let table = tx.open_table(WEBHOOK_DELIVERIES).ctx(CTX)?;
            table
                .get((id.as_str(), delivery_id))
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreConfig;

    fn endpoint() -> WebhookRecord {
        WebhookRecord {
            url: "http://127.0.0.1:9/hook".into(),
            events: vec!["*".into()],
            description: None,
            secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            previous_secret: None,
            created_at_us: 1,
            disabled: None,
            cursor: 0,
            failed_attempts: 0,
            failing_since_us: None,
            next_attempt_us: 0,
            redeliver: Vec::new(),
            push: None,
        }
    }

    fn delivery(event_id: u64) -> WebhookDeliveryRecord {
        WebhookDeliveryRecord {
            event_id,
            event_type: "test".into(),
            attempt: 1,
            at_us: event_id,
            status: "delivered".into(),
            response_code: Some(204),
            error: None,
            latency_ms: 3,
            redelivery: false,
        }
    }

    /// Neither the secrets nor the URL (which may carry the receiver's token) reach a
    /// log through `Debug`.
    #[test]
    fn a_records_debug_withholds_its_secrets_and_url() {
        let mut record = endpoint();
        record.previous_secret = Some(PreviousSecret {
            secret: "whsec_b2xkIHNlY3JldCBvZiB0aGUgb3duZXI=".into(),
            until_us: 9,
        });
        let shown = format!("{record:?}");
        assert!(!shown.contains("whsec_"), "{shown}");
        assert!(!shown.contains("127.0.0.1"), "{shown}");
        assert!(shown.contains("cursor: 0"), "{shown}");
    }

    /// A delivery moves the cursor in the same transaction; rows are bounded per
    /// endpoint and go with it; ids only grow across endpoints.
    #[tokio::test]
    async fn deliveries_are_bounded_and_go_with_their_endpoint() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = Store::open_async(&dir.path().join("db.redb"), &StoreConfig::default())
            .await
            .expect("open");
        for id in ["a", "b"] {
            assert_eq!(
                store
                    .add_webhook(id.into(), endpoint(), 2)
                    .await
                    .expect("add"),
                Added::Added
            );
        }
        assert_eq!(
            store
                .add_webhook("c".into(), endpoint(), 2)
                .await
                .expect("add"),
            Added::Full
        );
        let total = DELIVERIES_KEPT as u64 + 20;
        for n in 1..=total {
            let (_, after) = store
                .record_webhook_delivery("a", delivery(n), move |r| r.cursor = n)
                .await
                .expect("record")
                .expect("endpoint");
            assert_eq!(after.cursor, n);
        }
        let (b_id, _) = store
            .record_webhook_delivery("b", delivery(1), |_| {})
            .await
            .expect("record")
            .expect("endpoint");
        assert_eq!(b_id, total + 1, "ids grow across endpoints");
        let rows = store
            .webhook_deliveries("a", None, usize::MAX)
            .await
            .expect("list");
        assert_eq!(rows.len(), DELIVERIES_KEPT);
        assert_eq!(rows[0].1.event_id, total, "newest first");
        let older = store
            .webhook_deliveries("a", Some(rows[9].0), 5)
            .await
            .expect("page");
        assert_eq!(older[0].0, rows[10].0);
        assert!(store.remove_webhook("a").await.expect("remove"));
        assert!(
            store
                .webhook_deliveries("a", None, 10)
                .await
                .expect("list")
                .is_empty()
        );
        assert_eq!(
            store
                .webhook_deliveries("b", None, 10)
                .await
                .expect("list")
                .len(),
            1
        );
        assert!(
            store
                .record_webhook_delivery("a", delivery(1), |_| {})
                .await
                .expect("record")
                .is_none(),
            "a removed endpoint records nothing"
        );
        store.verify_invariants().await.expect("invariants");
    }
}

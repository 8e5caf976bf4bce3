//! `payment_received` and `payment_sent`: every Lightning payment the wallet settles,
//! told to every connection granted `notifications`, whoever made the payment (like
//! `get_balance` and `list_transactions`, they are about the wallet, not the app).
//!
//! Read from the wallet's durable event log from the moment the service starts, as any
//! other reader of the log: a payment settled while berthd was stopped is not told
//! (NIP-47's notifications are ephemeral events; an app catches up with
//! `list_transactions`). Each is sent twice, as the spec asks of a service that speaks
//! both encryptions: kind 23197 under NIP-44 and 23196 under NIP-04.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bark::movement::MovementStatus;
use nostr::{ClientMessage, JsonUtil};
use serde_json::json;

use crate::events::{MAX_PAGE, Woken};
use crate::nwc::{Nwc, budget, protocol, transactions};

/// Movements remembered as told (a settled movement is updated again, e.g. when it is
/// marked with its connection, and must not be told twice).
const REMEMBERED: usize = 1024;
/// How long one wait on the log lasts before it is renewed.
const WAIT: Duration = Duration::from_secs(60);

/// The payments told lately, by movement id and payment hash (a wallet deleted and
/// made again numbers its movements from 1 again).
#[derive(Default)]
struct Told {
    ids: HashSet<(u32, String)>,
    order: VecDeque<(u32, String)>,
}

impl Told {
    /// `true` the first time `id` is seen.
    fn first(&mut self, id: (u32, String)) -> bool {
        if !self.ids.insert(id.clone()) {
            return false;
        }
        self.order.push_back(id);
        if self.order.len() > REMEMBERED
            && let Some(old) = self.order.pop_front()
        {
            self.ids.remove(&old);
        }
        true
    }
}

impl Nwc {
    /// Follow the event log and tell each settled Lightning payment, until berthd stops.
    pub(super) async fn notify(self: Arc<Self>) {
        let mut cursor = self.events.latest_id();
        let mut told = Told::default();
        loop {
            let deadline = tokio::time::Instant::now() + WAIT;
            let page = match self.events.wait_after(cursor, MAX_PAGE, deadline).await {
                Ok((_, Woken::Shutdown)) => return,
                Ok((page, _)) => page,
                Err(e) => {
                    tracing::warn!(target: "berth::nwc", error = %e, "cannot read the event log");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    continue;
                }
            };
            if page.missed && page.events.is_empty() {
                // What followed the cursor is gone (a wallet deleted): from now on.
                cursor = self.events.latest_id();
                continue;
            }
            cursor = page.next_cursor(cursor);
            for event in &page.events {
                let Some(movement) = &event.movement else {
                    continue;
                };
                if movement.status != MovementStatus::Successful {
                    continue;
                }
                let Some(transaction) = transactions::of_movement(movement) else {
                    continue;
                };
                let hash = transaction["payment_hash"].as_str().unwrap_or_default();
                if !told.first((movement.id.0, hash.to_owned())) {
                    continue;
                }
                let kind = if transaction["type"] == "incoming" {
                    "payment_received"
                } else {
                    "payment_sent"
                };
                let content = json!({ "notification_type": kind, "notification": transaction });
                self.tell(&content.to_string());
            }
        }
    }

    /// Send a notification to every usable connection granted them.
    fn tell(&self, content: &str) {
        let snapshot = self.snapshot.borrow().clone();
        let now = chrono::Utc::now();
        for connection in snapshot.by_service.values() {
            let granted = connection
                .record
                .methods
                .iter()
                .any(|g| g == protocol::NOTIFICATIONS_GRANT);
            if !granted || budget::usable(&connection.record, now).is_err() {
                continue;
            }
            let events = match protocol::notification_events(
                &connection.keys,
                &connection.client,
                content,
            ) {
                Ok(events) => events,
                Err(e) => {
                    tracing::error!(target: "berth::nwc", error = %e, "cannot make a notification");
                    continue;
                }
            };
            for event in events {
                let text: Arc<str> = ClientMessage::event(event).as_json().into();
                for url in &connection.relays {
                    self.send_to(url, Arc::clone(&text));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payment_is_told_once_and_the_memory_is_bounded() {
        let mut told = Told::default();
        assert!(told.first((1, "aa".into())));
        assert!(
            !told.first((1, "aa".into())),
            "updated again: not told again"
        );
        assert!(told.first((1, "bb".into())), "another wallet's movement 1");
        for n in 0..2000 {
            told.first((n + 10, "cc".into()));
        }
        assert_eq!(told.ids.len(), REMEMBERED);
        assert_eq!(told.order.len(), REMEMBERED);
        assert!(told.first((1, "aa".into())), "long forgotten");
    }
}

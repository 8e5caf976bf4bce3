//! Requests, from the relay that delivered them to the answer on every relay of their
//! connection: copies answered alike, the window, revocation, the methods granted and
//! the rate limit checked before anything is executed, and payments left unanswered
//! by a stop finished from their records.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use nostr::{ClientMessage, Event, EventId, JsonUtil, Timestamp};
use tokio::sync::mpsc;
use url::Url;

use crate::nwc::payments::{Answering, MAX_INVOICES};
use crate::nwc::protocol::{self, Code, Encryption, Failure, Response};
use crate::nwc::{
    BURST, Connection, HANDLED_AT_ONCE, Incoming, Nwc, PER_MINUTE, REMEMBERED, budget, lock,
    methods, now_us,
};
use crate::store::nwc::NwcRequestRecord;

/// Request ids seen lately, and the answers each got (none yet: under way; several:
/// a `multi_pay_invoice`).
#[derive(Default)]
pub(super) struct Recent {
    answers: HashMap<EventId, Vec<Arc<str>>>,
    order: VecDeque<EventId>,
}

impl Recent {
    /// Mark `id` under way; `Err` with its answers so far if it was seen already.
    pub(super) fn claim(&mut self, id: EventId) -> Result<(), Vec<Arc<str>>> {
        if let Some(known) = self.answers.get(&id) {
            return Err(known.clone());
        }
        if self.order.len() >= REMEMBERED
            && let Some(old) = self.order.pop_front()
        {
            self.answers.remove(&old);
        }
        self.answers.insert(id, Vec::new());
        self.order.push_back(id);
        Ok(())
    }

    pub(super) fn answered(&mut self, id: EventId, reply: Arc<str>) {
        if let Some(replies) = self.answers.get_mut(&id)
            && replies.len() < MAX_INVOICES
        {
            replies.push(reply);
        }
    }
}

/// A connection's rate limit: a token bucket.
pub(super) struct Bucket {
    pub(super) tokens: f64,
    pub(super) at: Instant,
}

impl Nwc {
    /// Hand requests to handlers, [`HANDLED_AT_ONCE`] at a time.
    pub(super) async fn dispatch(self: Arc<Self>, mut queue: mpsc::Receiver<Incoming>) {
        let permits = Arc::new(tokio::sync::Semaphore::new(HANDLED_AT_ONCE));
        let mut handlers = tokio::task::JoinSet::new();
        while let Some(incoming) = queue.recv().await {
            while handlers.try_join_next().is_some() {}
            let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
                return;
            };
            let this = Arc::clone(&self);
            handlers.spawn(async move {
                this.handle(incoming).await;
                drop(permit);
            });
        }
    }

    /// One request, from the relay it came from to the answer on every relay of its
    /// connection.
    pub(super) async fn handle(self: &Arc<Self>, incoming: Incoming) {
        let Incoming {
            event,
            connection,
            relay,
        } = incoming;
        // The connection as it is now: a revocation that returned before this point
        // is seen here (the relay may have read the request before it).
        let Some(connection) = self
            .snapshot
            .borrow()
            .by_service
            .get(&connection.keys.public_key())
            .cloned()
        else {
            return;
        };
        if let Err(known) = lock(&self.recent).claim(event.id) {
            // A copy (another relay, or the same again): the same answers, or none yet.
            for reply in known {
                self.send_to(&relay, reply);
            }
            return;
        }
        // A payment seen before this start: its record answers.
        match self.store.nwc_request(event.id.to_bytes()).await {
            Ok(Some(record)) => {
                if let Some(to) = Answering::of_record(event.id.to_bytes(), &record) {
                    self.answer_recorded(&connection, to, record);
                }
                return;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::error!(target: "berth::nwc", error = %e, "cannot read a payment's record");
                return;
            }
        }
        let encryption = match Encryption::of(&event) {
            Ok(encryption) => encryption,
            Err(named) => {
                let failure = Failure::new(
                    Code::UnsupportedEncryption,
                    format!("the encryption {named:?} is not supported; use nip44_v2 or nip04"),
                );
                let content = Response::of("", Err(failure)).to_json();
                self.reply(
                    &connection,
                    &Answering::to(event.id),
                    Encryption::Nip04,
                    &content,
                );
                return;
            }
        };
        let plain = match encryption.decrypt(&connection.keys, &event.pubkey, &event.content) {
            Ok(plain) if plain.len() <= protocol::MAX_CONTENT => plain,
            Ok(_) => {
                tracing::debug!(target: "berth::nwc", "a request too large to read");
                return;
            }
            Err(e) => {
                tracing::debug!(target: "berth::nwc", error = %e, "a request that cannot be read");
                return;
            }
        };
        let request: protocol::Request = match serde_json::from_str(&plain) {
            Ok(request) => request,
            Err(e) => {
                let failure = Failure::new(Code::Other, format!("not a NIP-47 request: {e}"));
                self.reply(
                    &connection,
                    &Answering::to(event.id),
                    encryption,
                    &Response::of("", Err(failure)).to_json(),
                );
                return;
            }
        };
        let method = request.method.clone();
        let outcome = match self.admit(&connection, &event, &method) {
            Err(failure) => Err(failure),
            Ok(()) => {
                lock(&self.last_used).insert(connection.record.id.clone(), now_us());
                match self.execute(&connection, &event, encryption, request).await {
                    methods::Outcome::Answer(outcome) => outcome,
                    // Answered from its record, or left for the resolver.
                    methods::Outcome::Recorded => return,
                }
            }
        };
        self.reply(
            &connection,
            &Answering::to(event.id),
            encryption,
            &Response::of(&method, outcome).to_json(),
        );
    }

    /// Whether a request may be executed at all: in time, from a usable connection,
    /// for a method served and granted, within the rate limit.
    pub(super) fn admit(
        &self,
        connection: &Connection,
        event: &Event,
        method: &str,
    ) -> Result<(), Failure> {
        let now = Timestamp::now();
        if protocol::expiration(event).is_some_and(|at| at <= now) {
            return Err(Failure::new(
                Code::Other,
                "the request expired; it was not executed",
            ));
        }
        let window = self.settings.request_window.as_secs();
        let created = event.created_at.as_secs();
        if created.saturating_add(window) < now.as_secs()
            || created > now.as_secs().saturating_add(window)
        {
            return Err(Failure::new(
                Code::Other,
                format!(
                    "the request was made more than {window} s from now (check the device's \
                     clock); it was not executed"
                ),
            ));
        }
        budget::usable(&connection.record, Utc::now())?;
        if !protocol::METHODS.contains(&method) {
            return Err(Failure::new(
                Code::NotImplemented,
                format!("{method} is not served by this wallet"),
            ));
        }
        if !connection.record.methods.iter().any(|m| m == method) {
            return Err(Failure::new(
                Code::Restricted,
                format!("this connection may not use {method}"),
            ));
        }
        let mut buckets = lock(&self.buckets);
        let bucket = buckets
            .entry(connection.record.id.clone())
            .or_insert(Bucket {
                tokens: BURST,
                at: Instant::now(),
            });
        let refill = bucket.at.elapsed().as_secs_f64() * PER_MINUTE / 60.0;
        bucket.tokens = (bucket.tokens + refill).min(BURST);
        bucket.at = Instant::now();
        if bucket.tokens < 1.0 {
            return Err(Failure::new(
                Code::RateLimited,
                "too many requests from this connection; try again in a few seconds",
            ));
        }
        bucket.tokens -= 1.0;
        Ok(())
    }

    /// Encrypt, sign and send an answer to every relay of the connection, and keep it
    /// for copies of the request.
    pub(super) fn reply(
        &self,
        connection: &Connection,
        to: &Answering,
        encryption: Encryption,
        content: &str,
    ) {
        let request = to.request;
        let event = match protocol::response_event(
            &connection.keys,
            request,
            &connection.client,
            encryption,
            content,
            to.d.as_deref(),
        ) {
            Ok(event) => event,
            Err(e) => {
                tracing::error!(target: "berth::nwc", error = %e, "cannot make a response");
                return;
            }
        };
        let text: Arc<str> = ClientMessage::event(event).as_json().into();
        lock(&self.recent).answered(request, Arc::clone(&text));
        for url in &connection.relays {
            self.send_to(url, Arc::clone(&text));
        }
    }

    pub(super) fn send_to(&self, url: &Url, text: Arc<str>) {
        if let Some(relay) = lock(&self.relays).get(url)
            && relay.outbox.try_send(text).is_err()
        {
            tracing::warn!(target: "berth::nwc", relay = %url, "the relay's outbox is full; an answer was dropped");
        }
    }

    /// Answer a payment from its record: its answer if it has one; otherwise wait (in
    /// the background) for the payment's state, record it and answer.
    pub(super) fn answer_recorded(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
        to: Answering,
        record: NwcRequestRecord,
    ) {
        let encryption = if record.nip04 {
            Encryption::Nip04
        } else {
            Encryption::Nip44
        };
        match record.answer {
            Some(ref answer) => self.reply(connection, &to, encryption, answer),
            // Held for the owner's approval: its approval says when it is answered.
            None if let Some(approval) = record.approval => {
                self.answer_held(connection, to, record, approval);
            }
            None => {
                let this = Arc::clone(self);
                let connection = Arc::clone(connection);
                let mut settling = lock(&self.settling);
                while settling.try_join_next().is_some() {}
                settling.spawn(async move {
                    if let Some(answer) = this.settle(&to, &record).await {
                        this.reply(&connection, &to, encryption, &answer);
                    }
                });
            }
        }
    }

    /// At start: the payments a stop left unanswered, each resolved from bark's state
    /// and answered.
    pub(super) async fn finish_unanswered(self: Arc<Self>) {
        let unanswered = match self.store.nwc_unanswered().await {
            Ok(unanswered) => unanswered,
            Err(e) => {
                tracing::error!(target: "berth::nwc", error = %e, "cannot list unanswered payments");
                return;
            }
        };
        // The requests this pass took over (a `multi_pay_invoice` may have several
        // unanswered payments); a request a relay delivered first is its handler's.
        let mut taken = HashSet::new();
        for (key, record) in unanswered {
            let Some(to) = Answering::of_record(key, &record) else {
                continue;
            };
            if !taken.contains(&to.request) {
                if lock(&self.recent).claim(to.request).is_err() {
                    continue;
                }
                taken.insert(to.request);
            }
            let snapshot = self.snapshot.borrow().clone();
            let Some(connection) = snapshot
                .by_service
                .values()
                .find(|c| c.record.id == record.connection_id)
                .cloned()
            else {
                continue;
            };
            tracing::info!(target: "berth::nwc", id = %to.request, "finishing a payment left unanswered by a stop");
            self.answer_recorded(&connection, to, record);
        }
    }
}

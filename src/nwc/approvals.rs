//! A connection's payments held for the owner's approval: the owner's rules for a
//! connection (`docs/household.md`) may say that a payment over a limit waits for the
//! owner instead of being refused, as a paired device's does.
//!
//! NIP-47 has no answer for "wait": the app's request stays unanswered (its record
//! marked with the approval, [`NwcRequestRecord::approval`], so that neither a copy of
//! the request nor a restart answers it from bark's state) until the owner decides.
//! Approved, the payment runs once, as it was asked (the invoice kept on the approval),
//! and the app gets its answer then: the preimage, or why it failed. Denied or expired,
//! the app gets `QUOTA_EXCEEDED` saying so, and the connection's budget gets the amount
//! back. An app that stopped waiting finds the answer on its relays, as NIP-47 answers
//! are events. `api::approvals::Runner` calls these when the owner decides.

use std::sync::Arc;

use serde_json::json;

use crate::engine::EngineError;
use crate::engine::spending::Spender;
use crate::engine::spending::approvals::{Approval, parse_id};
use crate::nwc::errors::failure;
use crate::nwc::methods::Outcome;
use crate::nwc::payments::{Answering, PayInvoice};
use crate::nwc::protocol::{Code, Encryption, Failure, Response};
use crate::nwc::{Connection, Nwc, budget};
use crate::store::approvals::{HeldAnswerRecord, HeldRequestRecord, state};
use crate::store::nwc::NwcRequestRecord;

/// What became of a payment held for approval, as its record's answer is concerned.
enum Held {
    /// The owner has not decided, or the approved payment is running: its end answers.
    Waiting,
    /// Denied or expired: answer so.
    Ended(Box<Approval>),
    /// It ran (or a stop cut its run short): bark's state answers.
    Ran,
}

fn answer(status: u16, body: serde_json::Value) -> HeldAnswerRecord {
    HeldAnswerRecord {
        status,
        body: body.to_string(),
    }
}

impl Nwc {
    /// The connection `id`, as the relays serve it.
    fn connection(&self, id: &str) -> Option<Arc<Connection>> {
        self.snapshot
            .borrow()
            .by_service
            .values()
            .find(|c| c.record.id == id)
            .cloned()
    }

    /// A payment the owner's rules stopped before anything was paid: refused
    /// (`QUOTA_EXCEEDED`, naming the rule), or held for the owner's approval, in which
    /// case it is not answered now.
    pub(super) async fn stopped(&self, to: &Answering, p: &PayInvoice, e: EngineError) -> Outcome {
        let asked = match e {
            EngineError::NeedsApproval(asked) => asked,
            EngineError::Refused(message) => {
                let refused = Failure::new(Code::QuotaExceeded, message);
                return self.finish(to, Err(refused), false).await;
            }
            e => return self.finish(to, Err(failure(e)), false).await,
        };
        let request = HeldRequestRecord {
            method: to.method.into(),
            path: String::new(),
            body: serde_json::to_string(p).unwrap_or_default(),
            idempotency_key: None,
            nwc_key: Some(to.key),
        };
        let destination = Some(p.invoice.trim().chars().take(512).collect());
        let approval = match self
            .engine
            .approvals()
            .hold(*asked, destination, request)
            .await
        {
            Ok(approval) => approval,
            // Too many waiting already: refused, naming the rule.
            Err(e) => return self.finish(to, Err(failure(e)), false).await,
        };
        let Some(id) = parse_id(&approval.id) else {
            return Outcome::Recorded;
        };
        // Should this fail, the request is answered from bark's state (never paid:
        // `PAYMENT_FAILED`), and the approval, if approved, finds it answered and does
        // not run.
        if let Err(e) = self.store.nwc_await_approval(to.key, id).await {
            tracing::error!(target: "berth::nwc", error = %e, "cannot mark a payment as waiting for approval");
        }
        tracing::info!(target: "berth::nwc", approval = %approval.id, "a payment waits for the owner's approval");
        Outcome::Recorded
    }

    /// Run the payment the owner approved, once, and answer the app; the approval's
    /// record of it (the NIP-47 response: 200 with a result, 202 while the payment is
    /// under way, 422 with an error).
    pub async fn run_approved(
        self: &Arc<Self>,
        approval_id: [u8; 16],
        approval: &Approval,
    ) -> HeldAnswerRecord {
        let r = &approval.record;
        let unknown = |message: &str| answer(422, json!({ "message": message }));
        let Some(key) = r.request.nwc_key else {
            return unknown("not a Nostr Wallet Connect payment");
        };
        let record = match self.store.nwc_request(key).await {
            Ok(Some(record)) => record,
            Ok(None) => return unknown("the app's request is no longer kept"),
            Err(e) => {
                tracing::error!(target: "berth::nwc", error = %e, "cannot read an approved payment's request");
                return unknown("the app's request could not be read");
            }
        };
        if record.answer.is_some() {
            return unknown("the app's request was answered already; the payment was not made");
        }
        let Some(to) = Answering::of_record(key, &record) else {
            return unknown("the app's request is not readable");
        };
        let encryption = encryption_of(&record);
        let connection = self.connection(&record.connection_id);
        let usable = connection.as_ref().map_or_else(
            || {
                Err(Failure::new(
                    Code::Unauthorized,
                    "this connection was removed by the wallet's owner",
                ))
            },
            |c| budget::usable(&c.record, chrono::Utc::now()),
        );
        let held = serde_json::from_str::<PayInvoice>(&r.request.body)
            .map_err(|e| Failure::new(Code::Internal, format!("the held payment: {e}")));
        let outcome = match (connection.as_ref(), usable, held) {
            (Some(connection), Ok(()), Ok(p)) => {
                let spender = Spender::Approved {
                    device: r.device_id.clone(),
                    approval: approval_id,
                };
                let running = NwcRequestRecord {
                    approval: None,
                    ..record
                };
                self.make(connection, &to, running, p, &spender).await
            }
            (_, Err(refused), _) | (_, _, Err(refused)) => {
                self.finish(&to, Err(refused), false).await
            }
            (None, Ok(()), Ok(_)) => Outcome::Recorded,
        };
        match outcome {
            Outcome::Answer(result) => {
                let status = if result.is_ok() { 200 } else { 422 };
                let content = Response::of(to.method, result).to_json();
                if let Some(connection) = &connection {
                    self.reply(connection, &to, encryption, &content);
                }
                HeldAnswerRecord {
                    status,
                    body: content,
                }
            }
            Outcome::Recorded => answer(
                202,
                json!({ "message": "the payment is under way; the app is answered when it ends" }),
            ),
        }
    }

    /// The owner denied the payment of `approval`, or it expired: the app is answered
    /// `QUOTA_EXCEEDED`, saying so, and the connection's budget gets the amount back.
    pub async fn approval_ended(&self, approval: &Approval) {
        let Some(key) = approval.record.request.nwc_key else {
            return;
        };
        let record = match self.store.nwc_request(key).await {
            Ok(Some(record)) if record.answer.is_none() => record,
            Ok(_) => return,
            Err(e) => {
                tracing::error!(target: "berth::nwc", error = %e, "cannot read a held payment's request");
                return;
            }
        };
        let Some(to) = Answering::of_record(key, &record) else {
            return;
        };
        let message = approval.refusal();
        let outcome = Err(Failure::new(Code::QuotaExceeded, message));
        if let Outcome::Answer(outcome) = self.finish(&to, outcome, false).await
            && let Some(connection) = self.connection(&record.connection_id)
        {
            let content = Response::of(to.method, outcome).to_json();
            self.reply(&connection, &to, encryption_of(&record), &content);
        }
    }

    /// An approved payment whose run a stop cut short: answered from bark's state.
    pub async fn resume_approved(self: &Arc<Self>, approval: &Approval) {
        let Some(key) = approval.record.request.nwc_key else {
            return;
        };
        if let Ok(Some(record)) = self.store.nwc_request(key).await
            && record.answer.is_none()
            && let Some(to) = Answering::of_record(key, &record)
            && let Some(connection) = self.connection(&record.connection_id)
        {
            let record = NwcRequestRecord {
                approval: None,
                ..record
            };
            self.answer_recorded(&connection, to, record);
        }
    }

    /// Answer a held payment's record as its approval stands (in the background):
    /// nothing while it waits, `QUOTA_EXCEEDED` once denied or expired, bark's state
    /// once it ran.
    pub(super) fn answer_held(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
        to: Answering,
        record: NwcRequestRecord,
        approval: [u8; 16],
    ) {
        let this = Arc::clone(self);
        let connection = Arc::clone(connection);
        let mut settling = crate::nwc::lock(&self.settling);
        while settling.try_join_next().is_some() {}
        settling.spawn(async move {
            match this.held(approval).await {
                Held::Waiting => {}
                Held::Ended(approval) => this.approval_ended(&approval).await,
                Held::Ran => {
                    let record = NwcRequestRecord {
                        approval: None,
                        ..record
                    };
                    this.answer_recorded(&connection, to, record);
                }
            }
        });
    }

    async fn held(&self, id: [u8; 16]) -> Held {
        match self.engine.approvals().get(id).await {
            Ok(Some(approval)) => match approval.record.state.as_str() {
                state::DENIED | state::EXPIRED => Held::Ended(Box::new(approval)),
                state::EXECUTED => Held::Ran,
                _ => Held::Waiting,
            },
            // Forgotten (only ended approvals are), or not readable now: bark's state
            // is what is known.
            Ok(None) => Held::Ran,
            Err(e) => {
                tracing::warn!(target: "berth::nwc", error = %e, "cannot read a payment's approval");
                Held::Waiting
            }
        }
    }
}

fn encryption_of(record: &NwcRequestRecord) -> Encryption {
    if record.nip04 {
        Encryption::Nip04
    } else {
        Encryption::Nip44
    }
}

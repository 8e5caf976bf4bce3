//! Paying: `pay_invoice` and `multi_pay_invoice`, each payment recorded before bark is
//! asked to pay and answered from its record after (`mod.rs` says why), and marked in
//! the wallet's history with the connection that made it.
//!
//! A payment's record is stored under the request's id; each invoice of a
//! `multi_pay_invoice` under a key made from the request's id and the invoice's `d`
//! (its `id`, or its payment hash), so a request delivered again finds every one of
//! its payments, and each answer carries its `d` tag.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use ark::lightning::{Bolt11Invoice, PaymentHash};
use bark::actions::lightning::pay::LightningSendState;
use bitcoin::hashes::{Hash, sha256};
use chrono::Utc;
use nostr::{Event, EventId};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::engine::EngineError;
use crate::engine::lightning::LightningDestination;
use crate::engine::spending::{PaymentKind, Spender};
use crate::nwc::errors::{failure, invalid, params, payment_failure, whole_sats};
use crate::nwc::methods::Outcome;
use crate::nwc::protocol::{self, Code, Failure, Response};
use crate::nwc::transactions::METADATA_KEY;
use crate::nwc::{Connection, Nwc, budget, lock};
use crate::store::nwc::{Begun, NwcRequestRecord};

/// How often a payment under way is looked at.
const SETTLE_POLL: Duration = Duration::from_secs(2);
/// Invoices one `multi_pay_invoice` may carry.
pub const MAX_INVOICES: usize = 20;
/// The longest metadata an app may attach to a payment, as JSON (the spec's bound:
/// longer is dropped, not refused).
const MAX_METADATA: usize = 4096;

/// An app's `pay_invoice` metadata as kept: a JSON object of at most [`MAX_METADATA`]
/// characters (as NIP-47 bounds it); anything else is dropped.
fn within_bound(metadata: Option<Value>) -> Option<Value> {
    metadata.filter(|m| {
        m.is_object() && serde_json::to_string(m).is_ok_and(|s| s.chars().count() <= MAX_METADATA)
    })
}
/// How long berthd looks for a payment's movement to mark it with its connection.
const TAG_WITHIN: Duration = Duration::from_secs(60);

/// One invoice to pay, as the app sent it (and as a payment held for the owner's
/// approval keeps it, `nwc::approvals`).
#[derive(Deserialize, Serialize)]
pub(super) struct PayInvoice {
    /// `multi_pay_invoice` only: the `d` of its answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub invoice: String,
    /// msat, for an invoice without an amount.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

#[derive(Deserialize)]
struct MultiPayInvoice {
    invoices: Vec<PayInvoice>,
}

/// Where a payment's answer goes.
#[derive(Debug, Clone)]
pub(super) struct Answering {
    /// The request it answers (the response's `e` tag).
    pub request: EventId,
    /// What its record is stored under.
    pub key: [u8; 32],
    /// `multi_pay_invoice`: the invoice's `id` or payment hash (the `d` tag).
    pub d: Option<String>,
    pub method: &'static str,
}

impl Answering {
    /// The answer to request `request` itself.
    pub(super) fn to(request: EventId) -> Answering {
        Answering {
            request,
            key: request.to_bytes(),
            d: None,
            method: "",
        }
    }

    /// Where an answer goes for the record stored under `key`.
    pub(super) fn of_record(key: [u8; 32], record: &NwcRequestRecord) -> Option<Answering> {
        let request = EventId::from_slice(&record.request.unwrap_or(key)).ok()?;
        Some(Answering {
            request,
            key,
            d: record.d.clone(),
            method: if record.d.is_some() {
                "multi_pay_invoice"
            } else {
                "pay_invoice"
            },
        })
    }
}

impl PayInvoice {
    /// The invoice, the amount it pays (msat) and the amount asked for an invoice
    /// without one, or why it cannot be paid.
    pub(super) fn read(&self) -> Result<(Bolt11Invoice, u64, Option<bitcoin::Amount>), Failure> {
        let invoice = Bolt11Invoice::from_str(self.invoice.trim()).map_err(|e| {
            invalid(format!(
                "invoice: not a BOLT11 invoice ({e}); offers are not served"
            ))
        })?;
        let (amount_msat, explicit) = match (invoice.amount_milli_satoshis(), self.amount) {
            (Some(msat), _) => (msat, None),
            (None, Some(msat)) => (msat, Some(whole_sats(msat)?)),
            (None, None) => {
                return Err(invalid("the invoice has no amount: give amount (msat)"));
            }
        };
        if amount_msat == 0 {
            return Err(invalid("the amount is zero"));
        }
        Ok((invoice, amount_msat, explicit))
    }
}

/// The record key of the invoice `d` of request `request`.
fn item_key(request: EventId, d: &str) -> [u8; 32] {
    let mut bytes = request.to_bytes().to_vec();
    bytes.extend_from_slice(d.as_bytes());
    sha256::Hash::hash(&bytes).to_byte_array()
}

impl Nwc {
    pub(super) async fn pay_invoice(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
        event: &Event,
        encryption: protocol::Encryption,
        params: Value,
    ) -> Outcome {
        let p: PayInvoice = match self::params(params) {
            Ok(p) => p,
            Err(failure) => return Outcome::Answer(Err(failure)),
        };
        let to = Answering {
            request: event.id,
            key: event.id.to_bytes(),
            d: None,
            method: "pay_invoice",
        };
        self.pay(connection, &to, encryption, p).await
    }

    /// Several invoices, each paid (or refused) on its own and answered with its own
    /// response, in the order given; the limits and the budget apply to each in turn.
    pub(super) async fn multi_pay_invoice(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
        event: &Event,
        encryption: protocol::Encryption,
        params: Value,
    ) -> Outcome {
        let p: MultiPayInvoice = match self::params(params) {
            Ok(p) => p,
            Err(failure) => return Outcome::Answer(Err(failure)),
        };
        if p.invoices.is_empty() || p.invoices.len() > MAX_INVOICES {
            return Outcome::Answer(Err(invalid(format!("invoices: 1 to {MAX_INVOICES}"))));
        }
        for (index, item) in p.invoices.into_iter().enumerate() {
            // The spec's `d`: the invoice's `id`, or its payment hash; the position for
            // an invoice that cannot be read (its answer says why).
            let d = item.id.clone().unwrap_or_else(|| {
                Bolt11Invoice::from_str(item.invoice.trim())
                    .map(|i| PaymentHash::from(&i).to_string())
                    .unwrap_or_else(|_| index.to_string())
            });
            let to = Answering {
                request: event.id,
                key: item_key(event.id, &d),
                d: Some(d),
                method: "multi_pay_invoice",
            };
            if let Outcome::Answer(outcome) = self.pay(connection, &to, encryption, item).await {
                let content = Response::of(to.method, outcome).to_json();
                self.reply(connection, &to, encryption, &content);
            }
        }
        Outcome::Recorded
    }

    /// Pay one invoice: the connection's limits and budget first (one transaction that
    /// also records the request), then the owner's rules for it, then the balance, then
    /// bark.
    async fn pay(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
        to: &Answering,
        encryption: protocol::Encryption,
        p: PayInvoice,
    ) -> Outcome {
        let (invoice, amount_msat, explicit) = match p.read() {
            Ok(prepared) => prepared,
            Err(failure) => return Outcome::Answer(Err(failure)),
        };
        let hash = PaymentHash::from(&invoice);
        let now = Utc::now();
        let pending = NwcRequestRecord {
            connection_id: connection.record.id.clone(),
            received_at_us: u64::try_from(now.timestamp_micros()).unwrap_or(0),
            method: to.method.into(),
            reserved_msat: amount_msat,
            budget_period_start_us: 0,
            payment_hash: Some(hash.into()),
            nip04: encryption == protocol::Encryption::Nip04,
            answer: None,
            request: (to.key != to.request.to_bytes()).then(|| to.request.to_bytes()),
            d: to.d.clone(),
            approval: None,
        };
        let recorded = pending.clone();
        let begun = self
            .store
            .nwc_begin_payment(to.key, &connection.record.id, move |c| {
                budget::take(c, amount_msat, now)?;
                Ok(NwcRequestRecord {
                    // What it took is given back only within the same period.
                    budget_period_start_us: c.budget_period_start_us,
                    ..recorded
                })
            })
            .await;
        let record = match begun {
            Ok(Begun::New(_)) => pending,
            Ok(Begun::Seen(record)) => {
                self.answer_recorded(connection, to.clone(), record);
                return Outcome::Recorded;
            }
            Ok(Begun::Refused(failure)) => return Outcome::Answer(Err(failure)),
            // Revoked and purged between the relay and here: nobody to answer.
            Ok(Begun::NoConnection) => return Outcome::Recorded,
            Err(e) => {
                tracing::error!(target: "berth::nwc", error = %e, "cannot record a payment");
                return Outcome::Answer(Err(Failure::new(
                    Code::Internal,
                    "the wallet cannot record the payment; it was not made",
                )));
            }
        };
        // The owner's rules for this connection (`docs/household.md`), before the
        // wallet is read: over them, the payment is refused, or waits for the owner,
        // even while the wallet is offline. (Its own payment checks them again and
        // reserves the amount, atomically.)
        let spender = Spender::Nwc(connection.record.id.clone());
        let paying = LightningDestination::Bolt11(invoice.clone()).amount(explicit);
        if let Err(e) = self
            .engine
            .spending()
            .precheck(&spender, PaymentKind::Lightning, paying)
            .await
        {
            return self.stopped(to, &p, e).await;
        }
        self.make(connection, to, record, p, &spender).await
    }

    /// Make a payment begun and let through by the connection's limits: the balance,
    /// then bark, then its answer (now, or once bark settles it in the background).
    /// Also how a payment the owner approved runs (`nwc::approvals`).
    pub(super) async fn make(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
        to: &Answering,
        record: NwcRequestRecord,
        p: PayInvoice,
        spender: &Spender,
    ) -> Outcome {
        let (invoice, amount_msat, explicit) = match p.read() {
            Ok(read) => read,
            Err(failure) => return self.finish(to, Err(failure), false).await,
        };
        let hash = PaymentHash::from(&invoice);
        // The balance, after the limits: a payment the wallet cannot make is not begun.
        match self.engine.reads().balance().await {
            Ok(balance) if balance.spendable.to_sat() * 1000 < amount_msat => {
                let failure = Failure::new(
                    Code::InsufficientBalance,
                    format!(
                        "the wallet can spend {} sat; the payment is {} sat",
                        balance.spendable.to_sat(),
                        amount_msat.div_ceil(1000)
                    ),
                );
                return self.finish(to, Err(failure), false).await;
            }
            Ok(_) => {}
            Err(e) => return self.finish(to, Err(failure(e)), false).await,
        }
        let outbound = crate::engine::lnurl::Outbound {
            egress: &self.egress,
            caller: &connection.record.id,
        };
        let paid = self
            .engine
            .lightning()
            .pay(
                &LightningDestination::Bolt11(invoice),
                explicit,
                None,
                outbound,
                spender,
            )
            .await;
        let paid = match paid {
            // Stopped by the owner's rules before anything was paid.
            Err(e @ (EngineError::Refused(_) | EngineError::NeedsApproval(_))) => {
                return self.stopped(to, &p, e).await;
            }
            paid => paid,
        };
        self.mark_in_history(connection, hash, p.metadata);
        match paid {
            Ok(started) if started.preimage.is_some() => {
                let preimage = started.preimage.map(|p| p.to_string());
                self.finish(to, Ok(json!({ "preimage": preimage })), true)
                    .await
            }
            // Under way, or failed in a way that may have left it under way: bark's
            // state decides, in the background.
            _ => {
                self.answer_recorded(connection, to.clone(), record);
                Outcome::Recorded
            }
        }
    }

    /// Record a payment's answer (the budget given back unless `paid`) and hand it on.
    pub(super) async fn finish(
        &self,
        to: &Answering,
        outcome: Result<Value, Failure>,
        paid: bool,
    ) -> Outcome {
        let content = Response::of(to.method, outcome.clone()).to_json();
        if let Err(e) = self.store.nwc_finish_payment(to.key, content, paid).await {
            tracing::error!(target: "berth::nwc", error = %e, "cannot record a payment's answer");
        }
        Outcome::Answer(outcome)
    }

    /// Wait for bark to settle the payment `record` began, record the answer and
    /// return it (`None` when berthd stops first). Paid: the preimage; unknown to
    /// bark (refused, or never begun): `PAYMENT_FAILED`, the budget given back.
    pub(super) async fn settle(&self, to: &Answering, record: &NwcRequestRecord) -> Option<String> {
        let hash = PaymentHash::from(record.payment_hash?);
        loop {
            let outcome = match self.engine.lightning().send(hash).await {
                Ok(lookup) => match lookup.state {
                    LightningSendState::Paid(paid) => {
                        Some((Ok(json!({ "preimage": paid.preimage.to_string() })), true))
                    }
                    LightningSendState::InProgress(_) => None,
                    LightningSendState::Unknown => Some((
                        Err(payment_failure(EngineError::WrongState(format!(
                            "the Lightning payment {hash} failed; the funds were returned"
                        )))),
                        false,
                    )),
                },
                // The wallet is not open (yet): wait for it.
                Err(EngineError::NotLoaded | EngineError::Locked | EngineError::NoWallet) => None,
                Err(e) => {
                    tracing::debug!(target: "berth::nwc", error = %e, "cannot read a payment's state yet");
                    None
                }
            };
            if let Some((outcome, paid)) = outcome {
                let content = Response::of(&record.method, outcome).to_json();
                if let Err(e) = self
                    .store
                    .nwc_finish_payment(to.key, content.clone(), paid)
                    .await
                {
                    tracing::error!(target: "berth::nwc", error = %e, "cannot record a payment's answer");
                }
                return Some(content);
            }
            tokio::time::sleep(SETTLE_POLL).await;
        }
    }

    /// Mark the payment's movement with the connection that made it (and the
    /// metadata its app sent, when within the spec's bound), so that the history, the
    /// events and `list_transactions` say so. In the background: bark makes the
    /// movement as the payment begins, and the answer need not wait for this.
    fn mark_in_history(
        self: &Arc<Self>,
        connection: &Connection,
        hash: PaymentHash,
        metadata: Option<Value>,
    ) {
        let metadata = within_bound(metadata);
        let mut mark = json!({
            "connection_id": connection.record.id,
            "connection": connection.record.name,
        });
        if let Some(metadata) = metadata {
            mark["metadata"] = metadata;
        }
        let patch = json!({ METADATA_KEY: mark });
        let this = Arc::clone(self);
        let mut settling = lock(&self.settling);
        while settling.try_join_next().is_some() {}
        settling.spawn(async move {
            let lightning = this.engine.lightning();
            let deadline = tokio::time::Instant::now() + TAG_WITHIN;
            while tokio::time::Instant::now() < deadline {
                match lightning.send_movement(hash).await {
                    Ok(Some(movement)) => {
                        if let Err(e) = this
                            .engine
                            .ark()
                            .patch_movement_metadata(movement.id.0, &patch)
                            .await
                        {
                            tracing::warn!(target: "berth::nwc", error = %e,
                                "cannot mark a payment with its connection");
                        }
                        return;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::debug!(target: "berth::nwc", error = %e, "cannot read a payment's movement yet");
                    }
                }
                tokio::time::sleep(SETTLE_POLL).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_apps_metadata_is_kept_up_to_4096_characters() {
        // {"note":"…"} is 11 characters around the note.
        let of = |n: usize| Some(json!({ "note": "é".repeat(n) }));
        assert_eq!(
            within_bound(of(4096 - 11)),
            of(4096 - 11),
            "at the bound: kept"
        );
        assert_eq!(within_bound(of(4096 - 10)), None, "one over: dropped");
        assert_eq!(within_bound(Some(json!("a string"))), None, "not an object");
        assert_eq!(within_bound(None), None);
    }
}

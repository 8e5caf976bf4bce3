//! The NIP-47 methods, on the engine. Amounts are millisatoshis on the wire, as the
//! spec says; the wallet pays and receives whole satoshis.
//!
//! How Berth's errors become the spec's codes (`docs/nwc.md` has the table):
//! - over the per-payment limit or the budget: `QUOTA_EXCEEDED`, checked before the
//!   balance; more than the spendable balance: `INSUFFICIENT_BALANCE`;
//! - a payment the Ark server refused or that failed on the way (its funds back):
//!   `PAYMENT_FAILED`, and for a payment any other failure once it may have started;
//! - a request the wallet cannot take (a malformed invoice, one for another network,
//!   no amount): `OTHER`, with the reason;
//! - the wallet not there (none, locked, not loaded yet) or its Ark server
//!   unreachable: `INTERNAL`, with a message that says which; a busy wallet:
//!   `RATE_LIMITED`;
//! - an unknown invoice: `NOT_FOUND`.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use ark::lightning::{Bolt11Invoice, PaymentHash};
use bark::actions::lightning::pay::LightningSendState;
use bark::actions::lightning::receive::LightningReceiveState;
use bitcoin::Amount;
use chrono::Utc;
use nostr::{Event, EventId};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::engine::EngineError;
use crate::engine::lightning::LightningDestination;
use crate::nwc::protocol::{self, Code, Failure, Response};
use crate::nwc::{Connection, Nwc, budget};
use crate::store::nwc::{Begun, NwcRequestRecord};

/// What executing a request came to.
pub(super) enum Outcome {
    /// The answer to send.
    Answer(Result<Value, Failure>),
    /// A payment whose answer comes from its record (already answered, or finished
    /// by whoever holds it).
    Recorded,
}

/// How often a payment under way is looked at.
const SETTLE_POLL: Duration = Duration::from_secs(2);

fn invalid(message: impl Into<String>) -> Failure {
    Failure::new(Code::Other, message)
}

/// Berth's error as the spec's code, for a method that does not spend.
fn failure(e: EngineError) -> Failure {
    let message = e.to_string();
    let code = match e {
        EngineError::InvalidRequest(_) => Code::Other,
        EngineError::InsufficientFunds(_) => Code::InsufficientBalance,
        EngineError::Busy(_) => Code::RateLimited,
        _ => Code::Internal,
    };
    Failure::new(code, message)
}

/// Berth's error as the spec's code, for a payment once it may have begun.
fn payment_failure(e: EngineError) -> Failure {
    match e {
        EngineError::InvalidRequest(m) => Failure::new(Code::Other, m),
        EngineError::InsufficientFunds(m) => Failure::new(Code::InsufficientBalance, m),
        e => Failure::new(Code::PaymentFailed, e.to_string()),
    }
}

fn network_name(network: bitcoin::Network) -> &'static str {
    match network {
        bitcoin::Network::Bitcoin => "mainnet",
        bitcoin::Network::Signet => "signet",
        bitcoin::Network::Regtest => "regtest",
        _ => "testnet",
    }
}

#[derive(Deserialize)]
struct PayInvoice {
    invoice: String,
    /// msat, for an invoice without an amount.
    amount: Option<u64>,
}

#[derive(Deserialize)]
struct MakeInvoice {
    amount: u64,
    description: Option<String>,
    description_hash: Option<String>,
}

#[derive(Deserialize)]
struct LookupInvoice {
    payment_hash: Option<String>,
    invoice: Option<String>,
}

fn params<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, Failure> {
    let value = if value.is_null() { json!({}) } else { value };
    serde_json::from_value(value).map_err(|e| invalid(format!("params: {e}")))
}

fn whole_sats(msat: u64) -> Result<Amount, Failure> {
    if !msat.is_multiple_of(1000) {
        return Err(invalid(format!(
            "{msat} msat is not a whole number of satoshis; this wallet moves whole satoshis"
        )));
    }
    Ok(Amount::from_sat(msat / 1000))
}

impl Nwc {
    pub(super) async fn execute(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
        event: &Event,
        encryption: protocol::Encryption,
        request: protocol::Request,
    ) -> Outcome {
        let answer = match request.method.as_str() {
            "get_info" => self.get_info(connection).await,
            "get_balance" => self
                .engine
                .reads()
                .balance()
                .await
                .map(|b| json!({ "balance": b.spendable.to_sat() * 1000 }))
                .map_err(failure),
            // The stored record: the snapshot's is as of the last reload, and payments
            // change the budget in the store.
            "get_budget" => match self.store.nwc_connections().await {
                Ok(all) => Ok(all
                    .iter()
                    .find(|c| c.id == connection.record.id)
                    .map(|c| budget::report(c, Utc::now()))
                    .unwrap_or_else(|| json!({}))),
                Err(e) => Err(Failure::new(
                    Code::Internal,
                    format!("reading the budget: {e}"),
                )),
            },
            "make_invoice" => self.make_invoice(request.params).await,
            "lookup_invoice" => self.lookup_invoice(request.params).await,
            "pay_invoice" => {
                return self
                    .pay_invoice(connection, event, encryption, request.params)
                    .await;
            }
            other => Err(Failure::new(
                Code::NotImplemented,
                format!("{other} is not served by this wallet"),
            )),
        };
        Outcome::Answer(answer)
    }

    /// What the wallet is. No `pubkey`: an Ark wallet has no Lightning node key
    /// (`docs/nwc.md`).
    async fn get_info(&self, connection: &Connection) -> Result<Value, Failure> {
        let network = self.engine.network().await.map_err(failure)?;
        let mut info = json!({
            "alias": "Berth",
            "network": network_name(network),
            "methods": connection.record.methods,
            "notifications": [],
        });
        if let Ok(height) = self.engine.onchain().tip().await {
            info["block_height"] = json!(height);
        }
        Ok(info)
    }

    async fn make_invoice(&self, params: Value) -> Result<Value, Failure> {
        let p: MakeInvoice = self::params(params)?;
        if p.description_hash.is_some() {
            return Err(Failure::new(
                Code::NotImplemented,
                "description_hash: this wallet's invoices carry a description only",
            ));
        }
        let amount = whole_sats(p.amount)?;
        let invoice = self
            .engine
            .lightning()
            .create_invoice(amount, p.description.clone(), None)
            .await
            .map_err(failure)?;
        Ok(incoming(&invoice, None, None))
    }

    async fn lookup_invoice(&self, params: Value) -> Result<Value, Failure> {
        let p: LookupInvoice = self::params(params)?;
        let hash = match (&p.payment_hash, &p.invoice) {
            (Some(hash), _) => PaymentHash::from_str(hash)
                .map_err(|_| invalid("payment_hash: 64 hex characters"))?,
            (None, Some(invoice)) => PaymentHash::from(
                &Bolt11Invoice::from_str(invoice).map_err(|e| invalid(format!("invoice: {e}")))?,
            ),
            (None, None) => return Err(invalid("give payment_hash or invoice")),
        };
        let lightning = self.engine.lightning();
        match lightning.receive(hash.into()).await.map_err(failure)? {
            Some(LightningReceiveState::Settled(settled)) => {
                return Ok(incoming(
                    &settled.invoice,
                    Some(settled.preimage.to_string()),
                    Some(settled.settled_at.timestamp()),
                ));
            }
            Some(LightningReceiveState::InProgress(receive)) => {
                return Ok(incoming(&receive.invoice, None, None));
            }
            None => {}
        }
        let send = lightning.send(hash).await.map_err(failure)?;
        let mut out = json!({ "type": "outgoing", "payment_hash": hash.to_string() });
        match send.state {
            LightningSendState::Paid(paid) => {
                out["preimage"] = json!(paid.preimage.to_string());
                out["settled_at"] = json!(paid.paid_at.timestamp());
                out["state"] = json!("settled");
                // What was paid, from the payment's movement (bark keeps no invoice
                // with a paid send).
                if let Some(m) = lightning.send_movement(hash).await.map_err(failure)? {
                    if let Some(to) = m.sent_to.first() {
                        out["invoice"] = json!(to.destination.value_string());
                        out["amount"] = json!(to.amount.to_sat() * 1000);
                    }
                    out["fees_paid"] = json!(m.offchain_fee.to_sat() * 1000);
                    out["created_at"] = json!(m.time.created_at.timestamp());
                }
            }
            LightningSendState::InProgress(send) => {
                out["invoice"] = json!(send.invoice.to_string());
                out["amount"] = json!(send.payment_amount.to_sat() * 1000);
                out["fees_paid"] = json!(send.fee.to_sat() * 1000);
                out["state"] = json!("pending");
            }
            LightningSendState::Unknown if send.failed_movement.is_some() => {
                out["state"] = json!("failed");
            }
            LightningSendState::Unknown => {
                return Err(Failure::new(
                    Code::NotFound,
                    "no invoice or payment with this hash",
                ));
            }
        }
        Ok(out)
    }

    /// Pay an invoice: the limits and the budget first (one transaction that also
    /// records the request), then the balance, then bark.
    async fn pay_invoice(
        self: &Arc<Self>,
        connection: &Arc<Connection>,
        event: &Event,
        encryption: protocol::Encryption,
        params: Value,
    ) -> Outcome {
        let prepared = (|| {
            let p: PayInvoice = self::params(params)?;
            let invoice = Bolt11Invoice::from_str(p.invoice.trim()).map_err(|e| {
                invalid(format!(
                    "invoice: not a BOLT11 invoice ({e}); offers are not served"
                ))
            })?;
            let (amount_msat, explicit) = match (invoice.amount_milli_satoshis(), p.amount) {
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
        })();
        let (invoice, amount_msat, explicit) = match prepared {
            Ok(prepared) => prepared,
            Err(failure) => return Outcome::Answer(Err(failure)),
        };
        let hash = PaymentHash::from(&invoice);
        let nip04 = encryption == protocol::Encryption::Nip04;
        let now = Utc::now();
        let pending = NwcRequestRecord {
            connection_id: connection.record.id.clone(),
            received_at_us: u64::try_from(now.timestamp_micros()).unwrap_or(0),
            method: "pay_invoice".into(),
            reserved_msat: amount_msat,
            budget_period_start_us: 0,
            payment_hash: Some(hash.into()),
            nip04,
            answer: None,
        };
        let recorded = pending.clone();
        let begun = self
            .store
            .nwc_begin_payment(event.id.to_bytes(), &connection.record.id, move |c| {
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
                self.answer_recorded(connection, event.id, record);
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
                return self.finish(event.id, Err(failure), false).await;
            }
            Ok(_) => {}
            Err(e) => return self.finish(event.id, Err(failure(e)), false).await,
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
            )
            .await;
        match paid {
            Ok(started) if started.preimage.is_some() => {
                let preimage = started.preimage.map(|p| p.to_string());
                self.finish(event.id, Ok(json!({ "preimage": preimage })), true)
                    .await
            }
            // Under way, or failed in a way that may have left it under way: bark's
            // state decides, in the background.
            _ => {
                self.answer_recorded(connection, event.id, record);
                Outcome::Recorded
            }
        }
    }

    /// Record a payment's answer (the budget given back unless `paid`) and hand it on.
    async fn finish(&self, id: EventId, outcome: Result<Value, Failure>, paid: bool) -> Outcome {
        let content = Response::of("pay_invoice", outcome.clone()).to_json();
        if let Err(e) = self
            .store
            .nwc_finish_payment(id.to_bytes(), content, paid)
            .await
        {
            tracing::error!(target: "berth::nwc", error = %e, "cannot record a payment's answer");
        }
        Outcome::Answer(outcome)
    }

    /// Wait for bark to settle the payment `record` began, record the answer and
    /// return it (`None` when berthd stops first). Paid: the preimage; unknown to
    /// bark (refused, or never begun): `PAYMENT_FAILED`, the budget given back.
    pub(super) async fn settle(&self, id: EventId, record: &NwcRequestRecord) -> Option<String> {
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
                    .nwc_finish_payment(id.to_bytes(), content.clone(), paid)
                    .await
                {
                    tracing::error!(target: "berth::nwc", error = %e, "cannot record a payment's answer");
                }
                return Some(content);
            }
            tokio::time::sleep(SETTLE_POLL).await;
        }
    }
}

/// An invoice of this wallet as NIP-47 describes a transaction.
fn incoming(invoice: &Bolt11Invoice, preimage: Option<String>, settled_at: Option<i64>) -> Value {
    let created = invoice.duration_since_epoch().as_secs();
    let mut out = json!({
        "type": "incoming",
        "invoice": invoice.to_string(),
        "payment_hash": PaymentHash::from(invoice).to_string(),
        "amount": invoice.amount_milli_satoshis().unwrap_or(0),
        "fees_paid": 0,
        "created_at": created,
        "expires_at": created + invoice.expiry_time().as_secs(),
        "state": if settled_at.is_some() { "settled" } else { "pending" },
    });
    if let lightning_invoice::Bolt11InvoiceDescriptionRef::Direct(d) = invoice.description() {
        out["description"] = json!(d.to_string());
    }
    if let Some(preimage) = preimage {
        out["preimage"] = json!(preimage);
    }
    if let Some(at) = settled_at {
        out["settled_at"] = json!(at);
    }
    out
}

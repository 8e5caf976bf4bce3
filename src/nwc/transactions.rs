//! The wallet's Lightning payments as NIP-47 transactions: `list_transactions`, and
//! what the notifications carry.
//!
//! A transaction is read from bark's movement of the payment (`bark.lightning_send`,
//! `bark.lightning_receive`): the invoice, the payment hash and the preimage from the
//! movement, the amount the payee got (or the invoice asked), the fee the wallet paid.
//! Ark and on-chain movements are not NIP-47 transactions (no invoice, no payment
//! hash, which clients require) and are left out; the REST history has them all. An
//! invoice nobody paid yet has no movement: it comes from bark's pending receives.

use std::collections::HashSet;
use std::str::FromStr;

use ark::lightning::{Bolt11Invoice, PaymentHash};
use bark::movement::{Movement, MovementStatus, PaymentMethod};
use bark::subsystem::Subsystem;
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::nwc::Nwc;
use crate::nwc::errors::{failure, invalid, params};
use crate::nwc::protocol::Failure;

/// `list_transactions`' page when the client names none, and the largest it may ask:
/// the spec asks clients for at most 20 so the answer fits in a relay's event.
pub const DEFAULT_LIMIT: usize = 20;
pub const MAX_LIMIT: usize = 50;
/// Movements read from the store at a time.
const SCAN_PAGE: usize = 200;

/// The key under which berthd keeps, in a movement's metadata, which connection made
/// the payment and the metadata its app sent (`{"connection_id", "connection",
/// "metadata"}`).
pub const METADATA_KEY: &str = "nwc";

#[derive(Deserialize)]
struct ListTransactions {
    from: Option<i64>,
    until: Option<i64>,
    limit: Option<usize>,
    offset: Option<usize>,
    #[serde(default)]
    unpaid: bool,
    #[serde(rename = "type")]
    direction: Option<String>,
}

/// A Lightning payment's movement as a NIP-47 transaction; `None` for any other
/// movement.
pub fn of_movement(m: &Movement) -> Option<Value> {
    let (direction, to) = if m.subsystem.name == Subsystem::LIGHTNING_SEND.as_name() {
        ("outgoing", m.sent_to.first())
    } else if m.subsystem.name == Subsystem::LIGHTNING_RECEIVE.as_name() {
        ("incoming", m.received_on.first())
    } else {
        return None;
    };
    let hash = m.metadata.get("payment_hash").and_then(Value::as_str)?;
    let state = match m.status {
        MovementStatus::Pending => "pending",
        MovementStatus::Successful => "settled",
        MovementStatus::Failed | MovementStatus::Canceled => "failed",
    };
    let mut out = json!({
        "type": direction,
        "state": state,
        "payment_hash": hash,
        "amount": to.map_or(0, |d| d.amount.to_sat()) * 1000,
        "fees_paid": m.offchain_fee.to_sat() * 1000,
        "created_at": m.time.created_at.timestamp(),
    });
    if let Some(preimage) = m.metadata.get("payment_preimage").and_then(Value::as_str) {
        out["preimage"] = json!(preimage);
    }
    if state == "settled"
        && let Some(at) = m.time.completed_at
    {
        out["settled_at"] = json!(at.timestamp());
    }
    if let Some(to) = to {
        match &to.destination {
            PaymentMethod::Invoice(invoice) => {
                let text = invoice.to_string();
                if let Ok(bolt11) = Bolt11Invoice::from_str(&text) {
                    describe(&mut out, &bolt11);
                }
                out["invoice"] = json!(text);
            }
            // A Lightning address or LNURL paid: the invoice its server issued is not
            // kept by bark; what was paid is said in `metadata`.
            other => out["metadata"] = json!({ "paid_to": other.value_string() }),
        }
    }
    if let Some(app) = m
        .metadata
        .get(METADATA_KEY)
        .and_then(|n| n.get("metadata"))
        .filter(|v| v.is_object())
    {
        out["metadata"] = app.clone();
    }
    Some(out)
}

/// An invoice of this wallet as NIP-47 describes a transaction.
pub fn incoming(
    invoice: &Bolt11Invoice,
    preimage: Option<String>,
    settled_at: Option<i64>,
) -> Value {
    let mut out = json!({
        "type": "incoming",
        "invoice": invoice.to_string(),
        "payment_hash": PaymentHash::from(invoice).to_string(),
        "amount": invoice.amount_milli_satoshis().unwrap_or(0),
        "fees_paid": 0,
        "created_at": invoice.duration_since_epoch().as_secs(),
        "state": if settled_at.is_some() { "settled" } else { "pending" },
    });
    describe(&mut out, invoice);
    if settled_at.is_none() && invoice.is_expired() {
        out["state"] = json!("expired");
    }
    if let Some(preimage) = preimage {
        out["preimage"] = json!(preimage);
    }
    if let Some(at) = settled_at {
        out["settled_at"] = json!(at);
    }
    out
}

/// An invoice's description and expiry, as the spec names them.
fn describe(out: &mut Value, invoice: &Bolt11Invoice) {
    match invoice.description() {
        lightning_invoice::Bolt11InvoiceDescriptionRef::Direct(d) => {
            out["description"] = json!(d.to_string());
        }
        lightning_invoice::Bolt11InvoiceDescriptionRef::Hash(h) => {
            out["description_hash"] = json!(h.0.to_string());
        }
    }
    let created = invoice.duration_since_epoch().as_secs();
    out["expires_at"] = json!(created + invoice.expiry_time().as_secs());
}

fn created_at(tx: &Value) -> i64 {
    tx["created_at"].as_i64().unwrap_or(0)
}

/// How many transactions one answer holds: the app's `limit` (default
/// [`DEFAULT_LIMIT`]), at most [`MAX_LIMIT`] so that an answer fits a relay's event.
fn page_limit(asked: Option<usize>) -> usize {
    asked.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT)
}

impl Nwc {
    /// The wallet's Lightning payments, newest first: settled ones, and with `unpaid`
    /// also those pending or failed and the invoices not paid yet.
    pub(super) async fn list_transactions(&self, params: Value) -> Result<Value, Failure> {
        let p: ListTransactions = self::params(params)?;
        let limit = page_limit(p.limit);
        let offset = p.offset.unwrap_or(0);
        let from = p.from.unwrap_or(0);
        let until = p.until.unwrap_or_else(|| Utc::now().timestamp());
        let direction = match p.direction.as_deref() {
            None => None,
            Some(d @ ("incoming" | "outgoing")) => Some(d),
            Some(other) => {
                return Err(invalid(format!(
                    "type: {other:?}; give \"incoming\", \"outgoing\" or none"
                )));
            }
        };
        let keep = |tx: &Value| {
            let at = created_at(tx);
            at >= from
                && at <= until
                && direction.is_none_or(|d| tx["type"] == d)
                && (p.unpaid || tx["state"] == "settled")
        };
        // The newest `offset + limit` payments from the movements (ids are given in
        // the order movements are made, so the scan stops at `from`)...
        let wanted = offset.saturating_add(limit);
        let mut found: Vec<Value> = Vec::new();
        let reads = self.engine.reads();
        let mut before = None;
        'scan: while found.len() < wanted {
            let page = reads
                .history_page(before, SCAN_PAGE)
                .await
                .map_err(failure)?;
            let Some(last) = page.last() else { break };
            before = Some(last.id.0);
            for m in &page {
                if m.time.created_at.timestamp() < from {
                    break 'scan;
                }
                if let Some(tx) = of_movement(m).filter(|tx| keep(tx)) {
                    found.push(tx);
                }
            }
        }
        // ...and the invoices nobody has paid yet (a receive under way has its movement).
        if p.unpaid && direction != Some("outgoing") {
            let known: HashSet<String> = found
                .iter()
                .filter_map(|tx| tx["payment_hash"].as_str().map(str::to_owned))
                .collect();
            let receives = self.engine.lightning().receives().await.map_err(failure)?;
            found.extend(
                receives
                    .iter()
                    .filter(|r| !known.contains(&r.payment_hash.to_string()))
                    .map(|r| incoming(&r.invoice, None, None))
                    .filter(|tx| keep(tx)),
            );
        }
        found.sort_by_key(|tx| std::cmp::Reverse(created_at(tx)));
        let transactions: Vec<Value> = found.into_iter().skip(offset).take(limit).collect();
        Ok(json!({ "transactions": transactions }))
    }
}

#[cfg(test)]
mod tests {
    use bark::movement::{MovementDestination, MovementId, MovementSubsystem};
    use bitcoin::Amount;
    use bitcoin::hashes::{Hash, sha256};
    use bitcoin::secp256k1::{Secp256k1, SecretKey};

    use super::*;

    #[test]
    fn an_answer_holds_at_most_fifty_transactions() {
        assert_eq!(page_limit(None), DEFAULT_LIMIT);
        assert_eq!(page_limit(Some(7)), 7);
        assert_eq!(page_limit(Some(50)), 50);
        assert_eq!(page_limit(Some(1_000)), MAX_LIMIT);
        assert_eq!(MAX_LIMIT, 50);
    }

    fn invoice() -> Bolt11Invoice {
        let secp = Secp256k1::new();
        let key = SecretKey::from_slice(&[7; 32]).expect("key");
        lightning_invoice::InvoiceBuilder::new(lightning_invoice::Currency::Regtest)
            .description("coffee".into())
            .payment_hash(sha256::Hash::hash(b"berth"))
            .payment_secret(lightning_invoice::PaymentSecret([7; 32]))
            .current_timestamp()
            .min_final_cltv_expiry_delta(18)
            .amount_milli_satoshis(21_000)
            .build_signed(|hash| secp.sign_ecdsa_recoverable(hash, &key))
            .expect("invoice")
    }

    fn movement(subsystem: Subsystem, status: MovementStatus) -> Movement {
        let kind = MovementSubsystem {
            name: subsystem.as_name().into(),
            kind: "send".into(),
        };
        let mut m = Movement::new(MovementId(7), status, &kind, chrono::Local::now());
        m.metadata.insert(
            "payment_hash".into(),
            json!(PaymentHash::from(&invoice()).to_string()),
        );
        m
    }

    #[test]
    fn a_lightning_send_is_an_outgoing_transaction_in_msat() {
        let mut m = movement(Subsystem::LIGHTNING_SEND, MovementStatus::Successful);
        m.sent_to = vec![MovementDestination::new(
            invoice().into(),
            Amount::from_sat(21),
        )];
        m.offchain_fee = Amount::from_sat(2);
        m.time.completed_at = Some(chrono::Local::now());
        m.metadata
            .insert("payment_preimage".into(), json!("ab".repeat(32)));
        m.metadata.insert(
            METADATA_KEY.into(),
            json!({ "connection": "Alby Go", "metadata": { "comment": "hi" } }),
        );
        let tx = of_movement(&m).expect("a Lightning payment");
        assert_eq!(tx["type"], "outgoing");
        assert_eq!(tx["state"], "settled");
        assert_eq!(tx["amount"], 21_000);
        assert_eq!(tx["fees_paid"], 2_000);
        assert_eq!(tx["description"], "coffee");
        assert_eq!(tx["invoice"], invoice().to_string());
        assert_eq!(tx["preimage"], "ab".repeat(32));
        assert_eq!(tx["metadata"], json!({ "comment": "hi" }));
        assert!(
            tx["settled_at"].is_i64() && tx["expires_at"].is_u64(),
            "{tx}"
        );
    }

    #[test]
    fn a_failed_receive_is_failed_and_other_movements_are_not_transactions() {
        let mut m = movement(Subsystem::LIGHTNING_RECEIVE, MovementStatus::Canceled);
        m.received_on = vec![MovementDestination::new(
            invoice().into(),
            Amount::from_sat(21),
        )];
        let tx = of_movement(&m).expect("a Lightning payment");
        assert_eq!(tx["type"], "incoming");
        assert_eq!(tx["state"], "failed");
        assert!(tx.get("settled_at").is_none(), "{tx}");
        assert!(of_movement(&movement(Subsystem::ARKOOR, MovementStatus::Successful)).is_none());
        assert!(of_movement(&movement(Subsystem::ROUND, MovementStatus::Successful)).is_none());
    }
}

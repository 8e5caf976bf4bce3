//! The NIP-47 methods that read or receive, on the engine (paying is `payments.rs`;
//! how Berth's errors become the spec's codes, `errors.rs`). Amounts are millisatoshis
//! on the wire, as the spec says; the wallet pays and receives whole satoshis.

use std::str::FromStr;
use std::sync::Arc;

use ark::lightning::{Bolt11Invoice, PaymentHash};
use bark::actions::lightning::pay::LightningSendState;
use bark::actions::lightning::receive::LightningReceiveState;
use chrono::Utc;
use nostr::Event;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::nwc::errors::{failure, invalid, params, whole_sats};
use crate::nwc::protocol::{self, Code, Failure};
use crate::nwc::{Connection, Nwc, budget, transactions};

/// What executing a request came to.
pub(super) enum Outcome {
    /// The answer to send.
    Answer(Result<Value, Failure>),
    /// A payment whose answer comes from its record (already answered, or finished
    /// by whoever holds it).
    Recorded,
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
            "list_transactions" => self.list_transactions(request.params).await,
            "pay_invoice" => {
                return self
                    .pay_invoice(connection, event, encryption, request.params)
                    .await;
            }
            "multi_pay_invoice" => {
                return self
                    .multi_pay_invoice(connection, event, encryption, request.params)
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
        let granted = &connection.record.methods;
        let notified = granted.iter().any(|g| g == protocol::NOTIFICATIONS_GRANT);
        let mut info = json!({
            "alias": "Berth",
            "network": network_name(network),
            "methods": granted.iter().filter(|g| *g != protocol::NOTIFICATIONS_GRANT).collect::<Vec<_>>(),
            "notifications": if notified { &protocol::NOTIFICATIONS[..] } else { &[][..] },
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
        Ok(transactions::incoming(&invoice, None, None))
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
                return Ok(transactions::incoming(
                    &settled.invoice,
                    Some(settled.preimage.to_string()),
                    Some(settled.settled_at.timestamp()),
                ));
            }
            Some(LightningReceiveState::InProgress(receive)) => {
                return Ok(transactions::incoming(&receive.invoice, None, None));
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
}

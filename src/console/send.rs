//! Send: one field that takes whatever the owner pasted or scanned (an Ark address, a
//! BOLT11 invoice, a BOLT12 offer, a Lightning address, an LNURL, a bitcoin address, or
//! a `bitcoin:` URI carrying any of them), says what it is, asks for the amount when
//! the destination carries none, shows the fee estimate, and pays once confirmed.
//!
//! The payment itself is the API's: the confirm form makes `POST /api/v1/wallet/send`
//! or `POST /api/v1/wallet/send-onchain` as this browser's device, through the API's
//! routes and route layers ([`crate::api::approvals::Runner::call_as`]): its scopes,
//! its spending rules and the owner's approval apply exactly as they do to a phone.
//! The review page's form carries a fresh idempotency key, so a confirm sent twice (a
//! reload, a double click) pays once and shows the same outcome.

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bitcoin::Amount;
use serde::Deserialize;
use serde_json::{Value, json};

use super::routes::Signed;
use super::{Frame, optional_sats, page};
use crate::access::devices::Authorized;
use crate::api::AppState;
use crate::engine::lightning::LightningDestination;
use crate::engine::spending::sats;

/// What the pasted text turned out to be.
#[derive(Debug)]
enum Destination {
    Ark,
    Lightning(LightningDestination),
    Bitcoin(String),
}

/// The field's text, recognised: the destination, and the amount a `bitcoin:` URI
/// asked for.
#[derive(Debug)]
struct Recognised {
    destination: Destination,
    /// What the payer pastes into the API's `destination`.
    text: String,
    uri_amount: Option<Amount>,
}

impl Destination {
    fn words(&self) -> &'static str {
        match self {
            Destination::Ark => "an Ark address",
            Destination::Lightning(LightningDestination::Bolt11(_)) => "a Lightning invoice",
            Destination::Lightning(LightningDestination::Offer(_)) => "a Lightning offer (BOLT12)",
            Destination::Lightning(LightningDestination::Address(_)) => "a Lightning address",
            Destination::Lightning(LightningDestination::LnUrl(_)) => "an LNURL",
            Destination::Bitcoin(_) => "a bitcoin address (paid on-chain from the Ark balance)",
        }
    }
}

/// Recognise `text`; the error says what it is not, for the page.
fn recognise(text: &str) -> Result<Recognised, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("Paste or scan where to pay.".into());
    }
    if let Some(uri) = strip_prefix_ignore_case(text, "bitcoin:") {
        return recognise_uri(uri);
    }
    recognise_bare(text, None)
}

fn recognise_bare(text: &str, uri_amount: Option<Amount>) -> Result<Recognised, String> {
    let found = |destination| {
        Ok(Recognised {
            destination,
            text: text.to_owned(),
            uri_amount,
        })
    };
    if text.parse::<ark::Address>().is_ok() {
        return found(Destination::Ark);
    }
    if text.parse::<bitcoin::Address<_>>().is_ok() {
        return found(Destination::Bitcoin(text.to_owned()));
    }
    if let Some(lightning) = LightningDestination::parse(text) {
        return found(Destination::Lightning(lightning));
    }
    Err(
        "This is not an Ark address, a Lightning invoice, offer, Lightning address or LNURL, \
         nor a bitcoin address."
            .into(),
    )
}

/// A BIP-21/321 URI: its Ark address first (cheapest), then its Lightning invoice or
/// offer, then its on-chain address; its `amount` (in BTC) when it names one.
fn recognise_uri(uri: &str) -> Result<Recognised, String> {
    let (address, query) = uri.split_once('?').unwrap_or((uri, ""));
    let mut ark = None;
    let mut lightning = None;
    let mut offer = None;
    let mut amount = None;
    for (key, value) in url::form_urlencoded::parse(query.as_bytes()) {
        match key.to_ascii_lowercase().as_str() {
            "ark" => ark = Some(value.into_owned()),
            "lightning" => lightning = Some(value.into_owned()),
            "lno" => offer = Some(value.into_owned()),
            "amount" => {
                amount = Some(
                    Amount::from_str_in(&value, bitcoin::Denomination::Bitcoin).map_err(|_| {
                        format!("The URI's amount {value} is not an amount of BTC.")
                    })?,
                )
            }
            _ => {}
        }
    }
    for candidate in [ark, offer, lightning, Some(address.to_owned())]
        .into_iter()
        .flatten()
        .filter(|c| !c.is_empty())
    {
        if let Ok(found) = recognise_bare(&candidate, amount) {
            return Ok(found);
        }
    }
    Err("This bitcoin: URI names nothing this wallet can pay.".into())
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    text.get(..prefix.len())
        .filter(|p| p.eq_ignore_ascii_case(prefix))
        .map(|_| &text[prefix.len()..])
}

/// The amount to pay, and what the API request says of it: an invoice or offer that
/// names an amount is paid exactly that (the request then names none); otherwise the
/// amount typed, else the `bitcoin:` URI's.
fn amount_to_pay(found: &Recognised, typed: Option<u64>) -> Result<(Amount, Option<u64>), String> {
    let typed = typed.map(Amount::from_sat);
    if typed == Some(Amount::ZERO) {
        return Err("The amount must be above zero.".into());
    }
    let own = match &found.destination {
        Destination::Lightning(l) => l.amount(None),
        _ => None,
    };
    match (own, typed.or(found.uri_amount)) {
        (Some(own), Some(t)) if t != own => Err(format!(
            "This invoice asks for {} sats: leave the amount empty to pay it.",
            sats(own.to_sat())
        )),
        (Some(own), _) => Ok((own, None)),
        (None, Some(t)) => Ok((t, Some(t.to_sat()))),
        (None, None) => Err(format!(
            "Enter the amount: {} carries none.",
            found.destination.words()
        )),
    }
}

/// The form's fields, as typed (the review page and the confirm form send them all).
#[derive(Debug, Default, Deserialize)]
pub(super) struct SendForm {
    #[serde(default)]
    destination: String,
    #[serde(default)]
    amount: String,
    #[serde(default)]
    comment: String,
    /// The confirm form's idempotency key.
    #[serde(default)]
    key: String,
}

/// What the review shows before the owner confirms.
struct Review {
    words: &'static str,
    destination: String,
    description: Option<String>,
    amount: String,
    /// The confirm form's amount field: empty when the destination names its own.
    amount_field: String,
    fee: String,
    total: String,
    key: String,
}

#[derive(Template)]
#[template(path = "send.html")]
struct SendPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    destination: String,
    amount: String,
    comment: String,
    review: Option<Review>,
    error: Option<String>,
    /// The outcome of a confirmed payment: its class (`ok`, `warn`) and words.
    outcome: Option<(&'static str, String)>,
    /// The movement that records it, when the answer names one.
    movement: Option<u64>,
    spendable: Option<String>,
}

async fn send_page(state: &AppState, status: StatusCode, mut shown: SendPage) -> Response {
    shown.spendable = state
        .engine
        .reads()
        .balance()
        .await
        .ok()
        .map(|b| sats(b.spendable.to_sat()));
    page(status, &shown)
}

fn blank(state: &AppState, form: &SendForm) -> SendPage {
    let frame = Frame::new(state);
    SendPage {
        hostname: frame.hostname,
        pin: frame.pin,
        signed_in: true,
        destination: form.destination.trim().to_owned(),
        amount: form.amount.trim().to_owned(),
        comment: form.comment.clone(),
        review: None,
        error: None,
        outcome: None,
        movement: None,
        spendable: None,
    }
}

/// `GET /console/send`
pub(super) async fn send_form(State(state): State<AppState>) -> Response {
    let shown = blank(&state, &SendForm::default());
    send_page(&state, StatusCode::OK, shown).await
}

/// `POST /console/send/review`: what was pasted, the amount and the fee estimate, and
/// the confirm button; nothing is paid yet.
pub(super) async fn review(
    State(state): State<AppState>,
    form: Result<Form<SendForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return (StatusCode::BAD_REQUEST, "a malformed form").into_response();
    };
    let mut shown = blank(&state, &form);
    match prepare(&state, &form).await {
        Ok(review) => {
            shown.review = Some(review);
            send_page(&state, StatusCode::OK, shown).await
        }
        Err(error) => {
            shown.error = Some(error);
            send_page(&state, StatusCode::OK, shown).await
        }
    }
}

async fn prepare(state: &AppState, form: &SendForm) -> Result<Review, String> {
    let found = recognise(&form.destination)?;
    let typed = optional_sats("Amount", &form.amount)?;
    let (amount, requested) = amount_to_pay(&found, typed)?;
    let fees = state.engine.fees();
    let estimate = match &found.destination {
        Destination::Ark => fees.arkoor(amount).await,
        Destination::Lightning(_) => fees.lightning_send(amount).await,
        Destination::Bitcoin(address) => fees.send_onchain(address, amount).await,
    }
    .map_err(|e| format!("No fee estimate: {}.", crate::api::error::ApiError::from(e)))?;
    let description = match &found.destination {
        Destination::Lightning(LightningDestination::Bolt11(invoice)) => {
            match invoice.description() {
                lightning_invoice::Bolt11InvoiceDescriptionRef::Direct(d) => {
                    Some(d.to_string()).filter(|d| !d.is_empty())
                }
                lightning_invoice::Bolt11InvoiceDescriptionRef::Hash(_) => None,
            }
        }
        Destination::Lightning(LightningDestination::Offer(offer)) => {
            offer.description().map(|d| d.to_string())
        }
        _ => None,
    };
    let mut key = [0u8; 16];
    getrandom::fill(&mut key).map_err(|_| "No randomness is available.".to_owned())?;
    Ok(Review {
        words: found.destination.words(),
        destination: found.text,
        description,
        amount: sats(amount.to_sat()),
        amount_field: requested.map(|a| a.to_string()).unwrap_or_default(),
        fee: sats(estimate.fee.to_sat()),
        total: sats((amount + estimate.fee).to_sat()),
        key: key.iter().map(|b| format!("{b:02x}")).collect(),
    })
}

/// `POST /console/send`: pay, as this browser's device, through the API (see the
/// module's comment), and show the outcome.
pub(super) async fn pay(
    State(state): State<AppState>,
    Signed(who): Signed,
    form: Result<Form<SendForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return (StatusCode::BAD_REQUEST, "a malformed form").into_response();
    };
    let mut shown = blank(&state, &form);
    let request = recognise(&form.destination).and_then(|found| {
        let amount = optional_sats("Amount", &form.amount)?;
        let comment = Some(form.comment.trim()).filter(|c| !c.is_empty());
        Ok(match found.destination {
            Destination::Bitcoin(address) => (
                "/api/v1/wallet/send-onchain",
                json!({"destination": address, "amount_sat": amount}),
            ),
            Destination::Ark | Destination::Lightning(_) => (
                "/api/v1/wallet/send",
                json!({"destination": found.text, "amount_sat": amount, "comment": comment}),
            ),
        })
    });
    let (path, body) = match request {
        Ok(request) => request,
        Err(error) => {
            shown.error = Some(error);
            return send_page(&state, StatusCode::BAD_REQUEST, shown).await;
        }
    };
    let key = Some(form.key.as_str()).filter(|k| !k.is_empty());
    let answer = as_device(&state, &who, path, body, key).await;
    let outcome = match answer.status {
        200 => match answer.body["payment_hash"].as_str() {
            Some(hash) => (
                "ok",
                format!(
                    "The Lightning payment is under way (payment hash {hash}); History shows when it settles."
                ),
            ),
            None if path.ends_with("send-onchain") => (
                "ok",
                format!(
                    "Paid on-chain: transaction {}.",
                    answer.body["offboard_txid"].as_str().unwrap_or("?")
                ),
            ),
            None => ("ok", "Paid: the payment reached the recipient.".to_owned()),
        },
        202 if answer.body["status"] == "awaiting-approval" => (
            "warn",
            format!("Waiting for the owner's approval: {}.", answer.message()),
        ),
        202 => ("warn", answer.message()),
        _ => {
            shown.error = Some(format!("Not paid: {}", answer.message()));
            return send_page(&state, StatusCode::OK, shown).await;
        }
    };
    tracing::info!(target: "berth::console", status = answer.status, "a payment was made from the console");
    shown.outcome = Some(outcome);
    shown.movement = answer.body["movement_id"].as_u64();
    shown.destination.clear();
    shown.amount.clear();
    shown.comment.clear();
    send_page(&state, StatusCode::OK, shown).await
}

/// An API answer to a console form.
pub(super) struct Answer {
    pub(super) status: u16,
    pub(super) body: Value,
}

impl Answer {
    /// The answer's `message` (every error and 202 has one).
    pub(super) fn message(&self) -> String {
        match self.body["message"].as_str() {
            Some(message) => message.to_owned(),
            None if self.status == 503 => "berthd is starting or the wallet is not loaded".into(),
            None => format!("the request failed ({})", self.status),
        }
    }
}

/// `POST path` with `body` as the signed-in device `who` (see the module's comment).
pub(super) async fn as_device(
    state: &AppState,
    who: &Authorized,
    path: &str,
    body: Value,
    idempotency_key: Option<&str>,
) -> Answer {
    let caller = crate::access::Caller {
        credential: crate::access::Credential::Device(who.device_id.clone()),
        scopes: who.scopes,
        approval: None,
    };
    let (status, body) = state
        .approvals
        .call_as(caller, path, body.to_string(), idempotency_key)
        .await;
    Answer {
        status: status.as_u16(),
        body: serde_json::from_str(&body).unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test network's Ark address, as a regtest Ark server's wallet hands out.
    fn ark_address() -> String {
        ark::Address::builder()
            .testnet(true)
            .server_pubkey(key(1))
            .pubkey_policy(key(2))
            .delivery(ark::address::VtxoDelivery::Unknown {
                delivery_type: 0x7f,
                data: vec![1, 2, 3],
            })
            .into_address()
            .expect("address")
            .to_string()
    }

    fn key(byte: u8) -> bitcoin::secp256k1::PublicKey {
        let secp = bitcoin::secp256k1::Secp256k1::new();
        bitcoin::secp256k1::SecretKey::from_slice(&[byte; 32])
            .expect("key")
            .public_key(&secp)
    }

    /// A regtest address (the kind the regtest stack pays).
    fn bitcoin_address() -> String {
        bitcoin::Address::p2wpkh(
            &bitcoin::CompressedPublicKey(key(3)),
            bitcoin::Network::Regtest,
        )
        .to_string()
    }

    #[test]
    fn each_kind_is_recognised_and_a_uri_prefers_ark() {
        let bitcoin = bitcoin_address();
        let found = recognise(&bitcoin).expect("bitcoin");
        assert!(
            matches!(found.destination, Destination::Bitcoin(_)),
            "{found:?}"
        );
        let found = recognise("alice@example.com").expect("lightning address");
        assert!(
            matches!(
                found.destination,
                Destination::Lightning(LightningDestination::Address(_))
            ),
            "{found:?}"
        );
        let found = recognise(&format!("  BITCOIN:{bitcoin}?amount=0.0001  ")).expect("uri");
        assert!(
            matches!(found.destination, Destination::Bitcoin(_)),
            "{found:?}"
        );
        assert_eq!(found.uri_amount, Some(Amount::from_sat(10_000)));
        assert!(recognise("").is_err());
        assert!(
            recognise("hello")
                .expect_err("refused")
                .contains("not an Ark address")
        );
        assert!(recognise(&format!("bitcoin:{bitcoin}?amount=lots")).is_err());
        let ark = ark_address();
        let found = recognise(&ark).expect("ark");
        assert!(matches!(found.destination, Destination::Ark), "{found:?}");
        let found = recognise(&format!("bitcoin:{bitcoin}?ark={ark}&amount=0.00001")).expect("uri");
        assert!(matches!(found.destination, Destination::Ark), "{found:?}");
        assert_eq!(found.text, ark, "the Ark address is what is paid");
    }

    #[test]
    fn the_amount_is_the_typed_one_or_the_destinations_own() {
        let bitcoin = bitcoin_address();
        let address = recognise(&bitcoin).expect("bitcoin");
        assert!(
            amount_to_pay(&address, None)
                .expect_err("refused")
                .contains("Enter the amount")
        );
        assert!(amount_to_pay(&address, Some(0)).is_err());
        assert_eq!(
            amount_to_pay(&address, Some(5_000)),
            Ok((Amount::from_sat(5_000), Some(5_000)))
        );
        // An invoice that names its amount is paid exactly that; another is refused.
        let secp = bitcoin::secp256k1::Secp256k1::new();
        let signer = bitcoin::secp256k1::SecretKey::from_slice(&[4; 32]).expect("key");
        let invoice = lightning_invoice::InvoiceBuilder::new(lightning_invoice::Currency::Regtest)
            .description("coffee".into())
            .payment_hash(bitcoin::hashes::Hash::from_byte_array([7; 32]))
            .payment_secret(lightning_invoice::PaymentSecret([8; 32]))
            .current_timestamp()
            .min_final_cltv_expiry_delta(144)
            .amount_milli_satoshis(2_500_000)
            .build_signed(|hash| secp.sign_ecdsa_recoverable(hash, &signer))
            .expect("invoice")
            .to_string();
        let found = recognise(&format!("lightning:{invoice}")).expect("invoice");
        assert_eq!(found.destination.words(), "a Lightning invoice");
        assert_eq!(
            amount_to_pay(&found, None),
            Ok((Amount::from_sat(2_500), None))
        );
        assert_eq!(
            amount_to_pay(&found, Some(2_500)),
            Ok((Amount::from_sat(2_500), None))
        );
        assert!(
            amount_to_pay(&found, Some(2_000))
                .expect_err("refused")
                .contains("asks for 2,500 sats")
        );
        let uri = recognise(&format!("bitcoin:{bitcoin}?amount=0.00002")).expect("uri");
        assert_eq!(
            amount_to_pay(&uri, None),
            Ok((Amount::from_sat(2_000), Some(2_000)))
        );
        assert_eq!(
            amount_to_pay(&uri, Some(3_000)),
            Ok((Amount::from_sat(3_000), Some(3_000)))
        );
    }
}

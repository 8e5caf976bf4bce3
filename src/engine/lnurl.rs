//! Resolving a Lightning address (LUD-16) or an LNURL-pay link (LUD-06, with LUD-12
//! comments) to a BOLT11 invoice, through the egress policy (`net::egress`).
//!
//! bark can resolve them itself (`Wallet::pay_lightning_address`, `pay_lnurl`), but with
//! a client of its own: any host, any size, redirects anywhere. berthd resolves them
//! with the policy's client and hands bark the invoice with the address or link it
//! came from (`make_lightning_payment_with`), so the payment is recorded as bark
//! records it. The checks are bark's: the amount within the payee's bounds, a comment
//! no longer than it allows, an invoice for exactly the amount asked.

use bark::lnurllib::pay::{LnURLPayInvoice, PayResponse};
use bitcoin::Amount;
use bitcoin::hashes::Hash as _;
use lightning_invoice::{Bolt11Invoice, Bolt11InvoiceDescriptionRef};

use crate::engine::EngineError;
use crate::net::egress::{Egress, EgressError};

/// Who fetches, and through what: the egress policy and the caller's credential (its
/// fetches are counted against its own share).
#[derive(Clone, Copy)]
pub struct Outbound<'a> {
    pub egress: &'a Egress,
    pub caller: &'a str,
}

/// An LNURL server's refusal (`{"status": "ERROR", "reason": ...}`).
#[derive(serde::Deserialize)]
struct ErrorAnswer {
    status: String,
    reason: Option<String>,
}

/// The invoice the payee at `url` (an LNURL-pay endpoint) issues for `amount`.
pub async fn invoice(
    out: Outbound<'_>,
    url: &str,
    amount: Amount,
    comment: Option<&str>,
) -> Result<Bolt11Invoice, EngineError> {
    let url = reqwest::Url::parse(url)
        .map_err(|e| EngineError::InvalidRequest(format!("the LNURL names no valid URL ({e})")))?;
    let pay: PayResponse = answer(out, &url).await?;
    if pay.tag != bark::lnurllib::Tag::PayRequest {
        return Err(EngineError::InvalidRequest(
            "the destination is not an LNURL-pay link".into(),
        ));
    }
    let msat = amount.to_sat().saturating_mul(1000);
    if msat < pay.min_sendable || msat > pay.max_sendable {
        return Err(EngineError::InvalidRequest(format!(
            "the payee takes between {} and {} sat",
            pay.min_sendable.div_ceil(1000),
            pay.max_sendable / 1000
        )));
    }
    if let (Some(comment), Some(allowed)) = (comment, pay.comment_allowed)
        && comment.chars().count() > allowed as usize
    {
        return Err(EngineError::InvalidRequest(format!(
            "the payee takes comments of at most {allowed} characters"
        )));
    }
    let mut callback = reqwest::Url::parse(&pay.callback).map_err(|_| unusable("its callback"))?;
    {
        let mut query = callback.query_pairs_mut();
        query.append_pair("amount", &msat.to_string());
        if let Some(comment) = comment {
            query.append_pair("comment", comment);
        }
    }
    let issued: LnURLPayInvoice = answer(out, &callback).await?;
    let invoice: Bolt11Invoice = issued
        .pr
        .parse()
        .map_err(|_| unusable("a malformed invoice"))?;
    if invoice.amount_milli_satoshis() != Some(msat) {
        return Err(EngineError::Unavailable(format!(
            "the payee's server issued an invoice for another amount than {} sat; not paid",
            amount.to_sat()
        )));
    }
    // LUD-06 no longer requires it; bark only warns as well.
    let bound = matches!(invoice.description(), Bolt11InvoiceDescriptionRef::Hash(h)
        if h.0.to_byte_array() == pay.metadata_hash());
    if !bound {
        tracing::warn!(
            "the LNURL invoice's description hash does not commit to the payee's metadata"
        );
    }
    Ok(invoice)
}

/// Fetch `url` and read it as `T`, or as the server's refusal.
async fn answer<T: serde::de::DeserializeOwned>(
    out: Outbound<'_>,
    url: &reqwest::Url,
) -> Result<T, EngineError> {
    let body = out
        .egress
        .get(out.caller, url)
        .await
        .map_err(|e| from_egress(e, url))?;
    if let Ok(refused) = serde_json::from_slice::<ErrorAnswer>(&body)
        && refused.status.eq_ignore_ascii_case("ERROR")
    {
        return Err(EngineError::InvalidRequest(format!(
            "the payee's server refused: {}",
            refused
                .reason
                .as_deref()
                .unwrap_or("no reason given")
                .chars()
                .take(200)
                .collect::<String>()
        )));
    }
    serde_json::from_slice(&body).map_err(|_| unusable("an answer that is not LNURL-pay"))
}

fn unusable(what: &str) -> EngineError {
    EngineError::Unreachable {
        what: "the LNURL server",
        reason: format!("it sent {what}"),
    }
}

fn from_egress(e: EgressError, url: &reqwest::Url) -> EngineError {
    match e {
        EgressError::Refused(why) => EngineError::InvalidRequest(format!(
            "berthd does not fetch from {}: {why}",
            url.host_str().unwrap_or("that host")
        )),
        EgressError::Busy(why) => EngineError::Busy(why),
        EgressError::Status(code) if (400..500).contains(&code) => EngineError::InvalidRequest(
            format!("the LNURL server refused the request (HTTP {code})"),
        ),
        EgressError::Status(code) => EngineError::Unreachable {
            what: "the LNURL server",
            reason: format!("HTTP {code}"),
        },
        EgressError::Failed(why) => EngineError::Unavailable(format!(
            "the LNURL server at {} gave no usable answer: {why}",
            url.host_str().unwrap_or("?")
        )),
    }
}

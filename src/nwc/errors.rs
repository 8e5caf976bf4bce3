//! How Berth's errors become NIP-47's codes (`docs/nwc.md` has the table), and the
//! reading of a request's parameters:
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

use bitcoin::Amount;
use serde_json::{Value, json};

use crate::engine::EngineError;
use crate::nwc::protocol::{Code, Failure};

/// A request the wallet cannot take: `OTHER`, with the reason.
pub(super) fn invalid(message: impl Into<String>) -> Failure {
    Failure::new(Code::Other, message)
}

/// Berth's error as the spec's code, for a method that does not spend.
pub(super) fn failure(e: EngineError) -> Failure {
    let message = e.to_string();
    let code = match e {
        EngineError::InvalidRequest(_) => Code::Other,
        EngineError::InsufficientFunds(_) => Code::InsufficientBalance,
        EngineError::Busy(_) => Code::RateLimited,
        EngineError::Refused(_) => Code::QuotaExceeded,
        _ => Code::Internal,
    };
    Failure::new(code, message)
}

/// Berth's error as the spec's code, for a payment once it may have begun.
pub(super) fn payment_failure(e: EngineError) -> Failure {
    match e {
        EngineError::InvalidRequest(m) => Failure::new(Code::Other, m),
        EngineError::InsufficientFunds(m) => Failure::new(Code::InsufficientBalance, m),
        e => Failure::new(Code::PaymentFailed, e.to_string()),
    }
}

/// A request's `params` as `T` (none: an empty object).
pub(super) fn params<T: serde::de::DeserializeOwned>(value: Value) -> Result<T, Failure> {
    let value = if value.is_null() { json!({}) } else { value };
    serde_json::from_value(value).map_err(|e| invalid(format!("params: {e}")))
}

/// An amount in msat as whole satoshis, or why it is not one.
pub(super) fn whole_sats(msat: u64) -> Result<Amount, Failure> {
    if !msat.is_multiple_of(1000) {
        return Err(invalid(format!(
            "{msat} msat is not a whole number of satoshis; this wallet moves whole satoshis"
        )));
    }
    Ok(Amount::from_sat(msat / 1000))
}

//! Lightning: paying invoices, offers, Lightning addresses and LNURLs, creating
//! invoices, and tracking both directions. Research: `docs/dev/bark-0.8-mapping-3-*`.
//! A Lightning address or LNURL is resolved to an invoice by berthd, through the
//! egress policy (`engine::lnurl`), not by bark.
//!
//! bark drives every payment as a persisted action; a call here starts or advances one
//! and returns without waiting for settlement (never bark's `wait = true`, which waits
//! until the HTLCs expire when the server cannot pay). Every call that talks to the
//! Ark server is bounded by [`LIGHTNING_TIMEOUT`]; an action cut short is re-entrant and
//! carries on in bark's background daemon.

use std::str::FromStr;
use std::time::Duration;

use ark::lightning::{Bolt11Invoice, Invoice, Offer, PaymentHash, Preimage};
use bark::actions::lightning::pay::{LightningSend, LightningSendState};
use bark::actions::lightning::receive::{LightningReceive, LightningReceiveState};
use bark::lnurllib::lightning_address::LightningAddress;
use bark::lnurllib::lnurl::LnUrl;
use bitcoin::Amount;

use super::spending::{Outcome, PaymentKind, Spender};
use crate::engine::{Engine, EngineError};

/// Longest a Lightning call waits for the Ark server (bark's own gRPC timeout is ten
/// minutes).
pub const LIGHTNING_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a Lightning payment goes.
#[derive(Debug, Clone)]
pub enum LightningDestination {
    Bolt11(Bolt11Invoice),
    /// Boxed: an offer is several times the size of the others.
    Offer(Box<Offer>),
    Address(LightningAddress),
    LnUrl(LnUrl),
}

impl LightningDestination {
    /// A BOLT11 invoice, BOLT12 offer, Lightning address (`user@domain`) or LNURL, with
    /// or without a `lightning:` prefix; `None` when it is none of them.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let text = match text.get(..10) {
            Some(prefix) if prefix.eq_ignore_ascii_case("lightning:") => &text[10..],
            _ => text,
        };
        if let Ok(invoice) = Bolt11Invoice::from_str(text) {
            return Some(Self::Bolt11(invoice));
        }
        if let Ok(offer) = Offer::from_str(text) {
            return Some(Self::Offer(Box::new(offer)));
        }
        if let Ok(address) = LightningAddress::from_str(text) {
            return Some(Self::Address(address));
        }
        LnUrl::from_str(text).ok().map(Self::LnUrl)
    }

    /// What paying this will cost the payer (before fees): the amount asked, or the
    /// invoice's or offer's own; `None` when neither says.
    pub fn amount(&self, explicit: Option<Amount>) -> Option<Amount> {
        explicit.or(match self {
            Self::Bolt11(invoice) => invoice
                .amount_milli_satoshis()
                .map(|msat| Amount::from_sat(msat.div_ceil(1000))),
            Self::Offer(offer) => match offer.amount() {
                Some(ark::lightning::OfferAmount::Bitcoin { amount_msats }) => {
                    Some(Amount::from_sat(amount_msats.div_ceil(1000)))
                }
                _ => None,
            },
            Self::Address(_) | Self::LnUrl(_) => None,
        })
    }

    /// The payment rules of the API: an amount is required for a Lightning address or
    /// LNURL (they carry none) and optional for an invoice or offer; a comment goes
    /// only to a Lightning address or LNURL.
    pub fn check(&self, amount: Option<Amount>, comment: Option<&str>) -> Result<(), EngineError> {
        let bad = |msg: &str| Err(EngineError::InvalidRequest(msg.into()));
        if amount == Some(Amount::ZERO) {
            return bad("amount_sat must be above zero");
        }
        match self {
            Self::Bolt11(_) | Self::Offer(_) if comment.is_some() => {
                bad("a comment can only be sent to a Lightning address or LNURL")
            }
            Self::Address(_) | Self::LnUrl(_) if amount.is_none() => {
                bad("amount_sat is required to pay a Lightning address or LNURL")
            }
            Self::Address(_) | Self::LnUrl(_) if comment.is_some_and(|c| c.len() > 2000) => {
                bad("comment: at most 2,000 characters")
            }
            _ => Ok(()),
        }
    }
}

/// What a payment call left behind.
#[derive(Debug, Clone)]
pub struct PaymentStarted {
    pub payment_hash: PaymentHash,
    /// Present when the payment settled during the call.
    pub preimage: Option<Preimage>,
    /// The send's state now (`LightningSendInfo::state` spelling).
    pub state: &'static str,
}

/// The wallet action id bark gives the Lightning send of `payment_hash` (bark 0.8's
/// `LightningSend::id`, `ln_pay.<hash>`), under which the store indexes its movement.
/// The e2e scenarios that find a send's movement (NWC's `list_transactions`, a device's
/// payment named in the history) fail if bark ever names it otherwise.
fn send_action_id(payment_hash: PaymentHash) -> String {
    format!("ln_pay.{payment_hash}")
}

/// The API's name for a send's phase. bark 0.8's `InputsLocked` is the documented
/// `start` (barkd's API predates it).
pub fn send_phase(send: &LightningSend) -> &'static str {
    use bark::actions::lightning::pay::Progress as P;
    match send.progress {
        P::Start | P::InputsLocked { .. } => "start",
        P::HtlcReceived(_) => "htlc-received",
        P::PaymentInitiated(_) => "payment-initiated",
        P::RevocableHtlcs { .. } => "revocable-htlcs",
        P::RevocationStuck { .. } => "revocation-stuck",
    }
}

/// The API's name for a receive's phase.
pub fn receive_phase(receive: &LightningReceive) -> &'static str {
    use bark::actions::lightning::receive::Progress as P;
    match receive.progress {
        P::AwaitingPayment => "awaiting-payment",
        P::HtlcsReady(_) => "htlcs-ready",
        P::PreimageRevealed(_) => "preimage-revealed",
        P::Delivering(_) => "delivering",
    }
}

/// A send as the API shows it: bark's state, and for an unknown hash the movement of
/// a payment that failed (bark keeps no other trace of one).
#[derive(Debug)]
pub struct SendLookup {
    pub payment_hash: PaymentHash,
    pub state: LightningSendState,
    pub failed_movement: Option<bark::movement::Movement>,
}

/// Classify what a Lightning call failed with: the client's mistakes (400), the
/// wallet's state (422), the Ark server or an LNURL server (503), or ours (500).
fn classify(context: &'static str) -> impl FnOnce(anyhow::Error) -> EngineError {
    move |e| {
        for cause in e.chain() {
            if let Some(err) = cause.downcast_ref::<ark::lightning::CheckAmountError>() {
                return EngineError::InvalidRequest(format!("{context}: {err}"));
            }
            if let Some(status) = cause.downcast_ref::<tonic::Status>() {
                return from_server_status(context, status, &e);
            }
        }
        let text = format!("{e:#}");
        let has = |needle: &str| text.contains(needle);
        if has("Invoice has already been paid") {
            return EngineError::WrongState("this invoice has already been paid".into());
        }
        if has("already in progress") {
            return EngineError::WrongState(format!(
                "{context}: another operation on this payment is in progress; try again shortly"
            ));
        }
        if has("wrong network") || has("bad signature") || has("for 0 sats") {
            return EngineError::InvalidRequest(format!("{context}: {}", e.root_cause()));
        }
        // Includes an Ark server bark could not connect to (a 503, by its type).
        EngineError::classify(context)(e)
    }
}

fn from_server_status(
    context: &'static str,
    status: &tonic::Status,
    e: &anyhow::Error,
) -> EngineError {
    use tonic::Code;
    let message = status.message();
    if let Some(held) = EngineError::held_by_server(context, e) {
        return held;
    }
    if message.contains("no active") && message.contains("cln node") {
        return EngineError::Unavailable(
            "the Ark server has no Lightning node available right now".into(),
        );
    }
    match status.code() {
        Code::InvalidArgument | Code::NotFound | Code::FailedPrecondition => {
            EngineError::InvalidRequest(format!("{context}: the Ark server refused: {message}"))
        }
        Code::AlreadyExists => {
            EngineError::WrongState(format!("{context}: the Ark server refused: {message}"))
        }
        _ => EngineError::Unreachable {
            what: "the Ark server",
            reason: format!("{e:#}"),
        },
    }
}

/// What is paid: an invoice, an offer, or the invoice a Lightning address or LNURL
/// resolved to, with the destination bark records for it.
enum Payment {
    Invoice(Bolt11Invoice),
    Offer(Box<Offer>),
    Resolved(Bolt11Invoice, Box<bark::movement::PaymentMethod>),
}

/// The invoice the LNURL-pay endpoint `url` issues (the amount is required for it:
/// [`LightningDestination::check`]).
async fn lnurl_invoice(
    out: crate::engine::lnurl::Outbound<'_>,
    url: &str,
    amount: Option<Amount>,
    comment: Option<&str>,
) -> Result<Bolt11Invoice, EngineError> {
    let amount = amount.ok_or_else(|| {
        EngineError::InvalidRequest(
            "amount_sat is required to pay a Lightning address or LNURL".into(),
        )
    })?;
    crate::engine::lnurl::invoice(out, url, amount, comment).await
}

/// Run a Lightning call against the Ark server with the timeout.
async fn bounded<T>(
    context: &'static str,
    call: impl Future<Output = anyhow::Result<T>>,
) -> Result<T, EngineError> {
    match tokio::time::timeout(LIGHTNING_TIMEOUT, call).await {
        Ok(result) => result.map_err(classify(context)),
        Err(_) => Err(EngineError::Unreachable {
            what: "the Ark server",
            reason: format!("{context}: no answer within {LIGHTNING_TIMEOUT:?}"),
        }),
    }
}

impl Engine {
    async fn network_of(&self, wallet: &bark::Wallet) -> Result<bitcoin::Network, EngineError> {
        wallet
            .network()
            .await
            .map_err(EngineError::internal("reading the wallet's network"))
    }
}

fn check_invoice_amount(amount: Amount) -> Result<(), EngineError> {
    if amount == Amount::ZERO {
        return Err(EngineError::InvalidRequest(
            "amount_sat must be above zero".into(),
        ));
    }
    Ok(())
}

/// Whether a BOLT11 invoice is for `network` (bark checks too, but only after it has
/// selected inputs; this answers the client's mistake first).
fn invoice_network_matches(invoice: &Bolt11Invoice, network: bitcoin::Network) -> bool {
    use lightning_invoice::Currency as C;
    matches!(
        (invoice.currency(), network),
        (C::Bitcoin, bitcoin::Network::Bitcoin)
            | (
                C::BitcoinTestnet,
                bitcoin::Network::Testnet | bitcoin::Network::Testnet4
            )
            | (C::Regtest, bitcoin::Network::Regtest)
            | (C::Signet, bitcoin::Network::Signet)
    )
}

/// Lightning payments and invoices (`/api/v1/lightning`).
pub struct Lightning<'a> {
    engine: &'a Engine,
}

impl Engine {
    pub fn lightning(&self) -> Lightning<'_> {
        Lightning { engine: self }
    }
}

impl Lightning<'_> {
    /// Start paying `destination`. Returns once bark has handed the payment to the Ark
    /// server (or it settled or failed on the spot); settlement is tracked with
    /// [`Lightning::send`].
    ///
    /// A Lightning address or LNURL is resolved first, through `out` (the egress
    /// policy, on the caller's share): the payee's server is asked for an invoice
    /// before the wallet is needed, so a refused or unanswered destination is told
    /// whatever state the wallet is in.
    pub async fn pay(
        &self,
        destination: &LightningDestination,
        amount: Option<Amount>,
        comment: Option<String>,
        out: crate::engine::lnurl::Outbound<'_>,
        who: &Spender,
    ) -> Result<PaymentStarted, EngineError> {
        // What the rules count: an invoice's or offer's own amount, or the one asked.
        let paying = destination.amount(amount);
        let grant = self
            .engine
            .spending()
            .authorize(who, PaymentKind::Lightning, paying)
            .await?;
        let fees = self.engine.fees();
        let estimate = async {
            match paying {
                Some(paying) => fees.lightning_send(paying).await,
                None => Err(EngineError::Refused(
                    "this device has a fee cap, and this payment's amount (so its fee) is not \
                     known before it is made"
                        .into(),
                )),
            }
        };
        let grant = self.engine.spending().check_fee(grant, estimate).await?;
        let payment = Box::pin(self.pay_now(destination, amount, comment, out));
        let outcome = |started: &PaymentStarted| match started.preimage {
            Some(_) => Outcome::Paid {
                movement_id: None,
                payment_hash: Some(started.payment_hash.into()),
            },
            None => Outcome::Pending {
                movement_id: None,
                payment_hash: Some(started.payment_hash.into()),
            },
        };
        self.engine.spending().spend(grant, payment, outcome).await
    }

    async fn pay_now(
        &self,
        destination: &LightningDestination,
        amount: Option<Amount>,
        comment: Option<String>,
        out: crate::engine::lnurl::Outbound<'_>,
    ) -> Result<PaymentStarted, EngineError> {
        destination.check(amount, comment.as_deref())?;
        let payment = match destination {
            LightningDestination::Bolt11(invoice) => Payment::Invoice(invoice.clone()),
            LightningDestination::Offer(offer) => Payment::Offer(offer.clone()),
            LightningDestination::Address(address) => Payment::Resolved(
                lnurl_invoice(out, &address.lnurlp_url(), amount, comment.as_deref()).await?,
                Box::new(address.clone().into()),
            ),
            LightningDestination::LnUrl(lnurl) => Payment::Resolved(
                lnurl_invoice(out, &lnurl.url, amount, comment.as_deref()).await?,
                Box::new(lnurl.clone().into()),
            ),
        };
        let loaded = self.engine.loaded().await?;
        let wallet = &loaded.wallet;
        const CONTEXT: &str = "paying over Lightning";
        let bolt11 = match &payment {
            Payment::Invoice(invoice) | Payment::Resolved(invoice, _) => Some(invoice.clone()),
            Payment::Offer(_) => None,
        };
        if let Some(invoice) = &bolt11 {
            let network = self.engine.network_of(wallet).await?;
            if !invoice_network_matches(invoice, network) {
                return Err(EngineError::InvalidRequest(match payment {
                    Payment::Resolved(..) => {
                        format!("the payee's server issued an invoice that is not for {network}")
                    }
                    _ => format!("the invoice is not for {network}"),
                }));
            }
        }
        let paid = match payment {
            Payment::Invoice(invoice) => {
                bounded(
                    CONTEXT,
                    wallet.pay_lightning_invoice(invoice, amount, false),
                )
                .await
            }
            Payment::Offer(offer) => {
                bounded(CONTEXT, wallet.pay_lightning_offer(*offer, amount, false)).await
            }
            // bark records the address or link the invoice came from, as its own
            // `pay_lightning_address` and `pay_lnurl` do.
            Payment::Resolved(invoice, method) => {
                let invoice = Invoice::from(invoice);
                let opts = bark::LightningSendOptions::default().wait(false);
                bounded(CONTEXT, async {
                    wallet
                        .make_lightning_payment_with(&invoice, *method, None, opts)
                        .await
                        .map(|()| invoice.clone())
                })
                .await
            }
        };
        let invoice: Invoice = match paid {
            Ok(invoice) => invoice,
            Err(err) => {
                // A step failed after the payment started: it stays pending and bark
                // retries it; say so rather than "failed".
                if let Some(invoice) = &bolt11 {
                    let hash = PaymentHash::from(invoice);
                    if let Ok(Some(_)) = wallet.lightning_send_checkpoint(hash).await {
                        tracing::warn!(error = %err, %hash, "a Lightning payment step failed; it stays pending");
                        return Err(EngineError::Unavailable(format!(
                            "the payment {hash} started but a step failed; it stays pending \
                             and berthd retries it"
                        )));
                    }
                }
                return Err(err);
            }
        };
        let payment_hash = invoice.payment_hash();
        let state = wallet
            .lightning_send_state(payment_hash)
            .await
            .map_err(EngineError::internal("reading the payment's state"))?;
        match state {
            LightningSendState::Paid(paid) => Ok(PaymentStarted {
                payment_hash,
                preimage: Some(paid.preimage),
                state: "paid",
            }),
            LightningSendState::InProgress(send) => Ok(PaymentStarted {
                payment_hash,
                preimage: None,
                state: send_phase(&send),
            }),
            // bark returns Ok after the server refused the payment and the HTLCs were
            // revoked: the funds are back, the payment failed.
            LightningSendState::Unknown => Err(EngineError::WrongState(format!(
                "the Lightning payment {payment_hash} failed; the funds were returned"
            ))),
        }
    }

    /// A send by payment hash: paid, in progress, or unknown (with the movement of a
    /// failed payment, when there is one).
    pub async fn send(&self, payment_hash: PaymentHash) -> Result<SendLookup, EngineError> {
        let loaded = self.engine.loaded().await?;
        let state = loaded
            .wallet
            .lightning_send_state(payment_hash)
            .await
            .map_err(EngineError::internal("reading a Lightning payment"))?;
        let failed_movement = match state {
            LightningSendState::Unknown => self.send_movement(payment_hash).await?,
            _ => None,
        };
        Ok(SendLookup {
            payment_hash,
            state,
            failed_movement,
        })
    }

    /// The movement bark recorded for the send of `payment_hash` (where it went, the
    /// amount and the fee), if there is one: one lookup in the store's index of
    /// movements by the wallet action that made them.
    pub async fn send_movement(
        &self,
        payment_hash: PaymentHash,
    ) -> Result<Option<bark::movement::Movement>, EngineError> {
        use bark::persist::BarkPersister;
        let store = &self.engine.store;
        let Some(id) =
            BarkPersister::get_movement_id_by_action(store, &send_action_id(payment_hash))
                .await
                .map_err(EngineError::internal(
                    "looking up a Lightning send's movement",
                ))?
        else {
            return Ok(None);
        };
        match BarkPersister::get_movement_by_id(store, id).await {
            Ok(movement) => Ok(Some(movement)),
            Err(e)
                if matches!(
                    e.downcast_ref(),
                    Some(crate::store::StoreError::NotFound(_))
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(EngineError::internal("reading a Lightning send's movement")(e)),
        }
    }

    /// Pending receives (invoices not yet settled), oldest first.
    pub async fn receives(&self) -> Result<Vec<LightningReceive>, EngineError> {
        let loaded = self.engine.loaded().await?;
        loaded
            .wallet
            .pending_lightning_receives()
            .await
            .map_err(EngineError::internal("listing Lightning receives"))
    }

    /// A receive by payment hash, or by its preimage; `None` when the wallet has no
    /// pending or settled receive for it.
    pub async fn receive(
        &self,
        hash_or_preimage: [u8; 32],
    ) -> Result<Option<LightningReceiveState>, EngineError> {
        let loaded = self.engine.loaded().await?;
        let as_hash = PaymentHash::from(hash_or_preimage);
        let as_preimage = Preimage::from(hash_or_preimage).compute_payment_hash();
        for hash in [as_hash, as_preimage] {
            match loaded.wallet.lightning_receive_state(hash).await {
                Ok(state) => return Ok(Some(state)),
                Err(e) if format!("{e:#}").contains("no pending lightning receive") => {}
                Err(e) => return Err(EngineError::internal("reading a Lightning receive")(e)),
            }
        }
        Ok(None)
    }

    /// Cancel a receive that has not been paid, named by its payment hash or preimage
    /// (as [`Lightning::receive`]). `Ok(false)`: no such receive.
    pub async fn cancel_receive(&self, hash_or_preimage: [u8; 32]) -> Result<bool, EngineError> {
        let loaded = self.engine.loaded().await?;
        let hash = match self.receive(hash_or_preimage).await? {
            None => return Ok(false),
            Some(LightningReceiveState::Settled(_)) => {
                return Err(EngineError::WrongState(
                    "this receive has settled and cannot be canceled".into(),
                ));
            }
            Some(LightningReceiveState::InProgress(r)) => r.payment_hash,
        };
        match bounded(
            "canceling a Lightning receive",
            loaded.wallet.cancel_lightning_receive(hash),
        )
        .await
        {
            Ok(()) => Ok(true),
            Err(EngineError::Internal { source, .. })
                if format!("{source:#}").contains("cannot cancel") =>
            {
                Err(EngineError::WrongState(format!(
                    "this receive cannot be canceled any more: {}",
                    source.root_cause()
                )))
            }
            Err(EngineError::Internal { source, .. })
                if format!("{source:#}").contains("no pending lightning receive") =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// A new BOLT11 invoice for `amount`, paid to this wallet.
    pub async fn create_invoice(
        &self,
        amount: Amount,
        description: Option<String>,
        token: Option<String>,
    ) -> Result<Bolt11Invoice, EngineError> {
        check_invoice_amount(amount)?;
        let loaded = self.engine.loaded().await?;
        bounded(
            "creating an invoice",
            loaded.wallet.bolt11_invoice(amount, description, token),
        )
        .await
    }

    /// A new BOLT11 invoice for `amount` whose funds go on to the Ark address `claim`.
    pub async fn create_invoice_for_address(
        &self,
        amount: Amount,
        claim: &ark::Address,
        description: Option<String>,
    ) -> Result<Bolt11Invoice, EngineError> {
        use bark::ArkoorAddressError as E;
        check_invoice_amount(amount)?;
        let loaded = self.engine.loaded().await?;
        match loaded.wallet.validate_arkoor_address(claim).await {
            Ok(()) => {}
            Err(E::Other(reason)) => {
                return Err(EngineError::Unreachable {
                    what: "the Ark server",
                    reason,
                });
            }
            Err(e) => return Err(EngineError::InvalidRequest(format!("address: {e}"))),
        }
        // bark accepts an address it could never deliver to; refuse it up front.
        let deliverable = claim
            .delivery()
            .iter()
            .any(|d| matches!(d, ark::address::VtxoDelivery::ServerMailbox { .. }));
        if !deliverable {
            return Err(EngineError::InvalidRequest(
                "address: this Ark address has no mailbox the funds could be delivered to".into(),
            ));
        }
        bounded(
            "creating an invoice",
            loaded
                .wallet
                .bolt11_invoice_for_address(amount, claim.clone(), description, None),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payment_refused_for_coins_the_server_holds_is_a_retry_not_a_bad_request() {
        let held = anyhow::Error::new(tonic::Status::invalid_argument(
            "bad user input: some VTXO is already locked by another process: x:0",
        ))
        .context("error requesting arkoor cosign");
        assert!(matches!(
            classify("paying over Lightning")(held),
            EngineError::Unavailable(_)
        ));
        // Other refusals of the request stay the client's (400).
        let bad = anyhow::Error::new(tonic::Status::invalid_argument("invoice expired"));
        assert!(matches!(
            classify("paying over Lightning")(bad),
            EngineError::InvalidRequest(_)
        ));
    }
}

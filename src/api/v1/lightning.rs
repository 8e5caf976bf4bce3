//! The `lightning` group: pay, create invoices, track receives and sends.
//!
//! Payments return once the Ark server has the payment, not when it settles: poll
//! `GET /lightning/sends/{payment_hash}` or follow the notifications. Invoice creation
//! needs a Lightning node at the Ark server; without one the answer is a 503 that says
//! so.

use crate::api::routes::route;
use axum::Extension;
use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use bark::actions::lightning::pay::LightningSendState;
use bark::actions::lightning::receive::{LightningReceive, LightningReceiveState};
use bark::persist::models::SettledLightningReceive;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::Caller;
use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::routes::{Documentation, Routes};
use crate::api::v1::common::{WalletVtxoInfo, amount, outbound};
use crate::engine::lightning::{LightningDestination, receive_phase, send_phase};
use crate::engine::spending::Spender;

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .moves_funds(route!(pay))
        .read(route!(list_receive_statuses))
        .read(route!(get_receive_status))
        .receive(route!(cancel_receive))
        .read(route!(get_send_status))
        .receive(route!(generate_invoice))
        .receive(route!(generate_invoice_for_address))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct LightningPayRequest {
    /// A BOLT11 invoice, a BOLT12 offer, a Lightning address (`user@domain`) or an
    /// LNURL; a `lightning:` prefix is accepted.
    pub destination: String,
    /// Sats to pay: required for a Lightning address or LNURL, optional for an invoice
    /// or offer (which may name their own amount).
    #[schema(minimum = 0)]
    pub amount_sat: Option<u64>,
    /// A comment for the recipient; only for a Lightning address or LNURL.
    pub comment: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LightningPayResponse {
    pub message: String,
    /// The payment's hash, to follow it with `GET /lightning/sends/{payment_hash}`.
    pub payment_hash: Option<String>,
    /// Berth extension: the payment's state after the call (see `LightningSendInfo`).
    pub state: String,
    /// Berth extension: the preimage, when the payment settled during the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub preimage: Option<String>,
}

/// `POST /api/v1/lightning/pay`
#[utoipa::path(
    post,
    path = "/lightning/pay",
    tag = "lightning",
    summary = "Pay over Lightning",
    description = "Pays a BOLT11 invoice, a BOLT12 offer, a Lightning address or an LNURL. \
        `amount_sat` is required for a Lightning address or LNURL and optional for an invoice \
        or offer; `comment` goes only to a Lightning address or LNURL. Returns once the Ark \
        server has taken the payment (`state`), with the preimage if it already settled; follow \
        it with `GET /lightning/sends/{payment_hash}`. A payment the server refuses on the spot \
        is 422 and its funds are back in the wallet. berthd resolves a Lightning address or \
        LNURL itself, before it needs the wallet, through its egress policy: public addresses \
        over https only unless `[egress] allow` names the host, 15 s and 64 KiB at most.",
    request_body = LightningPayRequest,
    responses(
        (status = 200, description = "Payment started (or settled)", body = LightningPayResponse),
        (status = 400, description = "Malformed destination, amount or comment; an invoice of another network; a Lightning address or LNURL whose server the egress policy refuses (the message names the rule) or that refused the request", body = ErrorResponse),
        (status = 429, description = "This credential (or berthd) has as many outbound fetches under way as it may; retry after `Retry-After`", body = ErrorResponse),
        (status = 422, description = "No wallet, not enough funds, already paid, or refused by the server", body = ErrorResponse),
        (status = 503, description = "Ark server (or its Lightning node, or the LNURL server) unreachable; the Ark server still holding coins of this wallet for a round or payment not ended (nothing was spent, retry in a few seconds); the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn pay(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Json<LightningPayRequest>, JsonRejection>,
) -> Result<Json<LightningPayResponse>, ApiError> {
    let Json(req) = body?;
    let destination = LightningDestination::parse(&req.destination).ok_or_else(|| {
        ApiError::BadRequest(
            "destination is not a BOLT11 invoice, BOLT12 offer, Lightning address or LNURL".into(),
        )
    })?;
    // The engine checks the amount and comment rules before anything else.
    let amount = req
        .amount_sat
        .map(|sats| amount("amount_sat", sats))
        .transpose()?;
    let key = caller.credential.key();
    let who = Spender::of(&caller);
    let started = state
        .engine
        .lightning()
        .pay(
            &destination,
            amount,
            req.comment,
            outbound(&state, &key),
            &who,
        )
        .await?;
    Ok(Json(LightningPayResponse {
        message: if started.preimage.is_some() {
            "Payment settled".into()
        } else {
            "Payment initiated successfully".into()
        },
        payment_hash: Some(started.payment_hash.to_string()),
        state: started.state.into(),
        preimage: started.preimage.map(|p| p.to_string()),
    }))
}

/// A Lightning receive: an invoice of this wallet and how far its payment got.
#[derive(Debug, Serialize, ToSchema)]
pub struct LightningReceiveInfo {
    pub payment_hash: String,
    /// `awaiting-payment`, `htlcs-ready`, `preimage-revealed`, `delivering` or `settled`.
    pub state: String,
    pub invoice: String,
    /// The invoice's amount, sats (before the Ark server's receive fee).
    #[schema(minimum = 0)]
    pub amount_sat: u64,
    /// The HTLC VTXOs the server granted for the payment, once it did.
    pub htlc_vtxo_ids: Vec<String>,
    /// The invoice's preimage (known to this wallet from the start).
    pub payment_preimage: Option<String>,
    pub settled_at: Option<DateTime<Utc>>,
    /// Deprecated; not tracked (always null).
    #[deprecated]
    pub preimage_revealed_at: Option<DateTime<Utc>>,
    /// Deprecated: `settled_at`.
    #[deprecated]
    pub finished_at: Option<DateTime<Utc>>,
    /// Deprecated: the VTXOs of `htlc_vtxo_ids`.
    #[deprecated]
    pub htlc_vtxos: Vec<WalletVtxoInfo>,
    /// Berth extension: the Ark address the funds go on to, for an invoice made with
    /// `invoice/for-address`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub claim_destination: Option<String>,
}

#[allow(deprecated)]
impl LightningReceiveInfo {
    fn pending(r: &LightningReceive, htlc_vtxos: Vec<WalletVtxoInfo>) -> Self {
        use bark::actions::lightning::receive::Progress as P;
        let htlc_vtxo_ids = match &r.progress {
            P::HtlcsReady(h) | P::PreimageRevealed(h) => {
                h.vtxo_ids.iter().map(ToString::to_string).collect()
            }
            P::AwaitingPayment | P::Delivering(_) => Vec::new(),
        };
        LightningReceiveInfo {
            payment_hash: r.payment_hash.to_string(),
            state: receive_phase(r).into(),
            invoice: r.invoice.to_string(),
            amount_sat: r.invoice.amount_milli_satoshis().unwrap_or(0) / 1000,
            htlc_vtxo_ids,
            payment_preimage: Some(r.payment_preimage.to_string()),
            settled_at: None,
            preimage_revealed_at: None,
            finished_at: None,
            htlc_vtxos,
            claim_destination: r.claim_destination.as_ref().map(ToString::to_string),
        }
    }

    fn settled(s: &SettledLightningReceive) -> Self {
        let at = s.settled_at.with_timezone(&Utc);
        LightningReceiveInfo {
            payment_hash: s.payment_hash.to_string(),
            state: "settled".into(),
            invoice: s.invoice.to_string(),
            amount_sat: s.amount.to_sat(),
            htlc_vtxo_ids: Vec::new(),
            payment_preimage: Some(s.preimage.to_string()),
            settled_at: Some(at),
            preimage_revealed_at: None,
            finished_at: Some(at),
            htlc_vtxos: Vec::new(),
            claim_destination: None,
        }
    }
}

/// The HTLC VTXOs of a pending receive, as far as the wallet holds them.
async fn htlc_vtxos(state: &AppState, r: &LightningReceive) -> Vec<WalletVtxoInfo> {
    use bark::actions::lightning::receive::Progress as P;
    let ids = match &r.progress {
        P::HtlcsReady(h) | P::PreimageRevealed(h) => h.vtxo_ids.clone(),
        P::AwaitingPayment | P::Delivering(_) => return Vec::new(),
    };
    let mut out = Vec::new();
    for id in ids {
        if let Ok(Some(vtxo)) = state.engine.reads().vtxo(id).await {
            out.push(WalletVtxoInfo::from(&vtxo));
        }
    }
    out
}

/// `GET /api/v1/lightning/receives`
#[utoipa::path(
    get,
    path = "/lightning/receives",
    tag = "lightning",
    summary = "Pending Lightning receives",
    description = "Every invoice of this wallet whose payment has not settled yet, oldest first. \
        Settled receives are found by `GET /lightning/receives/{identifier}`; canceled and \
        expired ones are forgotten.",
    responses(
        (status = 200, description = "Pending receives, oldest first", body = Vec<LightningReceiveInfo>),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn list_receive_statuses(
    State(state): State<AppState>,
) -> Result<Json<Vec<LightningReceiveInfo>>, ApiError> {
    let receives = state.engine.lightning().receives().await?;
    let mut out = Vec::with_capacity(receives.len());
    for r in &receives {
        out.push(LightningReceiveInfo::pending(
            r,
            htlc_vtxos(&state, r).await,
        ));
    }
    Ok(Json(out))
}

/// A payment identifier: a payment hash or preimage (64 hex digits), or an invoice
/// (whose payment hash it means). 400 otherwise.
fn identifier_bytes(identifier: &str) -> Result<[u8; 32], ApiError> {
    let text = identifier.trim();
    if text.len() == 64
        && let Ok(hash) = text.parse::<ark::lightning::PaymentHash>()
    {
        return Ok(hash.to_byte_array());
    }
    if let Ok(invoice) = text.parse::<ark::lightning::Invoice>() {
        return Ok(invoice.payment_hash().to_byte_array());
    }
    Err(ApiError::BadRequest(format!(
        "{identifier:?} is not a payment hash, preimage or invoice"
    )))
}

/// `GET /api/v1/lightning/receives/{identifier}`
#[utoipa::path(
    get,
    path = "/lightning/receives/{identifier}",
    tag = "lightning",
    summary = "A Lightning receive",
    description = "A receive by its payment hash, its invoice or its preimage: pending or \
        settled. Read from the wallet as it stands (no sync).",
    params(("identifier" = String, Path, description = "Payment hash, invoice or preimage.")),
    responses(
        (status = 200, description = "The receive", body = LightningReceiveInfo),
        (status = 400, description = "Not a payment hash, preimage or invoice", body = ErrorResponse),
        (status = 404, description = "No pending or settled receive for it", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn get_receive_status(
    State(state): State<AppState>,
    identifier: Result<Path<String>, PathRejection>,
) -> Result<Json<LightningReceiveInfo>, ApiError> {
    let Path(identifier) = identifier?;
    let bytes = identifier_bytes(&identifier)?;
    match state.engine.lightning().receive(bytes).await? {
        Some(LightningReceiveState::InProgress(r)) => Ok(Json(LightningReceiveInfo::pending(
            &r,
            htlc_vtxos(&state, &r).await,
        ))),
        Some(LightningReceiveState::Settled(s)) => Ok(Json(LightningReceiveInfo::settled(&s))),
        None => Err(receive_not_found(identifier)),
    }
}

fn receive_not_found(identifier: String) -> ApiError {
    ApiError::NotFound {
        message: "Lightning receive not found".into(),
        resources: vec![identifier],
    }
}

/// `DELETE /api/v1/lightning/receives/{identifier}`
#[utoipa::path(
    delete,
    path = "/lightning/receives/{identifier}",
    tag = "lightning",
    summary = "Cancel a Lightning receive",
    description = "Cancels an invoice that has not been paid (and tells the Ark server, when it \
        can be reached). Once the server holds the payment for this wallet it can no longer be \
        canceled (422).",
    params(("identifier" = String, Path, description = "Payment hash, invoice or preimage.")),
    responses(
        (status = 200, description = "Canceled"),
        (status = 400, description = "Not a payment hash, preimage or invoice", body = ErrorResponse),
        (status = 404, description = "No pending receive for it", body = NotFoundResponse),
        (status = 422, description = "No wallet, or the receive is past canceling", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn cancel_receive(
    State(state): State<AppState>,
    identifier: Result<Path<String>, PathRejection>,
) -> Result<(), ApiError> {
    let Path(identifier) = identifier?;
    let bytes = identifier_bytes(&identifier)?;
    if state.engine.lightning().cancel_receive(bytes).await? {
        Ok(())
    } else {
        Err(receive_not_found(identifier))
    }
}

/// An outgoing Lightning payment.
#[derive(Debug, Serialize, ToSchema)]
pub struct LightningSendInfo {
    pub payment_hash: String,
    /// `start`, `htlc-received`, `payment-initiated`, `revocable-htlcs`,
    /// `revocation-stuck`, `paid`, or `unknown` (never seen, or failed: see
    /// `movement_status`).
    pub state: String,
    /// The invoice paid (while the payment is in progress).
    pub invoice: Option<String>,
    /// The preimage, once paid.
    pub preimage: Option<String>,
    /// Berth extension: the amount paid to the recipient, sats (while in progress).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub amount_sat: Option<u64>,
    /// Berth extension: the Ark server's fee, sats (while in progress).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub fee_sat: Option<u64>,
    /// Berth extension: when it was paid.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub paid_at: Option<DateTime<Utc>>,
    /// Berth extension: for an `unknown` payment that this wallet tried, the movement
    /// that records it, and its status (`failed`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub movement_id: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub movement_status: Option<String>,
}

/// `GET /api/v1/lightning/sends/{identifier}`
#[utoipa::path(
    get,
    path = "/lightning/sends/{identifier}",
    tag = "lightning",
    summary = "An outgoing Lightning payment",
    description = "A payment by its payment hash or invoice. `unknown` means this wallet has no \
        record of it in progress or paid: never paid from here, or failed (then \
        `movement_status` says `failed`).",
    params(("identifier" = String, Path, description = "Payment hash or invoice.")),
    responses(
        (status = 200, description = "The payment", body = LightningSendInfo),
        (status = 400, description = "Not a payment hash or invoice", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn get_send_status(
    State(state): State<AppState>,
    identifier: Result<Path<String>, PathRejection>,
) -> Result<Json<LightningSendInfo>, ApiError> {
    let Path(identifier) = identifier?;
    let hash = ark::lightning::PaymentHash::from(identifier_bytes(&identifier)?);
    let found = state.engine.lightning().send(hash).await?;
    let mut info = LightningSendInfo {
        payment_hash: found.payment_hash.to_string(),
        state: "unknown".into(),
        invoice: None,
        preimage: None,
        amount_sat: None,
        fee_sat: None,
        paid_at: None,
        movement_id: None,
        movement_status: None,
    };
    match &found.state {
        LightningSendState::Paid(paid) => {
            info.state = "paid".into();
            info.preimage = Some(paid.preimage.to_string());
            info.paid_at = Some(paid.paid_at.with_timezone(&Utc));
        }
        LightningSendState::InProgress(send) => {
            info.state = send_phase(send).into();
            info.invoice = Some(send.invoice.to_string());
            info.amount_sat = Some(send.payment_amount.to_sat());
            info.fee_sat = Some(send.fee.to_sat());
        }
        LightningSendState::Unknown => {
            if let Some(m) = &found.failed_movement {
                info.movement_id = Some(m.id.0);
                info.movement_status = Some(m.status.as_str().to_string());
            }
        }
    }
    Ok(Json(info))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct LightningInvoiceRequest {
    /// The amount to ask for, sats.
    #[schema(minimum = 0)]
    pub amount_sat: u64,
    /// The invoice's description (memo).
    pub description: Option<String>,
    /// An anti-abuse token for the Ark server, for a wallet with no VTXO to prove
    /// itself with.
    pub token: Option<String>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct LightningInvoiceForAddressRequest {
    #[schema(minimum = 0)]
    pub amount_sat: u64,
    /// The Ark address the received funds go on to.
    pub address: String,
    pub description: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InvoiceInfo {
    /// The BOLT11 invoice.
    pub invoice: String,
    /// Berth extension: its payment hash, to follow it with
    /// `GET /lightning/receives/{payment_hash}`.
    pub payment_hash: String,
}

impl From<&ark::lightning::Bolt11Invoice> for InvoiceInfo {
    fn from(invoice: &ark::lightning::Bolt11Invoice) -> Self {
        InvoiceInfo {
            invoice: invoice.to_string(),
            payment_hash: ark::lightning::PaymentHash::from(invoice).to_string(),
        }
    }
}

/// Descriptions go into the invoice; BOLT11 allows 639 bytes.
fn description(text: Option<String>) -> Result<Option<String>, ApiError> {
    match text {
        Some(d) if d.len() > 639 => Err(ApiError::BadRequest(
            "description: at most 639 bytes".into(),
        )),
        other => Ok(other),
    }
}

/// `POST /api/v1/lightning/receives/invoice`
#[utoipa::path(
    post,
    path = "/lightning/receives/invoice",
    tag = "lightning",
    summary = "Create an invoice",
    description = "A new BOLT11 invoice paying this wallet; the Ark server's receive fee comes off \
        the amount. Needs a Lightning node at the Ark server (503 without one). The payment is \
        claimed by the wallet's sync; follow it with `GET /lightning/receives/{payment_hash}`.",
    request_body = LightningInvoiceRequest,
    responses(
        (status = 200, description = "The invoice", body = InvoiceInfo),
        (status = 400, description = "Malformed, zero or too large an amount, or refused by the server", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Ark server or its Lightning node unreachable; the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn generate_invoice(
    State(state): State<AppState>,
    body: Result<Json<LightningInvoiceRequest>, JsonRejection>,
) -> Result<Json<InvoiceInfo>, ApiError> {
    let Json(req) = body?;
    let sats = amount("amount_sat", req.amount_sat)?;
    let invoice = state
        .engine
        .lightning()
        .create_invoice(sats, description(req.description)?, req.token)
        .await?;
    Ok(Json(InvoiceInfo::from(&invoice)))
}

/// `POST /api/v1/lightning/receives/invoice/for-address`
#[utoipa::path(
    post,
    path = "/lightning/receives/invoice/for-address",
    tag = "lightning",
    summary = "Create an invoice for an Ark address",
    description = "A new BOLT11 invoice whose funds, once received, go on to the given Ark \
        address (through its mailbox). Needs a Lightning node at the Ark server.",
    request_body = LightningInvoiceForAddressRequest,
    responses(
        (status = 200, description = "The invoice", body = InvoiceInfo),
        (status = 400, description = "Malformed, zero amount, or an address of another network or server, or without a mailbox", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Ark server or its Lightning node unreachable; the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn generate_invoice_for_address(
    State(state): State<AppState>,
    body: Result<Json<LightningInvoiceForAddressRequest>, JsonRejection>,
) -> Result<Json<InvoiceInfo>, ApiError> {
    let Json(req) = body?;
    let sats = amount("amount_sat", req.amount_sat)?;
    let address: ark::Address = req
        .address
        .trim()
        .parse()
        .map_err(|_| ApiError::BadRequest("address is not an Ark address".into()))?;
    let invoice = state
        .engine
        .lightning()
        .create_invoice_for_address(sats, &address, description(req.description)?)
        .await?;
    Ok(Json(InvoiceInfo::from(&invoice)))
}

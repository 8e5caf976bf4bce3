//! Receiving and paying: Ark addresses, arkoor and Lightning sends, BIP-321 URIs,
//! offboards and send-onchain, and barkd's deprecated history aliases.

use axum::Extension;
use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::Caller;
use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::v1::common::{Fresh, Movement, PageQuery, amount, outbound, parse_vtxo_ids};
use crate::engine::spending::Spender;
use crate::engine::{ArkPayment, OffboardOutcome};

#[derive(Debug, Serialize, ToSchema)]
pub struct ArkAddressResponse {
    /// A new Ark address of the wallet (bech32m, `tark1…` off mainnet).
    pub address: String,
}

/// `POST /api/v1/wallet/addresses/next`
#[utoipa::path(
    post,
    path = "/wallet/addresses/next",
    tag = "wallet",
    summary = "New Ark address",
    description = "Derives and stores a new Ark address to receive payments on.",
    responses(
        (status = 200, description = "A new address", body = ArkAddressResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn address(State(state): State<AppState>) -> Result<Json<ArkAddressResponse>, ApiError> {
    let address = state.engine.ark().address_next().await?;
    Ok(Json(ArkAddressResponse {
        address: address.to_string(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct SendRequest {
    /// An Ark address (Lightning destinations are not served by this version yet; a
    /// bitcoin address goes to `POST /wallet/send-onchain`).
    pub destination: String,
    /// The amount in sats; required for an Ark address, a Lightning address or an LNURL.
    #[schema(minimum = 0)]
    pub amount_sat: Option<u64>,
    /// A comment, for a Lightning address or LNURL only.
    pub comment: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SendResponse {
    pub message: String,
    /// The payment hash of a Lightning payment; null for an Ark payment.
    pub payment_hash: Option<String>,
    /// Berth: the movement that records the payment in the history.
    pub movement_id: Option<u32>,
}

/// A payment's answer: 200 once it is done (an Ark payment delivered, a Lightning one
/// started), 202 for an Ark payment that is stored and goes on in the background. A
/// 202 is a success to the `Idempotency-Key` layer, which keeps it: a retry with the
/// same key gets it again instead of paying a second time.
pub enum SendAnswer {
    Done(SendResponse),
    Pending(SendResponse),
}

impl IntoResponse for SendAnswer {
    fn into_response(self) -> Response {
        match self {
            SendAnswer::Done(body) => Json(body).into_response(),
            SendAnswer::Pending(body) => (StatusCode::ACCEPTED, Json(body)).into_response(),
        }
    }
}

/// `POST /api/v1/wallet/send`
#[utoipa::path(
    post,
    path = "/wallet/send",
    tag = "wallet",
    summary = "Send a payment",
    description = "Pays an Ark address out of round (arkoor). Returns once the payment has \
        reached the recipient's mailbox; if that takes over a minute (server or mailbox \
        down), 202 says it goes on in the background (barkd: 503, after which a client may \
        well pay again). 422 when the spendable balance is too small.",
    request_body = SendRequest,
    responses(
        (status = 200, description = "Sent", body = SendResponse),
        (status = 202, description = "An Ark payment started and stored but not delivered within a minute: it goes on in the background and shows in the history; do not send it again (Berth)", body = SendResponse),
        (status = 400, description = "Malformed, an unknown destination, or an address of another network or server; a Lightning address or LNURL whose server the egress policy refuses (the message names the rule) or that refused the request", body = ErrorResponse),
        (status = 429, description = "This credential (or berthd) has as many outbound fetches under way as it may; retry after `Retry-After`", body = ErrorResponse),
        (status = 422, description = "No wallet, or not enough spendable funds", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or it still holds coins of this wallet for a round or payment not ended (after a restart; nothing was spent, retry in a few seconds), or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn send(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Json<SendRequest>, JsonRejection>,
) -> Result<SendAnswer, ApiError> {
    let Json(req) = body?;
    let destination = req.destination.trim();
    if let Ok(address) = destination.parse::<ark::Address>() {
        let amount = match req.amount_sat {
            None => {
                return Err(ApiError::BadRequest(
                    "amount_sat is required to pay an Ark address".into(),
                ));
            }
            Some(sats) => amount("amount_sat", sats)?,
        };
        if req.comment.is_some() {
            return Err(ApiError::BadRequest(
                "a comment can only be sent to a Lightning address".into(),
            ));
        }
        let who = Spender::of(&caller);
        return Ok(
            match state.engine.ark().send(&address, amount, &who).await? {
                ArkPayment::Sent(movement) => SendAnswer::Done(SendResponse {
                    message: "Payment sent successfully".into(),
                    payment_hash: None,
                    movement_id: Some(movement.0),
                }),
                ArkPayment::Pending { movement_id } => SendAnswer::Pending(SendResponse {
                    message: "The payment has started but has not reached the recipient within a \
                    minute (Ark server or recipient's mailbox unreachable); it goes on in the \
                    background and shows in the history: do not send it again"
                        .into(),
                    payment_hash: None,
                    movement_id: movement_id.map(|m| m.0),
                }),
            },
        );
    }
    if destination.parse::<bitcoin::Address<_>>().is_ok() {
        return Err(ApiError::BadRequest(
            "this is a bitcoin address: pay it with POST /api/v1/wallet/send-onchain".into(),
        ));
    }
    if let Some(destination) = crate::engine::lightning::LightningDestination::parse(destination) {
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
        return Ok(SendAnswer::Done(SendResponse {
            message: "Payment initiated successfully".into(),
            payment_hash: Some(started.payment_hash.to_string()),
            movement_id: None,
        }));
    }
    Err(ApiError::BadRequest(
        "destination is not an Ark address, Lightning invoice, offer, Lightning address or LNURL"
            .into(),
    ))
}

/// `GET /api/v1/wallet/movements` (deprecated: `GET /api/v1/history`)
#[utoipa::path(
    get,
    path = "/wallet/movements",
    tag = "wallet",
    summary = "History (deprecated)",
    description = "The same as `GET /api/v1/history` without a filter.",
    params(PageQuery),
    responses(
        (status = 200, description = "Movements, newest first", body = Vec<Movement>,
            headers(("Next-Cursor" = String, description = "With `limit`, when more follow: the `cursor` of the next page"),
                ("Berth-Freshness" = String, description = "`current`, or `possibly-stale` while the wallet cannot be opened (chain source unreachable): what the wallet database held when it was last open"))),
        (status = 400, description = "Malformed limit or cursor", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is locked (its seed waits for its passphrase)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
#[deprecated]
pub async fn movements(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Fresh<crate::api::v1::common::RenderedPage>, ApiError> {
    let Query(page) = page?;
    let viewer = crate::api::v1::common::history_viewer(&state, &caller).await?;
    crate::api::v1::history::history_page(&state, None, &page, viewer.as_deref()).await
}

/// `GET /api/v1/wallet/history` (deprecated: `GET /api/v1/history`)
#[utoipa::path(
    get,
    path = "/wallet/history",
    tag = "wallet",
    summary = "History (deprecated)",
    description = "The same as `GET /api/v1/history` without a filter.",
    params(PageQuery),
    responses(
        (status = 200, description = "Movements, newest first", body = Vec<Movement>,
            headers(("Next-Cursor" = String, description = "With `limit`, when more follow: the `cursor` of the next page"),
                ("Berth-Freshness" = String, description = "`current`, or `possibly-stale` while the wallet cannot be opened (chain source unreachable): what the wallet database held when it was last open"))),
        (status = 400, description = "Malformed limit or cursor", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is locked (its seed waits for its passphrase)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
#[deprecated]
pub async fn history(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Fresh<crate::api::v1::common::RenderedPage>, ApiError> {
    let Query(page) = page?;
    let viewer = crate::api::v1::common::history_viewer(&state, &caller).await?;
    crate::api::v1::history::history_page(&state, None, &page, viewer.as_deref()).await
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OffboardResult {
    /// The offboard transaction, broadcast.
    pub offboard_txid: String,
    /// Berth: the movement that records it in the history.
    pub movement_id: u32,
}

impl From<bark::OffboardResult> for OffboardResult {
    fn from(result: bark::OffboardResult) -> Self {
        OffboardResult {
            offboard_txid: result.txid.to_string(),
            movement_id: result.movement_id.0,
        }
    }
}

/// The 202 answer of an offboard or a send on-chain (Berth): started, its inputs spoken
/// for, but not broadcast yet because a step failed for now. The wallet completes it on
/// a later sync (the `movement-updated` events and the history follow it). barkd
/// answers such an offboard with a 500, after which a client may well pay again.
#[derive(Debug, Serialize, ToSchema)]
pub struct OffboardPending {
    /// Always `pending`.
    #[schema(example = "pending")]
    pub status: &'static str,
    /// bark's id of the offboard action, as berthd's log names it.
    pub offboard_id: String,
    /// The movement that records it in the history; null until bark has made it (a
    /// send on-chain makes it at its arkoor split, an offboard once the Ark server has
    /// prepared the transaction).
    pub movement_id: Option<u32>,
    /// What this means, for people.
    pub message: String,
}

/// An offboard's answer: barkd's 200 once the transaction is broadcast, 202 while it is
/// pending. A 202 is a success to the `Idempotency-Key` layer, which keeps it: a retry
/// with the same key gets it again instead of starting a second offboard.
pub enum OffboardResponse {
    Broadcast(OffboardResult),
    Pending(OffboardPending),
}

impl From<OffboardOutcome> for OffboardResponse {
    fn from(outcome: OffboardOutcome) -> Self {
        match outcome {
            OffboardOutcome::Broadcast(result) => OffboardResponse::Broadcast(result.into()),
            OffboardOutcome::Pending(pending) => OffboardResponse::Pending(OffboardPending {
                status: "pending",
                message: format!(
                    "the offboard has started but is not broadcast yet (a step failed for now); \
                     it completes on a later wallet sync and shows in the history{}: do not send \
                     it again",
                    pending
                        .movement_id
                        .map(|m| format!(" (movement {})", m.0))
                        .unwrap_or_default()
                ),
                offboard_id: pending.id,
                movement_id: pending.movement_id.map(|m| m.0),
            }),
        }
    }
}

impl IntoResponse for OffboardResponse {
    fn into_response(self) -> Response {
        match self {
            OffboardResponse::Broadcast(result) => Json(result).into_response(),
            OffboardResponse::Pending(pending) => {
                (StatusCode::ACCEPTED, Json(pending)).into_response()
            }
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct OffboardAllRequest {
    /// Where to send the funds; a new address of the on-chain wallet when absent.
    pub address: Option<String>,
}

/// `POST /api/v1/wallet/offboard/all`
#[utoipa::path(
    post,
    path = "/wallet/offboard/all",
    tag = "wallet",
    summary = "Offboard everything",
    description = "Sends every spendable VTXO on-chain, less the server's offboard fee. Returns \
        once the transaction is broadcast; 202 if a step fails for now and it is not broadcast \
        within seconds (barkd: 500).",
    request_body = OffboardAllRequest,
    responses(
        (status = 200, description = "Broadcast", body = OffboardResult),
        (status = 202, description = "Started, not broadcast yet: a step failed for now and a later wallet sync completes it; do not send it again (Berth)", body = OffboardPending),
        (status = 400, description = "Malformed, or an address of another network", body = ErrorResponse),
        (status = 422, description = "No wallet, or nothing spendable", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or it still holds coins of this wallet for a round or payment not ended (after a restart; nothing was spent, retry in a few seconds), or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn offboard_all(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Json<OffboardAllRequest>, JsonRejection>,
) -> Result<OffboardResponse, ApiError> {
    let Json(req) = body?;
    let who = Spender::of(&caller);
    let outcome = state
        .engine
        .ark()
        .offboard_all(req.address.as_deref(), &who)
        .await?;
    Ok(outcome.into())
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct OffboardVtxosRequest {
    /// The VTXOs (`txid:vout`) to offboard; all must be spendable.
    pub vtxos: Vec<String>,
    /// Where to send the funds; a new address of the on-chain wallet when absent.
    pub address: Option<String>,
}

/// `POST /api/v1/wallet/offboard/vtxos`
#[utoipa::path(
    post,
    path = "/wallet/offboard/vtxos",
    tag = "wallet",
    summary = "Offboard VTXOs",
    description = "Sends these VTXOs on-chain, less the server's offboard fee. Returns once the \
        transaction is broadcast; 202 if a step fails for now and it is not broadcast within \
        seconds (barkd: 500).",
    request_body = OffboardVtxosRequest,
    responses(
        (status = 200, description = "Broadcast", body = OffboardResult),
        (status = 202, description = "Started, not broadcast yet: a step failed for now and a later wallet sync completes it; do not send it again (Berth)", body = OffboardPending),
        (status = 400, description = "Malformed, or an address of another network", body = ErrorResponse),
        (status = 404, description = "Unknown VTXOs", body = NotFoundResponse),
        (status = 422, description = "No wallet, or a VTXO is not spendable", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or it still holds coins of this wallet for a round or payment not ended (after a restart; nothing was spent, retry in a few seconds), or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn offboard_vtxos(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Json<OffboardVtxosRequest>, JsonRejection>,
) -> Result<OffboardResponse, ApiError> {
    let Json(req) = body?;
    let ids = parse_vtxo_ids(&req.vtxos)?;
    let who = Spender::of(&caller);
    let outcome = state
        .engine
        .ark()
        .offboard_vtxos(&ids, req.address.as_deref(), &who)
        .await?;
    Ok(outcome.into())
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct SendOnchainRequest {
    /// The bitcoin address to pay.
    pub destination: String,
    /// What the destination receives, in sats; the server's offboard fee comes on top.
    #[schema(minimum = 0)]
    pub amount_sat: u64,
}

/// `POST /api/v1/wallet/send-onchain`
#[utoipa::path(
    post,
    path = "/wallet/send-onchain",
    tag = "wallet",
    summary = "Pay on-chain from the Ark balance",
    description = "Pays a bitcoin address out of the Ark balance (an offboard of the exact \
        amount; change stays in Ark). Returns once the transaction is broadcast; 202 if a step \
        fails for now and it is not broadcast within seconds (barkd: 500).",
    request_body = SendOnchainRequest,
    responses(
        (status = 200, description = "Broadcast", body = OffboardResult),
        (status = 202, description = "Started, not broadcast yet: a step failed for now and a later wallet sync completes it; do not send it again (Berth)", body = OffboardPending),
        (status = 400, description = "Malformed, an address of another network, or below dust", body = ErrorResponse),
        (status = 422, description = "No wallet, or not enough spendable funds", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or it still holds coins of this wallet for a round or payment not ended (after a restart; nothing was spent, retry in a few seconds), or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn send_onchain(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Json<SendOnchainRequest>, JsonRejection>,
) -> Result<OffboardResponse, ApiError> {
    let Json(req) = body?;
    let paying = amount("amount_sat", req.amount_sat)?;
    let who = Spender::of(&caller);
    let outcome = state
        .engine
        .ark()
        .send_onchain(&req.destination, paying, &who)
        .await?;
    Ok(outcome.into())
}

/// `GET /api/v1/wallet/addresses/index/{index}`
#[utoipa::path(
    get,
    path = "/wallet/addresses/index/{index}",
    tag = "wallet",
    summary = "Ark address by index",
    description = "An Ark address the wallet handed out before; 404 for an index not reached yet.",
    params(("index" = u32, Path, description = "Index for the address.")),
    responses(
        (status = 200, description = "The address", body = ArkAddressResponse),
        (status = 400, description = "Not an index", body = ErrorResponse),
        (status = 404, description = "No address at this index yet", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn peek_address(
    State(state): State<AppState>,
    index: Result<Path<u32>, PathRejection>,
) -> Result<Json<ArkAddressResponse>, ApiError> {
    let Path(index) = index?;
    match state.engine.ark().address_at(index).await? {
        Some(address) => Ok(Json(ArkAddressResponse {
            address: address.to_string(),
        })),
        None => Err(ApiError::NotFound {
            message: format!("no Ark address at index {index} yet"),
            resources: vec![index.to_string()],
        }),
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct Bip321UriRequest {
    /// The amount to ask for, sats; also makes a BOLT11 invoice (the Ark server's
    /// Lightning receive fee comes off it).
    #[schema(minimum = 0)]
    pub amount_sat: Option<u64>,
    /// Also offer a new on-chain address (default false).
    pub onchain: Option<bool>,
    /// The URI's `label`.
    pub label: Option<String>,
    /// The URI's `message`.
    pub message: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Bip321Query {
    /// Upper-case the URI for a compact QR code; 400 if a label or message would
    /// change meaning.
    pub uppercase: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Bip321UriResponse {
    /// The `bitcoin:` URI.
    pub bip321: String,
    /// Its Ark address.
    pub ark: Option<String>,
    /// Its BOLT11 invoice, when an amount was asked.
    pub bolt11: Option<String>,
    /// Its on-chain address, when asked.
    pub onchain: Option<String>,
}

/// `POST /api/v1/wallet/bip321`
#[utoipa::path(
    post,
    path = "/wallet/bip321",
    tag = "wallet",
    summary = "Payment URI",
    description = "A BIP-321 `bitcoin:` URI with a new Ark address, a BOLT11 invoice when \
        `amount_sat` is given (503 when the Ark server offers no Lightning), and a new on-chain \
        address when `onchain` is true.",
    params(Bip321Query),
    request_body = Bip321UriRequest,
    responses(
        (status = 200, description = "The URI and its parts", body = Bip321UriResponse),
        (status = 400, description = "Malformed, a zero amount, or not upper-casable", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "No Lightning invoice could be made, or the wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn bip321_uri(
    State(state): State<AppState>,
    query: Result<Query<Bip321Query>, QueryRejection>,
    body: Result<Json<Bip321UriRequest>, JsonRejection>,
) -> Result<Json<Bip321UriResponse>, ApiError> {
    let Query(query) = query?;
    let Json(req) = body?;
    let uppercase = query.uppercase.unwrap_or(false);
    // Refuse before anything is derived or an invoice made.
    let lowercase_text = [&req.label, &req.message]
        .into_iter()
        .flatten()
        .any(|t| t.chars().any(char::is_lowercase));
    if uppercase && lowercase_text {
        return Err(ApiError::BadRequest(
            "cannot upper-case the URI: its label or message would change".into(),
        ));
    }
    if let Some(sats) = req.amount_sat {
        amount("amount_sat", sats)?;
    }
    let uri = state
        .engine
        .ark()
        .bip321_uri(
            req.amount_sat.map(bitcoin::Amount::from_sat),
            req.label,
            req.message,
            req.onchain.unwrap_or(false),
        )
        .await?;
    let bip321 = if uppercase {
        uri.checked_uppercase().ok_or_else(|| {
            ApiError::BadRequest("cannot upper-case this URI without changing it".into())
        })?
    } else {
        uri.to_string()
    };
    Ok(Json(Bip321UriResponse {
        bip321,
        ark: uri
            .extensions()
            .ark()
            .first()
            .map(|f| f.inner().to_string()),
        bolt11: uri.lightning().first().map(|f| f.inner().to_string()),
        onchain: uri
            .address()
            .map(ToString::to_string)
            .or_else(|| uri.tb().first().map(|f| f.inner().to_string())),
    }))
}

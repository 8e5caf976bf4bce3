//! The `fees` group: what operations cost, before doing them; and the server's fee
//! schedule as `GET /wallet/ark-info` shows it.

use crate::api::routes::route;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse};
use crate::api::routes::{Documentation, Routes};
use crate::api::v1::common::amount;

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .read(route!(board_fee))
        .read(route!(onchain_fee_rates))
        .read(route!(lightning_pay_fee))
        .read(route!(lightning_receive_fee))
        // A fee estimate sent as a POST body; it changes nothing.
        .read(route!(offboard_fee))
        .read(route!(offboard_all_fee))
        .read(route!(send_onchain_fee))
}

/// A fee rate that grows with how far off a VTXO's expiry is.
#[derive(Debug, Serialize, ToSchema)]
pub struct PpmExpiryFeeEntry {
    /// Applies to VTXOs expiring at least this many blocks from now.
    pub expiry_blocks_threshold: u32,
    /// Parts per million of the amount.
    pub ppm: u64,
}

fn table(entries: &[ark::fees::PpmExpiryFeeEntry]) -> Vec<PpmExpiryFeeEntry> {
    entries
        .iter()
        .map(|e| PpmExpiryFeeEntry {
            expiry_blocks_threshold: e.expiry_blocks_threshold,
            ppm: e.ppm.0,
        })
        .collect()
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BoardFees {
    pub min_fee_sat: u64,
    pub base_fee_sat: u64,
    pub ppm: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OffboardFees {
    pub base_fee_sat: u64,
    /// Virtual bytes charged at the offboard fee rate on top of the output.
    pub fixed_additional_vb: u64,
    pub ppm_expiry_table: Vec<PpmExpiryFeeEntry>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RefreshFees {
    pub base_fee_sat: u64,
    pub ppm_expiry_table: Vec<PpmExpiryFeeEntry>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LightningReceiveFees {
    pub base_fee_sat: u64,
    pub ppm: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LightningSendFees {
    pub min_fee_sat: u64,
    pub base_fee_sat: u64,
    pub ppm_expiry_table: Vec<PpmExpiryFeeEntry>,
}

/// The Ark server's fees for every operation.
#[derive(Debug, Serialize, ToSchema)]
pub struct FeeSchedule {
    pub board: BoardFees,
    pub offboard: OffboardFees,
    pub refresh: RefreshFees,
    pub lightning_receive: LightningReceiveFees,
    pub lightning_send: LightningSendFees,
}

impl From<&ark::fees::FeeSchedule> for FeeSchedule {
    fn from(f: &ark::fees::FeeSchedule) -> Self {
        FeeSchedule {
            board: BoardFees {
                min_fee_sat: f.board.min_fee.to_sat(),
                base_fee_sat: f.board.base_fee.to_sat(),
                ppm: f.board.ppm.0,
            },
            offboard: OffboardFees {
                base_fee_sat: f.offboard.base_fee.to_sat(),
                fixed_additional_vb: f.offboard.fixed_additional_vb,
                ppm_expiry_table: table(&f.offboard.ppm_expiry_table),
            },
            refresh: RefreshFees {
                base_fee_sat: f.refresh.base_fee.to_sat(),
                ppm_expiry_table: table(&f.refresh.ppm_expiry_table),
            },
            lightning_receive: LightningReceiveFees {
                base_fee_sat: f.lightning_receive.base_fee.to_sat(),
                ppm: f.lightning_receive.ppm.0,
            },
            lightning_send: LightningSendFees {
                min_fee_sat: f.lightning_send.min_fee.to_sat(),
                base_fee_sat: f.lightning_send.base_fee.to_sat(),
                ppm_expiry_table: table(&f.lightning_send.ppm_expiry_table),
            },
        }
    }
}

/// What an operation costs.
#[derive(Debug, Serialize, ToSchema)]
pub struct FeeEstimateResponse {
    /// The amount including fees.
    pub gross_amount_sat: u64,
    pub fee_sat: u64,
    /// The amount excluding fees: what arrives.
    pub net_amount_sat: u64,
    /// The VTXOs the operation would spend (`txid:vout`).
    pub vtxos_spent: Vec<String>,
}

impl From<&bark::FeeEstimate> for FeeEstimateResponse {
    fn from(e: &bark::FeeEstimate) -> Self {
        FeeEstimateResponse {
            gross_amount_sat: e.gross_amount.to_sat(),
            fee_sat: e.fee.to_sat(),
            net_amount_sat: e.net_amount.to_sat(),
            vtxos_spent: e.vtxos_spent.iter().map(ToString::to_string).collect(),
        }
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BoardFeeQuery {
    /// The amount to board, in sats.
    #[param(minimum = 0)]
    pub amount_sat: u64,
}

/// `GET /api/v1/fees/board`
#[utoipa::path(
    get,
    path = "/fees/board",
    tag = "fees",
    summary = "Board fee",
    description = "The Ark server's fee to board this amount (the on-chain fee of the funding \
        transaction comes on top). 400 outside the server's limits.",
    params(BoardFeeQuery),
    responses(
        (status = 200, description = "The estimate", body = FeeEstimateResponse),
        (status = 400, description = "A missing or bad amount, or outside the server's limits", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn board_fee(
    State(state): State<AppState>,
    query: Result<Query<BoardFeeQuery>, QueryRejection>,
) -> Result<Json<FeeEstimateResponse>, ApiError> {
    let Query(q) = query?;
    let estimate = state
        .engine
        .fees()
        .board(amount("amount_sat", q.amount_sat)?)
        .await?;
    Ok(Json((&estimate).into()))
}

/// On-chain fee rates, sat/vB.
#[derive(Debug, Serialize, ToSchema)]
pub struct OnchainFeeRatesResponse {
    /// For confirmation in about one block.
    pub fast_sat_per_vb: u64,
    /// About three blocks.
    pub regular_sat_per_vb: u64,
    /// About six blocks.
    pub slow_sat_per_vb: u64,
}

/// `GET /api/v1/fees/onchain`
#[utoipa::path(
    get,
    path = "/fees/onchain",
    tag = "fees",
    summary = "On-chain fee rates",
    description = "The chain source's fee estimates (the configured fallback when it has none).",
    responses(
        (status = 200, description = "The rates", body = OnchainFeeRatesResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn onchain_fee_rates(
    State(state): State<AppState>,
) -> Result<Json<OnchainFeeRatesResponse>, ApiError> {
    let rates = state.engine.fees().onchain_rates().await?;
    Ok(Json(OnchainFeeRatesResponse {
        fast_sat_per_vb: rates.fast.to_sat_per_vb_ceil(),
        regular_sat_per_vb: rates.regular.to_sat_per_vb_ceil(),
        slow_sat_per_vb: rates.slow.to_sat_per_vb_ceil(),
    }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AmountQuery {
    /// The amount, in sats.
    #[param(minimum = 0)]
    pub amount_sat: u64,
}

/// `GET /api/v1/fees/lightning/pay`
#[utoipa::path(
    get,
    path = "/fees/lightning/pay",
    tag = "fees",
    summary = "Lightning payment fee",
    description = "The Ark server's fee to pay a Lightning invoice of this amount (worst case \
        when the balance cannot cover it).",
    params(AmountQuery),
    responses(
        (status = 200, description = "The estimate", body = FeeEstimateResponse),
        (status = 400, description = "A missing or bad amount", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn lightning_pay_fee(
    State(state): State<AppState>,
    query: Result<Query<AmountQuery>, QueryRejection>,
) -> Result<Json<FeeEstimateResponse>, ApiError> {
    let Query(q) = query?;
    let estimate = state
        .engine
        .fees()
        .lightning_send(amount("amount_sat", q.amount_sat)?)
        .await?;
    Ok(Json((&estimate).into()))
}

/// `GET /api/v1/fees/lightning/receive`
#[utoipa::path(
    get,
    path = "/fees/lightning/receive",
    tag = "fees",
    summary = "Lightning receive fee",
    params(AmountQuery),
    responses(
        (status = 200, description = "The estimate", body = FeeEstimateResponse),
        (status = 400, description = "A missing or bad amount, or above the server's maximum", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn lightning_receive_fee(
    State(state): State<AppState>,
    query: Result<Query<AmountQuery>, QueryRejection>,
) -> Result<Json<FeeEstimateResponse>, ApiError> {
    let Query(q) = query?;
    let estimate = state
        .engine
        .fees()
        .lightning_receive(amount("amount_sat", q.amount_sat)?)
        .await?;
    Ok(Json((&estimate).into()))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct OffboardFeeEstimateRequest {
    /// The destination; the fee depends on its script type.
    pub address: String,
    /// The VTXOs (`txid:vout`) to offboard, each in full.
    pub vtxos: Vec<String>,
}

/// `POST /api/v1/fees/offboard`
#[utoipa::path(
    post,
    path = "/fees/offboard",
    tag = "fees",
    summary = "Offboard fee",
    request_body = OffboardFeeEstimateRequest,
    responses(
        (status = 200, description = "The estimate", body = FeeEstimateResponse),
        (status = 400, description = "Malformed, or an address of another network", body = ErrorResponse),
        (status = 404, description = "Unknown VTXOs", body = crate::api::error::NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn offboard_fee(
    State(state): State<AppState>,
    body: Result<Json<OffboardFeeEstimateRequest>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<FeeEstimateResponse>, ApiError> {
    let Json(req) = body?;
    let ids = crate::api::v1::common::parse_vtxo_ids(&req.vtxos)?;
    let estimate = state.engine.fees().offboard(&req.address, &ids).await?;
    Ok(Json((&estimate).into()))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AddressQuery {
    /// The destination bitcoin address.
    pub address: String,
}

/// `GET /api/v1/fees/offboard-all`
#[utoipa::path(
    get,
    path = "/fees/offboard-all",
    tag = "fees",
    summary = "Offboard-everything fee",
    params(AddressQuery),
    responses(
        (status = 200, description = "The estimate", body = FeeEstimateResponse),
        (status = 400, description = "A missing or bad address", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn offboard_all_fee(
    State(state): State<AppState>,
    query: Result<Query<AddressQuery>, QueryRejection>,
) -> Result<Json<FeeEstimateResponse>, ApiError> {
    let Query(q) = query?;
    let estimate = state.engine.fees().offboard_all(&q.address).await?;
    Ok(Json((&estimate).into()))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SendOnchainFeeQuery {
    /// What the destination is to receive, in sats.
    #[param(minimum = 0)]
    pub amount_sat: u64,
    /// The destination bitcoin address.
    pub address: String,
}

/// `GET /api/v1/fees/send-onchain`
#[utoipa::path(
    get,
    path = "/fees/send-onchain",
    tag = "fees",
    summary = "Fee to pay on-chain from the Ark balance",
    params(SendOnchainFeeQuery),
    responses(
        (status = 200, description = "The estimate", body = FeeEstimateResponse),
        (status = 400, description = "A missing or bad amount or address", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn send_onchain_fee(
    State(state): State<AppState>,
    query: Result<Query<SendOnchainFeeQuery>, QueryRejection>,
) -> Result<Json<FeeEstimateResponse>, ApiError> {
    let Query(q) = query?;
    let estimate = state
        .engine
        .fees()
        .send_onchain(&q.address, amount("amount_sat", q.amount_sat)?)
        .await?;
    Ok(Json((&estimate).into()))
}

//! The `exits` group: unilateral exits, moving VTXOs on-chain without the server.
//!
//! berthd advances started exits by itself on every new block (see
//! `engine::exits`); `POST /exits/progress` only makes that happen now. Funds are
//! only ever claimed by `POST /exits/claim/*`.
//!
//! This file declares the routes and holds the handlers with their requests; `model`
//! holds what they answer with (an exit's state, transactions and errors).

pub mod model;

use crate::api::routes::route;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::Caller;
use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::routes::{Documentation, Routes};
use crate::api::v1::common::{Fresh, PageQuery, RenderedPage, parse_vtxo_id, parse_vtxo_ids};
use crate::engine::spending::Spender;

pub use model::{BlockRef, ExitError, ExitProgressStatus, ExitTransactionStatus};

/// The group's routes, each with who may call it (`api::routes`).
#[allow(deprecated)]
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .moves_funds(route!(exit_start_all))
        .moves_funds(route!(exit_start_vtxos))
        .send(route!(exit_progress))
        .read(route!(exit_list_all))
        .read(route!(exit_list_live))
        .read(route!(exit_list_finished))
        .read(route!(exit_status))
        .read(route!(exit_status_deprecated))
        .moves_funds(route!(exit_claim_all))
        .moves_funds(route!(exit_claim_vtxos))
        .send(route!(exit_cancel))
        .read(route!(exit_list_deprecated))
        .read(route!(emergency_exit_fee))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ExitStartResponse {
    pub message: String,
    /// Berth: how many exits this call started (VTXOs already exiting are skipped).
    pub started: usize,
}

/// `POST /api/v1/exits/start/all`
#[utoipa::path(
    post,
    path = "/exits/start/all",
    tag = "exits",
    summary = "Exit every VTXO",
    description = "Starts a unilateral exit of every unspent VTXO. berthd then broadcasts and \
        confirms the exit transactions by itself as blocks come (fees from the on-chain wallet's \
        confirmed coins); claim the funds with `POST /exits/claim/all` once claimable.",
    responses(
        (status = 200, description = "Started", body = ExitStartResponse),
        (status = 422, description = "No wallet, or a VTXO that cannot exit (dust, non-standard)", body = ErrorResponse),
        (status = 503, description = "Chain source unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn exit_start_all(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<ExitStartResponse>, ApiError> {
    let who = Spender::of(&caller);
    let started = state.engine.exits().start_all(&who).await?;
    Ok(Json(ExitStartResponse {
        message: "Exit started successfully".into(),
        started,
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ExitStartRequest {
    /// The VTXOs (`txid:vout`) to exit; each must be spendable or locked.
    pub vtxos: Vec<String>,
}

/// `POST /api/v1/exits/start/vtxos`
#[utoipa::path(
    post,
    path = "/exits/start/vtxos",
    tag = "exits",
    summary = "Exit VTXOs",
    description = "Starts unilateral exits of these VTXOs; berthd advances them by itself.",
    request_body = ExitStartRequest,
    responses(
        (status = 200, description = "Started", body = ExitStartResponse),
        (status = 400, description = "Malformed, empty or repeated ids", body = ErrorResponse),
        (status = 404, description = "Unknown VTXOs", body = NotFoundResponse),
        (status = 422, description = "No wallet, or a VTXO that cannot exit", body = ErrorResponse),
        (status = 503, description = "Chain source unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn exit_start_vtxos(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Json<ExitStartRequest>, JsonRejection>,
) -> Result<Json<ExitStartResponse>, ApiError> {
    let Json(req) = body?;
    let ids = parse_vtxo_ids(&req.vtxos)?;
    let who = Spender::of(&caller);
    let started = state.engine.exits().start_vtxos(&ids, &who).await?;
    Ok(Json(ExitStartResponse {
        message: "Exit started successfully".into(),
        started,
    }))
}

#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct ExitProgressRequest {
    /// Fee rate for the exit transactions' children, sat/kvB; the chain's fast rate
    /// by default.
    #[schema(minimum = 0)]
    pub fee_rate: Option<u64>,
    /// Accepted and ignored: berthd keeps progressing exits on every block anyway.
    pub wait: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ExitProgressResponse {
    /// Whether no exit is waiting for transactions or confirmations any more.
    pub done: bool,
    pub exits: Vec<ExitProgressStatus>,
    /// The height at which every exit output can be claimed, if known.
    pub claimable_height: Option<u32>,
    /// A problem of the whole call rather than of one exit (the on-chain wallet could
    /// not be synced first, so fee-paying children may be missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error: Option<ExitError>,
}

/// `POST /api/v1/exits/progress`
#[utoipa::path(
    post,
    path = "/exits/progress",
    tag = "exits",
    summary = "Progress exits now",
    description = "Syncs the on-chain wallet and advances every exit one step as far as the chain \
        allows, broadcasting fee-paying children as needed. berthd also does this by itself on \
        every new block; this never claims.",
    request_body = ExitProgressRequest,
    responses(
        (status = 200, description = "Progressed", body = ExitProgressResponse),
        (status = 400, description = "Malformed, or a zero fee rate", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Chain source unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn exit_progress(
    State(state): State<AppState>,
    body: Result<Json<ExitProgressRequest>, JsonRejection>,
) -> Result<Json<ExitProgressResponse>, ApiError> {
    let req = match body {
        Ok(Json(req)) => req,
        // barkd documents a body whose fields are all optional; accept none at all.
        Err(JsonRejection::MissingJsonContentType(_)) => ExitProgressRequest::default(),
        Err(e) => return Err(e.into()),
    };
    let fee_rate = fee_rate_per_kvb(req.fee_rate)?;
    let progress = state.engine.exits().progress(fee_rate).await?;
    Ok(Json(ExitProgressResponse {
        done: progress.done,
        exits: progress
            .exits
            .iter()
            .map(|e| ExitProgressStatus {
                vtxo_id: e.vtxo_id.to_string(),
                state: (&e.state).into(),
                error: e.error.as_ref().map(ExitError::from),
            })
            .collect(),
        claimable_height: progress.claimable_height,
        error: progress
            .sync_error
            .map(|error| ExitError::InternalError { error }),
    }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExitStatusQuery {
    /// Include the phases each exit went through.
    pub history: Option<bool>,
    /// Include each exit's transactions.
    pub transactions: Option<bool>,
}

async fn list(
    state: AppState,
    query: Result<Query<ExitStatusQuery>, QueryRejection>,
    page: Result<Query<PageQuery>, QueryRejection>,
    which: crate::engine::ExitList,
) -> Result<Fresh<RenderedPage>, ApiError> {
    let Query(q) = query?;
    let Query(page) = page?;
    let (history, transactions) = (q.history.unwrap_or(false), q.transactions.unwrap_or(false));
    let paged = page.limit()?.is_some();
    let freshness = state.engine.freshness().await?;
    // Without transactions a list is the stored exits, nothing else: the whole list
    // (barkd's answer) is kept as sent until the store next changes (`page_cache`);
    // read the generation before the list. Transactions come from the exit
    // manager's memory too, which changes with the chain without a commit: never kept.
    let key = (which, history);
    let keep = !paged && !transactions;
    let generation = state.engine.reads().store_generation();
    if keep && let Some(kept) = state.exit_lists.get(key, generation) {
        return Ok(Fresh(freshness, kept));
    }
    let exits = state
        .engine
        .exits()
        .list(which, history, transactions)
        .await?;
    let rendered = page
        .apply(
            exits.iter().map(ExitTransactionStatus::from).collect(),
            |e| e.vtxo_id.clone(),
        )?
        .render()?;
    if keep {
        state.exit_lists.put(key, generation, rendered.clone());
    }
    Ok(Fresh(freshness, rendered))
}

/// `GET /api/v1/exits/status/all`
#[utoipa::path(
    get,
    path = "/exits/status/all",
    tag = "exits",
    summary = "Every exit",
    params(ExitStatusQuery, PageQuery),
    responses(
        (status = 200, description = "The exits", body = Vec<ExitTransactionStatus>,
            headers(("Next-Cursor" = String, description = "With `limit`, when more follow: the `cursor` of the next page"),
                ("Berth-Freshness" = String, description = "`current`, or `possibly-stale` while the wallet cannot be opened (chain source unreachable): what the wallet database held when it was last open"))),
        (status = 400, description = "Malformed query", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is locked (its seed waits for its passphrase)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn exit_list_all(
    State(state): State<AppState>,
    query: Result<Query<ExitStatusQuery>, QueryRejection>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Fresh<RenderedPage>, ApiError> {
    list(state, query, page, crate::engine::ExitList::All).await
}

/// `GET /api/v1/exits/status/live`
#[utoipa::path(
    get,
    path = "/exits/status/live",
    tag = "exits",
    summary = "Exits in progress",
    description = "Exits from `start` to `claim-in-progress`.",
    params(ExitStatusQuery, PageQuery),
    responses(
        (status = 200, description = "The exits", body = Vec<ExitTransactionStatus>,
            headers(("Next-Cursor" = String, description = "With `limit`, when more follow: the `cursor` of the next page"),
                ("Berth-Freshness" = String, description = "`current`, or `possibly-stale` while the wallet cannot be opened (chain source unreachable): what the wallet database held when it was last open"))),
        (status = 400, description = "Malformed query", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is locked (its seed waits for its passphrase)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn exit_list_live(
    State(state): State<AppState>,
    query: Result<Query<ExitStatusQuery>, QueryRejection>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Fresh<RenderedPage>, ApiError> {
    list(state, query, page, crate::engine::ExitList::Live).await
}

/// `GET /api/v1/exits/status/finished`
#[utoipa::path(
    get,
    path = "/exits/status/finished",
    tag = "exits",
    summary = "Finished exits",
    description = "Claimed, canceled, already spent or swept exits.",
    params(ExitStatusQuery, PageQuery),
    responses(
        (status = 200, description = "The exits", body = Vec<ExitTransactionStatus>,
            headers(("Next-Cursor" = String, description = "With `limit`, when more follow: the `cursor` of the next page"),
                ("Berth-Freshness" = String, description = "`current`, or `possibly-stale` while the wallet cannot be opened (chain source unreachable): what the wallet database held when it was last open"))),
        (status = 400, description = "Malformed query", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is locked (its seed waits for its passphrase)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn exit_list_finished(
    State(state): State<AppState>,
    query: Result<Query<ExitStatusQuery>, QueryRejection>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Fresh<RenderedPage>, ApiError> {
    list(state, query, page, crate::engine::ExitList::Finished).await
}

async fn one(
    state: AppState,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<ExitStatusQuery>, QueryRejection>,
) -> Result<Fresh<Json<ExitTransactionStatus>>, ApiError> {
    let Path(id) = id?;
    let Query(q) = query?;
    let id = parse_vtxo_id(&id)?;
    let freshness = state.engine.freshness().await?;
    match state
        .engine
        .exits()
        .status(
            id,
            q.history.unwrap_or(false),
            q.transactions.unwrap_or(false),
        )
        .await?
    {
        Some(status) => Ok(Fresh(freshness, Json((&status).into()))),
        None => Err(ApiError::NotFound {
            message: format!("no exit for VTXO {id}"),
            resources: vec![id.to_string()],
        }),
    }
}

/// `GET /api/v1/exits/status/vtxo/{vtxo_id}`
#[utoipa::path(
    get,
    path = "/exits/status/vtxo/{vtxo_id}",
    tag = "exits",
    summary = "One exit",
    params(("vtxo_id" = String, Path, description = "The exiting VTXO, `txid:vout`"), ExitStatusQuery),
    responses(
        (status = 200, description = "The exit", body = ExitTransactionStatus,
            headers(("Berth-Freshness" = String, description = "`current`, or `possibly-stale` while the wallet cannot be opened (chain source unreachable): what the wallet database held when it was last open"))),
        (status = 400, description = "Not a VTXO id, or a malformed query", body = ErrorResponse),
        (status = 404, description = "No exit for this VTXO", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is locked (its seed waits for its passphrase)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn exit_status(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<ExitStatusQuery>, QueryRejection>,
) -> Result<Fresh<Json<ExitTransactionStatus>>, ApiError> {
    one(state, id, query).await
}

/// `GET /api/v1/exits/status/{vtxo_id}` (deprecated: `/exits/status/vtxo/{vtxo_id}`)
#[utoipa::path(
    get,
    path = "/exits/status/{vtxo_id}",
    tag = "exits",
    summary = "One exit (deprecated)",
    params(("vtxo_id" = String, Path, description = "The exiting VTXO, `txid:vout`"), ExitStatusQuery),
    responses(
        (status = 200, description = "The exit", body = ExitTransactionStatus,
            headers(("Berth-Freshness" = String, description = "`current`, or `possibly-stale` while the wallet cannot be opened (chain source unreachable): what the wallet database held when it was last open"))),
        (status = 400, description = "Not a VTXO id, or a malformed query", body = ErrorResponse),
        (status = 404, description = "No exit for this VTXO", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is locked (its seed waits for its passphrase)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
#[deprecated]
pub async fn exit_status_deprecated(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<ExitStatusQuery>, QueryRejection>,
) -> Result<Fresh<Json<ExitTransactionStatus>>, ApiError> {
    one(state, id, query).await
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ExitClaimAllRequest {
    /// The bitcoin address to claim to.
    pub destination: String,
    /// Fee rate for the claim transaction, sat/kvB; the chain's regular rate by default.
    #[schema(minimum = 0)]
    pub fee_rate: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ExitClaimResponse {
    pub message: String,
    /// Berth: the claim transaction, broadcast.
    pub txid: String,
}

/// `POST /api/v1/exits/claim/all`
#[utoipa::path(
    post,
    path = "/exits/claim/all",
    tag = "exits",
    summary = "Claim every claimable exit",
    description = "Spends every claimable exit output to `destination` in one transaction and \
        broadcasts it. This is the only way exited funds move.",
    request_body = ExitClaimAllRequest,
    responses(
        (status = 200, description = "Claim broadcast", body = ExitClaimResponse),
        (status = 400, description = "Malformed, an address of another network, or a zero fee rate", body = ErrorResponse),
        (status = 422, description = "No wallet, nothing claimable, or the fee exceeds the amount", body = ErrorResponse),
        (status = 503, description = "Chain source unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn exit_claim_all(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Json<ExitClaimAllRequest>, JsonRejection>,
) -> Result<Json<ExitClaimResponse>, ApiError> {
    let Json(req) = body?;
    let fee_rate = fee_rate_per_kvb(req.fee_rate)?;
    let who = Spender::of(&caller);
    let txid = state
        .engine
        .exits()
        .claim(&req.destination, None, fee_rate, &who)
        .await?;
    Ok(Json(ExitClaimResponse {
        message: "Exit claimed successfully".into(),
        txid: txid.to_string(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ExitClaimVtxosRequest {
    pub destination: String,
    /// The exited VTXOs (`txid:vout`) to claim; each must be claimable.
    pub vtxos: Vec<String>,
    /// Fee rate for the claim transaction, sat/kvB.
    #[schema(minimum = 0)]
    pub fee_rate: Option<u64>,
}

/// `POST /api/v1/exits/claim/vtxos`
#[utoipa::path(
    post,
    path = "/exits/claim/vtxos",
    tag = "exits",
    summary = "Claim exits",
    description = "Spends these claimable exit outputs to `destination` and broadcasts it.",
    request_body = ExitClaimVtxosRequest,
    responses(
        (status = 200, description = "Claim broadcast", body = ExitClaimResponse),
        (status = 400, description = "Malformed, a VTXO that is not claimable, or an address of another network", body = ErrorResponse),
        (status = 422, description = "No wallet, or the fee exceeds the amount", body = ErrorResponse),
        (status = 503, description = "Chain source unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn exit_claim_vtxos(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Json<ExitClaimVtxosRequest>, JsonRejection>,
) -> Result<Json<ExitClaimResponse>, ApiError> {
    let Json(req) = body?;
    let ids = parse_vtxo_ids(&req.vtxos)?;
    if ids.is_empty() {
        return Err(ApiError::BadRequest("vtxos must not be empty".into()));
    }
    let fee_rate = fee_rate_per_kvb(req.fee_rate)?;
    let who = Spender::of(&caller);
    let txid = state
        .engine
        .exits()
        .claim(&req.destination, Some(&ids), fee_rate, &who)
        .await?;
    Ok(Json(ExitClaimResponse {
        message: "Exit claimed successfully".into(),
        txid: txid.to_string(),
    }))
}

/// A client fee rate in sat/kvB (barkd's unit for exits); zero is refused.
fn fee_rate_per_kvb(rate: Option<u64>) -> Result<Option<bitcoin::FeeRate>, ApiError> {
    match rate {
        None => Ok(None),
        Some(0) => Err(ApiError::BadRequest(
            "fee_rate must be above zero (sat/kvB)".into(),
        )),
        Some(rate) => Ok(Some(bitcoin::FeeRate::from_sat_per_kwu(rate.div_ceil(4)))),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ExitCancelResponse {
    pub message: String,
}

/// `POST /api/v1/exits/cancel/{vtxo_id}`
#[utoipa::path(
    post,
    path = "/exits/cancel/{vtxo_id}",
    tag = "exits",
    summary = "Cancel an exit",
    description = "Cancels an exit that has not put anything on-chain yet; the VTXO stays spendable.",
    params(("vtxo_id" = String, Path, description = "The exiting VTXO, `txid:vout`")),
    responses(
        (status = 200, description = "Canceled", body = ExitCancelResponse),
        (status = 400, description = "Not a VTXO id, or the exit can no longer be canceled", body = ErrorResponse),
        (status = 404, description = "No exit for this VTXO", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Chain source unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn exit_cancel(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<ExitCancelResponse>, ApiError> {
    let Path(id) = id?;
    let id = parse_vtxo_id(&id)?;
    state.engine.exits().cancel(id).await?;
    Ok(Json(ExitCancelResponse {
        message: "Exit canceled successfully".into(),
    }))
}

/// `GET /api/v1/exits/status` (deprecated): a permanent redirect to
/// `/exits/status/all`, keeping the query.
#[utoipa::path(
    get,
    path = "/exits/status",
    tag = "exits",
    summary = "Every exit (deprecated)",
    responses((status = 308, description = "Moved to /api/v1/exits/status/all"))
)]
#[deprecated]
pub async fn exit_list_deprecated(uri: axum::http::Uri) -> axum::response::Redirect {
    let target = match uri.query() {
        Some(query) => format!("/api/v1/exits/status/all?{query}"),
        None => "/api/v1/exits/status/all".to_string(),
    };
    axum::response::Redirect::permanent(&target)
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExitFeeQuery {
    /// Comma-separated VTXO ids; every spendable VTXO when absent.
    pub vtxo_ids: Option<String>,
    /// Fee rate for the exit transactions, sat/vB; the chain's fast rate by default.
    #[param(minimum = 0)]
    pub fee_rate_sat_per_vb: Option<u64>,
    /// Where the claim would go (its script type affects the claim's size).
    pub destination: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EmergencyExitFeeEstimateResponse {
    /// Fees of the children that confirm every exit transaction, with a safety margin;
    /// paid from the on-chain wallet's confirmed coins.
    pub exit_broadcast_fee_sat: u64,
    /// Fee of the claim; taken from the exited amount.
    pub claim_fee_sat: u64,
    pub total_fee_sat: u64,
    pub fee_rate_sat_per_vb: u64,
    /// Exit transactions still to be broadcast.
    pub txs_to_broadcast: usize,
    /// Whether the on-chain wallet's confirmed coins cover `exit_broadcast_fee_sat`.
    pub fundable: bool,
}

/// `GET /api/v1/exits/fee`
#[utoipa::path(
    get,
    path = "/exits/fee",
    tag = "exits",
    summary = "Exit fee",
    description = "What exiting would cost, and whether the on-chain wallet can pay for it.",
    params(ExitFeeQuery),
    responses(
        (status = 200, description = "The estimate", body = EmergencyExitFeeEstimateResponse),
        (status = 400, description = "Malformed, or VTXOs that cannot exit", body = ErrorResponse),
        (status = 404, description = "Unknown VTXOs", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Chain source unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn emergency_exit_fee(
    State(state): State<AppState>,
    query: Result<Query<ExitFeeQuery>, QueryRejection>,
) -> Result<Json<EmergencyExitFeeEstimateResponse>, ApiError> {
    let Query(q) = query?;
    let ids = q
        .vtxo_ids
        .as_deref()
        .map(|list| {
            let ids: Vec<String> = list
                .split(',')
                .map(str::trim)
                .filter(|id| !id.is_empty())
                .map(str::to_string)
                .collect();
            parse_vtxo_ids(&ids)
        })
        .transpose()?;
    let fee_rate = match q.fee_rate_sat_per_vb {
        None => None,
        Some(0) => {
            return Err(ApiError::BadRequest(
                "fee_rate_sat_per_vb must be above zero".into(),
            ));
        }
        Some(rate) => Some(
            bitcoin::FeeRate::from_sat_per_vb(rate)
                .ok_or_else(|| ApiError::BadRequest("fee_rate_sat_per_vb is too large".into()))?,
        ),
    };
    let (e, fundable) = state
        .engine
        .fees()
        .exit(ids.as_deref(), fee_rate, q.destination.as_deref())
        .await?;
    Ok(Json(EmergencyExitFeeEstimateResponse {
        exit_broadcast_fee_sat: e.exit_broadcast_fee.to_sat(),
        claim_fee_sat: e.claim_fee.to_sat(),
        total_fee_sat: e.total().to_sat(),
        fee_rate_sat_per_vb: e.fee_rate.to_sat_per_vb_ceil(),
        txs_to_broadcast: e.txs_to_broadcast,
        fundable,
    }))
}

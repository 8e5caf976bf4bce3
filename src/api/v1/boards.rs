//! The `boards` group: moving on-chain funds into Ark.

use crate::api::routes::route;
use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use serde::Deserialize;
use utoipa::ToSchema;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse};
use crate::api::routes::{Documentation, Routes};
use crate::api::v1::common::PendingBoardInfo;
use crate::api::v1::common::amount;

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .moves_funds(route!(board_amount))
        .moves_funds(route!(board_all))
        .read(route!(get_pending_boards))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct BoardRequest {
    /// How much to board, in sats; the on-chain fee comes on top, the server's board
    /// fee is taken from it.
    #[schema(minimum = 0)]
    pub amount_sat: u64,
}

/// `POST /api/v1/boards/board-amount`
#[utoipa::path(
    post,
    path = "/boards/board-amount",
    tag = "boards",
    summary = "Board an amount",
    description = "Signs and broadcasts a funding transaction from the on-chain wallet. The VTXO \
        becomes spendable once the transaction has the Ark server's required confirmations \
        (see `GET /boards/pending`). 400 for an amount outside the server's limits, 422 when \
        the on-chain wallet cannot pay it.",
    request_body = BoardRequest,
    responses(
        (status = 200, description = "The pending board", body = PendingBoardInfo),
        (status = 400, description = "Malformed, or outside the server's limits", body = ErrorResponse),
        (status = 422, description = "No wallet, or not enough on-chain funds", body = ErrorResponse),
        (status = 503, description = "Ark server or chain source unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn board_amount(
    State(state): State<AppState>,
    body: Result<Json<BoardRequest>, JsonRejection>,
) -> Result<Json<PendingBoardInfo>, ApiError> {
    let Json(req) = body?;
    let board = state
        .engine
        .ark()
        .board_amount(amount("amount_sat", req.amount_sat)?)
        .await?;
    Ok(Json(PendingBoardInfo::from(&board)))
}

/// `POST /api/v1/boards/board-all`
#[utoipa::path(
    post,
    path = "/boards/board-all",
    tag = "boards",
    summary = "Board all on-chain funds",
    description = "Boards every coin of the on-chain wallet into one VTXO. 422 when it has none.",
    responses(
        (status = 200, description = "The pending board", body = PendingBoardInfo),
        (status = 400, description = "Outside the server's limits", body = ErrorResponse),
        (status = 422, description = "No wallet, or no on-chain funds", body = ErrorResponse),
        (status = 503, description = "Ark server or chain source unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn board_all(State(state): State<AppState>) -> Result<Json<PendingBoardInfo>, ApiError> {
    let board = state.engine.ark().board_all().await?;
    Ok(Json(PendingBoardInfo::from(&board)))
}

/// `GET /api/v1/boards/pending`
#[utoipa::path(
    get,
    path = "/boards/pending",
    tag = "boards",
    summary = "Pending boards",
    description = "Boards whose funding transaction has not reached the server's required \
        confirmations yet (or has not been registered by a sync since).",
    responses(
        (status = 200, description = "The pending boards", body = Vec<PendingBoardInfo>),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn get_pending_boards(
    State(state): State<AppState>,
) -> Result<Json<Vec<PendingBoardInfo>>, ApiError> {
    let boards = state.engine.ark().pending_boards().await?;
    Ok(Json(boards.iter().map(PendingBoardInfo::from).collect()))
}

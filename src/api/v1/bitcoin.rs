//! The `bitcoin` group: facts about the chain.

use crate::api::routes::route;
use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse};
use crate::api::routes::{Documentation, Routes};

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes.read(route!(tip))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TipResponse {
    /// The height of the chain source's best block.
    pub tip_height: u32,
}

/// `GET /api/v1/bitcoin/tip`
#[utoipa::path(
    get,
    path = "/bitcoin/tip",
    tag = "bitcoin",
    summary = "Chain tip",
    description = "The height of the best block the wallet's chain source knows.",
    responses(
        (status = 200, description = "The tip", body = TipResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The chain source is unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn tip(State(state): State<AppState>) -> Result<Json<TipResponse>, ApiError> {
    Ok(Json(TipResponse {
        tip_height: state.engine.onchain().tip().await?,
    }))
}

//! The `history` group: the wallet's movements.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::Deserialize;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse};
use crate::api::v1::common::Movement;

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// Payment method type to filter by: `ark`, `bitcoin`, `output-script`, `invoice`,
    /// `offer`, `lightning-address`, `lnurl` or `custom`. Needs `value`.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    pub kind: Option<String>,
    /// Payment method value to filter by (the address, invoice…). Needs `type`.
    pub value: Option<String>,
}

/// `GET /api/v1/history`
#[utoipa::path(
    get,
    path = "/history",
    tag = "history",
    summary = "Wallet history",
    description = "Every movement of funds in, out of or within the wallet, newest first; with \
        `type` and `value`, only those paying or paid by that payment method.",
    params(HistoryQuery),
    responses(
        (status = 200, description = "Movements, newest first", body = Vec<Movement>),
        (status = 400, description = "Malformed filter", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    query: Result<Query<HistoryQuery>, QueryRejection>,
) -> Result<Json<Vec<Movement>>, ApiError> {
    let Query(query) = query?;
    let method = match (query.kind, query.value) {
        (None, None) => None,
        (Some(kind), Some(value)) => Some(
            bark::movement::PaymentMethod::from_type_value(&kind, &value).map_err(|e| {
                ApiError::BadRequest(format!("invalid payment method {kind:?}: {e:#}"))
            })?,
        ),
        _ => {
            return Err(ApiError::BadRequest(
                "`type` and `value` must be given together".into(),
            ));
        }
    };
    let movements = state.engine.history(method.as_ref()).await?;
    Ok(Json(movements.iter().map(Movement::from).collect()))
}

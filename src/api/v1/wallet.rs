//! The `wallet` group: existence, creation, deletion, mnemonic, server connection.

use axum::Json;
use axum::extract::State;
use serde::Serialize;

use crate::api::AppState;
use crate::api::error::ApiError;

#[derive(Debug, Serialize)]
pub struct WalletExistsResponse {
    /// The wallet's BIP-32 fingerprint, or null when there is no wallet.
    pub fingerprint: Option<String>,
}

/// `GET /api/v1/wallet`
pub async fn wallet_exists(
    State(state): State<AppState>,
) -> Result<Json<WalletExistsResponse>, ApiError> {
    let fingerprint = state.engine.wallet_fingerprint().await?;
    Ok(Json(WalletExistsResponse {
        fingerprint: fingerprint.map(|f| f.to_string()),
    }))
}

/// `GET /api/v1/wallet/mnemonic`: 404 unless the daemon was started with
/// `--expose-mnemonic`, so its existence is not even confirmed otherwise.
pub async fn mnemonic(State(state): State<AppState>) -> Result<Json<()>, ApiError> {
    if !state.expose_mnemonic {
        return Err(ApiError::NotFound("not found".into()));
    }
    state.engine.require_wallet().await?;
    Err(ApiError::NotImplemented(
        "GET /api/v1/wallet/mnemonic is not served by this version of berthd yet".into(),
    ))
}

//! The `onchain` group: the wallet's own on-chain (BDK) funds.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse};

/// An on-chain address.
#[derive(Debug, Serialize, ToSchema)]
pub struct Address {
    pub address: String,
}

/// `POST /api/v1/onchain/addresses/next`
#[utoipa::path(
    post,
    path = "/onchain/addresses/next",
    tag = "onchain",
    summary = "Next on-chain address",
    description = "Reveals the next unused receive address of the on-chain wallet.",
    responses(
        (status = 200, description = "A fresh address", body = Address),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn onchain_address(State(state): State<AppState>) -> Result<Json<Address>, ApiError> {
    let address = state.engine.onchain_next_address().await?;
    Ok(Json(Address {
        address: address.to_string(),
    }))
}

/// The on-chain balance, in satoshis, by how far each part can be trusted.
#[derive(Debug, Serialize, ToSchema)]
pub struct OnchainBalance {
    /// Everything below combined.
    pub total_sat: u64,
    /// Confirmed plus trusted pending: spendable now without risk of a double spend
    /// by someone else.
    pub trusted_spendable_sat: u64,
    /// Coinbase outputs not yet matured.
    pub immature_sat: u64,
    /// Unconfirmed outputs of the wallet's own transactions.
    pub trusted_pending_sat: u64,
    /// Unconfirmed outputs received from others.
    pub untrusted_pending_sat: u64,
    /// Confirmed and spendable.
    pub confirmed_sat: u64,
}

/// `GET /api/v1/onchain/balance`
#[utoipa::path(
    get,
    path = "/onchain/balance",
    tag = "onchain",
    summary = "On-chain balance",
    description = "The on-chain wallet's balance as of its last sync (`POST /onchain/sync`; \
        bark's background daemon also syncs it periodically).",
    responses(
        (status = 200, description = "The balance", body = OnchainBalance),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn onchain_balance(
    State(state): State<AppState>,
) -> Result<Json<OnchainBalance>, ApiError> {
    let balance = state.engine.onchain_balance().await?;
    Ok(Json(OnchainBalance {
        total_sat: balance.total().to_sat(),
        trusted_spendable_sat: balance.trusted_spendable().to_sat(),
        immature_sat: balance.immature.to_sat(),
        trusted_pending_sat: balance.trusted_pending.to_sat(),
        untrusted_pending_sat: balance.untrusted_pending.to_sat(),
        confirmed_sat: balance.confirmed.to_sat(),
    }))
}

/// `POST /api/v1/onchain/sync`
#[utoipa::path(
    post,
    path = "/onchain/sync",
    tag = "onchain",
    summary = "Sync the on-chain wallet",
    description = "Fetches news from the chain source for the on-chain wallet and rebroadcasts \
        its unconfirmed transactions.",
    responses(
        (status = 200, description = "Synced"),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The chain source is unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn onchain_sync(State(state): State<AppState>) -> Result<(), ApiError> {
    state.engine.onchain_sync().await?;
    Ok(())
}

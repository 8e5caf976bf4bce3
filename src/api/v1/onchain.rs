//! The `onchain` group: the wallet's own on-chain (BDK) funds.

use crate::api::routes::route;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::Caller;
use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse};
use crate::api::routes::{Documentation, Routes};
use crate::api::v1::common::{Page, PageQuery, amount};
use crate::engine::spending::Spender;

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .receive(route!(onchain_address))
        .read(route!(onchain_balance))
        // Syncing only catches up with the chain and the Ark server.
        .read(route!(onchain_sync))
        .moves_funds(route!(onchain_send))
        .moves_funds(route!(onchain_send_many))
        .moves_funds(route!(onchain_drain))
        .read(route!(onchain_transactions))
        .read(route!(onchain_utxos))
}

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
    let address = state.engine.onchain().next_address().await?;
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
    let balance = state.engine.onchain().balance().await?;
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
    state.engine.onchain().sync().await?;
    Ok(())
}

/// A transaction sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct Send {
    pub txid: String,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct OnchainSendRequest {
    /// The bitcoin address to pay.
    pub destination: String,
    /// What it receives, in sats; the fee comes on top.
    #[schema(minimum = 0)]
    pub amount_sat: u64,
}

/// `POST /api/v1/onchain/send`
#[utoipa::path(
    post,
    path = "/onchain/send",
    tag = "onchain",
    summary = "Pay on-chain",
    description = "Pays a bitcoin address from the on-chain wallet at the chain's regular fee \
        rate. Returns once the transaction is handed to the chain source; a failed broadcast is \
        retried on the next sync.",
    request_body = OnchainSendRequest,
    responses(
        (status = 200, description = "Sent", body = Send),
        (status = 400, description = "Malformed, an address of another network, or below dust", body = ErrorResponse),
        (status = 422, description = "No wallet, or not enough on-chain funds", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn onchain_send(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Json<OnchainSendRequest>, JsonRejection>,
) -> Result<Json<Send>, ApiError> {
    let Json(req) = body?;
    let paying = amount("amount_sat", req.amount_sat)?;
    let who = Spender::of(&caller);
    let txid = state
        .engine
        .onchain()
        .send(&[(req.destination, paying)], &who)
        .await?;
    Ok(Json(Send {
        txid: txid.to_string(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct OnchainSendManyRequest {
    /// `address:amount` pairs; the amount is in sats, or with a unit (`1000 sat`,
    /// `0.001 btc`) as barkd takes it.
    pub destinations: Vec<String>,
    /// Accepted and ignored: the transaction is always sent at once.
    pub immediate: Option<bool>,
}

/// `address:amount`, the amount in sats or with a unit.
fn parse_destination(text: &str) -> Result<(String, bitcoin::Amount), ApiError> {
    let bad = || ApiError::BadRequest(format!("{text:?} is not address:amount"));
    let (address, amount_text) = text.rsplit_once(':').ok_or_else(bad)?;
    let text_amount = amount_text.trim();
    let sats = match text_amount.parse::<u64>() {
        Ok(sats) => sats,
        Err(_) => text_amount
            .parse::<bitcoin::Amount>()
            .map_err(|_| bad())?
            .to_sat(),
    };
    Ok((address.trim().to_string(), amount("amount", sats)?))
}

/// `POST /api/v1/onchain/send-many`
#[utoipa::path(
    post,
    path = "/onchain/send-many",
    tag = "onchain",
    summary = "Pay several on-chain",
    description = "Pays several bitcoin addresses in one transaction from the on-chain wallet.",
    request_body = OnchainSendManyRequest,
    responses(
        (status = 200, description = "Sent", body = Send),
        (status = 400, description = "Malformed, an address of another network, or below dust", body = ErrorResponse),
        (status = 422, description = "No wallet, or not enough on-chain funds", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn onchain_send_many(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Json<OnchainSendManyRequest>, JsonRejection>,
) -> Result<Json<Send>, ApiError> {
    let Json(req) = body?;
    let destinations = req
        .destinations
        .iter()
        .map(|d| parse_destination(d))
        .collect::<Result<Vec<_>, _>>()?;
    let who = Spender::of(&caller);
    let txid = state.engine.onchain().send(&destinations, &who).await?;
    Ok(Json(Send {
        txid: txid.to_string(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct OnchainDrainRequest {
    /// The bitcoin address to send everything to.
    pub destination: String,
}

/// `POST /api/v1/onchain/drain`
#[utoipa::path(
    post,
    path = "/onchain/drain",
    tag = "onchain",
    summary = "Empty the on-chain wallet",
    description = "Sends every on-chain coin, unconfirmed ones too, to one address, less the fee.",
    request_body = OnchainDrainRequest,
    responses(
        (status = 200, description = "Sent", body = Send),
        (status = 400, description = "Malformed, or an address of another network", body = ErrorResponse),
        (status = 422, description = "No wallet, or nothing to send", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn onchain_drain(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Result<Json<OnchainDrainRequest>, JsonRejection>,
) -> Result<Json<Send>, ApiError> {
    let Json(req) = body?;
    let who = Spender::of(&caller);
    let txid = state.engine.onchain().drain(&req.destination, &who).await?;
    Ok(Json(Send {
        txid: txid.to_string(),
    }))
}

/// An on-chain transaction of the wallet.
#[derive(Debug, Serialize, ToSchema)]
pub struct WalletTxInfo {
    pub txid: String,
    /// The transaction, consensus-encoded, hex.
    pub tx: String,
    /// Its fee, when every input is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub onchain_fee_sat: Option<u64>,
    /// Received minus sent over the wallet's outputs, sats.
    pub balance_change_sat: i64,
    /// The block it is in; null while unconfirmed.
    pub confirmation: Option<crate::api::v1::exits::BlockRef>,
    /// Whether it pays an exit transaction's fee (spends a fee anchor).
    pub is_cpfp: bool,
}

/// `GET /api/v1/onchain/transactions`
#[utoipa::path(
    get,
    path = "/onchain/transactions",
    tag = "onchain",
    summary = "On-chain transactions",
    description = "The on-chain wallet's transactions, oldest first; unconfirmed ones last.",
    params(PageQuery),
    responses(
        (status = 200, description = "The transactions", body = Vec<WalletTxInfo>,
            headers(("Next-Cursor" = String, description = "With `limit`, when more follow: the `cursor` of the next page"))),
        (status = 400, description = "Malformed limit or cursor", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn onchain_transactions(
    State(state): State<AppState>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Page<WalletTxInfo>, ApiError> {
    let Query(page) = page?;
    page.limit()?;
    let txs = state.engine.onchain().transactions().await?;
    page.apply(
        txs.iter()
            .map(|t| WalletTxInfo {
                txid: t.txid.to_string(),
                tx: bitcoin::consensus::encode::serialize_hex(&*t.tx),
                onchain_fee_sat: t.onchain_fees.map(|f| f.to_sat()),
                balance_change_sat: t.balance_change.to_sat(),
                confirmation: t.confirmation.as_ref().map(Into::into),
                is_cpfp: t.is_cpfp,
            })
            .collect(),
        |t| t.txid.clone(),
    )
}

/// An unspent output of the on-chain wallet.
#[derive(Debug, Serialize, ToSchema)]
pub struct UtxoInfo {
    /// `txid:vout`.
    pub outpoint: String,
    pub amount_sat: u64,
    /// The height it confirmed at; null while unconfirmed.
    pub confirmation_height: Option<u32>,
}

/// `GET /api/v1/onchain/utxos`
#[utoipa::path(
    get,
    path = "/onchain/utxos",
    tag = "onchain",
    summary = "On-chain coins",
    responses(
        (status = 200, description = "The unspent outputs", body = Vec<UtxoInfo>),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn onchain_utxos(State(state): State<AppState>) -> Result<Json<Vec<UtxoInfo>>, ApiError> {
    let utxos = state.engine.onchain().utxos().await?;
    Ok(Json(
        utxos
            .iter()
            .map(|u| UtxoInfo {
                outpoint: u.outpoint.to_string(),
                amount_sat: u.amount.to_sat(),
                confirmation_height: u.confirmation_height,
            })
            .collect(),
    ))
}

//! The `wallet` group: existence, creation, mnemonic, server connection.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use serde::{Deserialize, Serialize};

use crate::api::AppState;
use crate::api::error::ApiError;
use crate::engine::{BitcoindAuth, ChainSource, CreateWallet, WalletConfig};

#[derive(Debug, Serialize)]
pub struct WalletExistsResponse {
    /// The wallet's BIP-32 fingerprint, or null when there is no wallet.
    pub fingerprint: Option<String>,
    /// Berth extension: whether the wallet is open in bark and its background work
    /// runs (false while its chain source has not been reached yet).
    pub loaded: bool,
}

/// `GET /api/v1/wallet`
pub async fn wallet_exists(
    State(state): State<AppState>,
) -> Result<Json<WalletExistsResponse>, ApiError> {
    let fingerprint = state.engine.wallet_fingerprint().await?;
    Ok(Json(WalletExistsResponse {
        fingerprint: fingerprint.map(|f| f.to_string()),
        loaded: state.engine.is_loaded().await,
    }))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BarkNetwork {
    Mainnet,
    Signet,
    Mutinynet,
    Regtest,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BitcoindAuthDto {
    Cookie { cookie: String },
    UserPass { user: String, pass: String },
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChainSourceDto {
    Bitcoind {
        bitcoind: String,
        bitcoind_auth: BitcoindAuthDto,
    },
    Esplora {
        url: String,
    },
}

#[derive(Deserialize)]
pub struct CreateWalletRequest {
    pub network: BarkNetwork,
    pub mnemonic: Option<String>,
    pub birthday_height: Option<u32>,
    pub ark_server: Option<String>,
    /// Deprecated by barkd and ignored (servers no longer enforce access tokens).
    #[allow(dead_code)]
    pub ark_server_access_token: Option<String>,
    pub chain_source: Option<ChainSourceDto>,
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Serialize)]
pub struct CreateWalletResponse {
    pub fingerprint: String,
}

fn http_url(field: &str, value: &str) -> Result<String, ApiError> {
    let ok = (value.starts_with("http://") || value.starts_with("https://")) && value.len() > 8;
    if ok && !value.chars().any(char::is_whitespace) {
        Ok(value.to_string())
    } else {
        Err(ApiError::BadRequest(format!(
            "{field} must be an http:// or https:// URL"
        )))
    }
}

/// `POST /api/v1/wallet/create`
pub async fn create_wallet(
    State(state): State<AppState>,
    body: Result<Json<CreateWalletRequest>, JsonRejection>,
) -> Result<Json<CreateWalletResponse>, ApiError> {
    let Json(req) = body?;
    let network = match req.network {
        BarkNetwork::Mainnet => bitcoin::Network::Bitcoin,
        BarkNetwork::Signet | BarkNetwork::Mutinynet => bitcoin::Network::Signet,
        BarkNetwork::Regtest => bitcoin::Network::Regtest,
    };
    let mnemonic = req
        .mnemonic
        .as_deref()
        .map(|m| bark::bip39::Mnemonic::parse(m.trim()))
        .transpose()
        .map_err(|_| ApiError::BadRequest("mnemonic is not a valid BIP-39 phrase".into()))?;
    let config = match (req.ark_server, req.chain_source) {
        (None, None) => WalletConfig::Existing,
        (Some(ark), Some(chain)) => WalletConfig::New {
            ark_server: http_url("ark_server", &ark)?,
            chain: match chain {
                ChainSourceDto::Esplora { url } => ChainSource::Esplora {
                    url: http_url("chain_source.esplora.url", &url)?,
                },
                ChainSourceDto::Bitcoind {
                    bitcoind,
                    bitcoind_auth,
                } => ChainSource::Bitcoind {
                    url: http_url("chain_source.bitcoind.bitcoind", &bitcoind)?,
                    auth: match bitcoind_auth {
                        BitcoindAuthDto::Cookie { cookie } => BitcoindAuth::Cookie(cookie.into()),
                        BitcoindAuthDto::UserPass { user, pass } => {
                            BitcoindAuth::UserPass { user, pass }
                        }
                    },
                },
            },
        },
        (Some(_), None) => {
            return Err(ApiError::BadRequest(
                "chain_source is required with ark_server".into(),
            ));
        }
        (None, Some(_)) => {
            return Err(ApiError::BadRequest(
                "ark_server is required with chain_source".into(),
            ));
        }
    };
    let fingerprint = state
        .engine
        .create(CreateWallet {
            network,
            mnemonic,
            birthday_height: req.birthday_height,
            config,
            force: req.force,
        })
        .await?;
    Ok(Json(CreateWalletResponse {
        fingerprint: fingerprint.to_string(),
    }))
}

#[derive(Debug, Serialize)]
pub struct ConnectedResponse {
    pub connected: bool,
}

/// `GET /api/v1/wallet/connected`
pub async fn connected(State(state): State<AppState>) -> Result<Json<ConnectedResponse>, ApiError> {
    Ok(Json(ConnectedResponse {
        connected: state.engine.connected().await?,
    }))
}

#[derive(Serialize)]
pub struct MnemonicResponse {
    pub mnemonic: String,
}

/// `GET /api/v1/wallet/mnemonic`: 404 unless the daemon was started with
/// `--expose-mnemonic`, so its existence is not even confirmed otherwise.
pub async fn mnemonic(State(state): State<AppState>) -> Result<Json<MnemonicResponse>, ApiError> {
    if !state.expose_mnemonic {
        return Err(ApiError::NotFound("not found".into()));
    }
    Ok(Json(MnemonicResponse {
        mnemonic: state.engine.mnemonic().await?,
    }))
}

#[derive(Deserialize)]
pub struct WalletDeleteRequest {
    pub dangerous: bool,
    pub fingerprint: String,
}

#[derive(Debug, Serialize)]
pub struct WalletDeleteResponse {
    pub deleted: bool,
    pub message: String,
}

/// `DELETE /api/v1/wallet`: guarded twice — `dangerous: true` and the wallet's own
/// fingerprint — because it destroys the seed file.
pub async fn wallet_delete(
    State(state): State<AppState>,
    body: Result<Json<WalletDeleteRequest>, JsonRejection>,
) -> Result<Json<WalletDeleteResponse>, ApiError> {
    let Json(req) = body?;
    if !req.dangerous {
        return Err(ApiError::BadRequest(
            "deleting the wallet destroys its seed: set \"dangerous\": true to confirm".into(),
        ));
    }
    state.engine.delete(&req.fingerprint).await?;
    Ok(Json(WalletDeleteResponse {
        deleted: true,
        message: format!("wallet {} deleted", req.fingerprint),
    }))
}

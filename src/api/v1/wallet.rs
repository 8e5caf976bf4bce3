//! The `wallet` group: existence, creation, mnemonic, server connection.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::engine::{BitcoindAuth, ChainSource, CreateWallet, WalletConfig};

#[derive(Debug, Serialize, ToSchema)]
pub struct WalletExistsResponse {
    /// The wallet's BIP-32 fingerprint, or null when there is no wallet.
    pub fingerprint: Option<String>,
    /// Berth extension: whether the wallet is open in bark and its background work
    /// runs (false while its chain source has not been reached yet).
    pub loaded: bool,
}

/// `GET /api/v1/wallet`
#[utoipa::path(
    get,
    path = "/wallet",
    tag = "wallet",
    summary = "Whether a wallet exists",
    description = "The wallet's fingerprint, or null when there is none. `loaded` (Berth) says \
        whether it is open and its background work runs.",
    responses(
        (status = 200, description = "Wallet existence", body = WalletExistsResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn wallet_exists(
    State(state): State<AppState>,
) -> Result<Json<WalletExistsResponse>, ApiError> {
    let fingerprint = state.engine.wallet_fingerprint().await?;
    Ok(Json(WalletExistsResponse {
        fingerprint: fingerprint.map(|f| f.to_string()),
        loaded: state.engine.is_loaded().await,
    }))
}

/// The networks a wallet can be on.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum BarkNetwork {
    Mainnet,
    Signet,
    Mutinynet,
    Regtest,
}

/// How to authenticate to bitcoind's RPC.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
#[schema(as = BitcoindAuth)]
pub enum BitcoindAuthDto {
    /// Bitcoind's cookie file, by path.
    Cookie { cookie: String },
    /// A user name and password.
    UserPass { user: String, pass: String },
}

/// Where the wallet reads the chain from.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = ChainSourceConfig)]
pub enum ChainSourceDto {
    /// A bitcoind RPC server (needs `-txindex`).
    Bitcoind {
        bitcoind: String,
        bitcoind_auth: BitcoindAuthDto,
    },
    /// An Esplora HTTP server.
    Esplora { url: String },
}

#[derive(Deserialize, ToSchema)]
pub struct CreateWalletRequest {
    /// The network the wallet is on.
    pub network: BarkNetwork,
    /// A BIP-39 phrase to import; a new one is generated when absent.
    pub mnemonic: Option<String>,
    /// The block height to scan the chain from when importing a mnemonic.
    #[schema(minimum = 0)]
    pub birthday_height: Option<u32>,
    /// The Ark server's URL. Optional when the datadir has a `config.toml`.
    pub ark_server: Option<String>,
    /// Ignored: Ark servers no longer enforce access tokens (deprecated by barkd).
    #[allow(dead_code)]
    #[schema(deprecated)]
    pub ark_server_access_token: Option<String>,
    /// The chain source. Optional when the datadir has a `config.toml`.
    pub chain_source: Option<ChainSourceDto>,
    /// Create the wallet even when the Ark server or the chain source cannot be
    /// reached now (it connects and syncs once they can), or when the datadir holds
    /// files berthd does not know (they are left untouched).
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Serialize, ToSchema)]
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
#[utoipa::path(
    post,
    path = "/wallet/create",
    tag = "wallet",
    summary = "Create a wallet",
    description = "Creates and loads a wallet, from a new or an imported mnemonic, without a \
        restart. 422 when a wallet exists, when the datadir's `mnemonic` file holds another \
        seed (never overwritten, not even with `force`), or when the datadir holds files \
        berthd does not know (`force` creates the wallet beside them, untouched). Without \
        `force`, the Ark server must be reachable (503 otherwise).",
    request_body = CreateWalletRequest,
    responses(
        (status = 200, description = "Wallet created", body = CreateWalletResponse),
        (status = 400, description = "Malformed request", body = ErrorResponse),
        (status = 422, description = "A wallet exists, or the datadir holds another wallet's files", body = ErrorResponse),
        (status = 503, description = "Ark server or chain source unreachable", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
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

#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectedResponse {
    /// Whether the wallet can currently reach its Ark server.
    pub connected: bool,
}

/// `GET /api/v1/wallet/connected`
#[utoipa::path(
    get,
    path = "/wallet/connected",
    tag = "wallet",
    summary = "Check the Ark server connection",
    responses(
        (status = 200, description = "Whether the Ark server is reachable", body = ConnectedResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn connected(State(state): State<AppState>) -> Result<Json<ConnectedResponse>, ApiError> {
    Ok(Json(ConnectedResponse {
        connected: state.engine.connected().await?,
    }))
}

#[derive(Serialize, ToSchema)]
pub struct MnemonicResponse {
    /// The BIP-39 phrase backing the wallet.
    pub mnemonic: String,
}

/// `GET /api/v1/wallet/mnemonic`: 404 unless the daemon was started with
/// `--expose-mnemonic`, so its existence is not even confirmed otherwise.
#[utoipa::path(
    get,
    path = "/wallet/mnemonic",
    tag = "wallet",
    summary = "Get the wallet's mnemonic",
    description = "404 unless berthd was started with `--expose-mnemonic`.",
    responses(
        (status = 200, description = "The wallet's BIP-39 phrase", body = MnemonicResponse),
        (status = 404, description = "Mnemonic exposure is off", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn mnemonic(State(state): State<AppState>) -> Result<Json<MnemonicResponse>, ApiError> {
    if !state.expose_mnemonic {
        return Err(ApiError::not_found("not found"));
    }
    Ok(Json(MnemonicResponse {
        mnemonic: state.engine.mnemonic().await?,
    }))
}

#[derive(Deserialize, ToSchema)]
pub struct WalletDeleteRequest {
    /// Must be true: deleting destroys the seed.
    pub dangerous: bool,
    /// The wallet's fingerprint, as a second confirmation.
    pub fingerprint: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WalletDeleteResponse {
    pub deleted: bool,
    pub message: String,
}

/// `DELETE /api/v1/wallet`: guarded twice — `dangerous: true` and the wallet's own
/// fingerprint — because it destroys the seed file.
#[utoipa::path(
    delete,
    path = "/wallet",
    tag = "wallet",
    summary = "Delete the wallet",
    description = "Unloads the wallet and removes its database and seed. Needs `dangerous: true` \
        and the wallet's fingerprint.",
    request_body = WalletDeleteRequest,
    responses(
        (status = 200, description = "Wallet deleted", body = WalletDeleteResponse),
        (status = 400, description = "Not confirmed, another wallet's fingerprint, or malformed", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
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

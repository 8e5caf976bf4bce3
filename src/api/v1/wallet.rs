//! The `wallet` group: existence, creation, mnemonic, server connection.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::routes;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::routes::Routes;
use crate::api::v1::common::{
    Movement, Page, PageQuery, WalletVtxoInfo, amount, parse_vtxo_id, parse_vtxo_ids,
};
use crate::engine::{BitcoindAuth, ChainSource, CreateWallet, WalletConfig};

/// The group's routes, each with who may call it (`api::routes`).
#[allow(deprecated)]
pub(super) fn routes(routes: Routes) -> Routes {
    routes
        .read(routes!(wallet_exists))
        // barkd's alias of create.
        .admin(routes!(create_wallet_alias))
        .admin(routes!(wallet_delete))
        .admin(routes!(mnemonic))
        .admin(routes!(create_wallet))
        .read(routes!(connected))
        .read(routes!(balance))
        .read(routes!(vtxos))
        .read(routes!(get_vtxo))
        .read(routes!(get_vtxo_encoded))
        .read(routes!(sync))
        .receive(routes!(address))
        .moves_funds(routes!(send))
        .read(routes!(movements))
        .read(routes!(history))
        .moves_funds(routes!(refresh_vtxos))
        // Refreshes spend VTXOs (and fees) into new ones.
        .moves_funds(routes!(refresh_all))
        .read(routes!(pending_rounds))
        .moves_funds(routes!(offboard_all))
        .moves_funds(routes!(offboard_vtxos))
        .moves_funds(routes!(send_onchain))
        .read(routes!(ark_info))
        .receive(routes!(peek_address))
        .read(routes!(next_round))
        .read(routes!(sync_mailbox))
        .moves_funds(routes!(refresh_counterparty))
        .moves_funds(routes!(refresh_delegated))
        // Adds a VTXO someone handed over: receiving.
        .receive(routes!(import_vtxo))
        .receive(routes!(bip321_uri))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WalletExistsResponse {
    /// The wallet's BIP-32 fingerprint, or null when there is no wallet.
    pub fingerprint: Option<String>,
    /// Berth extension: whether the wallet is open in bark and its background work
    /// runs (false while its chain source has not been reached yet).
    pub loaded: bool,
    /// Berth extension: what seed recovery found when this wallet was imported from its
    /// phrase; null for a wallet made from a new seed (nothing to recover), for one
    /// made before berthd recorded it, and without a wallet.
    pub recovery: Option<RecoveryStatus>,
}

/// What bark's seed recovery found for an imported wallet. A phrase alone does not
/// always bring every VTXO back (`docs/operations.md`): `status` says whether this
/// one did, and the counts say what happened to each VTXO the recovery came across.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecoveryStatus {
    /// `pending` (the wallet is waiting for its Ark server, which recovery needs),
    /// `complete` (every VTXO found was decided on), `incomplete` (some were found but
    /// not restored: funds may be missing), or `failed` (recovery stopped before it
    /// could read the server's records).
    #[schema(example = "incomplete")]
    pub status: &'static str,
    /// What happened, for people.
    pub message: String,
    /// VTXOs the recovery came across in the server's records and mailboxes.
    pub found: Option<u32>,
    /// Restored as spendable.
    pub recovered: Option<u32>,
    pub recovered_sat: Option<u64>,
    /// Returned, but the server would not confirm they are unspent: kept locked, not
    /// spendable.
    pub unconfirmed: Option<u32>,
    pub unconfirmed_sat: Option<u64>,
    /// Named in the mailboxes, but the Ark server could not return them.
    pub unavailable: Option<u32>,
    /// Not derivable from the seed within the key gap limit (`vtxo_key_gap_limit`).
    pub beyond_gap_limit: Option<u32>,
    /// Spent already (or settling elsewhere), by the server's word.
    pub spent: Option<u32>,
    /// Exited on-chain already.
    pub exited: Option<u32>,
    /// Unknown to the server.
    pub unknown_to_server: Option<u32>,
    /// When the recovery ended.
    pub finished_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl RecoveryStatus {
    /// The API's view of the store's record of a wallet. `None`: nothing to say.
    pub fn of(record: &crate::store::WalletRecord) -> Option<RecoveryStatus> {
        use crate::store::Recovery;
        let empty = |status, message: String| RecoveryStatus {
            status,
            message,
            found: None,
            recovered: None,
            recovered_sat: None,
            unconfirmed: None,
            unconfirmed_sat: None,
            unavailable: None,
            beyond_gap_limit: None,
            spent: None,
            exited: None,
            unknown_to_server: None,
            finished_at: None,
        };
        match &record.recovery {
            None if record.imported => Some(empty(
                "pending",
                "Seed recovery runs once the wallet's Ark server answers.".into(),
            )),
            None | Some(Recovery::NotRun { .. }) => None,
            Some(failed @ Recovery::Failed { at_us, .. }) => Some(RecoveryStatus {
                finished_at: Some(crate::events::timestamp(*at_us)),
                ..empty("failed", crate::engine::recovery_message(failed))
            }),
            Some(finished @ Recovery::Finished { at_us, counts }) => Some(RecoveryStatus {
                status: if counts.not_restored() == 0 {
                    "complete"
                } else {
                    "incomplete"
                },
                message: crate::engine::recovery_message(finished),
                found: Some(counts.found()),
                recovered: Some(counts.recovered),
                recovered_sat: Some(counts.recovered_sat),
                unconfirmed: Some(counts.unconfirmed),
                unconfirmed_sat: Some(counts.unconfirmed_sat),
                unavailable: Some(counts.unavailable),
                beyond_gap_limit: Some(counts.beyond_gap_limit),
                spent: Some(counts.spent),
                exited: Some(counts.exited),
                unknown_to_server: Some(counts.unknown_to_server),
                finished_at: Some(crate::events::timestamp(*at_us)),
            }),
        }
    }
}

/// `GET /api/v1/wallet`
#[utoipa::path(
    get,
    path = "/wallet",
    tag = "wallet",
    summary = "Whether a wallet exists",
    description = "The wallet's fingerprint, or null when there is none. `loaded` (Berth) says \
        whether it is open and its background work runs; `recovery` (Berth) what seed \
        recovery found when it was imported from its phrase.",
    responses(
        (status = 200, description = "Wallet existence", body = WalletExistsResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn wallet_exists(
    State(state): State<AppState>,
) -> Result<Json<WalletExistsResponse>, ApiError> {
    let record = state.engine.wallet_record().await?;
    Ok(Json(WalletExistsResponse {
        fingerprint: record.as_ref().map(|r| r.fingerprint.to_string()),
        loaded: state.engine.is_loaded().await,
        recovery: record.as_ref().and_then(RecoveryStatus::of),
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
    /// reached now (the answer comes at once, and the wallet loads once they answer),
    /// or when the datadir holds files berthd does not know (they are left untouched).
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

/// What create answers, and when: shared by `POST /wallet/create` and barkd's alias.
const CREATE_DESCRIPTION: &str = "Creates and loads a wallet, from a new or an imported \
    mnemonic, without a restart. It answers once the wallet is loaded, so the next request \
    (an address, the Ark info, `connected`) is served at once, as barkd's is. Importing a \
    mnemonic runs bark's seed recovery before the answer (see `recovery` on \
    `GET /api/v1/wallet`); it needs the Ark server. 422 when a wallet exists, when the \
    datadir's seed file holds another seed (never overwritten, not even with `force`), or \
    when the datadir holds files berthd does not know (`force` creates the wallet beside \
    them, untouched). Without `force`, the chain source and the Ark server must answer: \
    503 otherwise, and nothing is left behind. With `force` and an unreachable chain \
    source (or, for an import, Ark server) it answers at once with the fingerprint; the \
    wallet loads in the background once they answer, and `loaded` on `GET /api/v1/wallet` \
    says when.";

/// `POST /api/v1/wallet/create`
#[utoipa::path(
    post,
    path = "/wallet/create",
    tag = "wallet",
    summary = "Create a wallet",
    description = CREATE_DESCRIPTION,
    request_body = CreateWalletRequest,
    responses(
        (status = 200, description = "Wallet created and loaded (with `force`, maybe still loading)", body = CreateWalletResponse),
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
    create(state, body).await
}

/// `POST /api/v1/wallet`: barkd serves create here too (bark-rest 0.8 routes `POST` on
/// the wallet resource to the same handler), beyond its published document.
#[utoipa::path(
    post,
    path = "/wallet",
    tag = "wallet",
    summary = "Create a wallet (barkd's alias of /wallet/create)",
    description = CREATE_DESCRIPTION,
    request_body = CreateWalletRequest,
    responses(
        (status = 200, description = "Wallet created and loaded (with `force`, maybe still loading)", body = CreateWalletResponse),
        (status = 400, description = "Malformed request", body = ErrorResponse),
        (status = 422, description = "A wallet exists, or the datadir holds another wallet's files", body = ErrorResponse),
        (status = 503, description = "Ark server or chain source unreachable", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn create_wallet_alias(
    State(state): State<AppState>,
    body: Result<Json<CreateWalletRequest>, JsonRejection>,
) -> Result<Json<CreateWalletResponse>, ApiError> {
    create(state, body).await
}

async fn create(
    state: AppState,
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
        mnemonic: state.engine.mnemonic().await?.to_string(),
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
    /// The deleted wallet's fingerprint (as barkd 0.8 answers).
    pub fingerprint: Option<String>,
    pub message: String,
}

/// `DELETE /api/v1/wallet`: guarded twice — `dangerous: true` and the wallet's own
/// fingerprint — because it destroys the seed file.
#[utoipa::path(
    delete,
    path = "/wallet",
    tag = "wallet",
    summary = "Delete the wallet",
    description = "Unloads the wallet and removes its database, seed and `config.toml`; \
        `barkd.lock` and `auth_token` stay. Needs `dangerous: true` and the wallet's \
        fingerprint. Without a wallet the answer is 200 with `deleted: false`, as barkd's \
        (berthd does not remove datadir files it has no wallet for, such as a seed file \
        without a wallet: barkd would).",
    request_body = WalletDeleteRequest,
    responses(
        (status = 200, description = "Wallet deleted, or there was none (`deleted: false`)", body = WalletDeleteResponse),
        (status = 400, description = "Not confirmed, another wallet's fingerprint, or malformed", body = ErrorResponse),
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
    if !state.engine.delete(&req.fingerprint).await? {
        return Ok(Json(WalletDeleteResponse {
            deleted: false,
            fingerprint: None,
            message: "no wallet to delete".into(),
        }));
    }
    Ok(Json(WalletDeleteResponse {
        deleted: true,
        fingerprint: Some(req.fingerprint.clone()),
        message: format!("wallet {} deleted", req.fingerprint),
    }))
}

/// The wallet's Ark balance by state, in sats. The first five fields are barkd's.
#[derive(Debug, Serialize, ToSchema)]
pub struct Balance {
    /// Spendable now, including VTXOs that must be refreshed before an arkoor payment
    /// (`needs_refresh_sat`), as barkd counts them.
    pub spendable_sat: u64,
    /// Locked in an outgoing Lightning payment that has not settled.
    pub pending_lightning_send_sat: u64,
    /// From an incoming Lightning payment, claimable but not yet swept into a VTXO.
    pub claimable_lightning_receive_sat: u64,
    /// Locked in a round that has not completed.
    pub pending_in_round_sat: u64,
    /// In boards waiting for confirmations.
    pub pending_board_sat: u64,
    /// In exits confirmed on-chain but not yet claimed.
    pub pending_exit_sat: Option<u64>,
    /// Berth: part of `spendable_sat` that must be refreshed (expired, or too deep)
    /// before it can be sent in an arkoor payment.
    pub needs_refresh_sat: u64,
    /// Berth: locked in an outgoing arkoor payment that has not completed.
    pub pending_arkoor_send_sat: u64,
    /// Berth: locked in an offboard whose transaction is not broadcast yet.
    pub pending_offboard_sat: u64,
    /// Berth: everything the wallet owns in Ark, the sum of all the above.
    pub total_sat: u64,
}

/// `GET /api/v1/wallet/balance`
#[utoipa::path(
    get,
    path = "/wallet/balance",
    tag = "wallet",
    summary = "Ark balance",
    description = "The wallet's off-chain balance by state, from local state (`POST /wallet/sync` \
        first for the latest).",
    responses(
        (status = 200, description = "The balance", body = Balance),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn balance(State(state): State<AppState>) -> Result<Json<Balance>, ApiError> {
    let b = state.engine.balance().await?;
    Ok(Json(Balance {
        spendable_sat: (b.spendable + b.needs_refresh).to_sat(),
        pending_lightning_send_sat: b.pending_lightning_send.to_sat(),
        claimable_lightning_receive_sat: b.claimable_lightning_receive.to_sat(),
        pending_in_round_sat: b.pending_in_round.to_sat(),
        pending_board_sat: b.pending_board.to_sat(),
        pending_exit_sat: Some(b.pending_exit.to_sat()),
        needs_refresh_sat: b.needs_refresh.to_sat(),
        pending_arkoor_send_sat: b.pending_arkoor_send.to_sat(),
        pending_offboard_sat: b.pending_offboard.to_sat(),
        total_sat: b.total().to_sat(),
    }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct VtxosQuery {
    /// Every VTXO, spent and exited ones too; by default only unspent ones.
    pub all: Option<bool>,
}

/// `GET /api/v1/wallet/vtxos`
#[utoipa::path(
    get,
    path = "/wallet/vtxos",
    tag = "wallet",
    summary = "List VTXOs",
    params(VtxosQuery, PageQuery),
    responses(
        (status = 200, description = "The VTXOs", body = Vec<WalletVtxoInfo>,
            headers(("Next-Cursor" = String, description = "With `limit`, when more follow: the `cursor` of the next page"))),
        (status = 400, description = "Malformed query", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn vtxos(
    State(state): State<AppState>,
    query: Result<Query<VtxosQuery>, QueryRejection>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Page<WalletVtxoInfo>, ApiError> {
    let Query(query) = query?;
    let Query(page) = page?;
    page.limit()?;
    let vtxos = state.engine.vtxos(query.all.unwrap_or(false)).await?;
    page.apply(vtxos.iter().map(WalletVtxoInfo::from).collect(), |v| {
        v.id.clone()
    })
}

fn vtxo_id(raw: Result<Path<String>, PathRejection>) -> Result<ark::VtxoId, ApiError> {
    let Path(id) = raw?;
    parse_vtxo_id(&id)
}

fn vtxo_not_found(id: ark::VtxoId) -> ApiError {
    ApiError::NotFound {
        message: format!("the wallet has no VTXO {id}"),
        resources: vec![id.to_string()],
    }
}

/// `GET /api/v1/wallet/vtxos/{id}`
#[utoipa::path(
    get,
    path = "/wallet/vtxos/{id}",
    tag = "wallet",
    summary = "One VTXO",
    params(("id" = String, Path, description = "The VTXO id, `txid:vout`")),
    responses(
        (status = 200, description = "The VTXO, in any state", body = WalletVtxoInfo),
        (status = 400, description = "Not a VTXO id", body = ErrorResponse),
        (status = 404, description = "No such VTXO", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn get_vtxo(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<WalletVtxoInfo>, ApiError> {
    let id = vtxo_id(id)?;
    match state.engine.vtxo(id).await? {
        Some(vtxo) => Ok(Json(WalletVtxoInfo::from(&vtxo))),
        None => Err(vtxo_not_found(id)),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EncodedVtxoResponse {
    /// The VTXO with its whole exit chain, ark-encoded, hex.
    pub encoded: String,
}

/// `GET /api/v1/wallet/vtxos/{id}/encoded`
#[utoipa::path(
    get,
    path = "/wallet/vtxos/{id}/encoded",
    tag = "wallet",
    summary = "One VTXO, encoded",
    params(("id" = String, Path, description = "The VTXO id, `txid:vout`")),
    responses(
        (status = 200, description = "The encoded VTXO", body = EncodedVtxoResponse),
        (status = 400, description = "Not a VTXO id", body = ErrorResponse),
        (status = 404, description = "No such VTXO", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn get_vtxo_encoded(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<EncodedVtxoResponse>, ApiError> {
    let id = vtxo_id(id)?;
    match state.engine.vtxo_encoded(id).await? {
        Some(encoded) => Ok(Json(EncodedVtxoResponse { encoded })),
        None => Err(vtxo_not_found(id)),
    }
}

/// `POST /api/v1/wallet/sync`
#[utoipa::path(
    post,
    path = "/wallet/sync",
    tag = "wallet",
    summary = "Sync the wallet",
    description = "Syncs with the Ark server and the chain: rounds, boards, payments, exits \
        (not the on-chain wallet: `POST /onchain/sync`). What cannot be reached is logged \
        and tried again on the next sync.",
    responses(
        (status = 200, description = "Synced"),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn sync(State(state): State<AppState>) -> Result<(), ApiError> {
    state.engine.sync().await?;
    Ok(())
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ArkAddressResponse {
    /// A new Ark address of the wallet (bech32m, `tark1…` off mainnet).
    pub address: String,
}

/// `POST /api/v1/wallet/addresses/next`
#[utoipa::path(
    post,
    path = "/wallet/addresses/next",
    tag = "wallet",
    summary = "New Ark address",
    description = "Derives and stores a new Ark address to receive payments on.",
    responses(
        (status = 200, description = "A new address", body = ArkAddressResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn address(State(state): State<AppState>) -> Result<Json<ArkAddressResponse>, ApiError> {
    let address = state.engine.ark_address_next().await?;
    Ok(Json(ArkAddressResponse {
        address: address.to_string(),
    }))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct SendRequest {
    /// An Ark address (Lightning destinations are not served by this version yet; a
    /// bitcoin address goes to `POST /wallet/send-onchain`).
    pub destination: String,
    /// The amount in sats; required for an Ark address, a Lightning address or an LNURL.
    #[schema(minimum = 0)]
    pub amount_sat: Option<u64>,
    /// A comment, for a Lightning address or LNURL only.
    pub comment: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SendResponse {
    pub message: String,
    /// The payment hash of a Lightning payment; null for an Ark payment.
    pub payment_hash: Option<String>,
    /// Berth: the movement that records the payment in the history.
    pub movement_id: Option<u32>,
}

/// `POST /api/v1/wallet/send`
#[utoipa::path(
    post,
    path = "/wallet/send",
    tag = "wallet",
    summary = "Send a payment",
    description = "Pays an Ark address out of round (arkoor). Returns once the payment has \\
        reached the recipient's mailbox; if that takes over a minute (server or mailbox \\
        down), 503 says it goes on in the background. 422 when the spendable balance is too \\
        small.",
    request_body = SendRequest,
    responses(
        (status = 200, description = "Sent", body = SendResponse),
        (status = 400, description = "Malformed, an unknown destination, or an address of another network or server", body = ErrorResponse),
        (status = 422, description = "No wallet, or not enough spendable funds", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn send(
    State(state): State<AppState>,
    body: Result<Json<SendRequest>, JsonRejection>,
) -> Result<Json<SendResponse>, ApiError> {
    let Json(req) = body?;
    let destination = req.destination.trim();
    if let Ok(address) = destination.parse::<ark::Address>() {
        let amount = match req.amount_sat {
            None => {
                return Err(ApiError::BadRequest(
                    "amount_sat is required to pay an Ark address".into(),
                ));
            }
            Some(sats) => amount("amount_sat", sats)?,
        };
        if req.comment.is_some() {
            return Err(ApiError::BadRequest(
                "a comment can only be sent to a Lightning address".into(),
            ));
        }
        let movement = state.engine.send_ark(&address, amount).await?;
        return Ok(Json(SendResponse {
            message: "Payment sent successfully".into(),
            payment_hash: None,
            movement_id: Some(movement.0),
        }));
    }
    if destination.parse::<bitcoin::Address<_>>().is_ok() {
        return Err(ApiError::BadRequest(
            "this is a bitcoin address: pay it with POST /api/v1/wallet/send-onchain".into(),
        ));
    }
    if let Some(destination) = crate::engine::lightning::LightningDestination::parse(destination) {
        let amount = req
            .amount_sat
            .map(|sats| amount("amount_sat", sats))
            .transpose()?;
        let started = state
            .engine
            .pay_lightning(&destination, amount, req.comment)
            .await?;
        return Ok(Json(SendResponse {
            message: "Payment initiated successfully".into(),
            payment_hash: Some(started.payment_hash.to_string()),
            movement_id: None,
        }));
    }
    Err(ApiError::BadRequest(
        "destination is not an Ark address, Lightning invoice, offer, Lightning address or LNURL"
            .into(),
    ))
}

/// `GET /api/v1/wallet/movements` (deprecated: `GET /api/v1/history`)
#[utoipa::path(
    get,
    path = "/wallet/movements",
    tag = "wallet",
    summary = "History (deprecated)",
    description = "The same as `GET /api/v1/history` without a filter.",
    params(PageQuery),
    responses(
        (status = 200, description = "Movements, newest first", body = Vec<Movement>,
            headers(("Next-Cursor" = String, description = "With `limit`, when more follow: the `cursor` of the next page"))),
        (status = 400, description = "Malformed limit or cursor", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
#[deprecated]
pub async fn movements(
    State(state): State<AppState>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Page<Movement>, ApiError> {
    let Query(page) = page?;
    crate::api::v1::history::history_page(&state, None, &page).await
}

/// `GET /api/v1/wallet/history` (deprecated: `GET /api/v1/history`)
#[utoipa::path(
    get,
    path = "/wallet/history",
    tag = "wallet",
    summary = "History (deprecated)",
    description = "The same as `GET /api/v1/history` without a filter.",
    params(PageQuery),
    responses(
        (status = 200, description = "Movements, newest first", body = Vec<Movement>,
            headers(("Next-Cursor" = String, description = "With `limit`, when more follow: the `cursor` of the next page"))),
        (status = 400, description = "Malformed limit or cursor", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
#[deprecated]
pub async fn history(
    State(state): State<AppState>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Page<Movement>, ApiError> {
    let Query(page) = page?;
    crate::api::v1::history::history_page(&state, None, &page).await
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct RefreshRequest {
    /// The VTXOs (`txid:vout`) to refresh; all must be spendable.
    pub vtxos: Vec<String>,
}

/// A VTXO requested from a round.
#[derive(Debug, Serialize, ToSchema)]
pub struct VtxoRequestInfo {
    pub amount_sat: u64,
    pub policy_type: String,
    pub user_pubkey: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RoundParticipationInfo {
    /// The VTXOs given up in the round.
    pub inputs: Vec<String>,
    /// The VTXOs asked for in return.
    pub outputs: Vec<VtxoRequestInfo>,
}

/// Where a round participation stands.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum RoundStatus {
    /// The round's state could not be synced.
    SyncError { error: String },
    /// The round succeeded and its funding transaction is confirmed.
    Confirmed { funding_txid: String },
    /// The round succeeded; its funding transaction awaits confirmation.
    Unconfirmed { funding_txid: String },
    /// Waiting for the round, or playing it.
    Pending,
    /// The round failed.
    Failed { error: String },
    /// The participation was canceled.
    Canceled,
}

/// A round participation that has not finished.
#[derive(Debug, Serialize, ToSchema)]
pub struct PendingRoundInfo {
    pub id: u32,
    pub status: RoundStatus,
    pub participation: RoundParticipationInfo,
    /// The delegated round's unlock hash, if any.
    #[schema(required = true)]
    pub unlock_hash: Option<String>,
    /// The round's funding transaction id, once known.
    #[schema(required = true)]
    pub funding_txid: Option<String>,
    /// The round's funding transaction, hex, once known.
    pub funding_tx_hex: Option<String>,
    /// Berth: bark's finer phase (`pending`, `ongoing`, `awaiting-confirmations`,
    /// `delegated-pending`, `failed`, `canceled`).
    pub flow: String,
}

impl From<&bark::persist::models::StoredRoundState<bark::persist::models::Unlocked>>
    for PendingRoundInfo
{
    fn from(
        stored: &bark::persist::models::StoredRoundState<bark::persist::models::Unlocked>,
    ) -> Self {
        use bark::round::RoundFlowKind as F;
        let state = stored.state();
        let funding_tx = state.funding_tx();
        let funding_txid = funding_tx.map(|tx| tx.compute_txid().to_string());
        let flow = state.flow_kind();
        let status = match (flow, &funding_txid) {
            (F::AwaitingConfirmations, Some(txid)) => RoundStatus::Unconfirmed {
                funding_txid: txid.clone(),
            },
            (F::Failed, _) => RoundStatus::Failed {
                error: "the round failed".into(),
            },
            (F::Canceled, _) => RoundStatus::Canceled,
            _ => RoundStatus::Pending,
        };
        let participation = state.participation();
        PendingRoundInfo {
            id: stored.id().0,
            status,
            participation: RoundParticipationInfo {
                inputs: participation
                    .inputs
                    .iter()
                    .map(|v| v.id().to_string())
                    .collect(),
                outputs: participation
                    .outputs
                    .iter()
                    .map(|o| VtxoRequestInfo {
                        amount_sat: o.amount.to_sat(),
                        policy_type: o.policy.policy_type().to_string(),
                        user_pubkey: o.policy.user_pubkey().to_string(),
                    })
                    .collect(),
            },
            unlock_hash: state.unlock_hash().map(|h| h.to_string()),
            funding_txid,
            funding_tx_hex: funding_tx.map(bitcoin::consensus::encode::serialize_hex),
            flow: flow.to_string(),
        }
    }
}

/// `POST /api/v1/wallet/refresh/vtxos`
#[utoipa::path(
    post,
    path = "/wallet/refresh/vtxos",
    tag = "wallet",
    summary = "Refresh VTXOs",
    description = "Joins the next round to swap these VTXOs for new ones (a fresh expiry, exit \\
        depth 1). Returns at once; the round runs when the server holds one, and completes once \\
        its funding transaction confirms (`GET /wallet/rounds`).",
    request_body = RefreshRequest,
    responses(
        (status = 200, description = "The participation", body = PendingRoundInfo),
        (status = 400, description = "Malformed, or amounts below dust", body = ErrorResponse),
        (status = 404, description = "Unknown VTXOs", body = NotFoundResponse),
        (status = 422, description = "No wallet, or a VTXO is not spendable", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn refresh_vtxos(
    State(state): State<AppState>,
    body: Result<Json<RefreshRequest>, JsonRejection>,
) -> Result<Json<PendingRoundInfo>, ApiError> {
    let Json(req) = body?;
    let ids = parse_vtxo_ids(&req.vtxos)?;
    let round = state.engine.refresh_vtxos(&ids).await?;
    Ok(Json(PendingRoundInfo::from(&round)))
}

/// `POST /api/v1/wallet/refresh/all`
#[utoipa::path(
    post,
    path = "/wallet/refresh/all",
    tag = "wallet",
    summary = "Refresh all VTXOs",
    description = "Joins the next round with every spendable VTXO. 422 when there are none.",
    responses(
        (status = 200, description = "The participation", body = PendingRoundInfo),
        (status = 422, description = "No wallet, or nothing to refresh", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn refresh_all(
    State(state): State<AppState>,
) -> Result<Json<PendingRoundInfo>, ApiError> {
    let round = state.engine.refresh_all().await?;
    Ok(Json(PendingRoundInfo::from(&round)))
}

/// `GET /api/v1/wallet/rounds`
#[utoipa::path(
    get,
    path = "/wallet/rounds",
    tag = "wallet",
    summary = "Pending rounds",
    description = "Round participations that have not finished, as of the last sync.",
    responses(
        (status = 200, description = "The participations", body = Vec<PendingRoundInfo>),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn pending_rounds(
    State(state): State<AppState>,
) -> Result<Json<Vec<PendingRoundInfo>>, ApiError> {
    let rounds = state.engine.pending_rounds().await?;
    Ok(Json(rounds.iter().map(PendingRoundInfo::from).collect()))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct OffboardResult {
    /// The offboard transaction, broadcast.
    pub offboard_txid: String,
    /// Berth: the movement that records it in the history.
    pub movement_id: u32,
}

impl From<bark::OffboardResult> for OffboardResult {
    fn from(result: bark::OffboardResult) -> Self {
        OffboardResult {
            offboard_txid: result.txid.to_string(),
            movement_id: result.movement_id.0,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct OffboardAllRequest {
    /// Where to send the funds; a new address of the on-chain wallet when absent.
    pub address: Option<String>,
}

/// `POST /api/v1/wallet/offboard/all`
#[utoipa::path(
    post,
    path = "/wallet/offboard/all",
    tag = "wallet",
    summary = "Offboard everything",
    description = "Sends every spendable VTXO on-chain, less the server's offboard fee. Returns \\
        once the transaction is broadcast.",
    request_body = OffboardAllRequest,
    responses(
        (status = 200, description = "Broadcast", body = OffboardResult),
        (status = 400, description = "Malformed, or an address of another network", body = ErrorResponse),
        (status = 422, description = "No wallet, or nothing spendable", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn offboard_all(
    State(state): State<AppState>,
    body: Result<Json<OffboardAllRequest>, JsonRejection>,
) -> Result<Json<OffboardResult>, ApiError> {
    let Json(req) = body?;
    let result = state.engine.offboard_all(req.address.as_deref()).await?;
    Ok(Json(result.into()))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct OffboardVtxosRequest {
    /// The VTXOs (`txid:vout`) to offboard; all must be spendable.
    pub vtxos: Vec<String>,
    /// Where to send the funds; a new address of the on-chain wallet when absent.
    pub address: Option<String>,
}

/// `POST /api/v1/wallet/offboard/vtxos`
#[utoipa::path(
    post,
    path = "/wallet/offboard/vtxos",
    tag = "wallet",
    summary = "Offboard VTXOs",
    description = "Sends these VTXOs on-chain, less the server's offboard fee. Returns once the \\
        transaction is broadcast.",
    request_body = OffboardVtxosRequest,
    responses(
        (status = 200, description = "Broadcast", body = OffboardResult),
        (status = 400, description = "Malformed, or an address of another network", body = ErrorResponse),
        (status = 404, description = "Unknown VTXOs", body = NotFoundResponse),
        (status = 422, description = "No wallet, or a VTXO is not spendable", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn offboard_vtxos(
    State(state): State<AppState>,
    body: Result<Json<OffboardVtxosRequest>, JsonRejection>,
) -> Result<Json<OffboardResult>, ApiError> {
    let Json(req) = body?;
    let ids = parse_vtxo_ids(&req.vtxos)?;
    let result = state
        .engine
        .offboard_vtxos(&ids, req.address.as_deref())
        .await?;
    Ok(Json(result.into()))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct SendOnchainRequest {
    /// The bitcoin address to pay.
    pub destination: String,
    /// What the destination receives, in sats; the server's offboard fee comes on top.
    #[schema(minimum = 0)]
    pub amount_sat: u64,
}

/// `POST /api/v1/wallet/send-onchain`
#[utoipa::path(
    post,
    path = "/wallet/send-onchain",
    tag = "wallet",
    summary = "Pay on-chain from the Ark balance",
    description = "Pays a bitcoin address out of the Ark balance (an offboard of the exact \\
        amount; change stays in Ark). Returns once the transaction is broadcast.",
    request_body = SendOnchainRequest,
    responses(
        (status = 200, description = "Broadcast", body = OffboardResult),
        (status = 400, description = "Malformed, an address of another network, or below dust", body = ErrorResponse),
        (status = 422, description = "No wallet, or not enough spendable funds", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn send_onchain(
    State(state): State<AppState>,
    body: Result<Json<SendOnchainRequest>, JsonRejection>,
) -> Result<Json<OffboardResult>, ApiError> {
    let Json(req) = body?;
    let result = state
        .engine
        .send_onchain_from_ark(&req.destination, amount("amount_sat", req.amount_sat)?)
        .await?;
    Ok(Json(result.into()))
}

/// The Ark server's parameters.
#[derive(Debug, Serialize, ToSchema)]
pub struct ArkInfo {
    /// bitcoin, testnet, signet or regtest.
    pub network: String,
    pub server_pubkey: String,
    pub mailbox_pubkey: String,
    /// Time between rounds, e.g. `1h` or `1m 30s`.
    pub round_interval: String,
    pub nb_round_nonces: usize,
    /// Blocks between an exit's confirmation and its claim.
    pub vtxo_exit_delta: u16,
    /// Blocks a VTXO lives.
    pub vtxo_lifetime: u16,
    /// The same as `vtxo_lifetime` (barkd's deprecated name).
    pub vtxo_expiry_delta: u16,
    pub htlc_send_expiry_delta: u16,
    pub htlc_expiry_delta: u16,
    /// The largest VTXO the server accepts, sats; null when it has no maximum.
    #[schema(required = true)]
    pub max_vtxo_amount: Option<u64>,
    pub required_board_confirmations: usize,
    pub max_user_invoice_cltv_delta: u16,
    pub min_board_amount_sat: u64,
    pub offboard_feerate_sat_per_kvb: u64,
    pub ln_receive_anti_dos_required: bool,
    pub fees: crate::api::v1::fees::FeeSchedule,
    pub max_vtxo_exit_depth: u16,
    pub max_offboard_inputs: usize,
    pub tos_link: Option<String>,
}

/// `1h 30m`, `45s`: the format barkd shows durations in.
fn human_duration(d: std::time::Duration) -> String {
    let mut secs = d.as_secs();
    let mut parts = Vec::new();
    for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if secs >= size {
            parts.push(format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    if secs > 0 || parts.is_empty() && d.subsec_millis() == 0 {
        parts.push(format!("{secs}s"));
    }
    if d.subsec_millis() > 0 {
        parts.push(format!("{}ms", d.subsec_millis()));
    }
    parts.join(" ")
}

/// `GET /api/v1/wallet/ark-info`
#[utoipa::path(
    get,
    path = "/wallet/ark-info",
    tag = "wallet",
    summary = "Ark server parameters",
    responses(
        (status = 200, description = "The server's parameters", body = ArkInfo),
        (status = 404, description = "The Ark server has not been reached", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn ark_info(State(state): State<AppState>) -> Result<Json<ArkInfo>, ApiError> {
    let Some(a) = state.engine.ark_info().await? else {
        return Err(ApiError::NotFound {
            message: "the wallet has not reached its Ark server".into(),
            resources: vec!["ark server".into()],
        });
    };
    #[allow(deprecated)]
    let offboard_feerate = a.offboard_feerate.to_sat_per_kwu() * 4;
    Ok(Json(ArkInfo {
        network: a.network.to_string(),
        server_pubkey: a.server_pubkey.to_string(),
        mailbox_pubkey: a.mailbox_pubkey.to_string(),
        round_interval: human_duration(a.round_interval),
        nb_round_nonces: a.nb_round_nonces,
        vtxo_exit_delta: a.vtxo_exit_delta.to_u16(),
        vtxo_lifetime: a.vtxo_lifetime.to_u16(),
        vtxo_expiry_delta: a.vtxo_lifetime.to_u16(),
        htlc_send_expiry_delta: a.htlc_send_expiry_delta.to_u16(),
        htlc_expiry_delta: a.htlc_expiry_delta.to_u16(),
        max_vtxo_amount: a.max_vtxo_amount.map(|m| m.to_sat()),
        required_board_confirmations: a.required_board_confirmations,
        max_user_invoice_cltv_delta: a.max_user_invoice_cltv_delta.to_u16(),
        min_board_amount_sat: a.min_board_amount.to_sat(),
        offboard_feerate_sat_per_kvb: offboard_feerate,
        ln_receive_anti_dos_required: a.ln_receive_anti_dos_required,
        fees: (&a.fees).into(),
        max_vtxo_exit_depth: a.max_vtxo_exit_depth,
        max_offboard_inputs: a.max_offboard_inputs,
        tos_link: a.tos_link.clone(),
    }))
}

/// `GET /api/v1/wallet/addresses/index/{index}`
#[utoipa::path(
    get,
    path = "/wallet/addresses/index/{index}",
    tag = "wallet",
    summary = "Ark address by index",
    description = "An Ark address the wallet handed out before; 404 for an index not reached yet.",
    params(("index" = u32, Path, description = "Index for the address.")),
    responses(
        (status = 200, description = "The address", body = ArkAddressResponse),
        (status = 400, description = "Not an index", body = ErrorResponse),
        (status = 404, description = "No address at this index yet", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn peek_address(
    State(state): State<AppState>,
    index: Result<Path<u32>, PathRejection>,
) -> Result<Json<ArkAddressResponse>, ApiError> {
    let Path(index) = index?;
    match state.engine.ark_address_at(index).await? {
        Some(address) => Ok(Json(ArkAddressResponse {
            address: address.to_string(),
        })),
        None => Err(ApiError::NotFound {
            message: format!("no Ark address at index {index} yet"),
            resources: vec![index.to_string()],
        }),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NextRoundStart {
    /// When the next round starts (RFC 3339).
    pub start_time: chrono::DateTime<chrono::Utc>,
}

/// `GET /api/v1/wallet/next-round`
#[utoipa::path(
    get,
    path = "/wallet/next-round",
    tag = "wallet",
    summary = "Next round",
    responses(
        (status = 200, description = "When the next round starts", body = NextRoundStart),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn next_round(State(state): State<AppState>) -> Result<Json<NextRoundStart>, ApiError> {
    let start = state.engine.next_round_start().await?;
    Ok(Json(NextRoundStart {
        start_time: start.into(),
    }))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn durations_read_as_barkd_shows_them() {
        for (secs, millis, shown) in [
            (0, 0, "0s"),
            (10, 0, "10s"),
            (90, 0, "1m 30s"),
            (3600, 0, "1h"),
            (90_061, 0, "1d 1h 1m 1s"),
            (1, 500, "1s 500ms"),
        ] {
            let d = Duration::from_secs(secs) + Duration::from_millis(millis);
            assert_eq!(super::human_duration(d), shown);
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MailboxSyncResponse {
    /// The mailbox position consumed up to; never decreases.
    pub checkpoint: u64,
}

/// `POST /api/v1/wallet/sync/mailbox`
#[utoipa::path(
    post,
    path = "/wallet/sync/mailbox",
    tag = "wallet",
    summary = "Sync the mailbox",
    description = "Fetches what the Ark server's mailbox holds for the wallet (incoming \
        payments). bark's background daemon also follows the mailbox continuously.",
    responses(
        (status = 200, description = "Synced", body = MailboxSyncResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn sync_mailbox(
    State(state): State<AppState>,
) -> Result<Json<MailboxSyncResponse>, ApiError> {
    Ok(Json(MailboxSyncResponse {
        checkpoint: state.engine.sync_mailbox().await?,
    }))
}

/// `POST /api/v1/wallet/refresh/counterparty`
#[utoipa::path(
    post,
    path = "/wallet/refresh/counterparty",
    tag = "wallet",
    summary = "Refresh VTXOs with counterparty risk",
    description = "Joins the next round with the VTXOs received out of round from others, so \
        they no longer depend on the sender. 404 when there are none.",
    responses(
        (status = 200, description = "The participation", body = PendingRoundInfo),
        (status = 404, description = "Nothing to refresh", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn refresh_counterparty(
    State(state): State<AppState>,
) -> Result<Json<PendingRoundInfo>, ApiError> {
    match state.engine.refresh_counterparty().await? {
        Some(round) => Ok(Json(PendingRoundInfo::from(&round))),
        None => Err(ApiError::NotFound {
            message: "no VTXO with counterparty risk to refresh".into(),
            resources: Vec::new(),
        }),
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct DelegatedRefreshRequest {
    /// The VTXOs (`txid:vout`) to refresh; all must be spendable.
    pub vtxos: Vec<String>,
    /// Refresh once the chain reaches this height (priced at it); the next round when
    /// absent.
    #[schema(minimum = 0)]
    pub height: Option<u32>,
}

/// `POST /api/v1/wallet/refresh/delegated/vtxos`
#[utoipa::path(
    post,
    path = "/wallet/refresh/delegated/vtxos",
    tag = "wallet",
    summary = "Delegated refresh",
    description = "Hands these VTXOs to the server to refresh in a round without the wallet \
        taking part interactively.",
    request_body = DelegatedRefreshRequest,
    responses(
        (status = 200, description = "The participation", body = PendingRoundInfo),
        (status = 400, description = "Malformed, or amounts below dust", body = ErrorResponse),
        (status = 404, description = "Unknown VTXOs", body = NotFoundResponse),
        (status = 422, description = "No wallet, or a VTXO is not spendable", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn refresh_delegated(
    State(state): State<AppState>,
    body: Result<Json<DelegatedRefreshRequest>, JsonRejection>,
) -> Result<Json<PendingRoundInfo>, ApiError> {
    let Json(req) = body?;
    let ids = parse_vtxo_ids(&req.vtxos)?;
    let round = state.engine.refresh_delegated(&ids, req.height).await?;
    Ok(Json(PendingRoundInfo::from(&round)))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct ImportVtxoRequest {
    /// Ark-encoded VTXOs with their exit chain, hex (as `GET /wallet/vtxos/{id}/encoded`
    /// gives them).
    pub vtxos: Vec<String>,
}

/// `POST /api/v1/wallet/import-vtxo`
#[utoipa::path(
    post,
    path = "/wallet/import-vtxo",
    tag = "wallet",
    summary = "Import VTXOs",
    description = "Adds VTXOs that belong to this wallet's seed (from a backup or another device) \
        after checking them and asking the server whether they are spent.",
    request_body = ImportVtxoRequest,
    responses(
        (status = 200, description = "The imported VTXOs", body = Vec<WalletVtxoInfo>),
        (status = 400, description = "Malformed, invalid, or not this wallet's", body = ErrorResponse),
        (status = 422, description = "No wallet, or a VTXO in flight", body = ErrorResponse),
        (status = 503, description = "Ark server unreachable, or the wallet not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn import_vtxo(
    State(state): State<AppState>,
    body: Result<Json<ImportVtxoRequest>, JsonRejection>,
) -> Result<Json<Vec<WalletVtxoInfo>>, ApiError> {
    use ark::encode::ProtocolEncoding;
    let Json(req) = body?;
    if req.vtxos.is_empty() {
        return Err(ApiError::BadRequest("vtxos must not be empty".into()));
    }
    let vtxos = req
        .vtxos
        .iter()
        .enumerate()
        .map(|(i, hex)| {
            ark::Vtxo::<ark::vtxo::Full>::deserialize_hex(hex.trim()).map_err(|e| {
                ApiError::BadRequest(format!("vtxos[{i}] is not an encoded VTXO: {e}"))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let imported = state.engine.import_vtxos(vtxos).await?;
    Ok(Json(imported.iter().map(WalletVtxoInfo::from).collect()))
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct Bip321UriRequest {
    /// The amount to ask for, sats; also makes a BOLT11 invoice (the Ark server's
    /// Lightning receive fee comes off it).
    #[schema(minimum = 0)]
    pub amount_sat: Option<u64>,
    /// Also offer a new on-chain address (default false).
    pub onchain: Option<bool>,
    /// The URI's `label`.
    pub label: Option<String>,
    /// The URI's `message`.
    pub message: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Bip321Query {
    /// Upper-case the URI for a compact QR code; 400 if a label or message would
    /// change meaning.
    pub uppercase: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Bip321UriResponse {
    /// The `bitcoin:` URI.
    pub bip321: String,
    /// Its Ark address.
    pub ark: Option<String>,
    /// Its BOLT11 invoice, when an amount was asked.
    pub bolt11: Option<String>,
    /// Its on-chain address, when asked.
    pub onchain: Option<String>,
}

/// `POST /api/v1/wallet/bip321`
#[utoipa::path(
    post,
    path = "/wallet/bip321",
    tag = "wallet",
    summary = "Payment URI",
    description = "A BIP-321 `bitcoin:` URI with a new Ark address, a BOLT11 invoice when \
        `amount_sat` is given (503 when the Ark server offers no Lightning), and a new on-chain \
        address when `onchain` is true.",
    params(Bip321Query),
    request_body = Bip321UriRequest,
    responses(
        (status = 200, description = "The URI and its parts", body = Bip321UriResponse),
        (status = 400, description = "Malformed, a zero amount, or not upper-casable", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "No Lightning invoice could be made, or the wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn bip321_uri(
    State(state): State<AppState>,
    query: Result<Query<Bip321Query>, QueryRejection>,
    body: Result<Json<Bip321UriRequest>, JsonRejection>,
) -> Result<Json<Bip321UriResponse>, ApiError> {
    let Query(query) = query?;
    let Json(req) = body?;
    let uppercase = query.uppercase.unwrap_or(false);
    // Refuse before anything is derived or an invoice made.
    let lowercase_text = [&req.label, &req.message]
        .into_iter()
        .flatten()
        .any(|t| t.chars().any(char::is_lowercase));
    if uppercase && lowercase_text {
        return Err(ApiError::BadRequest(
            "cannot upper-case the URI: its label or message would change".into(),
        ));
    }
    if let Some(sats) = req.amount_sat {
        amount("amount_sat", sats)?;
    }
    let uri = state
        .engine
        .bip321_uri(
            req.amount_sat.map(bitcoin::Amount::from_sat),
            req.label,
            req.message,
            req.onchain.unwrap_or(false),
        )
        .await?;
    let bip321 = if uppercase {
        uri.checked_uppercase().ok_or_else(|| {
            ApiError::BadRequest("cannot upper-case this URI without changing it".into())
        })?
    } else {
        uri.to_string()
    };
    Ok(Json(Bip321UriResponse {
        bip321,
        ark: uri
            .extensions()
            .ark()
            .first()
            .map(|f| f.inner().to_string()),
        bolt11: uri.lightning().first().map(|f| f.inner().to_string()),
        onchain: uri
            .address()
            .map(ToString::to_string)
            .or_else(|| uri.tb().first().map(|f| f.inner().to_string())),
    }))
}

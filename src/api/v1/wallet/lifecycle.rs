//! The wallet's lifecycle: whether it exists (and how its seed recovery went), create
//! (and barkd's alias), delete, and the mnemonic.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::engine::{BitcoindAuth, ChainSource, CreateWallet};

#[derive(Debug, Serialize, ToSchema)]
pub struct WalletExistsResponse {
    /// The wallet's BIP-32 fingerprint, or null when there is no wallet.
    pub fingerprint: Option<String>,
    /// Berth extension: whether the wallet is open in bark and its background work
    /// runs (false while its chain source has not been reached yet).
    pub loaded: bool,
    /// Berth extension: whether the wallet waits for its seed's passphrase (it was
    /// sealed with one and berthd restarted): `POST /api/v1/wallet/unlock`.
    pub locked: bool,
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
        whether it is open and its background work runs; `locked` (Berth) whether it waits \
        for its seed's passphrase; `recovery` (Berth) what seed recovery found when it was \
        imported from its phrase.",
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
        loaded: state.engine.is_loaded(),
        locked: state.engine.is_locked(),
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
    /// Berth: also seal the seed with this passphrase, on top of the key sources
    /// `berth.toml [seed]` configures. berthd then starts locked after each restart
    /// until an admin unlocks the wallet with it (`POST /api/v1/wallet/unlock`, or the
    /// console). Nothing recovers the seed without it but the recovery phrase.
    #[schema(min_length = 8)]
    pub seed_passphrase: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CreateWalletResponse {
    pub fingerprint: String,
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
    let fingerprint = state.engine.create(create_request(req)?).await?;
    Ok(Json(CreateWalletResponse {
        fingerprint: fingerprint.to_string(),
    }))
}

/// A create request as the engine takes it, checked by the engine's own rules
/// ([`crate::engine::CreateParts::check`], which the console uses too).
fn create_request(req: CreateWalletRequest) -> Result<CreateWallet, ApiError> {
    let network = match req.network {
        BarkNetwork::Mainnet => bitcoin::Network::Bitcoin,
        BarkNetwork::Signet | BarkNetwork::Mutinynet => bitcoin::Network::Signet,
        BarkNetwork::Regtest => bitcoin::Network::Regtest,
    };
    let chain = req.chain_source.map(|chain| match chain {
        ChainSourceDto::Esplora { url } => ChainSource::Esplora { url },
        ChainSourceDto::Bitcoind {
            bitcoind,
            bitcoind_auth,
        } => ChainSource::Bitcoind {
            url: bitcoind,
            auth: match bitcoind_auth {
                BitcoindAuthDto::Cookie { cookie } => BitcoindAuth::Cookie(cookie.into()),
                BitcoindAuthDto::UserPass { user, pass } => BitcoindAuth::UserPass { user, pass },
            },
        },
    });
    crate::engine::CreateParts {
        network: Some(network),
        mnemonic: req.mnemonic,
        birthday_height: req.birthday_height,
        ark_server: req.ark_server,
        chain,
        force: req.force,
        seed_passphrase: req.seed_passphrase,
    }
    .check()
    .map_err(|refused| ApiError::BadRequest(refused.to_string()))
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
pub struct UnlockRequest {
    /// The passphrase the seed was sealed with.
    #[schema(min_length = 1)]
    pub passphrase: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UnlockResponse {
    /// The unlocked wallet's fingerprint; it loads in the background, as at start.
    pub fingerprint: String,
}

/// `POST /api/v1/wallet/unlock` (Berth): a seed sealed with a passphrase that berthd was
/// not given at start leaves the wallet locked until an admin gives it here.
#[utoipa::path(
    post,
    path = "/wallet/unlock",
    tag = "wallet",
    summary = "Unlock a wallet whose seed waits for its passphrase",
    description = "Berth. When the seed is sealed with a passphrase (`seed_passphrase` at \
        create, or `berth.toml [seed] sources`) and berthd was not given it at start, the \
        wallet is locked (`GET /wallet` says `locked`; wallet requests answer 503) until \
        this call gives it. A wrong passphrase is answered after a pause. The passphrase \
        is kept in memory until berthd stops, never on disk.",
    request_body = UnlockRequest,
    responses(
        (status = 200, description = "Unlocked; the wallet loads", body = UnlockResponse),
        (status = 400, description = "A wrong or empty passphrase, or malformed", body = ErrorResponse),
        (status = 422, description = "No wallet, or it is not locked", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn unlock(
    State(state): State<AppState>,
    body: Result<Json<UnlockRequest>, JsonRejection>,
) -> Result<Json<UnlockResponse>, ApiError> {
    let Json(body) = body?;
    let fingerprint = state
        .engine
        .unlock(zeroize::Zeroizing::new(body.passphrase))
        .await?;
    Ok(Json(UnlockResponse {
        fingerprint: fingerprint.to_string(),
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

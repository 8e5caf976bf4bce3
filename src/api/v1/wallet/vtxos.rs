//! The Ark balance and the VTXOs: list, one, encoded, import; syncing with the Ark
//! server and its mailbox.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::v1::common::{Fresh, PageQuery, RenderedPage, WalletVtxoInfo, parse_vtxo_id};
use crate::engine::Freshness;

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
    /// Berth: true while the wallet cannot be opened (its chain source unreachable):
    /// this is the balance as it stood when the wallet was last open (also said by the
    /// `Berth-Freshness` header).
    pub possibly_stale: bool,
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
        (status = 200, description = "The balance", body = Balance,
            headers(("Berth-Freshness" = String, description = "`current`, or `possibly-stale` while the wallet cannot be opened (chain source unreachable): what the wallet database held when it was last open"))),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is locked (its seed waits for its passphrase)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn balance(State(state): State<AppState>) -> Result<Fresh<Json<Balance>>, ApiError> {
    let freshness = state.engine.freshness().await?;
    let b = state.engine.reads().balance().await?;
    Ok(Fresh(
        freshness,
        Json(Balance {
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
            possibly_stale: freshness == Freshness::PossiblyStale,
        }),
    ))
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
            headers(("Next-Cursor" = String, description = "With `limit`, when more follow: the `cursor` of the next page"),
                ("Berth-Freshness" = String, description = "`current`, or `possibly-stale` while the wallet cannot be opened (chain source unreachable): what the wallet database held when it was last open"))),
        (status = 400, description = "Malformed query", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is locked (its seed waits for its passphrase)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn vtxos(
    State(state): State<AppState>,
    query: Result<Query<VtxosQuery>, QueryRejection>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Fresh<RenderedPage>, ApiError> {
    let Query(query) = query?;
    let Query(page) = page?;
    let all = query.all.unwrap_or(false);
    let paged = page.limit()?.is_some();
    let freshness = state.engine.freshness().await?;
    // The whole list (barkd's answer) is kept as sent until the store next changes
    // (`page_cache`); read the generation before the list.
    let generation = state.engine.reads().store_generation();
    if !paged && let Some(kept) = state.vtxo_lists.get(all, generation) {
        return Ok(Fresh(freshness, kept));
    }
    let vtxos = state.engine.reads().vtxos(all).await?;
    let rendered = page
        .apply(vtxos.iter().map(WalletVtxoInfo::from).collect(), |v| {
            v.id.clone()
        })?
        .render()?;
    if !paged {
        state.vtxo_lists.put(all, generation, rendered.clone());
    }
    Ok(Fresh(freshness, rendered))
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
        (status = 200, description = "The VTXO, in any state", body = WalletVtxoInfo,
            headers(("Berth-Freshness" = String, description = "`current`, or `possibly-stale` while the wallet cannot be opened (chain source unreachable): what the wallet database held when it was last open"))),
        (status = 400, description = "Not a VTXO id", body = ErrorResponse),
        (status = 404, description = "No such VTXO", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is locked (its seed waits for its passphrase)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn get_vtxo(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Fresh<Json<WalletVtxoInfo>>, ApiError> {
    let id = vtxo_id(id)?;
    let freshness = state.engine.freshness().await?;
    match state.engine.reads().vtxo(id).await? {
        Some(vtxo) => Ok(Fresh(freshness, Json(WalletVtxoInfo::from(&vtxo)))),
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
        (status = 200, description = "The encoded VTXO", body = EncodedVtxoResponse,
            headers(("Berth-Freshness" = String, description = "`current`, or `possibly-stale` while the wallet cannot be opened (chain source unreachable): what the wallet database held when it was last open"))),
        (status = 400, description = "Not a VTXO id", body = ErrorResponse),
        (status = 404, description = "No such VTXO", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is locked (its seed waits for its passphrase)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn get_vtxo_encoded(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Fresh<Json<EncodedVtxoResponse>>, ApiError> {
    let id = vtxo_id(id)?;
    let freshness = state.engine.freshness().await?;
    match state.engine.reads().vtxo_encoded(id).await? {
        Some(encoded) => Ok(Fresh(freshness, Json(EncodedVtxoResponse { encoded }))),
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
    state.engine.ark().sync().await?;
    Ok(())
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
        checkpoint: state.engine.ark().sync_mailbox().await?,
    }))
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
    let imported = state.engine.rounds().import_vtxos(vtxos).await?;
    Ok(Json(imported.iter().map(WalletVtxoInfo::from).collect()))
}

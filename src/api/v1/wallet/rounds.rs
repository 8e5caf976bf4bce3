//! The Ark server and its rounds: connection, server info, the next round, pending
//! rounds, and refreshes.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::v1::common::parse_vtxo_ids;

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
    description = "Joins the next round to swap these VTXOs for new ones (a fresh expiry, exit \
        depth 1). Returns at once; the round runs when the server holds one, and completes once \
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
    let round = state.engine.rounds().refresh_vtxos(&ids).await?;
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
    let round = state.engine.rounds().refresh_all().await?;
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
    let rounds = state.engine.rounds().pending().await?;
    Ok(Json(rounds.iter().map(PendingRoundInfo::from).collect()))
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
    let Some(a) = state.engine.ark().info().await? else {
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
    let start = state.engine.ark().next_round_start().await?;
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
    match state.engine.rounds().refresh_counterparty().await? {
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
    let round = state
        .engine
        .rounds()
        .refresh_delegated(&ids, req.height)
        .await?;
    Ok(Json(PendingRoundInfo::from(&round)))
}

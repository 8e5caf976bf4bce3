//! Nostr Wallet Connect connections (a Berth extension, admin scope): make one (its
//! `nostr+walletconnect://` URI, with the app's secret, shown this once), list them with
//! what they have spent, revoke one. The service itself is `nwc`.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::routes::{Documentation, Routes, route};
use crate::nwc::{ConnectionView, NewConnection, NwcError, Renewal};

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .admin(route!(create_nwc_connection))
        .admin(route!(list_nwc_connections))
        .admin(route!(revoke_nwc_connection))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NwcConnectionRequest {
    /// A name for the app, shown in the list (1 to 64 bytes).
    pub name: String,
    /// The methods the app may call, and `notifications` for the wallet's
    /// `payment_received` and `payment_sent`. Default: all of them (`pay_invoice`,
    /// `multi_pay_invoice`, `make_invoice`, `lookup_invoice`, `list_transactions`,
    /// `get_balance`, `get_info`, `get_budget`, `notifications`).
    pub methods: Option<Vec<String>>,
    /// The most one payment may be, in sats.
    pub max_payment_sat: Option<u64>,
    /// The most the app may spend per budget period, in sats.
    pub budget_sat: Option<u64>,
    /// When the budget starts again (UTC calendar boundaries). Default with a budget:
    /// `monthly`.
    pub budget_renewal: Option<Renewal>,
    /// When the connection stops working (RFC 3339).
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The relays the app reaches the wallet through (`wss://`; `ws://` only to a host
    /// `[egress] allow` names). Default: `[nwc] relays` in `berth.toml`.
    pub relays: Option<Vec<String>>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NwcBudget {
    pub total_sat: u64,
    /// Spent (or held by a payment under way) in the current period.
    pub used_sat: u64,
    /// `daily`, `weekly`, `monthly`, `yearly` or `never`.
    pub renewal: String,
    /// When the current period ends (absent for `never`).
    pub renews_at: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NwcConnectionInfo {
    pub id: String,
    pub name: String,
    pub methods: Vec<String>,
    pub max_payment_sat: Option<u64>,
    /// Absent without a budget.
    pub budget: Option<NwcBudget>,
    /// Everything paid through this connection.
    pub spent_total_sat: u64,
    /// Payments requested through it (refused ones not counted).
    pub payments: u64,
    pub relays: Vec<String>,
    /// The wallet service's public key for this connection (hex): the URI's host.
    pub service_pubkey: String,
    /// The app's public key (hex); its secret is not kept.
    pub client_pubkey: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    pub last_used_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl From<ConnectionView> for NwcConnectionInfo {
    fn from(v: ConnectionView) -> Self {
        NwcConnectionInfo {
            budget: v.budget_sat.map(|total_sat| NwcBudget {
                total_sat,
                used_sat: v.budget_used_sat,
                renewal: v.budget_renewal.clone(),
                renews_at: v.budget_renews_at,
            }),
            id: v.id,
            name: v.name,
            methods: v.methods,
            max_payment_sat: v.max_payment_sat,
            spent_total_sat: v.spent_total_sat,
            payments: v.payments,
            relays: v.relays,
            service_pubkey: v.service_pubkey,
            client_pubkey: v.client_pubkey,
            created_at: v.created_at,
            expires_at: v.expires_at,
            last_used_at: v.last_used_at,
        }
    }
}

// No `Debug`: the URI carries the app's secret.
#[derive(Serialize, utoipa::ToSchema)]
pub struct NwcConnectionCreated {
    /// The connection URI to give the app (a QR code or a link). It carries the app's
    /// secret and is shown only this once.
    pub uri: String,
    pub connection: NwcConnectionInfo,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NwcConnectionRevoked {
    pub message: String,
}

impl From<NwcError> for ApiError {
    fn from(e: NwcError) -> Self {
        match e {
            NwcError::Invalid(m) => ApiError::BadRequest(m),
            NwcError::Full(m) => ApiError::WrongState(m),
            NwcError::NoSuchConnection(id) => ApiError::NotFound {
                message: format!("no connection {id}"),
                resources: vec![id],
            },
            NwcError::Store(e) => ApiError::store("keeping wallet connections", e),
        }
    }
}

/// `POST /api/v1/nwc/connections`
#[utoipa::path(
    post,
    path = "/nwc/connections",
    tag = "nwc",
    summary = "Connect an app over Nostr Wallet Connect",
    description = "Makes a Nostr Wallet Connect (NIP-47) connection for one app (admin scope): \
        its own service key, the methods it may call, a per-payment limit and a budget. The \
        answer's `uri` (`nostr+walletconnect://...`) carries the app's secret and is shown \
        only this once; berthd keeps the app's public key only. The app reaches the wallet \
        through the relays, from anywhere; nothing listens on the internet.",
    request_body = NwcConnectionRequest,
    responses(
        (status = 200, description = "Made: the URI (shown once) and the connection", body = NwcConnectionCreated),
        (status = 400, description = "A value out of range, a method not served, or a relay the egress policy refuses", body = ErrorResponse),
        (status = 422, description = "Too many connections or relays", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn create_nwc_connection(
    State(state): State<AppState>,
    body: Result<Json<NwcConnectionRequest>, JsonRejection>,
) -> Result<Json<NwcConnectionCreated>, ApiError> {
    let Json(body) = body?;
    let (view, uri) = state
        .nwc
        .create(NewConnection {
            name: body.name,
            methods: body.methods,
            max_payment_sat: body.max_payment_sat,
            budget_sat: body.budget_sat,
            budget_renewal: body.budget_renewal,
            expires_at: body.expires_at,
            relays: body.relays,
        })
        .await?;
    Ok(Json(NwcConnectionCreated {
        uri,
        connection: view.into(),
    }))
}

/// `GET /api/v1/nwc/connections`
#[utoipa::path(
    get,
    path = "/nwc/connections",
    tag = "nwc",
    summary = "List Nostr Wallet Connect connections",
    description = "Every connection in use, oldest first (admin scope), with its budget left, \
        what it has spent and when it was last used. Secrets are never shown again.",
    responses(
        (status = 200, description = "The connections", body = Vec<NwcConnectionInfo>),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn list_nwc_connections(
    State(state): State<AppState>,
) -> Result<Json<Vec<NwcConnectionInfo>>, ApiError> {
    let list = state.nwc.list().await?;
    Ok(Json(
        list.into_iter().map(NwcConnectionInfo::from).collect(),
    ))
}

/// `DELETE /api/v1/nwc/connections/{id}`
#[utoipa::path(
    delete,
    path = "/nwc/connections/{id}",
    tag = "nwc",
    summary = "Revoke a Nostr Wallet Connect connection",
    description = "Revokes a connection (admin scope), at once: once this returns, none of its \
        requests is executed; they are answered `UNAUTHORIZED`.",
    params(("id" = String, Path, description = "The connection's id")),
    responses(
        (status = 200, description = "Revoked", body = NwcConnectionRevoked),
        (status = 404, description = "No such connection", body = NotFoundResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn revoke_nwc_connection(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<NwcConnectionRevoked>, ApiError> {
    let Path(id) = id?;
    state.nwc.revoke(&id).await?;
    Ok(Json(NwcConnectionRevoked {
        message: "Connection revoked".into(),
    }))
}

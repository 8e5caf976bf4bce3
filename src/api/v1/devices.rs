//! Paired devices (a Berth extension): `POST /pair` exchanges a one-time pairing code
//! for a device token; `POST /claim` the box's claim code for its first admin device
//! (`access::claim`); `GET/DELETE /devices` list and revoke devices (admin scope).
//! Windows are opened by `berthd pair` on the box itself (`api::control`).

use std::net::IpAddr;
use std::time::Instant;

use crate::api::routes::route;
use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::access::Credential;
use crate::access::claim::Redeem;
use crate::access::devices::{Device, DeviceError, check_device_name};
use crate::access::pairing::Redeem as PairingRedeem;
use crate::access::scopes::Scopes;
use crate::access::secret::Secret;
use crate::api::AppState;
use crate::api::auth::peer_ip;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::routes::Routes;

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes(routes: Routes) -> Routes {
    routes
        .admin(route!(list_devices))
        .admin(route!(revoke_device))
        .public(route!(pair))
        .public(route!(claim))
}

// No `Debug`: the code is a credential.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// The claim code: from the card's label or provisioning, or `berthd claim reset`.
    pub code: String,
    /// A name for this device, shown in the device list (1 to 64 bytes).
    pub name: String,
}

// No `Debug`: the code is a credential and must not reach a log by accident.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PairRequest {
    /// The one-time code from the pairing QR code (`t=`).
    pub code: String,
    /// A name for this device, shown in the device list (1 to 64 bytes).
    pub name: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeviceInfo {
    /// The device's id, for revoking it.
    pub id: String,
    pub name: String,
    /// What the device may do: `read`, `receive`, `send`, `admin`.
    pub scopes: Vec<String>,
    /// When it was paired (RFC 3339).
    pub created_at: chrono::DateTime<chrono::Utc>,
}

impl From<Device> for DeviceInfo {
    fn from(d: Device) -> Self {
        DeviceInfo {
            id: d.id,
            name: d.name,
            scopes: d.scopes.names().into_iter().map(String::from).collect(),
            created_at: d.created_at,
        }
    }
}

// No `Debug`: it carries the device's token.
#[derive(Serialize, utoipa::ToSchema)]
pub struct PairResponse {
    /// The device's bearer token. It is shown only this once; keep it secret.
    pub token: String,
    pub device: DeviceInfo,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeviceRevokedResponse {
    pub message: String,
}

impl From<DeviceError> for ApiError {
    fn from(e: DeviceError) -> Self {
        match e {
            DeviceError::Invalid(msg) => ApiError::BadRequest(msg.into()),
            DeviceError::Store(crate::store::StoreError::TooManyDevices { .. }) => {
                ApiError::WrongState(
                    "too many devices are paired; revoke one with DELETE /api/v1/devices/{id}"
                        .into(),
                )
            }
            DeviceError::Store(e) => ApiError::store("pairing a device", e),
            e @ DeviceError::NoRandomness => ApiError::internal("pairing a device", e),
        }
    }
}

/// `POST /api/v1/pair`
#[utoipa::path(
    post,
    path = "/pair",
    tag = "devices",
    summary = "Pair a device",
    description = "Exchanges a one-time pairing code (from the QR code `berthd pair` shows on \
        the box) and a device name for a device token with the scopes chosen when the window \
        was opened. No bearer token is needed. The code works once, for 10 minutes. Outside a \
        pairing window this endpoint answers 404. Wrong codes count towards the address's \
        backoff (429).",
    security(()),
    request_body = PairRequest,
    responses(
        (status = 200, description = "Paired: the device token (shown once) and the device", body = PairResponse),
        (status = 400, description = "Malformed body or name", body = ErrorResponse),
        (status = 401, description = "Not a code of the open window (used, expired or wrong)", body = ErrorResponse),
        (status = 404, description = "No pairing window is open", body = NotFoundResponse),
        (status = 422, description = "Too many devices are paired", body = ErrorResponse),
        (status = 429, description = "Too many failed attempts from this address", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn pair(State(state): State<AppState>, request: Request) -> Response {
    match pair_inner(state, request).await {
        Ok(answer) => answer.into_response(),
        Err(e) => e.into_response(),
    }
}

async fn pair_inner(state: AppState, request: Request) -> Result<Json<PairResponse>, ApiError> {
    let peer = peer_ip(&request);
    // Outside a window the endpoint does not exist, as far as clients can tell.
    if !state.pairing.is_open() {
        return Err(ApiError::not_found("no such endpoint"));
    }
    let body: Result<Json<PairRequest>, JsonRejection> =
        <Json<PairRequest> as axum::extract::FromRequest<()>>::from_request(request, &()).await;
    let Json(body) = body?;
    let (token, device) = pair_device(&state, &body.code, &body.name, peer, false).await?;
    Ok(Json(PairResponse {
        token: token.expose().to_string(),
        device: device.into(),
    }))
}

/// Redeem a pairing code for a device named `name` (the window's name wins): the API's
/// `POST /pair` and the console's sign-in (`session`: a console session, which
/// expires).
pub(crate) async fn pair_device(
    state: &AppState,
    code: &str,
    name: &str,
    peer: Option<IpAddr>,
    session: bool,
) -> Result<(Secret, Device), ApiError> {
    let name = check_device_name(name).map_err(|msg| ApiError::BadRequest(msg.into()))?;
    let grant = match state.pairing.redeem(code) {
        Ok(grant) => grant,
        Err(PairingRedeem::Closed) => return Err(ApiError::not_found("no such endpoint")),
        Err(PairingRedeem::WrongCode) => {
            count_wrong_code(state, peer)?;
            return Err(ApiError::Unauthorized(
                "not a valid pairing code (codes work once, for 10 minutes)",
            ));
        }
    };
    let name = grant.name.unwrap_or(name);
    let (token, device) = add_device(state, &name, grant.scopes, session).await?;
    tracing::info!(device = %device.id, name = %device.name, scopes = ?device.scopes, "device paired");
    Ok((token, device))
}

/// A paired device, or a console session (which expires).
async fn add_device(
    state: &AppState,
    name: &str,
    scopes: Scopes,
    session: bool,
) -> Result<(Secret, Device), crate::access::devices::DeviceError> {
    if session {
        state.devices.add_session(name, scopes).await
    } else {
        state.devices.add(name, scopes).await
    }
}

/// As with bearer tokens (`api::auth`): a right code is always taken, a wrong one from a
/// blocked address is answered 429, and counted otherwise.
fn count_wrong_code(state: &AppState, peer: Option<IpAddr>) -> Result<(), ApiError> {
    if let Some(ip) = peer {
        let now = Instant::now();
        state
            .failures
            .check(ip, now)
            .map_err(ApiError::TooManyRequests)?;
        state.failures.failed(ip, now);
    }
    Ok(())
}

/// `POST /api/v1/claim`
#[utoipa::path(
    post,
    path = "/claim",
    tag = "devices",
    summary = "Claim the box",
    description = "Exchanges the box's claim code for its first admin device: a device token \
        with every scope, listed and revocable like any other. No bearer token is needed. The \
        code works once; a provisioned code (written onto the card) only while the box has \
        no wallet and no paired device, a code from `berthd claim reset` always, within \
        `[claim] reset_code_hours` (24). Without an open claim this endpoint answers 404. \
        Wrong codes count towards the address's backoff; an address it blocks is answered \
        429 before its code is looked at.",
    security(()),
    request_body = ClaimRequest,
    responses(
        (status = 200, description = "Claimed: the device token (shown once) and the device", body = PairResponse),
        (status = 400, description = "Malformed body or name", body = ErrorResponse),
        (status = 401, description = "Not the claim code", body = ErrorResponse),
        (status = 404, description = "No claim is open", body = NotFoundResponse),
        (status = 422, description = "Too many devices are paired", body = ErrorResponse),
        (status = 429, description = "Too many failed attempts from this address", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn claim(State(state): State<AppState>, request: Request) -> Response {
    match claim_inner(state, request).await {
        Ok(answer) => answer.into_response(),
        Err(e) => e.into_response(),
    }
}

async fn claim_inner(state: AppState, request: Request) -> Result<Json<PairResponse>, ApiError> {
    let peer = peer_ip(&request);
    let body: Result<Json<ClaimRequest>, JsonRejection> =
        <Json<ClaimRequest> as axum::extract::FromRequest<()>>::from_request(request, &()).await;
    let Json(body) = body?;
    let (token, device) = claim_device(&state, &body.code, &body.name, peer, false).await?;
    Ok(Json(PairResponse {
        token: token.expose().to_string(),
        device: device.into(),
    }))
}

/// Whether a claim is open (`access::claim`): the console shows its claim page then.
pub(crate) fn claim_is_open(state: &AppState) -> bool {
    matches!(state.claim.read(), Ok(Some(_)))
}

/// Exchange the claim code for an admin device named `name`: the API's `POST /claim`
/// and the console's sign-in. 404 without an open claim (or a provisioned one on a box
/// that has a wallet or a device).
///
/// An address the auth-failure backoff blocks is refused before anything is read, and
/// no lock is held: a flood of wrong codes costs memory lookups and never makes the
/// owner's attempt wait. Of two attempts with the right code, the one that takes the
/// claim (`Claim::take`, an atomic rename) gets the device.
pub(crate) async fn claim_device(
    state: &AppState,
    code: &str,
    name: &str,
    peer: Option<IpAddr>,
    session: bool,
) -> Result<(Secret, Device), ApiError> {
    let name = check_device_name(name).map_err(|msg| ApiError::BadRequest(msg.into()))?;
    if let Some(ip) = peer {
        state
            .failures
            .check(ip, Instant::now())
            .map_err(ApiError::TooManyRequests)?;
    }
    let wallet = state.engine.wallet_record().await.map_err(ApiError::from)?;
    let devices = state
        .devices
        .list()
        .await
        .map_err(|e| ApiError::store("listing devices", e))?;
    let unclaimed = wallet.is_none() && devices.is_empty();
    let checked = state
        .claim
        .check(code, unclaimed)
        .map_err(|e| ApiError::internal("reading the claim", e))?;
    match checked {
        Redeem::Closed => Err(ApiError::not_found("no such endpoint")),
        Redeem::WrongCode => {
            // The address was not blocked when the attempt began (checked above).
            if let Some(ip) = peer {
                state.failures.failed(ip, Instant::now());
            }
            Err(ApiError::Unauthorized("not the claim code"))
        }
        Redeem::Accepted => {
            let Some(taken) = state
                .claim
                .take(code)
                .map_err(|e| ApiError::internal("taking the claim", e))?
            else {
                // Another attempt with the code took it first.
                return Err(ApiError::not_found("no such endpoint"));
            };
            let (token, device) = match add_device(state, &name, Scopes::FULL, session).await {
                Ok(added) => added,
                Err(e) => {
                    if let Err(e) = taken.put_back() {
                        tracing::error!(error = %e, "cannot open the claim again after a failed claim");
                    }
                    return Err(e.into());
                }
            };
            // The device exists: a claim file left aside would only be litter, but a
            // failure to remove it is said.
            taken
                .used()
                .map_err(|e| ApiError::internal("closing the claim", e))?;
            tracing::info!(device = %device.id, name = %device.name, "the box was claimed");
            Ok((token, device))
        }
    }
}

/// `GET /api/v1/devices`
#[utoipa::path(
    get,
    path = "/devices",
    tag = "devices",
    summary = "List paired devices",
    description = "Every paired device, oldest first (admin scope). Tokens are never shown again.",
    responses(
        (status = 200, description = "The paired devices", body = Vec<DeviceInfo>),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn list_devices(
    State(state): State<AppState>,
) -> Result<Json<Vec<DeviceInfo>>, ApiError> {
    let devices = state
        .devices
        .list()
        .await
        .map_err(|e| ApiError::store("listing devices", e))?;
    Ok(Json(devices.into_iter().map(DeviceInfo::from).collect()))
}

/// `DELETE /api/v1/devices/{id}`
#[utoipa::path(
    delete,
    path = "/devices/{id}",
    tag = "devices",
    summary = "Revoke a device",
    description = "Revokes a paired device (admin scope): its token stops working at once, its \
        unused websocket tickets are void, and its open websocket, SSE and long-poll \
        connections end.",
    params(("id" = String, Path, description = "The device's id")),
    responses(
        (status = 200, description = "Revoked", body = DeviceRevokedResponse),
        (status = 404, description = "No such device", body = NotFoundResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn revoke_device(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<DeviceRevokedResponse>, ApiError> {
    let Path(id) = id?;
    revoke(&state, &id).await?;
    Ok(Json(DeviceRevokedResponse {
        message: "Device revoked".into(),
    }))
}

/// Revoke device `id`: its token stops working, its unspent tickets go and its live
/// streams end. 404 when there is no such device.
pub(crate) async fn revoke(state: &AppState, id: &str) -> Result<(), ApiError> {
    let revoked = state
        .devices
        .revoke(id)
        .await
        .map_err(|e| ApiError::store("revoking a device", e))?;
    if !revoked {
        return Err(ApiError::NotFound {
            message: format!("no device {id}"),
            resources: vec![id.to_owned()],
        });
    }
    // Its live streams end by themselves (`Devices::revoked`); its unspent tickets go.
    state.tickets.revoke(&Credential::Device(id.to_owned()));
    tracing::info!(device = %id, "device revoked");
    Ok(())
}

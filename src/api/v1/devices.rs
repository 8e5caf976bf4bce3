//! Paired devices (a Berth extension): `POST /pair` exchanges a one-time pairing code
//! for a device token; `POST /claim` the box's claim code for its first admin device
//! (`access::claim`); `GET/DELETE /devices` list and revoke devices (admin scope).
//! Windows are opened by `berthd pair` on the box itself (`api::control`).

use crate::api::routes::route;
use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::access::devices::{Device, DeviceError};
use crate::access::enrolment::EnrolError;
use crate::api::AppState;
use crate::api::auth::peer_ip;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::routes::{Documentation, Routes};

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
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

/// Whether the box has a wallet, for a claim (which a provisioned code makes only on
/// a new box); the engine's error as it is, for the answer.
pub(crate) async fn has_wallet(
    state: &AppState,
) -> Result<bool, Box<dyn std::error::Error + Send + Sync>> {
    Ok(state.engine.wallet_record().await?.is_some())
}

impl From<EnrolError> for ApiError {
    fn from(e: EnrolError) -> Self {
        match e {
            EnrolError::BadName(msg) => ApiError::BadRequest(msg.into()),
            EnrolError::Closed => ApiError::not_found("no such endpoint"),
            EnrolError::WrongPairingCode => {
                ApiError::Unauthorized("not a valid pairing code (codes work once, for 10 minutes)")
            }
            EnrolError::WrongClaimCode => ApiError::Unauthorized("not the claim code"),
            EnrolError::Blocked(secs) => ApiError::TooManyRequests(secs),
            EnrolError::NoSuchDevice(id) => ApiError::NotFound {
                message: format!("no device {id}"),
                resources: vec![id],
            },
            EnrolError::Device(e) => e.into(),
            EnrolError::Claim { what, source } => ApiError::internal(what, source),
            EnrolError::Store { what, source } => ApiError::store(what, source),
            EnrolError::Wallet(e) => match e.downcast::<crate::engine::EngineError>() {
                Ok(e) => ApiError::from(*e),
                Err(e) => ApiError::internal("reading the wallet", e),
            },
        }
    }
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
    let (token, device) = state
        .enrolment()
        .pair(&body.code, &body.name, peer, false)
        .await?;
    crate::api::v1::rules::start_device(&state, &device).await?;
    // Told to the owner's other devices and webhooks: a new phone can move funds.
    let alert = crate::events::Alert {
        message: format!(
            "A new device was paired: {} (scopes: {})",
            device.name,
            device.scopes.names().join(", ")
        ),
        ..crate::events::Alert::default()
    };
    if let Err(e) = state
        .events
        .alert(crate::events::EventKind::DevicePaired, alert)
        .await
    {
        tracing::warn!(error = %e, "cannot record device-paired");
    }
    Ok(Json(PairResponse {
        token: token.expose().to_string(),
        device: device.into(),
    }))
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
    let (token, device) = state
        .enrolment()
        .claim(&body.code, &body.name, peer, false, has_wallet(&state))
        .await?;
    Ok(Json(PairResponse {
        token: token.expose().to_string(),
        device: device.into(),
    }))
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
    state.enrolment().revoke(&id).await?;
    Ok(Json(DeviceRevokedResponse {
        message: "Device revoked".into(),
    }))
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    /// Each refusal of `access::enrolment` keeps the answer the API gave before it
    /// moved there; a failure to read the wallet keeps the engine's own.
    #[test]
    fn enrolment_refusals_keep_their_statuses() {
        let status = |e: EnrolError| ApiError::from(e).status();
        assert_eq!(status(EnrolError::BadName("x")), StatusCode::BAD_REQUEST);
        assert_eq!(status(EnrolError::Closed), StatusCode::NOT_FOUND);
        assert_eq!(
            status(EnrolError::WrongPairingCode),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(status(EnrolError::WrongClaimCode), StatusCode::UNAUTHORIZED);
        assert_eq!(
            status(EnrolError::Blocked(4)),
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(
            status(EnrolError::NoSuchDevice("d1".into())),
            StatusCode::NOT_FOUND
        );
        let engine = crate::engine::EngineError::Unavailable("busy".into());
        let direct = ApiError::from(crate::engine::EngineError::Unavailable("busy".into()));
        let through = ApiError::from(EnrolError::Wallet(Box::new(engine)));
        assert_eq!(through.status(), direct.status());
        assert_eq!(through.to_string(), direct.to_string());
        let other = ApiError::from(EnrolError::Wallet("a plain error".into()));
        assert_eq!(other.status(), StatusCode::INTERNAL_SERVER_ERROR);
    }
}

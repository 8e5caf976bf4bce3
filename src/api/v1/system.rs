//! The box's system (a Berth extension): a signed update bundle uploaded, checked by
//! RAUC and kept on the data partition for install (`system_update`;
//! `image/README.md`, "Updates").

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use serde::Serialize;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::routes::{Routes, route};
use crate::system_update::{BundleInfo, UpdateError};

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes(routes: Routes) -> Routes {
    routes
        .admin(route!(update_status))
        .admin(route!(upload_bundle))
        .admin(route!(discard_bundle))
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct UpdateStatus {
    /// Whether this box takes update bundles (the appliance's image does).
    pub available: bool,
    /// Why it does not, when it does not.
    pub unavailable_reason: Option<String>,
    /// When the running system was built (`YYYYMMDDTHHMMSSZ`, UTC), if it says.
    pub running_build: Option<String>,
    /// The largest bundle taken (`[update] max_bundle_mib`).
    pub max_bundle_bytes: u64,
    /// The bundle uploaded and checked, waiting to be installed.
    pub bundle: Option<BundleInfo>,
}

impl From<UpdateError> for ApiError {
    fn from(e: UpdateError) -> Self {
        match e {
            // A disabled endpoint, as the error type has it: nothing to retry.
            UpdateError::Unavailable(_) => ApiError::not_found(e.to_string()),
            UpdateError::Busy => {
                ApiError::Conflict("another bundle is being uploaded or removed; try again")
            }
            UpdateError::TooLarge { .. } => ApiError::PayloadTooLarge,
            UpdateError::NoSpace(_) => ApiError::InsufficientStorage(e.to_string()),
            UpdateError::Rejected(_) => ApiError::WrongState(e.to_string()),
            UpdateError::Interrupted(_) => ApiError::BadRequest(e.to_string()),
            UpdateError::Internal(e) => ApiError::internal("system update", e),
        }
    }
}

/// `GET /api/v1/system/update`
#[utoipa::path(
    get,
    path = "/system/update",
    tag = "system",
    summary = "The system update waiting",
    description = "Whether this box takes update bundles, when its running system was built, \
        and the bundle uploaded and checked, if any (admin scope).",
    responses(
        (status = 200, description = "The update state", body = UpdateStatus),
    )
)]
pub async fn update_status(State(state): State<AppState>) -> Result<Json<UpdateStatus>, ApiError> {
    let updates = &state.system_update;
    let unavailable = updates.unavailable();
    Ok(Json(UpdateStatus {
        available: unavailable.is_none(),
        unavailable_reason: unavailable,
        running_build: updates.running_build(),
        max_bundle_bytes: updates.settings().max_bundle_bytes,
        bundle: updates.bundle().await?,
    }))
}

/// `PUT /api/v1/system/update/bundle` (`api::limits::API_BUNDLE_UPLOAD`: not bound by
/// the request limits)
#[utoipa::path(
    put,
    path = "/system/update/bundle",
    tag = "system",
    summary = "Upload an update bundle",
    description = "Takes a signed RAUC bundle (`image/build`'s `berth-<arch>.raucb`) as the body \
        (admin scope), replacing the one kept. It is written to the data partition as it \
        arrives, never held in memory, up to `[update] max_bundle_mib`, leaving the wallet's \
        free-space reserve; then RAUC checks its signature against the box's keyring and \
        that it is for this board. Kept only if it passes. `downgrade` says it holds an \
        older system than the running one. One upload at a time.",
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses(
        (status = 201, description = "Checked and kept", body = BundleInfo),
        (status = 400, description = "The upload stopped before its end", body = ErrorResponse),
        (status = 404, description = "This box takes no bundles (not the appliance's image)", body = NotFoundResponse),
        (status = 409, description = "Another upload is under way", body = ErrorResponse),
        (status = 413, description = "Larger than `[update] max_bundle_mib`", body = ErrorResponse),
        (status = 422, description = "Not a bundle this box takes: unreadable, signed by a key it does not trust, or for another board", body = ErrorResponse),
        (status = 507, description = "Not enough free space on the data partition", body = ErrorResponse),
    )
)]
pub async fn upload_bundle(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<BundleInfo>), ApiError> {
    let info = state
        .system_update
        .receive(declared_length(&headers), body.into_data_stream())
        .await?;
    tracing::info!(
        version = %info.version,
        build = info.build.as_deref().unwrap_or("unknown"),
        downgrade = info.downgrade,
        "an update bundle was uploaded and checked"
    );
    Ok((StatusCode::CREATED, Json(info)))
}

/// The body's length as the request declares it (`Content-Length`), if it does: an
/// upload over the cap is refused before a byte is written.
pub(crate) fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// `DELETE /api/v1/system/update/bundle`
#[utoipa::path(
    delete,
    path = "/system/update/bundle",
    tag = "system",
    summary = "Remove the uploaded bundle",
    description = "Removes the bundle kept for install, freeing its space (admin scope).",
    responses(
        (status = 204, description = "Removed"),
        (status = 404, description = "No bundle is kept, or this box takes none", body = NotFoundResponse),
        (status = 409, description = "An upload is under way", body = ErrorResponse),
    )
)]
pub async fn discard_bundle(State(state): State<AppState>) -> Result<StatusCode, ApiError> {
    if state.system_update.discard().await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("no update bundle is kept"))
    }
}

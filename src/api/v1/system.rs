//! The box's system (a Berth extension): a signed update bundle uploaded, checked by
//! RAUC and kept on the data partition, then installed on the owner's word, with its
//! progress and what became of it (`system_update`; `image/README.md`, "Updates").

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use serde::{Deserialize, Serialize};

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::routes::{Documentation, Routes, route};
use crate::system_update::{BundleInfo, InstallProgress, UpdateError, UpdateOutcome};

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .admin(route!(update_status))
        .admin(route!(upload_bundle))
        .admin(route!(discard_bundle))
        .admin(route!(install_bundle))
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
    /// The install under way, if one is.
    pub install: Option<InstallProgress>,
    /// What became of the last install asked for here (committed, rolled back or
    /// failed), once known.
    pub last_outcome: Option<UpdateOutcome>,
}

impl From<UpdateError> for ApiError {
    fn from(e: UpdateError) -> Self {
        match e {
            // A disabled endpoint, as the error type has it: nothing to retry.
            UpdateError::Unavailable(_) => ApiError::not_found(e.to_string()),
            UpdateError::Busy => {
                ApiError::Conflict("another bundle is being uploaded or removed; try again")
            }
            UpdateError::NoBundle => ApiError::not_found(e.to_string()),
            UpdateError::InstallUnderWay => {
                ApiError::Conflict("a system update is being installed; wait for its outcome")
            }
            UpdateError::NeedsConfirmation(_) => ApiError::WrongState(e.to_string()),
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
        the bundle uploaded and checked, if any, the install under way with RAUC's progress, \
        and what became of the last install (admin scope).",
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
        install: updates.progress(),
        last_outcome: updates.last_outcome(),
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

/// The owner's word to install.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallRequest {
    /// Install it even though it holds an older system than the running one (the
    /// bundle's `downgrade`). Without it such a bundle is refused.
    #[serde(default)]
    pub allow_downgrade: bool,
}

/// `POST /api/v1/system/update/install`
#[utoipa::path(
    post,
    path = "/system/update/install",
    tag = "system",
    summary = "Install the uploaded bundle",
    description = "Asks the system to install the bundle uploaded and checked (admin scope): \
        RAUC writes it into the slot not running (`install.state` `installing`, with its \
        `percent`), then the box restarts into the new system once (`rebooting`; the API is \
        unreachable meanwhile) and keeps it when berthd is ready on it, else returns to the \
        system before. `last_outcome` then says which (`committed`, `rolled-back`, or \
        `failed` when nothing was installed), and a `system-updated` or \
        `system-update-failed` event is raised. A bundle with `downgrade` is installed only \
        with `allow_downgrade`.",
    request_body(content = InstallRequest, content_type = "application/json"),
    responses(
        (status = 202, description = "Asked for: the system starts it within seconds", body = InstallProgress),
        (status = 400, description = "The body is not an install request", body = ErrorResponse),
        (status = 404, description = "No bundle is kept, or this box takes none", body = NotFoundResponse),
        (status = 409, description = "An install is under way, or an upload", body = ErrorResponse),
        (status = 422, description = "An older system, and `allow_downgrade` not given", body = ErrorResponse),
    )
)]
pub async fn install_bundle(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<(StatusCode, Json<InstallProgress>), ApiError> {
    // An empty body is `{}`: nothing confirmed.
    let request: InstallRequest = if body.is_empty() {
        InstallRequest::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::BadRequest(format!("invalid install request: {e}")))?
    };
    let progress = state.system_update.install(request.allow_downgrade).await?;
    tracing::info!(
        build = progress.build.as_deref().unwrap_or("unknown"),
        allow_downgrade = request.allow_downgrade,
        "a system update was asked for"
    );
    Ok((StatusCode::ACCEPTED, Json(progress)))
}

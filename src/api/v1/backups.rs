//! Backups (a Berth extension): the wallet's backups in the backup directory, a backup
//! there on request, and a fresh encrypted backup to download (`engine::backup::service`;
//! `docs/operations.md`, "Backups").

use crate::api::routes::route;
use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Serialize;

use crate::access::Caller;
use crate::access::scopes::Scope;
use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse};
use crate::api::routes::{Documentation, Routes};
use crate::engine::backup::service::{BackupFile, ServiceError};

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .read(route!(list_backups))
        .admin(route!(back_up_now))
        .admin(route!(download_backup))
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BackupInfo {
    /// The file's name in the backup directory.
    pub name: String,
    /// The wallet's fingerprint (backups of other wallets are not listed).
    pub fingerprint: String,
    /// When it was taken.
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub size_bytes: u64,
    /// berthd read it back in full, restored it into a scratch database and checked
    /// it: when it was written, or since berthd started (it checks the directory's
    /// backups again at start).
    pub verified: bool,
}

impl From<BackupFile> for BackupInfo {
    fn from(f: BackupFile) -> Self {
        BackupInfo {
            name: f.name,
            fingerprint: f.fingerprint,
            created_at: f.created_at,
            size_bytes: f.size,
            verified: f.verified,
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BackupList {
    /// The backup directory (`berth.toml [backup] directory`); `null` when none is
    /// configured, or for a caller without the `admin` scope (a path says how the home
    /// network is laid out).
    pub directory: Option<String>,
    /// This wallet's backups there, newest first (at most 1,000).
    pub backups: Vec<BackupInfo>,
    /// The newest verified backup's time.
    pub newest_verified_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Why the last scheduled backup failed; `null` when it did not. Only the `admin`
    /// scope gets the reason (it names paths and devices); others get that it failed.
    pub last_error: Option<String>,
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::NoWallet | ServiceError::NotConfigured => {
                ApiError::WrongState(e.to_string())
            }
            ServiceError::Failed(reason) => {
                ApiError::Unavailable(format!("the backup failed: {reason}"))
            }
        }
    }
}

/// `GET /api/v1/backups`
#[utoipa::path(
    get,
    path = "/backups",
    tag = "backups",
    summary = "List backups",
    description = "The wallet's backups in the backup directory, newest first, with whether \
        berthd verified each (read back, restored into a scratch database and checked), and \
        how the scheduled backups fare. Empty when no directory is configured, it cannot be \
        read (`last_error` says why) or there is no wallet.",
    responses(
        (status = 200, description = "The backups", body = BackupList),
    )
)]
pub async fn list_backups(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<BackupList>, ApiError> {
    let backups = state.backups.list().await?;
    let status = state.backups.status();
    let admin = caller.scopes.allows(Scope::Admin);
    Ok(Json(BackupList {
        directory: status
            .directory
            .filter(|_| admin)
            .map(|d| d.display().to_string()),
        backups: backups.into_iter().map(BackupInfo::from).collect(),
        newest_verified_at: status.newest_verified.map(|(_, at)| at),
        last_error: status.last_error.map(|e| withheld(e, admin)),
    }))
}

/// A backup error's text for the admin, and only that it failed for anyone else.
pub fn withheld(error: String, admin: bool) -> String {
    if admin {
        error
    } else {
        "the last scheduled backup failed (the admin sees why)".into()
    }
}

/// `POST /api/v1/backups`
#[utoipa::path(
    post,
    path = "/backups",
    tag = "backups",
    summary = "Back up now",
    description = "Writes a backup to the backup directory now, verifies it, and removes the \
        wallet's backups beyond `[backup] keep` (admin scope). Waits for a backup under way.",
    responses(
        (status = 200, description = "Written and verified", body = BackupInfo),
        (status = 422, description = "No wallet, or no backup directory configured", body = ErrorResponse),
        (status = 503, description = "The backup failed (the directory is missing, read-only or full)", body = ErrorResponse),
    )
)]
pub async fn back_up_now(State(state): State<AppState>) -> Result<Json<BackupInfo>, ApiError> {
    Ok(Json(state.backups.back_up_now().await?.into()))
}

/// `GET /api/v1/backups/download`
#[utoipa::path(
    get,
    path = "/backups/download",
    tag = "backups",
    summary = "Download a fresh backup",
    description = "A backup taken now, verified before it is sent (admin scope): the whole \
        wallet state, encrypted under a key derived from the seed, so the recovery phrase \
        and this file restore everything (`berthd restore`). The seed is not in it.",
    responses(
        (status = 200, description = "The backup file", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The backup failed (e.g. the datadir's disk is full)", body = ErrorResponse),
    )
)]
pub async fn download_backup(State(state): State<AppState>) -> Result<Response, ApiError> {
    fresh_backup_response(&state).await
}

/// A fresh backup as a file download: the API's and the console's.
pub(crate) async fn fresh_backup_response(state: &AppState) -> Result<Response, ApiError> {
    let (name, size, file) = state.backups.fresh().await?;
    let stream = tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file));
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::CONTENT_LENGTH, size.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}\""),
            ),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

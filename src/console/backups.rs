//! The backups page (list, back up now, download a fresh backup).

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::routes::Signed;
use super::{Frame, page, see_other};
use crate::access::scopes::Scope;
use crate::api::AppState;

struct BackupRow {
    created_at: String,
    size: u64,
    verified: bool,
}

#[derive(Template)]
#[template(path = "backups.html")]
struct BackupsPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    admin: bool,
    directory: Option<String>,
    interval_hours: u64,
    last_error: Option<String>,
    backups: Vec<BackupRow>,
}

/// `GET /console/backups` (scope `read`; the buttons for admins).
pub(super) async fn backups(State(state): State<AppState>, Signed(who): Signed) -> Response {
    let listed = match state.backups.list().await {
        Ok(listed) => listed,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    };
    let status = state.backups.status();
    let frame = Frame::new(&state);
    page(
        StatusCode::OK,
        &BackupsPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            admin: who.scopes.allows(Scope::Admin),
            directory: status.directory.map(|d| d.display().to_string()),
            interval_hours: state.backups.interval().as_secs() / 3600,
            last_error: status.last_error,
            backups: listed
                .into_iter()
                .map(|b| BackupRow {
                    created_at: b.created_at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
                    size: b.size,
                    verified: b.verified,
                })
                .collect(),
        },
    )
}

/// `POST /console/backups`: back up to the directory now.
pub(super) async fn back_up_now(State(state): State<AppState>) -> Response {
    match state.backups.back_up_now().await {
        Ok(_) => see_other("/console/backups", None),
        Err(e) => {
            let e = crate::api::error::ApiError::from(e);
            (e.status(), e.to_string()).into_response()
        }
    }
}

/// `POST /console/backups/download`: a fresh, verified backup, as an attachment. A POST
/// (same-origin checked) because it makes a backup, not a GET a link could trigger.
pub(super) async fn download_backup(State(state): State<AppState>) -> Response {
    match crate::api::v1::backups::fresh_backup_response(&state).await {
        Ok(response) => response,
        Err(e) => (e.status(), e.to_string()).into_response(),
    }
}

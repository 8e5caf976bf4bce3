//! The settings page: the configuration in effect (read-only), and, on the appliance,
//! the owner's way to have the settings on the card applied again at the next start
//! (`card_setup`).

use askama::Template;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::routes::Signed;
use super::{Frame, page, see_other};
use crate::api::AppState;
use crate::datadir::Layout;

#[derive(Template)]
#[template(path = "settings.html")]
struct SettingsPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    toml: String,
    card_setup_requested: bool,
}

fn request_path(state: &AppState) -> std::path::PathBuf {
    Layout::new(state.engine.datadir().to_path_buf()).card_setup_request()
}

/// `GET /console/settings` (scope `admin`).
pub(super) async fn settings(State(state): State<AppState>) -> Response {
    let frame = Frame::new(&state);
    page(
        StatusCode::OK,
        &SettingsPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            toml: state.settings_toml.to_string(),
            card_setup_requested: crate::card_setup::requested(&request_path(&state)),
        },
    )
}

#[derive(Deserialize)]
pub(super) struct CardSetupForm {
    /// `request` or `cancel`.
    action: String,
}

/// `POST /console/settings/card` (scope `admin`): apply the card's settings at the next
/// start, or not after all.
pub(super) async fn card_setup(
    State(state): State<AppState>,
    Signed(who): Signed,
    Form(form): Form<CardSetupForm>,
) -> Response {
    let path = request_path(&state);
    let done = match form.action.as_str() {
        "request" => crate::card_setup::request(&path, &who.device_id),
        "cancel" => crate::card_setup::cancel(&path),
        _ => return (StatusCode::BAD_REQUEST, "unknown action").into_response(),
    };
    match done {
        Ok(()) => {
            tracing::info!(
                target: "berth::console",
                device = %who.device_id,
                action = %form.action,
                "the card's settings at the next start"
            );
            see_other("/console/settings", None)
        }
        Err(e) => {
            tracing::error!(target: "berth::console", error = %e, "cannot change the card setup request");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "the request could not be written to the data directory",
            )
                .into_response()
        }
    }
}

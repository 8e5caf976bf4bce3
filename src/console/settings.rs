//! The settings page: the configuration in effect (read-only), and, on the appliance,
//! the owner's way to have the settings on the card applied again at the next start
//! (`card_setup`), and a system update bundle uploaded and checked (`system_update`;
//! `update.js` sends the file).

use askama::Template;
use axum::body::Body;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::routes::Signed;
use super::{Frame, page, see_other};
use crate::api::AppState;
use crate::datadir::Layout;
use crate::system_update::{InstallProgress, InstallState, OutcomeResult, UpdateOutcome};

#[derive(Template)]
#[template(path = "settings.html")]
struct SettingsPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    toml: String,
    card_setup_requested: bool,
    /// Why this machine takes no update bundles, if it takes none.
    update_unavailable: Option<String>,
    running_build: Option<String>,
    bundle: Option<crate::system_update::BundleInfo>,
    /// Where the bundle is kept, for `berth-update install` over SSH.
    bundle_path: String,
    /// The install under way.
    install: Option<InstallView>,
    /// What became of the last install: whether it took, and in words.
    outcome: Option<(bool, String)>,
    /// Why the kept bundle's state could not be read.
    update_error: Option<String>,
}

/// An install under way, as the page shows it.
struct InstallView {
    title: &'static str,
    build: Option<String>,
    step: Option<String>,
    percent: Option<u8>,
}

impl InstallView {
    fn title(&self) -> &'static str {
        self.title
    }
}

impl From<InstallProgress> for InstallView {
    fn from(p: InstallProgress) -> Self {
        InstallView {
            title: match p.state {
                InstallState::Requested => "Installation asked for",
                InstallState::Installing => "Installing",
                InstallState::Rebooting => "Installed; restarting into the new system",
                InstallState::Trial => "Trying the new system",
            },
            build: p.build,
            step: p.step,
            percent: p.percent,
        }
    }
}

/// The last outcome in the owner's words; whether it took.
fn outcome_words(o: UpdateOutcome) -> (bool, String) {
    let when =
        o.at.and_then(|at| chrono::DateTime::from_timestamp(at as i64, 0))
            .map_or(String::new(), |t| {
                format!(" ({} UTC)", t.format("%Y-%m-%d %H:%M"))
            });
    let build = o
        .build
        .map_or(String::new(), |b| format!(" to the system built {b}"));
    match o.result {
        OutcomeResult::Committed => (true, format!("updated{build}{when}: {}.", o.reason)),
        OutcomeResult::RolledBack => (
            false,
            format!("the update{build} was rolled back{when}: {}.", o.reason),
        ),
        OutcomeResult::Failed => (
            false,
            format!(
                "the update{build} failed{when}; nothing was changed: {}.",
                o.reason
            ),
        ),
    }
}

fn request_path(state: &AppState) -> std::path::PathBuf {
    Layout::new(state.engine.datadir().to_path_buf()).card_setup_request()
}

/// `GET /console/settings` (scope `admin`).
pub(super) async fn settings(State(state): State<AppState>) -> Response {
    let frame = Frame::new(&state);
    let updates = &state.system_update;
    let (bundle, update_error) = match updates.bundle().await {
        Ok(bundle) => (bundle, None),
        Err(e) => (None, Some(crate::api::error::ApiError::from(e).to_string())),
    };
    page(
        StatusCode::OK,
        &SettingsPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            toml: state.settings_toml.to_string(),
            card_setup_requested: crate::card_setup::requested(&request_path(&state)),
            update_unavailable: updates.unavailable(),
            running_build: updates.running_build(),
            bundle,
            bundle_path: updates.bundle_path().display().to_string(),
            install: updates.progress().map(InstallView::from),
            outcome: updates.last_outcome().map(outcome_words),
            update_error,
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

/// `POST /console/system/bundle` (scope `admin`): an update bundle as the body, sent by
/// `update.js`; 201 once RAUC has checked it, else the reason as text.
pub(super) async fn upload_bundle(
    State(state): State<AppState>,
    Signed(who): Signed,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let declared = crate::api::v1::system::declared_length(&headers);
    match state
        .system_update
        .receive(declared, body.into_data_stream())
        .await
    {
        Ok(info) => {
            tracing::info!(
                target: "berth::console",
                device = %who.device_id,
                version = %info.version,
                downgrade = info.downgrade,
                "an update bundle was uploaded and checked"
            );
            (StatusCode::CREATED, "checked").into_response()
        }
        Err(e) => {
            let e = crate::api::error::ApiError::from(e);
            (e.status(), e.to_string()).into_response()
        }
    }
}

/// `POST /console/system/bundle/remove` (scope `admin`): remove the kept bundle.
pub(super) async fn remove_bundle(State(state): State<AppState>) -> Response {
    match state.system_update.discard().await {
        Ok(_) => see_other("/console/settings", None),
        Err(e) => {
            let e = crate::api::error::ApiError::from(e);
            (e.status(), e.to_string()).into_response()
        }
    }
}

#[derive(Deserialize)]
pub(super) struct InstallForm {
    /// `yes`: the owner confirmed going back to an older system.
    #[serde(default)]
    allow_downgrade: Option<String>,
}

/// `POST /console/system/install` (scope `admin`): install the kept bundle.
pub(super) async fn install_bundle(
    State(state): State<AppState>,
    Signed(who): Signed,
    Form(form): Form<InstallForm>,
) -> Response {
    let allow_downgrade = form.allow_downgrade.as_deref() == Some("yes");
    match state.system_update.install(allow_downgrade).await {
        Ok(progress) => {
            tracing::info!(
                target: "berth::console",
                device = %who.device_id,
                build = progress.build.as_deref().unwrap_or("unknown"),
                allow_downgrade,
                "a system update was asked for"
            );
            see_other("/console/settings", None)
        }
        Err(e) => {
            let e = crate::api::error::ApiError::from(e);
            (e.status(), e.to_string()).into_response()
        }
    }
}

//! Unlocking the wallet: a seed sealed with a passphrase (chosen when the wallet was
//! created) leaves berthd locked after each restart until an admin types the
//! passphrase here (the console's face of `POST /api/v1/wallet/unlock`).

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use zeroize::Zeroizing;

use super::{Frame, page, see_other};
use crate::api::AppState;

#[derive(Template)]
#[template(path = "unlock.html")]
struct UnlockPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    fingerprint: String,
    error: Option<String>,
}

fn unlock_page(
    state: &AppState,
    fingerprint: String,
    status: StatusCode,
    error: Option<String>,
) -> Response {
    let frame = Frame::new(state);
    page(
        status,
        &UnlockPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            fingerprint,
            error,
        },
    )
}

/// The locked wallet's fingerprint; `None` when there is nothing to unlock.
async fn locked_wallet(state: &AppState) -> Option<String> {
    if !state.engine.is_locked() {
        return None;
    }
    Some(state.engine.wallet_fingerprint().await.ok()??.to_string())
}

/// `GET /console/unlock` (admin)
pub(super) async fn unlock_form(State(state): State<AppState>) -> Response {
    match locked_wallet(&state).await {
        Some(fingerprint) => unlock_page(&state, fingerprint, StatusCode::OK, None),
        None => see_other("/", None),
    }
}

#[derive(Deserialize)]
pub(super) struct UnlockForm {
    passphrase: String,
}

/// `POST /console/unlock`: the passphrase right, the wallet loads and the overview
/// follows; wrong, the page again (after the engine's pause).
pub(super) async fn unlock(
    State(state): State<AppState>,
    form: Result<Form<UnlockForm>, FormRejection>,
) -> Response {
    let Some(fingerprint) = locked_wallet(&state).await else {
        return see_other("/", None);
    };
    let Ok(Form(form)) = form else {
        return unlock_page(
            &state,
            fingerprint,
            StatusCode::BAD_REQUEST,
            Some("Give the passphrase.".into()),
        );
    };
    match state.engine.unlock(Zeroizing::new(form.passphrase)).await {
        Ok(_) => see_other("/", None),
        Err(e) => {
            let e = crate::api::error::ApiError::from(e);
            unlock_page(
                &state,
                fingerprint,
                e.status(),
                Some(format!("Not unlocked: {e}.")),
            )
        }
    }
}

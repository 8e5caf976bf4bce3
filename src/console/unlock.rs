//! Unlocking the wallet: a seed sealed with a passphrase (chosen when the wallet was
//! created) leaves berthd locked after each restart until an admin types the
//! passphrase here (the console's face of `POST /api/v1/wallet/unlock`).

use askama::Template;
use axum::extract::{Form, FromRequest as _, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use zeroize::Zeroizing;

use super::{Frame, admin, forbidden, page, see_other, session};
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
pub(super) async fn unlock_form(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(refused) = admin(&state, &headers) {
        return refused.into_response();
    }
    match locked_wallet(&state).await {
        Some(fingerprint) => unlock_page(&state, fingerprint, StatusCode::OK, None),
        None => see_other("/", None),
    }
}

#[derive(Deserialize)]
struct UnlockForm {
    passphrase: String,
}

/// `POST /console/unlock`: the passphrase right, the wallet loads and the overview
/// follows; wrong, the page again (after the engine's pause).
pub(super) async fn unlock(State(state): State<AppState>, request: Request) -> Response {
    if !session::same_origin(
        request.headers(),
        request.uri(),
        session::scheme_of(request.extensions()),
    ) {
        return forbidden("a form of another site may not unlock the wallet");
    }
    if let Err(refused) = admin(&state, request.headers()) {
        return refused.into_response();
    }
    let Some(fingerprint) = locked_wallet(&state).await else {
        return see_other("/", None);
    };
    let Ok(Form(form)) = Form::<UnlockForm>::from_request(request, &()).await else {
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

//! Receiving: a new on-chain or Ark address, with its QR code for the payer's phone,
//! so a box can be funded without a terminal or an app. The same engine calls as
//! `POST /api/v1/onchain/addresses/next` and `POST /api/v1/wallet/addresses/next` (scope
//! `receive`).

use askama::Template;
use axum::extract::{Form, FromRequest as _, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{Frame, forbidden, page, qr_svg, see_other, session};
use crate::access::scopes::Scope;
use crate::api::AppState;

struct Shown {
    what: &'static str,
    address: String,
    qr_svg: String,
}

#[derive(Template)]
#[template(path = "receive.html")]
struct ReceivePage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    shown: Option<Shown>,
    error: Option<String>,
}

fn receive_page(
    state: &AppState,
    status: StatusCode,
    shown: Option<Shown>,
    error: Option<String>,
) -> Response {
    let frame = Frame::new(state);
    page(
        status,
        &ReceivePage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            shown,
            error,
        },
    )
}

/// The refusal for a browser that may not receive; `None` when it may.
fn refusal(state: &AppState, headers: &HeaderMap) -> Option<Response> {
    match session::signed_in(headers, &state.devices) {
        Some(who) if who.scopes.allows(Scope::Receive) => None,
        Some(_) => Some(forbidden(
            "this device may not receive (it lacks the receive scope)",
        )),
        None => Some(see_other("/", None)),
    }
}

/// `GET /console/receive`
pub(super) async fn receive_form(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(refused) = refusal(&state, &headers) {
        return refused;
    }
    receive_page(&state, StatusCode::OK, None, None)
}

#[derive(Deserialize)]
struct ReceiveForm {
    kind: String,
}

/// `POST /console/receive`: a new address of the kind asked for. A post (it derives a
/// new address each time), so it is same-origin checked like every form.
pub(super) async fn new_address(State(state): State<AppState>, request: Request) -> Response {
    if !session::same_origin(request.headers(), request.uri()) {
        return forbidden("a form of another site may not make addresses here");
    }
    if let Some(refused) = refusal(&state, request.headers()) {
        return refused;
    }
    let Ok(Form(form)) = Form::<ReceiveForm>::from_request(request, &()).await else {
        return (StatusCode::BAD_REQUEST, "a malformed form").into_response();
    };
    let made = match form.kind.as_str() {
        "onchain" => state.engine.onchain_next_address().await.map(|a| {
            // BIP 21, upper-cased: the QR code's alphanumeric mode makes it smaller.
            let uri = format!("bitcoin:{}", a.to_string().to_uppercase());
            ("A new bitcoin address", a.to_string(), uri)
        }),
        "ark" => state
            .engine
            .ark_address_next()
            .await
            .map(|a| ("A new Ark address", a.to_string(), a.to_string())),
        _ => return (StatusCode::BAD_REQUEST, "choose an address kind").into_response(),
    };
    match made {
        Ok((what, address, uri)) => match qr_svg(&uri) {
            Some(qr_svg) => receive_page(
                &state,
                StatusCode::OK,
                Some(Shown {
                    what,
                    address,
                    qr_svg,
                }),
                None,
            ),
            None => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        },
        Err(e) => {
            let e = crate::api::error::ApiError::from(e);
            receive_page(&state, e.status(), None, Some(format!("No address: {e}.")))
        }
    }
}

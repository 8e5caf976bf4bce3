//! Receiving: a new on-chain or Ark address, with its QR code for the payer's phone,
//! so a box can be funded without a terminal or an app, and boarding what arrived
//! on-chain into Ark. The same engine calls as `POST /api/v1/onchain/addresses/next`
//! and `POST /api/v1/wallet/addresses/next` (scope `receive`) and
//! `POST /api/v1/boards/board-all` (scope `send`).

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::routes::Signed;
use super::{Frame, page, qr_svg};
use crate::access::devices::Authorized;
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
    /// The confirmed on-chain funds, for a device that may board them (scope `send`).
    boardable: Option<u64>,
    /// What a board just started.
    boarded: Option<String>,
}

/// What the page shows besides an address.
#[derive(Default)]
struct Outcome {
    shown: Option<Shown>,
    error: Option<String>,
    boarded: Option<String>,
}

async fn receive_page(
    state: &AppState,
    who: &Authorized,
    status: StatusCode,
    outcome: Outcome,
) -> Response {
    let may_send = who.scopes.allows(Scope::Send);
    let boardable = if may_send {
        let balance = state.engine.onchain().balance().await.ok();
        balance.map(|b| b.confirmed.to_sat())
    } else {
        None
    };
    let frame = Frame::new(state);
    page(
        status,
        &ReceivePage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            shown: outcome.shown,
            error: outcome.error,
            boardable,
            boarded: outcome.boarded,
        },
    )
}

/// `GET /console/receive`
pub(super) async fn receive_form(State(state): State<AppState>, Signed(who): Signed) -> Response {
    receive_page(&state, &who, StatusCode::OK, Outcome::default()).await
}

#[derive(Deserialize)]
pub(super) struct ReceiveForm {
    kind: String,
}

/// `POST /console/receive`: a new address of the kind asked for. A post (it derives a
/// new address each time), so it is same-origin checked like every form.
pub(super) async fn new_address(
    State(state): State<AppState>,
    Signed(who): Signed,
    form: Result<Form<ReceiveForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return (StatusCode::BAD_REQUEST, "a malformed form").into_response();
    };
    let made = match form.kind.as_str() {
        "onchain" => state.engine.onchain().next_address().await.map(|a| {
            // BIP 21, upper-cased: the QR code's alphanumeric mode makes it smaller.
            let uri = format!("bitcoin:{}", a.to_string().to_uppercase());
            ("A new bitcoin address", a.to_string(), uri)
        }),
        "ark" => state
            .engine
            .ark()
            .address_next()
            .await
            .map(|a| ("A new Ark address", a.to_string(), a.to_string())),
        _ => return (StatusCode::BAD_REQUEST, "choose an address kind").into_response(),
    };
    let (status, outcome) = match made {
        Ok((what, address, uri)) => {
            let Some(qr_svg) = qr_svg(&uri) else {
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            };
            let shown = Some(Shown {
                what,
                address,
                qr_svg,
            });
            (
                StatusCode::OK,
                Outcome {
                    shown,
                    ..Outcome::default()
                },
            )
        }
        Err(e) => {
            let e = crate::api::error::ApiError::from(e);
            let error = Some(format!("No address: {e}."));
            (
                e.status(),
                Outcome {
                    error,
                    ..Outcome::default()
                },
            )
        }
    };
    receive_page(&state, &who, status, outcome).await
}

/// `POST /console/board` (scope `send`): board every confirmed on-chain coin into Ark,
/// as `POST /api/v1/boards/board-all` does.
pub(super) async fn board(State(state): State<AppState>, Signed(who): Signed) -> Response {
    let (status, outcome) = match state.engine.ark().board_all().await {
        Ok(board) => {
            tracing::info!(target: "berth::console", movement = board.movement_id.0, "a board started from the console");
            let boarded = Some(format!(
                "Boarding {} sats: funding transaction {}. The VTXO is spendable once the \
                 transaction has the Ark server's confirmations.",
                board.amount.to_sat(),
                board.funding_tx.compute_txid()
            ));
            (
                StatusCode::OK,
                Outcome {
                    boarded,
                    ..Outcome::default()
                },
            )
        }
        Err(e) => {
            let e = crate::api::error::ApiError::from(e);
            let error = Some(format!("Not boarded: {e}."));
            (
                e.status(),
                Outcome {
                    error,
                    ..Outcome::default()
                },
            )
        }
    };
    receive_page(&state, &who, status, outcome).await
}

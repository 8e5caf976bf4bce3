//! Receiving: a new on-chain or Ark address, with its QR code for the payer's phone,
//! so a box can be funded without a terminal or an app, and boarding what arrived
//! on-chain into Ark. The same engine calls as `POST /api/v1/onchain/addresses/next`
//! and `POST /api/v1/wallet/addresses/next` (scope `receive`) and
//! `POST /api/v1/boards/board-all` (scope `send`).

use askama::Template;
use axum::extract::{Form, FromRequest as _, Request, State};
use axum::http::{HeaderMap, StatusCode, Uri};
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
    headers: &HeaderMap,
    status: StatusCode,
    outcome: Outcome,
) -> Response {
    let may_send = session::signed_in(headers, &state.devices)
        .is_some_and(|who| who.scopes.allows(Scope::Send));
    let boardable = if may_send {
        let balance = state.engine.onchain_balance().await.ok();
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

/// The refusal for a browser without `scope`; `None` when it has it.
fn refusal(state: &AppState, headers: &HeaderMap, scope: Scope) -> Option<Response> {
    match session::signed_in(headers, &state.devices) {
        Some(who) if who.scopes.allows(scope) => None,
        Some(_) => Some(forbidden(match scope {
            Scope::Send => "this device may not move funds (it lacks the send scope)",
            _ => "this device may not receive (it lacks the receive scope)",
        })),
        None => Some(see_other("/", None)),
    }
}

/// `GET /console/receive`
pub(super) async fn receive_form(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(refused) = refusal(&state, &headers, Scope::Receive) {
        return refused;
    }
    receive_page(&state, &headers, StatusCode::OK, Outcome::default()).await
}

#[derive(Deserialize)]
struct ReceiveForm {
    kind: String,
}

/// `POST /console/receive`: a new address of the kind asked for. A post (it derives a
/// new address each time), so it is same-origin checked like every form.
pub(super) async fn new_address(State(state): State<AppState>, request: Request) -> Response {
    if !session::same_origin(
        request.headers(),
        request.uri(),
        session::scheme_of(request.extensions()),
    ) {
        return forbidden("a form of another site may not make addresses here");
    }
    if let Some(refused) = refusal(&state, request.headers(), Scope::Receive) {
        return refused;
    }
    let headers = request.headers().clone();
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
    receive_page(&state, &headers, status, outcome).await
}

/// `POST /console/board` (scope `send`): board every confirmed on-chain coin into Ark,
/// as `POST /api/v1/boards/board-all` does.
pub(super) async fn board(
    State(state): State<AppState>,
    scheme: session::Scheme,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if !session::same_origin(&headers, &uri, scheme) {
        return forbidden("a form of another site may not move funds here");
    }
    if let Some(refused) = refusal(&state, &headers, Scope::Send) {
        return refused;
    }
    let (status, outcome) = match state.engine.board_all().await {
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
    receive_page(&state, &headers, status, outcome).await
}

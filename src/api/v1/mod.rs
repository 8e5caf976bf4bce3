//! The `/api/v1` routes: one file per group of barkd's API.
//!
//! Every operation of barkd's OpenAPI 0.6.0 document is routed. Served ones are
//! registered with `routes!`, which also puts them in the OpenAPI document. Those this
//! build does not serve yet answer 422 while no wallet exists (as every wallet operation
//! does) and 501 with a clear message once one does, so a client can tell "not yet"
//! from "no such path" (404); they are left out of the document.

pub mod bitcoin;
pub mod boards;
pub mod common;
pub mod exits;
pub mod fees;
pub mod history;
pub mod message;
pub mod notifications;
pub mod onchain;
pub mod wallet;

use axum::extract::State;
use axum::http::{Method, Uri};
use axum::routing::{MethodFilter, on};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::AppState;
use crate::api::error::ApiError;

/// barkd's operations under `/api/v1` (method, path) that this build does not serve yet.
/// `tests/openapi.rs` checks this list and the document together cover barkd's.
pub const NOT_YET_SERVED: &[(&str, &str)] = &[
    ("POST", "/lightning/pay"),
    ("GET", "/lightning/receives"),
    ("POST", "/lightning/receives/invoice"),
    ("POST", "/lightning/receives/invoice/for-address"),
    ("GET", "/lightning/receives/{identifier}"),
    ("DELETE", "/lightning/receives/{identifier}"),
    ("GET", "/lightning/sends/{identifier}"),
];

/// The `/api/v1` routes with their OpenAPI description. barkd's deprecated operations
/// are served too (`#[deprecated]` on a handler marks it so in the document).
#[allow(deprecated)]
pub fn router() -> OpenApiRouter<AppState> {
    let mut router = OpenApiRouter::new()
        .routes(routes!(wallet::wallet_exists, wallet::wallet_delete))
        .routes(routes!(wallet::mnemonic))
        .routes(routes!(wallet::create_wallet))
        .routes(routes!(wallet::connected))
        .routes(routes!(onchain::onchain_address))
        .routes(routes!(onchain::onchain_balance))
        .routes(routes!(onchain::onchain_sync))
        .routes(routes!(bitcoin::tip))
        .routes(routes!(boards::board_amount))
        .routes(routes!(boards::board_all))
        .routes(routes!(boards::get_pending_boards))
        .routes(routes!(wallet::balance))
        .routes(routes!(wallet::vtxos))
        .routes(routes!(wallet::get_vtxo))
        .routes(routes!(wallet::get_vtxo_encoded))
        .routes(routes!(wallet::sync))
        .routes(routes!(wallet::address))
        .routes(routes!(wallet::send))
        .routes(routes!(history::list))
        .routes(routes!(wallet::movements))
        .routes(routes!(wallet::history))
        .routes(routes!(wallet::refresh_vtxos))
        .routes(routes!(wallet::refresh_all))
        .routes(routes!(wallet::pending_rounds))
        .routes(routes!(wallet::offboard_all))
        .routes(routes!(wallet::offboard_vtxos))
        .routes(routes!(wallet::send_onchain))
        .routes(routes!(exits::exit_start_all))
        .routes(routes!(exits::exit_start_vtxos))
        .routes(routes!(exits::exit_progress))
        .routes(routes!(exits::exit_list_all))
        .routes(routes!(exits::exit_list_live))
        .routes(routes!(exits::exit_list_finished))
        .routes(routes!(exits::exit_status))
        .routes(routes!(exits::exit_status_deprecated))
        .routes(routes!(exits::exit_claim_all))
        .routes(routes!(exits::exit_claim_vtxos))
        .routes(routes!(exits::exit_cancel))
        .routes(routes!(onchain::onchain_send))
        .routes(routes!(onchain::onchain_send_many))
        .routes(routes!(onchain::onchain_drain))
        .routes(routes!(onchain::onchain_transactions))
        .routes(routes!(onchain::onchain_utxos))
        .routes(routes!(fees::board_fee))
        .routes(routes!(fees::onchain_fee_rates))
        .routes(routes!(wallet::ark_info))
        .routes(routes!(wallet::peek_address))
        .routes(routes!(wallet::next_round))
        .routes(routes!(wallet::sync_mailbox))
        .routes(routes!(history::update_metadata))
        .routes(routes!(message::sign_message))
        .routes(routes!(message::verify_message))
        .routes(routes!(exits::exit_list_deprecated))
        .routes(routes!(exits::emergency_exit_fee))
        .routes(routes!(fees::lightning_pay_fee))
        .routes(routes!(fees::lightning_receive_fee))
        .routes(routes!(fees::offboard_fee))
        .routes(routes!(fees::offboard_all_fee))
        .routes(routes!(fees::send_onchain_fee))
        .routes(routes!(wallet::refresh_counterparty))
        .routes(routes!(wallet::refresh_delegated))
        .routes(routes!(wallet::import_vtxo))
        .routes(routes!(wallet::bip321_uri))
        .routes(routes!(notifications::wait_notification))
        .routes(routes!(notifications::websocket_ticket))
        .routes(routes!(notifications::notifications_sse));
    for (method, path) in NOT_YET_SERVED {
        let filter = match *method {
            "GET" => MethodFilter::GET,
            "POST" => MethodFilter::POST,
            "DELETE" => MethodFilter::DELETE,
            other => unreachable!("no {other} operations in the table"),
        };
        router = router.route(path, on(filter, not_yet_served));
    }
    router
}

/// The `/api/v1` routes authenticated by something other than the bearer token: the
/// notifications websocket (a single-use ticket; browsers cannot set headers on it).
pub fn ticket_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(notifications::notifications_socket))
}

/// 422 without a wallet (what every wallet operation answers then), else 501.
async fn not_yet_served(
    State(state): State<AppState>,
    method: Method,
    uri: Uri,
) -> Result<(), ApiError> {
    state.engine.require_wallet().await?;
    Err(ApiError::NotImplemented(format!(
        "{method} {} is not served by this version of berthd yet",
        uri.path()
    )))
}

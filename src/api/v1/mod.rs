//! The `/api/v1` routes: one file per group of barkd's API.
//!
//! Every operation of barkd's OpenAPI 0.6.0 document is served, each registered with
//! `routes!`, which also puts it in the OpenAPI document (`tests/openapi.rs` checks
//! the document covers barkd's).

pub mod bitcoin;
pub mod boards;
pub mod common;
pub mod devices;
pub mod exits;
pub mod fees;
pub mod history;
pub mod lightning;
pub mod message;
pub mod notifications;
pub mod onchain;
pub mod wallet;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::AppState;

/// The `/api/v1` routes with their OpenAPI description. barkd's deprecated operations
/// are served too (`#[deprecated]` on a handler marks it so in the document).
#[allow(deprecated)]
pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(
            wallet::wallet_exists,
            wallet::create_wallet_alias,
            wallet::wallet_delete
        ))
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
        .routes(routes!(lightning::pay))
        .routes(routes!(lightning::list_receive_statuses))
        .routes(routes!(
            lightning::get_receive_status,
            lightning::cancel_receive
        ))
        .routes(routes!(lightning::get_send_status))
        .routes(routes!(lightning::generate_invoice))
        .routes(routes!(lightning::generate_invoice_for_address))
        .routes(routes!(notifications::wait_notification))
        .routes(routes!(notifications::websocket_ticket))
        .routes(routes!(notifications::notifications_sse))
        .routes(routes!(devices::list_devices))
        .routes(routes!(devices::revoke_device))
}

/// The `/api/v1` routes authenticated by something other than the bearer token: the
/// notifications websocket (a single-use ticket; browsers cannot set headers on it)
/// and pairing (a one-time code).
pub fn public_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(notifications::notifications_socket))
        .routes(routes!(devices::pair))
}

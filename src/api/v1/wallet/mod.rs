//! The `wallet` group, by sub-resource: `lifecycle` (exists, create, delete, mnemonic),
//! `vtxos` (balance, VTXOs, sync), `payments` (addresses, sends, offboards, URIs) and
//! `rounds` (the Ark server, its rounds, refreshes). Its routes are declared here.

pub mod lifecycle;
pub mod payments;
pub mod rounds;
pub mod vtxos;

use utoipa_axum::routes;

use crate::api::routes::Routes;

/// The group's routes, each with who may call it (`api::routes`).
#[allow(deprecated)]
pub(super) fn routes(routes: Routes) -> Routes {
    routes
        // Lifecycle.
        .read(routes!(lifecycle::wallet_exists))
        .admin(routes!(lifecycle::create_wallet))
        // barkd's alias of create.
        .admin(routes!(lifecycle::create_wallet_alias))
        .admin(routes!(lifecycle::wallet_delete))
        .admin(routes!(lifecycle::mnemonic))
        .admin(routes!(lifecycle::unlock))
        // Balance and VTXOs.
        .read(routes!(vtxos::balance))
        .read(routes!(vtxos::vtxos))
        .read(routes!(vtxos::get_vtxo))
        .read(routes!(vtxos::get_vtxo_encoded))
        // Adds a VTXO someone handed over: receiving.
        .receive(routes!(vtxos::import_vtxo))
        .read(routes!(vtxos::sync))
        .read(routes!(vtxos::sync_mailbox))
        // Receiving and paying.
        .receive(routes!(payments::address))
        .receive(routes!(payments::peek_address))
        .receive(routes!(payments::bip321_uri))
        .moves_funds(routes!(payments::send))
        .moves_funds(routes!(payments::offboard_all))
        .moves_funds(routes!(payments::offboard_vtxos))
        .moves_funds(routes!(payments::send_onchain))
        .read(routes!(payments::movements))
        .read(routes!(payments::history))
        // The Ark server and its rounds. Refreshes spend VTXOs (and fees) into new ones.
        .read(routes!(rounds::connected))
        .read(routes!(rounds::ark_info))
        .read(routes!(rounds::next_round))
        .read(routes!(rounds::pending_rounds))
        .moves_funds(routes!(rounds::refresh_vtxos))
        .moves_funds(routes!(rounds::refresh_all))
        .moves_funds(routes!(rounds::refresh_counterparty))
        .moves_funds(routes!(rounds::refresh_delegated))
}

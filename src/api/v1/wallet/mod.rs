//! The `wallet` group, by sub-resource: `lifecycle` (exists, create, delete, mnemonic),
//! `vtxos` (balance, VTXOs, sync), `payments` (addresses, sends, offboards, URIs) and
//! `rounds` (the Ark server, its rounds, refreshes). Its routes are declared here.

pub mod lifecycle;
pub mod payments;
pub mod rounds;
pub mod vtxos;

use crate::api::routes::route;

use crate::api::routes::{Documentation, Routes};

/// The group's routes, each with who may call it (`api::routes`).
#[allow(deprecated)]
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        // Lifecycle.
        .read(route!(lifecycle::wallet_exists))
        .admin(route!(lifecycle::create_wallet))
        // barkd's alias of create.
        .admin(route!(lifecycle::create_wallet_alias))
        .admin(route!(lifecycle::wallet_delete))
        .admin(route!(lifecycle::mnemonic))
        .admin(route!(lifecycle::unlock))
        // Balance and VTXOs.
        .read(route!(vtxos::balance))
        .read(route!(vtxos::vtxos))
        .read(route!(vtxos::get_vtxo))
        .read(route!(vtxos::get_vtxo_encoded))
        // Adds a VTXO someone handed over: receiving.
        .receive(route!(vtxos::import_vtxo))
        .read(route!(vtxos::sync))
        .read(route!(vtxos::sync_mailbox))
        // Receiving and paying.
        .receive(route!(payments::address))
        .receive(route!(payments::peek_address))
        .receive(route!(payments::bip321_uri))
        .moves_funds(route!(payments::send))
        .moves_funds(route!(payments::offboard_all))
        .moves_funds(route!(payments::offboard_vtxos))
        .moves_funds(route!(payments::send_onchain))
        .read(route!(payments::movements))
        .read(route!(payments::history))
        // The Ark server and its rounds. Refreshes spend VTXOs (and fees) into new ones.
        .read(route!(rounds::connected))
        .read(route!(rounds::ark_info))
        .read(route!(rounds::next_round))
        .read(route!(rounds::pending_rounds))
        .moves_funds(route!(rounds::refresh_vtxos))
        .moves_funds(route!(rounds::refresh_all))
        .moves_funds(route!(rounds::refresh_counterparty))
        .moves_funds(route!(rounds::refresh_delegated))
}

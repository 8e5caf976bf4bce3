//! The `/api/v1` routes: one file per group of barkd's API.
//!
//! Every operation of barkd's OpenAPI 0.6.0 document is served. Each group's file
//! declares its routes once, with who may call them (`api::routes`); `route!` also
//! names each for the OpenAPI document (`tests/integration/openapi.rs` checks the document covers
//! barkd's). Adding an endpoint touches only its group's file.

pub mod approvals;
pub mod backups;
pub mod bitcoin;
pub mod boards;
pub mod common;
pub mod devices;
pub mod exits;
pub mod export;
pub mod fees;
pub mod history;
pub mod lightning;
pub mod message;
pub mod notifications;
pub mod nwc;
pub mod onchain;
pub mod page_cache;
pub mod push;
pub mod rules;
pub mod system;
pub mod wallet;
pub mod webhooks;

use crate::api::routes::{Documentation, Routes};

/// Every `/api/v1` route, declared by its group (`api::routes`).
pub fn routes<D: Documentation>() -> Routes<D> {
    let groups: [fn(Routes<D>) -> Routes<D>; 19] = [
        wallet::routes,
        onchain::routes,
        bitcoin::routes,
        boards::routes,
        history::routes,
        exits::routes,
        fees::routes,
        message::routes,
        lightning::routes,
        notifications::routes,
        devices::routes,
        backups::routes,
        nwc::routes,
        rules::routes,
        approvals::routes,
        export::routes,
        webhooks::routes,
        push::routes,
        system::routes,
    ];
    groups
        .into_iter()
        .fold(Routes::new(), |routes, group| group(routes))
}

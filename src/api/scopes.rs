//! The scope each route needs: one table, checked after routing by the matched path.
//!
//! A route missing from the table is refused to every credential but a full one
//! (deny by default), and a test proves every route of the OpenAPI document is in it.
//! `admin` includes every other scope (`net::pairing::Scopes::allows`).

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::error::ApiError;
use crate::net::pairing::{Scope, Scopes};

use Scope::{Admin, Read, Receive, Send};

/// `(method, path as routed, scope)` for every authenticated route.
pub const ROUTE_SCOPES: &[(&str, &str, Scope)] = &[
    ("GET", "/api/v1/bitcoin/tip", Read),
    ("POST", "/api/v1/boards/board-all", Send),
    ("POST", "/api/v1/boards/board-amount", Send),
    ("GET", "/api/v1/boards/pending", Read),
    ("POST", "/api/v1/exits/cancel/{vtxo_id}", Send),
    ("POST", "/api/v1/exits/claim/all", Send),
    ("POST", "/api/v1/exits/claim/vtxos", Send),
    ("GET", "/api/v1/exits/fee", Read),
    ("POST", "/api/v1/exits/progress", Send),
    ("POST", "/api/v1/exits/start/all", Send),
    ("POST", "/api/v1/exits/start/vtxos", Send),
    ("GET", "/api/v1/exits/status", Read),
    ("GET", "/api/v1/exits/status/all", Read),
    ("GET", "/api/v1/exits/status/finished", Read),
    ("GET", "/api/v1/exits/status/live", Read),
    ("GET", "/api/v1/exits/status/vtxo/{vtxo_id}", Read),
    ("GET", "/api/v1/exits/status/{vtxo_id}", Read),
    ("GET", "/api/v1/fees/board", Read),
    ("GET", "/api/v1/fees/lightning/pay", Read),
    ("GET", "/api/v1/fees/lightning/receive", Read),
    // A fee estimate sent as a POST body; it changes nothing.
    ("POST", "/api/v1/fees/offboard", Read),
    ("GET", "/api/v1/fees/offboard-all", Read),
    ("GET", "/api/v1/fees/onchain", Read),
    ("GET", "/api/v1/fees/send-onchain", Read),
    ("GET", "/api/v1/history", Read),
    // Labels rewrite the wallet's records: not for a read-only display.
    ("POST", "/api/v1/history/{id}/metadata", Send),
    ("POST", "/api/v1/lightning/pay", Send),
    ("GET", "/api/v1/lightning/receives", Read),
    ("POST", "/api/v1/lightning/receives/invoice", Receive),
    (
        "POST",
        "/api/v1/lightning/receives/invoice/for-address",
        Receive,
    ),
    ("GET", "/api/v1/lightning/receives/{identifier}", Read),
    ("DELETE", "/api/v1/lightning/receives/{identifier}", Receive),
    ("GET", "/api/v1/lightning/sends/{identifier}", Read),
    // A signature by the wallet's key can authorise things elsewhere.
    ("POST", "/api/v1/message/sign", Send),
    ("POST", "/api/v1/message/verify", Read),
    ("GET", "/api/v1/notifications/sse", Read),
    ("GET", "/api/v1/notifications/wait", Read),
    ("GET", "/api/v1/notifications/ws/ticket", Read),
    ("POST", "/api/v1/onchain/addresses/next", Receive),
    ("GET", "/api/v1/onchain/balance", Read),
    ("POST", "/api/v1/onchain/drain", Send),
    ("POST", "/api/v1/onchain/send", Send),
    ("POST", "/api/v1/onchain/send-many", Send),
    // Syncing only catches up with the chain and the Ark server.
    ("POST", "/api/v1/onchain/sync", Read),
    ("GET", "/api/v1/onchain/transactions", Read),
    ("GET", "/api/v1/onchain/utxos", Read),
    ("GET", "/api/v1/wallet", Read),
    // barkd's alias of create.
    ("POST", "/api/v1/wallet", Admin),
    ("DELETE", "/api/v1/wallet", Admin),
    ("GET", "/api/v1/wallet/addresses/index/{index}", Receive),
    ("POST", "/api/v1/wallet/addresses/next", Receive),
    ("GET", "/api/v1/wallet/ark-info", Read),
    ("GET", "/api/v1/wallet/balance", Read),
    ("POST", "/api/v1/wallet/bip321", Receive),
    ("GET", "/api/v1/wallet/connected", Read),
    ("POST", "/api/v1/wallet/create", Admin),
    ("GET", "/api/v1/wallet/history", Read),
    // Adds a VTXO someone handed over: receiving.
    ("POST", "/api/v1/wallet/import-vtxo", Receive),
    ("GET", "/api/v1/wallet/mnemonic", Admin),
    ("GET", "/api/v1/wallet/movements", Read),
    ("GET", "/api/v1/wallet/next-round", Read),
    ("POST", "/api/v1/wallet/offboard/all", Send),
    ("POST", "/api/v1/wallet/offboard/vtxos", Send),
    // Refreshes spend VTXOs (and fees) into new ones.
    ("POST", "/api/v1/wallet/refresh/all", Send),
    ("POST", "/api/v1/wallet/refresh/counterparty", Send),
    ("POST", "/api/v1/wallet/refresh/delegated/vtxos", Send),
    ("POST", "/api/v1/wallet/refresh/vtxos", Send),
    ("GET", "/api/v1/wallet/rounds", Read),
    ("POST", "/api/v1/wallet/send", Send),
    ("POST", "/api/v1/wallet/send-onchain", Send),
    ("POST", "/api/v1/wallet/sync", Read),
    ("POST", "/api/v1/wallet/sync/mailbox", Read),
    ("GET", "/api/v1/wallet/vtxos", Read),
    ("GET", "/api/v1/wallet/vtxos/{id}", Read),
    ("GET", "/api/v1/wallet/vtxos/{id}/encoded", Read),
    ("GET", "/api/v1/devices", Admin),
    ("GET", "/metrics", Read),
    ("DELETE", "/api/v1/devices/{id}", Admin),
];

/// The scope a route needs; `None` for a route not in the table.
pub fn required(method: &Method, path: &str) -> Option<Scope> {
    ROUTE_SCOPES
        .iter()
        .find(|(m, p, _)| *p == path && method.as_str() == *m)
        .map(|(_, _, scope)| *scope)
}

/// Route layer: refuse (403) a credential without the route's scope. Runs after the
/// bearer check, which leaves the caller's `Scopes` in the request; a request that
/// somehow arrives without them is refused (fail closed).
pub async fn require_scope(request: Request, next: Next) -> Response {
    let granted = request
        .extensions()
        .get::<Scopes>()
        .copied()
        .unwrap_or(Scopes::NONE);
    let path = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string());
    let needed = path.as_deref().and_then(|p| required(request.method(), p));
    let allowed = match needed {
        Some(scope) => granted.allows(scope),
        // Deny by default: a route nobody classified is for full credentials only.
        None => granted == Scopes::FULL,
    };
    if allowed {
        next.run(request).await
    } else {
        ApiError::Forbidden(match needed {
            Some(Scope::Read) => "this device token lacks the read scope",
            Some(Scope::Receive) => "this device token lacks the receive scope",
            Some(Scope::Send) => "this device token lacks the send scope",
            Some(Scope::Admin) | None => "this device token lacks the admin scope",
        })
        .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Routes that need no bearer token at all.
    const PUBLIC: &[(&str, &str)] = &[
        ("GET", "/ping"),
        ("GET", "/health"),
        ("GET", "/api/v1/notifications/ws"),
        ("POST", "/api/v1/pair"),
    ];

    #[test]
    fn every_route_of_the_document_is_in_the_table_and_nothing_else() {
        let document = crate::api::openapi();
        let mut routes = Vec::new();
        for (path, item) in &document.paths.paths {
            for (method, op) in [
                ("GET", &item.get),
                ("POST", &item.post),
                ("DELETE", &item.delete),
                ("PUT", &item.put),
                ("PATCH", &item.patch),
            ] {
                if op.is_some() {
                    routes.push((method, path.as_str()));
                }
            }
        }
        for (method, path) in &routes {
            if PUBLIC.contains(&(method, path)) {
                continue;
            }
            let m = Method::from_bytes(method.as_bytes()).expect("method");
            assert!(
                required(&m, path).is_some(),
                "{method} {path} has no scope in ROUTE_SCOPES"
            );
        }
        for (method, path, _) in ROUTE_SCOPES {
            assert!(
                routes.contains(&(method, path)),
                "{method} {path} is in ROUTE_SCOPES but not served"
            );
        }
        for (i, (m, p, _)) in ROUTE_SCOPES.iter().enumerate() {
            assert!(
                !ROUTE_SCOPES[i + 1..]
                    .iter()
                    .any(|(m2, p2, _)| m2 == m && p2 == p),
                "{m} {p} is listed twice"
            );
        }
    }
}

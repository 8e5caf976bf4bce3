//! The scope check: after routing, the matched path's scope (declared with the route,
//! `api::routes`) against the credential's.
//!
//! A route missing from the table is refused to every credential but a full one
//! (deny by default), and a test proves every route of the OpenAPI document is in it.
//! `admin` includes every other scope (`access::scopes::Scopes::allows`).

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::access::Caller;
use crate::access::scopes::{Scope, Scopes};
use crate::api::error::ApiError;
use crate::api::routes::RouteTable;

/// Route layer: refuse (403) a credential without the route's scope. Runs after the
/// bearer check, which leaves the [`Caller`] in the request, and before anything else
/// looks at the request (the idempotency records); a request that
/// somehow arrives without them is refused (fail closed).
pub async fn require_scope(
    State(table): State<Arc<RouteTable>>,
    request: Request,
    next: Next,
) -> Response {
    let granted = request
        .extensions()
        .get::<Caller>()
        .map_or(Scopes::NONE, |caller| caller.scopes);
    let path = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string());
    let needed = path
        .as_deref()
        .and_then(|p| table.scope(request.method(), p));
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
    use crate::api::routes::Access;
    use axum::http::Method;

    /// Routes that need no bearer token at all: adding one is a decision.
    const PUBLIC: &[(&str, &str)] = &[
        ("GET", "/ping"),
        ("GET", "/health"),
        ("GET", "/api/v1/notifications/ws"),
        ("POST", "/api/v1/pair"),
        ("POST", "/api/v1/claim"),
    ];

    #[test]
    fn every_route_of_the_document_is_in_the_table_and_only_the_known_ones_are_public() {
        let document = crate::api::openapi();
        let table = crate::api::route_table();
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
            let route = table
                .iter()
                .find(|r| r.method.as_str() == *method && r.path == *path)
                .unwrap_or_else(|| panic!("{method} {path} is served but not in the table"));
            assert_eq!(
                route.access == Access::Public,
                PUBLIC.contains(&(method, path)),
                "{method} {path}: {:?}",
                route.access
            );
        }
        let rows: Vec<_> = table.iter().collect();
        for (i, r) in rows.iter().enumerate() {
            assert!(
                routes.contains(&(r.method.as_str(), r.path.as_str())),
                "{} {} is in the table but not documented",
                r.method,
                r.path
            );
            assert!(
                !rows[i + 1..]
                    .iter()
                    .any(|o| o.method == r.method && o.path == r.path),
                "{} {} is declared twice",
                r.method,
                r.path
            );
        }
    }

    #[test]
    fn only_posts_move_funds_and_they_need_send() {
        let table = crate::api::route_table();
        let moving: Vec<_> = table.fund_moving().collect();
        assert!(moving.len() >= 18, "{moving:?}");
        for route in moving {
            assert_eq!(route.method, Method::POST, "{}", route.path);
            assert_eq!(
                table.scope(&route.method, &route.path),
                Some(Scope::Send),
                "{}",
                route.path
            );
        }
    }
}

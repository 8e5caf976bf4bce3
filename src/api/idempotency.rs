//! `Idempotency-Key` (Berth extension): a client that retries a fund-moving POST after
//! a timeout or a dropped connection, with the same key, moves funds once.
//!
//! - The key (1 to 255 visible ASCII characters) is claimed in the store before the
//!   request runs, with a hash of the request (method, path, body).
//! - A success (2xx) is kept for 24 hours: the same key and request get the same
//!   answer again, with `Idempotent-Replayed: true`, and nothing runs twice.
//! - A failure gives the key back, so the client may retry with it.
//! - The same key with a different request is a 422; while the first request runs,
//!   409. A request cut short by a restart leaves its key "interrupted" (409): its
//!   outcome is unknown, and the client should look at the history before trying
//!   again with a new key.
//!
//! Requests without the header, and other routes, pass through untouched.
//!
//! Keys belong to the credential that used them ([`Credential`]): another credential
//! presenting the same key neither sees the stored answer nor learns that the key is in
//! use, nor can it claim a key ahead of its owner. And nothing here answers (400, 409,
//! 422, a replay) before the route's scope check has passed: the layer runs after it.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bitcoin::hashes::{Hash, HashEngine, sha256};

use crate::access::{Caller, Credential};
use crate::api::error::ApiError;
use crate::api::routes::RouteTable;
use crate::store::idempotency::{Claim, IdempotencyKeys};
use crate::store::now_us;

pub const HEADER: &str = "idempotency-key";
/// Set on a replayed answer.
pub const REPLAYED: &str = "idempotent-replayed";
/// How long a success is replayed.
pub const TTL: Duration = Duration::from_secs(24 * 3600);
/// Largest request body hashed (these requests are small JSON objects).
const MAX_REQUEST: usize = 64 * 1024;
/// Largest answer kept for replay.
const MAX_ANSWER: usize = 1024 * 1024;

fn hash(parts: &[&[u8]]) -> [u8; 32] {
    let mut engine = sha256::Hash::engine();
    for part in parts {
        engine.input(&(part.len() as u64).to_be_bytes());
        engine.input(part);
    }
    sha256::Hash::from_engine(engine).to_byte_array()
}

/// What the store keeps of a key (never the key itself), in its owner's namespace.
///
/// The admin's is the hash of the key alone, as before keys had owners: the admin's
/// records from an earlier version still answer its retries after an upgrade. Every
/// device's namespace is its own.
pub fn key_hash(owner: &Credential, key: &str) -> [u8; 32] {
    match owner {
        Credential::Admin => hash(&[key.as_bytes()]),
        Credential::Device(id) => hash(&[b"device", id.as_bytes(), key.as_bytes()]),
    }
}

/// What identifies a request under a key: its method, path and body.
pub fn request_hash(method: &str, path: &str, body: &[u8]) -> [u8; 32] {
    hash(&[method.as_bytes(), path.as_bytes(), body])
}

/// The route layer, over the routes that move funds (declared with `moves_funds`,
/// `api::routes`), inside the scope check.
pub async fn layer(
    State((keys, table)): State<(IdempotencyKeys, Arc<RouteTable>)>,
    request: Request,
    next: Next,
) -> Response {
    let Some(key) = request.headers().get(HEADER).cloned() else {
        return next.run(request).await;
    };
    let moves_funds = request
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|path| table.moves_funds(request.method(), path.as_str()));
    if !moves_funds {
        return next.run(request).await;
    }
    // The bearer layer always leaves the caller; without one, refuse rather than keep
    // a key nobody owns.
    let Some(owner) = request
        .extensions()
        .get::<Caller>()
        .map(|caller| caller.credential.clone())
    else {
        return ApiError::internal("claiming an idempotency key", "no caller").into_response();
    };
    let key = match key.to_str() {
        Ok(k) if (1..=255).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_graphic()) => {
            k.to_string()
        }
        _ => {
            return ApiError::BadRequest(
                "Idempotency-Key must be 1 to 255 visible ASCII characters".into(),
            )
            .into_response();
        }
    };
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_REQUEST).await else {
        return ApiError::PayloadTooLarge.into_response();
    };
    let key_hash = key_hash(&owner, &key);
    let request_hash = request_hash(parts.method.as_str(), parts.uri.path(), &bytes);
    let ttl = u64::try_from(TTL.as_micros()).unwrap_or(u64::MAX);
    let claim = match keys.claim(key_hash, request_hash, now_us(), ttl).await {
        Ok(claim) => claim,
        Err(e) => return ApiError::store("claiming an idempotency key", e).into_response(),
    };
    match claim {
        Claim::Claimed => {}
        Claim::Replay { status, body } => {
            let mut response = Response::new(Body::from(body));
            *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            headers.insert(REPLAYED, HeaderValue::from_static("true"));
            return response;
        }
        Claim::Mismatch => {
            return ApiError::WrongState(
                "this Idempotency-Key was used for a different request".into(),
            )
            .into_response();
        }
        Claim::InFlight => {
            return ApiError::Conflict("a request with this Idempotency-Key is still running")
                .into_response();
        }
        Claim::Interrupted => {
            return ApiError::Conflict(
                "a request with this Idempotency-Key was cut short by a restart, so its outcome \
                 is unknown: check the history, then retry with a new key",
            )
            .into_response();
        }
    }
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let status = response.status();
    if !status.is_success() {
        if let Err(e) = keys.finish(key_hash, None).await {
            tracing::error!(error = %e, "cannot release an idempotency key");
        }
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = match axum::body::to_bytes(body, MAX_ANSWER).await {
        Ok(body) => body,
        Err(e) => {
            // Cannot happen for our JSON answers; the request ran, so keep the key
            // claimed (a retry is refused rather than run twice).
            tracing::error!(error = %e, "cannot keep an idempotent answer");
            return ApiError::Internal.into_response();
        }
    };
    if let Err(e) = keys
        .finish(key_hash, Some((status.as_u16(), body.to_vec())))
        .await
    {
        tracing::error!(error = %e, "cannot keep an idempotent answer");
    }
    Response::from_parts(parts, Body::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_fund_moving_paths_take_a_key() {
        let table = crate::api::route_table();
        let post = axum::http::Method::POST;
        assert!(table.moves_funds(&post, "/api/v1/wallet/send"));
        assert!(table.moves_funds(&post, "/api/v1/boards/board-amount"));
        assert!(!table.moves_funds(&post, "/api/v1/wallet/sync"));
        assert!(!table.moves_funds(&post, "/wallet/send"));
        assert!(!table.moves_funds(&axum::http::Method::GET, "/api/v1/wallet/send"));
    }

    #[test]
    fn each_credential_has_its_own_keys_and_the_admins_are_as_before() {
        let admin = key_hash(&Credential::Admin, "k1");
        let phone = key_hash(&Credential::Device("aa".into()), "k1");
        let other = key_hash(&Credential::Device("ab".into()), "k1");
        assert_eq!(
            admin,
            hash(&[b"k1"]),
            "the admin's records survive an upgrade"
        );
        assert_ne!(admin, phone);
        assert_ne!(phone, other);
    }

    #[test]
    fn the_request_hash_separates_its_parts() {
        assert_ne!(hash(&[b"ab", b"c"]), hash(&[b"a", b"bc"]));
    }
}

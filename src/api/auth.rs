//! Bearer-token authentication: `Authorization: Bearer <token>`, exactly one header.
//!
//! Two kinds of token are accepted: the barkd-style `auth_token` of the datadir
//! (compared in constant time; full access, as in barkd) and the per-device tokens
//! minted by pairing (looked up by hash; the scopes chosen when pairing); which one a
//! token is, and its scopes, is `access::authenticate`'s to say. The [`Caller`] is left
//! in the request for the scope check that runs after routing (`scopes`), the
//! idempotency records (kept per credential) and the live streams (ended when their
//! device is revoked).
//!
//! The credential is looked at first: a valid one is always served. A wrong one counts
//! against the caller's address, and a blocked address's wrong ones are answered 429
//! (`access::backoff`); a missing header counts for nothing (that is a client that has
//! not been set up, not a guess).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::access::Caller;
use crate::access::backoff::AuthFailures;
use crate::access::devices::Devices;
use crate::api::error::ApiError;
use crate::datadir::AuthToken;

/// Who may call the API.
#[derive(Debug, Clone)]
pub enum AuthPolicy {
    /// Holders of this token (full access) and of device tokens (their scopes).
    Token(Arc<AuthToken>),
    /// Anyone who reaches the port (`--no-auth` and friends), with full access.
    Disabled,
}

/// Tells who a request comes from: the policy, the paired devices and the books of
/// failed attempts. Used by the bearer layer and by the public routes that say more to
/// a caller with a credential (`/health`).
#[derive(Clone)]
pub struct Authenticator {
    pub policy: AuthPolicy,
    pub devices: Arc<Devices>,
    pub failures: Arc<AuthFailures>,
}

/// The caller's address, when it came over the network (not the control socket).
pub fn peer_ip(request: &Request) -> Option<IpAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
}

impl Authenticator {
    /// The caller of a request with `headers` from `peer`: `Ok(None)` when it presents
    /// no credential, `Err` (401, or 429 for a blocked address) when it presents a
    /// wrong one, which is counted against `peer`.
    pub fn identify(
        &self,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
    ) -> Result<Option<Caller>, ApiError> {
        let AuthPolicy::Token(admin) = &self.policy else {
            return Ok(Some(Caller::OPEN));
        };
        match check(headers, admin, &self.devices) {
            Ok(caller) => Ok(Some(caller)),
            Err(Failure::Missing) => Ok(None),
            Err(Failure::Wrong(err)) => {
                if let Some(ip) = peer {
                    let now = Instant::now();
                    if let Err(wait) = self.failures.check(ip, now) {
                        return Err(ApiError::TooManyRequests(wait));
                    }
                    self.failures.failed(ip, now);
                }
                Err(err)
            }
        }
    }
}

/// The bearer layer over every protected route.
pub async fn require_token(
    State(authenticator): State<Authenticator>,
    mut request: Request,
    next: Next,
) -> Response {
    let peer = peer_ip(&request);
    match authenticator.identify(request.headers(), peer) {
        Ok(Some(caller)) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Ok(None) => ApiError::Unauthorized("missing bearer token").into_response(),
        Err(err) => err.into_response(),
    }
}

enum Failure {
    /// No credential was presented.
    Missing,
    /// A credential was presented and is not valid.
    Wrong(ApiError),
}

fn check(headers: &HeaderMap, admin: &AuthToken, devices: &Devices) -> Result<Caller, Failure> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let value = values.next().ok_or(Failure::Missing)?;
    let wrong = |msg| Failure::Wrong(ApiError::Unauthorized(msg));
    if values.next().is_some() {
        return Err(wrong("more than one Authorization header"));
    }
    let value = value.to_str().map_err(|_| wrong("invalid bearer token"))?;
    let presented = value
        .strip_prefix("Bearer ")
        .ok_or_else(|| wrong("Authorization must be \"Bearer <token>\""))?
        .trim();
    crate::access::authenticate(presented, admin, devices)
        .ok_or_else(|| wrong("invalid bearer token"))
}

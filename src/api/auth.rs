//! Bearer-token authentication: `Authorization: Bearer <token>`, exactly one header.
//!
//! Two kinds of token are accepted: the barkd-style `auth_token` of the datadir
//! (compared in constant time; full access, as in barkd) and the per-device tokens
//! minted by pairing (looked up by hash; the scopes chosen when pairing); which one a
//! token is, and its scopes, is `access::authenticate`'s to say. The caller's
//! `Scopes` are left in the request for the scope check that runs after routing
//! (`scopes`). A wrong token counts against the caller's address (`access::backoff`);
//! a missing header does not (that is a client that has not been set up, not a guess).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::access::backoff::AuthFailures;
use crate::access::devices::Devices;
use crate::access::scopes::Scopes;
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

/// What the bearer check needs.
#[derive(Clone)]
pub struct Access {
    pub policy: AuthPolicy,
    pub devices: Arc<Devices>,
    pub failures: Arc<AuthFailures>,
}

/// The caller's address, when it came over the network (not the control socket).
pub fn peer_ip(request: &Request) -> Option<std::net::IpAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
}

pub async fn require_token(
    State(access): State<Access>,
    mut request: Request,
    next: Next,
) -> Response {
    let AuthPolicy::Token(admin) = &access.policy else {
        request.extensions_mut().insert(Scopes::FULL);
        return next.run(request).await;
    };
    let peer = peer_ip(&request);
    if let Some(ip) = peer
        && let Err(wait) = access.failures.check(ip, Instant::now())
    {
        return ApiError::TooManyRequests(wait).into_response();
    }
    match check(&request, admin, &access.devices) {
        Ok(scopes) => {
            if let Some(ip) = peer {
                access.failures.succeeded(ip);
            }
            request.extensions_mut().insert(scopes);
            next.run(request).await
        }
        Err(Failure::Missing(err)) => err.into_response(),
        Err(Failure::Wrong(err)) => {
            if let Some(ip) = peer {
                access.failures.failed(ip, Instant::now());
            }
            err.into_response()
        }
    }
}

enum Failure {
    /// No credential was presented.
    Missing(ApiError),
    /// A credential was presented and is not valid.
    Wrong(ApiError),
}

fn check(request: &Request, admin: &AuthToken, devices: &Devices) -> Result<Scopes, Failure> {
    let mut values = request.headers().get_all(AUTHORIZATION).iter();
    let value = values
        .next()
        .ok_or(Failure::Missing(ApiError::Unauthorized(
            "missing bearer token",
        )))?;
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

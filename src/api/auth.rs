//! Bearer-token authentication: `Authorization: Bearer <token>`, exactly one header,
//! compared in constant time. Every route but `/ping` goes through it.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::api::error::ApiError;
use crate::datadir::AuthToken;

/// Who may call the API.
#[derive(Debug, Clone)]
pub enum AuthPolicy {
    /// Only holders of this token.
    Token(Arc<AuthToken>),
    /// Anyone who reaches the port (`--no-auth` and friends).
    Disabled,
}

pub async fn require_token(
    State(policy): State<AuthPolicy>,
    request: Request,
    next: Next,
) -> Response {
    let AuthPolicy::Token(expected) = &policy else {
        return next.run(request).await;
    };
    match check(&request, expected) {
        Ok(()) => next.run(request).await,
        Err(err) => err.into_response(),
    }
}

fn check(request: &Request, expected: &AuthToken) -> Result<(), ApiError> {
    let mut values = request.headers().get_all(AUTHORIZATION).iter();
    let value = values
        .next()
        .ok_or(ApiError::Unauthorized("missing bearer token"))?;
    if values.next().is_some() {
        return Err(ApiError::Unauthorized("more than one Authorization header"));
    }
    let value = value
        .to_str()
        .map_err(|_| ApiError::Unauthorized("invalid bearer token"))?;
    let presented = value
        .strip_prefix("Bearer ")
        .ok_or(ApiError::Unauthorized(
            "Authorization must be \"Bearer <token>\"",
        ))?
        .trim();
    // ConstantTimeEq on slices of different lengths is false without comparing the
    // contents; the token's length is public (it is a fixed format).
    if bool::from(presented.as_bytes().ct_eq(expected.expose().as_bytes())) {
        Ok(())
    } else {
        Err(ApiError::Unauthorized("invalid bearer token"))
    }
}

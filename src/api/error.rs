//! The API's error type: every failure a client can see, as `{"message", "code"}`.
//!
//! Messages are for people and never carry internal error chains; the detail goes to
//! the log. `code` is stable and machine-readable.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Malformed input: bad JSON, a bad field. 400.
    #[error("{0}")]
    BadRequest(String),
    /// Missing or invalid credential. 401.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// Unknown id or path, or a disabled endpoint. 404.
    #[error("{0}")]
    NotFound(String),
    /// Well-formed, but the wallet's state forbids it (e.g. no wallet). 422.
    #[error("{0}")]
    WrongState(String),
    /// Something the request needs (Ark server, chain source) cannot be reached. 503.
    #[error("{0}")]
    Unavailable(String),
    /// This berthd does not serve the operation yet. 501.
    #[error("{0}")]
    NotImplemented(String),
    /// A genuine internal failure; the detail is logged, not sent. 500.
    #[error("internal error")]
    Internal,
}

#[derive(serde::Serialize)]
struct ErrorBody<'a> {
    message: String,
    code: &'a str,
}

impl ApiError {
    fn parts(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::WrongState(_) => (StatusCode::UNPROCESSABLE_ENTITY, "wrong_state"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::NotImplemented(_) => (StatusCode::NOT_IMPLEMENTED, "not_implemented"),
            ApiError::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    /// Log `err` with its chain and hand the client a bare 500.
    pub fn internal(context: &str, err: impl std::fmt::Display) -> Self {
        tracing::error!(target: "berth::api", error = %err, "{context}");
        ApiError::Internal
    }
}

/// Any JSON body problem (syntax, missing field, wrong type) is the client's: 400.
impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::JsonRejection) -> Self {
        ApiError::BadRequest(rejection.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.parts();
        (
            status,
            Json(ErrorBody {
                message: self.to_string(),
                code,
            }),
        )
            .into_response()
    }
}

impl From<crate::engine::EngineError> for ApiError {
    fn from(err: crate::engine::EngineError) -> Self {
        use crate::engine::EngineError;
        match err {
            EngineError::NoWallet | EngineError::WalletExists(_) => {
                ApiError::WrongState(err.to_string())
            }
            EngineError::InvalidRequest(msg) => ApiError::BadRequest(msg),
            EngineError::Unreachable { .. } => ApiError::Unavailable(err.to_string()),
            EngineError::Store(store) => ApiError::internal("wallet database", store),
            EngineError::Internal { .. } => ApiError::internal("engine", err),
        }
    }
}

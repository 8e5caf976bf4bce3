//! The API's error type: every failure a client can see, as `{"message", "code"}`
//! (404s also carry barkd's `resources`).
//!
//! Messages are for people and never carry internal error chains; the detail goes to
//! the log. `code` is stable and machine-readable (a Berth extension).

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
    /// A valid credential without the scope the route needs. 403.
    #[error("{0}")]
    Forbidden(&'static str),
    /// A spending rule of the caller's device refuses the payment; the message names
    /// the rule and what is left. 403, `code` `spending_rule` (a scope error is
    /// `forbidden`).
    #[error("{0}")]
    Refused(String),
    /// Over a limit of the caller's device whose rules hold such payments for the
    /// owner's approval. Answered as a refusal (403, `spending_rule`) carrying the
    /// request for the approvals layer (`api::approvals`), which holds it and answers
    /// 202 instead on the routes that can be run again.
    #[error("{}", .0.reason)]
    NeedsApproval(Box<crate::engine::spending::approvals::Asked>),
    /// Too many failed authentications from this address; try again after the given
    /// number of seconds (also sent as `Retry-After`). 429.
    #[error("too many failed authentication attempts; retry in {0} s")]
    TooManyRequests(u64),
    /// The caller has as much under way as it may (outbound fetches); `Retry-After: 1`.
    /// 429.
    #[error("{0}")]
    Busy(String),
    /// The request body is larger than the limit (`[server] max_body_kib`). 413.
    #[error("the request body is too large")]
    PayloadTooLarge,
    /// Unknown id or path, or a disabled endpoint. 404. `resources` names the ids
    /// that were not found (empty for a path).
    #[error("{message}")]
    NotFound {
        message: String,
        resources: Vec<String>,
    },
    /// Well-formed, but the wallet's state forbids it (e.g. no wallet). 422.
    #[error("{0}")]
    WrongState(String),
    /// The request collides with one that is running or whose outcome is unknown
    /// (an idempotency key). 409.
    #[error("{0}")]
    Conflict(&'static str),
    /// Something the request needs (Ark server, chain source) cannot be reached. 503.
    #[error("{0}")]
    Unavailable(String),
    /// The `Host` the request names is not this machine (a DNS-rebinding page, or a
    /// proxy that forwards another site's traffic). 421.
    #[error("{0}")]
    Misdirected(String),
    /// The disk under the datadir is full or nearly so: berthd refuses changes until
    /// space is freed (`api::disk`). 507.
    #[error("{0}")]
    InsufficientStorage(String),
    /// A genuine internal failure; the detail is logged, not sent. 500.
    #[error("internal error")]
    Internal,
}

/// The body of every error response but 404.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorResponse {
    /// What went wrong, for a person; never an internal error chain.
    pub message: String,
    /// Stable machine-readable error kind (Berth extension), e.g. `wrong_state`.
    pub code: String,
}

/// The body of a 404, with barkd's `resources`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct NotFoundResponse {
    pub message: String,
    /// The ids that were not found; empty for an unknown path.
    pub resources: Vec<String>,
    pub code: String,
}

impl ApiError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        self.parts().0
    }

    fn parts(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::Refused(_) | ApiError::NeedsApproval(_) => {
                (StatusCode::FORBIDDEN, "spending_rule")
            }
            ApiError::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            ApiError::TooManyRequests(_) => (StatusCode::TOO_MANY_REQUESTS, "too_many_requests"),
            ApiError::Busy(_) => (StatusCode::TOO_MANY_REQUESTS, "busy"),
            ApiError::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::WrongState(_) => (StatusCode::UNPROCESSABLE_ENTITY, "wrong_state"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::Misdirected(_) => (StatusCode::MISDIRECTED_REQUEST, "misdirected"),
            ApiError::InsufficientStorage(_) => {
                (StatusCode::INSUFFICIENT_STORAGE, "insufficient_storage")
            }
            ApiError::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    /// A 404 for a path or a disabled endpoint.
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::NotFound {
            message: message.into(),
            resources: Vec::new(),
        }
    }

    /// A failure of the wallet database while `context`. Its detail goes to the log.
    /// A full disk is 507; a storage failure that stopped the database is 503 (berthd is
    /// stopping, and systemd starts it again from the last durable commit); anything
    /// else is a bug, 500.
    pub fn store(context: &str, err: crate::store::StoreError) -> Self {
        use crate::store::StoreError;
        match err {
            StoreError::DiskFull { .. } => {
                tracing::error!(target: "berth::api", error = %err, "{context}");
                ApiError::InsufficientStorage(
                    "the disk is full: the change was not made, and berthd restarts; free \
                     space on the disk that holds the datadir"
                        .into(),
                )
            }
            err if err.is_fatal() => {
                tracing::error!(target: "berth::api", error = %err, "{context}");
                ApiError::Unavailable(
                    "the wallet database stopped after a storage failure and berthd is \
                     restarting; berthd's log has the details"
                        .into(),
                )
            }
            err => ApiError::internal(context, err),
        }
    }

    /// Log `err` with its chain and hand the client a bare 500.
    pub fn internal(context: &str, err: impl std::fmt::Display) -> Self {
        tracing::error!(target: "berth::api", error = %err, "{context}");
        ApiError::Internal
    }
}

/// A malformed query string is the client's: 400.
impl From<axum::extract::rejection::QueryRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::QueryRejection) -> Self {
        ApiError::BadRequest(rejection.body_text())
    }
}

/// A path parameter of the wrong type is the client's: 400.
impl From<axum::extract::rejection::PathRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::PathRejection) -> Self {
        ApiError::BadRequest(rejection.body_text())
    }
}

/// Any JSON body problem (syntax, missing field, wrong type) is the client's: 400;
/// a body over the size limit is 413.
impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(rejection: axum::extract::rejection::JsonRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return ApiError::PayloadTooLarge;
        }
        ApiError::BadRequest(rejection.body_text())
    }
}

/// On an answer: the engine says this payment needs the owner's approval (the
/// approvals layer, `api::approvals`, holds it).
#[derive(Debug, Clone)]
pub struct NeedsApproval(pub Box<crate::engine::spending::approvals::Asked>);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.parts();
        let message = self.to_string();
        let code = code.to_string();
        match self {
            ApiError::NotFound { resources, .. } => {
                let body = NotFoundResponse {
                    message,
                    resources,
                    code,
                };
                (status, Json(body)).into_response()
            }
            ApiError::TooManyRequests(secs) => (
                status,
                [(axum::http::header::RETRY_AFTER, secs.to_string())],
                Json(ErrorResponse { message, code }),
            )
                .into_response(),
            ApiError::Busy(_) => (
                status,
                [(axum::http::header::RETRY_AFTER, "1".to_string())],
                Json(ErrorResponse { message, code }),
            )
                .into_response(),
            ApiError::NeedsApproval(asked) => (
                status,
                axum::Extension(NeedsApproval(asked)),
                Json(ErrorResponse { message, code }),
            )
                .into_response(),
            _ => (status, Json(ErrorResponse { message, code })).into_response(),
        }
    }
}

impl From<crate::engine::EngineError> for ApiError {
    fn from(err: crate::engine::EngineError) -> Self {
        use crate::engine::EngineError;
        match err {
            EngineError::NoWallet
            | EngineError::WalletExists(_)
            | EngineError::InsufficientFunds(_)
            | EngineError::WrongState(_)
            | EngineError::DatadirConflict(_) => ApiError::WrongState(err.to_string()),
            EngineError::NoExit(id) => ApiError::NotFound {
                message: err.to_string(),
                resources: vec![id.to_string()],
            },
            EngineError::UnknownVtxos(ref ids) => ApiError::NotFound {
                resources: ids.iter().map(ToString::to_string).collect(),
                message: err.to_string(),
            },
            EngineError::InvalidRequest(msg) => ApiError::BadRequest(msg),
            // bark's error chain goes to the log; the client learns what is missing.
            EngineError::Unreachable { what, ref reason } => {
                tracing::warn!(target: "berth::api", error = %reason, "{what} is unreachable");
                ApiError::Unavailable(format!(
                    "{what} is unreachable right now; berthd's log has the details"
                ))
            }
            EngineError::NotLoaded | EngineError::Locked | EngineError::Unavailable(_) => {
                ApiError::Unavailable(err.to_string())
            }
            EngineError::Busy(msg) => ApiError::Busy(msg),
            EngineError::Refused(msg) => ApiError::Refused(msg),
            EngineError::NeedsApproval(asked) => ApiError::NeedsApproval(asked),
            EngineError::Store(store) => ApiError::store("wallet database", store),
            // Names a missing or wrong key source, never a secret.
            EngineError::Seed(_) => ApiError::Unavailable(err.to_string()),
            EngineError::Internal { .. } => ApiError::internal("engine", err),
        }
    }
}

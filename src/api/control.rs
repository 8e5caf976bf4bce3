//! The local control API, served only on `<datadir>/control.sock` (a Unix socket,
//! 0600 in a 0700 datadir): what needs local access to the box rather than a token.
//! Today that is opening a pairing window (`berthd pair`).

use std::sync::Arc;
use std::time::UNIX_EPOCH;

use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::access::devices::check_device_name;
use crate::access::pairing::{Grant, PairingCodes, PairingTarget};
use crate::access::scopes::Scopes;
use crate::api::error::ApiError;

#[derive(Clone)]
pub struct ControlState {
    pub pairing: Arc<PairingCodes>,
    pub target: std::sync::Arc<PairingTarget>,
}

#[derive(Debug, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct OpenWindowRequest {
    /// Scopes for the device; default `read`, `receive`, `send`.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The device's name; default: the name the device sends.
    #[serde(default)]
    pub name: Option<String>,
}

// No `Debug`: it carries the one-time code.
#[derive(Serialize, Deserialize)]
pub struct OpenWindowResponse {
    /// The pairing URI, for the QR code.
    pub uri: String,
    /// The one-time code alone (also in the URI).
    pub code: String,
    /// When the code expires (Unix seconds).
    pub expires_at: u64,
    pub scopes: Vec<String>,
}

pub fn router(state: ControlState) -> Router {
    Router::new()
        .route("/pairing", post(open_window))
        .fallback(|| async { ApiError::not_found("no such endpoint") })
        .with_state(state)
}

async fn open_window(
    State(state): State<ControlState>,
    body: Result<Json<OpenWindowRequest>, JsonRejection>,
) -> Result<Json<OpenWindowResponse>, ApiError> {
    let Json(body) = body?;
    let scopes = if body.scopes.is_empty() {
        Scopes::PHONE_WALLET
    } else {
        Scopes::parse(&body.scopes).map_err(ApiError::BadRequest)?
    };
    let name = body
        .name
        .as_deref()
        .map(check_device_name)
        .transpose()
        .map_err(|msg| ApiError::BadRequest(msg.into()))?;
    let (code, expires) = state
        .pairing
        .open(Grant { scopes, name })
        .map_err(|msg| ApiError::WrongState(msg.into()))?;
    let expires_at = expires
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let lan_ips = crate::tls::lan_ips();
    tracing::info!(scopes = ?scopes, "pairing window opened for 10 minutes");
    Ok(Json(OpenWindowResponse {
        uri: state.target.uri(&lan_ips, code.expose(), expires_at),
        code: code.expose().to_string(),
        expires_at,
        scopes: scopes.names().into_iter().map(String::from).collect(),
    }))
}

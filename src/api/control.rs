//! The local control API, served only on `<datadir>/control.sock` (a Unix socket,
//! 0600 in a 0700 datadir): what needs local access to the box rather than a token.
//! Today that is opening a pairing window (`berthd pair`).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::api::error::ApiError;
use crate::net::pairing::{Grant, PairingCodes, Scopes, check_device_name};

/// Where phones reach the daemon: what goes in the pairing URI.
#[derive(Debug, Clone)]
pub struct PairingTarget {
    /// The bound address; an unspecified one (0.0.0.0, ::) means "every LAN address".
    pub bind: SocketAddr,
    /// The host name (without `.local`).
    pub hostname: String,
    /// The CA pin, when the API is served over TLS.
    pub pin: Option<String>,
}

impl PairingTarget {
    /// The address to put in the URI: the bound one, or else the first LAN IPv4
    /// address (phones reach IPv4 more reliably), any LAN address, or loopback.
    fn address(&self, lan_ips: &[IpAddr]) -> SocketAddr {
        let ip = self.bind.ip();
        if !ip.is_unspecified() {
            return self.bind;
        }
        let chosen = lan_ips
            .iter()
            .find(|ip| ip.is_ipv4())
            .or_else(|| lan_ips.first())
            .copied()
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        SocketAddr::new(chosen, self.bind.port())
    }

    /// `berth://pair?v=1&h=<host>.local&a=<ip>:<port>&pin=sha256/...&t=<code>&exp=<unix>`
    pub fn uri(&self, lan_ips: &[IpAddr], code: &str, expires_unix: u64) -> String {
        // Brackets of an IPv6 address are not allowed bare in a query.
        let address = self
            .address(lan_ips)
            .to_string()
            .replace('[', "%5B")
            .replace(']', "%5D");
        let mut uri = format!("berth://pair?v=1&h={}.local&a={address}", self.hostname);
        if let Some(pin) = &self.pin {
            uri.push_str("&pin=");
            uri.push_str(pin);
        }
        uri.push_str(&format!("&t={code}&exp={expires_unix}"));
        uri
    }
}

#[derive(Clone)]
pub struct ControlState {
    pub pairing: Arc<PairingCodes>,
    pub target: PairingTarget,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn target(bind: &str, pin: Option<&str>) -> PairingTarget {
        PairingTarget {
            bind: bind.parse().expect("addr"),
            hostname: "berth-7f3a".into(),
            pin: pin.map(String::from),
        }
    }

    #[test]
    fn the_uri_names_host_address_pin_code_and_expiry() {
        let lan: Vec<IpAddr> = vec![
            "fd00::5".parse().expect("ip"),
            "192.168.1.40".parse().expect("ip"),
        ];
        let uri = target("0.0.0.0:3000", Some("sha256/abc_-")).uri(&lan, "CODE", 1_800_000_000);
        assert_eq!(
            uri,
            "berth://pair?v=1&h=berth-7f3a.local&a=192.168.1.40:3000&pin=sha256/abc_-&t=CODE&exp=1800000000"
        );
        // A bound address is used as is; IPv6 brackets are escaped; no pin without TLS.
        let uri = target("[fd00::9]:3443", None).uri(&lan, "C", 1);
        assert_eq!(
            uri,
            "berth://pair?v=1&h=berth-7f3a.local&a=%5Bfd00::9%5D:3443&t=C&exp=1"
        );
        let uri = target("0.0.0.0:3000", None).uri(&[], "C", 1);
        assert!(uri.contains("a=127.0.0.1:3000"), "{uri}");
    }
}

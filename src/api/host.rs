//! The `Host` check: a request must name this machine.
//!
//! A web page the owner visits can point its own domain at 127.0.0.1 or at the box's
//! LAN address once the browser has loaded it (DNS rebinding) and then call the API
//! from the owner's browser as a same-origin page: CORS does not stop it, and under
//! `--no-auth` nothing else would. The browser still sends the page's name in `Host`,
//! so a request is served only when `Host` (or an h2 request's authority) names this
//! machine:
//! - `localhost`, a name under `.localhost` (RFC 6761 keeps them on the machine), a
//!   loopback address;
//! - its hostname and `<hostname>.local` (the names its certificate carries and mDNS
//!   announces), asked at each request, so a renamed box is still itself;
//! - the address the connection arrived at (any of its LAN addresses, as the client
//!   dialled it);
//! - the names listed in `berth.toml` (`[server] allowed_hosts`: a DNS name in front of a
//!   port forward or a reverse proxy).
//!
//! Anything else is 421 Misdirected Request. A request without any `Host` (HTTP/1.0
//! tools) is served: every browser sends one, so it cannot be a rebinding page.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::HOST;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::error::ApiError;
use crate::net::listener::LocalAddr;

/// The names a request may use besides the machine's own.
#[derive(Debug, Clone, Default)]
pub struct AllowedHosts {
    /// Lowercased, without a trailing dot.
    names: Vec<String>,
}

impl AllowedHosts {
    pub fn new(names: impl IntoIterator<Item = impl AsRef<str>>) -> Self {
        AllowedHosts {
            names: names.into_iter().map(|n| normalise(n.as_ref())).collect(),
        }
    }

    /// Whether `host` (a `Host` value: a name or address, perhaps with a port) names this
    /// machine, reached at `local` (the connection's own address, when known).
    pub fn allows(&self, host: &str, local: Option<IpAddr>) -> bool {
        let Some(name) = strip_port(host) else {
            return false;
        };
        if let Ok(ip) = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
        {
            return ip.is_loopback()
                || local.is_some_and(|l| same_address(l, ip))
                || self.names.iter().any(|n| n.parse() == Ok(ip));
        }
        let name = normalise(name);
        if name == "localhost" || name.ends_with(".localhost") {
            return true;
        }
        let hostname = crate::tls::hostname();
        name == hostname
            || name.strip_suffix(".local") == Some(hostname.as_str())
            || self.names.contains(&name)
    }
}

fn normalise(name: &str) -> String {
    name.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// The host part of a `Host` value: `name`, `name:port`, `[v6]`, `[v6]:port`. `None`
/// for something that is none of these.
fn strip_port(host: &str) -> Option<&str> {
    if host.starts_with('[') {
        let end = host.find(']')?;
        let rest = &host[end + 1..];
        return (rest.is_empty() || port(rest.strip_prefix(':')?)).then(|| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, p)) if !name.contains(':') => port(p).then_some(name),
        // A bare IPv6 address is not a valid Host, but it names what it names.
        Some(_) => Some(host),
        None => Some(host),
    }
    .filter(|name| !name.is_empty())
}

fn port(p: &str) -> bool {
    !p.is_empty() && p.parse::<u16>().is_ok()
}

/// IPv4 and its IPv4-mapped IPv6 form are the same address.
fn same_address(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// The layer, outermost on the TCP listener's router (not the control socket's).
pub async fn require_known_host(
    State(allowed): State<Arc<AllowedHosts>>,
    request: Request,
    next: Next,
) -> Response {
    let named = request
        .headers()
        .get(HOST)
        .map(|h| h.to_str().map(str::to_string))
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(|a| Ok(a.as_str().to_string()))
        });
    let local = request
        .extensions()
        .get::<LocalAddr>()
        .map(|LocalAddr(addr): &LocalAddr| SocketAddr::ip(addr));
    match named {
        None => next.run(request).await,
        Some(Ok(host)) if allowed.allows(&host, local) => next.run(request).await,
        Some(host) => {
            let host = host.unwrap_or_default();
            tracing::debug!(target: "berth::api", host = %host.escape_debug(), "refused a request for another host");
            ApiError::Misdirected(
                "this request names a host other than this machine; add the name to \
                 [server] allowed_hosts in berth.toml if it is one of its names"
                    .into(),
            )
            .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machines_own_names_and_addresses_are_allowed_and_others_are_not() {
        let hostname = crate::tls::hostname();
        let allowed = AllowedHosts::new(["Wallet.Example.org."]);
        let lan: IpAddr = "192.168.1.20".parse().expect("ip");
        for host in [
            "localhost",
            "localhost:3000",
            "LOCALHOST.",
            "app.localhost:3000",
            "127.0.0.1",
            "127.0.0.1:3000",
            "[::1]:3000",
            "[::1]",
            "192.168.1.20:3000",
            "wallet.example.org",
            "wallet.example.org:443",
            &hostname,
            &format!("{hostname}.local:3000"),
            &format!("{}.LOCAL", hostname.to_uppercase()),
        ] {
            assert!(allowed.allows(host, Some(lan)), "{host}");
        }
        for host in [
            "evil.example.com",
            "evil.example.com:3000",
            "localhost.evil.example.com",
            "192.168.1.21:3000",
            "10.0.0.1",
            "[fe80::1]:3000",
            &format!("{hostname}.evil.example"),
            &format!("{hostname}.local.evil.example"),
            "",
            ":3000",
            "localhost:notaport",
            "[::1]x",
        ] {
            assert!(!allowed.allows(host, Some(lan)), "{host:?}");
        }
        // The address the connection came in on, in either form.
        let mapped: IpAddr = "::ffff:192.168.1.20".parse().expect("ip");
        assert!(allowed.allows("192.168.1.20", Some(mapped)));
        assert!(!allowed.allows("192.168.1.20", None));
    }
}

//! Browser sessions: a session is a device credential (`access::devices`, marked as a
//! console session), its token kept by the browser in an `HttpOnly; Secure;
//! SameSite=Strict` cookie, so page scripts cannot read it and other sites' pages never
//! send it. Every state-changing request must also come from a page of this origin
//! (`Origin`), against cross-site request forgery even where `SameSite` is not
//! honoured.
//!
//! The cookie's name has the `__Host-` prefix: a browser keeps it only as set by this
//! very host over TLS, for `/`, with no `Domain`, so a sibling host (another
//! `*.local` on the LAN) cannot plant one beside it ("cookie tossing"); a request that
//! still carries two is refused, never resolved by taking either. A session expires
//! ([`crate::access::devices::SessionPolicy`]), and its device goes with it; a cookie
//! naming no live session counts towards the address's auth-failure backoff, as a wrong
//! bearer token does ([`guard`]).
//!
//! The cookie is read by the console's routes only: the bearer API is unchanged and
//! never takes it (a cookie-authenticated API would need the same origin check on
//! every fund-moving call a script makes).

use std::time::Instant;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

pub use crate::net::listener::Scheme;

use crate::access::devices::{Authorized, Devices, SessionCheck};
use crate::api::AppState;

/// The cookie's name.
pub const COOKIE: &str = "__Host-berth_session";

/// The session cookies a request carries (the values).
fn session_cookies(headers: &HeaderMap) -> Vec<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then_some(value)
        })
        .collect()
}

/// The console session the request's cookie carries, if it is a live one. ([`guard`]
/// has already refused two cookies and removed a dead one.)
pub fn signed_in(headers: &HeaderMap, devices: &Devices) -> Option<Authorized> {
    match session_cookies(headers).as_slice() {
        [token] => match devices.check_session(token, Instant::now()) {
            SessionCheck::Valid(who) => Some(who),
            SessionCheck::Expired(_) | SessionCheck::Unknown => None,
        },
        _ => None,
    }
}

/// `Set-Cookie` for a new session holding `token`; the browser forgets it when the
/// session's longest life is over (`max_age`), and berthd ends it earlier when idle.
pub fn start(token: &str, max_age: std::time::Duration) -> HeaderValue {
    HeaderValue::from_str(&format!(
        "{COOKIE}={token}; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age={}",
        max_age.as_secs()
    ))
    .unwrap_or_else(|_| end())
}

/// `Set-Cookie` that ends the session in the browser.
pub fn end() -> HeaderValue {
    HeaderValue::from_static(
        "__Host-berth_session=; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=0",
    )
}

/// Before every console route: a request carrying two session cookies is refused
/// (400); one whose session expired loses it (its device is removed) and is served
/// signed out, told to forget the cookie; one naming no session counts as a failed
/// authentication of its address (429 once the address is blocked) and is served
/// signed out.
pub async fn guard(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let token = match session_cookies(request.headers()).as_slice() {
        [] => return next.run(request).await,
        [token] => (*token).to_owned(),
        _ => {
            let mut refused = (
                StatusCode::BAD_REQUEST,
                "This browser sent two session cookies for this box; one was planted by \
                 another site. Both are cleared: sign in again.",
            )
                .into_response();
            refused.headers_mut().insert(header::SET_COOKIE, end());
            return refused;
        }
    };
    let now = Instant::now();
    match state.devices.check_session(&token, now) {
        SessionCheck::Valid(_) => return next.run(request).await,
        SessionCheck::Expired(id) => {
            tracing::info!(target: "berth::console", device = %id, "a console session expired");
            if let Err(e) = state.enrolment().revoke(&id).await {
                tracing::warn!(target: "berth::console", device = %id, error = %e,
                    "cannot remove an expired console session");
            }
        }
        SessionCheck::Unknown => {
            if let Some(ip) = crate::api::auth::peer_ip(&request) {
                if let Err(secs) = state.failures.check(ip, now) {
                    return crate::api::error::ApiError::TooManyRequests(secs).into_response();
                }
                state.failures.failed(ip, now);
            }
        }
    }
    request.headers_mut().remove(header::COOKIE);
    let mut response = next.run(request).await;
    response.headers_mut().append(header::SET_COOKIE, end());
    response
}

/// How often expired console sessions are looked for and removed.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Remove the console sessions past their time every [`SWEEP_EVERY`], so that a
/// browser that never comes back leaves no credential behind (nor fills the device cap).
pub fn spawn_sweeper(state: AppState) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(SWEEP_EVERY).await;
            for id in state.devices.expired_sessions(Instant::now()) {
                match state.enrolment().revoke(&id).await {
                    Ok(()) => tracing::info!(target: "berth::console", device = %id,
                        "removed a console session past its time"),
                    Err(e) => tracing::warn!(target: "berth::console", device = %id,
                        error = %e, "cannot remove an expired console session"),
                }
            }
        }
    })
}

/// Whether a state-changing request comes from a page of this origin: its `Origin`
/// names the scheme the request came over (`scheme`: TLS or not, as the listener saw
/// the connection), and the host and port it was sent to (`Host`, or over HTTP/2 the
/// URI's authority, which the API's host check has already held against this
/// machine's names). A request without `Origin` is refused: every browser sends it
/// with a form's POST. The scheme matters: a plain-http page on the LAN (a spoofed
/// `.local` name, say) is another origin than the box's TLS console.
pub fn same_origin(headers: &HeaderMap, uri: &Uri, scheme: Scheme) -> bool {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| uri.authority().map(|a| a.as_str()));
    let (Some(origin), Some(host)) = (
        headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()),
        host,
    ) else {
        return false;
    };
    origin
        .strip_prefix(scheme.as_str())
        .and_then(|rest| rest.strip_prefix("://"))
        .is_some_and(|a| a.eq_ignore_ascii_case(host))
}

/// The scheme of the connection a request came over, for a handler's arguments: what
/// the listener put in the request (plain http when nothing did, as over the local
/// control socket).
impl<S: Send + Sync> FromRequestParts<S> for Scheme {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(scheme_of(&parts.extensions))
    }
}

/// The scheme the listener recorded in a request's `extensions` (plain http if none).
pub fn scheme_of(extensions: &axum::http::Extensions) -> Scheme {
    extensions.get::<Scheme>().copied().unwrap_or(Scheme::Http)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).expect("value"));
        }
        map
    }

    #[test]
    fn only_a_page_of_this_origin_may_change_anything() {
        let same = headers(&[
            ("origin", "https://berth-1a2b.local:3000"),
            ("host", "berth-1a2b.local:3000"),
        ]);
        let uri = Uri::from_static("/console/sign-in");
        assert!(same_origin(&same, &uri, Scheme::Https));
        // The same host over the other scheme is another origin (issue 39).
        assert!(!same_origin(&same, &uri, Scheme::Http));
        let plain = headers(&[
            ("origin", "http://127.0.0.1:3000"),
            ("host", "127.0.0.1:3000"),
        ]);
        assert!(same_origin(&plain, &uri, Scheme::Http));
        assert!(!same_origin(&plain, &uri, Scheme::Https));
        // HTTP/2: no Host header, the authority is in the URI.
        let h2 = headers(&[("origin", "https://berth-1a2b.local:3000")]);
        assert!(same_origin(
            &h2,
            &Uri::from_static("https://berth-1a2b.local:3000/console/sign-in"),
            Scheme::Https
        ));
        assert!(!same_origin(
            &h2,
            &Uri::from_static("https://evil.example/console/sign-in"),
            Scheme::Https
        ));
        for (origin, host) in [
            ("https://evil.example", "berth-1a2b.local:3000"),
            ("https://berth-1a2b.local:3001", "berth-1a2b.local:3000"),
            (
                "https://berth-1a2b.local:3000.evil.example",
                "berth-1a2b.local:3000",
            ),
            ("null", "berth-1a2b.local:3000"),
        ] {
            assert!(
                !same_origin(
                    &headers(&[("origin", origin), ("host", host)]),
                    &uri,
                    Scheme::Https
                ),
                "{origin}"
            );
        }
        assert!(
            !same_origin(
                &headers(&[("host", "berth-1a2b.local:3000")]),
                &uri,
                Scheme::Https
            ),
            "no Origin"
        );
    }

    #[test]
    fn the_cookie_is_out_of_scripts_reach_and_never_sent_cross_site() {
        let cookie = start("token123", std::time::Duration::from_secs(3600));
        let text = cookie.to_str().expect("ascii");
        for attribute in [
            "__Host-berth_session=token123",
            "Max-Age=3600",
            "HttpOnly",
            "Secure",
            "SameSite=Strict",
            "Path=/",
        ] {
            assert!(text.contains(attribute), "{text}");
        }
        assert!(end().to_str().expect("ascii").contains("Max-Age=0"));
    }
}

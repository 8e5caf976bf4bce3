//! Browser sessions: a session is a device credential (`access::devices`), its token
//! kept by the browser in an `HttpOnly; Secure; SameSite=Strict` cookie, so page
//! scripts cannot read it and other sites' pages never send it. Every state-changing
//! request must also come from a page of this origin (`Origin`), against cross-site
//! request forgery even where `SameSite` is not honoured.
//!
//! The cookie is read by the console's routes only: the bearer API is unchanged and
//! never takes it (a cookie-authenticated API would need the same origin check on
//! every fund-moving call a script makes).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Uri, header};

pub use crate::net::listener::Scheme;

use crate::access::devices::{Authorized, Devices};

/// The cookie's name.
pub const COOKIE: &str = "berth_session";

/// The device whose token the request's session cookie carries, if it is a valid one.
pub fn signed_in(headers: &HeaderMap, devices: &Devices) -> Option<Authorized> {
    let token = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then(|| value.to_owned())
        })?;
    devices.authenticate(&token)
}

/// `Set-Cookie` for a new session holding `token`. No `Max-Age`: the session lasts as
/// long as the device is not revoked (signing out revokes it).
pub fn start(token: &str) -> HeaderValue {
    HeaderValue::from_str(&format!(
        "{COOKIE}={token}; HttpOnly; Secure; SameSite=Strict; Path=/"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("berth_session=; Path=/"))
}

/// `Set-Cookie` that ends the session in the browser.
pub fn end() -> HeaderValue {
    HeaderValue::from_static("berth_session=; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=0")
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
        let cookie = start("token123");
        let text = cookie.to_str().expect("ascii");
        for attribute in [
            "berth_session=token123",
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

//! The console's route table: every page and form declared once, with who may use it
//! and whether it changes anything. The table, not each handler, applies the rules:
//!
//! - a form (a `POST`: it changes state) must come from a page of this origin
//!   ([`session::same_origin`]), whoever sends it, before anything else is looked at;
//! - a route for signed-in browsers needs a live session whose device has the route's
//!   scope: signed out, a page or form sends the browser to the sign-in page (303 to
//!   `/`) and the page's script gets 401; a device without the scope gets 403. The
//!   handler then receives the device as [`Signed`].
//!
//! So a new form cannot forget its cross-site check, and `tests/integration/console.rs` posts from
//! another site to every form in [`list`]. ([`session::guard`], before all of it, has
//! already refused two session cookies and dropped a dead one.)

use axum::Router;
use axum::extract::{FromRequestParts, Request, State};
use axum::handler::Handler;
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};

use super::{forbidden, see_other, session};
use crate::access::devices::Authorized;
use crate::access::scopes::Scope;
use crate::api::AppState;

/// Who may use a console route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone: the handler decides what to show (the claim or sign-in page, an asset)
    /// or checks a credential of its own (a sign-in code).
    Public,
    /// A signed-in browser whose device has the scope; signed out, the browser is sent
    /// to the sign-in page.
    Page(Scope),
    /// The same, for the page's own script: signed out is 401, not a redirect.
    Script(Scope),
}

/// One console route as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleRoute {
    pub method: Method,
    /// As routed, with `{name}` for a path parameter.
    pub path: &'static str,
    pub access: Access,
    /// A form post: it changes state, so it must come from a page of this origin.
    pub changes_state: bool,
}

/// What a route's check needs, in its middleware's state.
#[derive(Clone)]
struct Rule {
    state: AppState,
    access: Access,
    changes_state: bool,
}

/// Where the declarations go: into a router ([`Building`]) or a list ([`Listing`]).
pub(super) trait Declare: Sized {
    /// A page (`GET`): it changes nothing.
    fn page<H, T>(self, path: &'static str, access: Access, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static;
    /// A form or the script's call (`POST`): it changes state.
    fn form<H, T>(self, path: &'static str, access: Access, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static;
}

/// The console's routes as a router, each behind its rule.
pub(super) struct Building {
    router: Router<AppState>,
    state: AppState,
}

impl Building {
    pub(super) fn new(state: AppState) -> Building {
        Building {
            router: Router::new(),
            state,
        }
    }

    pub(super) fn into_router(self) -> Router<AppState> {
        self.router
    }

    fn add(
        mut self,
        path: &'static str,
        access: Access,
        changes_state: bool,
        method_router: MethodRouter<AppState>,
    ) -> Building {
        let rule = Rule {
            state: self.state.clone(),
            access,
            changes_state,
        };
        let checked =
            method_router.route_layer(axum::middleware::from_fn_with_state(rule, enforce));
        // A GET and a POST on one path are merged into one route by axum.
        self.router = self.router.route(path, checked);
        self
    }
}

impl Declare for Building {
    fn page<H, T>(self, path: &'static str, access: Access, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add(path, access, false, get(handler))
    }

    fn form<H, T>(self, path: &'static str, access: Access, handler: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.add(path, access, true, post(handler))
    }
}

/// The console's routes as a list (for tests and for whoever reviews them).
#[derive(Default)]
pub(super) struct Listing(Vec<ConsoleRoute>);

impl Listing {
    fn push(
        mut self,
        method: Method,
        path: &'static str,
        access: Access,
        changes_state: bool,
    ) -> Listing {
        self.0.push(ConsoleRoute {
            method,
            path,
            access,
            changes_state,
        });
        self
    }
}

impl Declare for Listing {
    fn page<H, T>(self, path: &'static str, access: Access, _: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.push(Method::GET, path, access, false)
    }

    fn form<H, T>(self, path: &'static str, access: Access, _: H) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        self.push(Method::POST, path, access, true)
    }
}

/// Every console route, as [`super::declare`] declares them.
pub fn list() -> Vec<ConsoleRoute> {
    super::declare(Listing::default()).0
}

/// A route's rule, before its handler.
async fn enforce(State(rule): State<Rule>, mut request: Request, next: Next) -> Response {
    if rule.changes_state
        && !session::same_origin(
            request.headers(),
            request.uri(),
            session::scheme_of(request.extensions()),
        )
    {
        return forbidden("a page of another site may not change anything on this box");
    }
    let (scope, signed_out) = match rule.access {
        Access::Public => return next.run(request).await,
        Access::Page(scope) => (scope, see_other("/", None)),
        Access::Script(scope) => (scope, StatusCode::UNAUTHORIZED.into_response()),
    };
    match session::signed_in(request.headers(), &rule.state.devices) {
        None => signed_out,
        Some(who) if !who.scopes.allows(scope) => forbidden(lacks(scope)),
        Some(who) => {
            request.extensions_mut().insert(Signed(who));
            next.run(request).await
        }
    }
}

/// Why a device without `scope` is refused.
fn lacks(scope: Scope) -> &'static str {
    match scope {
        Scope::Read => "this device may not see the wallet (it lacks the read scope)",
        Scope::Receive => "this device may not receive (it lacks the receive scope)",
        Scope::Send => "this device may not move funds (it lacks the send scope)",
        Scope::Admin => "this device may not administer the box (it lacks the admin scope)",
    }
}

/// The signed-in device a route's rule let through.
#[derive(Debug, Clone)]
pub(super) struct Signed(pub Authorized);

impl<S: Send + Sync> FromRequestParts<S> for Signed {
    type Rejection = StatusCode;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        // Missing only when a public route asks for it: a mistake in the table.
        parts
            .extensions
            .get::<Signed>()
            .cloned()
            .ok_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_post_changes_state_and_every_route_is_declared_once() {
        let routes = list();
        assert!(routes.len() > 20, "{routes:?}");
        for route in &routes {
            assert_eq!(
                route.changes_state,
                route.method == Method::POST,
                "{route:?}"
            );
            let same = routes
                .iter()
                .filter(|r| r.path == route.path && r.method == route.method)
                .count();
            assert_eq!(same, 1, "{route:?} declared {same} times");
        }
        // What only an admin may do: every route under these prefixes.
        for route in &routes {
            if [
                "/console/devices",
                "/console/pairing",
                "/console/wallet",
                "/console/settings",
                "/console/unlock",
            ]
            .iter()
            .any(|p| route.path.starts_with(p))
            {
                assert_eq!(route.access, Access::Page(Scope::Admin), "{route:?}");
            }
        }
    }
}

//! The route table: every operation is declared once, next to its handler in its
//! group's file, with who may call it.
//!
//! A group's `routes(Routes) -> Routes` adds each of its handlers with the access it
//! needs: a scope (`read`, `receive`, `send`, `admin`), `moves_funds` (the `send`
//! scope, and the route takes an `Idempotency-Key`), or `public` (no bearer token: the
//! route checks its own credential, or needs none). The method and path come from the
//! handler's own `#[utoipa::path]`, which `routes!` also puts in the OpenAPI document,
//! so the path is written once, the access once, and a served operation cannot go
//! undocumented or unclassified.
//!
//! What the declarations build:
//! - the routers: the protected one (behind the bearer check) and the public one;
//! - the [`RouteTable`] that the scope check (`api::scopes`), the idempotency layer
//!   (`api::idempotency`) and the document's `Idempotency-Key` parameters read.

use axum::http::Method;
use utoipa::openapi::path::PathItem;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};

use crate::access::scopes::Scope;
use crate::api::AppState;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No bearer token: the route checks a credential of its own (a websocket ticket,
    /// a pairing code) or needs none.
    Public,
    /// A bearer credential that grants `scope`. `moves_funds`: the route takes an
    /// `Idempotency-Key`.
    Scoped { scope: Scope, moves_funds: bool },
}

/// One operation: its method, its path as routed (with the `/api/v1` prefix, and
/// `{name}` for path parameters) and who may call it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub method: Method,
    pub path: String,
    pub access: Access,
}

/// Every operation of the API, from the routes' declarations.
#[derive(Debug, Clone, Default)]
pub struct RouteTable {
    routes: Vec<Route>,
}

impl RouteTable {
    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter()
    }

    fn find(&self, method: &Method, path: &str) -> Option<&Route> {
        self.routes
            .iter()
            .find(|r| r.path == path && r.method == method)
    }

    /// The scope a route needs; `None` for a public route and for one not in the table.
    pub fn scope(&self, method: &Method, path: &str) -> Option<Scope> {
        match self.find(method, path)?.access {
            Access::Scoped { scope, .. } => Some(scope),
            Access::Public => None,
        }
    }

    /// Whether a route moves funds (and takes an `Idempotency-Key`).
    pub fn moves_funds(&self, method: &Method, path: &str) -> bool {
        self.find(method, path).is_some_and(|r| {
            matches!(
                r.access,
                Access::Scoped {
                    moves_funds: true,
                    ..
                }
            )
        })
    }

    /// The routes that move funds.
    pub fn fund_moving(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter().filter(|r| {
            matches!(
                r.access,
                Access::Scoped {
                    moves_funds: true,
                    ..
                }
            )
        })
    }
}

/// Routes being declared: the two routers and the table, built together.
pub struct Routes {
    protected: OpenApiRouter<AppState>,
    public: OpenApiRouter<AppState>,
    table: Vec<Route>,
}

/// The routers and the table, once every route is declared.
pub struct Declared {
    /// Routes behind the bearer check (and the scope check).
    pub protected: OpenApiRouter<AppState>,
    /// Routes with a credential of their own, or none.
    pub public: OpenApiRouter<AppState>,
    pub table: RouteTable,
}

impl Default for Routes {
    fn default() -> Self {
        Self::new()
    }
}

impl Routes {
    pub fn new() -> Routes {
        Routes {
            protected: OpenApiRouter::new(),
            public: OpenApiRouter::new(),
            table: Vec::new(),
        }
    }

    /// A route for credentials with the `read` scope.
    pub fn read(self, route: UtoipaMethodRouter<AppState>) -> Routes {
        self.add(route, scoped(Scope::Read))
    }

    /// A route for credentials with the `receive` scope.
    pub fn receive(self, route: UtoipaMethodRouter<AppState>) -> Routes {
        self.add(route, scoped(Scope::Receive))
    }

    /// A route for credentials with the `send` scope.
    pub fn send(self, route: UtoipaMethodRouter<AppState>) -> Routes {
        self.add(route, scoped(Scope::Send))
    }

    /// A route that moves funds: the `send` scope, and an `Idempotency-Key`.
    pub fn moves_funds(self, route: UtoipaMethodRouter<AppState>) -> Routes {
        self.add(
            route,
            Access::Scoped {
                scope: Scope::Send,
                moves_funds: true,
            },
        )
    }

    /// A route for full (admin) credentials.
    pub fn admin(self, route: UtoipaMethodRouter<AppState>) -> Routes {
        self.add(route, scoped(Scope::Admin))
    }

    /// A route without the bearer check.
    pub fn public(self, route: UtoipaMethodRouter<AppState>) -> Routes {
        self.add(route, Access::Public)
    }

    fn add(mut self, route: UtoipaMethodRouter<AppState>, access: Access) -> Routes {
        for (path, item) in &route.1.paths {
            for method in methods(item) {
                self.table.push(Route {
                    method,
                    path: path.clone(),
                    access,
                });
            }
        }
        match access {
            Access::Public => self.public = self.public.routes(route),
            Access::Scoped { .. } => self.protected = self.protected.routes(route),
        }
        self
    }

    /// `inner`'s routes under `prefix` (such as `/api/v1`).
    pub fn nest(mut self, prefix: &str, inner: Routes) -> Routes {
        self.protected = self.protected.nest(prefix, inner.protected);
        self.public = self.public.nest(prefix, inner.public);
        self.table
            .extend(inner.table.into_iter().map(|route| Route {
                path: format!("{prefix}{}", route.path),
                ..route
            }));
        self
    }

    pub fn declared(self) -> Declared {
        Declared {
            protected: self.protected,
            public: self.public,
            table: RouteTable { routes: self.table },
        }
    }
}

fn scoped(scope: Scope) -> Access {
    Access::Scoped {
        scope,
        moves_funds: false,
    }
}

/// The methods a documented path item has operations for.
fn methods(item: &PathItem) -> Vec<Method> {
    [
        (&item.get, Method::GET),
        (&item.post, Method::POST),
        (&item.put, Method::PUT),
        (&item.delete, Method::DELETE),
        (&item.patch, Method::PATCH),
    ]
    .into_iter()
    .filter(|(op, _)| op.is_some())
    .map(|(_, method)| method)
    .collect()
}

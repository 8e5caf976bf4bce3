//! The route table: every operation is declared once, next to its handler in its
//! group's file, with who may call it.
//!
//! A group's `routes(Routes<D>) -> Routes<D>` adds each of its handlers, named with
//! [`route!`], with the access it needs: a scope (`read`, `receive`, `send`, `admin`),
//! `moves_funds` (the `send` scope, and the route takes an `Idempotency-Key`), or
//! `public` (no bearer token: the route checks its own credential, or needs none). The
//! method and path come from the handler's own `#[utoipa::path]`, which also documents
//! it, so the path is written once, the access once, and a served operation cannot go
//! undocumented or unclassified.
//!
//! What the declarations build:
//! - the routers: the protected one (behind the bearer check) and the public one;
//! - the [`RouteTable`] that the scope check (`api::scopes`), the idempotency layer
//!   (`api::idempotency`) and the document's `Idempotency-Key` parameters read;
//! - the OpenAPI document, only when declaring for it ([`Documenting`], then
//!   [`Declared::documented`]): describing every operation and its schemas costs more
//!   than all the rest of a start, and serving needs none of it. Declaring to serve
//!   ([`Serving`]) drops each route's description unused, so the code that describes it
//!   is never compiled into berthd (1.87 MB of it; berthd serves the checked-in
//!   document, `build.rs`).

use axum::Router;
use axum::http::Method;
use axum::routing::MethodRouter;
use utoipa::openapi::HttpMethod;
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

/// One handler as [`route!`] declares it: what serving needs (its path, methods and
/// router, all cheap to make) and how to document it (`document`, called only for the
/// document; a closure of its own type, so that code exists only where it is kept).
pub struct Declaration<F> {
    path: String,
    methods: Vec<HttpMethod>,
    router: MethodRouter<AppState>,
    document: F,
}

impl<F: Describe> Declaration<F> {
    #[doc(hidden)]
    pub fn new(
        path: String,
        methods: Vec<HttpMethod>,
        router: MethodRouter<AppState>,
        document: F,
    ) -> Declaration<F> {
        Declaration {
            path,
            methods,
            router,
            document,
        }
    }
}

/// Declare a handler for [`Routes`]: `route!(module::handler)`. The handler carries a
/// `#[utoipa::path]`; its path and methods are read from that, and its operation and
/// schemas (`utoipa_axum::routes!`) are built only when the OpenAPI document is made.
macro_rules! route {
    ($first:ident $(:: $rest:ident)*) => {
        $crate::api::routes::route!(@split [] $first $($rest)*)
    };
    // The handler is the last name; the names before it are its module path.
    (@split [$($module:ident)*] $handler:ident) => {{
        use utoipa_axum::PathItemExt as _;
        let (path, methods) = utoipa_axum::paste! {(
            <$($module ::)* [<__path_ $handler>] as utoipa::Path>::path(),
            <$($module ::)* [<__path_ $handler>] as utoipa::Path>::methods(),
        )};
        let router = methods
            .iter()
            .fold(axum::routing::MethodRouter::new(), |router, method| {
                router.on(method.to_method_filter(), $($module ::)* $handler)
            });
        $crate::api::routes::Declaration::new(path, methods, router, || {
            utoipa_axum::routes!($($module ::)* $handler)
        })
    }};
    (@split [$($module:ident)*] $head:ident $($tail:ident)+) => {
        $crate::api::routes::route!(@split [$($module)* $head] $($tail)+)
    };
}
pub(crate) use route;

/// How a route is described for the OpenAPI document (what [`route!`] makes).
pub trait Describe: Fn() -> UtoipaMethodRouter<AppState> + 'static {}
impl<F: Fn() -> UtoipaMethodRouter<AppState> + 'static> Describe for F {}

/// What declaring routes keeps of their descriptions: nothing ([`Serving`]) or the
/// steps that make the OpenAPI document ([`Documenting`]). Chosen by type, so a
/// declaration to serve never names the describing code.
pub trait Documentation: Default {
    fn route(&mut self, access: Access, describe: impl Describe);
    fn nest(&mut self, prefix: &str, inner: Self);
}

/// Declaring to serve: descriptions are dropped.
#[derive(Debug, Default)]
pub struct Serving;

impl Documentation for Serving {
    fn route(&mut self, _access: Access, _describe: impl Describe) {}
    fn nest(&mut self, _prefix: &str, _inner: Self) {}
}

/// Declaring for the OpenAPI document: the declarations' steps, replayed in order by
/// [`Declared::documented`] the way `utoipa_axum`'s routers make it.
#[derive(Default)]
pub struct Documenting {
    steps: Vec<Step>,
}

enum Step {
    Route(Access, Box<dyn Describe>),
    Nest(String, Vec<Step>),
}

impl Documentation for Documenting {
    fn route(&mut self, access: Access, describe: impl Describe) {
        self.steps.push(Step::Route(access, Box::new(describe)));
    }

    fn nest(&mut self, prefix: &str, inner: Self) {
        self.steps.push(Step::Nest(prefix.to_owned(), inner.steps));
    }
}

/// Routes being declared: the two routers and the table, built together, and what
/// `D` keeps of their descriptions.
pub struct Routes<D> {
    protected: Router<AppState>,
    public: Router<AppState>,
    table: Vec<Route>,
    document: D,
}

/// The routers and the table, once every route is declared.
pub struct Declared<D> {
    /// Routes behind the bearer check (and the scope check).
    pub protected: Router<AppState>,
    /// Routes with a credential of their own, or none.
    pub public: Router<AppState>,
    pub table: RouteTable,
    document: D,
}

impl Declared<Documenting> {
    /// The routes described for the OpenAPI document: the protected ones and the public
    /// ones, as `utoipa_axum` routers (their paths and components).
    pub fn documented(self) -> (OpenApiRouter<AppState>, OpenApiRouter<AppState>) {
        fn replay(steps: Vec<Step>) -> (OpenApiRouter<AppState>, OpenApiRouter<AppState>) {
            let (mut protected, mut public) = (OpenApiRouter::new(), OpenApiRouter::new());
            for step in steps {
                match step {
                    Step::Route(Access::Public, describe) => {
                        public = public.routes(describe());
                    }
                    Step::Route(Access::Scoped { .. }, describe) => {
                        protected = protected.routes(describe());
                    }
                    Step::Nest(prefix, inner) => {
                        let (inner_protected, inner_public) = replay(inner);
                        protected = protected.nest(&prefix, inner_protected);
                        public = public.nest(&prefix, inner_public);
                    }
                }
            }
            (protected, public)
        }
        replay(self.document.steps)
    }
}

impl<D: Documentation> Default for Routes<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: Documentation> Routes<D> {
    pub fn new() -> Routes<D> {
        Routes {
            protected: Router::new(),
            public: Router::new(),
            table: Vec::new(),
            document: D::default(),
        }
    }

    /// A route for credentials with the `read` scope.
    pub fn read(self, route: Declaration<impl Describe>) -> Routes<D> {
        self.add(route, scoped(Scope::Read))
    }

    /// A route for credentials with the `receive` scope.
    pub fn receive(self, route: Declaration<impl Describe>) -> Routes<D> {
        self.add(route, scoped(Scope::Receive))
    }

    /// A route for credentials with the `send` scope.
    pub fn send(self, route: Declaration<impl Describe>) -> Routes<D> {
        self.add(route, scoped(Scope::Send))
    }

    /// A route that moves funds: the `send` scope, and an `Idempotency-Key`.
    pub fn moves_funds(self, route: Declaration<impl Describe>) -> Routes<D> {
        self.add(
            route,
            Access::Scoped {
                scope: Scope::Send,
                moves_funds: true,
            },
        )
    }

    /// A route for full (admin) credentials.
    pub fn admin(self, route: Declaration<impl Describe>) -> Routes<D> {
        self.add(route, scoped(Scope::Admin))
    }

    /// A route without the bearer check.
    pub fn public(self, route: Declaration<impl Describe>) -> Routes<D> {
        self.add(route, Access::Public)
    }

    fn add(mut self, route: Declaration<impl Describe>, access: Access) -> Routes<D> {
        for method in &route.methods {
            self.table.push(Route {
                method: method_of(method),
                path: route.path.clone(),
                access,
            });
        }
        // As `utoipa_axum` routes a documented handler.
        let path = if route.path.is_empty() {
            "/"
        } else {
            &route.path
        };
        match access {
            Access::Public => self.public = self.public.route(path, route.router),
            Access::Scoped { .. } => self.protected = self.protected.route(path, route.router),
        }
        self.document.route(access, route.document);
        self
    }

    /// `inner`'s routes under `prefix` (such as `/api/v1`).
    pub fn nest(mut self, prefix: &str, inner: Routes<D>) -> Routes<D> {
        self.protected = self.protected.nest(prefix, inner.protected);
        self.public = self.public.nest(prefix, inner.public);
        self.table
            .extend(inner.table.into_iter().map(|route| Route {
                path: format!("{prefix}{}", route.path),
                ..route
            }));
        self.document.nest(prefix, inner.document);
        self
    }

    pub fn declared(self) -> Declared<D> {
        Declared {
            protected: self.protected,
            public: self.public,
            table: RouteTable { routes: self.table },
            document: self.document,
        }
    }
}

fn scoped(scope: Scope) -> Access {
    Access::Scoped {
        scope,
        moves_funds: false,
    }
}

/// The HTTP method of a documented operation.
fn method_of(method: &HttpMethod) -> Method {
    match method {
        HttpMethod::Get => Method::GET,
        HttpMethod::Post => Method::POST,
        HttpMethod::Put => Method::PUT,
        HttpMethod::Delete => Method::DELETE,
        HttpMethod::Options => Method::OPTIONS,
        HttpMethod::Head => Method::HEAD,
        HttpMethod::Patch => Method::PATCH,
        HttpMethod::Trace => Method::TRACE,
    }
}

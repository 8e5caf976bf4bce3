//! Berth's OpenAPI document, generated from the handlers' own annotations.
//!
//! Each documented route is registered together with its description (`routes!` in
//! its group's declarations, `api::routes`), so a served operation cannot go
//! undocumented. The document is checked in as `docs/openapi.json`, which berthd serves at
//! `/api-docs/openapi.json` (build.rs compresses it into the binary, so this code is not in
//! the daemon at all); `tests/integration/openapi.rs` proves the copy current and compares
//! it with barkd's 0.6.0 document under the rules of `docs/barkd-compatibility.md`.

use utoipa::Modify;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{RefOr, ResponseBuilder};

const DESCRIPTION: &str = "\
berthd: a self-custodial bitcoin wallet daemon for a home appliance. It serves the barkd REST API \
(Ark, Lightning and on-chain payments) so clients written for barkd work against it.

All endpoints but `/ping`, this document, `/api/v1/pair` and the notifications websocket need \
`Authorization: Bearer <token>`: the datadir's `auth_token` (full access) or a device token from \
pairing, limited to its scopes (`read`, `receive`, `send`, `admin`). All bodies are JSON and amounts \
are in satoshis. Errors are `{\"message\", \"code\"}`; 400 means malformed input, 401 a missing or \
wrong token, 403 a device token without the scope the endpoint needs (`forbidden`) or a payment \
its spending rules refuse (`spending_rule`), 404 an unknown path or id, \
413 a body over the size limit, 422 a request the wallet's state forbids (for example, before a \
wallet exists), 429 too many failed authentications from the caller's address (see \
`Retry-After`), 503 an unreachable Ark server or chain source (or a wallet database that stopped \
after a storage failure, while berthd restarts), 507 a change refused because the disk under the \
datadir is nearly full (nothing was changed; reads go on), 500 a genuine internal failure.

The wallet is usable the moment `POST /api/v1/wallet/create` returns. After a restart, a request \
that needs the wallet while it is being opened waits for that (at most 20 seconds) instead of \
failing; only while its chain source is really unreachable is the answer 503 \"the wallet is not \
loaded yet\".";

#[derive(OpenApi)]
#[openapi(
    info(title = "berthd REST API", description = DESCRIPTION),
    security(("bearer" = [])),
    components(schemas(
        crate::api::error::ErrorResponse,
        crate::api::error::NotFoundResponse,
        crate::api::v1::notifications::AlertNotification,
        crate::api::approvals::AwaitingApproval
    )),
    tags(
        (name = "wallet", description = "Create, inspect and delete the wallet; Ark balance, VTXOs and payments."),
        (name = "onchain", description = "The wallet's own on-chain funds."),
        (name = "boards", description = "Move on-chain funds into Ark."),
        (name = "history", description = "The wallet's movements of funds."),
        (name = "message", description = "Sign messages with the wallet's keys; verify signatures."),
        (name = "fees", description = "What operations cost, before doing them."),
        (name = "exits", description = "Unilateral exits: moving VTXOs on-chain without the server."),
        (name = "bitcoin", description = "Facts about the chain."),
        (name = "notifications", description = "Wallet events as they happen: long-poll, websocket, Server-Sent Events."),
        (name = "devices", description = "Paired devices and their scoped tokens (Berth extension)."),
        (name = "approvals", description = "Payments held for the owner's approval by a device's spending rules (Berth extension)."),
        (name = "backups", description = "Encrypted, verified backups of the whole wallet state (Berth extension)."),
        (name = "nwc", description = "Nostr Wallet Connect: apps reach the wallet over Nostr relays, each connection with its own limits (Berth extension)."),
        (name = "webhooks", description = "Signed webhooks: the wallet's events POSTed to URLs the owner registers, from the durable event log (Berth extension)."),
        (name = "health", description = "Whether the appliance can keep its promises, and its metrics (Berth extension)."),
    )
)]
pub struct ApiDoc;

/// What is added once every route is in the document (a modifier on `ApiDoc` itself
/// would run before the routes are merged in, and see no operations).
pub fn finish(openapi: &mut utoipa::openapi::OpenApi, table: &crate::api::routes::RouteTable) {
    BearerAuth(table).modify(openapi);
    IdempotencyKeys(table).modify(openapi);
    HeldForApproval(table).modify(openapi);
    BodyLimit.modify(openapi);
    HostCheck.modify(openapi);
    DiskReserve.modify(openapi);
}

/// The documented operation of a route in the table, if there is one.
fn operation_mut<'a>(
    openapi: &'a mut utoipa::openapi::OpenApi,
    route: &crate::api::routes::Route,
) -> Option<&'a mut utoipa::openapi::path::Operation> {
    use axum::http::Method;
    let item = openapi.paths.paths.get_mut(&route.path)?;
    let op = match route.method {
        Method::GET => &mut item.get,
        Method::POST => &mut item.post,
        Method::PUT => &mut item.put,
        Method::DELETE => &mut item.delete,
        Method::PATCH => &mut item.patch,
        _ => return None,
    };
    op.as_mut()
}

/// Every operation of the document.
fn operations_mut(
    openapi: &mut utoipa::openapi::OpenApi,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    openapi.paths.paths.values_mut().flat_map(|item| {
        [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.delete,
            &mut item.patch,
        ]
        .into_iter()
        .flatten()
    })
}

/// Document `status` on `op`: a response of its own saying `alone`, or `joined`
/// added to the description the handler already gives that status.
fn add_or_join(op: &mut utoipa::openapi::path::Operation, status: &str, alone: &str, joined: &str) {
    match op.responses.responses.get_mut(status) {
        Some(RefOr::T(response)) => {
            response.description = format!("{}, or {joined}", response.description);
        }
        // A shared response (none is declared for these statuses) is left as it is.
        Some(RefOr::Ref(_)) => {}
        None => {
            op.responses
                .responses
                .insert(status.into(), RefOr::T(error_response(alone)));
        }
    }
}

/// A reference to a response declared under `components/responses`.
fn response_ref(name: &str) -> RefOr<utoipa::openapi::Response> {
    RefOr::Ref(utoipa::openapi::Ref::new(format!(
        "#/components/responses/{name}"
    )))
}

/// A documented error answer: `ErrorResponse` as JSON.
fn error_response(description: &str) -> utoipa::openapi::Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            utoipa::openapi::ContentBuilder::new()
                .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                    "ErrorResponse",
                ))))
                .build(),
        )
        .build()
}

/// Declares the bearer scheme and adds the 401, 403 and 429 that the bearer check
/// answers to every operation behind it (`Access::Scoped` in the route table, `/metrics`
/// included), so handlers do not each repeat them. Public operations (`security(())`)
/// check a credential of their own, or none, and document their own answers.
struct BearerAuth<'a>(&'a crate::api::routes::RouteTable);

impl Modify for BearerAuth<'_> {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use crate::api::routes::Access;
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(
                    HttpBuilder::new()
                        .scheme(HttpAuthScheme::Bearer)
                        .bearer_format("AuthToken")
                        .description(Some(
                            "The datadir's auth_token: base64url of 0x00 and 32 random bytes",
                        ))
                        .build(),
                ),
            );
        // Declared once under components/responses and referenced by every operation.
        let shared = [
            (
                "401",
                "Unauthorized",
                "Missing, duplicated or wrong bearer token",
            ),
            (
                "403",
                "Forbidden",
                "A device token without the scope this operation needs",
            ),
            (
                "429",
                "TooManyFailures",
                "Too many failed authentications from this address; retry after `Retry-After` seconds",
            ),
        ];
        // A route that moves funds also answers 403 when a spending rule of the device
        // refuses the payment (`engine::spending`).
        const REFUSED: (&str, &str) = (
            "ForbiddenOrRefused",
            "A device token without the scope this operation needs (`code` `forbidden`), or, \
             for a payment, a spending rule of the device that refuses it (`code` \
             `spending_rule`; the message names the rule and what is left)",
        );
        let components = openapi.components.get_or_insert_with(Default::default);
        for (_, name, description) in shared.iter().chain([&("403", REFUSED.0, REFUSED.1)]) {
            components
                .responses
                .insert(name.to_string(), RefOr::T(error_response(description)));
        }
        for route in self.0.iter() {
            if route.access == Access::Public {
                continue;
            }
            let moves_funds = matches!(
                route.access,
                Access::Scoped {
                    moves_funds: true,
                    ..
                }
            );
            let Some(op) = operation_mut(openapi, route) else {
                continue;
            };
            for (status, name, _) in shared {
                let name = if status == "403" && moves_funds {
                    REFUSED.0
                } else {
                    name
                };
                op.responses
                    .responses
                    .entry(status.to_string())
                    .or_insert_with(|| response_ref(name));
            }
        }
    }
}

/// Adds the 413 of the body size limit (`api::limits`, `[server] max_body_kib`) to
/// every operation that takes a body.
struct BodyLimit;

impl Modify for BodyLimit {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.responses.insert(
            "PayloadTooLarge".into(),
            RefOr::T(error_response(
                "The request body is larger than the limit (`[server] max_body_kib`)",
            )),
        );
        for op in operations_mut(openapi) {
            if op.request_body.is_some() {
                op.responses
                    .responses
                    .entry("413".into())
                    .or_insert_with(|| response_ref("PayloadTooLarge"));
            }
        }
    }
}

/// Adds the 507 of the disk reserve (`api::disk`) to every operation it can refuse.
struct DiskReserve;

impl Modify for DiskReserve {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use axum::http::Method;
        let components = openapi.components.get_or_insert_with(Default::default);
        components.responses.insert(
            "InsufficientStorage".into(),
            RefOr::T(error_response(
                "The disk under the datadir is nearly full: nothing was changed (reads go on)",
            )),
        );
        for (path, item) in openapi.paths.paths.iter_mut() {
            for (method, op) in [
                (Method::POST, &mut item.post),
                (Method::PUT, &mut item.put),
                (Method::PATCH, &mut item.patch),
            ] {
                if let Some(op) = op
                    && !crate::api::disk::exempt(&method, path)
                {
                    op.responses
                        .responses
                        .entry("507".into())
                        .or_insert_with(|| response_ref("InsufficientStorage"));
                }
            }
        }
    }
}

/// Adds the 421 of the `Host` check (`api::host`), the outermost layer, to every
/// operation.
struct HostCheck;

impl Modify for HostCheck {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.responses.insert(
            "MisdirectedRequest".into(),
            RefOr::T(error_response(
                "`Host` names something other than this machine (its names and addresses, or \
                 `[server] allowed_hosts`)",
            )),
        );
        for op in operations_mut(openapi) {
            op.responses
                .responses
                .entry("421".into())
                .or_insert_with(|| response_ref("MisdirectedRequest"));
        }
    }
}

/// Documents `Idempotency-Key` on the operations declared as moving funds
/// (`crate::api::routes`).
struct IdempotencyKeys<'a>(&'a crate::api::routes::RouteTable);

impl Modify for IdempotencyKeys<'_> {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
        let parameter = ParameterBuilder::new()
            .name("Idempotency-Key")
            .parameter_in(ParameterIn::Header)
            .required(utoipa::openapi::Required::False)
            .description(Some(
                "Berth extension: 1 to 255 visible ASCII characters. A success is replayed for \
                 24 hours to a request with the same key and body (with `Idempotent-Replayed: \
                 true`), without running it again; a failure frees the key.",
            ))
            .schema(Some(
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String),
            ))
            .build();
        for route in self.0.fund_moving() {
            let Some(op) = operation_mut(openapi, route) else {
                continue;
            };
            op.parameters
                .get_or_insert_with(Vec::new)
                .push(parameter.clone());
            // What the idempotency layer answers before (or instead of) the handler.
            for (status, alone, joined) in [
                (
                    "400",
                    "A malformed Idempotency-Key",
                    "a malformed Idempotency-Key",
                ),
                (
                    "409",
                    "A request with this Idempotency-Key is still running, or was cut short by a restart",
                    "a request with this Idempotency-Key is still running or was cut short by a restart",
                ),
                (
                    "422",
                    "This Idempotency-Key was used for a different request",
                    "this Idempotency-Key was used for a different request",
                ),
            ] {
                add_or_join(op, status, alone, joined);
            }
        }
    }
}

/// A fund-moving request of a device whose spending rules hold payments over a limit
/// for the owner's approval is answered 202 `AwaitingApproval` (`api::approvals`); a
/// rule's refusal is a 403 with `code` `spending_rule`.
struct HeldForApproval<'a>(&'a crate::api::routes::RouteTable);

impl Modify for HeldForApproval<'_> {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        const HELD: &str = "held for the owner's approval (Berth extension: a device whose \
            spending rules say `over_limit: approve`, over a limit): `AwaitingApproval`";
        let held = ResponseBuilder::new()
            .description(format!("Payment {HELD}"))
            .content(
                "application/json",
                utoipa::openapi::ContentBuilder::new()
                    .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                        "AwaitingApproval",
                    ))))
                    .build(),
            )
            .build();
        for route in self.0.fund_moving() {
            let Some(op) = operation_mut(openapi, route) else {
                continue;
            };
            match op.responses.responses.get_mut("202") {
                Some(RefOr::T(response)) => {
                    response.description = format!("{}, or {HELD}", response.description);
                }
                Some(RefOr::Ref(_)) => {}
                None => {
                    op.responses
                        .responses
                        .insert("202".into(), RefOr::T(held.clone()));
                }
            }
            add_or_join(
                op,
                "403",
                "A spending rule of the caller's device refuses the payment (`code` `spending_rule`)",
                "a spending rule of the caller's device refuses the payment (`code` `spending_rule`)",
            );
        }
    }
}

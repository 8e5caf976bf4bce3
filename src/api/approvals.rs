//! Payments held for the owner's approval, on the REST API (`engine::spending::approvals`
//! decides; this runs requests).
//!
//! - [`layer`], over every route that moves funds, keeps the request as it came. When
//!   the engine says the payment needs approval ([`ApiError::NeedsApproval`]), it holds
//!   the request with the engine and answers `202 {"status": "awaiting-approval",
//!   "approval_id", "message"}`. It runs inside the idempotency layer, so a retry with
//!   the same `Idempotency-Key` gets the 202 again.
//! - [`Runner`] runs an approved request once more, unchanged, as the device that made
//!   it (its scopes as they are now), through the same routes and layers but the bearer
//!   check, with the approval on the caller so the engine lets that payment through
//!   once. Its answer is recorded on the approval and, when the request had an
//!   `Idempotency-Key`, becomes that key's answer: a retry then gets the final answer.
//!   A denied or expired approval's key answers 403 the same way.
//! - The runner's task expires approvals on time, and at start runs the ones approved
//!   before a stop (and marks those a stop cut short in the middle of their payment:
//!   their outcome is unknown).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::access::{Caller, Credential};
use crate::api::error::{ApiError, ErrorResponse, NeedsApproval};
use crate::api::idempotency;
use crate::api::routes::RouteTable;
use crate::engine::Engine;
use crate::engine::spending::approvals::Approval;
use crate::store::approvals::{HeldAnswerRecord, HeldRequestRecord};
use crate::store::idempotency::IdempotencyKeys;

/// Largest request body kept (these requests are small JSON objects).
const MAX_REQUEST: usize = 64 * 1024;
/// Largest answer recorded.
const MAX_ANSWER: usize = 64 * 1024;
/// The longest the expiry task sleeps.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// The answer to a request held for approval (202).
#[derive(Debug, Serialize, ToSchema)]
pub struct AwaitingApproval {
    /// `awaiting-approval`.
    pub status: String,
    /// The approval's id (`GET /api/v1/approvals`; the `approval-updated` events).
    pub approval_id: String,
    /// The rule the payment is over, and that it waits.
    pub message: String,
}

/// Where a request pays to, for the owner to read: the body's destination field.
fn destination(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    ["destination", "address", "invoice"]
        .iter()
        .find_map(|field| value.get(field)?.as_str().map(str::to_string))
        .map(|d| d.chars().take(512).collect())
}

/// The route layer over the routes that move funds.
pub async fn layer(
    State((runner, table)): State<(Arc<Runner>, Arc<RouteTable>)>,
    request: Request,
    next: Next,
) -> Response {
    let moves_funds = request
        .extensions()
        .get::<MatchedPath>()
        .is_some_and(|path| table.moves_funds(request.method(), path.as_str()));
    let caller = request.extensions().get::<Caller>().cloned();
    // Only a device's own request can be held: the admin has no rules, and a run of
    // an approved one is never held again.
    let Some(caller) = caller.filter(|c| {
        moves_funds && c.approval.is_none() && matches!(c.credential, Credential::Device(_))
    }) else {
        return next.run(request).await;
    };
    let key = request
        .headers()
        .get(idempotency::HEADER)
        .and_then(|k| k.to_str().ok())
        .map(|k| idempotency::key_hash(&caller.credential, k));
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_REQUEST).await else {
        return ApiError::PayloadTooLarge.into_response();
    };
    let held = HeldRequestRecord {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_string(), ToString::to_string),
        body: String::from_utf8_lossy(&bytes).into_owned(),
        idempotency_key: key,
        nwc_key: None,
    };
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    let Some(NeedsApproval(asked)) = response.extensions().get::<NeedsApproval>().cloned() else {
        return response;
    };
    match runner
        .engine
        .approvals()
        .hold(*asked, destination(&bytes), held)
        .await
    {
        Ok(approval) => (
            StatusCode::ACCEPTED,
            axum::Json(AwaitingApproval {
                status: "awaiting-approval".into(),
                message: approval.message(),
                approval_id: approval.id,
            }),
        )
            .into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// Runs approved requests again, expires the others (see the module's comment).
pub struct Runner {
    engine: Arc<Engine>,
    devices: Arc<crate::access::devices::Devices>,
    keys: IdempotencyKeys,
    /// The routes behind the bearer check, with their route layers; set once the
    /// router is built, let go when the daemon stops ([`Runner::release_routes`]):
    /// they hold the API's state, which holds this runner, and that cycle would keep
    /// the wallet database open past the end, so that every start repaired it.
    routes: Mutex<Option<Router>>,
    /// Runs (and ends) the approvals of Nostr Wallet Connect payments.
    nwc: Arc<crate::nwc::Nwc>,
}

impl Runner {
    pub fn new(
        engine: Arc<Engine>,
        devices: Arc<crate::access::devices::Devices>,
        keys: IdempotencyKeys,
        nwc: Arc<crate::nwc::Nwc>,
    ) -> Arc<Runner> {
        Arc::new(Runner {
            engine,
            devices,
            keys,
            routes: Mutex::new(None),
            nwc,
        })
    }

    /// The routes approved requests run through (set by `api::router`).
    pub fn set_routes(&self, routes: Router) {
        *self.routes.lock().unwrap_or_else(|e| e.into_inner()) = Some(routes);
    }

    /// Let the routes go (the daemon is stopping): what they hold, the wallet
    /// database among it, can then be closed. A request run after this is refused.
    pub fn release_routes(&self) {
        self.routes.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    fn routes(&self) -> Option<Router> {
        self.routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Run approval `approval`'s request, once, and record its answer.
    pub async fn run(&self, approval: &Approval) {
        let Some(id) = crate::engine::spending::approvals::parse_id(&approval.id) else {
            return;
        };
        let answer = if approval.record.request.nwc_key.is_some() {
            self.nwc.run_approved(id, approval).await
        } else {
            self.answer(id, approval).await
        };
        let key = approval.record.request.idempotency_key;
        if let Some(key) = key
            && let Err(e) = self
                .keys
                .finish(key, Some((answer.status, answer.body.clone().into_bytes())))
                .await
        {
            tracing::error!(target: "berth::spending", error = %e, "cannot keep an approved payment's answer");
        }
        if let Err(e) = self.engine.approvals().ran(id, answer).await {
            tracing::error!(target: "berth::spending", error = %e, "cannot record an approved payment's answer");
        }
    }

    async fn answer(&self, id: [u8; 16], approval: &Approval) -> HeldAnswerRecord {
        let r = &approval.record;
        let refusal = |status: StatusCode, message: &str| HeldAnswerRecord {
            status: status.as_u16(),
            body: serde_json::to_string(&ErrorResponse {
                message: message.into(),
                code: "spending_rule".into(),
            })
            .unwrap_or_default(),
        };
        let device = match self.devices.list().await {
            Ok(list) => list.into_iter().find(|d| d.id == r.device_id),
            Err(e) => {
                tracing::error!(target: "berth::spending", error = %e, "cannot list devices");
                return refusal(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the devices could not be read",
                );
            }
        };
        let Some(device) = device else {
            return refusal(
                StatusCode::FORBIDDEN,
                "the device that asked for this payment was removed",
            );
        };
        let Some(routes) = self.routes() else {
            return refusal(StatusCode::SERVICE_UNAVAILABLE, "berthd is starting");
        };
        let mut request = match Request::builder()
            .method(r.request.method.as_str())
            .uri(r.request.path.as_str())
            .header(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )
            .body(Body::from(r.request.body.clone()))
        {
            Ok(request) => request,
            Err(e) => {
                tracing::error!(target: "berth::spending", error = %e, "a held request cannot be made again");
                return refusal(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
            }
        };
        request.extensions_mut().insert(Caller {
            credential: Credential::Device(device.id),
            scopes: device.scopes,
            approval: Some(id),
        });
        let response = match tower::ServiceExt::oneshot(routes, request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), MAX_ANSWER)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        HeldAnswerRecord { status, body }
    }

    /// Make a `POST` to `path` (JSON `body`) as `caller`, through the same routes and
    /// route layers as the API (scope check, disk reserve, idempotency with
    /// `idempotency_key`, approvals) but the bearer check: the console's forms that
    /// move funds go this way, so they obey exactly what the API obeys and a payment
    /// over a device's rules waits for the owner in the same way.
    pub async fn call_as(
        &self,
        caller: Caller,
        path: &str,
        body: String,
        idempotency_key: Option<&str>,
    ) -> (StatusCode, String) {
        let Some(routes) = self.routes() else {
            return (StatusCode::SERVICE_UNAVAILABLE, String::new());
        };
        let mut builder = Request::builder().method("POST").uri(path).header(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(key) = idempotency_key {
            builder = builder.header(idempotency::HEADER, key);
        }
        let mut request = match builder.body(Body::from(body)) {
            Ok(request) => request,
            Err(e) => {
                tracing::error!(target: "berth::console", error = %e, "a request cannot be made");
                return (StatusCode::INTERNAL_SERVER_ERROR, String::new());
            }
        };
        request.extensions_mut().insert(caller);
        let response = match tower::ServiceExt::oneshot(routes, request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), MAX_ANSWER)
            .await
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        (status, body)
    }

    /// The owner denied `approval`, or it expired: its key's final answer is a refusal.
    pub async fn ended_unrun(&self, approval: &Approval) {
        if approval.record.request.nwc_key.is_some() {
            self.nwc.approval_ended(approval).await;
            return;
        }
        let Some(key) = approval.record.request.idempotency_key else {
            return;
        };
        let message = approval.refusal();
        let body = serde_json::to_vec(&ErrorResponse {
            message,
            code: "spending_rule".into(),
        })
        .unwrap_or_default();
        if let Err(e) = self.keys.finish(key, Some((403, body))).await {
            tracing::error!(target: "berth::spending", error = %e, "cannot keep a refused approval's answer");
        }
    }

    /// At start: run what was approved before a stop; then expire approvals on time.
    /// Stopped by aborting it: a run cut short is marked at the next start.
    pub fn spawn(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let runner = Arc::clone(self);
        tokio::spawn(async move {
            match runner.engine.approvals().recover().await {
                Ok(recovered) => {
                    for approval in &recovered.cut_short {
                        runner.nwc.resume_approved(approval).await;
                    }
                    for approval in recovered.to_run {
                        runner.run(&approval).await;
                    }
                }
                Err(e) => {
                    tracing::error!(target: "berth::spending", error = %e, "cannot look at approvals");
                }
            }
            loop {
                let next = match runner.engine.approvals().expire_due().await {
                    Ok((expired, next)) => {
                        for approval in &expired {
                            runner.ended_unrun(approval).await;
                        }
                        next
                    }
                    Err(e) => {
                        tracing::error!(target: "berth::spending", error = %e, "cannot expire approvals");
                        None
                    }
                };
                let now = u64::try_from(chrono::Utc::now().timestamp_micros()).unwrap_or(0);
                let sleep = next
                    .map(|at| Duration::from_micros(at.saturating_sub(now)))
                    .unwrap_or(MAX_SLEEP)
                    .min(MAX_SLEEP);
                let approvals = runner.engine.approvals();
                tokio::select! {
                    () = tokio::time::sleep(sleep + Duration::from_millis(50)) => {}
                    () = approvals.held() => {}
                }
            }
        })
    }
}

//! Payments held for the owner's approval (a Berth extension, `docs/household.md`): a
//! device whose rules say `over_limit: approve` gets `202 awaiting-approval` for a
//! payment over a limit; the owner lists, approves or denies it here (admin scope).
//! `api::approvals` holds and runs the requests; `engine::spending::approvals` decides.

use crate::api::routes::route;
use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::routes::{Documentation, Routes};
use crate::engine::spending::approvals::{Approval, parse_id};

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .admin(route!(list_approvals))
        .admin(route!(get_approval))
        .admin(route!(approve))
        .admin(route!(deny))
}

/// A payment held for the owner's approval.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalInfo {
    /// 32 lowercase hex characters.
    pub id: String,
    /// `pending`, `approved` (its payment runs), `denied`, `expired` or `executed` (the
    /// approved request ran: `result` is its answer, which may be a failure).
    pub state: String,
    /// The device that asked to pay, or `nwc:` and the id of the Nostr Wallet Connect
    /// connection that did.
    pub device_id: String,
    /// `ark`, `lightning`, `onchain`, `offboard` or `exit`.
    pub kind: String,
    pub amount_sat: Option<u64>,
    /// The fee cap the approved payment is held to.
    pub max_fee_sat: Option<u64>,
    /// Where the payment goes, as the request named it.
    pub destination: Option<String>,
    /// The rule the payment is over, with the figures.
    pub reason: String,
    /// The request that runs once approved (method and path, its body run unchanged;
    /// for a Nostr Wallet Connect payment, `nwc` and its NIP-47 method).
    pub request: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// When it was approved, denied or expired.
    pub decided_at: Option<DateTime<Utc>>,
    /// The approved request's answer, once it ran.
    pub result: Option<ApprovalResult>,
}

/// An approved request's answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalResult {
    /// Its HTTP status (a Nostr Wallet Connect payment's: 200 with a result, 202 while it
    /// is under way, 422 with an error).
    pub status: u16,
    /// Its JSON body (a Nostr Wallet Connect payment's: the NIP-47 response the app got).
    #[schema(value_type = Object)]
    pub body: serde_json::Value,
}

impl From<&Approval> for ApprovalInfo {
    fn from(a: &Approval) -> Self {
        let r = &a.record;
        ApprovalInfo {
            id: a.id.clone(),
            state: r.state.clone(),
            device_id: r.device_id.clone(),
            kind: r.kind.clone(),
            amount_sat: r.amount_sat,
            max_fee_sat: r.max_fee_sat,
            destination: r.destination.clone(),
            reason: r.reason.clone(),
            request: match r.request.nwc_key {
                Some(_) => format!("nwc {}", r.request.method),
                None => format!("{} {}", r.request.method, r.request.path),
            },
            created_at: Approval::at(r.created_at_us),
            expires_at: Approval::at(r.expires_at_us),
            decided_at: r.decided_at_us.map(Approval::at),
            result: r.result.as_ref().map(|answer| ApprovalResult {
                status: answer.status,
                body: serde_json::from_str(&answer.body)
                    .unwrap_or(serde_json::Value::String(answer.body.clone())),
            }),
        }
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::NotFound {
        message: format!("no approval {id}"),
        resources: vec![id.to_string()],
    }
}

/// The approval `id` names, or 404.
fn id_of(id: &str) -> Result<[u8; 16], ApiError> {
    parse_id(id).ok_or_else(|| not_found(id))
}

/// `GET /api/v1/approvals`
#[utoipa::path(
    get,
    path = "/approvals",
    tag = "approvals",
    summary = "Payments held for approval",
    description = "Every payment held for the owner's approval, newest first (admin scope): the \
        pending ones, and the newest 200 that ended (denied, expired, executed) for the record.",
    responses(
        (status = 200, description = "The approvals", body = Vec<ApprovalInfo>),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn list_approvals(
    State(state): State<AppState>,
) -> Result<Json<Vec<ApprovalInfo>>, ApiError> {
    let all = state.engine.approvals().list().await?;
    Ok(Json(all.iter().map(ApprovalInfo::from).collect()))
}

/// `GET /api/v1/approvals/{id}`
#[utoipa::path(
    get,
    path = "/approvals/{id}",
    tag = "approvals",
    summary = "A payment held for approval",
    description = "One approval (admin scope).",
    params(("id" = String, Path, description = "The approval's id")),
    responses(
        (status = 200, description = "The approval", body = ApprovalInfo),
        (status = 404, description = "No such approval", body = NotFoundResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn get_approval(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<ApprovalInfo>, ApiError> {
    let Path(id) = id?;
    let approval = state
        .engine
        .approvals()
        .get(id_of(&id)?)
        .await?
        .ok_or_else(|| not_found(&id))?;
    Ok(Json(ApprovalInfo::from(&approval)))
}

/// `POST /api/v1/approvals/{id}/approve`
#[utoipa::path(
    post,
    path = "/approvals/{id}/approve",
    tag = "approvals",
    summary = "Approve a held payment",
    description = "Approves a pending payment and runs it, once, exactly as it was asked \
        (the same request, as the device that asked, with the amount, destination and fee \
        cap that were held), then answers with the approval: `executed`, its `result` the \
        payment's own answer (admin scope). The payment runs on if this request is cut off. \
        A retry of the device's request with its `Idempotency-Key` gets that answer too.",
    params(("id" = String, Path, description = "The approval's id")),
    responses(
        (status = 200, description = "Approved and run", body = ApprovalInfo),
        (status = 404, description = "No such approval", body = NotFoundResponse),
        (status = 422, description = "Not pending (decided already, or expired)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn approve(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<ApprovalInfo>, ApiError> {
    let Path(id) = id?;
    let key = id_of(&id)?;
    let approved = state
        .engine
        .approvals()
        .decide(key, true)
        .await?
        .ok_or_else(|| not_found(&id))?;
    // On its own task: a client that goes away does not cut the payment short.
    let runner = std::sync::Arc::clone(&state.approvals);
    let ran = tokio::spawn(async move { runner.run(&approved).await });
    ran.await
        .map_err(|e| ApiError::internal("running an approved payment", e))?;
    let approval = state
        .engine
        .approvals()
        .get(key)
        .await?
        .ok_or_else(|| not_found(&id))?;
    Ok(Json(ApprovalInfo::from(&approval)))
}

/// `POST /api/v1/approvals/{id}/deny`
#[utoipa::path(
    post,
    path = "/approvals/{id}/deny",
    tag = "approvals",
    summary = "Deny a held payment",
    description = "Denies a pending payment (admin scope): it never runs, and a retry of the \
        device's request with its `Idempotency-Key` is answered 403.",
    params(("id" = String, Path, description = "The approval's id")),
    responses(
        (status = 200, description = "Denied", body = ApprovalInfo),
        (status = 404, description = "No such approval", body = NotFoundResponse),
        (status = 422, description = "Not pending (decided already, or expired)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn deny(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<ApprovalInfo>, ApiError> {
    let Path(id) = id?;
    let denied = state
        .engine
        .approvals()
        .decide(id_of(&id)?, false)
        .await?
        .ok_or_else(|| not_found(&id))?;
    state.approvals.ended_unrun(&denied).await;
    Ok(Json(ApprovalInfo::from(&denied)))
}

//! The accounting export (a Berth extension, `docs/household.md`): the history as CSV,
//! labels as BIP-329 JSON Lines, and the import of labels (`engine::labels`).

use crate::api::routes::route;
use axum::Extension;
use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::access::Caller;
use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse};
use crate::api::routes::{Documentation, Routes};
use crate::api::v1::common::history_viewer;
use crate::engine::labels::{label_of, refs_of};
use crate::engine::spending::PAYER_KEY;

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .read(route!(history_csv))
        .read(route!(labels_jsonl))
        .admin(route!(import_labels))
}

/// The CSV's columns, in order.
pub const COLUMNS: [&str; 12] = [
    "id",
    "created_at",
    "completed_at",
    "status",
    "kind",
    "amount_sat",
    "fee_sat",
    "balance_change_sat",
    "destination",
    "device",
    "label",
    "references",
];

/// A text cell as a spreadsheet reads it: one that begins like a formula (`=`, `+`,
/// `-`, `@`, a tab or a carriage return) is prefixed with `'`, so a label a device
/// wrote cannot become a formula in the owner's spreadsheet (OWASP's CSV injection).
fn text(cell: &str) -> String {
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{cell}")
    } else {
        cell.to_string()
    }
}

/// Who made a movement: the paired device, or the Nostr Wallet Connect connection;
/// empty for the owner's own (the admin token, the autopilot) and for receipts.
pub(crate) fn payer(m: &bark::movement::Movement) -> String {
    if let Some(device) = m.metadata.get(PAYER_KEY) {
        return device["name"].as_str().unwrap_or_default().to_string();
    }
    if let Some(nwc) = m.metadata.get("nwc") {
        return format!("{} (NWC)", nwc["connection"].as_str().unwrap_or_default());
    }
    String::new()
}

/// A movement's status as the CSV and the console write it.
pub(crate) fn status_name(m: &bark::movement::Movement) -> &'static str {
    match m.status {
        bark::movement::MovementStatus::Pending => "pending",
        bark::movement::MovementStatus::Successful => "successful",
        bark::movement::MovementStatus::Failed => "failed",
        bark::movement::MovementStatus::Canceled => "canceled",
    }
}

/// The history `caller` may see: all of it, or a device's own payments.
async fn visible_history(
    state: &AppState,
    caller: &Caller,
) -> Result<Vec<bark::movement::Movement>, ApiError> {
    let mut movements = state.engine.reads().history(None).await?;
    if let Some(device) = history_viewer(state, caller).await? {
        movements.retain(|m| crate::engine::spending::paid_by(m, &device));
    }
    Ok(movements)
}

fn csv_error(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal("writing the history as CSV", e)
}

/// `GET /api/v1/export/history.csv`
#[utoipa::path(
    get,
    path = "/export/history.csv",
    tag = "history",
    summary = "The history as CSV",
    description = "Every movement, oldest first, one row each, with a header row (read scope): \
        `id`, `created_at`, `completed_at` (RFC 3339, UTC), `status`, `kind` (bark's subsystem \
        and kind, e.g. `bark.board/board`, `bark.round/refresh`, `bark.offboard/offboard`, \
        `bark.exit/start`, `bark.lightning_send/send`, each leg its own row), `amount_sat` \
        (what was meant: negative out, positive in), `fee_sat` (the Ark server's fee), \
        `balance_change_sat` (what the balance changed by, fees included), `destination` (where \
        it went or came in, space-separated), `device` (the paired device or Nostr Wallet \
        Connect connection that paid; empty for the owner's own), `label`, and `references` \
        (the addresses and payment hash or txids labels attach to). Text cells that begin like \
        a formula are prefixed with `'`.",
    responses(
        (status = 200, description = "The CSV", body = String, content_type = "text/csv"),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is locked", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn history_csv(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let mut movements = visible_history(&state, &caller).await?;
    movements.sort_by_key(|m| m.id.0);
    let kept = state.engine.labels().kept().await?;
    let mut out = csv::Writer::from_writer(Vec::with_capacity(256 * (movements.len() + 1)));
    out.write_record(COLUMNS).map_err(csv_error)?;
    for m in &movements {
        let refs = refs_of(m);
        // Its own label, else one imported for one of its references.
        let label = label_of(m).map(str::to_string).or_else(|| {
            kept.iter()
                .find(|k| refs.iter().any(|(t, r)| *t == k.kind && *r == k.reference))
                .map(|k| k.label.clone())
        });
        let destinations: Vec<String> = m
            .sent_to
            .iter()
            .chain(&m.received_on)
            .map(|d| d.destination.value_string())
            .collect();
        let status = status_name(m);
        out.write_record([
            m.id.0.to_string(),
            m.time.created_at.to_utc().to_rfc3339(),
            m.time
                .completed_at
                .map(|t| t.to_utc().to_rfc3339())
                .unwrap_or_default(),
            status.to_string(),
            format!("{}/{}", m.subsystem.name, m.subsystem.kind),
            m.intended_balance.to_sat().to_string(),
            m.offchain_fee.to_sat().to_string(),
            m.effective_balance.to_sat().to_string(),
            text(&destinations.join(" ")),
            text(&payer(m)),
            text(label.as_deref().unwrap_or_default()),
            text(
                &refs
                    .iter()
                    .map(|(t, r)| format!("{t}:{r}"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
        ])
        .map_err(csv_error)?;
    }
    let body = out.into_inner().map_err(csv_error)?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"berth-history.csv\"",
            ),
        ],
        body,
    )
        .into_response())
}

/// `GET /api/v1/export/labels.jsonl`
#[utoipa::path(
    get,
    path = "/export/labels.jsonl",
    tag = "history",
    summary = "Labels as BIP-329",
    description = "Every label as BIP-329 JSON Lines (read scope): each labelled movement's \
        label on each of its references (`addr`: the Ark or bitcoin addresses it paid or was \
        paid on; `tx`: its Lightning payment hash or transaction ids), then the imported labels \
        no movement has yet.",
    responses(
        (status = 200, description = "One BIP-329 record per line", body = String, content_type = "application/jsonl"),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn labels_jsonl(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    let movements = visible_history(&state, &caller).await?;
    // A device that sees only its own payments gets only their labels.
    let own = history_viewer(&state, &caller).await?.is_some();
    let records = state.engine.labels().export(&movements, !own).await?;
    let mut body = String::new();
    for record in records {
        let line =
            serde_json::to_string(&record).map_err(|e| ApiError::internal("writing labels", e))?;
        body.push_str(&line);
        body.push('\n');
    }
    Ok((
        [
            (header::CONTENT_TYPE, "application/jsonl; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"berth-labels.jsonl\"",
            ),
        ],
        body,
    )
        .into_response())
}

/// What an import did.
#[derive(Debug, Serialize, ToSchema)]
pub struct ImportedLabels {
    /// Records kept (new or replaced).
    pub set: usize,
    /// Labels removed (records without a label).
    pub removed: usize,
    /// Movements whose label was written now (their metadata's `label`).
    pub applied: usize,
}

/// `POST /api/v1/import/labels`
#[utoipa::path(
    post,
    path = "/import/labels",
    tag = "history",
    summary = "Import BIP-329 labels",
    description = "Takes BIP-329 JSON Lines (admin scope): each record is kept (a reference no \
        movement has yet, like a fresh address, included: its label applies when it is paid) \
        and written onto the movements that have its reference now (an address's payments, a \
        Lightning payment hash's send). A record without a label removes its label. Labels are \
        cut at 255 characters; at most 10,000 records at once and 10,000 kept. The whole body \
        is refused, naming the line, if one line is not a BIP-329 record.",
    request_body(content = String, content_type = "application/jsonl"),
    responses(
        (status = 200, description = "Imported", body = ImportedLabels),
        (status = 400, description = "A line that is not a BIP-329 record, or too many", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn import_labels(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<Json<ImportedLabels>, ApiError> {
    let body = std::str::from_utf8(&body)
        .map_err(|_| ApiError::BadRequest("the body is not UTF-8 text".into()))?;
    let records = crate::engine::labels::parse_jsonl(body).map_err(ApiError::BadRequest)?;
    let done = state.engine.labels().import(records).await?;
    Ok(Json(ImportedLabels {
        set: done.set,
        removed: done.removed,
        applied: done.applied,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_that_looks_like_a_formula_stays_text() {
        assert_eq!(text("=HYPERLINK(\"x\")"), "'=HYPERLINK(\"x\")");
        assert_eq!(text("-1"), "'-1");
        assert_eq!(text("@SUM"), "'@SUM");
        assert_eq!(text("Pocket money"), "Pocket money");
    }
}

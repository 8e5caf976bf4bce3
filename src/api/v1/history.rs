//! The `history` group: the wallet's movements.

use crate::api::routes::route;
use axum::Extension;
use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use serde::Deserialize;

use crate::access::Caller;
use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::routes::{Documentation, Routes};
use crate::api::v1::common::{Fresh, Movement, Page, PageQuery, RenderedPage, history_viewer};
use crate::engine::spending::paid_by;

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .read(route!(list))
        // Labels rewrite the wallet's records: not for a read-only display.
        .send(route!(update_metadata))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// Payment method type to filter by: `ark`, `bitcoin`, `output-script`, `invoice`,
    /// `offer`, `lightning-address`, `lnurl` or `custom`. Needs `value`.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    pub kind: Option<String>,
    /// Payment method value to filter by (the address, invoice…). Needs `type`.
    pub value: Option<String>,
}

/// `GET /api/v1/history`
#[utoipa::path(
    get,
    path = "/history",
    tag = "history",
    summary = "Wallet history",
    description = "Every movement of funds in, out of or within the wallet, newest first; with \
        `type` and `value`, only those paying or paid by that payment method.",
    params(HistoryQuery, PageQuery),
    responses(
        (status = 200, description = "Movements, newest first (pages: by id, newest first)", body = Vec<Movement>,
            headers(("Next-Cursor" = String, description = "With `limit`, when more follow: the `cursor` of the next page"),
                ("Berth-Freshness" = String, description = "`current`, or `possibly-stale` while the wallet cannot be opened (chain source unreachable): what the wallet database held when it was last open"))),
        (status = 400, description = "Malformed filter", body = ErrorResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is locked (its seed waits for its passphrase)", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<HistoryQuery>, QueryRejection>,
    page: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Fresh<RenderedPage>, ApiError> {
    let Query(query) = query?;
    let Query(page) = page?;
    let method = match (query.kind, query.value) {
        (None, None) => None,
        (Some(kind), Some(value)) => Some(
            bark::movement::PaymentMethod::from_type_value(&kind, &value).map_err(|e| {
                ApiError::BadRequest(format!("invalid payment method {kind:?}: {e:#}"))
            })?,
        ),
        _ => {
            return Err(ApiError::BadRequest(
                "`type` and `value` must be given together".into(),
            ));
        }
    };
    let viewer = history_viewer(&state, &caller).await?;
    history_page(&state, method.as_ref(), &page, viewer.as_deref()).await
}

/// The history, whole or one page. A page of the unfiltered history is read from the
/// store directly (its cost does not grow with the history), newest id first; the
/// cursor is the last movement's id. Such a page, as sent, is kept until the wallet's
/// database next changes (`page_cache`). `viewer`: a device that sees only its own
/// payments (`history: own`), whose pages are made from the whole history, filtered.
pub(crate) async fn history_page(
    state: &AppState,
    method: Option<&bark::movement::PaymentMethod>,
    page: &PageQuery,
    viewer: Option<&str>,
) -> Result<Fresh<RenderedPage>, ApiError> {
    let key = |m: &Movement| m.id.to_string();
    let freshness = state.engine.freshness().await?;
    let page = match (method, page.limit()?) {
        (None, Some(limit)) if viewer.is_none() => {
            let before = match &page.cursor {
                None => None,
                Some(cursor) => Some(cursor.parse::<u32>().map_err(|_| {
                    ApiError::BadRequest("cursor: not a cursor of this list".into())
                })?),
            };
            // Read before the page is: see `Store::commit_count`.
            let generation = state.engine.reads().store_generation();
            if let Some(kept) = state.history_pages.get((before, limit), generation) {
                return Ok(Fresh(freshness, kept));
            }
            // One more than asked tells whether another page follows.
            let mut movements = state.engine.reads().history_page(before, limit + 1).await?;
            let more = movements.len() > limit;
            movements.truncate(limit);
            let items: Vec<Movement> = movements.iter().map(Movement::from).collect();
            let next = if more { items.last().map(key) } else { None };
            let rendered = Page { items, next }.render()?;
            state
                .history_pages
                .put((before, limit), generation, rendered.clone());
            rendered
        }
        _ => {
            let mut movements = state.engine.reads().history(method).await?;
            if let Some(device) = viewer {
                movements.retain(|m| paid_by(m, device));
            }
            if page.limit()?.is_some() {
                // Pages go by id, like the unfiltered ones.
                movements.sort_by_key(|m| std::cmp::Reverse(m.id.0));
            }
            let items = movements.iter().map(Movement::from).collect();
            page.apply(items, key)?.render()?
        }
    };
    Ok(Fresh(freshness, page))
}

/// `POST /api/v1/history/{id}/metadata`
#[utoipa::path(
    post,
    path = "/history/{id}/metadata",
    tag = "history",
    summary = "Annotate a movement",
    description = "Merges the body (an RFC 7396 JSON merge patch: a `null` member removes that \
        key, objects merge recursively) into the movement's metadata. The body must be a JSON \
        object.",
    params(("id" = u32, Path, description = "Movement identifier.")),
    request_body(content = serde_json::Value, content_type = "application/merge-patch+json"),
    responses(
        (status = 200, description = "Updated"),
        (status = 400, description = "Not a JSON object, or not a movement id", body = ErrorResponse),
        (status = 404, description = "No such movement", body = NotFoundResponse),
        (status = 422, description = "No wallet", body = ErrorResponse),
        (status = 503, description = "The wallet is not loaded yet", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn update_metadata(
    State(state): State<AppState>,
    id: Result<Path<u32>, PathRejection>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<(), ApiError> {
    let Path(id) = id?;
    let Json(patch) = body?;
    // bark would replace the metadata with `{}` for a patch that is not an object.
    if !patch.is_object() {
        return Err(ApiError::BadRequest(
            "the body must be a JSON object (an RFC 7396 merge patch)".into(),
        ));
    }
    if state
        .engine
        .ark()
        .patch_movement_metadata(id, &patch)
        .await?
    {
        Ok(())
    } else {
        Err(ApiError::NotFound {
            message: format!("no movement {id}"),
            resources: vec![id.to_string()],
        })
    }
}

//! The history page: the wallet's movements, newest first, a page at a time, filtered
//! by what they are, by date and by a search (labels, destinations, payment hashes,
//! who paid, ids); each movement's own page (amounts, fee, times, where it went, its
//! VTXOs, who paid, its label, which a device that may send can edit); and the history
//! as CSV, the API's export. A device whose rules say `history: own` sees only its own
//! payments here too (`api::v1::common::history_viewer`).

use askama::Template;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{Form, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bark::movement::Movement;
use chrono::NaiveDate;
use serde::Deserialize;

use super::routes::Signed;
use super::{Frame, page};
use crate::access::devices::Authorized;
use crate::access::scopes::Scope;
use crate::access::{Caller, Credential};
use crate::api::AppState;
use crate::api::error::ApiError;
use crate::api::v1::export::{payer, status_name};
use crate::engine::labels::label_of;
use crate::engine::spending::{paid_by, sats};

/// Movements a page lists.
const PER_PAGE: usize = 50;
/// The longest label kept (as the BIP-329 import cuts them).
const MAX_LABEL: usize = 255;

/// What a movement is, in words, by bark's subsystem (and kind).
pub(super) fn kind_name(m: &Movement) -> String {
    let name = match m.subsystem.name.as_str() {
        "bark.arkoor" if m.effective_balance.is_negative() => "Ark payment sent",
        "bark.arkoor" => "Ark payment received",
        "bark.board" => "Board",
        "bark.offboard" => "Offboard",
        "bark.exit" => "Exit",
        "bark.lightning_send" => "Lightning payment sent",
        "bark.lightning_receive" => "Lightning payment received",
        "bark.round" => "Round",
        other => other,
    };
    format!("{name} ({})", m.subsystem.kind)
}

/// The filter's choices of kind: bark's subsystems, in words.
const KINDS: [(&str, &str); 7] = [
    ("bark.arkoor", "Ark payments"),
    ("bark.lightning_send", "Lightning payments sent"),
    ("bark.lightning_receive", "Lightning payments received"),
    ("bark.board", "Boards"),
    ("bark.round", "Rounds (refreshes)"),
    ("bark.offboard", "Offboards"),
    ("bark.exit", "Exits"),
];

fn destinations(m: &Movement) -> Vec<String> {
    m.sent_to
        .iter()
        .chain(&m.received_on)
        .map(|d| d.destination.value_string())
        .collect()
}

pub(super) fn signed_sats(amount: bitcoin::SignedAmount) -> String {
    let n = amount.to_sat();
    let sign = if n < 0 { "−" } else { "" };
    format!("{sign}{}", sats(n.unsigned_abs()))
}

/// The filter, as the page's form sends it.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Filter {
    #[serde(default)]
    kind: String,
    /// `YYYY-MM-DD`, inclusive, in the box's time zone.
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    #[serde(default)]
    q: String,
    /// The page after this movement id (the "Older" link).
    before: Option<u32>,
}

impl Filter {
    fn date(text: &str, what: &str) -> Result<Option<NaiveDate>, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .map(Some)
            .map_err(|_| format!("{what}: a date as YYYY-MM-DD, or empty"))
    }

    /// Whether `m` passes the filter (not the page).
    fn keeps(&self, m: &Movement, from: Option<NaiveDate>, to: Option<NaiveDate>, q: &str) -> bool {
        let day = m.time.created_at.date_naive();
        if !self.kind.is_empty() && m.subsystem.name != self.kind {
            return false;
        }
        if from.is_some_and(|from| day < from) || to.is_some_and(|to| day > to) {
            return false;
        }
        if q.is_empty() {
            return true;
        }
        let mut haystack = vec![m.id.0.to_string(), payer(m), kind_name(m)];
        haystack.extend(destinations(m));
        haystack.extend(label_of(m).map(str::to_string));
        haystack.extend(
            m.metadata
                .get("payment_hash")
                .and_then(|h| h.as_str())
                .map(str::to_string),
        );
        haystack.iter().any(|h| h.to_lowercase().contains(q))
    }

    /// The query string of this filter's page after movement `before`.
    fn older(&self, before: u32) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        for (key, value) in [
            ("kind", &self.kind),
            ("from", &self.from),
            ("to", &self.to),
            ("q", &self.q),
        ] {
            if !value.is_empty() {
                query.append_pair(key, value);
            }
        }
        query.append_pair("before", &before.to_string());
        query.finish()
    }
}

struct Row {
    id: u32,
    when: String,
    what: String,
    amount: String,
    fee: String,
    status: &'static str,
    who: String,
    label: String,
}

#[derive(Template)]
#[template(path = "history.html")]
struct HistoryPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    rows: Vec<Row>,
    /// (value, words, chosen), the first being "every kind".
    kinds: Vec<(&'static str, &'static str, bool)>,
    from: String,
    to: String,
    q: String,
    /// The query of the next, older, page.
    older: Option<String>,
    /// Movements that pass the filter, on every page.
    matching: usize,
    error: Option<String>,
}

/// The movements the signed-in device may see, newest id first.
async fn visible(state: &AppState, who: &Authorized) -> Result<Vec<Movement>, ApiError> {
    let mut movements = state.engine.reads().history(None).await?;
    if state.engine.spending().own_history(&who.device_id).await? {
        movements.retain(|m| paid_by(m, &who.device_id));
    }
    movements.sort_by_key(|m| std::cmp::Reverse(m.id.0));
    Ok(movements)
}

fn console_error(e: ApiError) -> Response {
    (e.status(), e.to_string()).into_response()
}

/// `GET /console/history`
pub(super) async fn history(
    State(state): State<AppState>,
    Signed(who): Signed,
    filter: Result<Query<Filter>, QueryRejection>,
) -> Response {
    let (filter, mut error) = match filter {
        Ok(Query(filter)) => (filter, None),
        Err(e) => (Filter::default(), Some(format!("the filter: {e}"))),
    };
    let dates = Filter::date(&filter.from, "From")
        .and_then(|from| Ok((from, Filter::date(&filter.to, "To")?)));
    let (from, to) = dates.unwrap_or_else(|message| {
        error = Some(message);
        (None, None)
    });
    let mut status = if error.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    // No wallet, or not open yet: the page says so, with its filter.
    let movements = visible(&state, &who).await.unwrap_or_else(|e| {
        status = e.status();
        error = Some(e.to_string());
        Vec::new()
    });
    let q = filter.q.trim().to_lowercase();
    let matching: Vec<&Movement> = movements
        .iter()
        .filter(|m| filter.keeps(m, from, to, &q))
        .collect();
    let on_page: Vec<&Movement> = matching
        .iter()
        .filter(|m| filter.before.is_none_or(|before| m.id.0 < before))
        .take(PER_PAGE + 1)
        .copied()
        .collect();
    let older = (on_page.len() > PER_PAGE).then(|| filter.older(on_page[PER_PAGE - 1].id.0));
    let rows = on_page
        .iter()
        .take(PER_PAGE)
        .map(|m| Row {
            id: m.id.0,
            when: m.time.created_at.format("%Y-%m-%d %H:%M").to_string(),
            what: kind_name(m),
            amount: signed_sats(m.effective_balance),
            fee: sats(m.offchain_fee.to_sat()),
            status: status_name(m),
            who: payer(m),
            label: label_of(m).unwrap_or_default().to_string(),
        })
        .collect();
    let mut kinds = vec![("", "Every kind", filter.kind.is_empty())];
    kinds.extend(
        KINDS
            .iter()
            .map(|(value, words)| (*value, *words, filter.kind == *value)),
    );
    let frame = Frame::new(&state);
    page(
        status,
        &HistoryPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            rows,
            kinds,
            from: filter.from.clone(),
            to: filter.to.clone(),
            q: filter.q.clone(),
            older,
            matching: matching.len(),
            error,
        },
    )
}

#[derive(Template)]
#[template(path = "movement.html")]
struct MovementPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    id: u32,
    what: String,
    status: &'static str,
    created: String,
    completed: String,
    intended: String,
    effective: String,
    fee: String,
    /// (where, sats), sent and received.
    sent_to: Vec<(String, String)>,
    received_on: Vec<(String, String)>,
    /// (what, VTXO ids).
    vtxos: Vec<(&'static str, Vec<String>)>,
    who: String,
    label: String,
    /// The viewer may edit the label (send scope, as the API's metadata route).
    may_label: bool,
    metadata: String,
}

/// `GET /console/history/{id}`
pub(super) async fn movement(
    State(state): State<AppState>,
    Signed(viewer): Signed,
    Path(id): Path<u32>,
) -> Response {
    let movements = match visible(&state, &viewer).await {
        Ok(movements) => movements,
        Err(e) => return console_error(e),
    };
    let Some(m) = movements.into_iter().find(|m| m.id.0 == id) else {
        return console_error(ApiError::not_found("no such movement"));
    };
    let list = |ds: &[bark::movement::MovementDestination]| {
        ds.iter()
            .map(|d| (d.destination.value_string(), sats(d.amount.to_sat())))
            .collect()
    };
    let ids = |vs: &[ark::VtxoId]| vs.iter().map(ToString::to_string).collect::<Vec<_>>();
    let frame = Frame::new(&state);
    page(
        StatusCode::OK,
        &MovementPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            id,
            what: kind_name(&m),
            status: status_name(&m),
            created: m.time.created_at.format("%Y-%m-%d %H:%M:%S %Z").to_string(),
            completed: m
                .time
                .completed_at
                .map(|t| t.format("%Y-%m-%d %H:%M:%S %Z").to_string())
                .unwrap_or_default(),
            intended: signed_sats(m.intended_balance),
            effective: signed_sats(m.effective_balance),
            fee: sats(m.offchain_fee.to_sat()),
            sent_to: list(&m.sent_to),
            received_on: list(&m.received_on),
            vtxos: vec![
                ("Spent", ids(&m.input_vtxos)),
                ("Made", ids(&m.output_vtxos)),
                ("Sent to exit", ids(&m.exited_vtxos)),
            ],
            who: payer(&m),
            label: label_of(&m).unwrap_or_default().to_string(),
            may_label: viewer.scopes.allows(Scope::Send),
            metadata: serde_json::to_string_pretty(&m.metadata).unwrap_or_default(),
        },
    )
}

#[derive(Deserialize)]
pub(super) struct LabelForm {
    label: String,
}

/// `POST /console/history/{id}/label`: set (or, empty, remove) a movement's label.
pub(super) async fn set_label(
    State(state): State<AppState>,
    Signed(viewer): Signed,
    Path(id): Path<u32>,
    form: Result<Form<LabelForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return (StatusCode::BAD_REQUEST, "a malformed form").into_response();
    };
    // Only a movement this device may see.
    match visible(&state, &viewer).await {
        Ok(movements) if movements.iter().any(|m| m.id.0 == id) => {}
        Ok(_) => return console_error(ApiError::not_found("no such movement")),
        Err(e) => return console_error(e),
    }
    let label: String = form.label.trim().chars().take(MAX_LABEL).collect();
    let patch = if label.is_empty() {
        serde_json::json!({ "label": null })
    } else {
        serde_json::json!({ "label": label })
    };
    match state.engine.ark().patch_movement_metadata(id, &patch).await {
        Ok(true) => (
            StatusCode::SEE_OTHER,
            [(header::LOCATION, format!("/console/history/{id}"))],
        )
            .into_response(),
        Ok(false) => console_error(ApiError::not_found("no such movement")),
        Err(e) => console_error(e.into()),
    }
}

/// `GET /console/history.csv`: the API's export, as this device may see it.
pub(super) async fn csv(State(state): State<AppState>, Signed(who): Signed) -> Response {
    let caller = Caller {
        credential: Credential::Device(who.device_id),
        scopes: who.scopes,
        approval: None,
    };
    match crate::api::v1::export::history_csv(State(state), axum::Extension(caller)).await {
        Ok(response) => response,
        Err(e) => console_error(e),
    }
}

//! The household pages: payments waiting for the owner's approval (approve or deny
//! them, see what became of the others) and each device's spending rules (see its
//! budgets used, edit its rules). The same engine calls as the API's
//! (`api::v1::approvals`, `api::v1::rules`); approved payments run through the same
//! runner (`api::approvals`).

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::api::AppState;
use crate::api::error::ApiError;
use crate::console::{Frame, optional_sats, page, see_other};
use crate::engine::spending::approvals::{Approval, parse_id};
use crate::engine::spending::{PaymentKind, Period, Rules, RulesView, sats};
use crate::store::approvals::state;

struct ApprovalRow {
    id: String,
    device: String,
    what: String,
    destination: String,
    reason: String,
    /// When it expires (pending), or what became of it (ended).
    when: String,
    state: String,
    outcome: String,
}

#[derive(Template)]
#[template(path = "approvals.html")]
struct ApprovalsPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    pending: Vec<ApprovalRow>,
    ended: Vec<ApprovalRow>,
}

fn approval_row(a: &Approval, names: &[(String, String)]) -> ApprovalRow {
    let r = &a.record;
    let device = names.iter().find(|(id, _)| *id == r.device_id).map_or_else(
        || format!("removed device {}", r.device_id),
        |(_, n)| n.clone(),
    );
    let at = |us| Approval::at(us).format("%Y-%m-%d %H:%M UTC").to_string();
    let outcome = match (&r.result, r.state.as_str()) {
        (Some(answer), _) if (200..300).contains(&answer.status) => "paid".to_string(),
        (Some(answer), _) => {
            let message = serde_json::from_str::<serde_json::Value>(&answer.body)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_string))
                .unwrap_or_default();
            format!("failed ({}): {message}", answer.status)
        }
        (None, state::DENIED) => "denied: never paid".into(),
        (None, state::EXPIRED) => "not answered in time: never paid".into(),
        (None, _) => String::new(),
    };
    ApprovalRow {
        id: a.id.clone(),
        device,
        what: match r.amount_sat {
            Some(n) => format!("{} sat, {}", sats(n), r.kind),
            None => r.kind.clone(),
        },
        destination: r.destination.clone().unwrap_or_default(),
        reason: r.reason.clone(),
        when: if r.state == state::PENDING {
            format!("until {}", at(r.expires_at_us))
        } else {
            r.decided_at_us.map(at).unwrap_or_default()
        },
        state: r.state.clone(),
        outcome,
    }
}

async fn device_names(state: &AppState) -> Vec<(String, String)> {
    match state.devices.list().await {
        Ok(list) => list.into_iter().map(|d| (d.id, d.name)).collect(),
        Err(e) => {
            tracing::error!(target: "berth::console", error = %e, "cannot list devices");
            Vec::new()
        }
    }
}

/// `GET /console/approvals`
pub(super) async fn approvals(State(state): State<AppState>) -> Response {
    let all = match state.engine.approvals().list().await {
        Ok(all) => all,
        Err(e) => return console_error(e.into()),
    };
    let names = device_names(&state).await;
    let (pending, ended): (Vec<_>, Vec<_>) =
        all.iter().partition(|a| !state::ended(&a.record.state));
    let frame = Frame::new(&state);
    page(
        StatusCode::OK,
        &ApprovalsPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            pending: pending.iter().map(|a| approval_row(a, &names)).collect(),
            ended: ended
                .iter()
                .take(50)
                .map(|a| approval_row(a, &names))
                .collect(),
        },
    )
}

fn console_error(e: ApiError) -> Response {
    (e.status(), e.to_string()).into_response()
}

/// `POST /console/approvals/{id}/approve`: approve, run the payment, back to the list
/// (which shows what became of it).
pub(super) async fn approve(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    decide(state, &id, true).await
}

/// `POST /console/approvals/{id}/deny`
pub(super) async fn deny(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    decide(state, &id, false).await
}

async fn decide(state: AppState, id: &str, approve: bool) -> Response {
    let Some(key) = parse_id(id) else {
        return console_error(ApiError::not_found("no such approval"));
    };
    let decided = match state.engine.approvals().decide(key, approve).await {
        Ok(Some(decided)) => decided,
        Ok(None) => return console_error(ApiError::not_found("no such approval")),
        Err(e) => return console_error(e.into()),
    };
    let runner = std::sync::Arc::clone(&state.approvals);
    // On its own task: a browser that goes away does not cut the payment short.
    let done = tokio::spawn(async move {
        if approve {
            runner.run(&decided).await;
        } else {
            runner.ended_unrun(&decided).await;
        }
    });
    if let Err(e) = done.await {
        return console_error(ApiError::internal("running an approved payment", e));
    }
    see_other("/console/approvals", None)
}

struct BudgetRow {
    period: &'static str,
    amount: String,
    used: String,
    left: String,
    renews: String,
}

#[derive(Template)]
#[template(path = "rules.html")]
struct RulesPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    device_id: String,
    device_name: String,
    max_payment: String,
    max_fee: String,
    /// (period, its budget or empty), every period.
    budgets: Vec<(&'static str, String)>,
    /// (kind, allowed), every kind.
    kinds: Vec<(&'static str, bool)>,
    approve: bool,
    own_history: bool,
    has_rules: bool,
    usage: Vec<BudgetRow>,
    error: Option<String>,
}

fn rules_page(
    state: &AppState,
    device: &crate::access::devices::Device,
    view: Option<&RulesView>,
    error: Option<String>,
) -> Response {
    let rules = view.map(|v| &v.rules);
    let blank = |a: Option<bitcoin::Amount>| a.map(|a| a.to_sat().to_string()).unwrap_or_default();
    let frame = Frame::new(state);
    page(
        if error.is_some() {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        },
        &RulesPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            device_id: device.id.clone(),
            device_name: device.name.clone(),
            max_payment: blank(rules.and_then(|r| r.max_payment)),
            max_fee: blank(rules.and_then(|r| r.max_fee)),
            budgets: Period::ALL
                .into_iter()
                .map(|p| {
                    let set = rules
                        .and_then(|r| r.budgets.iter().find(|b| b.period == p))
                        .map(|b| b.amount.to_sat().to_string())
                        .unwrap_or_default();
                    (p.as_str(), set)
                })
                .collect(),
            kinds: PaymentKind::ALL
                .into_iter()
                .map(|k| {
                    let allowed = rules
                        .and_then(|r| r.kinds.as_ref())
                        .is_none_or(|kinds| kinds.contains(&k));
                    (k.as_str(), allowed)
                })
                .collect(),
            approve: rules
                .is_some_and(|r| r.over_limit == crate::engine::spending::OverLimit::Approve),
            own_history: rules.is_some_and(|r| r.own_history),
            has_rules: rules.is_some(),
            usage: view
                .map(|v| {
                    v.budgets
                        .iter()
                        .map(|b| BudgetRow {
                            period: b.budget.period.as_str(),
                            amount: sats(b.budget.amount.to_sat()),
                            used: sats(b.used.to_sat()),
                            left: sats(b.left.to_sat()),
                            renews: b.renews_at.format("%Y-%m-%d %H:%M").to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            error,
        },
    )
}

async fn find_device(
    state: &AppState,
    id: &str,
) -> Result<crate::access::devices::Device, Response> {
    match state.devices.list().await {
        Ok(list) => list
            .into_iter()
            .find(|d| d.id == id)
            .ok_or_else(|| console_error(ApiError::not_found("no such device"))),
        Err(e) => Err(console_error(ApiError::store("listing devices", e))),
    }
}

/// `GET /console/devices/{id}/rules`
pub(super) async fn device_rules(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Response {
    let device = match find_device(&state, &id).await {
        Ok(device) => device,
        Err(response) => return response,
    };
    match state.engine.spending().rules(&id).await {
        Ok(view) => rules_page(&state, &device, view.as_ref(), None),
        Err(e) => console_error(e.into()),
    }
}

#[derive(Deserialize)]
pub(super) struct RulesForm {
    max_payment_sat: String,
    max_fee_sat: String,
    budget_day: String,
    budget_week: String,
    budget_month: String,
    budget_year: String,
    ark: Option<String>,
    lightning: Option<String>,
    onchain: Option<String>,
    offboard: Option<String>,
    exit: Option<String>,
    /// `approve` or `refuse`.
    over_limit: String,
    /// Checked: the device sees only its own payments.
    own_history: Option<String>,
    /// Set by the "Remove the rules" button.
    remove: Option<String>,
}

impl RulesForm {
    fn rules(&self) -> Result<Rules, String> {
        let mut budgets = Vec::new();
        for (period, text) in [
            ("day", &self.budget_day),
            ("week", &self.budget_week),
            ("month", &self.budget_month),
            ("year", &self.budget_year),
        ] {
            if let Some(amount) = optional_sats(&format!("Budget per {period}"), text)? {
                budgets.push((amount, period));
            }
        }
        let kinds: Vec<String> = [
            ("ark", &self.ark),
            ("lightning", &self.lightning),
            ("onchain", &self.onchain),
            ("offboard", &self.offboard),
            ("exit", &self.exit),
        ]
        .into_iter()
        .filter(|(_, on)| on.is_some())
        .map(|(k, _)| k.to_string())
        .collect();
        // Every kind ticked is no limit on kinds.
        let kinds = (kinds.len() < PaymentKind::ALL.len()).then_some(kinds);
        let mut rules = Rules::parse(
            optional_sats("Most per payment", &self.max_payment_sat)?,
            &budgets,
            kinds.as_deref(),
            optional_sats("Most fee per payment", &self.max_fee_sat)?,
            Some(self.over_limit.as_str()),
        )?;
        rules.own_history = self.own_history.is_some();
        rules.check()?;
        Ok(rules)
    }
}

/// `POST /console/devices/{id}/rules`: set (or remove) a device's rules.
pub(super) async fn set_device_rules(
    State(state): State<AppState>,
    Path(id): Path<String>,
    form: Result<Form<RulesForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return (StatusCode::BAD_REQUEST, "a malformed form").into_response();
    };
    let device = match find_device(&state, &id).await {
        Ok(device) => device,
        Err(response) => return response,
    };
    let rules = if form.remove.is_some() {
        None
    } else {
        match form.rules() {
            Ok(rules) => Some(rules),
            Err(message) => {
                let view = state.engine.spending().rules(&id).await.ok().flatten();
                return rules_page(&state, &device, view.as_ref(), Some(message));
            }
        }
    };
    match state.engine.spending().set_rules(&id, rules).await {
        Ok(true) => see_other("/console/devices", None),
        Ok(false) => console_error(ApiError::not_found("no such device")),
        Err(e) => console_error(e.into()),
    }
}

/// A device's rules in a few words, for the devices page.
pub(super) fn summary(view: Option<&RulesView>) -> String {
    let Some(view) = view else {
        return "none".into();
    };
    let mut parts = Vec::new();
    if let Some(max) = view.rules.max_payment {
        parts.push(format!("{} sat a payment", sats(max.to_sat())));
    }
    for b in &view.budgets {
        parts.push(format!(
            "{} of {} sat left this {}",
            sats(b.left.to_sat()),
            sats(b.budget.amount.to_sat()),
            b.budget.period.as_str()
        ));
    }
    if let Some(kinds) = &view.rules.kinds {
        let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
        parts.push(format!("only {}", names.join(", ")));
    }
    if let Some(fee) = view.rules.max_fee {
        parts.push(format!("fees up to {} sat", sats(fee.to_sat())));
    }
    if view.rules.over_limit == crate::engine::spending::OverLimit::Approve {
        parts.push("asks you above its limits".into());
    }
    if view.rules.own_history {
        parts.push("sees only its own payments".into());
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join("; ")
    }
}

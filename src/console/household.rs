//! The household pages: payments waiting for the owner's approval (approve or deny
//! them, see what became of the others) and spending rules (see the budgets used, edit
//! the rules) of each device, of each app connected over Nostr Wallet Connect, and the
//! rules new devices start with. The same engine calls as the API's
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
    let device = names
        .iter()
        .find(|(id, _)| *id == r.device_id)
        .map_or_else(|| format!("removed {}", r.device_id), |(_, n)| n.clone());
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

/// The names of who may ask for approval, by rules' key: devices, and apps connected
/// over Nostr Wallet Connect.
async fn device_names(state: &AppState) -> Vec<(String, String)> {
    let mut names: Vec<(String, String)> = match state.devices.list().await {
        Ok(list) => list.into_iter().map(|d| (d.id, d.name)).collect(),
        Err(e) => {
            tracing::error!(target: "berth::console", error = %e, "cannot list devices");
            Vec::new()
        }
    };
    match state.nwc.list().await {
        Ok(list) => names.extend(list.into_iter().map(|c| {
            (
                crate::engine::spending::connection_rules_key(&c.id),
                format!("{} (app)", c.name),
            )
        })),
        Err(e) => {
            tracing::error!(target: "berth::console", error = %e, "cannot list wallet connections");
        }
    }
    names
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

/// Whose rules a rules page shows and edits.
struct Subject {
    /// The rules' key: a device's id, a connection's key, the new devices' key.
    key: String,
    heading: String,
    intro: &'static str,
    /// Where the form posts, and where a saved form goes back to.
    action: String,
    back: &'static str,
    /// Whose history can be limited to its own payments (a device's, new devices').
    history: bool,
}

impl Subject {
    fn device(device: &crate::access::devices::Device) -> Subject {
        Subject {
            key: device.id.clone(),
            heading: format!("Spending rules of {}", device.name),
            intro: "What this device may pay.",
            action: format!("/console/devices/{}/rules", device.id),
            back: "/console/devices",
            history: true,
        }
    }

    fn app(connection: &crate::nwc::ConnectionView) -> Subject {
        Subject {
            key: crate::engine::spending::connection_rules_key(&connection.id),
            heading: format!("Spending rules of {}", connection.name),
            intro: "What this app may pay over Nostr Wallet Connect, beside the limits it \
                was connected with. Above them it is refused, or waits for you: the app \
                gets its answer once you decide.",
            action: format!("/console/apps/{}/rules", connection.id),
            back: "/console/apps",
            history: false,
        }
    }

    fn new_devices() -> Subject {
        Subject {
            key: crate::store::spending::NEW_DEVICES_KEY.into(),
            heading: "Rules for new devices".into(),
            intro: "The rules every device paired from now on starts with (a phone, an app, \
                a browser signed in to this console), unless it may administer the box. \
                Devices paired before keep theirs. These replace [household] new_devices in \
                berth.toml.",
            action: "/console/household/new-devices".into(),
            back: "/console/devices",
            history: true,
        }
    }
}

#[derive(Template)]
#[template(path = "rules.html")]
struct RulesPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    heading: String,
    intro: &'static str,
    action: String,
    history: bool,
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
    subject: Subject,
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
            heading: subject.heading,
            intro: subject.intro,
            action: subject.action,
            history: subject.history,
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
    show_rules(&state, Subject::device(&device)).await
}

async fn show_rules(state: &AppState, subject: Subject) -> Response {
    match state.engine.spending().rules(&subject.key).await {
        Ok(view) => rules_page(state, subject, view.as_ref(), None),
        Err(e) => console_error(e.into()),
    }
}

async fn find_app(state: &AppState, id: &str) -> Result<crate::nwc::ConnectionView, Response> {
    match state.nwc.list().await {
        Ok(list) => list
            .into_iter()
            .find(|c| c.id == id)
            .ok_or_else(|| console_error(ApiError::not_found("no such app"))),
        Err(e) => Err(console_error(e.into())),
    }
}

/// `GET /console/apps/{id}/rules`
pub(super) async fn app_rules(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match find_app(&state, &id).await {
        Ok(app) => show_rules(&state, Subject::app(&app)).await,
        Err(response) => response,
    }
}

/// `GET /console/household/new-devices`
pub(super) async fn new_device_rules(State(state): State<AppState>) -> Response {
    match state.engine.spending().new_device_rules().await {
        Ok(rules) => {
            let view = rules.rules.map(|rules| RulesView {
                rules,
                budgets: Vec::new(),
            });
            rules_page(&state, Subject::new_devices(), view.as_ref(), None)
        }
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
    /// The rules of the form; `history`: whether its history choice applies.
    fn rules(&self, history: bool) -> Result<Rules, String> {
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
        rules.own_history = history && self.own_history.is_some();
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
    match find_device(&state, &id).await {
        Ok(device) => save_rules(&state, Subject::device(&device), form).await,
        Err(response) => response,
    }
}

/// `POST /console/apps/{id}/rules`: set (or remove) an app's rules.
pub(super) async fn set_app_rules(
    State(state): State<AppState>,
    Path(id): Path<String>,
    form: Result<Form<RulesForm>, FormRejection>,
) -> Response {
    match find_app(&state, &id).await {
        Ok(app) => save_rules(&state, Subject::app(&app), form).await,
        Err(response) => response,
    }
}

/// `POST /console/household/new-devices`: set (or remove) the rules new devices start
/// with.
pub(super) async fn set_new_device_rules(
    State(state): State<AppState>,
    form: Result<Form<RulesForm>, FormRejection>,
) -> Response {
    save_rules(&state, Subject::new_devices(), form).await
}

async fn save_rules(
    state: &AppState,
    subject: Subject,
    form: Result<Form<RulesForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return (StatusCode::BAD_REQUEST, "a malformed form").into_response();
    };
    let rules = if form.remove.is_some() {
        None
    } else {
        match form.rules(subject.history) {
            Ok(rules) => Some(rules),
            Err(message) => {
                let view = state
                    .engine
                    .spending()
                    .rules(&subject.key)
                    .await
                    .ok()
                    .flatten();
                return rules_page(state, subject, view.as_ref(), Some(message));
            }
        }
    };
    let spending = state.engine.spending();
    let saved = if subject.key == crate::store::spending::NEW_DEVICES_KEY {
        spending.set_new_device_rules(rules).await.map(|()| true)
    } else {
        spending.set_rules(&subject.key, rules).await
    };
    match saved {
        Ok(true) => see_other(subject.back, None),
        Ok(false) => console_error(ApiError::not_found("it was removed meanwhile")),
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
    // Rules not yet anyone's (new devices'): the budgets alone.
    if view.budgets.is_empty() {
        for b in &view.rules.budgets {
            parts.push(format!(
                "{} sat a {}",
                sats(b.amount.to_sat()),
                b.period.as_str()
            ));
        }
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

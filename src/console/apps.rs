//! The apps page: Nostr Wallet Connect connections (`nwc`), as the API has them —
//! list each with its budget and spending, connect a new app (its link and QR code,
//! with the app's secret, shown this once), revoke one.

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::api::AppState;
use crate::api::error::ApiError;
use crate::console::{Frame, optional_sats, page, qr_svg, see_other};
use crate::nwc::{ConnectionView, NewConnection, Renewal};

struct AppRow {
    id: String,
    name: String,
    methods: String,
    limits: String,
    /// The owner's spending rules for it, in a few words.
    rules: String,
    spent: String,
    last_used: String,
}

/// A connection just made: its URI, shown once.
struct NewApp {
    name: String,
    uri: String,
    qr_svg: String,
}

#[derive(Template)]
#[template(path = "apps.html")]
struct AppsPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    apps: Vec<AppRow>,
    created: Option<NewApp>,
    error: Option<String>,
}

fn row(v: ConnectionView, rules: String) -> AppRow {
    let mut limits = Vec::new();
    if let Some(max) = v.max_payment_sat {
        limits.push(format!("{max} sat a payment"));
    }
    if let Some(budget) = v.budget_sat {
        let left = budget.saturating_sub(v.budget_used_sat);
        limits.push(match v.budget_renewal.as_str() {
            "never" => format!("{left} of {budget} sat left"),
            renewal => format!("{left} of {budget} sat left ({renewal})"),
        });
    }
    if let Some(at) = v.expires_at {
        limits.push(format!("until {}", at.format("%Y-%m-%d")));
    }
    AppRow {
        id: v.id,
        name: v.name,
        methods: v.methods.join(", "),
        limits: if limits.is_empty() {
            "none".into()
        } else {
            limits.join("; ")
        },
        rules,
        spent: format!("{} sat in {} payments", v.spent_total_sat, v.payments),
        last_used: v
            .last_used_at
            .map(|at| at.format("%Y-%m-%d %H:%M UTC").to_string())
            .unwrap_or_else(|| "never".into()),
    }
}

async fn apps_page(state: &AppState, created: Option<NewApp>, error: Option<String>) -> Response {
    let apps = match state.nwc.list().await {
        Ok(apps) => apps,
        Err(e) => {
            tracing::error!(target: "berth::console", error = %e, "cannot list wallet connections");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let mut rows = Vec::with_capacity(apps.len());
    for app in apps {
        let key = crate::engine::spending::connection_rules_key(&app.id);
        let rules = match state.engine.spending().rules(&key).await {
            Ok(view) => crate::console::household::summary(view.as_ref()),
            Err(e) => {
                tracing::error!(target: "berth::console", error = %e, "cannot read an app's rules");
                "unknown".into()
            }
        };
        rows.push(row(app, rules));
    }
    let frame = Frame::new(state);
    let status = if error.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    };
    page(
        status,
        &AppsPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            apps: rows,
            created,
            error,
        },
    )
}

/// `GET /console/apps`
pub(super) async fn apps(State(state): State<AppState>) -> Response {
    apps_page(&state, None, None).await
}

#[derive(Deserialize)]
pub(super) struct ConnectForm {
    name: String,
    /// Empty: no limit.
    max_payment_sat: String,
    budget_sat: String,
    budget_renewal: String,
    /// Checked: the app may pay; unchecked: it may only receive and read.
    pay: Option<String>,
}

/// `POST /console/apps`: connect an app; the page shows its link and QR code once.
pub(super) async fn connect(
    State(state): State<AppState>,
    form: Result<Form<ConnectForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return (StatusCode::BAD_REQUEST, "a malformed form").into_response();
    };
    let parsed = (|| {
        let max_payment_sat = optional_sats("Most per payment", &form.max_payment_sat)?;
        let budget_sat = optional_sats("Budget", &form.budget_sat)?;
        let budget_renewal = match budget_sat {
            None => None,
            Some(_) => Some(
                Renewal::parse(&form.budget_renewal)
                    .ok_or_else(|| "choose when the budget renews".to_string())?,
            ),
        };
        let methods = form.pay.is_none().then(|| {
            crate::nwc::protocol::grants()
                .filter(|m| !matches!(*m, "pay_invoice" | "multi_pay_invoice"))
                .map(str::to_string)
                .collect()
        });
        Ok::<_, String>(NewConnection {
            name: form.name.clone(),
            methods,
            max_payment_sat,
            budget_sat,
            budget_renewal,
            expires_at: None,
            relays: None,
        })
    })();
    let new = match parsed {
        Ok(new) => new,
        Err(why) => return apps_page(&state, None, Some(why)).await,
    };
    match state.nwc.create(new).await {
        Ok((view, uri)) => {
            let created = qr_svg(&uri).map(|qr_svg| NewApp {
                name: view.name,
                uri,
                qr_svg,
            });
            apps_page(&state, created, None).await
        }
        Err(crate::nwc::NwcError::Invalid(why)) | Err(crate::nwc::NwcError::Full(why)) => {
            apps_page(&state, None, Some(why)).await
        }
        Err(e) => {
            let e = ApiError::from(e);
            (e.status(), e.to_string()).into_response()
        }
    }
}

/// `POST /console/apps/{id}/revoke`
pub(super) async fn revoke(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.nwc.revoke(&id).await {
        Ok(()) => see_other("/console/apps", None),
        Err(e) => {
            let e = ApiError::from(e);
            (e.status(), e.to_string()).into_response()
        }
    }
}

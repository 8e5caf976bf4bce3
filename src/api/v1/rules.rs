//! Spending rules of paired devices (a Berth extension, `docs/household.md`): the
//! owner sets a device's limits with `PUT /api/v1/devices/{id}/rules` and reads them
//! and their budgets with `GET`; a device reads its own with `GET /api/v1/devices/me`.
//! The engine enforces them on every payment (`engine::spending`). A Nostr Wallet
//! Connect connection carries the same rules (`/api/v1/nwc/connections/{id}/rules`).

use crate::api::routes::route;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::{Extension, Json};
use bitcoin::Amount;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::access::{Caller, Credential};
use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse, NotFoundResponse};
use crate::api::routes::{Documentation, Routes};
use crate::engine::spending::{Rules, RulesView};

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .admin(route!(get_device_rules))
        .admin(route!(set_device_rules))
        .read(route!(my_device))
        .admin(route!(get_connection_rules))
        .admin(route!(set_connection_rules))
        .admin(route!(get_new_device_rules))
        .admin(route!(set_new_device_rules))
}

/// A device's spending rules. Every field may be left out: an absent limit is no
/// limit.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SpendingRules {
    /// The most one payment may be, in sats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_payment_sat: Option<u64>,
    /// At most so much per period, one budget per period; several at once (a day's
    /// and a month's, say). Periods are calendar periods in the box's time zone: a
    /// `day` from midnight, a `week` from Monday, a `month` from the 1st, a `year`
    /// from 1 January.
    #[serde(default)]
    pub budgets: Vec<BudgetRule>,
    /// The kinds of payment allowed, of `ark`, `lightning`, `onchain`, `offboard`,
    /// `exit`. Absent: every kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<String>>,
    /// The most one payment's fee may be, in sats, as the wallet estimates it just
    /// before paying (a payment whose fee would be more is refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_fee_sat: Option<u64>,
    /// What happens to a payment over `max_payment_sat` or a budget: `refuse` (the
    /// default: 403, `code` `spending_rule`) or `approve` (202: it waits for the
    /// owner's approval, `/api/v1/approvals`). A kind not allowed is always refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_limit: Option<String>,
    /// What of the history the device sees: `all` (the default) or `own` (only its own
    /// payments: in the history, the exports and the movement events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<String>,
}

/// One budget.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetRule {
    pub amount_sat: u64,
    /// `day`, `week`, `month` or `year`.
    pub period: String,
}

/// Where one budget stands.
#[derive(Debug, Serialize, ToSchema)]
pub struct BudgetStatus {
    pub period: String,
    pub amount_sat: u64,
    /// Spent, or reserved by payments under way, this period.
    pub used_sat: u64,
    pub left_sat: u64,
    /// When the next period begins (RFC 3339, in the box's time zone).
    pub renews_at: chrono::DateTime<chrono::FixedOffset>,
}

/// A device's rules and where its budgets stand.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeviceRules {
    pub device_id: String,
    /// `null`: the device has no rules (it may spend as its scopes allow).
    pub rules: Option<SpendingRules>,
    pub budgets: Vec<BudgetStatus>,
}

/// A Nostr Wallet Connect connection's rules and where its budgets stand.
#[derive(Debug, Serialize, ToSchema)]
pub struct ConnectionRules {
    pub connection_id: String,
    /// `null`: the connection has no rules (its own limits apply, as they always do).
    pub rules: Option<SpendingRules>,
    pub budgets: Vec<BudgetStatus>,
}

/// The rules newly paired devices start with.
#[derive(Debug, Serialize, ToSchema)]
pub struct NewDeviceRules {
    /// `null`: new devices start without rules.
    pub rules: Option<SpendingRules>,
    /// Who set them: `owner` (in the console, or by `PUT` here; they replace
    /// `berth.toml`'s) or `berth.toml` (`[household] new_devices`).
    pub source: String,
}

impl From<crate::engine::spending::NewDeviceRules> for NewDeviceRules {
    fn from(n: crate::engine::spending::NewDeviceRules) -> Self {
        NewDeviceRules {
            rules: n.rules.as_ref().map(SpendingRules::from),
            source: if n.set_by_owner {
                "owner"
            } else {
                "berth.toml"
            }
            .into(),
        }
    }
}

/// The caller as it sees itself.
#[derive(Debug, Serialize, ToSchema)]
pub struct MyDevice {
    /// The device's id; `null` for the admin token.
    pub id: Option<String>,
    pub name: Option<String>,
    /// What this credential may do: `read`, `receive`, `send`, `admin`.
    pub scopes: Vec<String>,
    /// Its spending rules (`null`: none; the admin token has none).
    pub rules: Option<SpendingRules>,
    pub budgets: Vec<BudgetStatus>,
    /// Its payments waiting for the owner's approval, and those approved and running.
    pub approvals: Vec<crate::api::v1::approvals::ApprovalInfo>,
}

impl SpendingRules {
    /// The engine's rules, or what is wrong with these.
    fn parse(&self) -> Result<Rules, ApiError> {
        let budgets: Vec<(u64, &str)> = self
            .budgets
            .iter()
            .map(|b| (b.amount_sat, b.period.as_str()))
            .collect();
        let mut rules = Rules::parse(
            self.max_payment_sat,
            &budgets,
            self.kinds.as_deref(),
            self.max_fee_sat,
            self.over_limit.as_deref(),
        )
        .map_err(ApiError::BadRequest)?;
        rules.own_history =
            Rules::own_history_of(self.history.as_deref()).map_err(ApiError::BadRequest)?;
        Ok(rules)
    }
}

impl From<&Rules> for SpendingRules {
    fn from(r: &Rules) -> Self {
        SpendingRules {
            max_payment_sat: r.max_payment.map(Amount::to_sat),
            budgets: r
                .budgets
                .iter()
                .map(|b| BudgetRule {
                    amount_sat: b.amount.to_sat(),
                    period: b.period.as_str().into(),
                })
                .collect(),
            kinds: r
                .kinds
                .as_ref()
                .map(|k| k.iter().map(|k| k.as_str().to_string()).collect()),
            max_fee_sat: r.max_fee.map(Amount::to_sat),
            over_limit: Some(r.over_limit.as_str().into()),
            history: Some(if r.own_history { "own" } else { "all" }.into()),
        }
    }
}

fn budgets(view: Option<&RulesView>) -> Vec<BudgetStatus> {
    view.map(|v| {
        v.budgets
            .iter()
            .map(|b| BudgetStatus {
                period: b.budget.period.as_str().into(),
                amount_sat: b.budget.amount.to_sat(),
                used_sat: b.used.to_sat(),
                left_sat: b.left.to_sat(),
                renews_at: b.renews_at.fixed_offset(),
            })
            .collect()
    })
    .unwrap_or_default()
}

/// A device just paired gets the owner's rules for new devices before its token is
/// handed out; if they cannot be set, the device is removed again (a device meant to
/// have limits never holds a token without them).
pub(crate) async fn start_device(
    state: &AppState,
    device: &crate::access::devices::Device,
) -> Result<(), ApiError> {
    let admin = device.scopes.allows(crate::access::scopes::Scope::Admin);
    if let Err(e) = state
        .engine
        .spending()
        .start_device(&device.id, admin)
        .await
    {
        if let Err(undo) = state.devices.revoke(&device.id).await {
            tracing::error!(error = %undo, device = %device.id, "cannot remove a device whose rules could not be set");
        }
        return Err(e.into());
    }
    Ok(())
}

/// The device `id`, or 404.
async fn device(state: &AppState, id: &str) -> Result<crate::access::devices::Device, ApiError> {
    state
        .devices
        .list()
        .await
        .map_err(|e| ApiError::store("listing devices", e))?
        .into_iter()
        .find(|d| d.id == id)
        .ok_or_else(|| ApiError::NotFound {
            message: format!("no device {id}"),
            resources: vec![id.to_string()],
        })
}

async fn rules_of(state: &AppState, id: &str) -> Result<DeviceRules, ApiError> {
    let view = state.engine.spending().rules(id).await?;
    Ok(DeviceRules {
        device_id: id.to_string(),
        rules: view.as_ref().map(|v| SpendingRules::from(&v.rules)),
        budgets: budgets(view.as_ref()),
    })
}

/// `GET /api/v1/devices/{id}/rules`
#[utoipa::path(
    get,
    path = "/devices/{id}/rules",
    tag = "devices",
    summary = "A device's spending rules",
    description = "The device's spending rules and where each budget stands this period \
        (admin scope). `rules` is `null` for a device without rules.",
    params(("id" = String, Path, description = "The device's id")),
    responses(
        (status = 200, description = "The rules", body = DeviceRules),
        (status = 404, description = "No such device", body = NotFoundResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn get_device_rules(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<DeviceRules>, ApiError> {
    let Path(id) = id?;
    device(&state, &id).await?;
    Ok(Json(rules_of(&state, &id).await?))
}

/// `PUT /api/v1/devices/{id}/rules`
#[utoipa::path(
    put,
    path = "/devices/{id}/rules",
    tag = "devices",
    summary = "Set a device's spending rules",
    description = "Replaces the device's spending rules (admin scope): a per-payment maximum, \
        budgets per calendar period, the kinds of payment allowed. A payment over a rule is \
        refused with 403 and `code` `spending_rule`, its message naming the rule and what is \
        left, before the wallet, its funds or the network are touched. What a budget whose \
        period stays has used this period stays used. Payments whose amount is not known \
        before they are made (offboarding everything or chosen VTXOs, draining the on-chain \
        wallet) are refused to a device with a per-payment maximum or a budget. The admin \
        token has no rules.",
    params(("id" = String, Path, description = "The device's id")),
    request_body = SpendingRules,
    responses(
        (status = 200, description = "The rules as set", body = DeviceRules),
        (status = 400, description = "Malformed rules", body = ErrorResponse),
        (status = 404, description = "No such device", body = NotFoundResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn set_device_rules(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<SpendingRules>, JsonRejection>,
) -> Result<Json<DeviceRules>, ApiError> {
    let Path(id) = id?;
    let Json(body) = body?;
    let rules = body.parse()?;
    device(&state, &id).await?;
    if !state.engine.spending().set_rules(&id, Some(rules)).await? {
        return Err(ApiError::NotFound {
            message: format!("no device {id}"),
            resources: vec![id],
        });
    }
    Ok(Json(rules_of(&state, &id).await?))
}

/// `GET /api/v1/devices/me`
#[utoipa::path(
    get,
    path = "/devices/me",
    tag = "devices",
    summary = "This device",
    description = "The calling credential as it sees itself: its device, scopes, spending \
        rules, where its budgets stand and its payments waiting for approval (read scope). The admin token has no device and no \
        rules.",
    responses(
        (status = 200, description = "This device", body = MyDevice),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn my_device(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<MyDevice>, ApiError> {
    let scopes = caller
        .scopes
        .names()
        .into_iter()
        .map(String::from)
        .collect();
    let Credential::Device(id) = &caller.credential else {
        return Ok(Json(MyDevice {
            id: None,
            name: None,
            scopes,
            rules: None,
            budgets: Vec::new(),
            approvals: Vec::new(),
        }));
    };
    let me = device(&state, id).await?;
    let rules = rules_of(&state, id).await?;
    let approvals = state
        .engine
        .approvals()
        .list()
        .await?
        .iter()
        .filter(|a| {
            &a.record.device_id == id && !crate::store::approvals::state::ended(&a.record.state)
        })
        .map(crate::api::v1::approvals::ApprovalInfo::from)
        .collect();
    Ok(Json(MyDevice {
        id: Some(me.id),
        name: Some(me.name),
        scopes,
        rules: rules.rules,
        budgets: rules.budgets,
        approvals,
    }))
}

/// The connection `id` in use (not revoked), or 404.
async fn connection(state: &AppState, id: &str) -> Result<(), ApiError> {
    let found = state.nwc.list().await?.iter().any(|c| c.id == id);
    if found {
        Ok(())
    } else {
        Err(ApiError::NotFound {
            message: format!("no connection {id}"),
            resources: vec![id.to_string()],
        })
    }
}

async fn connection_rules_of(state: &AppState, id: &str) -> Result<ConnectionRules, ApiError> {
    let key = crate::engine::spending::connection_rules_key(id);
    let view = state.engine.spending().rules(&key).await?;
    Ok(ConnectionRules {
        connection_id: id.to_string(),
        rules: view.as_ref().map(|v| SpendingRules::from(&v.rules)),
        budgets: budgets(view.as_ref()),
    })
}

/// `GET /api/v1/nwc/connections/{id}/rules`
#[utoipa::path(
    get,
    path = "/nwc/connections/{id}/rules",
    tag = "nwc",
    summary = "A connection's spending rules",
    description = "The spending rules the owner set for a Nostr Wallet Connect connection, and \
        where each budget stands this period (admin scope). `rules` is `null` without rules. \
        They apply beside the connection's own per-payment limit and budget (the ones apps \
        read with `get_budget`).",
    params(("id" = String, Path, description = "The connection's id")),
    responses(
        (status = 200, description = "The rules", body = ConnectionRules),
        (status = 404, description = "No such connection", body = NotFoundResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn get_connection_rules(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> Result<Json<ConnectionRules>, ApiError> {
    let Path(id) = id?;
    connection(&state, &id).await?;
    Ok(Json(connection_rules_of(&state, &id).await?))
}

/// `PUT /api/v1/nwc/connections/{id}/rules`
#[utoipa::path(
    put,
    path = "/nwc/connections/{id}/rules",
    tag = "nwc",
    summary = "Set a connection's spending rules",
    description = "Replaces a Nostr Wallet Connect connection's spending rules (admin scope): \
        the same rules as a paired device's (`PUT /api/v1/devices/{id}/rules`), enforced by the \
        engine on the connection's payments, beside its own per-payment limit and budget. A \
        payment over them is answered `QUOTA_EXCEEDED`, naming the rule; with `over_limit` \
        `approve` it waits for the owner's approval, and the app is answered once the owner \
        decides. `history` does not apply to a connection.",
    params(("id" = String, Path, description = "The connection's id")),
    request_body = SpendingRules,
    responses(
        (status = 200, description = "The rules as set", body = ConnectionRules),
        (status = 400, description = "Malformed rules", body = ErrorResponse),
        (status = 404, description = "No such connection", body = NotFoundResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn set_connection_rules(
    State(state): State<AppState>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Json<SpendingRules>, JsonRejection>,
) -> Result<Json<ConnectionRules>, ApiError> {
    let Path(id) = id?;
    let Json(body) = body?;
    let rules = body.parse()?;
    let key = crate::engine::spending::connection_rules_key(&id);
    if !state.engine.spending().set_rules(&key, Some(rules)).await? {
        return Err(ApiError::NotFound {
            message: format!("no connection {id}"),
            resources: vec![id],
        });
    }
    Ok(Json(connection_rules_of(&state, &id).await?))
}

/// `GET /api/v1/household/new-device-rules`
#[utoipa::path(
    get,
    path = "/household/new-device-rules",
    tag = "devices",
    summary = "The rules new devices start with",
    description = "The spending rules a newly paired device without the admin scope starts \
        with (admin scope): the owner's, as last set (console or `PUT` here), else \
        `[household] new_devices` in `berth.toml`. `rules` is `null`: none.",
    responses(
        (status = 200, description = "The rules", body = NewDeviceRules),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn get_new_device_rules(
    State(state): State<AppState>,
) -> Result<Json<NewDeviceRules>, ApiError> {
    Ok(Json(
        state.engine.spending().new_device_rules().await?.into(),
    ))
}

/// `PUT /api/v1/household/new-device-rules`
#[utoipa::path(
    put,
    path = "/household/new-device-rules",
    tag = "devices",
    summary = "Set the rules new devices start with",
    description = "Replaces the spending rules newly paired devices start with (admin scope); \
        they replace `berth.toml`'s from now on. `{}` (no limit at all): new devices start \
        without rules. Devices paired before keep theirs.",
    request_body = SpendingRules,
    responses(
        (status = 200, description = "The rules as set", body = NewDeviceRules),
        (status = 400, description = "Malformed rules", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn set_new_device_rules(
    State(state): State<AppState>,
    body: Result<Json<SpendingRules>, JsonRejection>,
) -> Result<Json<NewDeviceRules>, ApiError> {
    let Json(body) = body?;
    let rules = body.parse()?;
    let spending = state.engine.spending();
    spending.set_new_device_rules(Some(rules)).await?;
    Ok(Json(spending.new_device_rules().await?.into()))
}

//! The web console: the box looked after from a browser on the LAN, at `/` on the same
//! origin (and the same TLS listener) as the API. Server-rendered pages (askama
//! templates in `templates/`, checked at compile time and compiled in with the one
//! stylesheet, the console's design system), plain forms; QR codes are drawn on the
//! server. Two small scripts: `live.js` keeps the overview current over the
//! notifications websocket, `send.js` scans a QR code with the camera where the browser
//! can; every page works without them.
//!
//! Pages: the claim page (an unclaimed box), sign-in with a claim or pairing code, the
//! overview (the home screen: the balance, one status, what needs the owner, the
//! expiry chart, movements and alerts: `overview`), create or import the wallet
//! (`wallet`), unlock a wallet whose seed waits for its passphrase (`unlock`), send (one
//! field for any destination, its fee, then the API's own payment as this device:
//! `send`), the history (`history`), receive
//! (a new on-chain or Ark address with its QR code, `receive`), the
//! devices (list, revoke, and a pairing QR code for a phone), the apps connected over
//! Nostr Wallet Connect (list, connect with a QR code, revoke: `apps`), the webhooks and
//! each device's push notifications (`webhooks`), the backups (list, back up
//! now, download a fresh one) and the settings (those in effect, read-only; on the
//! appliance, applying the card's settings again at the next start). A browser's
//! session is a device credential in a cookie (`session`). Every page and form is
//! declared once in [`declare`] with who may use it; the table (`routes`) applies that
//! rule, and the same-origin check to every form, before the handler runs.
//!
//! The console goes through the same operations as the API (`access::enrolment` for
//! claiming, pairing and revoking; the engine for the wallet): it is another face of
//! them, not a second implementation.

mod apps;
mod backups;
mod history;
mod household;
mod overview;
mod receive;
pub mod routes;
mod send;
pub mod session;
mod settings;
mod unlock;
pub mod wallet;
mod webhooks;

use std::net::IpAddr;

use askama::Template;
use axum::Router;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, FromRequest as _, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use crate::access::devices::Authorized;
use crate::access::pairing::Grant;
use crate::access::scopes::{Scope, Scopes};
use crate::api::AppState;
use crate::api::auth::peer_ip;
use crate::api::error::ApiError;
use routes::Signed;

/// The console's routes, to be served beside the API with its layers (host check,
/// limits, metrics), each behind its rule (`routes`).
pub fn routes(state: AppState) -> Router<AppState> {
    declare(routes::Building::new(state.clone()))
        .into_router()
        // Every console route: one session cookie at most, a live one, or none.
        .route_layer(axum::middleware::from_fn_with_state(state, session::guard))
}

/// The route table: every console page and form, once, with who may use it.
fn declare<D: routes::Declare>(table: D) -> D {
    use crate::access::scopes::Scope::{Admin, Read, Receive, Send};
    use routes::Access::{Page, Public, Script};
    table
        .page("/", Public, home)
        .page("/console/style.css", Public, style)
        .page("/console/live.js", Public, live_script)
        .page("/console/send.js", Public, send_script)
        .page("/console/update.js", Public, update_script)
        .form("/console/live/ticket", Script(Read), live_ticket)
        .form("/console/sign-in", Public, sign_in)
        .form("/console/logout", Public, sign_out)
        .page("/console/unlock", Page(Admin), unlock::unlock_form)
        .form("/console/unlock", Page(Admin), unlock::unlock)
        .page("/console/devices", Page(Admin), devices)
        .form("/console/devices/{id}/revoke", Page(Admin), revoke)
        .page(
            "/console/devices/{id}/rules",
            Page(Admin),
            household::device_rules,
        )
        .form(
            "/console/devices/{id}/rules",
            Page(Admin),
            household::set_device_rules,
        )
        .page("/console/approvals", Page(Admin), household::approvals)
        .form(
            "/console/approvals/{id}/approve",
            Page(Admin),
            household::approve,
        )
        .form("/console/approvals/{id}/deny", Page(Admin), household::deny)
        .form("/console/pairing", Page(Admin), pairing)
        .page("/console/webhooks", Page(Admin), webhooks::webhooks)
        .form("/console/webhooks", Page(Admin), webhooks::add)
        .page("/console/webhooks/{id}", Page(Admin), webhooks::webhook)
        .form("/console/webhooks/{id}/test", Page(Admin), webhooks::test)
        .form("/console/webhooks/{id}/pause", Page(Admin), webhooks::pause)
        .form(
            "/console/webhooks/{id}/resume",
            Page(Admin),
            webhooks::resume,
        )
        .form(
            "/console/webhooks/{id}/remove",
            Page(Admin),
            webhooks::remove,
        )
        .form(
            "/console/webhooks/{id}/rotate",
            Page(Admin),
            webhooks::rotate,
        )
        .form(
            "/console/webhooks/{id}/deliveries/{delivery}/redeliver",
            Page(Admin),
            webhooks::redeliver,
        )
        .page("/console/devices/{id}/push", Page(Admin), webhooks::push)
        .form(
            "/console/devices/{id}/push",
            Page(Admin),
            webhooks::set_push,
        )
        .form(
            "/console/devices/{id}/push/stop",
            Page(Admin),
            webhooks::stop_push,
        )
        .page("/console/apps", Page(Admin), apps::apps)
        .form("/console/apps", Page(Admin), apps::connect)
        .form("/console/apps/{id}/revoke", Page(Admin), apps::revoke)
        .page(
            "/console/apps/{id}/rules",
            Page(Admin),
            household::app_rules,
        )
        .form(
            "/console/apps/{id}/rules",
            Page(Admin),
            household::set_app_rules,
        )
        .page(
            "/console/household/new-devices",
            Page(Admin),
            household::new_device_rules,
        )
        .form(
            "/console/household/new-devices",
            Page(Admin),
            household::set_new_device_rules,
        )
        .page("/console/history", Page(Read), history::history)
        .page("/console/history.csv", Page(Read), history::csv)
        .page("/console/history/{id}", Page(Read), history::movement)
        .form(
            "/console/history/{id}/label",
            Page(Send),
            history::set_label,
        )
        .page("/console/backups", Page(Read), backups::backups)
        .form("/console/backups", Page(Admin), backups::back_up_now)
        .form(
            "/console/backups/download",
            Page(Admin),
            backups::download_backup,
        )
        .page("/console/settings", Page(Admin), settings::settings)
        .form("/console/settings/card", Page(Admin), settings::card_setup)
        .form(
            crate::api::limits::CONSOLE_BUNDLE_UPLOAD,
            Page(Admin),
            settings::upload_bundle,
        )
        .form(
            "/console/system/bundle/remove",
            Page(Admin),
            settings::remove_bundle,
        )
        .form(
            "/console/system/install",
            Page(Admin),
            settings::install_bundle,
        )
        // What update.js follows while an install runs: the API's answer.
        .page(
            "/console/system/update",
            Page(Admin),
            crate::api::v1::system::update_status,
        )
        .page("/console/send", Page(Send), send::send_form)
        .form("/console/send/review", Page(Send), send::review)
        .form("/console/send", Page(Send), send::pay)
        .form("/console/exits/claim", Page(Send), overview::claim_exits)
        .page("/console/receive", Page(Receive), receive::receive_form)
        .form("/console/receive", Page(Receive), receive::new_address)
        .form("/console/board", Page(Send), receive::board)
        .page("/console/wallet", Page(Admin), wallet::wallet_form)
        .form("/console/wallet/new", Page(Admin), wallet::new_wallet)
        .form(
            "/console/wallet/confirm",
            Page(Admin),
            wallet::confirm_wallet,
        )
        .form("/console/wallet/import", Page(Admin), wallet::import_wallet)
}

const STYLE: &str = include_str!("style.css");
const LIVE_SCRIPT: &str = include_str!("live.js");
const SEND_SCRIPT: &str = include_str!("send.js");
const UPDATE_SCRIPT: &str = include_str!("update.js");

async fn style() -> impl IntoResponse {
    asset("text/css; charset=utf-8", STYLE)
}

async fn live_script() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", LIVE_SCRIPT)
}

async fn send_script() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", SEND_SCRIPT)
}

async fn update_script() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", UPDATE_SCRIPT)
}

/// One of the console's compiled-in files.
fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}

/// `POST /console/live/ticket`: a websocket ticket for the overview's script, owned by
/// this browser's device (its socket ends when the device is revoked). A post, so the
/// same-origin check applies; the answer is the API's (a JSON string).
async fn live_ticket(State(state): State<AppState>, Signed(who): Signed) -> Response {
    match state
        .tickets
        .issue(&crate::access::Credential::Device(who.device_id))
    {
        Some(ticket) => axum::Json(ticket).into_response(),
        None => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// What every page shows: the box's name and TLS pin.
pub(super) struct Frame {
    pub(super) hostname: String,
    pub(super) pin: Option<String>,
}

impl Frame {
    pub(super) fn new(state: &AppState) -> Frame {
        Frame {
            hostname: state.pairing_target.hostname.clone(),
            pin: state.pairing_target.pin.clone(),
        }
    }
}

#[derive(Template)]
#[template(path = "claim.html")]
struct ClaimPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    error: Option<String>,
    code: String,
}

#[derive(Template)]
#[template(path = "signed_out.html")]
struct SignedOutPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    error: Option<String>,
}

struct DeviceRow {
    id: String,
    name: String,
    scopes: String,
    /// Its spending rules in a few words.
    rules: String,
    /// Its push notifications in a few words.
    push: String,
    created_at: String,
}

struct PairingView {
    uri: String,
    qr_svg: String,
}

#[derive(Template)]
#[template(path = "devices.html")]
struct DevicesPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    own_id: String,
    devices: Vec<DeviceRow>,
    /// The rules new devices start with, in a few words.
    new_devices: String,
    pairing: Option<PairingView>,
}

/// What a console page may load and who may frame it: nothing but its own stylesheet,
/// script and forms, connections only to this origin (the script's fetches and its
/// websocket), never inside another site's frame (against clickjacking). Inline
/// `style` attributes draw the expiry chart's bars; no inline script runs.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    connect-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
    form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub(super) fn page(status: StatusCode, template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => (
            status,
            [
                (header::CACHE_CONTROL, "no-store"),
                (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
                (header::X_FRAME_OPTIONS, "DENY"),
                // Not `no-referrer`: with it a browser sends `Origin: null` on the
                // page's own form posts, which the same-origin check must refuse.
                (header::REFERRER_POLICY, "same-origin"),
            ],
            Html(html),
        )
            .into_response(),
        Err(e) => {
            tracing::error!(target: "berth::console", error = %e, "cannot render a console page");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// `text` as a QR code, an SVG drawn on the server (no script, no image request).
pub(super) fn qr_svg(text: &str) -> Option<String> {
    match qrcode::QrCode::new(text.as_bytes()) {
        Ok(qr) => Some(
            qr.render::<qrcode::render::svg::Color<'_>>()
                .quiet_zone(true)
                .min_dimensions(240, 240)
                .build(),
        ),
        Err(e) => {
            tracing::error!(target: "berth::console", error = %e, "the text does not fit a QR code");
            None
        }
    }
}

/// A redirect after a form post (303: the browser follows with a GET).
/// A form's amount field: a whole number of sats (written with or without thousands'
/// commas), or empty for none; `what` names the field in the error.
pub(super) fn optional_sats(what: &str, text: &str) -> Result<Option<u64>, String> {
    let text = text.trim().replace(',', "");
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<u64>()
        .map(Some)
        .map_err(|_| format!("{what}: a whole number of sats, or empty for none"))
}

pub(super) fn see_other(to: &'static str, cookie: Option<HeaderValue>) -> Response {
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response();
    if let Some(cookie) = cookie {
        response.headers_mut().insert(header::SET_COOKIE, cookie);
    }
    response
}

pub(super) fn forbidden(message: &'static str) -> Response {
    (StatusCode::FORBIDDEN, message).into_response()
}

/// `GET /`: the overview for a signed-in browser; else the claim page on a box with an
/// open claim, or the sign-in page.
async fn home(State(state): State<AppState>, headers: HeaderMap) -> Response {
    match session::signed_in(&headers, &state.devices) {
        Some(who) if who.scopes.allows(Scope::Read) => match own_history(&state, &who).await {
            Ok(own) => overview::overview(&state, who.scopes.allows(Scope::Admin), own).await,
            Err(refused) => refused,
        },
        Some(_) => forbidden("this device may not see the wallet (it lacks the read scope)"),
        None => signed_out(&state, StatusCode::OK, None),
    }
}

/// `Some(the device's id)` when its rules say `history: own` (it sees only its own
/// payments), else `None`; the error's answer when the rules cannot be read.
pub(super) async fn own_history<'a>(
    state: &AppState,
    who: &'a Authorized,
) -> Result<Option<&'a str>, Response> {
    match state.engine.spending().own_history(&who.device_id).await {
        Ok(own) => Ok(own.then_some(who.device_id.as_str())),
        Err(e) => Err(ApiError::from(e).into_response()),
    }
}

fn signed_out(state: &AppState, status: StatusCode, error: Option<String>) -> Response {
    let frame = Frame::new(state);
    if state.enrolment().claim_is_open() {
        page(
            status,
            &ClaimPage {
                hostname: frame.hostname,
                pin: frame.pin,
                signed_in: false,
                error,
                code: String::new(),
            },
        )
    } else {
        page(
            status,
            &SignedOutPage {
                hostname: frame.hostname,
                pin: frame.pin,
                signed_in: false,
                error,
            },
        )
    }
}

#[derive(Deserialize)]
struct SignIn {
    code: String,
    name: String,
}

/// `POST /console/sign-in`: a claim code while a claim is open, else a pairing code;
/// either makes this browser a device and starts its session.
async fn sign_in(State(state): State<AppState>, request: Request) -> Response {
    let peer: Option<IpAddr> = peer_ip(&request);
    let Ok(Form(form)) = Form::<SignIn>::from_request(request, &()).await else {
        return signed_out(
            &state,
            StatusCode::BAD_REQUEST,
            Some("Give a code and a name.".into()),
        );
    };
    let code = form.code.trim();
    let enrolment = state.enrolment();
    let outcome = if enrolment.claim_is_open() {
        let has_wallet = crate::api::v1::devices::has_wallet(&state);
        enrolment
            .claim(code, &form.name, peer, true, has_wallet)
            .await
            .map_err(ApiError::from)
    } else {
        match enrolment.pair(code, &form.name, peer, true).await {
            // A console session is a device like a phone: it starts with the rules
            // for new devices.
            Ok((token, device)) => crate::api::v1::rules::start_device(&state, &device)
                .await
                .map(|()| (token, device)),
            Err(e) => Err(ApiError::from(e)),
        }
    };
    match outcome {
        Ok((token, device)) => {
            tracing::info!(target: "berth::console", device = %device.id, "a browser signed in");
            let max_age = state.devices.session_policy().max_age;
            see_other("/", Some(session::start(token.expose(), max_age)))
        }
        Err(e) => {
            let status = e.status();
            let message = match status {
                StatusCode::NOT_FOUND => {
                    "That code is not open: it was used, it expired, or no claim or pairing \
                     window is open."
                        .to_owned()
                }
                _ => e.to_string(),
            };
            signed_out(&state, status, Some(message))
        }
    }
}

/// `POST /console/logout`: revoke this browser's device and forget the cookie.
async fn sign_out(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(who) = session::signed_in(&headers, &state.devices)
        && let Err(e) = state.enrolment().revoke(&who.device_id).await
    {
        let e = ApiError::from(e);
        return (e.status(), e.to_string()).into_response();
    }
    see_other("/", Some(session::end()))
}

/// `GET /console/devices`
async fn devices(State(state): State<AppState>, Signed(who): Signed) -> Response {
    devices_page(&state, &who, None).await
}

async fn devices_page(
    state: &AppState,
    who: &Authorized,
    pairing: Option<PairingView>,
) -> Response {
    let devices = match state.devices.list().await {
        Ok(devices) => devices,
        Err(e) => {
            tracing::error!(target: "berth::console", error = %e, "cannot list devices");
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        }
    };
    let mut rows = Vec::with_capacity(devices.len());
    for d in devices {
        let rules = match state.engine.spending().rules(&d.id).await {
            Ok(view) => household::summary(view.as_ref()),
            Err(e) => {
                tracing::error!(target: "berth::console", error = %e, "cannot read a device's rules");
                "unknown".into()
            }
        };
        let push = webhooks::push_summary(state, &d.id).await;
        rows.push(DeviceRow {
            id: d.id,
            name: d.name,
            scopes: d.scopes.names().join(", "),
            rules,
            push,
            created_at: d.created_at.format("%Y-%m-%d %H:%M UTC").to_string(),
        });
    }
    let new_devices = match state.engine.spending().new_device_rules().await {
        Ok(rules) => household::summary(
            rules
                .rules
                .map(|rules| crate::engine::spending::RulesView {
                    rules,
                    budgets: Vec::new(),
                })
                .as_ref(),
        ),
        Err(e) => {
            tracing::error!(target: "berth::console", error = %e, "cannot read the rules for new devices");
            "unknown".into()
        }
    };
    let frame = Frame::new(state);
    page(
        StatusCode::OK,
        &DevicesPage {
            new_devices,
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            own_id: who.device_id.clone(),
            devices: rows,
            pairing,
        },
    )
}

/// `POST /console/devices/{id}/revoke`
async fn revoke(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    match state.enrolment().revoke(&id).await {
        Ok(()) => see_other("/console/devices", None),
        Err(e) => {
            let e = ApiError::from(e);
            (e.status(), e.to_string()).into_response()
        }
    }
}

#[derive(Deserialize)]
struct PairingForm {
    read: Option<String>,
    receive: Option<String>,
    send: Option<String>,
    admin: Option<String>,
}

/// `POST /console/pairing`: open a pairing window and show its QR code for a phone.
async fn pairing(
    State(state): State<AppState>,
    Signed(who): Signed,
    form: Result<Form<PairingForm>, FormRejection>,
) -> Response {
    let Ok(Form(form)) = form else {
        return (StatusCode::BAD_REQUEST, "a malformed form").into_response();
    };
    let mut names = Vec::new();
    for (checked, name) in [
        (&form.read, "read"),
        (&form.receive, "receive"),
        (&form.send, "send"),
        (&form.admin, "admin"),
    ] {
        if checked.is_some() {
            names.push(name);
        }
    }
    let scopes = match Scopes::parse(&names) {
        Ok(scopes) if scopes != Scopes::NONE => scopes,
        _ => return (StatusCode::BAD_REQUEST, "choose what the device may do").into_response(),
    };
    let (code, expires) = match state.pairing.open(Grant { scopes, name: None }) {
        Ok(opened) => opened,
        Err(message) => return (StatusCode::UNPROCESSABLE_ENTITY, message).into_response(),
    };
    let expires_at = expires
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let uri = state
        .pairing_target
        .uri(&crate::tls::lan_ips(), code.expose(), expires_at);
    let Some(qr_svg) = qr_svg(&uri) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    tracing::info!(target: "berth::console", scopes = ?scopes, "pairing window opened from the console");
    devices_page(&state, &who, Some(PairingView { uri, qr_svg })).await
}

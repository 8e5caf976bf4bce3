//! The `notifications` group: wallet events by long-poll, websocket and Server-Sent
//! Events, all read from the durable event log (`crate::events`).
//!
//! barkd's contract, kept: `wait?since=` returns what came after `since` or waits up
//! to 30 s; a ticket from `ws/ticket` opens one websocket that carries one
//! `WalletNotification` JSON per text frame. Berth's extensions, all optional:
//! - `after=<event id>` (all three transports) resumes exactly after an event; the
//!   long-poll answers `last_event_id` to pass back;
//! - `types=` picks the notification types delivered (default: barkd's three);
//! - `timeout=` shortens the long-poll window;
//! - `GET /notifications/sse`: the same events as Server-Sent Events with `id:` lines,
//!   resumed by `Last-Event-ID`.
//!
//! A client that missed events (its cursor is older than the log's retention, or bark's
//! channel overflowed) first receives `{"type":"channel-lagging"}`.

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::api::routes::route;
use axum::extract::rejection::QueryRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use chrono::{DateTime, Utc};
use futures_util::{SinkExt as _, Stream, StreamExt as _};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::time::Instant;
use utoipa::ToSchema;

use crate::access::Caller;
use crate::api::AppState;
use crate::api::error::{ApiError, ErrorResponse};
use crate::api::routes::{Documentation, Routes};
use crate::api::v1::common::Movement;
use crate::events::{Event, EventHub, EventKind, MAX_PAGE, Woken};

/// The group's routes, each with who may call it (`api::routes`).
pub(super) fn routes<D: Documentation>(routes: Routes<D>) -> Routes<D> {
    routes
        .read(route!(wait_notification))
        .read(route!(websocket_ticket))
        .read(route!(notifications_sse))
        .public(route!(notifications_socket))
}

/// The long-poll window (barkd's).
const WAIT_WINDOW_SECS: u64 = 30;
/// Events a websocket or SSE stream reads from the log at a time: its whole queue.
const STREAM_PAGE: usize = 64;
/// Ping a quiet websocket this often; close it when nothing was heard for two periods.
const PING_INTERVAL: Duration = Duration::from_secs(30);
/// A websocket frame that cannot be written in this time closes the connection.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest message a client may send on the websocket (it has nothing to say).
const MAX_CLIENT_MESSAGE: usize = 4096;
/// Most notification websockets open at once (they outlive the HTTP connection cap,
/// which counts a connection only until it upgrades).
pub const MAX_SOCKETS: usize = 1024;
/// A websocket's read buffer.
const SOCKET_BUFFER: usize = 4096;
/// Most unsent bytes a websocket may hold before its writes fail (a client that does
/// not read); a page of notifications is far less.
const MAX_SOCKET_BACKLOG: usize = 1024 * 1024;

/// A notification of something happening in the wallet.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum WalletNotification {
    /// A new movement was created.
    MovementCreated { movement: Movement },
    /// An existing movement was updated.
    MovementUpdated { movement: Movement },
    /// Some notifications were lost to this client: it fell behind what the log keeps,
    /// or the wallet's own notification channel overflowed.
    ChannelLagging,
}

/// An alert of the autopilot (Berth extension), delivered only to clients that name
/// its type in `types=` (so barkd clients never see one): `vtxo-expiring` (VTXOs
/// approach the point after which they can no longer be exited safely),
/// `exit-started` (the watchdog started exits because no refresh could happen before
/// their exit deadline), `exit-claimable` (exited funds can be claimed with `POST /exits/claim/*`;
/// Berth never claims on its own), `exit-reserve-low` (the on-chain wallet's
/// confirmed balance does not cover the fees of exiting every VTXO),
/// `ark-server-unreachable`; `seed-recovery` (once, when an imported wallet is
/// created: what seed recovery restored, and the VTXOs it found but could not
/// restore); `backup-failed` (a scheduled backup failed; once until one succeeds); and
/// `disk-full` (the disk under the datadir is nearly full and changes are refused; once
/// until it has space again); `approval-requested` (a device's payment over its rules
/// waits for the owner's approval) and `approval-updated` (it was approved, denied,
/// expired or ran), sent to admin credentials and to the device concerned only.
#[derive(Debug, Serialize, ToSchema)]
pub struct AlertNotification {
    /// The alert's type, as named in `types=`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// What happened, for people.
    pub message: String,
    /// The VTXOs concerned.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub vtxos: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount_sat: Option<u64>,
    /// Blocks left before the first VTXO can no longer be exited safely.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocks_left: Option<i64>,
    /// What the on-chain wallet lacks to pay for exiting every VTXO.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shortfall_sat: Option<u64>,
    /// The approval concerned (`approval-requested`, `approval-updated`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<crate::events::vocabulary::ApprovalAlert>,
    /// The webhook endpoint concerned (`test`, `webhook-disabled`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_id: Option<String>,
}

impl AlertNotification {
    fn new(kind: &'static str, a: &crate::events::Alert) -> Self {
        AlertNotification {
            kind,
            message: a.message.clone(),
            vtxos: a.vtxos.clone(),
            amount_sat: a.amount_sat,
            blocks_left: a.blocks_left,
            shortfall_sat: a.shortfall_sat,
            approval: a.approval.clone(),
            webhook_id: a.webhook_id.clone(),
        }
    }
}

/// The JSON of an event, rendered once and shared by every reader.
fn render(event: &Event) -> &RawValue {
    event.rendered.get_or_init(|| {
        let notification = match (event.kind, &event.movement) {
            (EventKind::MovementCreated, Some(m)) => WalletNotification::MovementCreated {
                movement: Movement::from(m),
            },
            (EventKind::MovementUpdated, Some(m)) => WalletNotification::MovementUpdated {
                movement: Movement::from(m),
            },
            (kind, _) if !TypeFilter::is_standard(kind) => {
                let alert = AlertNotification::new(
                    type_name(kind),
                    event.alert.as_ref().unwrap_or(&Default::default()),
                );
                return serde_json::value::to_raw_value(&alert)
                    .expect("an alert is plain data and always serialises");
            }
            _ => WalletNotification::ChannelLagging,
        };
        serde_json::value::to_raw_value(&notification)
            .expect("a notification is plain data and always serialises")
    })
}

/// An event's type and JSON for a webhook's payload (`webhooks::Render`).
pub fn webhook_data(event: &Event) -> (&'static str, &RawValue) {
    (type_name(event.kind), render(event))
}

/// A notification as delivered: an event of the log, or the "you missed some" marker.
#[derive(Debug)]
pub enum Delivered {
    Event(Arc<Event>),
    Lagging,
}

impl Delivered {
    /// The notification's JSON, as every transport sends it.
    fn json(&self) -> &str {
        match self {
            Delivered::Event(event) => render(event).get(),
            Delivered::Lagging => r#"{"type":"channel-lagging"}"#,
        }
    }
}

impl Serialize for Delivered {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            // Rendered once: embedded as is.
            Delivered::Event(event) => render(event).serialize(s),
            Delivered::Lagging => WalletNotification::ChannelLagging.serialize(s),
        }
    }
}

/// Which notification types a client receives; and, for a paired device (`viewer`),
/// that approval events reach it only when they are about it, and, when its rules say
/// `history: own` (`own_only`), movement events only of its own payments (admin
/// credentials see all).
#[derive(Debug, Clone)]
pub struct TypeFilter {
    kinds: HashSet<EventKind>,
    viewer: Option<String>,
    own_only: bool,
}

/// Every notification type by its API name, and whether a client that does not ask
/// (`types=` absent) receives it: barkd's three are sent to everyone; Berth's own
/// (alerts, from later issues) only to clients that name them, so a strict barkd
/// client never meets a `type` it does not know.
const TYPES: [(EventKind, &str, bool); 18] = {
    let mut types = [(EventKind::MovementCreated, "", false); 18];
    let mut i = 0;
    while i < EventKind::ALL.len() {
        let kind = EventKind::ALL[i];
        let standard = matches!(
            kind,
            EventKind::MovementCreated | EventKind::MovementUpdated | EventKind::ChannelLagging
        );
        types[i] = (kind, kind.name(), standard);
        i += 1;
    }
    types
};

/// Every notification type's API name (the console's overview listens for them all).
pub fn type_names() -> Vec<&'static str> {
    TYPES.iter().map(|t| t.1).collect()
}

/// The API name of a kind.
pub fn type_name(kind: EventKind) -> &'static str {
    TYPES
        .iter()
        .find(|t| t.0 == kind)
        .map_or("channel-lagging", |t| t.1)
}

impl TypeFilter {
    /// Whether a kind is delivered without being asked for (barkd's own types).
    fn is_standard(kind: EventKind) -> bool {
        TYPES.iter().any(|t| t.0 == kind && t.2)
    }

    /// `types=a,b`: each must be a known type. Absent: the standard ones.
    fn parse(types: Option<&str>) -> Result<Self, ApiError> {
        let Some(types) = types else {
            let standard = TYPES.iter().filter(|t| t.2).map(|t| t.0).collect();
            return Ok(TypeFilter {
                kinds: standard,
                viewer: None,
                own_only: false,
            });
        };
        let mut set = HashSet::new();
        for name in types.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let kind = TYPES
                .iter()
                .find(|t| t.1 == name)
                .map(|t| t.0)
                .ok_or_else(|| {
                    ApiError::BadRequest(format!(
                        "types: unknown notification type {name:?} (known: {})",
                        TYPES.map(|t| t.1).join(", ")
                    ))
                })?;
            set.insert(kind);
        }
        if set.is_empty() {
            return Err(ApiError::BadRequest(
                "types: name at least one notification type".into(),
            ));
        }
        Ok(TypeFilter {
            kinds: set,
            viewer: None,
            own_only: false,
        })
    }

    /// For `credential`: a device sees only its own approvals' events, and only its
    /// own payments' movements when its rules say so.
    async fn seen_by(
        mut self,
        state: &AppState,
        credential: &crate::access::Credential,
    ) -> Result<Self, ApiError> {
        if let crate::access::Credential::Device(id) = credential {
            self.own_only = state.engine.spending().own_history(id).await?;
            self.viewer = Some(id.clone());
        }
        Ok(self)
    }

    fn wants(&self, kind: EventKind) -> bool {
        self.kinds.contains(&kind)
    }

    /// Whether this client may see `event` (of a type it wants).
    fn may_see(&self, event: &Event) -> bool {
        let Some(viewer) = &self.viewer else {
            return true;
        };
        if let Some(movement) = &event.movement {
            return !self.own_only || crate::engine::spending::paid_by(movement, viewer);
        }
        if !matches!(
            event.kind,
            EventKind::ApprovalRequested | EventKind::ApprovalUpdated
        ) {
            return true;
        }
        event
            .alert
            .as_ref()
            .and_then(|a| a.approval.as_ref())
            .is_some_and(|a| &a.device_id == viewer)
    }

    /// What of `events` this client receives, led by the lagging marker if it missed some.
    fn deliver(&self, missed: bool, events: &[Arc<Event>]) -> Vec<Delivered> {
        let lagging =
            (missed && self.wants(EventKind::ChannelLagging)).then_some(Delivered::Lagging);
        lagging
            .into_iter()
            .chain(
                events
                    .iter()
                    .filter(|e| self.wants(e.kind) && self.may_see(e))
                    .map(|e| Delivered::Event(Arc::clone(e))),
            )
            .collect()
    }
}

/// The answer to a request whose device was revoked while it waited.
fn revoked() -> ApiError {
    ApiError::Unauthorized("this device was revoked")
}

fn store_failure(e: crate::store::StoreError) -> ApiError {
    ApiError::store("reading the event log", e)
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// Return the notifications after this time; when omitted, every notification the
    /// log holds.
    pub since: Option<DateTime<Utc>>,
    /// Berth extension: return the notifications after this event id (a previous
    /// answer's `last_event_id`). Not together with `since`.
    pub after: Option<u64>,
    /// Berth extension: comma-separated notification types to return (default
    /// `movement-created,movement-updated,channel-lagging`). The autopilot's alerts
    /// (`vtxo-expiring`, `exit-started`, `exit-claimable`, `exit-reserve-low`,
    /// `ark-server-unreachable`), `seed-recovery`, `backup-failed`, `disk-full`,
    /// `approval-requested` and `approval-updated` (shape: `AlertNotification`) come only
    /// when named here.
    pub types: Option<String>,
    /// Berth extension: seconds to wait when there is nothing to return yet (0 to 30,
    /// default 30).
    pub timeout: Option<u64>,
}

/// The long-poll's answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct WaitNotificationResponse {
    /// Notifications in the order they happened (timestamps ascending); empty if the
    /// window passed without any. At most 1,000: ask again with `since =
    /// last_pushed_at` (or `after = last_event_id`) for the rest.
    #[schema(value_type = Vec<WalletNotification>)]
    pub notifications: Vec<Delivered>,
    /// Time of the last notification returned; the request's `since` when none was.
    pub last_pushed_at: Option<DateTime<Utc>>,
    /// Berth extension: id of the newest event this answer accounts for; pass it as
    /// `after` to resume exactly.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub last_event_id: Option<u64>,
}

/// `GET /api/v1/notifications/wait`
#[utoipa::path(
    get,
    path = "/notifications/wait",
    tag = "notifications",
    summary = "Long-poll for wallet notifications",
    description = "Returns the notifications after `since` (or, without it, every notification \
        the log holds), oldest first. When there are none yet, waits up to 30 seconds for the \
        next; if none comes, answers an empty list with `last_pushed_at` equal to `since`. \
        Notifications are kept in a durable log (by default the last 10,000, up to 30 days), so \
        a client that was away gets what it missed; one that was away longer first receives \
        `channel-lagging`.",
    params(WaitQuery),
    responses(
        (status = 200, description = "Notifications, or an empty list when the window passed", body = WaitNotificationResponse),
        (status = 400, description = "Malformed `since`, `after`, `types` or `timeout`", body = ErrorResponse),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn wait_notification(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<WaitQuery>, QueryRejection>,
) -> Result<Json<WaitNotificationResponse>, ApiError> {
    let Query(query) = query?;
    let types = TypeFilter::parse(query.types.as_deref())?
        .seen_by(&state, &caller.credential)
        .await?;
    let timeout = query.timeout.unwrap_or(WAIT_WINDOW_SECS);
    if timeout > WAIT_WINDOW_SECS {
        return Err(ApiError::BadRequest(format!(
            "timeout: at most {WAIT_WINDOW_SECS} seconds"
        )));
    }
    let hub = &state.events;
    // Without a starting point the client asked for everything kept: nothing is
    // "missed" by what retention removed before.
    let (mut cursor, mut missed) = match (query.since, query.after) {
        (Some(_), Some(_)) => {
            return Err(ApiError::BadRequest(
                "give `since` or `after`, not both".into(),
            ));
        }
        (Some(since), None) => hub.cursor_at(since).await.map_err(store_failure)?,
        (None, Some(after)) => (after, false),
        (None, None) => (0, false),
    };
    let resuming = query.since.is_some() || query.after.is_some();
    let deadline = Instant::now() + Duration::from_secs(timeout);
    let wait = async {
        loop {
            let (page, woken) = hub
                .wait_after(cursor, MAX_PAGE, deadline)
                .await
                .map_err(store_failure)?;
            missed |= page.missed && resuming;
            cursor = page.next_cursor(cursor);
            let delivered = types.deliver(missed, &page.events);
            // Filtered-out events move the cursor on; keep waiting for one the client wants.
            if !delivered.is_empty() || woken != Woken::Events {
                break Ok::<_, ApiError>(delivered);
            }
        }
    };
    // A revoked device's wait ends at once, with nothing.
    let notifications = tokio::select! {
        waited = wait => waited?,
        () = state.devices.revoked(&caller.credential) => return Err(revoked()),
    };
    let last_pushed_at = notifications
        .iter()
        .rev()
        .find_map(|n| match n {
            Delivered::Event(e) => Some(e.at()),
            Delivered::Lagging => None,
        })
        .or(query.since);
    Ok(Json(WaitNotificationResponse {
        notifications,
        last_pushed_at,
        last_event_id: (cursor > 0).then_some(cursor),
    }))
}

/// `GET /api/v1/notifications/ws/ticket`
#[utoipa::path(
    get,
    path = "/notifications/ws/ticket",
    tag = "notifications",
    summary = "Create a websocket ticket",
    description = "Creates a single-use ticket (64 hex digits) that authenticates one websocket \
        connection at `/api/v1/notifications/ws?ticket=<ticket>`. It must be used within 10 \
        minutes; the connection it opens is long-lived and belongs to the credential that \
        asked (it ends when that device is revoked). A credential holds at most 16 unused \
        tickets: asking for more drops its own oldest.",
    responses(
        (status = 200, description = "The ticket, as a JSON string", body = String, content_type = "application/json"),
        (status = 500, description = "Internal error", body = ErrorResponse),
    )
)]
pub async fn websocket_ticket(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<String>, ApiError> {
    state
        .tickets
        .issue(&caller.credential)
        .map(Json)
        .ok_or_else(|| ApiError::internal("issuing a websocket ticket", "no randomness"))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SocketQuery {
    /// A ticket from `GET /api/v1/notifications/ws/ticket`.
    pub ticket: String,
    /// Berth extension: first replay the notifications after this event id, then go
    /// live, with no gap and no repeat between the two.
    pub after: Option<u64>,
    /// Berth extension: comma-separated notification types to send (default: all three).
    pub types: Option<String>,
}

/// `GET /api/v1/notifications/ws`
#[utoipa::path(
    get,
    path = "/notifications/ws",
    tag = "notifications",
    summary = "Websocket of wallet notifications",
    description = "Upgrades to a websocket that carries one `WalletNotification` as JSON per text \
        frame, from the time of connecting (or after `after`). Authenticated by the `ticket` \
        query parameter, not the bearer token. The server pings every 30 seconds and closes a \
        connection that stays silent for two periods; it closes with code 1001 when berthd stops.",
    security(()),
    params(SocketQuery),
    responses(
        (status = 101, description = "Switching to the websocket protocol"),
        (status = 400, description = "Not a websocket request, or malformed parameters", body = ErrorResponse),
        (status = 401, description = "Unknown, used or expired ticket", body = ErrorResponse),
        (status = 503, description = "Too many notification websockets open", body = ErrorResponse),
    )
)]
pub async fn notifications_socket(
    State(state): State<AppState>,
    query: Result<Query<SocketQuery>, QueryRejection>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query?;
    let types = TypeFilter::parse(query.types.as_deref())?;
    let upgrade = upgrade.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    // A place first, so a refused connection does not spend its ticket.
    let Some(guard) = state.sockets.open() else {
        return Err(ApiError::Unavailable(format!(
            "{MAX_SOCKETS} notification websockets are open already; close one or use the long-poll"
        )));
    };
    let owner = state
        .tickets
        .redeem(&query.ticket)
        // A ticket of a device revoked since is no ticket.
        .filter(|owner| state.devices.holds(owner))
        .ok_or(ApiError::Unauthorized(
            "invalid, used or expired websocket ticket",
        ))?;
    let types = types.seen_by(&state, &owner).await?;
    let hub = Arc::clone(&state.events);
    let devices = Arc::clone(&state.devices);
    let cursor = query.after.unwrap_or_else(|| hub.latest_id());
    // tungstenite's buffers default to 128 KiB each way; a socket here carries small
    // frames, and hundreds of them are open at once.
    Ok(upgrade
        .read_buffer_size(SOCKET_BUFFER)
        .write_buffer_size(0)
        .max_write_buffer_size(MAX_SOCKET_BACKLOG)
        .max_message_size(MAX_CLIENT_MESSAGE)
        .max_frame_size(MAX_CLIENT_MESSAGE)
        .on_upgrade(move |socket| async move {
            let revoked = async move { devices.revoked(&owner).await };
            serve_socket(socket, hub, cursor, types, revoked).await;
            drop(guard);
        }))
}

/// Send events from `cursor` on until the client leaves, stops answering, its
/// credential is `revoked`, or berthd stops.
async fn serve_socket(
    socket: WebSocket,
    hub: Arc<EventHub>,
    mut cursor: u64,
    types: TypeFilter,
    revoked: impl Future<Output = ()>,
) {
    let mut revoked = std::pin::pin!(revoked);
    let (mut tx, mut rx) = socket.split();
    let mut last_heard = Instant::now();
    let mut next_ping = Instant::now() + PING_INTERVAL;
    let close = |code, reason: &'static str| {
        Message::Close(Some(CloseFrame {
            code,
            reason: reason.into(),
        }))
    };
    loop {
        tokio::select! {
            waited = hub.wait_after(cursor, STREAM_PAGE, next_ping) => {
                let (page, woken) = match waited {
                    Ok(waited) => waited,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot read the event log for a websocket");
                        let _ = tx.send(close(close_code::ERROR, "cannot read the event log")).await;
                        return;
                    }
                };
                match woken {
                    Woken::Shutdown => {
                        let _ = tokio::time::timeout(
                            Duration::from_secs(1),
                            tx.send(close(close_code::AWAY, "berthd is stopping")),
                        )
                        .await;
                        return;
                    }
                    Woken::Deadline => {
                        if last_heard.elapsed() > 2 * PING_INTERVAL {
                            let _ = tx.send(close(close_code::AWAY, "no answer to pings")).await;
                            return;
                        }
                        next_ping = Instant::now() + PING_INTERVAL;
                        if tx.send(Message::Ping(Default::default())).await.is_err() {
                            return;
                        }
                    }
                    Woken::Events => {
                        for delivered in types.deliver(page.missed, &page.events) {
                            let frame = Message::Text(delivered.json().into());
                            let sent = tokio::time::timeout(SEND_TIMEOUT, tx.send(frame)).await;
                            if !matches!(sent, Ok(Ok(()))) {
                                return;
                            }
                        }
                        cursor = page.next_cursor(cursor);
                    }
                }
            }
            () = &mut revoked => {
                let _ = tokio::time::timeout(
                    Duration::from_secs(1),
                    tx.send(close(close_code::POLICY, "this device was revoked")),
                )
                .await;
                return;
            }
            incoming = rx.next() => match incoming {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                // Pongs, pings (answered by the library) and anything else: it is alive.
                Some(Ok(_)) => last_heard = Instant::now(),
            },
        }
    }
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SseQuery {
    /// Replay the notifications after this event id first (the `Last-Event-ID` header,
    /// sent by reconnecting clients, takes precedence).
    pub after: Option<u64>,
    /// Comma-separated notification types to send (default: all three).
    pub types: Option<String>,
}

/// `GET /api/v1/notifications/sse`
#[utoipa::path(
    get,
    path = "/notifications/sse",
    tag = "notifications",
    summary = "Server-Sent Events of wallet notifications (Berth extension)",
    description = "A `text/event-stream` of `WalletNotification`s: one event per notification, \
        its JSON in `data:` and its event id in `id:`. A client that reconnects with \
        `Last-Event-ID` (or `after`) continues exactly where it left off. A comment line is \
        sent every 15 seconds to keep proxies from closing the stream.",
    params(SseQuery),
    responses(
        (status = 200, description = "The event stream", body = String, content_type = "text/event-stream"),
        (status = 400, description = "Malformed parameters or Last-Event-ID", body = ErrorResponse),
    )
)]
pub async fn notifications_sse(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    query: Result<Query<SseQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query?;
    let types = TypeFilter::parse(query.types.as_deref())?
        .seen_by(&state, &caller.credential)
        .await?;
    let last_event_id = match headers.get("last-event-id") {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    ApiError::BadRequest("Last-Event-ID: expected an event id".into())
                })?,
        ),
    };
    let hub = Arc::clone(&state.events);
    let cursor = last_event_id
        .or(query.after)
        .unwrap_or_else(|| hub.latest_id());
    // The stream ends the moment its device is revoked.
    let devices = Arc::clone(&state.devices);
    let revoked = async move { devices.revoked(&caller.credential).await };
    Ok(Sse::new(sse_stream(hub, cursor, types).take_until(revoked))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

fn sse_stream(
    hub: Arc<EventHub>,
    cursor: u64,
    types: TypeFilter,
) -> impl Stream<Item = Result<sse::Event, Infallible>> {
    struct State {
        hub: Arc<EventHub>,
        cursor: u64,
        types: TypeFilter,
        ready: VecDeque<sse::Event>,
    }
    let state = State {
        hub,
        cursor,
        types,
        ready: VecDeque::new(),
    };
    futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(event) = st.ready.pop_front() {
                return Some((Ok(event), st));
            }
            // No deadline of its own: keep-alives are the Sse wrapper's.
            let far = Instant::now() + Duration::from_secs(3600);
            let (page, woken) = match st.hub.wait_after(st.cursor, STREAM_PAGE, far).await {
                Ok(waited) => waited,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read the event log for an SSE stream");
                    return None;
                }
            };
            if woken == Woken::Shutdown {
                return None;
            }
            for delivered in st.types.deliver(page.missed, &page.events) {
                // axum writes fields in call order; `id:` goes before `data:`, so the
                // id belongs to this event for every reader.
                let event = match &delivered {
                    Delivered::Event(e) => sse::Event::default().id(e.id.to_string()),
                    Delivered::Lagging => sse::Event::default(),
                };
                st.ready.push_back(event.data(delivered.json()));
            }
            st.cursor = page.next_cursor(st.cursor);
        }
    })
}

/// Open websockets, so shutdown can wait for them to say goodbye.
#[derive(Debug)]
pub struct SocketCount(tokio::sync::watch::Sender<usize>);

impl Default for SocketCount {
    fn default() -> Self {
        SocketCount(tokio::sync::watch::channel(0).0)
    }
}

/// Counts one open websocket until dropped.
pub struct SocketGuard(Arc<SocketCount>);

impl Drop for SocketGuard {
    fn drop(&mut self) {
        self.0.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl SocketCount {
    /// Count one more open socket; `None` at the cap.
    fn open(self: &Arc<Self>) -> Option<SocketGuard> {
        let mut opened = false;
        self.0.send_modify(|n| {
            if *n < MAX_SOCKETS {
                *n += 1;
                opened = true;
            }
        });
        opened.then(|| SocketGuard(Arc::clone(self)))
    }

    /// Wait until every websocket has closed, or `limit` passed.
    pub async fn closed(&self, limit: Duration) {
        let mut count = self.0.subscribe();
        let _ = tokio::time::timeout(limit, count.wait_for(|n| *n == 0)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_kind_has_its_api_name_and_defaults_to_standard_only() {
        let kinds = EventKind::ALL;
        for kind in kinds {
            // Exhaustive: a new kind fails to compile here until it is listed here and
            // in `EventKind::ALL`.
            match kind {
                EventKind::MovementCreated
                | EventKind::MovementUpdated
                | EventKind::ChannelLagging
                | EventKind::VtxoExpiring
                | EventKind::ExitStarted
                | EventKind::ExitClaimable
                | EventKind::ExitReserveLow
                | EventKind::ArkServerUnreachable
                | EventKind::SeedRecovery
                | EventKind::BackupFailed
                | EventKind::DiskFull
                | EventKind::ApprovalRequested
                | EventKind::ApprovalUpdated
                | EventKind::Test
                | EventKind::WebhookDisabled
                | EventKind::DevicePaired
                | EventKind::SystemUpdated
                | EventKind::SystemUpdateFailed => {}
            }
            let (_, name, _) = TYPES
                .iter()
                .find(|t| t.0 == kind)
                .unwrap_or_else(|| panic!("{kind:?} has no API name"));
            assert_eq!(serde_json::to_value(kind).expect("json"), *name);
        }
        let default = TypeFilter::parse(None).expect("default");
        for (kind, _, standard) in TYPES {
            assert_eq!(default.wants(kind), standard, "{kind:?}");
        }
        assert_eq!(
            serde_json::to_string(&Delivered::Lagging).expect("json"),
            Delivered::Lagging.json(),
            "the streams' lagging frame is what the long-poll sends"
        );
        let picked = TypeFilter::parse(Some("movement-updated, channel-lagging")).expect("parse");
        assert!(!picked.wants(EventKind::MovementCreated));
        assert!(picked.wants(EventKind::ChannelLagging));
    }

    #[tokio::test]
    async fn sockets_are_capped_and_a_closed_one_frees_its_place() {
        let count = Arc::new(SocketCount::default());
        let mut open: Vec<SocketGuard> = (0..MAX_SOCKETS)
            .map(|_| count.open().expect("a place"))
            .collect();
        assert!(count.open().is_none(), "no place beyond the cap");
        drop(open.pop());
        let last = count.open();
        assert!(last.is_some(), "a closed socket frees its place");
        drop(last);
        tokio::time::timeout(Duration::from_secs(1), count.closed(Duration::from_secs(5)))
            .await
            .expect_err("sockets are still open, so closed() waits");
        drop(open);
        tokio::time::timeout(Duration::from_secs(1), count.closed(Duration::from_secs(5)))
            .await
            .expect("all closed: closed() returns");
    }
}

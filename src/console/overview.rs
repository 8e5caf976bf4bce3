//! The overview, the console's home screen. It answers three questions at a glance:
//! how much is there (the spendable balance, large, with what is pending and on-chain
//! beneath), is everything all right (one status: the `/health` verdict and its
//! reasons), and what needs the owner now ("Needs you": a wallet to create or unlock,
//! approvals, backups, exits to claim, the exit reserve, a disabled webhook). Then
//! when the VTXOs expire (a bar chart of value by blocks left), exits under way, the
//! newest movements and alerts. All of it from the daemon's status snapshot
//! (`api::status`), which `/health` and `/metrics` render too; nothing here probes
//! anything. The page's script (`live.js`) keeps it current: each event on the
//! notifications websocket fetches it again.

use askama::Template;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::{Frame, page};
use crate::api::AppState;

/// The wallet as the overview shows it.
pub(super) enum WalletView {
    None,
    /// Waiting for its seed's passphrase (the unlock page).
    Locked {
        fingerprint: String,
    },
    /// bark cannot open it yet: its Ark balances as the store last had them.
    NotLoaded {
        fingerprint: String,
        balances: Option<BalanceView>,
    },
    Loaded {
        fingerprint: String,
        balances: Option<BalanceView>,
    },
}

/// The balance as the home screen shows it: what can be spent, large, and beneath it
/// what is on its way and what is on-chain (only the parts that are not zero, but the
/// on-chain lines always once they are known).
pub(super) struct BalanceView {
    spendable: String,
    beneath: Vec<(&'static str, String)>,
}

/// The one status the home screen leads with: the `/health` verdict in words.
pub(super) struct StatusView {
    /// The badge's class (`ok`, `warn`, `bad`) and its word.
    class: &'static str,
    word: &'static str,
    /// Why it is not all good (the verdict's reasons).
    reasons: Vec<String>,
    /// What "all good" covers, said when there are no reasons.
    fine: &'static str,
}

/// Something only the owner can do, now.
pub(super) struct TodoItem {
    text: String,
    /// Where to do it: (href, link words).
    link: Option<(&'static str, &'static str)>,
    /// Claimable exits: the page offers the claim button.
    claim: bool,
}

/// One bar of the expiry chart: unspent value whose exit deadline is within `label`.
pub(super) struct ExpiryBar {
    label: String,
    sats: String,
    /// Of the largest bar, 0 to 100.
    percent: u64,
}

pub(super) struct AlertRow {
    when: String,
    kind: String,
    message: String,
}

pub(super) struct MovementRow {
    when: String,
    what: String,
    sats: String,
    status: String,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    wallet: WalletView,
    status: StatusView,
    todo: Vec<TodoItem>,
    /// What a claim of the exits just did, or why it failed.
    claimed: Option<String>,
    error: Option<String>,
    ark_server: String,
    chain_tip: String,
    expiry: Vec<ExpiryBar>,
    exits: Vec<(&'static str, u64)>,
    reserve: Option<String>,
    movements: Vec<MovementRow>,
    alerts: Vec<AlertRow>,
    backups_configured: bool,
    newest_backup: Option<String>,
    /// The notification types the page's script listens for (`live.js`).
    live_types: String,
}

/// Upper bounds of the chart's bars, in blocks to the exit deadline, with their
/// labels (about a day is 144 blocks).
const BARS: [(i64, &str); 6] = [
    (0, "past the deadline"),
    (36, "within 6 hours"),
    (144, "within a day"),
    (1008, "within a week"),
    (4032, "within four weeks"),
    (i64::MAX, "later"),
];

/// How many newest movements the overview lists.
const MOVEMENTS: usize = 8;
/// How many newest alerts it lists, found among the newest events.
const ALERTS: usize = 5;
const ALERTS_AMONG: u64 = 500;

/// The overview; `admin`: the viewer may administer the box (it sees the payments
/// waiting for approval, and every device's approval events among the alerts); `own`:
/// the viewer is a device that sees only its own payments.
pub(super) async fn overview(state: &AppState, admin: bool, own: Option<&str>) -> Response {
    overview_with(state, admin, own, Outcome::default()).await
}

/// What a form posted from the overview (the exits' claim) did.
#[derive(Default)]
pub(super) struct Outcome {
    claimed: Option<String>,
    error: Option<String>,
}

async fn overview_with(
    state: &AppState,
    admin: bool,
    own: Option<&str>,
    outcome: Outcome,
) -> Response {
    let now = crate::api::status::snapshot(state, crate::api::status::Reading::WithBalances).await;
    if let Some(e) = &now.wallet.unreadable {
        tracing::error!(target: "berth::console", error = %e, "cannot read the wallet");
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let wallet = match (&now.wallet.record, &now.balances) {
        (None, _) => WalletView::None,
        (Some(record), _) if now.wallet.locked => WalletView::Locked {
            fingerprint: record.fingerprint.to_string(),
        },
        (Some(record), balances) => {
            let fingerprint = record.fingerprint.to_string();
            let balances = balances.as_ref().map(balance_view);
            if now.wallet.loaded {
                WalletView::Loaded {
                    fingerprint,
                    balances,
                }
            } else {
                // The Ark balance comes from the store while the wallet cannot open.
                WalletView::NotLoaded {
                    fingerprint,
                    balances,
                }
            }
        }
    };
    let engine = &state.engine;
    let seen = &now.seen;
    let ark_server = match seen.ark_server.reachable {
        Some(true) => "reachable".to_owned(),
        Some(false) => format!(
            "unreachable ({} failed checks in a row)",
            seen.ark_server.consecutive_failures
        ),
        None => "not checked yet".to_owned(),
    };
    let chain_tip = match seen.chain_tip {
        Some(tip) => {
            let minutes = tip.seen_at.elapsed().map_or(0, |d| d.as_secs() / 60);
            format!("block {}, seen {minutes} min ago", tip.height)
        }
        None => "not known yet".to_owned(),
    };
    let mut sums = [0u64; BARS.len()];
    if let Some(tip) = seen.chain_tip {
        for vtxo in &seen.vtxos {
            let left = crate::engine::autopilot::blocks_to_deadline(vtxo, tip.height);
            let bar = BARS
                .iter()
                .position(|(bound, _)| left <= *bound)
                .unwrap_or(BARS.len() - 1);
            sums[bar] = sums[bar].saturating_add(vtxo.amount.to_sat());
        }
    }
    let largest = sums.iter().copied().max().unwrap_or(0).max(1);
    let expiry = if seen.vtxos.is_empty() {
        Vec::new()
    } else {
        BARS.iter()
            .zip(sums)
            .map(|((_, label), sats)| ExpiryBar {
                label: (*label).to_owned(),
                sats: crate::engine::spending::sats(sats),
                percent: sats.saturating_mul(100) / largest,
            })
            .collect()
    };
    let exits: Vec<(&'static str, u64)> = seen
        .exits_by_phase
        .iter()
        .copied()
        .filter(|(_, n)| *n > 0)
        .collect();
    let reserve = seen.reserve.map(|r| {
        if r.sufficient() {
            format!(
                "the on-chain coins ({} sats) pay for exiting every VTXO (about {} sats)",
                r.available.to_sat(),
                r.needed.to_sat()
            )
        } else {
            format!(
                "the on-chain coins ({} sats) cannot pay for exiting every VTXO (about {} sats): \
                 add {} sats",
                r.available.to_sat(),
                r.needed.to_sat(),
                r.needed.to_sat().saturating_sub(r.available.to_sat())
            )
        }
    });
    let movements = match &wallet {
        WalletView::Loaded { .. } => match own {
            None => engine
                .reads()
                .history_page(None, MOVEMENTS)
                .await
                .unwrap_or_default(),
            Some(device) => {
                let mut all = engine.reads().history(None).await.unwrap_or_default();
                all.retain(|m| crate::engine::spending::paid_by(m, device));
                all.truncate(MOVEMENTS);
                all
            }
        }
        .into_iter()
        .map(|m| MovementRow {
            when: m.time.created_at.format("%Y-%m-%d %H:%M").to_string(),
            what: super::history::kind_name(&m),
            sats: super::history::signed_sats(m.effective_balance),
            status: format!("{:?}", m.status).to_lowercase(),
        })
        .collect(),
        _ => Vec::new(),
    };
    let alerts = recent_alerts(state, admin).await;
    let approvals_waiting = if admin {
        state
            .engine
            .approvals()
            .list()
            .await
            .map(|all| {
                all.iter()
                    .filter(|a| a.record.state == crate::store::approvals::state::PENDING)
                    .count()
            })
            .unwrap_or(0)
    } else {
        0
    };
    let todo = if admin {
        needs_you(&now, approvals_waiting)
    } else {
        Vec::new()
    };
    let status = status_view(&now);
    let backups = now.backup;
    let frame = Frame::new(state);
    page(
        StatusCode::OK,
        &OverviewPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            wallet,
            status,
            todo,
            claimed: outcome.claimed,
            error: outcome.error,
            ark_server,
            chain_tip,
            expiry,
            exits,
            reserve,
            movements,
            alerts,
            backups_configured: backups.configured,
            newest_backup: backups
                .newest_verified
                .map(|(_, at)| at.format("%Y-%m-%d %H:%M UTC").to_string()),
            live_types: crate::api::v1::notifications::type_names().join(","),
        },
    )
}

fn balance_view(b: &crate::api::status::Balances) -> BalanceView {
    let sats = |a: bitcoin::Amount| crate::engine::spending::sats(a.to_sat());
    let ark = &b.ark;
    let mut beneath: Vec<(&'static str, String)> = [
        ("Pending in a round", ark.pending_in_round),
        ("Pending board", ark.pending_board),
        ("Pending Lightning send", ark.pending_lightning_send),
        ("Pending exit", ark.pending_exit),
    ]
    .into_iter()
    .filter(|(_, a)| *a > bitcoin::Amount::ZERO)
    .map(|(name, a)| (name, sats(a)))
    .collect();
    if let (Some(confirmed), Some(unconfirmed)) = (b.onchain_confirmed(), b.onchain_unconfirmed()) {
        beneath.push(("On-chain, confirmed", sats(confirmed)));
        if unconfirmed > bitcoin::Amount::ZERO {
            beneath.push(("On-chain, unconfirmed", sats(unconfirmed)));
        }
    }
    BalanceView {
        spendable: sats(ark.spendable),
        beneath,
    }
}

/// The `/health` verdict as one badge; a box without a wallet is not "all good" (it
/// cannot hold anything yet).
fn status_view(now: &crate::api::status::Snapshot) -> StatusView {
    use crate::api::status::Level;
    let reasons = now.verdict.reasons.clone();
    let fine = "The wallet, the Ark server, the chain, the backups and the VTXOs' expiry are                 all in order.";
    match now.verdict.level {
        _ if !now.wallet.exists && now.wallet.unreadable.is_none() => StatusView {
            class: "warn",
            word: "Not set up",
            reasons: vec!["there is no wallet yet".into()],
            fine,
        },
        Level::Ready => StatusView {
            class: "ok",
            word: "All good",
            reasons,
            fine,
        },
        Level::Degraded => StatusView {
            class: "warn",
            word: "Needs attention",
            reasons,
            fine,
        },
        Level::Failing => StatusView {
            class: "bad",
            word: "Something is wrong",
            reasons,
            fine,
        },
    }
}

/// What only the owner can do, now: the home screen's "Needs you".
fn needs_you(now: &crate::api::status::Snapshot, approvals_waiting: usize) -> Vec<TodoItem> {
    let item = |text: String, link: Option<(&'static str, &'static str)>| TodoItem {
        text,
        link,
        claim: false,
    };
    let mut todo = Vec::new();
    if !now.wallet.exists && now.wallet.unreadable.is_none() {
        todo.push(item(
            "The box has no wallet yet.".into(),
            Some(("/console/wallet", "Create or import the wallet")),
        ));
    }
    if now.wallet.locked {
        todo.push(item(
            "The wallet is locked: it waits for its seed's passphrase.".into(),
            Some(("/console/unlock", "Unlock it")),
        ));
    }
    if approvals_waiting > 0 {
        todo.push(item(
            format!("{approvals_waiting} payment(s) wait for your approval."),
            Some(("/console/approvals", "Answer them")),
        ));
    }
    if now.backup.configured && now.wallet.exists {
        if let Some(error) = &now.backup.last_error {
            todo.push(item(
                format!("The last backup failed: {error}"),
                Some(("/console/backups", "See the backups")),
            ));
        }
    } else if now.wallet.exists {
        todo.push(item(
            "No backup directory is configured: the wallet's state is backed up nowhere              (the phrase alone restores the funds, not the history or the labels)."
                .into(),
            Some(("/console/settings", "See the settings")),
        ));
    }
    let (_, claimable) = now.exits();
    if claimable > 0 {
        todo.push(TodoItem {
            text: format!(
                "{claimable} exit(s) can be claimed: their funds wait on-chain for a                  transaction that moves them into the wallet."
            ),
            link: None,
            claim: true,
        });
    }
    if let Some(r) = now.seen.reserve
        && !r.sufficient()
    {
        todo.push(item(
            format!(
                "Add {} sats on-chain, so that every VTXO can be exited if the Ark server                  goes away.",
                crate::engine::spending::sats(r.needed.to_sat().saturating_sub(r.available.to_sat()))
            ),
            Some(("/console/receive", "Receive on-chain")),
        ));
    }
    for webhook in now.webhooks.iter().filter(|w| w.disabled_by_failures) {
        todo.push(item(
            format!(
                "Webhook {} was disabled after failing for three days.",
                webhook.id
            ),
            Some(("/console/webhooks", "See the webhooks")),
        ));
    }
    todo
}

/// `POST /console/exits/claim`: every claimable exit, to a new address of the wallet's
/// on-chain side, through the API's own route (`POST /api/v1/exits/claim/all`) as this
/// browser's device: the same scopes, rules and approvals.
pub(super) async fn claim_exits(
    axum::extract::State(state): axum::extract::State<AppState>,
    super::routes::Signed(who): super::routes::Signed,
) -> Response {
    use crate::access::scopes::Scope;
    let admin = who.scopes.allows(Scope::Admin);
    let outcome = match state.engine.onchain().next_address().await {
        Err(e) => Err(format!(
            "No claim: {}.",
            crate::api::error::ApiError::from(e)
        )),
        Ok(address) => {
            let body = serde_json::json!({ "destination": address.to_string() });
            let answer =
                super::send::as_device(&state, &who, "/api/v1/exits/claim/all", body, None).await;
            match answer.status {
                200 => Ok(format!(
                    "Claimed: transaction {}.",
                    answer.body["txid"].as_str().unwrap_or("?")
                )),
                202 => Ok(answer.message()),
                _ => Err(format!("No claim: {}.", answer.message())),
            }
        }
    };
    let outcome = match outcome {
        Ok(claimed) => Outcome {
            claimed: Some(claimed),
            error: None,
        },
        Err(error) => Outcome {
            claimed: None,
            error: Some(error),
        },
    };
    match super::own_history(&state, &who).await {
        Ok(own) => overview_with(&state, admin, own, outcome).await,
        Err(refused) => refused,
    }
}

/// The newest alerts of the event log (among its newest events), newest first.
async fn recent_alerts(state: &AppState, admin: bool) -> Vec<AlertRow> {
    let latest = state.events.latest_id();
    let from = latest.saturating_sub(ALERTS_AMONG);
    let Ok(page) = state
        .events
        .read_after(from, usize::try_from(ALERTS_AMONG).unwrap_or(usize::MAX))
        .await
    else {
        return Vec::new();
    };
    page.events
        .iter()
        .rev()
        .filter_map(|event| {
            let alert = event.alert.as_ref()?;
            // Another device's payments are the owner's business only.
            if !admin && alert.approval.is_some() {
                return None;
            }
            let kind = serde_json::to_value(event.kind)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            Some(AlertRow {
                when: event.at().format("%Y-%m-%d %H:%M UTC").to_string(),
                kind,
                message: alert.message.clone(),
            })
        })
        .take(ALERTS)
        .collect()
}

//! The overview: the wallet's balances by state (or that it is locked), when its VTXOs expire (a bar chart of
//! value by blocks left), exits under way and whether the on-chain coins can pay for
//! them, the Ark server and the chain as the autopilot last saw them, the newest
//! movements, the newest alerts of the event log, and the backups: the daemon's status
//! snapshot (`api::status`), which `/health` and `/metrics` render too; nothing here
//! probes anything. The page's script (`live.js`)
//! keeps it current: each event on the notifications websocket fetches it again.

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
        balances: Vec<(&'static str, u64)>,
    },
    Loaded {
        fingerprint: String,
        balances: Vec<(&'static str, u64)>,
    },
}

/// One bar of the expiry chart: unspent value whose exit deadline is within `label`.
pub(super) struct ExpiryBar {
    label: String,
    sats: u64,
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
    sats: i64,
    status: String,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    hostname: String,
    pin: Option<String>,
    signed_in: bool,
    wallet: WalletView,
    ark_server: String,
    chain_tip: String,
    expiry: Vec<ExpiryBar>,
    exits: Vec<(&'static str, u64)>,
    reserve: Option<String>,
    movements: Vec<MovementRow>,
    alerts: Vec<AlertRow>,
    /// Payments waiting for the owner's approval (admin viewers only).
    approvals_waiting: usize,
    backups_configured: bool,
    newest_backup: Option<String>,
    backup_error: Option<String>,
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
            let mut shown = Vec::new();
            if let Some(b) = balances {
                let ark = &b.ark;
                shown = vec![
                    ("Spendable", ark.spendable.to_sat()),
                    ("Pending in a round", ark.pending_in_round.to_sat()),
                    ("Pending board", ark.pending_board.to_sat()),
                    (
                        "Pending Lightning send",
                        ark.pending_lightning_send.to_sat(),
                    ),
                    ("Pending exit", ark.pending_exit.to_sat()),
                ];
                if let (Some(confirmed), Some(unconfirmed)) =
                    (b.onchain_confirmed(), b.onchain_unconfirmed())
                {
                    shown.push(("On-chain, confirmed", confirmed.to_sat()));
                    shown.push(("On-chain, unconfirmed", unconfirmed.to_sat()));
                }
            }
            if now.wallet.loaded {
                WalletView::Loaded {
                    fingerprint,
                    balances: shown,
                }
            } else {
                // The Ark balance comes from the store while the wallet cannot open.
                WalletView::NotLoaded {
                    fingerprint,
                    balances: shown,
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
                sats,
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
            what: format!("{} {}", m.subsystem.name, m.subsystem.kind),
            sats: m.effective_balance.to_sat(),
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
    let backups = now.backup;
    let frame = Frame::new(state);
    page(
        StatusCode::OK,
        &OverviewPage {
            hostname: frame.hostname,
            pin: frame.pin,
            signed_in: true,
            wallet,
            ark_server,
            chain_tip,
            expiry,
            exits,
            reserve,
            movements,
            alerts,
            approvals_waiting,
            backups_configured: backups.configured,
            newest_backup: backups
                .newest_verified
                .map(|(_, at)| at.format("%Y-%m-%d %H:%M UTC").to_string()),
            backup_error: backups.last_error,
            live_types: crate::api::v1::notifications::type_names().join(","),
        },
    )
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

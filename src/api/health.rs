//! `GET /health`: whether the appliance can keep its promises, for a monitor, systemd
//! or a phone. 200 when ready, 503 otherwise. Anyone may ask and gets the verdict and
//! its reasons; the facts behind them (balances needed and available, VTXO and exit
//! counts, error texts) only go to a caller whose credential carries `read`, since an
//! anonymous caller on the LAN has no business knowing the wallet's money. It renders
//! the daemon's status snapshot (`api::status`: what the autopilot last saw, a check
//! every minute and on every block) instead of probing anything itself, so polling it
//! costs nothing and cannot be used to hammer the Ark server or the chain source. The
//! verdict's rules, which `api::status` applies:
//!
//! - `failing`: the wallet database stopped after a storage error, the disk is inside
//!   the reserve berthd keeps free (< 64 MiB, `api::disk`: changes are refused), or a
//!   VTXO is past its exit deadline.
//! - `degraded`: the wallet is locked or not loaded yet, the Ark server is unreachable, the chain
//!   tip is unknown, VTXOs are within the exit margin, the exit reserve is short, the disk is low (< 1 GiB),
//!   a background task keeps failing, the wallet was imported and seed recovery
//!   could not restore everything it found, or scheduled backups are failing or the
//!   newest verified backup is older than `[backup] interval_hours` and a day.
//! - `ready`: none of these (also before any wallet exists).

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Serialize;

use crate::access::scopes::Scope;
use crate::api::AppState;
use crate::api::auth::{Authenticator, peer_ip};
use crate::api::error::{ApiError, ErrorResponse};
use crate::api::status::{self, Level, Snapshot, utc};

/// The verdict, and for a caller with `read` the facts behind it (every other field:
/// absent for anyone else).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `ready`, `degraded` or `failing`.
    pub status: &'static str,
    /// Why it is not `ready` (empty when it is).
    pub reasons: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub wallet: Option<WalletHealth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub ark_server: Option<ArkServerHealth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub chain_tip: Option<ChainTipHealth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub autopilot: Option<AutopilotHealth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub vtxo_expiry: Option<VtxoExpiryHealth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub exits: Option<ExitsHealth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub exit_reserve: Option<ExitReserveHealth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub store: Option<StoreHealth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub disk: Option<DiskHealth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub tasks: Option<Vec<TaskHealth>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub backup: Option<BackupHealth>,
    /// The Nostr Wallet Connect relays berthd is connected to (or trying): one per
    /// relay some connection names.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub nwc_relays: Option<Vec<NwcRelayHealth>>,
    /// Every webhook and how its delivery stands.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub webhooks: Option<Vec<WebhookHealth>>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookHealth {
    pub id: String,
    pub enabled: bool,
    /// berthd disabled it after it failed for about three days.
    pub disabled_by_failures: bool,
    /// Failed attempts at the event it is delivering now (0: delivering fine).
    pub failed_attempts: u32,
    pub failing_since: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NwcRelayHealth {
    pub url: String,
    pub connected: bool,
    /// Since when, while connected.
    pub connected_since: Option<chrono::DateTime<chrono::Utc>>,
    /// Attempts that failed in a row, while not connected.
    pub failed_attempts: u32,
    /// Why the last attempt failed or the connection ended.
    pub error: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WalletHealth {
    pub exists: bool,
    pub loaded: bool,
    /// Waiting for its seed's passphrase (`POST /api/v1/wallet/unlock`).
    pub locked: bool,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ArkServerHealth {
    /// `null` before the first probe (or without a loaded wallet).
    pub reachable: Option<bool>,
    pub last_reachable_at: Option<chrono::DateTime<chrono::Utc>>,
    pub consecutive_failures: u32,
    pub error: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChainTipHealth {
    pub height: Option<u32>,
    /// Seconds since berthd first saw this tip.
    pub age_secs: Option<u64>,
}

/// Whether berthd acts on the wallet on its own (`docs/headless.md`). Every field is
/// `null` before the autopilot's first check of a loaded wallet.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AutopilotHealth {
    /// The watchdog may join rounds and start exits on its own: `watchdog` is on and
    /// `manual_sync` off.
    pub acting: Option<bool>,
    /// `daemon_manual_sync` in the wallet's `config.toml`, as barkd reads it: when
    /// true, nothing syncs, refreshes in rounds or advances exits until a client asks,
    /// and the watchdog only watches and alerts.
    pub manual_sync: Option<bool>,
    /// `[watchdog] enabled` in `berth.toml`.
    pub watchdog: Option<bool>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct VtxoExpiryHealth {
    /// Unspent VTXOs not being exited.
    pub vtxos: usize,
    /// Blocks until the first of them can no longer be exited safely.
    pub blocks_until_first_at_risk: Option<i64>,
    /// Within the warning window.
    pub expiring: usize,
    /// Within the exit margin: being refreshed, or exited.
    pub at_risk: usize,
    /// Of `at_risk`, those locked or in a pending round: the watchdog never exits them.
    pub held: usize,
    /// When the Ark server said its next round starts (`null` when it did not answer).
    pub next_round_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The watchdog's thresholds in effect (`null` before its first check of a
    /// loaded wallet).
    pub thresholds: Option<WatchdogThresholds>,
}

/// The watchdog's thresholds and what they come from (`docs/headless.md`, "Thresholds").
/// Block counts are to a VTXO's exit deadline unless said otherwise.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WatchdogThresholds {
    /// A `vtxo-expiring` alert this close to the deadline.
    pub warn_blocks: u32,
    /// A VTXO this close to the deadline is at risk: exited if no refresh can happen
    /// by bark's account (the server away, or its refreshes failing).
    pub exit_margin_blocks: u32,
    /// bark's `vtxo_refresh_expiry_threshold`: the maintenance refresh takes a VTXO into
    /// the next round this close to its expiry.
    pub refresh_threshold_blocks: u32,
    /// Failed refresh attempts (bark's refreshes of a VTXO at risk that failed, and
    /// blocks gone by with the Ark server not answering) before a VTXO at risk is
    /// exited.
    pub refresh_attempts: u32,
    /// bark's `vtxo_exit_margin`: the least exit margin.
    pub bark_exit_margin_blocks: u32,
    /// The Ark server's VTXO lifetime (`null` until the wallet has reached it); the
    /// thresholds are at most half of it.
    pub vtxo_lifetime_blocks: Option<u32>,
    /// The Ark server's exit delta: blocks from an exit's confirmation until its funds
    /// are claimable. It does not move the exit deadline.
    pub vtxo_exit_delta_blocks: Option<u32>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ExitsHealth {
    pub in_progress: u64,
    pub claimable: u64,
    /// Started by the watchdog since berthd started.
    pub started_automatically: u64,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ExitReserveHealth {
    /// `null` until estimated.
    pub sufficient: Option<bool>,
    pub needed_sat: Option<u64>,
    pub available_sat: Option<u64>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct StoreHealth {
    /// No storage error has stopped the database.
    pub writable: bool,
    pub error: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DiskHealth {
    pub free_bytes: Option<u64>,
    pub total_bytes: Option<u64>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TaskHealth {
    pub name: String,
    pub healthy: bool,
    pub failures: u64,
    pub consecutive_failures: u32,
    pub last_error: Option<String>,
    pub retry_at: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BackupHealth {
    /// A backup directory is configured (`[backup] directory`).
    pub configured: bool,
    /// When the newest verified backup was taken.
    pub newest_verified_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Its age in seconds.
    pub age_secs: Option<u64>,
    /// Scheduled backups that failed in a row (0 when the last one worked).
    pub consecutive_failures: u32,
    /// Why the last one failed: the reason for the `admin` scope only (it names paths),
    /// that it failed for anyone else.
    pub last_error: Option<String>,
}

/// `GET /health`
#[utoipa::path(
    get,
    path = "/health",
    tag = "health",
    summary = "Health",
    description = "Whether berthd can keep its promises: 200 with `status: ready`, else 503 with \
        `degraded` or `failing` and the reasons. Needs no credential; the facts behind the \
        verdict (every field but `status` and `reasons`) are only given to a bearer token \
        with the `read` scope. A wrong token is refused as on every other route. Reads what \
        the autopilot last saw (every minute and on every block); it probes nothing itself.",
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 401, description = "A wrong bearer token", body = ErrorResponse),
        (status = 429, description = "Too many failed attempts from this address", body = ErrorResponse),
        (status = 503, description = "Degraded or failing", body = Health),
    )
)]
pub async fn health(
    State(state): State<AppState>,
    Extension(authenticator): Extension<Authenticator>,
    request: Request,
) -> Result<(StatusCode, Json<Health>), ApiError> {
    let caller = authenticator.identify(request.headers(), peer_ip(&request))?;
    let detailed = caller
        .as_ref()
        .is_some_and(|c| c.scopes.allows(Scope::Read));
    let admin = caller.is_some_and(|c| c.scopes.allows(Scope::Admin));
    let now = status::snapshot(&state, status::Reading::Facts).await;
    let code = match now.verdict.level {
        Level::Ready => StatusCode::OK,
        Level::Degraded | Level::Failing => StatusCode::SERVICE_UNAVAILABLE,
    };
    let body = if detailed {
        detailed_health(now, admin)
    } else {
        Health {
            status: now.verdict.level.name(),
            reasons: now.verdict.reasons,
            wallet: None,
            ark_server: None,
            chain_tip: None,
            autopilot: None,
            vtxo_expiry: None,
            exits: None,
            exit_reserve: None,
            store: None,
            disk: None,
            tasks: None,
            backup: None,
            nwc_relays: None,
            webhooks: None,
        }
    };
    Ok((code, Json(body)))
}

/// Everything behind the verdict, for a caller with `read` (the backup error's text for
/// an admin only).
fn detailed_health(now: Snapshot, admin: bool) -> Health {
    let (in_progress, claimable) = now.exits();
    let Snapshot {
        wallet,
        seen,
        store_error,
        disk,
        tasks,
        backup,
        backup_age_secs,
        nwc_relays,
        webhooks,
        verdict,
        ..
    } = now;
    Health {
        status: verdict.level.name(),
        reasons: verdict.reasons,
        wallet: Some(WalletHealth {
            exists: wallet.exists,
            loaded: wallet.loaded,
            locked: wallet.locked,
        }),
        ark_server: Some(ArkServerHealth {
            reachable: seen.ark_server.reachable,
            last_reachable_at: seen.ark_server.last_reachable_at.map(utc),
            consecutive_failures: seen.ark_server.consecutive_failures,
            error: seen.ark_server.last_error.clone(),
        }),
        chain_tip: Some(ChainTipHealth {
            height: seen.chain_tip.map(|t| t.height),
            age_secs: seen
                .chain_tip
                .and_then(|t| t.seen_at.elapsed().ok())
                .map(|d| d.as_secs()),
        }),
        autopilot: Some(AutopilotHealth {
            acting: seen.acting.map(|a| a.on()),
            manual_sync: seen.acting.map(|a| a.manual_sync),
            watchdog: seen.acting.map(|a| a.watchdog),
        }),
        vtxo_expiry: Some(VtxoExpiryHealth {
            vtxos: seen.vtxos.len(),
            blocks_until_first_at_risk: seen.first_deadline,
            expiring: seen.expiring,
            at_risk: seen.at_risk,
            held: seen.held,
            next_round_at: seen.next_round_at.map(utc),
            thresholds: seen.thresholds.map(|t| WatchdogThresholds {
                warn_blocks: t.warn_blocks,
                exit_margin_blocks: t.exit_margin_blocks,
                refresh_threshold_blocks: t.refresh_threshold_blocks,
                refresh_attempts: t.refresh_attempts,
                bark_exit_margin_blocks: t.sources.bark_exit_margin,
                vtxo_lifetime_blocks: t.sources.vtxo_lifetime,
                vtxo_exit_delta_blocks: t.sources.vtxo_exit_delta,
            }),
        }),
        exits: Some(ExitsHealth {
            in_progress,
            claimable,
            started_automatically: seen.exits_started_automatically,
        }),
        exit_reserve: Some(ExitReserveHealth {
            sufficient: seen.reserve.map(|r| r.sufficient()),
            needed_sat: seen.reserve.map(|r| r.needed.to_sat()),
            available_sat: seen.reserve.map(|r| r.available.to_sat()),
        }),
        store: Some(StoreHealth {
            writable: store_error.is_none(),
            error: store_error,
        }),
        disk: Some(DiskHealth {
            free_bytes: disk.map(|d| d.0),
            total_bytes: disk.map(|d| d.1),
        }),
        tasks: Some(
            tasks
                .into_iter()
                .map(|(name, t)| TaskHealth {
                    name: name.to_string(),
                    healthy: t.consecutive_failures == 0,
                    failures: t.failures,
                    consecutive_failures: t.consecutive_failures,
                    last_error: t.last_error,
                    retry_at: t.retry_at.map(utc),
                })
                .collect(),
        ),
        backup: Some(BackupHealth {
            configured: backup.configured,
            newest_verified_at: backup.newest_verified.map(|(_, at)| at),
            age_secs: backup_age_secs,
            consecutive_failures: backup.consecutive_failures,
            last_error: backup
                .last_error
                .map(|e| crate::api::v1::backups::withheld(e, admin)),
        }),
        nwc_relays: Some(
            nwc_relays
                .into_iter()
                .map(|(url, state)| {
                    use crate::nwc::RelayState;
                    let (connected_since, failed_attempts, error) = match state {
                        RelayState::Connected { since } => (Some(utc(since)), 0, None),
                        RelayState::Connecting => (None, 0, None),
                        RelayState::Waiting { attempts, error } => (None, attempts, Some(error)),
                    };
                    NwcRelayHealth {
                        url,
                        connected: connected_since.is_some(),
                        connected_since,
                        failed_attempts,
                        error,
                    }
                })
                .collect(),
        ),
        webhooks: Some(
            webhooks
                .into_iter()
                .map(|w| WebhookHealth {
                    id: w.id,
                    enabled: w.enabled,
                    disabled_by_failures: w.disabled_by_failures,
                    failed_attempts: w.failed_attempts,
                    failing_since: w.failing_since_us.map(crate::events::timestamp),
                })
                .collect(),
        ),
    }
}

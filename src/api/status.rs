//! One status snapshot: what the wallet, its balances, the Ark server, the chain, the
//! exits, the disk, the background tasks and the backups look like now, gathered in one
//! place ([`snapshot`]) with the verdict drawn from them ([`Verdict`]). `/health`, the
//! console's overview, `/metrics` and the systemd watchdog render it; none of them
//! gathers a fact of its own, so they cannot disagree (before, the on-chain
//! "unconfirmed" of `/metrics` counted immature coins and the console's did not, and
//! `/metrics` said a wallet was loaded while `/health` said it was not).
//!
//! It reads what the engine and the autopilot already hold (the autopilot's last check,
//! every minute and on every block): taking it probes nothing, so it is cheap enough for
//! every request.

use std::time::SystemTime;

use bitcoin::Amount;

use crate::api::AppState;
use crate::api::disk;
use crate::engine::autopilot;
use crate::engine::backup::service::BackupStatus;
use crate::engine::supervisor::TaskStatus;
use crate::store::WalletRecord;

/// The daemon's state now.
#[derive(Debug)]
pub struct Snapshot {
    pub wallet: WalletState,
    /// The wallet's balances, when asked for ([`Reading::WithBalances`]): the Ark
    /// balance whenever the wallet exists and is not locked (from the store while bark
    /// cannot open it), the on-chain one only while it is loaded.
    pub balances: Option<Balances>,
    /// What the autopilot saw at its last check.
    pub seen: autopilot::Status,
    /// Why the wallet database stopped, if it did.
    pub store_error: Option<String>,
    /// Free and total bytes of the datadir's filesystem.
    pub disk: Option<(u64, u64)>,
    pub tasks: Vec<(&'static str, TaskStatus)>,
    pub backup: BackupStatus,
    /// Seconds since the newest verified backup was taken.
    pub backup_age_secs: Option<u64>,
    /// Each Nostr Wallet Connect relay berthd keeps a connection to, and its state.
    pub nwc_relays: Vec<(String, crate::nwc::RelayState)>,
    /// Each webhook endpoint's delivery state.
    pub webhooks: Vec<crate::webhooks::WebhookState>,
    pub verdict: Verdict,
}

/// Where the wallet is.
#[derive(Debug)]
pub struct WalletState {
    pub record: Option<WalletRecord>,
    /// Why the wallet's record could not be read (then `record` is `None`).
    pub unreadable: Option<String>,
    pub exists: bool,
    /// bark has it open.
    pub loaded: bool,
    /// It waits for its seed's passphrase.
    pub locked: bool,
}

/// The wallet's balances.
#[derive(Debug)]
pub struct Balances {
    pub ark: bark::Balance,
    /// `None` while the wallet is not loaded.
    pub onchain: Option<bdk_wallet::Balance>,
}

impl Balances {
    /// On-chain coins not yet spendable: unconfirmed (ours or others') and immature
    /// (a coinbase younger than 100 blocks), so that confirmed and unconfirmed add up
    /// to everything on-chain.
    pub fn onchain_unconfirmed(&self) -> Option<Amount> {
        self.onchain
            .as_ref()
            .map(|b| b.trusted_pending + b.untrusted_pending + b.immature)
    }

    pub fn onchain_confirmed(&self) -> Option<Amount> {
        self.onchain.as_ref().map(|b| b.confirmed)
    }
}

/// How well berthd can keep its promises, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Ready,
    Degraded,
    Failing,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Ready => "ready",
            Level::Degraded => "degraded",
            Level::Failing => "failing",
        }
    }
}

#[derive(Debug)]
pub struct Verdict {
    pub level: Level,
    /// What fails first, then what degrades (empty when ready).
    pub reasons: Vec<String>,
}

impl Snapshot {
    /// The exits under way (every phase before claimable), and the claimable ones.
    pub fn exits(&self) -> (u64, u64) {
        let phase = |name: &str| {
            self.seen
                .exits_by_phase
                .iter()
                .find(|(p, _)| *p == name)
                .map_or(0, |(_, n)| *n)
        };
        (
            phase("start")
                + phase("processing")
                + phase("awaiting-delta")
                + phase("claim-in-progress"),
            phase("claimable"),
        )
    }
}

/// What a snapshot reads besides the facts every reader needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// The facts the verdict is drawn from: for `/health` and the watchdog.
    Facts,
    /// And the balances: for the console's overview and `/metrics`. The on-chain
    /// balance waits for bark's on-chain wallet, which an on-chain sync holds for as
    /// long as the chain source takes to answer; `/health` and the watchdog must not
    /// wait on that (a slow chain source would otherwise stop the watchdog's pings and
    /// get berthd restarted).
    WithBalances,
}

/// Take the snapshot.
pub async fn snapshot(state: &AppState, reading: Reading) -> Snapshot {
    let engine = &state.engine;
    let seen = engine.autopilot_status();
    let (record, unreadable) = match engine.wallet_record().await {
        Ok(record) => (record, None),
        Err(e) => (None, Some(e.to_string())),
    };
    let exists = record.is_some();
    let loaded = engine.is_loaded();
    let locked = exists && engine.is_locked();
    let balances = if reading == Reading::WithBalances && exists && !locked {
        match engine.reads().balance().await {
            Ok(ark) => Some(Balances {
                ark,
                onchain: if loaded {
                    engine.onchain().balance().await.ok()
                } else {
                    None
                },
            }),
            Err(_) => None,
        }
    } else {
        None
    };
    let store_error = engine.store_failure();
    let datadir = engine.datadir().to_path_buf();
    let disk = tokio::task::spawn_blocking(move || disk::space(&datadir).ok())
        .await
        .ok()
        .flatten();
    let tasks = engine.tasks();
    let backup = state.backups.status();
    let backup_age_secs = backup
        .newest_verified
        .as_ref()
        .map(|(_, at)| (chrono::Utc::now() - *at).num_seconds().max(0) as u64);
    let wallet = WalletState {
        record,
        unreadable,
        exists,
        loaded,
        locked,
    };
    let webhooks = state.webhooks.states().await;
    let verdict = verdict(
        &wallet,
        &seen,
        store_error.is_some(),
        disk,
        &tasks,
        &backup,
        backup_age_secs,
        state.backups.interval().as_secs(),
        &webhooks,
    );
    Snapshot {
        nwc_relays: state.nwc.relay_states(),
        webhooks,
        wallet,
        balances,
        seen,
        store_error,
        disk,
        tasks,
        backup,
        backup_age_secs,
        verdict,
    }
}

/// The verdict `/health` gives (its module documentation lists the rules).
#[allow(clippy::too_many_arguments)]
fn verdict(
    wallet: &WalletState,
    seen: &autopilot::Status,
    store_failed: bool,
    disk: Option<(u64, u64)>,
    tasks: &[(&'static str, TaskStatus)],
    backup: &BackupStatus,
    backup_age_secs: Option<u64>,
    backup_interval_secs: u64,
    webhooks: &[crate::webhooks::WebhookState],
) -> Verdict {
    let mut failing = Vec::new();
    let mut degraded = Vec::new();
    if store_failed {
        // The error itself is a detail (`store.error`): it may name paths and internals.
        failing.push("the wallet database stopped after a storage error".into());
    }
    match disk {
        Some((free, _)) if free < disk::RESERVE => failing.push(format!(
            "the disk is nearly full ({free} bytes free): berthd refuses changes until space is freed"
        )),
        Some((free, _)) if free < disk::LOW => {
            degraded.push(format!("the disk is low ({free} bytes free)"))
        }
        _ => {}
    }
    if wallet.locked {
        degraded.push(
            "the wallet is locked: it waits for its seed's passphrase (the console's unlock \
             page, or POST /api/v1/wallet/unlock)"
                .into(),
        );
    } else if wallet.exists && !wallet.loaded {
        degraded.push(
            "the wallet is not loaded yet (waiting for its chain source, or for an import, \
             its Ark server)"
                .into(),
        );
    }
    // Permanent for this wallet: bark does not run seed recovery again, and the user
    // must know that the wallet may not hold everything its phrase once did.
    match wallet.record.as_ref().and_then(|r| r.recovery.as_ref()) {
        Some(crate::store::Recovery::Failed { .. }) => degraded.push(
            "seed recovery failed when the wallet was imported: VTXOs may be missing (see \
             GET /api/v1/wallet)"
                .into(),
        ),
        Some(crate::store::Recovery::Finished { counts, .. }) if counts.not_restored() > 0 => {
            degraded.push(format!(
                "seed recovery found {} VTXO(s) it could not restore when the wallet was \
                 imported: funds may be missing (see GET /api/v1/wallet)",
                counts.not_restored()
            ))
        }
        _ => {}
    }
    if wallet.loaded {
        if seen.ark_server.reachable == Some(false) {
            degraded.push("the Ark server is unreachable".into());
        }
        if seen.chain_tip.is_none() {
            degraded.push("the loaded wallet has not been checked yet (chain tip unknown)".into());
        }
        match seen.first_deadline {
            Some(left) if left < 0 => {
                failing.push("a VTXO is past the point where it can be exited safely".into())
            }
            _ if seen.at_risk > 0 => degraded.push(format!(
                "{} VTXO(s) are near expiry (being refreshed or exited; {} locked or in a round)",
                seen.at_risk, seen.held
            )),
            _ => {}
        }
        if seen.reserve.is_some_and(|r| !r.sufficient()) {
            degraded.push("the on-chain balance cannot pay for exiting every VTXO".into());
        }
    }
    if backup.configured && wallet.exists {
        // The error itself is a detail (`backup.last_error`): it names paths.
        if backup.consecutive_failures > 0 {
            degraded.push("scheduled backups are failing".into());
        }
        // A day's grace over the interval: the schedule runs late when backups fail.
        let limit = backup_interval_secs + 86_400;
        match backup_age_secs {
            Some(age) if age > limit => degraded.push(format!(
                "the newest verified backup is {} hours old",
                age / 3600
            )),
            _ => {}
        }
    }
    // By id only: a URL may carry the receiver's token, and reasons are public.
    for webhook in webhooks.iter().filter(|w| w.disabled_by_failures) {
        degraded.push(format!(
            "webhook {} was disabled: it failed for about three days",
            webhook.id
        ));
    }
    for (name, t) in tasks {
        if t.consecutive_failures >= 3 {
            degraded.push(format!("the {name} task keeps failing"));
        }
    }
    let level = if !failing.is_empty() {
        Level::Failing
    } else if !degraded.is_empty() {
        Level::Degraded
    } else {
        Level::Ready
    };
    Verdict {
        level,
        reasons: failing.into_iter().chain(degraded).collect(),
    }
}

/// A time as UTC, for the renderers.
pub fn utc(t: SystemTime) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::<chrono::Utc>::from(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wallet(exists: bool, loaded: bool, locked: bool) -> WalletState {
        WalletState {
            record: None,
            unreadable: None,
            exists,
            loaded,
            locked,
        }
    }

    /// The verdict with everything else fine: no tasks, no backups; `free` bytes of 20 GiB.
    fn judged_with(wallet: &WalletState, seen: &autopilot::Status, free: u64) -> Verdict {
        verdict(
            wallet,
            seen,
            false,
            Some((free, 20 << 30)),
            &[],
            &BackupStatus::default(),
            None,
            86_400,
            &[],
        )
    }

    /// The same with 10 GiB free.
    fn judged(wallet: &WalletState, seen: &autopilot::Status) -> Verdict {
        judged_with(wallet, seen, 10 << 30)
    }

    #[test]
    fn the_verdict_fails_first_then_degrades_and_is_ready_with_nothing_to_say() {
        let fine = autopilot::Status::default();
        let none = judged(&wallet(false, false, false), &fine);
        assert_eq!(
            (none.level, none.reasons.len()),
            (Level::Ready, 0),
            "no wallet yet"
        );

        let locked = judged(&wallet(true, false, true), &fine);
        assert_eq!(locked.level, Level::Degraded);
        assert!(locked.reasons[0].contains("locked"), "{:?}", locked.reasons);
        let opening = judged(&wallet(true, false, false), &fine);
        assert!(
            opening.reasons[0].contains("not loaded yet"),
            "{:?}",
            opening.reasons
        );

        // Loaded: the autopilot's facts count, a VTXO past its deadline fails.
        let mut seen = autopilot::Status::default();
        seen.ark_server.reachable = Some(false);
        seen.first_deadline = Some(-1);
        let loaded = judged(&wallet(true, true, false), &seen);
        assert_eq!(loaded.level, Level::Failing);
        assert!(
            loaded.reasons[0].contains("past the point"),
            "{:?}",
            loaded.reasons
        );
        assert!(
            loaded
                .reasons
                .iter()
                .any(|r| r.contains("Ark server is unreachable")),
            "the degrading reasons follow: {:?}",
            loaded.reasons
        );
        assert!(
            loaded
                .reasons
                .iter()
                .any(|r| r.contains("chain tip unknown")),
            "{:?}",
            loaded.reasons
        );

        // The disk inside the reserve fails whatever the wallet; low degrades.
        let full = judged_with(&wallet(false, false, false), &fine, disk::RESERVE - 1);
        assert_eq!(full.level, Level::Failing);
        let low = judged_with(&wallet(false, false, false), &fine, disk::LOW - 1);
        assert_eq!(low.level, Level::Degraded);
    }
}

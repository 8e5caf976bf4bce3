//! The autopilot's decisions, as pure functions of what a check saw: the watchdog's
//! thresholds ([`Thresholds::derive`]), what to do about each VTXO ([`plan`]), and the
//! exit reserve ([`reserve`]). Nothing here calls the wallet, the chain or the Ark
//! server; the tests drive it with tip heights and VTXO sets.

use std::collections::HashMap;
use std::time::Duration;

use ark::VtxoId;
use bitcoin::{Amount, FeeRate};

/// What the autopilot may do, from `berth.toml` `[watchdog]` and `[exits]`.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Start exits on its own; off leaves the alerts only.
    pub watchdog: bool,
    pub check_interval: Duration,
    /// `[watchdog] warn_blocks`: can only make the alert come earlier than derived.
    pub warn_blocks: Option<u32>,
    /// `[watchdog] exit_margin_blocks`: can only widen the derived margin.
    pub exit_margin_blocks: Option<u32>,
    pub refresh_attempts: u32,
    /// Most the estimated fees of one automatic exit batch may be.
    pub auto_exit_fee_budget: Option<Amount>,
    /// Progress passes over live exits without a new block.
    pub exit_progress_interval: Duration,
    /// A fixed fee rate for exits' fee-paying children; `None`: the estimate.
    pub exit_fee_rate: Option<FeeRate>,
    /// Cap on the estimate.
    pub max_exit_fee_rate: FeeRate,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            watchdog: true,
            check_interval: Duration::from_secs(60),
            warn_blocks: None,
            exit_margin_blocks: None,
            refresh_attempts: 3,
            auto_exit_fee_budget: None,
            exit_progress_interval: Duration::from_secs(30),
            exit_fee_rate: None,
            max_exit_fee_rate: FeeRate::from_sat_per_vb_u32(500),
        }
    }
}

/// What the watchdog's thresholds are derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sources {
    /// bark's `vtxo_refresh_expiry_threshold` (`config.toml`; 144 on mainnet, 12 on
    /// the test networks): the maintenance refresh takes a VTXO into the next round
    /// once `tip > expiry_height - this`.
    pub bark_refresh_threshold: u32,
    /// bark's `vtxo_exit_margin` (12): the blocks bark expects an exit to need.
    pub bark_exit_margin: u32,
    /// bark's `round_tx_required_confirmations` (1): a round's inputs are forfeited
    /// only once its funding transaction has this many confirmations.
    pub bark_round_confirmations: u32,
    /// The server's `vtxo_lifetime`; `None` until the wallet has reached it once.
    pub vtxo_lifetime: Option<u32>,
    /// The server's `vtxo_exit_delta`: blocks between an exit's confirmation and its
    /// funds becoming claimable. It does not move the exit deadline, but it is part of
    /// the room bark wants before it forfeits a round's inputs ([`Thresholds`]).
    pub vtxo_exit_delta: Option<u32>,
}

/// The watchdog's thresholds in effect: one value each, from [`Thresholds::derive`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Blocks before the exit deadline from which a `vtxo-expiring` alert is raised.
    pub warn_blocks: u32,
    /// Blocks before the exit deadline from which a VTXO is at risk.
    pub exit_margin_blocks: u32,
    /// bark's refresh threshold, as bark applies it (blocks before expiry).
    pub refresh_threshold_blocks: u32,
    /// Failed refresh attempts after which a VTXO at risk is exited.
    pub refresh_attempts: u32,
    /// The shortest VTXO lifetime with which bark completes a refresh: it forfeits a
    /// round's inputs only if the new VTXOs expire at least `2 × vtxo_exit_margin +
    /// exit_delta` blocks after the tip at which it forfeits, which is at the
    /// earliest `round_tx_required_confirmations` blocks after the round (bark 0.8,
    /// `check_output_vtxos_exitable`). `None` while the exit delta is unknown.
    pub refresh_needs_lifetime: Option<u32>,
    /// Whether a refresh can complete under the server's lifetime (`true` while
    /// unknown). When it cannot, a round would lock the VTXOs and never forfeit them:
    /// the maintenance refresh does not join, and no round counts as a way out.
    pub refresh_possible: bool,
    pub sources: Sources,
}

impl Thresholds {
    /// The thresholds for a wallet whose bark config and server give `sources`:
    /// - exit margin: bark's `vtxo_exit_margin`, or `[watchdog] exit_margin_blocks`
    ///   when that is wider;
    /// - warning: bark's refresh threshold, but never later than the exit margin, or
    ///   `[watchdog] warn_blocks` when that is earlier;
    /// - both at most half the server's VTXO lifetime. A margin as long as the
    ///   lifetime would put every VTXO in it from birth: the watchdog would refresh
    ///   each at every round (and, with the server down, exit it). With half, a VTXO
    ///   lives at least half its lifetime before the watchdog acts on it.
    ///
    /// A configured value tighter than the derived one is ignored: acting later than
    /// bark's own margins is never safer.
    pub fn derive(sources: Sources, policy: &Policy) -> Thresholds {
        let cap = sources.vtxo_lifetime.map_or(u32::MAX, |l| l / 2);
        let refresh_needs_lifetime = sources
            .vtxo_exit_delta
            .map(|delta| sources.bark_round_confirmations + 2 * sources.bark_exit_margin + delta);
        let refresh_possible = match (sources.vtxo_lifetime, refresh_needs_lifetime) {
            (Some(lifetime), Some(needs)) => lifetime >= needs,
            _ => true,
        };
        let exit_margin = sources
            .bark_exit_margin
            .max(policy.exit_margin_blocks.unwrap_or(0))
            .min(cap);
        let warn = sources
            .bark_refresh_threshold
            .max(exit_margin)
            .max(policy.warn_blocks.unwrap_or(0))
            .min(cap);
        Thresholds {
            warn_blocks: warn,
            exit_margin_blocks: exit_margin,
            refresh_threshold_blocks: sources.bark_refresh_threshold,
            refresh_attempts: policy.refresh_attempts,
            refresh_needs_lifetime,
            refresh_possible,
            sources,
        }
    }
}

/// Bitcoin's target block spacing, the same on every network (regtest and signet
/// included: `pow_target_spacing` in `bitcoin::consensus::params`). The watchdog
/// converts blocks to time with it to tell whether a round comes before a deadline.
pub fn block_spacing(network: bitcoin::Network) -> Duration {
    Duration::from_secs(bitcoin::consensus::params::Params::new(network).pow_target_spacing)
}

/// Where a VTXO stands with respect to rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Custody {
    /// Spendable, in no round participation.
    Free,
    /// Spendable, an input of a participation waiting for its round (it is locked
    /// only when the round's attempt starts).
    Scheduled,
    /// Locked as an input of a pending round (bark's `pending_round_input_vtxos`):
    /// it may have been forfeited already, an exit could lose it.
    InPendingRound,
    /// Locked by another operation (an offboard, a Lightning payment, a board).
    Locked,
}

/// What the watchdog needs to know of one unspent VTXO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VtxoFacts {
    pub id: VtxoId,
    pub amount: Amount,
    pub expiry_height: u32,
    /// Transactions its exit must confirm, one block each at best.
    pub exit_depth: u16,
    pub custody: Custody,
}

/// Blocks left at `tip` before `v` can no longer be exited safely (negative: past it).
pub fn blocks_to_deadline(v: &VtxoFacts, tip: u32) -> i64 {
    i64::from(v.expiry_height) - i64::from(tip) - i64::from(v.exit_depth)
}

/// Whether bark's maintenance refresh takes `v` into the next round at `tip` (its
/// `RefreshStrategy::must_refresh` expiry rule: `tip > expiry - threshold`).
pub fn due_for_maintenance(v: &VtxoFacts, tip: u32, t: &Thresholds) -> bool {
    tip > v.expiry_height.saturating_sub(t.refresh_threshold_blocks)
}

/// The Ark server as a check saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Unreachable,
    /// It answers; its next round starts in `next_round_in` (`None`: it would not
    /// say, nor do we know its round interval).
    Answering {
        next_round_in: Option<Duration>,
    },
}

/// What a check knows besides the VTXOs.
#[derive(Debug, Clone)]
pub struct Conditions<'a> {
    pub tip: u32,
    pub server: Server,
    pub block_spacing: Duration,
    /// Failed refresh attempts so far, per VTXO.
    pub failures: &'a HashMap<VtxoId, u32>,
}

/// What the watchdog decided at one check.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Within `warn_blocks` of their deadline.
    pub expiring: Vec<VtxoId>,
    /// At risk and in no round: the watchdog joins the next round with them.
    pub refresh: Vec<VtxoId>,
    /// At risk, a refresh can still happen: the maintenance refresh takes them at
    /// the next round, or a participation waits for it.
    pub waiting: Vec<VtxoId>,
    /// At risk, locked or in a pending round: never exited by the watchdog.
    pub held: Vec<VtxoId>,
    /// At risk and no refresh can happen: exit.
    pub exit: Vec<VtxoId>,
    /// At risk and the server did not answer: a failed refresh attempt each.
    pub failed: Vec<VtxoId>,
    /// The nearest deadline, in blocks.
    pub first_deadline: Option<i64>,
}

impl Plan {
    /// VTXOs within the exit margin, whatever is done about them.
    pub fn at_risk(&self) -> usize {
        self.refresh.len() + self.waiting.len() + self.held.len() + self.exit.len()
    }
}

/// The watchdog's decision for `vtxos` under `c`. For a VTXO within the exit margin,
/// the first rule that applies:
/// 1. locked, or an input of a pending round: held, never exited (bark's operation
///    owns it; a round input may already be forfeited);
/// 2. refreshing it failed `refresh_attempts` times: exit;
/// 3. the server does not answer: a failed attempt, and exit only in the last
///    quarter of the margin (no time left to wait for the server);
/// 4. the server answers, a refresh can complete under its VTXO lifetime, and its
///    next round starts before the deadline (blocks converted to time at
///    `block_spacing`): wait for that round — the watchdog joins it itself only with
///    a VTXO in no participation that bark's maintenance refresh would not take yet
///    (a margin widened in `berth.toml`);
/// 5. otherwise (no round before the deadline, no refresh can complete, or the
///    deadline passed): exit.
///
/// With the watchdog off, only the warnings are planned.
pub fn plan(vtxos: &[VtxoFacts], c: &Conditions<'_>, t: &Thresholds, watchdog: bool) -> Plan {
    let mut plan = Plan::default();
    let last_quarter = i64::from(t.exit_margin_blocks / 4);
    for v in vtxos {
        let left = blocks_to_deadline(v, c.tip);
        plan.first_deadline = Some(plan.first_deadline.map_or(left, |f| f.min(left)));
        if left <= i64::from(t.warn_blocks) {
            plan.expiring.push(v.id);
        }
        if !watchdog || left > i64::from(t.exit_margin_blocks) {
            continue;
        }
        if matches!(v.custody, Custody::Locked | Custody::InPendingRound) {
            plan.held.push(v.id);
            continue;
        }
        let failures = c.failures.get(&v.id).copied().unwrap_or(0);
        if failures >= t.refresh_attempts {
            plan.exit.push(v.id);
            continue;
        }
        match c.server {
            Server::Unreachable if left <= last_quarter => plan.exit.push(v.id),
            Server::Unreachable => {
                plan.failed.push(v.id);
                plan.waiting.push(v.id);
            }
            Server::Answering { next_round_in } => {
                let round_in_time = left > 0
                    && t.refresh_possible
                    && next_round_in.is_none_or(|wait| {
                        let blocks = u32::try_from(left).unwrap_or(u32::MAX);
                        wait < c.block_spacing.saturating_mul(blocks)
                    });
                if !round_in_time {
                    plan.exit.push(v.id);
                } else if v.custody == Custody::Free && !due_for_maintenance(v, c.tip, t) {
                    plan.refresh.push(v.id);
                } else {
                    plan.waiting.push(v.id);
                }
            }
        }
    }
    plan
}

/// Whether the on-chain wallet can pay for exiting every VTXO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserve {
    /// Fees of broadcasting every exit (the fee-paying children).
    pub needed: Amount,
    /// Confirmed on-chain coins.
    pub available: Amount,
}

impl Reserve {
    pub fn sufficient(&self) -> bool {
        self.available >= self.needed
    }

    pub fn shortfall(&self) -> Amount {
        self.needed
            .checked_sub(self.available)
            .unwrap_or(Amount::ZERO)
    }
}

/// The reserve check: the exit fees against the confirmed on-chain balance.
pub fn reserve(needed: Amount, available: Amount) -> Reserve {
    Reserve { needed, available }
}

/// The fee rate for exits' fee-paying children: the fixed one if configured, else the
/// estimate capped at the policy's maximum.
pub fn exit_fee_rate(policy: &Policy, estimate: FeeRate) -> FeeRate {
    policy
        .exit_fee_rate
        .unwrap_or_else(|| estimate.min(policy.max_exit_fee_rate))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vtxo(n: u8, expiry_height: u32, exit_depth: u16) -> VtxoFacts {
        use bitcoin::hashes::Hash as _;
        let txid = bitcoin::Txid::from_byte_array([n; 32]);
        VtxoFacts {
            id: VtxoId::from(bitcoin::OutPoint::new(txid, 0)),
            amount: Amount::from_sat(10_000 * u64::from(n)),
            expiry_height,
            exit_depth,
            custody: Custody::Free,
        }
    }

    fn held(custody: Custody, v: VtxoFacts) -> VtxoFacts {
        VtxoFacts { custody, ..v }
    }

    /// bark's defaults on regtest and captaind's default lifetime.
    fn regtest(lifetime: u32) -> Sources {
        Sources {
            bark_refresh_threshold: 12,
            bark_exit_margin: 12,
            bark_round_confirmations: 1,
            vtxo_lifetime: Some(lifetime),
            // Short enough for bark to forfeit into 32-block VTXOs (2 x 12 + 4 + 1).
            vtxo_exit_delta: Some(4),
        }
    }

    fn configured(warn: Option<u32>, margin: Option<u32>) -> Policy {
        Policy {
            warn_blocks: warn,
            exit_margin_blocks: margin,
            refresh_attempts: 3,
            ..Policy::default()
        }
    }

    /// Thresholds with bark's regtest defaults (warn 12, margin 12) and a long lifetime.
    fn derived() -> Thresholds {
        Thresholds::derive(regtest(432), &configured(None, None))
    }

    const TEN_MINUTES: Duration = Duration::from_secs(600);

    /// The server answers; its next round starts in `minutes`.
    fn up(minutes: u64) -> Server {
        Server::Answering {
            next_round_in: Some(Duration::from_secs(60 * minutes)),
        }
    }

    fn check<'a>(tip: u32, server: Server, failures: &'a HashMap<VtxoId, u32>) -> Conditions<'a> {
        Conditions {
            tip,
            server,
            block_spacing: TEN_MINUTES,
            failures,
        }
    }

    #[test]
    fn the_deadline_leaves_a_block_per_exit_transaction() {
        let v = vtxo(1, 1000, 5);
        assert_eq!(blocks_to_deadline(&v, 900), 95);
        assert_eq!(blocks_to_deadline(&v, 995), 0);
        assert_eq!(blocks_to_deadline(&v, 1000), -5);
    }

    #[test]
    fn thresholds_come_from_bark_and_the_server_unless_configured_earlier() {
        let t = derived();
        assert_eq!(
            (
                t.warn_blocks,
                t.exit_margin_blocks,
                t.refresh_threshold_blocks
            ),
            (12, 12, 12)
        );
        let mainnet = Sources {
            bark_refresh_threshold: 144,
            ..regtest(4320)
        };
        let t = Thresholds::derive(mainnet, &configured(None, None));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (144, 12));
        // Earlier than derived: used.
        let t = Thresholds::derive(regtest(432), &configured(Some(100), Some(40)));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (100, 40));
        // A wider margin moves the warning with it: never warned after acting.
        let t = Thresholds::derive(regtest(432), &configured(None, Some(40)));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (40, 40));
        // Later than derived: ignored.
        let t = Thresholds::derive(regtest(432), &configured(Some(5), Some(3)));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (12, 12));
        assert_eq!(t.refresh_attempts, 3);
        assert_eq!(t.sources.vtxo_exit_delta, Some(4));
    }

    #[test]
    fn thresholds_are_at_most_half_the_vtxo_lifetime() {
        // berth.toml's old fixed margins against a 32-block lifetime: every VTXO would
        // have been at risk (and in the "last quarter") from birth.
        let t = Thresholds::derive(regtest(32), &configured(Some(288), Some(72)));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (16, 16));
        let t = Thresholds::derive(regtest(32), &configured(None, None));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (12, 12));
        let t = Thresholds::derive(regtest(20), &configured(None, None));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (10, 10));
        // The server never reached: nothing to clamp to.
        let unknown = Sources {
            vtxo_lifetime: None,
            vtxo_exit_delta: None,
            ..regtest(0)
        };
        let t = Thresholds::derive(unknown, &configured(Some(288), Some(72)));
        assert_eq!((t.warn_blocks, t.exit_margin_blocks), (288, 72));
    }

    #[test]
    fn blocks_are_ten_minutes_on_every_network() {
        for network in [
            bitcoin::Network::Bitcoin,
            bitcoin::Network::Testnet,
            bitcoin::Network::Signet,
            bitcoin::Network::Regtest,
        ] {
            assert_eq!(block_spacing(network), TEN_MINUTES, "{network}");
        }
    }

    #[test]
    fn far_vtxos_are_left_alone_near_ones_warned_then_watched() {
        let t = Thresholds::derive(regtest(432), &configured(Some(100), Some(40)));
        let vtxos = [vtxo(1, 2000, 3), vtxo(2, 1103, 3), vtxo(3, 1043, 3)];
        let none = HashMap::new();
        let p = plan(&vtxos, &check(1000, up(30), &none), &t, true);
        // 997 blocks, 100 and 40 left.
        assert_eq!(p.first_deadline, Some(40));
        assert_eq!(p.expiring, vec![vtxos[1].id, vtxos[2].id]);
        // 43 blocks to expiry: bark's maintenance refresh (12) would not take it yet.
        assert_eq!(p.refresh, vec![vtxos[2].id]);
        assert_eq!(p.at_risk(), 1);
        assert!(p.exit.is_empty());
        // One block earlier the nearest is still outside the margin.
        let p = plan(&vtxos, &check(999, up(30), &none), &t, true);
        assert_eq!(p.at_risk(), 0);
    }

    #[test]
    fn a_locked_vtxo_is_never_exited() {
        let t = derived();
        let v = held(Custody::Locked, vtxo(1, 1005, 1));
        let mut failures = HashMap::new();
        failures.insert(v.id, 10);
        for server in [Server::Unreachable, up(30), up(600)] {
            // 4 blocks left, the last quarter is 3; then past the deadline.
            for tip in [1000, 1003, 1010] {
                let p = plan(
                    std::slice::from_ref(&v),
                    &check(tip, server, &failures),
                    &t,
                    true,
                );
                assert_eq!(p.held, vec![v.id], "{server:?} at {tip}");
                assert!(p.exit.is_empty() && p.refresh.is_empty() && p.failed.is_empty());
                assert_eq!(p.at_risk(), 1);
            }
        }
    }

    #[test]
    fn a_vtxo_in_a_pending_round_is_never_exited() {
        let t = derived();
        let v = held(Custody::InPendingRound, vtxo(1, 1005, 1));
        let mut failures = HashMap::new();
        failures.insert(v.id, 3);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1003, Server::Unreachable, &failures),
            &t,
            true,
        );
        assert_eq!(p.held, vec![v.id]);
        assert!(p.exit.is_empty());
        // The same VTXO spendable again (its round failed): now the rules apply.
        let free = VtxoFacts {
            custody: Custody::Free,
            ..v
        };
        let p = plan(
            &[free],
            &check(1003, Server::Unreachable, &failures),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id]);
    }

    #[test]
    fn with_the_server_up_and_a_round_due_nothing_is_exited_even_in_the_last_quarter() {
        // The case: a 32-block lifetime, the old berth.toml margins.
        let t = Thresholds::derive(regtest(32), &configured(Some(288), Some(72)));
        let none = HashMap::new();
        // In bark's refresh window (11 blocks to expiry), 10 to the deadline.
        let due = vtxo(1, 1011, 1);
        let scheduled = held(Custody::Scheduled, vtxo(2, 1004, 1));
        let vtxos = [due.clone(), scheduled.clone()];
        // The next round in 25 minutes: before either deadline (100 and 30 minutes).
        let p = plan(&vtxos, &check(1000, up(25), &none), &t, true);
        assert!(p.exit.is_empty(), "{p:?}");
        assert!(
            p.refresh.is_empty(),
            "bark's maintenance refresh takes them: {p:?}"
        );
        assert_eq!(p.waiting, vec![due.id, scheduled.id]);
        assert!(p.failed.is_empty());
        // 3 blocks left is the last quarter of 16: still waiting for the round.
        let p = plan(
            std::slice::from_ref(&due),
            &check(1007, up(25), &none),
            &t,
            true,
        );
        assert_eq!(p.waiting, vec![due.id]);
        assert!(p.exit.is_empty());
    }

    #[test]
    fn no_round_helps_when_the_lifetime_is_too_short_for_bark_to_forfeit() {
        // The regtest stack's exit delta of 12 under a 32-block lifetime: bark wants
        // new VTXOs to outlive the forfeit tip by 2 x 12 + 12, the round's
        // confirmation comes first, so 37 blocks. It would lock the inputs and never
        // forfeit them.
        let short = Sources {
            vtxo_exit_delta: Some(12),
            ..regtest(32)
        };
        let t = Thresholds::derive(short, &configured(None, None));
        assert_eq!(t.refresh_needs_lifetime, Some(37));
        assert!(!t.refresh_possible);
        let none = HashMap::new();
        let v = vtxo(1, 1011, 1);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, up(5), &none),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id], "a round is due, but cannot refresh it");
        let locked = held(Custody::InPendingRound, v.clone());
        let p = plan(&[locked], &check(1000, up(5), &none), &t, true);
        assert_eq!(p.held, vec![v.id]);
        // Enough lifetime, or terms not known yet: a round can refresh it.
        let t = Thresholds::derive(
            Sources {
                vtxo_exit_delta: Some(12),
                ..regtest(37)
            },
            &configured(None, None),
        );
        assert!(t.refresh_possible);
        let unknown = Sources {
            vtxo_lifetime: None,
            vtxo_exit_delta: None,
            ..regtest(0)
        };
        let t = Thresholds::derive(unknown, &configured(None, None));
        assert_eq!(t.refresh_needs_lifetime, None);
        assert!(t.refresh_possible);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, up(5), &none),
            &t,
            true,
        );
        assert_eq!(p.waiting, vec![v.id]);
    }

    #[test]
    fn with_no_round_before_the_deadline_the_vtxo_is_exited() {
        let t = derived();
        let none = HashMap::new();
        let v = vtxo(1, 1011, 1);
        // 10 blocks (100 minutes) left.
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, up(99), &none),
            &t,
            true,
        );
        assert_eq!(p.waiting, vec![v.id]);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, up(100), &none),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id]);
        // Past the deadline a round cannot help: exit (it may yet confirm in time).
        let p = plan(
            std::slice::from_ref(&v),
            &check(1010, up(0), &none),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id]);
        // A server that answers without saying when: a round is assumed to come.
        let unsaid = Server::Answering {
            next_round_in: None,
        };
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, unsaid, &none),
            &t,
            true,
        );
        assert_eq!(p.waiting, vec![v.id]);
    }

    #[test]
    fn with_the_server_down_attempts_fail_and_the_last_quarter_exits() {
        let t = derived();
        let none = HashMap::new();
        let v = vtxo(1, 1011, 1);
        // 10 blocks left of a 12-block margin: a failed attempt, wait.
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, Server::Unreachable, &none),
            &t,
            true,
        );
        assert_eq!(p.failed, vec![v.id]);
        assert_eq!(p.waiting, vec![v.id]);
        assert!(p.exit.is_empty());
        // 3 blocks left: the last quarter, no time to wait for the server.
        let p = plan(
            std::slice::from_ref(&v),
            &check(1007, Server::Unreachable, &none),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id]);
        assert!(p.failed.is_empty());
    }

    #[test]
    fn refused_refresh_attempts_start_the_exit_even_with_a_round_due() {
        let t = derived();
        let v = vtxo(1, 1011, 1);
        let mut failures = HashMap::new();
        failures.insert(v.id, 2);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, up(5), &failures),
            &t,
            true,
        );
        assert_eq!(
            p.waiting,
            vec![v.id],
            "two failures: the next round may take it"
        );
        failures.insert(v.id, 3);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, up(5), &failures),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id]);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, Server::Unreachable, &failures),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id]);
    }

    #[test]
    fn a_wider_margin_joins_a_round_only_before_bark_would() {
        let t = Thresholds::derive(regtest(432), &configured(None, Some(40)));
        let none = HashMap::new();
        let early = vtxo(1, 1035, 1);
        let scheduled = held(Custody::Scheduled, vtxo(2, 1035, 1));
        let bark_takes_it = vtxo(3, 1011, 1);
        let p = plan(
            &[early.clone(), scheduled.clone(), bark_takes_it.clone()],
            &check(1000, up(30), &none),
            &t,
            true,
        );
        assert_eq!(p.refresh, vec![early.id]);
        assert_eq!(p.waiting, vec![scheduled.id, bark_takes_it.id]);
        assert!(due_for_maintenance(&bark_takes_it, 1000, &t));
        assert!(!due_for_maintenance(&early, 1000, &t));
        // With the server down nothing is joined: the attempt fails.
        let p = plan(
            std::slice::from_ref(&early),
            &check(1000, Server::Unreachable, &none),
            &t,
            true,
        );
        assert!(p.refresh.is_empty());
        assert_eq!(p.failed, vec![early.id]);
    }

    #[test]
    fn with_the_watchdog_off_only_warnings_are_planned() {
        let t = derived();
        let vtxos = [vtxo(1, 1005, 2)];
        let mut failures = HashMap::new();
        failures.insert(vtxos[0].id, 10);
        let p = plan(
            &vtxos,
            &check(1000, Server::Unreachable, &failures),
            &t,
            false,
        );
        assert_eq!(p.expiring, vec![vtxos[0].id]);
        assert_eq!(p.at_risk(), 0);
        assert!(p.exit.is_empty() && p.failed.is_empty());
        assert_eq!(
            plan(&[], &check(1000, Server::Unreachable, &failures), &t, false),
            Plan::default()
        );
    }

    #[test]
    fn the_reserve_compares_exit_fees_with_confirmed_coins() {
        let r = reserve(Amount::from_sat(5_000), Amount::from_sat(4_000));
        assert!(!r.sufficient());
        assert_eq!(r.shortfall(), Amount::from_sat(1_000));
        let r = reserve(Amount::from_sat(5_000), Amount::from_sat(5_000));
        assert!(r.sufficient());
        assert_eq!(r.shortfall(), Amount::ZERO);
        assert!(reserve(Amount::ZERO, Amount::ZERO).sufficient());
    }

    #[test]
    fn the_exit_fee_rate_is_fixed_or_the_capped_estimate() {
        let p = Policy::default();
        let high = FeeRate::from_sat_per_vb_u32(900);
        let low = FeeRate::from_sat_per_vb_u32(3);
        assert_eq!(exit_fee_rate(&p, high), p.max_exit_fee_rate);
        assert_eq!(exit_fee_rate(&p, low), low);
        let fixed = Policy {
            exit_fee_rate: Some(FeeRate::from_sat_per_vb_u32(7)),
            ..Policy::default()
        };
        assert_eq!(exit_fee_rate(&fixed, high), FeeRate::from_sat_per_vb_u32(7));
    }
}

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
    /// The server's `vtxo_lifetime`; `None` until the wallet has reached it once.
    pub vtxo_lifetime: Option<u32>,
    /// The server's `vtxo_exit_delta`: blocks between an exit's confirmation and its
    /// funds becoming claimable. It does not move the exit deadline; `/health` shows it.
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
            sources,
        }
    }
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
    Answering,
}

/// What a check knows besides the VTXOs.
#[derive(Debug, Clone)]
pub struct Conditions<'a> {
    pub tip: u32,
    pub server: Server,
    /// This is the first check at `tip`: a block went by since the last one.
    pub new_block: bool,
    /// Failed refresh attempts so far, per VTXO.
    pub failures: &'a HashMap<VtxoId, u32>,
}

/// What the watchdog decided at one check.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Within `warn_blocks` of their deadline.
    pub expiring: Vec<VtxoId>,
    /// At risk, in no round, and not yet due for bark's maintenance refresh (a margin
    /// widened in `berth.toml`): the watchdog joins the next round with them.
    pub refresh: Vec<VtxoId>,
    /// At risk, a refresh can still happen: bark's maintenance refresh takes them at
    /// the next round, or a participation waits for it.
    pub waiting: Vec<VtxoId>,
    /// At risk, locked or in a pending round: never exited by the watchdog.
    pub held: Vec<VtxoId>,
    /// At risk and no refresh can happen before the deadline: exit.
    pub exit: Vec<VtxoId>,
    /// At risk, and a block went by with the server not answering: a failed refresh
    /// attempt each (no round could take them in that block's time).
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

/// The watchdog's decision for `vtxos` under `c`. bark decides refreshes: its
/// maintenance refresh takes a VTXO into a round by its own rules, whatever the
/// server's terms or the deadline, and the watchdog never acts against that. For a
/// VTXO within the exit margin, the first rule that applies:
/// 1. locked, or an input of a pending round: held, never exited (bark's operation
///    owns it; a round input may already be forfeited);
/// 2. refreshing it failed `refresh_attempts` times (bark's refreshes, and blocks gone
///    by with the server not answering, each count once): exit;
/// 3. the server does not answer: wait for it (each new block is a failed attempt),
///    and exit only in the last quarter of the margin (no time left to wait);
/// 4. the server answers: a refresh can happen. Wait for bark's maintenance refresh;
///    the watchdog joins the next round itself only with a VTXO in no participation
///    that bark would not take yet (a margin widened in `berth.toml`).
///
/// No computed rule (lifetimes, round times, a passed deadline) ever starts an exit
/// while the server answers and bark's refreshes do not fail: bark refreshes an
/// expired VTXO too, and an exit costs fees where a refresh is free.
///
/// With `acting` false (the watchdog off, or bark's manual sync), only the warnings
/// are planned.
pub fn plan(vtxos: &[VtxoFacts], c: &Conditions<'_>, t: &Thresholds, acting: bool) -> Plan {
    let mut plan = Plan::default();
    let last_quarter = i64::from(t.exit_margin_blocks / 4);
    for v in vtxos {
        let left = blocks_to_deadline(v, c.tip);
        plan.first_deadline = Some(plan.first_deadline.map_or(left, |f| f.min(left)));
        if left <= i64::from(t.warn_blocks) {
            plan.expiring.push(v.id);
        }
        if !acting || left > i64::from(t.exit_margin_blocks) {
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
                if c.new_block {
                    plan.failed.push(v.id);
                }
                plan.waiting.push(v.id);
            }
            Server::Answering
                if v.custody == Custody::Free && !due_for_maintenance(v, c.tip, t) =>
            {
                plan.refresh.push(v.id)
            }
            Server::Answering => plan.waiting.push(v.id),
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

    /// bark's defaults on regtest, captaind's default exit delta, and `lifetime`.
    fn regtest(lifetime: u32) -> Sources {
        Sources {
            bark_refresh_threshold: 12,
            bark_exit_margin: 12,
            vtxo_lifetime: Some(lifetime),
            vtxo_exit_delta: Some(12),
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

    const UP: Server = Server::Answering;
    const DOWN: Server = Server::Unreachable;

    /// A check at `tip`, the first at that height.
    fn check<'a>(tip: u32, server: Server, failures: &'a HashMap<VtxoId, u32>) -> Conditions<'a> {
        Conditions {
            tip,
            server,
            new_block: true,
            failures,
        }
    }

    /// A later check at the same height.
    fn again<'a>(tip: u32, server: Server, failures: &'a HashMap<VtxoId, u32>) -> Conditions<'a> {
        Conditions {
            new_block: false,
            ..check(tip, server, failures)
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
        assert_eq!(t.sources.vtxo_exit_delta, Some(12));
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
    fn far_vtxos_are_left_alone_near_ones_warned_then_watched() {
        let t = Thresholds::derive(regtest(432), &configured(Some(100), Some(40)));
        let vtxos = [vtxo(1, 2000, 3), vtxo(2, 1103, 3), vtxo(3, 1043, 3)];
        let none = HashMap::new();
        let p = plan(&vtxos, &check(1000, UP, &none), &t, true);
        // 997 blocks, 100 and 40 left.
        assert_eq!(p.first_deadline, Some(40));
        assert_eq!(p.expiring, vec![vtxos[1].id, vtxos[2].id]);
        // 43 blocks to expiry: bark's maintenance refresh (12) would not take it yet.
        assert_eq!(p.refresh, vec![vtxos[2].id]);
        assert_eq!(p.at_risk(), 1);
        assert!(p.exit.is_empty());
        // One block earlier the nearest is still outside the margin.
        let p = plan(&vtxos, &check(999, UP, &none), &t, true);
        assert_eq!(p.at_risk(), 0);
    }

    #[test]
    fn a_locked_vtxo_is_never_exited() {
        let t = derived();
        let v = held(Custody::Locked, vtxo(1, 1005, 1));
        let mut failures = HashMap::new();
        failures.insert(v.id, 10);
        for server in [DOWN, UP] {
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
            &check(1003, DOWN, &failures),
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
        let p = plan(&[free], &check(1003, DOWN, &failures), &t, true);
        assert_eq!(p.exit, vec![v.id]);
    }

    /// issue 46: under a 32-block lifetime, with captaind's 12-block exit delta, a
    /// VTXO aged past its expiry while the server answers is left to bark's
    /// maintenance refresh, which refreshes it (bark forfeits expired inputs into any
    /// new VTXO). Berth used to compute that no refresh could complete and exit it.
    #[test]
    fn with_the_server_answering_nothing_is_exited_whatever_the_deadline() {
        let t = Thresholds::derive(regtest(32), &configured(None, None));
        let none = HashMap::new();
        let board = vtxo(1, 1032, 1);
        let scheduled = held(Custody::Scheduled, vtxo(2, 1030, 1));
        // In bark's refresh window, then the last quarter, the deadline, expiry, past it.
        for tip in [1021, 1029, 1031, 1032, 1040] {
            let p = plan(
                &[board.clone(), scheduled.clone()],
                &check(tip, UP, &none),
                &t,
                true,
            );
            assert!(p.exit.is_empty(), "at {tip}: {p:?}");
            assert!(p.refresh.is_empty(), "bark's maintenance takes them: {p:?}");
            assert_eq!(p.waiting, vec![board.id, scheduled.id], "at {tip}");
            assert!(p.failed.is_empty());
        }
    }

    #[test]
    fn with_the_server_down_each_block_is_a_failed_attempt_and_the_last_quarter_exits() {
        let t = derived();
        let none = HashMap::new();
        let v = vtxo(1, 1011, 1);
        // 10 blocks left of a 12-block margin: a failed attempt, wait.
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, DOWN, &none),
            &t,
            true,
        );
        assert_eq!(p.failed, vec![v.id]);
        assert_eq!(p.waiting, vec![v.id]);
        assert!(p.exit.is_empty());
        // Another check in the same block: no round could have come, nothing counts.
        let p = plan(
            std::slice::from_ref(&v),
            &again(1000, DOWN, &none),
            &t,
            true,
        );
        assert!(p.failed.is_empty());
        assert_eq!(p.waiting, vec![v.id]);
        // 3 blocks left: the last quarter, no time to wait for the server.
        let p = plan(
            std::slice::from_ref(&v),
            &check(1007, DOWN, &none),
            &t,
            true,
        );
        assert_eq!(p.exit, vec![v.id]);
        assert!(p.failed.is_empty());
        // The same VTXO with the server answering: never.
        let p = plan(std::slice::from_ref(&v), &check(1007, UP, &none), &t, true);
        assert_eq!(p.waiting, vec![v.id]);
    }

    #[test]
    fn refresh_attempts_that_keep_failing_start_the_exit_even_with_the_server_up() {
        let t = derived();
        let v = vtxo(1, 1011, 1);
        let mut failures = HashMap::new();
        failures.insert(v.id, 2);
        let p = plan(
            std::slice::from_ref(&v),
            &check(1000, UP, &failures),
            &t,
            true,
        );
        assert_eq!(
            p.waiting,
            vec![v.id],
            "two failures: the next round may take it"
        );
        failures.insert(v.id, 3);
        for server in [UP, DOWN] {
            let p = plan(
                std::slice::from_ref(&v),
                &check(1000, server, &failures),
                &t,
                true,
            );
            assert_eq!(p.exit, vec![v.id], "{server:?}");
        }
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
            &check(1000, UP, &none),
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
            &check(1000, DOWN, &none),
            &t,
            true,
        );
        assert!(p.refresh.is_empty());
        assert_eq!(p.failed, vec![early.id]);
    }

    #[test]
    fn when_not_acting_only_warnings_are_planned() {
        let t = derived();
        let vtxos = [vtxo(1, 1005, 2)];
        let mut failures = HashMap::new();
        failures.insert(vtxos[0].id, 10);
        let p = plan(&vtxos, &check(1000, DOWN, &failures), &t, false);
        assert_eq!(p.expiring, vec![vtxos[0].id]);
        assert_eq!(p.at_risk(), 0);
        assert!(p.exit.is_empty() && p.failed.is_empty());
        assert_eq!(
            plan(&[], &check(1000, DOWN, &failures), &t, false),
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

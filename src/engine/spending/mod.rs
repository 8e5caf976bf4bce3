//! Spending rules: what a paired device may pay, enforced here, in the engine, so that
//! no way in (the REST API, the console, Nostr Wallet Connect) can pass them by.
//!
//! Every engine method that moves money takes the [`Spender`] (who asks) and first
//! asks [`Spending::authorize`] for a [`Grant`] for the amount it is about to pay (the
//! amount is derived once, there). For a device with rules, the rules are checked and
//! the amount reserved against its budgets in one store transaction (so a hundred
//! payments at once cannot together pass a budget), before the wallet, its funds or
//! the network are touched (a payment over a limit is refused while the wallet is
//! offline too). The method that spends the grant says how the payment went: failed
//! at once, the amount goes back; done, it stays; under way, the reservation waits for
//! the payment's movement to end ([`Engine::spawn_spending_follower`]), across restarts.
//!
//! A Nostr Wallet Connect connection carries rules the same way, under its own key
//! ([`connection_rules_key`]), beside the limits NIP-47 apps read (`nwc::budget`).
//! Who has no rules: the admin token, the autopilot (its exits protect the wallet's
//! own funds), and a device or connection the owner has set none for. Periods are calendar periods in the box's time
//! zone: a day from midnight, a week from Monday, a month from the 1st, a year from
//! 1 January. `docs/household.md` is the owner's account.

use std::time::Duration as StdDuration;

use bitcoin::Amount;
use chrono::{DateTime, Local};

pub mod approvals;
mod follower;
mod rules;

use rules::micros;
pub use rules::{
    Budget, BudgetUse, OverLimit, PaymentKind, Period, Policy, Rules, RulesView, clock_offset, now,
};
pub use rules::{CLOCK_OFFSET_ENV, MAX_BUDGETS};

use crate::engine::{Engine, EngineError};
pub use crate::store::spending::connection_rules_key;
use crate::store::spending::{
    BudgetRecord, NEW_DEVICES_KEY, Reserved, SpendReservationRecord, SpendingRulesRecord,
    connection_of,
};

/// The key of a movement's metadata that names the paired device that paid.
pub const PAYER_KEY: &str = "device";

/// Whether paired device `device` made movement `m` (its metadata names it).
pub fn paid_by(m: &bark::movement::Movement, device: &str) -> bool {
    m.metadata
        .get(PAYER_KEY)
        .and_then(|d| d.get("id"))
        .and_then(|id| id.as_str())
        == Some(device)
}

/// A reservation whose payment never said how it ended is forgotten after this: no
/// period is longer.
const KEEP_UNRESOLVED: StdDuration = StdDuration::from_secs(367 * 86_400);

/// The rules newly paired devices start with ([`Spending::new_device_rules`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewDeviceRules {
    /// `None`: new devices start without rules.
    pub rules: Option<Rules>,
    /// Set by the owner in the console or by API (otherwise: `berth.toml`'s).
    pub set_by_owner: bool,
}

/// Who asks to spend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spender {
    /// The admin token and the autopilot: no rules.
    Owner,
    /// A paired device (a phone, an app, a console session): its rules, if it has any.
    Device(String),
    /// A Nostr Wallet Connect connection (its id): its rules, if it has any (its
    /// NIP-47 limits are checked by `nwc`).
    Nwc(String),
    /// A paired device (or a connection, by its rules' key) running the payment the
    /// owner approved: let through once, if it is the payment approved.
    Approved { device: String, approval: [u8; 16] },
}

/// What the rules' key `key` is, in refusals: a `device` or a `connection`.
fn noun(key: &str) -> &'static str {
    if connection_of(key).is_some() {
        "connection"
    } else {
        "device"
    }
}

impl Spender {
    pub fn of(caller: &crate::access::Caller) -> Spender {
        match (&caller.credential, caller.approval) {
            (crate::access::Credential::Admin, _) => Spender::Owner,
            (crate::access::Credential::Device(id), Some(approval)) => Spender::Approved {
                device: id.clone(),
                approval,
            },
            (crate::access::Credential::Device(id), None) => Spender::Device(id.clone()),
        }
    }
}

/// Leave to make one payment of a kind and at most an amount: made only by
/// [`Spending::authorize`], which every engine method that moves money calls with the
/// amount it pays, before it touches the wallet.
#[derive(Debug)]
#[must_use = "a grant reserves budget until the payment it was made for says how it went"]
pub struct Grant {
    kind: PaymentKind,
    /// The reservation against the device's budgets, when one was made.
    reservation: Option<[u8; 16]>,
    /// The most the payment's fee may be.
    max_fee: Option<Amount>,
    /// The rules' key of who pays (a paired device is named in its movement's
    /// metadata; a connection names itself, `nwc`): `None` for the owner.
    device: Option<String>,
}

/// How a granted payment went, as the method that made it knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It was not made: the amount goes back.
    Failed,
    /// It is done: the amount stays spent.
    Done,
    /// It is done, and this is its movement (or the Lightning send of this payment
    /// hash): the amount stays spent, and the movement names the device that paid.
    Paid {
        movement_id: Option<u32>,
        payment_hash: Option<[u8; 32]>,
    },
    /// It goes on in the background: its end decides (its movement, or the Lightning
    /// send of this payment hash).
    Pending {
        movement_id: Option<u32>,
        payment_hash: Option<[u8; 32]>,
    },
}

/// Why the rules' check stopped a payment.
#[derive(Debug)]
enum Stop {
    /// A rule forbids it whatever the owner says of limits (its kind; an amount not
    /// known to a device with limits).
    Forbidden(String),
    /// It is over the per-payment maximum or a budget: refused, or held for approval
    /// when the rules say so.
    OverLimit { message: String, approve: bool },
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Forbidden(message) | Stop::OverLimit { message, .. } => f.write_str(message),
        }
    }
}

/// A sat amount as people write it (12,345): in refusals, and on the console's pages.
pub fn sats(amount: u64) -> String {
    let digits = amount.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The rules' check of one payment, inside the reservation's transaction: renew the
/// periods, then the kind, the per-payment limit and each budget; on success the
/// amount is taken from every budget.
fn check(
    record: &mut SpendingRulesRecord,
    kind: PaymentKind,
    amount: Option<Amount>,
    device_id: &str,
    now: &DateTime<Local>,
) -> Result<SpendReservationRecord, Stop> {
    renew(record, now);
    let who = noun(device_id);
    let over = |message: String| Stop::OverLimit {
        message,
        approve: record_approves(record),
    };
    if let Some(kinds) = &record.kinds
        && !kinds.iter().any(|k| k == kind.as_str())
    {
        return Err(Stop::Forbidden(format!(
            "this {who} may not make {} payments (allowed: {})",
            kind.as_str(),
            if kinds.is_empty() {
                "none".to_string()
            } else {
                kinds.join(", ")
            }
        )));
    }
    let limited = record.max_payment_sat.is_some() || !record.budgets.is_empty();
    let amount = match amount {
        Some(amount) => amount.to_sat(),
        None if limited => {
            return Err(Stop::Forbidden(format!(
                "this {who} has spending limits, and the amount of this payment is not known \
                 before it is made (the whole balance, or every exit): ask the owner"
            )));
        }
        None => 0,
    };
    if let Some(max) = record.max_payment_sat
        && amount > max
    {
        return Err(over(format!(
            "payment of {} sat exceeds this {who}'s limit of {} sat per payment",
            sats(amount),
            sats(max)
        )));
    }
    for budget in &record.budgets {
        let left = budget.amount_sat.saturating_sub(budget.used_sat);
        if amount > left {
            return Err(over(format!(
                "payment of {} sat exceeds this {who}'s budget: {} of {} sat left this {}",
                sats(amount),
                sats(left),
                sats(budget.amount_sat),
                budget.period
            )));
        }
    }
    Ok(take(record, kind, amount, device_id, now))
}

fn record_approves(record: &SpendingRulesRecord) -> bool {
    OverLimit::parse(&record.over_limit) == Some(OverLimit::Approve)
}

/// Take `amount` from every budget and make its reservation (the check passed, or the
/// owner approved it).
fn take(
    record: &mut SpendingRulesRecord,
    kind: PaymentKind,
    amount: u64,
    device_id: &str,
    now: &DateTime<Local>,
) -> SpendReservationRecord {
    let mut taken = Vec::with_capacity(record.budgets.len());
    for budget in &mut record.budgets {
        budget.used_sat = budget.used_sat.saturating_add(amount);
        taken.push((budget.period.clone(), budget.period_start_us));
    }
    SpendReservationRecord {
        device_id: device_id.to_string(),
        kind: kind.as_str().to_string(),
        amount_sat: amount,
        at_us: micros(now),
        taken,
        movement_id: None,
        payment_hash: None,
    }
}

/// Bring every budget to the period `now` is in: a new period starts with nothing used.
fn renew(record: &mut SpendingRulesRecord, now: &DateTime<Local>) {
    for budget in &mut record.budgets {
        let Some(period) = Period::parse(&budget.period) else {
            continue;
        };
        let start = micros(&period.start(now));
        if budget.period_start_us != start {
            budget.period_start_us = start;
            budget.used_sat = 0;
        }
    }
}

/// A random 16-byte id (reservations, approvals).
fn new_id(context: &'static str) -> Result<[u8; 16], EngineError> {
    let mut id = [0u8; 16];
    getrandom::fill(&mut id).map_err(|e| EngineError::Internal {
        context,
        source: anyhow::anyhow!("{e}"),
    })?;
    Ok(id)
}

/// The rules of a stored record.
fn rules_of(record: &SpendingRulesRecord) -> Rules {
    Rules {
        max_payment: record.max_payment_sat.map(Amount::from_sat),
        budgets: record
            .budgets
            .iter()
            .filter_map(|b| {
                Some(Budget {
                    amount: Amount::from_sat(b.amount_sat),
                    period: Period::parse(&b.period)?,
                })
            })
            .collect(),
        kinds: record
            .kinds
            .as_ref()
            .map(|k| k.iter().filter_map(|k| PaymentKind::parse(k)).collect()),
        max_fee: record.max_fee_sat.map(Amount::from_sat),
        over_limit: OverLimit::parse(&record.over_limit).unwrap_or_default(),
        own_history: record.own_history,
    }
}

impl Engine {
    pub fn spending(&self) -> Spending<'_> {
        Spending { engine: self }
    }
}

/// The spending rules, on the engine.
pub struct Spending<'a> {
    engine: &'a Engine,
}

impl Spending<'_> {
    /// A device's rules and where its budgets stand now; `None` without rules.
    pub async fn rules(&self, device_id: &str) -> Result<Option<RulesView>, EngineError> {
        let Some(mut record) = self.engine.store.spending_rules(device_id).await? else {
            return Ok(None);
        };
        let now = now();
        renew(&mut record, &now);
        let rules = rules_of(&record);
        let budgets = record
            .budgets
            .iter()
            .filter_map(|b| {
                let period = Period::parse(&b.period)?;
                Some(BudgetUse {
                    budget: Budget {
                        amount: Amount::from_sat(b.amount_sat),
                        period,
                    },
                    used: Amount::from_sat(b.used_sat),
                    left: Amount::from_sat(b.amount_sat.saturating_sub(b.used_sat)),
                    renews_at: period.end(&now),
                })
            })
            .collect();
        Ok(Some(RulesView { rules, budgets }))
    }

    /// Whether `device_id` sees only its own payments.
    pub async fn own_history(&self, device_id: &str) -> Result<bool, EngineError> {
        Ok(self
            .engine
            .store
            .spending_rules(device_id)
            .await?
            .is_some_and(|r| r.own_history))
    }

    /// A newly paired device starts with the owner's rules for new devices
    /// ([`Spending::new_device_rules`]), unless it has the admin scope (which could
    /// lift them) or there are none.
    pub async fn start_device(&self, device_id: &str, admin: bool) -> Result<(), EngineError> {
        match self.new_device_rules().await?.rules {
            Some(rules) if !admin => {
                self.set_rules(device_id, Some(rules)).await?;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The rules newly paired devices start with: the owner's, as last set in the
    /// console (or `PUT /api/v1/household/new-device-rules`), which replace those of
    /// `[household] new_devices` in `berth.toml`.
    pub async fn new_device_rules(&self) -> Result<NewDeviceRules, EngineError> {
        Ok(
            match self.engine.store.spending_rules(NEW_DEVICES_KEY).await? {
                Some(record) => {
                    let rules = rules_of(&record);
                    NewDeviceRules {
                        rules: (rules != Rules::default()).then_some(rules),
                        set_by_owner: true,
                    }
                }
                None => NewDeviceRules {
                    rules: self.engine.spending_policy.new_device_rules.clone(),
                    set_by_owner: false,
                },
            },
        )
    }

    /// Set the rules newly paired devices start with (`None`: none, whatever
    /// `berth.toml` says). Devices paired before keep theirs.
    pub async fn set_new_device_rules(&self, rules: Option<Rules>) -> Result<(), EngineError> {
        // No rules at all is kept as such: it says "none", where no record would say
        // "as berth.toml says".
        self.set_rules(NEW_DEVICES_KEY, Some(rules.unwrap_or_default()))
            .await?;
        Ok(())
    }

    /// Replace a device's rules (`None`: none). What each budget whose period is kept
    /// has used this period stays used. `Ok(false)`: no such device.
    pub async fn set_rules(
        &self,
        device_id: &str,
        rules: Option<Rules>,
    ) -> Result<bool, EngineError> {
        if let Some(rules) = &rules {
            rules.check().map_err(EngineError::InvalidRequest)?;
        }
        let now = now();
        let found = self
            .engine
            .store
            .set_spending_rules(device_id, move |old| {
                let rules = rules?;
                let budgets = rules
                    .budgets
                    .iter()
                    .map(|b| {
                        let start = micros(&b.period.start(&now));
                        let used = old
                            .as_ref()
                            .and_then(|o| {
                                o.budgets.iter().find(|ob| {
                                    ob.period == b.period.as_str() && ob.period_start_us == start
                                })
                            })
                            .map_or(0, |ob| ob.used_sat);
                        BudgetRecord {
                            amount_sat: b.amount.to_sat(),
                            period: b.period.as_str().to_string(),
                            used_sat: used,
                            period_start_us: start,
                        }
                    })
                    .collect();
                Some(SpendingRulesRecord {
                    max_payment_sat: rules.max_payment.map(Amount::to_sat),
                    budgets,
                    kinds: rules
                        .kinds
                        .map(|k| k.iter().map(|k| k.as_str().to_string()).collect()),
                    over_limit: rules.over_limit.as_str().into(),
                    max_fee_sat: rules.max_fee.map(Amount::to_sat),
                    own_history: rules.own_history,
                })
            })
            .await?;
        Ok(found)
    }

    /// Leave for `who` to make a payment of `kind` and `amount` (`None` when it is not
    /// known before the payment: the whole balance, every exit). A device's rules are
    /// checked and the amount reserved against its budgets, or the payment is refused
    /// ([`EngineError::Refused`], naming the rule), or, over a limit of rules that say
    /// so, it needs the owner's approval ([`EngineError::NeedsApproval`]: nothing is
    /// held yet; `approvals::Approvals::hold` holds it). A payment the owner approved
    /// ([`Spender::Approved`]) is let through once, if it is the one approved.
    pub async fn authorize(
        &self,
        who: &Spender,
        kind: PaymentKind,
        amount: Option<Amount>,
    ) -> Result<Grant, EngineError> {
        let device_id = match who {
            Spender::Owner => {
                return Ok(Grant {
                    kind,
                    reservation: None,
                    max_fee: None,
                    device: None,
                });
            }
            Spender::Approved { device, approval } => {
                return self
                    .engine
                    .approvals()
                    .admit(device, *approval, kind, amount)
                    .await;
            }
            Spender::Device(id) => id.clone(),
            Spender::Nwc(id) => connection_rules_key(id),
        };
        let reservation = new_id("making a reservation id")?;
        let now = now();
        let id = device_id.clone();
        let reserved = self
            .engine
            .store
            .spending_reserve(&device_id, reservation, move |record| {
                check(record, kind, amount, &id, &now)
            })
            .await?;
        match reserved {
            Reserved::NoRules => Ok(Grant {
                kind,
                reservation: None,
                max_fee: None,
                device: Some(device_id),
            }),
            Reserved::Taken { max_fee } => Ok(Grant {
                kind,
                reservation: Some(reservation),
                max_fee: max_fee.map(Amount::from_sat),
                device: Some(device_id),
            }),
            Reserved::Refused(stop) => Err(self.stopped(device_id, kind, amount, stop).await?),
        }
    }

    /// What the rules would answer `who`'s payment of `kind` and `amount` now, without
    /// reserving anything: for a transport that answers a refusal before it reads the
    /// wallet (Nostr Wallet Connect reads the balance before paying). The payment's
    /// own [`Spending::authorize`] decides, atomically.
    pub async fn precheck(
        &self,
        who: &Spender,
        kind: PaymentKind,
        amount: Option<Amount>,
    ) -> Result<(), EngineError> {
        let key = match who {
            Spender::Owner | Spender::Approved { .. } => return Ok(()),
            Spender::Device(id) => id.clone(),
            Spender::Nwc(id) => connection_rules_key(id),
        };
        let Some(mut record) = self.engine.store.spending_rules(&key).await? else {
            return Ok(());
        };
        match check(&mut record, kind, amount, &key, &now()) {
            Ok(_) => Ok(()),
            Err(stop) => Err(self.stopped(key, kind, amount, stop).await?),
        }
    }

    /// The error for a payment the rules' check stopped: refused, or (over a limit of
    /// rules that say so) in need of the owner's approval.
    async fn stopped(
        &self,
        device_id: String,
        kind: PaymentKind,
        amount: Option<Amount>,
        stop: Stop,
    ) -> Result<EngineError, EngineError> {
        match stop {
            Stop::Forbidden(message)
            | Stop::OverLimit {
                message,
                approve: false,
            } => Ok(EngineError::Refused(message)),
            Stop::OverLimit {
                message,
                approve: true,
            } => {
                let max_fee = self
                    .engine
                    .store
                    .spending_rules(&device_id)
                    .await?
                    .and_then(|r| r.max_fee_sat)
                    .map(Amount::from_sat);
                Ok(EngineError::NeedsApproval(Box::new(approvals::Asked {
                    device_id,
                    kind,
                    amount,
                    max_fee,
                    reason: message,
                })))
            }
        }
    }

    /// How the payment `grant` was for went: the reservation ends (failed: the amount
    /// goes back) or waits for the payment's end. A failure to record it is logged:
    /// the payment's own answer is what the client needs.
    pub async fn finish(&self, grant: Grant, outcome: Outcome) {
        if let Some(device) = grant.device.as_ref().filter(|d| connection_of(d).is_none()) {
            self.name_the_payer(device, outcome).await;
        }
        let Some(id) = grant.reservation else {
            return;
        };
        tracing::debug!(target: "berth::spending", kind = grant.kind.as_str(), ?outcome,
            "a reserved payment answered");
        let store = &self.engine.store;
        let done = match outcome {
            Outcome::Failed => store.spending_finish(id, false).await.map(drop),
            Outcome::Done | Outcome::Paid { .. } => store.spending_finish(id, true).await.map(drop),
            Outcome::Pending {
                movement_id,
                payment_hash,
            } => store
                .spending_link(id, movement_id, payment_hash)
                .await
                .map(drop),
        };
        if let Err(e) = done {
            tracing::error!(target: "berth::spending", error = %e, "cannot record how a reserved payment went");
        }
        // A payment that ended between its answer and the link above told the follower
        // before the follower could know it: look once more.
        if matches!(outcome, Outcome::Pending { .. })
            && let Err(e) = Box::pin(self.engine.end_finished_reservations(&[])).await
        {
            tracing::warn!(target: "berth::spending", error = %e, "cannot look at reserved payments");
        }
    }

    /// Name the device that made a payment in its movement's metadata
    /// (`"device": {"id", "name"}`), so the history, the events and the accounting
    /// export say who paid. Best effort, logged: the payment is made either way. A
    /// payment whose movement is not known when it answers (an Ark payment paused
    /// before its movement existed) stays unnamed.
    async fn name_the_payer(&self, device: &str, outcome: Outcome) {
        let (movement_id, payment_hash) = match outcome {
            Outcome::Failed | Outcome::Done => return,
            Outcome::Paid {
                movement_id,
                payment_hash,
            }
            | Outcome::Pending {
                movement_id,
                payment_hash,
            } => (movement_id, payment_hash),
        };
        let engine = self.engine;
        let named = async {
            let movement = match (movement_id, payment_hash) {
                (Some(id), _) => Some(id),
                (None, Some(hash)) => engine
                    .lightning()
                    .send_movement(ark::lightning::PaymentHash::from(hash))
                    .await?
                    .map(|m| m.id.0),
                (None, None) => None,
            };
            let Some(movement) = movement else {
                return Ok::<_, EngineError>(());
            };
            let name = engine
                .store
                .devices()
                .await?
                .into_iter()
                .find(|d| d.id == device)
                .map(|d| d.name)
                .unwrap_or_default();
            let patch = serde_json::json!({ PAYER_KEY: { "id": device, "name": name } });
            engine
                .ark()
                .patch_movement_metadata(movement, &patch)
                .await?;
            Ok(())
        };
        if let Err(e) = Box::pin(named).await {
            tracing::warn!(target: "berth::spending", error = %e, "cannot name the device in a payment's movement");
        }
    }

    /// Hold `grant`'s payment to its fee cap, if it has one: `estimate` (the wallet's
    /// estimate of the fee, awaited only then) must be within it, or the payment is
    /// refused and its reservation given back. Applied where the fee is the Ark
    /// server's (Ark, Lightning, offboard payments); an on-chain transaction's fee is
    /// the box's fee rate's, not capped (`docs/household.md`).
    pub async fn check_fee<F>(&self, grant: Grant, estimate: F) -> Result<Grant, EngineError>
    where
        F: std::future::Future<Output = Result<bark::FeeEstimate, EngineError>>,
    {
        let Some(cap) = grant.max_fee else {
            return Ok(grant);
        };
        let fee = match estimate.await {
            Ok(estimate) => estimate.fee,
            Err(e) => {
                self.finish(grant, Outcome::Failed).await;
                return Err(e);
            }
        };
        if fee > cap {
            let who = grant.device.as_deref().map_or("device", noun);
            self.finish(grant, Outcome::Failed).await;
            return Err(EngineError::Refused(format!(
                "this payment's fee of {} sat exceeds this {who}'s fee cap of {} sat",
                sats(fee.to_sat()),
                sats(cap.to_sat())
            )));
        }
        Ok(grant)
    }

    /// Spend `grant` on `payment` and record how it went (`outcome` reads the result).
    /// Callers pass the payment boxed: bark's payment futures are large, and a debug
    /// build that moves them by value overflows a worker's stack.
    pub async fn spend<T, F>(
        &self,
        grant: Grant,
        payment: F,
        outcome: impl FnOnce(&T) -> Outcome,
    ) -> Result<T, EngineError>
    where
        F: std::future::Future<Output = Result<T, EngineError>>,
    {
        let result = payment.await;
        let how = match &result {
            Ok(made) => outcome(made),
            Err(_) => Outcome::Failed,
        };
        self.finish(grant, how).await;
        result
    }
}

#[cfg(test)]
mod tests;

//! Payments held for the owner's approval: a device's payment over its per-payment
//! maximum or a budget, when its rules say `over_limit: approve`, waits instead of being
//! refused.
//!
//! [`Spending::authorize`] says a payment needs approval ([`EngineError::NeedsApproval`])
//! without holding anything; the transport that can run the request again later (the
//! REST API, `api::approvals`) holds it with [`Approvals::hold`], with the request as it
//! was made. The owner approves or denies it ([`Approvals::decide`]) before it expires;
//! the approved request is then run again as the device, and [`Approvals::admit`] lets
//! its payment through once: only the approved payment (same device, kind and amount;
//! the request itself is replayed unchanged, so the destination is too), only while
//! approved and not yet started, its amount counted against the device's budgets, its
//! fee capped as the rules were when it was asked. Every step is one store transaction
//! and raises an event (`approval-requested`, `approval-updated`).

use std::time::Duration as StdDuration;

use bitcoin::Amount;
use chrono::{DateTime, Utc};

use super::{Grant, PaymentKind, new_id, now, take};
use crate::engine::{Engine, EngineError};
use crate::events::{Alert, EventKind, vocabulary::ApprovalAlert};
use crate::store::approvals::{
    ApprovalRecord, HeldAnswerRecord, HeldRequestRecord, KEEP_ENDED, state,
};
use crate::store::now_us;

/// How long an approval waits for the owner, unless `berth.toml` says otherwise.
pub const DEFAULT_EXPIRY: StdDuration = StdDuration::from_secs(600);
/// Approvals one device may have waiting at once.
pub const MAX_WAITING_PER_DEVICE: usize = 5;
/// Approvals the box keeps waiting at once.
pub const MAX_WAITING: usize = 50;

/// A payment that needs the owner's approval, as the rules' check found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub device_id: String,
    pub kind: PaymentKind,
    pub amount: Option<Amount>,
    /// The device's fee cap now, which will bind the approved payment.
    pub max_fee: Option<Amount>,
    /// The rule it is over, with the figures.
    pub reason: String,
}

/// An approval as the owner and the device see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// 32 lowercase hex characters.
    pub id: String,
    pub record: ApprovalRecord,
}

impl Approval {
    fn new(id: [u8; 16], mut record: ApprovalRecord, now_us: u64) -> Approval {
        // Past its time but not yet marked by the expiry task: say what it is.
        if record.state == state::PENDING && record.expires_at_us <= now_us {
            record.state = state::EXPIRED.into();
        }
        Approval {
            id: bitcoin::hex::DisplayHex::to_lower_hex_string(&id[..]),
            record,
        }
    }

    pub fn at(us: u64) -> DateTime<Utc> {
        crate::events::timestamp(us)
    }

    /// The sentence a waiting requester reads.
    pub fn message(&self) -> String {
        format!(
            "{}: the payment waits for the owner's approval",
            self.record.reason
        )
    }

    /// The sentence a requester reads when the approval ended without its payment:
    /// denied, or not approved in time.
    pub fn refusal(&self) -> String {
        if self.record.state == state::DENIED {
            format!("{}: the owner denied this payment", self.record.reason)
        } else {
            format!(
                "{}: the owner did not approve this payment in time",
                self.record.reason
            )
        }
    }
}

/// The approvals a start found approved ([`Approvals::recover`]).
pub struct Recovered {
    /// Approved, not run yet.
    pub to_run: Vec<Approval>,
    /// Their run was cut short by a stop: now executed, outcome unknown.
    pub cut_short: Vec<Approval>,
}

/// An approval id from its hex form.
pub fn parse_id(id: &str) -> Option<[u8; 16]> {
    <[u8; 16] as bitcoin::hex::FromHex>::from_hex(id).ok()
}

impl Engine {
    pub fn approvals(&self) -> Approvals<'_> {
        Approvals { engine: self }
    }
}

/// The approvals, on the engine.
pub struct Approvals<'a> {
    engine: &'a Engine,
}

impl Approvals<'_> {
    /// Hold `asked` for the owner, with the request that will run once it is approved.
    /// Refused (naming the rule) when the device, or the box, has as many waiting as
    /// it may.
    pub async fn hold(
        &self,
        asked: Asked,
        destination: Option<String>,
        request: HeldRequestRecord,
    ) -> Result<Approval, EngineError> {
        let id = new_id("making an approval id")?;
        let at = now_us();
        let expiry = u64::try_from(self.engine.spending_policy.approval_expiry.as_micros())
            .unwrap_or(u64::MAX);
        let record = ApprovalRecord {
            device_id: asked.device_id,
            kind: asked.kind.as_str().into(),
            amount_sat: asked.amount.map(Amount::to_sat),
            max_fee_sat: asked.max_fee.map(Amount::to_sat),
            destination,
            reason: asked.reason,
            created_at_us: at,
            expires_at_us: at.saturating_add(expiry),
            state: state::PENDING.into(),
            decided_at_us: None,
            started: false,
            request,
            result: None,
        };
        let held = self
            .engine
            .store
            .approval_hold(id, record.clone(), MAX_WAITING_PER_DEVICE, MAX_WAITING)
            .await?;
        if held == crate::store::approvals::Held::TooMany {
            return Err(EngineError::Refused(format!(
                "{}; and the owner has not yet answered {MAX_WAITING_PER_DEVICE} payments of \
                 this {} (or {MAX_WAITING} in all) waiting for approval",
                record.reason,
                super::noun(&record.device_id)
            )));
        }
        let approval = Approval::new(id, record, at);
        self.engine.approval_held.notify_one();
        self.tell(EventKind::ApprovalRequested, &approval).await;
        Ok(approval)
    }

    /// Resolves when an approval is held next (or was held since the last call): its
    /// expiry may be the next one.
    pub async fn held(&self) {
        self.engine.approval_held.notified().await;
    }

    /// Every approval, newest first: the waiting ones and the newest ended ones
    /// ([`KEEP_ENDED`]).
    pub async fn list(&self) -> Result<Vec<Approval>, EngineError> {
        let now = now_us();
        let mut all: Vec<Approval> = self
            .engine
            .store
            .approvals()
            .await?
            .into_iter()
            .map(|(id, r)| Approval::new(id, r, now))
            .collect();
        all.sort_by_key(|a| std::cmp::Reverse(a.record.created_at_us));
        all.truncate(KEEP_ENDED + MAX_WAITING);
        Ok(all)
    }

    /// One approval.
    pub async fn get(&self, id: [u8; 16]) -> Result<Option<Approval>, EngineError> {
        Ok(self
            .engine
            .store
            .approval(id)
            .await?
            .map(|r| Approval::new(id, r, now_us())))
    }

    /// The owner's answer: approve or deny a pending approval. `Ok(None)`: no such
    /// approval; an approval that is not pending (decided, or expired) is refused.
    pub async fn decide(
        &self,
        id: [u8; 16],
        approve: bool,
    ) -> Result<Option<Approval>, EngineError> {
        let at = now_us();
        let changed = self
            .engine
            .store
            .approval_update(id, move |r| {
                let seen = Approval::new(id, r.clone(), at);
                if seen.record.state != state::PENDING {
                    return Err(format!(
                        "this approval is {}: only a pending one can be {}",
                        seen.record.state,
                        if approve { "approved" } else { "denied" }
                    ));
                }
                r.state = if approve {
                    state::APPROVED
                } else {
                    state::DENIED
                }
                .into();
                r.decided_at_us = Some(at);
                Ok(r.clone())
            })
            .await?;
        match changed {
            None => Ok(None),
            Some(Err(message)) => Err(EngineError::WrongState(message)),
            Some(Ok(record)) => {
                let approval = Approval::new(id, record, at);
                self.tell(EventKind::ApprovalUpdated, &approval).await;
                Ok(Some(approval))
            }
        }
    }

    /// Let approval `id`'s payment through, once: it must be approved and not started,
    /// and be the payment approved (device, kind, amount).
    pub(super) async fn admit(
        &self,
        device: &str,
        id: [u8; 16],
        kind: PaymentKind,
        amount: Option<Amount>,
    ) -> Result<Grant, EngineError> {
        let reservation = new_id("making a reservation id")?;
        let device_of_grant = device.to_owned();
        let device = device.to_owned();
        let now = now();
        let started = self
            .engine
            .store
            .approval_start(
                id,
                reservation,
                move |r| {
                    if r.state != state::APPROVED || r.started {
                        return Err(format!(
                            "this payment was not approved, or already ran (its approval is {})",
                            if r.started { state::EXECUTED } else { &r.state }
                        ));
                    }
                    if r.device_id != device
                        || r.kind != kind.as_str()
                        || r.amount_sat != amount.map(Amount::to_sat)
                    {
                        return Err("this is not the payment that was approved".to_string());
                    }
                    r.started = true;
                    Ok(r.max_fee_sat)
                },
                move |rules, r| {
                    let amount = r.amount_sat.unwrap_or(0);
                    take(rules, kind, amount, &r.device_id, &now)
                },
            )
            .await?;
        match started {
            None => Err(EngineError::Refused("no such approval".into())),
            Some(Err(message)) => Err(EngineError::Refused(message)),
            Some(Ok((max_fee, reserved))) => Ok(Grant {
                kind,
                reservation: reserved.then_some(reservation),
                max_fee: max_fee.map(Amount::from_sat),
                device: Some(device_of_grant),
            }),
        }
    }

    /// The approved request ran (or could not): record its answer; the approval is
    /// executed.
    pub async fn ran(
        &self,
        id: [u8; 16],
        answer: HeldAnswerRecord,
    ) -> Result<Option<Approval>, EngineError> {
        let changed = self
            .engine
            .store
            .approval_update(id, move |r| {
                r.state = state::EXECUTED.into();
                r.started = true;
                r.result = Some(answer);
                Ok::<_, ()>(r.clone())
            })
            .await?;
        let Some(Ok(record)) = changed else {
            return Ok(None);
        };
        let approval = Approval::new(id, record, now_us());
        self.tell(EventKind::ApprovalUpdated, &approval).await;
        Ok(Some(approval))
    }

    /// Mark the pending approvals whose time is up expired; returns them, and when the
    /// next one is due.
    pub async fn expire_due(&self) -> Result<(Vec<Approval>, Option<u64>), EngineError> {
        let now = now_us();
        let mut expired = Vec::new();
        let mut next = None::<u64>;
        for (id, r) in self.engine.store.approvals().await? {
            if r.state != state::PENDING {
                continue;
            }
            if r.expires_at_us > now {
                next = Some(next.map_or(r.expires_at_us, |n| n.min(r.expires_at_us)));
                continue;
            }
            let changed = self
                .engine
                .store
                .approval_update(id, move |r| {
                    if r.state != state::PENDING {
                        return Err(());
                    }
                    r.state = state::EXPIRED.into();
                    r.decided_at_us = Some(now);
                    Ok(r.clone())
                })
                .await?;
            if let Some(Ok(record)) = changed {
                let approval = Approval::new(id, record, now);
                self.tell(EventKind::ApprovalUpdated, &approval).await;
                expired.push(approval);
            }
        }
        Ok((expired, next))
    }

    /// At start: approvals approved but not run yet (to run now), and those whose run
    /// a stop cut short, now marked executed, their outcome unknown (and that answer
    /// made their `Idempotency-Key`'s, which would otherwise replay the 202 for a day).
    pub async fn recover(&self) -> Result<Recovered, EngineError> {
        let mut to_run = Vec::new();
        let mut cut_short = Vec::new();
        for (id, r) in self.engine.store.approvals().await? {
            if r.state != state::APPROVED {
                continue;
            }
            if r.started {
                let answer = HeldAnswerRecord {
                    status: 409,
                    body: serde_json::json!({
                        "message": "berthd stopped while this approved payment ran, so its \
                            outcome is unknown: check the history",
                        "code": "interrupted",
                    })
                    .to_string(),
                };
                if let Some(key) = r.request.idempotency_key {
                    self.engine
                        .store
                        .finish_idempotency_key(
                            key,
                            Some((answer.status, answer.body.clone().into_bytes())),
                        )
                        .await?;
                }
                cut_short.extend(self.ran(id, answer).await?);
            } else {
                to_run.push(Approval::new(id, r, now_us()));
            }
        }
        Ok(Recovered { to_run, cut_short })
    }

    /// Raise an approval's event. A failure to record it is logged: the approval itself
    /// is stored.
    async fn tell(&self, kind: EventKind, approval: &Approval) {
        let r = &approval.record;
        let what = match r.amount_sat {
            Some(sats) => format!("a {} payment of {sats} sat", r.kind),
            None => format!("a {} payment", r.kind),
        };
        let message = match r.state.as_str() {
            state::PENDING => format!("{what} waits for the owner's approval: {}", r.reason),
            state::APPROVED => format!("{what} was approved"),
            state::DENIED => format!("{what} was denied"),
            state::EXPIRED => format!("{what} was not approved in time"),
            _ => format!("{what} ran after its approval"),
        };
        let alert = Alert {
            message,
            amount_sat: r.amount_sat,
            approval: Some(ApprovalAlert {
                id: approval.id.clone(),
                state: r.state.clone(),
                device_id: r.device_id.clone(),
                payment_kind: r.kind.clone(),
                destination: r.destination.clone(),
                status: r.result.as_ref().map(|a| a.status),
            }),
            ..Alert::default()
        };
        if let Err(e) = self.engine.events.alert(kind, alert).await {
            tracing::error!(target: "berth::spending", error = %e, "cannot record an approval's event");
        }
    }
}

//! Payments held for the owner's approval (`engine::spending::approvals` decides what
//! they mean; the store keeps them and changes them only inside one transaction).
//!
//! [`SPENDING_APPROVALS`]: approval id → [`ApprovalRecord`]. A held payment is written
//! pending; the owner's decision, its expiry and its run each change it in one
//! transaction, and the run is let through at most once: the transaction that lets it
//! ([`Store::approval_start`]) checks it was approved and not started, marks it started
//! and reserves its amount against the device's budgets together. Ended approvals stay
//! for the record, the newest [`KEEP_ENDED`].

use redb::ReadableTable;

use crate::store::Store;
use crate::store::codec::Envelope;
use crate::store::error::{RedbResultExt, StoreError};
pub use crate::store::records::{ApprovalRecord, HeldAnswerRecord, HeldRequestRecord};
use crate::store::records::{SpendReservationRecord, SpendingRulesRecord};
use crate::store::schema::{SPENDING_APPROVALS, SPENDING_RESERVATIONS, SPENDING_RULES};

/// Ended approvals kept for the record; older ones are forgotten as new ones are held.
pub const KEEP_ENDED: usize = 200;

/// An approval's state, as stored.
pub mod state {
    pub const PENDING: &str = "pending";
    pub const APPROVED: &str = "approved";
    pub const DENIED: &str = "denied";
    pub const EXPIRED: &str = "expired";
    pub const EXECUTED: &str = "executed";

    /// Whether an approval in this state has ended (nothing more will happen to it).
    pub fn ended(state: &str) -> bool {
        matches!(state, DENIED | EXPIRED | EXECUTED)
    }
}

/// What [`Store::approval_hold`] came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Held {
    Held,
    /// As many approvals as a device (or the box) may have waiting already wait.
    TooMany,
}

impl Store {
    /// Hold a payment for approval under `id`, unless `device_id` has `per_device`
    /// approvals waiting, or the box `total`. Forgets the oldest ended approvals beyond
    /// [`KEEP_ENDED`].
    pub async fn approval_hold(
        &self,
        id: [u8; 16],
        record: ApprovalRecord,
        per_device: usize,
        total: usize,
    ) -> Result<Held, StoreError> {
        const CTX: &str = "holding a payment for approval";
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(SPENDING_APPROVALS).ctx(CTX)?;
            let mut ended = Vec::new();
            let (mut waiting, mut theirs) = (0, 0);
            for entry in table.iter().ctx(CTX)? {
                let (key, value) = entry.ctx(CTX)?;
                let r = value.value().decode()?;
                if state::ended(&r.state) {
                    ended.push((r.created_at_us, key.value()));
                } else {
                    waiting += 1;
                    if r.device_id == record.device_id {
                        theirs += 1;
                    }
                }
            }
            if theirs >= per_device || waiting >= total {
                return Ok(Held::TooMany);
            }
            if ended.len() >= KEEP_ENDED {
                ended.sort_unstable();
                for (_, key) in &ended[..=ended.len() - KEEP_ENDED] {
                    table.remove(*key).ctx(CTX)?;
                }
            }
            table.insert(id, Envelope::encode(&record)?).ctx(CTX)?;
            Ok(Held::Held)
        })
        .await
    }

    /// Every approval, pending or ended, with its id.
    pub async fn approvals(&self) -> Result<Vec<([u8; 16], ApprovalRecord)>, StoreError> {
        const CTX: &str = "listing approvals";
        self.read(CTX, |tx| {
            let table = tx.open_table(SPENDING_APPROVALS).ctx(CTX)?;
            let mut out = Vec::new();
            for entry in table.iter().ctx(CTX)? {
                let (id, value) = entry.ctx(CTX)?;
                out.push((id.value(), value.value().decode()?));
            }
            Ok(out)
        })
        .await
    }

    /// One approval.
    pub async fn approval(&self, id: [u8; 16]) -> Result<Option<ApprovalRecord>, StoreError> {
        const CTX: &str = "reading an approval";
        self.read(CTX, move |tx| {
            tx.open_table(SPENDING_APPROVALS)
                .ctx(CTX)?
                .get(id)
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()
        })
        .await
    }

    /// Change approval `id` with `change`, in one transaction: it is written back when
    /// `change` returns `Ok`. `Ok(None)`: no such approval.
    pub async fn approval_update<T, R, F>(
        &self,
        id: [u8; 16],
        change: F,
    ) -> Result<Option<Result<T, R>>, StoreError>
    where
        T: Send + 'static,
        R: Send + 'static,
        F: FnOnce(&mut ApprovalRecord) -> Result<T, R> + Send + 'static,
    {
        const CTX: &str = "updating an approval";
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(SPENDING_APPROVALS).ctx(CTX)?;
            let Some(mut record) = table
                .get(id)
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?
            else {
                return Ok(None);
            };
            let changed = change(&mut record);
            if changed.is_ok() {
                table.insert(id, Envelope::encode(&record)?).ctx(CTX)?;
            }
            Ok(Some(changed))
        })
        .await
    }

    /// Let approval `id`'s payment run: `admit` checks the approval (approved, not
    /// started, the payment the one approved) and marks it started; `reserve` takes its
    /// amount from the device's budgets (it has rules) and makes the reservation,
    /// written under `reservation_id`. All in one transaction, so it runs at most once.
    /// `Ok(None)`: no such approval; the `bool` says whether a reservation was made.
    pub async fn approval_start<T, R, A, B>(
        &self,
        id: [u8; 16],
        reservation_id: [u8; 16],
        admit: A,
        reserve: B,
    ) -> Result<Option<Result<(T, bool), R>>, StoreError>
    where
        T: Send + 'static,
        R: Send + 'static,
        A: FnOnce(&mut ApprovalRecord) -> Result<T, R> + Send + 'static,
        B: FnOnce(&mut SpendingRulesRecord, &ApprovalRecord) -> SpendReservationRecord
            + Send
            + 'static,
    {
        const CTX: &str = "starting an approved payment";
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(SPENDING_APPROVALS).ctx(CTX)?;
            let Some(mut approval) = table
                .get(id)
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?
            else {
                return Ok(None);
            };
            let admitted = match admit(&mut approval) {
                Ok(admitted) => admitted,
                Err(refusal) => return Ok(Some(Err(refusal))),
            };
            table.insert(id, Envelope::encode(&approval)?).ctx(CTX)?;
            let mut rules = tx.open_table(SPENDING_RULES).ctx(CTX)?;
            let current = rules
                .get(approval.device_id.as_str())
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?;
            let Some(mut record) = current else {
                return Ok(Some(Ok((admitted, false))));
            };
            let reservation = reserve(&mut record, &approval);
            rules
                .insert(approval.device_id.as_str(), Envelope::encode(&record)?)
                .ctx(CTX)?;
            tx.open_table(SPENDING_RESERVATIONS)
                .ctx(CTX)?
                .insert(reservation_id, Envelope::encode(&reservation)?)
                .ctx(CTX)?;
            Ok(Some(Ok((admitted, true))))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreConfig;

    fn approval(device: &str, state: &str, at: u64) -> ApprovalRecord {
        ApprovalRecord {
            device_id: device.into(),
            kind: "ark".into(),
            amount_sat: Some(2_000),
            max_fee_sat: None,
            destination: None,
            reason: "over".into(),
            created_at_us: at,
            expires_at_us: at + 1,
            state: state.into(),
            decided_at_us: None,
            started: false,
            request: HeldRequestRecord {
                method: "POST".into(),
                path: "/api/v1/wallet/send".into(),
                body: "{}".into(),
                idempotency_key: None,
                nwc_key: None,
            },
            result: None,
        }
    }

    #[tokio::test]
    async fn waiting_approvals_are_bounded_and_only_the_newest_ended_ones_are_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = Store::open_async(&dir.path().join("db.redb"), &StoreConfig::default())
            .await
            .expect("open");
        let id = |n: u16| {
            let mut id = [0u8; 16];
            id[..2].copy_from_slice(&n.to_be_bytes());
            id
        };
        // Per device: the sixth waiting one is refused; another device's is not.
        for n in 0..5 {
            let held = store
                .approval_hold(id(n), approval("a", state::PENDING, u64::from(n)), 5, 7)
                .await
                .expect("hold");
            assert_eq!(held, Held::Held);
        }
        let sixth = approval("a", state::PENDING, 5);
        assert_eq!(
            store
                .approval_hold(id(5), sixth.clone(), 5, 7)
                .await
                .expect("hold"),
            Held::TooMany
        );
        for n in 5..7 {
            let held = store
                .approval_hold(id(n), approval("b", state::PENDING, u64::from(n)), 5, 7)
                .await
                .expect("hold");
            assert_eq!(held, Held::Held);
        }
        // For the box: the eighth waiting one is refused, whoever asks.
        assert_eq!(
            store
                .approval_hold(id(7), approval("c", state::PENDING, 7), 5, 7)
                .await
                .expect("hold"),
            Held::TooMany
        );
        assert_eq!(
            store.approvals().await.expect("list").len(),
            7,
            "nothing written"
        );
        // Ended ones past KEEP_ENDED: the oldest go as new ones are held.
        let ended = u16::try_from(KEEP_ENDED).expect("small") + 3;
        for n in 0..ended {
            let at = 1_000 + u64::from(n);
            let record = approval("d", state::DENIED, at);
            let held = store
                .approval_hold(id(100 + n), record, 5, 50)
                .await
                .expect("hold an ended one");
            assert_eq!(held, Held::Held);
        }
        let all = store.approvals().await.expect("list");
        let kept: Vec<u64> = all
            .iter()
            .filter(|(_, r)| state::ended(&r.state))
            .map(|(_, r)| r.created_at_us)
            .collect();
        assert_eq!(kept.len(), KEEP_ENDED, "the newest ended ones");
        assert!(
            kept.iter().all(|at| *at >= 1_003),
            "the oldest went: {kept:?}"
        );
        assert_eq!(all.len(), KEEP_ENDED + 7, "every waiting one stays");
    }
}

//! Spending rules of paired devices, and the payments reserved against them
//! (`engine::spending` decides what the rules mean; the store keeps them whole and
//! changes them only inside one transaction).
//!
//! - [`SPENDING_RULES`]: device id (or a Nostr Wallet Connect connection's key,
//!   [`connection_rules_key`]) → [`SpendingRulesRecord`]: the device's limits and how
//!   much of each budget its period has used.
//! - [`SPENDING_RESERVATIONS`]: reservation id → [`SpendReservationRecord`]: a payment
//!   whose amount was taken from its device's budgets and whose outcome is not known
//!   yet. It is written in the same transaction that checks the rules and takes the
//!   amount ([`Store::spending_reserve`]), so two payments cannot together pass a
//!   budget; it is removed when the payment ends ([`Store::spending_finish`]), giving
//!   the amount back if the payment failed. A restart keeps both.
//!
//! Removing a device removes its rules (`store::tokens`), revoking a connection its
//! (`store::nwc`); their reservations stay until their payments end.

use redb::ReadableTable;

use crate::store::Store;
use crate::store::codec::Envelope;
use crate::store::error::{RedbResultExt, StoreError};
pub use crate::store::records::{BudgetRecord, SpendReservationRecord, SpendingRulesRecord};
use crate::store::schema::{DEVICES, NWC_CONNECTIONS, SPENDING_RESERVATIONS, SPENDING_RULES};

/// What [`Store::spending_reserve`] came to.
#[derive(Debug)]
pub enum Reserved<R> {
    /// The device has no rules: nothing was written.
    NoRules,
    /// Taken and recorded; the device's fee cap, which the payment must keep.
    Taken { max_fee: Option<u64> },
    /// The check refused it; nothing was written.
    Refused(R),
}

impl Store {
    /// A device's rules, if it has any.
    pub async fn spending_rules(
        &self,
        device_id: &str,
    ) -> Result<Option<SpendingRulesRecord>, StoreError> {
        const CTX: &str = "reading a device's spending rules";
        let device_id = device_id.to_owned();
        self.read(CTX, move |tx| {
            tx.open_table(SPENDING_RULES)
                .ctx(CTX)?
                .get(device_id.as_str())
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()
        })
        .await
    }

    /// Replace a device's rules with what `replace` makes of the current ones (`None`:
    /// no rules). `Ok(false)` when no device has this id.
    pub async fn set_spending_rules<F>(
        &self,
        device_id: &str,
        replace: F,
    ) -> Result<bool, StoreError>
    where
        F: FnOnce(Option<SpendingRulesRecord>) -> Option<SpendingRulesRecord> + Send + 'static,
    {
        const CTX: &str = "setting a device's spending rules";
        let device_id = device_id.to_owned();
        self.write(CTX, move |tx| {
            let exists = match device_id.strip_prefix(CONNECTION_PREFIX) {
                _ if device_id == NEW_DEVICES_KEY => true,
                // A connection that is revoked takes no rules (its revocation removed
                // them).
                Some(connection) => tx
                    .open_table(NWC_CONNECTIONS)
                    .ctx(CTX)?
                    .get(connection)
                    .ctx(CTX)?
                    .map(|v| v.value().decode())
                    .transpose()?
                    .is_some_and(|c| c.revoked_at_us.is_none()),
                None => tx
                    .open_table(DEVICES)
                    .ctx(CTX)?
                    .get(device_id.as_str())
                    .ctx(CTX)?
                    .is_some(),
            };
            if !exists {
                return Ok(false);
            }
            let mut rules = tx.open_table(SPENDING_RULES).ctx(CTX)?;
            let current = rules
                .get(device_id.as_str())
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?;
            match replace(current) {
                Some(new) => {
                    rules
                        .insert(device_id.as_str(), Envelope::encode(&new)?)
                        .ctx(CTX)?;
                }
                None => {
                    rules.remove(device_id.as_str()).ctx(CTX)?;
                }
            }
            Ok(true)
        })
        .await
    }

    /// Reserve a payment of device `device_id` under id `reservation_id`: run `check`
    /// on its rules (which may change them: renew a period, take the amount) and, when
    /// it passes, write the changed rules and the reservation, in one transaction.
    pub async fn spending_reserve<R, F>(
        &self,
        device_id: &str,
        reservation_id: [u8; 16],
        check: F,
    ) -> Result<Reserved<R>, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&mut SpendingRulesRecord) -> Result<SpendReservationRecord, R> + Send + 'static,
    {
        const CTX: &str = "reserving a payment against a device's budget";
        let device_id = device_id.to_owned();
        self.write(CTX, move |tx| {
            let mut rules = tx.open_table(SPENDING_RULES).ctx(CTX)?;
            let Some(mut record) = rules
                .get(device_id.as_str())
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?
            else {
                return Ok(Reserved::NoRules);
            };
            let reservation = match check(&mut record) {
                Ok(reservation) => reservation,
                Err(refusal) => return Ok(Reserved::Refused(refusal)),
            };
            rules
                .insert(device_id.as_str(), Envelope::encode(&record)?)
                .ctx(CTX)?;
            tx.open_table(SPENDING_RESERVATIONS)
                .ctx(CTX)?
                .insert(reservation_id, Envelope::encode(&reservation)?)
                .ctx(CTX)?;
            Ok(Reserved::Taken {
                max_fee: record.max_fee_sat,
            })
        })
        .await
    }

    /// Note what a reservation's payment became in the wallet (its movement, or its
    /// payment hash), so that its end can be recognised. `Ok(false)`: no such
    /// reservation (it ended already).
    pub async fn spending_link(
        &self,
        reservation_id: [u8; 16],
        movement_id: Option<u32>,
        payment_hash: Option<[u8; 32]>,
    ) -> Result<bool, StoreError> {
        const CTX: &str = "linking a reserved payment to its movement";
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(SPENDING_RESERVATIONS).ctx(CTX)?;
            let Some(mut record) = table
                .get(reservation_id)
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?
            else {
                return Ok(false);
            };
            record.movement_id = movement_id.or(record.movement_id);
            record.payment_hash = payment_hash.or(record.payment_hash);
            table
                .insert(reservation_id, Envelope::encode(&record)?)
                .ctx(CTX)?;
            Ok(true)
        })
        .await
    }

    /// A reserved payment ended: forget the reservation; unless `spent`, give its
    /// amount back to each budget it was taken from that is still in the same period.
    /// `Ok(false)`: no such reservation.
    pub async fn spending_finish(
        &self,
        reservation_id: [u8; 16],
        spent: bool,
    ) -> Result<bool, StoreError> {
        const CTX: &str = "ending a reserved payment";
        self.write(CTX, move |tx| {
            let Some(reservation) = tx
                .open_table(SPENDING_RESERVATIONS)
                .ctx(CTX)?
                .remove(reservation_id)
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?
            else {
                return Ok(false);
            };
            if spent {
                return Ok(true);
            }
            let mut rules = tx.open_table(SPENDING_RULES).ctx(CTX)?;
            let current: Option<SpendingRulesRecord> = rules
                .get(reservation.device_id.as_str())
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?;
            if let Some(mut record) = current {
                for budget in &mut record.budgets {
                    if reservation.taken.iter().any(|(period, start)| {
                        *period == budget.period && *start == budget.period_start_us
                    }) {
                        budget.used_sat = budget.used_sat.saturating_sub(reservation.amount_sat);
                    }
                }
                rules
                    .insert(reservation.device_id.as_str(), Envelope::encode(&record)?)
                    .ctx(CTX)?;
            }
            Ok(true)
        })
        .await
    }

    /// Every reservation whose payment has not ended, with its id.
    pub async fn spending_reservations(
        &self,
    ) -> Result<Vec<([u8; 16], SpendReservationRecord)>, StoreError> {
        const CTX: &str = "listing reserved payments";
        self.read(CTX, |tx| {
            let table = tx.open_table(SPENDING_RESERVATIONS).ctx(CTX)?;
            let mut out = Vec::new();
            for entry in table.iter().ctx(CTX)? {
                let (id, value) = entry.ctx(CTX)?;
                out.push((id.value(), value.value().decode()?));
            }
            Ok(out)
        })
        .await
    }
}

/// The key of a Nostr Wallet Connect connection's rules (and reservations, and
/// approvals) where a paired device's id is used: its id behind this prefix, which no
/// device id has.
const CONNECTION_PREFIX: &str = "nwc:";

/// The key of the rules newly paired devices start with, as the owner last set them
/// (`engine::spending::Spending::set_new_device_rules`): no device id or connection
/// key begins with `~`.
pub const NEW_DEVICES_KEY: &str = "~new-devices";

/// The rules' key of Nostr Wallet Connect connection `id`.
pub fn connection_rules_key(id: &str) -> String {
    format!("{CONNECTION_PREFIX}{id}")
}

/// The connection whose rules' key this is, if it is one's.
pub fn connection_of(key: &str) -> Option<&str> {
    key.strip_prefix(CONNECTION_PREFIX)
}

/// Remove a device's rules (inside the transaction that removes the device).
pub(super) fn forget_device(
    tx: &redb::WriteTransaction,
    device_id: &str,
    ctx: &'static str,
) -> Result<(), StoreError> {
    tx.open_table(SPENDING_RULES)
        .ctx(ctx)?
        .remove(device_id)
        .ctx(ctx)?;
    Ok(())
}

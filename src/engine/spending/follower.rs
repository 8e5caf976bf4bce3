//! Ends reserved payments as their payments end: a follower of the wallet's event log
//! (and a look at each reservation at start, for what ended while berthd was stopped).
//! A failed or canceled movement gives its amount back to the device's budgets.

use std::sync::Arc;
use std::time::Duration as StdDuration;

use super::{KEEP_UNRESOLVED, micros, now};
use crate::engine::{Engine, EngineError};
use crate::store::spending::SpendReservationRecord;

impl Engine {
    /// Follow the wallet's events and end each reserved payment when its movement
    /// does (a failed one gives its amount back), across restarts.
    pub fn spawn_spending_follower(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let engine = Arc::clone(self);
        self.tasks.spawn(
            "spending",
            move || {
                let engine = Arc::clone(&engine);
                async move {
                    engine
                        .follow_reservations()
                        .await
                        .map_err(|e| e.to_string())
                }
            },
            || tokio::time::sleep(StdDuration::from_secs(5)),
        )
    }

    async fn follow_reservations(&self) -> Result<(), EngineError> {
        use crate::events::{MAX_PAGE, Woken};
        let mut cursor = self.events.latest_id();
        // What ended while berthd was stopped (or before this follower began).
        self.end_finished_reservations(&[]).await?;
        loop {
            let deadline = tokio::time::Instant::now() + StdDuration::from_secs(60);
            let (page, woken) = self.events.wait_after(cursor, MAX_PAGE, deadline).await?;
            if woken == Woken::Shutdown {
                return Ok(());
            }
            if page.missed && page.events.is_empty() {
                cursor = self.events.latest_id();
                self.end_finished_reservations(&[]).await?;
                continue;
            }
            cursor = page.next_cursor(cursor);
            let ended: Vec<&bark::movement::Movement> = page
                .events
                .iter()
                .filter_map(|e| e.movement.as_ref())
                .filter(|m| m.status != bark::movement::MovementStatus::Pending)
                .collect();
            if !ended.is_empty() {
                self.end_finished_reservations(&ended).await?;
            }
        }
    }

    /// End every reservation whose payment has ended: its movement (by id, or the
    /// Lightning send of its payment hash) finished. Failed or canceled: the amount
    /// goes back. `ended`: movements that just ended (from the event log), which
    /// decide for the reservations they are the payments of; with none, each
    /// reservation's payment is looked up (at start, and when a payment is answered).
    pub(super) async fn end_finished_reservations(
        &self,
        ended: &[&bark::movement::Movement],
    ) -> Result<(), EngineError> {
        use bark::movement::MovementStatus as S;
        let sends = bark::subsystem::Subsystem::LIGHTNING_SEND.as_name();
        let is_payment_of = |m: &bark::movement::Movement, r: &SpendReservationRecord| {
            r.movement_id == Some(m.id.0)
                || (m.subsystem.name == sends
                    && r.payment_hash.is_some_and(|hash| {
                        m.metadata.get("payment_hash").and_then(|v| v.as_str())
                            == Some(&ark::lightning::PaymentHash::from(hash).to_string())
                    }))
        };
        let reservations = self.store.spending_reservations().await?;
        let year_ago = micros(&now()).saturating_sub(KEEP_UNRESOLVED.as_micros() as u64);
        for (id, reservation) in reservations {
            // Older than any period: it counts against no budget any more.
            if reservation.at_us < year_ago {
                self.store.spending_finish(id, true).await?;
                continue;
            }
            // A movement just ended decides. (bark keeps a Lightning send's checkpoint
            // while it revokes a failed one, after its movement failed: looked up then,
            // it would still seem under way.)
            let status = if !ended.is_empty() {
                ended
                    .iter()
                    .find(|m| is_payment_of(m, &reservation))
                    .map(|m| m.status)
            } else {
                match (reservation.movement_id, reservation.payment_hash) {
                    (Some(movement), _) => self.movement_status(movement).await?,
                    (None, Some(hash)) => self.lightning_send_status(hash).await?,
                    // Reserved, then berthd stopped before the payment said what it
                    // became: it stays reserved until its period ends (never too little
                    // counted).
                    (None, None) => None,
                }
            };
            tracing::debug!(target: "berth::spending", device = %reservation.device_id,
                amount_sat = reservation.amount_sat, ?status, "a reserved payment looked at");
            match status {
                Some(S::Successful) => {
                    self.store.spending_finish(id, true).await?;
                }
                Some(S::Failed | S::Canceled) => {
                    self.store.spending_finish(id, false).await?;
                    tracing::info!(target: "berth::spending", device = %reservation.device_id,
                        amount_sat = reservation.amount_sat,
                        "a reserved payment failed; its amount is back in the device's budgets");
                }
                Some(S::Pending) | None => {}
            }
        }
        Ok(())
    }
}

impl Engine {
    /// A movement's status, from the store (`None`: no such movement).
    async fn movement_status(
        &self,
        id: u32,
    ) -> Result<Option<bark::movement::MovementStatus>, EngineError> {
        use bark::persist::BarkPersister;
        match BarkPersister::get_movement_by_id(&self.store, bark::movement::MovementId(id)).await {
            Ok(movement) => Ok(Some(movement.status)),
            Err(e)
                if matches!(
                    e.downcast_ref(),
                    Some(crate::store::StoreError::NotFound(_))
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(EngineError::internal("reading a movement")(e)),
        }
    }

    /// How the Lightning payment of `hash` stands, as a movement's status (`None`
    /// while the wallet is not open: asked again later).
    async fn lightning_send_status(
        &self,
        hash: [u8; 32],
    ) -> Result<Option<bark::movement::MovementStatus>, EngineError> {
        use bark::actions::lightning::pay::LightningSendState as L;
        use bark::movement::MovementStatus as S;
        let hash = ark::lightning::PaymentHash::from(hash);
        match self.lightning().send(hash).await {
            Ok(lookup) => Ok(Some(match lookup.state {
                L::Paid(_) => S::Successful,
                // A failed send keeps its checkpoint while bark revokes it, after its
                // movement failed: the movement decides.
                L::InProgress(_) => match self.lightning().send_movement(hash).await? {
                    Some(m) => m.status,
                    None => S::Pending,
                },
                // Refused or failed, its funds back (bark keeps no record of a send that
                // never began).
                L::Unknown => S::Failed,
            })),
            Err(EngineError::NotLoaded | EngineError::Locked | EngineError::NoWallet) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

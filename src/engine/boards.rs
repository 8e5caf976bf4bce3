//! Boarding: moving on-chain funds into VTXOs.
//!
//! At wallet load, a board a crash or power cut left between its movement and its
//! wallet action is finished as failed ([`Engine::fail_orphaned_board_movements`]).

use std::collections::HashSet;

use bark::movement::update::MovementUpdate;
use bark::movement::{Movement, MovementId, MovementStatus};
use bark::subsystem::Subsystem;
use bitcoin::{Amount, SignedAmount};

use super::offchain::Ark;
use super::{Engine, EngineError};

impl Engine {
    /// The server's limits, checked before anything is signed, so a client mistake is
    /// a 400 and not a failure halfway.
    pub(super) async fn check_board_amount(
        &self,
        loaded: &super::LoadedWallet,
        amount: Amount,
    ) -> Result<(), EngineError> {
        let info =
            loaded
                .wallet
                .require_ark_info()
                .await
                .map_err(|e| EngineError::Unreachable {
                    what: "the Ark server",
                    reason: format!("{e:#}"),
                })?;
        if amount < info.min_board_amount {
            return Err(EngineError::InvalidRequest(format!(
                "amount_sat {} is below the Ark server's minimum board of {} sat",
                amount.to_sat(),
                info.min_board_amount.to_sat()
            )));
        }
        if let Some(max) = info.max_vtxo_amount
            && amount > max
        {
            return Err(EngineError::InvalidRequest(format!(
                "amount_sat {} is above the Ark server's maximum VTXO of {} sat",
                amount.to_sat(),
                max.to_sat()
            )));
        }
        Ok(())
    }

    /// Finish as failed every pending board movement that no board action names (the
    /// load goes on whatever happens; failures are logged).
    ///
    /// bark 0.8's `board` writes, each in its own transaction, the movement (pending,
    /// `bark.board`) and only then the wallet action that stores the VTXO, broadcasts
    /// the funding transaction and drives the board to its end. A power cut between the
    /// two (seen once in 160 cycles of `image/power-cut-test`) leaves a movement that
    /// nothing in bark ever finishes: bark drives only stored actions. Nothing moved:
    /// the funding transaction was signed in memory only, never broadcast, and its
    /// coins are still the on-chain wallet's. So it is finished as bark finishes a board
    /// whose funding can never confirm: failed, with nothing received (bark notifies it,
    /// and the event recorder records it).
    ///
    /// The other order never leaves an orphan: bark finishes a board's movement before
    /// it removes the action. Must run before anything can board (the wallet's tasks,
    /// the API), or it could fail a board in its window; and after the event recorder
    /// starts.
    ///
    /// `pending`: the wallet's pending movements of this and other subsystems (one scan
    /// of the history serves every repair at load).
    pub(super) async fn fail_orphaned_board_movements(
        &self,
        wallet: &bark::Wallet,
        pending: &[Movement],
    ) {
        let boards: Vec<&Movement> = pending
            .iter()
            .filter(|m| m.subsystem.name == Subsystem::BOARD.as_name())
            .collect();
        if boards.is_empty() {
            return;
        }
        let named: HashSet<MovementId> = match wallet.pending_boards().await {
            Ok(actions) => actions.iter().map(|b| b.movement_id).collect(),
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"),
                    "cannot check for boards a crash left pending; they stay pending");
                return;
            }
        };
        for movement in boards.into_iter().filter(|m| !named.contains(&m.id)) {
            let id = movement.id;
            let failed = wallet
                .movements_mgr()
                .finish_movement_with_update(
                    id,
                    MovementStatus::Failed,
                    MovementUpdate::new().effective_balance(SignedAmount::ZERO),
                )
                .await;
            match failed {
                Ok(()) => tracing::warn!(
                    movement_id = id.0,
                    "a board a crash left with no wallet action (never broadcast): marked failed"
                ),
                Err(e) => tracing::error!(
                    movement_id = id.0,
                    error = %format!("{e:#}"),
                    "cannot mark as failed a board a crash left pending"
                ),
            }
        }
    }
}

/// How often, and how far apart, a board the Ark server refused for being ahead of its
/// chain tip is tried again.
const SERVER_BEHIND_ATTEMPTS: u32 = 4;
const SERVER_BEHIND_PAUSE: std::time::Duration = std::time::Duration::from_secs(2);

/// Run `attempt` again while the Ark server refuses it for a VTXO lifetime "too high":
/// bark dates a new VTXO's expiry from the wallet's chain tip, the server checks it
/// against its own, and just after a block the wallet may have seen it first. The
/// server catches up within seconds. Retrying is safe: a refused board has spent only
/// a VTXO key index (nothing is signed, stored as a movement or broadcast before the
/// server's cosignature).
async fn while_server_catches_up<T, F, Fut>(mut attempt: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let mut tries = 1;
    loop {
        match attempt().await {
            Err(e) if tries < SERVER_BEHIND_ATTEMPTS && server_is_behind(&e) => {
                tracing::info!(error = %format!("{e:#}"), "the Ark server has not seen the newest block yet; boarding again shortly");
                tries += 1;
                tokio::time::sleep(SERVER_BEHIND_PAUSE).await;
            }
            other => return other,
        }
    }
}

/// Whether the server refused a new VTXO whose expiry is beyond its lifetime as the
/// server counts it (its tip behind the wallet's).
fn server_is_behind(e: &anyhow::Error) -> bool {
    let text = format!("{e:#}");
    text.contains("requested VTXO lifetime") && text.contains("too high")
}

/// bark's fee-rate cache starts at the configured fallback and only its daemon
/// refreshes it; refresh it before building a transaction (a no-op within its TTL).
pub(super) async fn refresh_fee_rates(loaded: &super::LoadedWallet) {
    let fallback = loaded.wallet.config().fallback_fee_rate;
    if let Err(e) = loaded.wallet.chain().update_fee_rates(fallback).await {
        tracing::warn!(error = %format!("{e:#}"), "cannot refresh fee rates; using the cached ones");
    }
}

impl Ark<'_> {
    /// Board `amount` from the on-chain wallet (plus the on-chain fee). Returns once the
    /// funding transaction is signed and handed to the chain source; the VTXO becomes
    /// spendable after the server's required confirmations and a sync.
    pub async fn board_amount(
        &self,
        amount: Amount,
    ) -> Result<bark::persist::models::PendingBoard, EngineError> {
        let loaded = self.engine.loaded().await?;
        self.engine.check_board_amount(&loaded, amount).await?;
        refresh_fee_rates(&loaded).await;
        while_server_catches_up(|| loaded.wallet.board_amount(amount))
            .await
            .map_err(EngineError::classify("boarding"))
    }

    /// Board every on-chain coin into one VTXO.
    pub async fn board_all(&self) -> Result<bark::persist::models::PendingBoard, EngineError> {
        let loaded = self.engine.loaded().await?;
        // bark spends a VTXO key and asks the server before it notices an empty
        // wallet; say so up front.
        if loaded.onchain.read().await.balance().total() == Amount::ZERO {
            return Err(EngineError::InsufficientFunds(
                "the on-chain wallet has no funds to board (sync it first if funds just arrived)"
                    .into(),
            ));
        }
        refresh_fee_rates(&loaded).await;
        while_server_catches_up(|| loaded.wallet.board_all())
            .await
            .map_err(EngineError::classify("boarding"))
    }

    /// Boards whose funding transaction has not confirmed enough yet.
    pub async fn pending_boards(
        &self,
    ) -> Result<Vec<bark::persist::models::PendingBoard>, EngineError> {
        let loaded = self.engine.loaded().await?;
        loaded
            .wallet
            .pending_boards()
            .await
            .map_err(EngineError::internal("listing pending boards"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_board_refused_while_the_server_is_behind_is_tried_again_and_others_are_not() {
        let calls = std::cell::Cell::new(0);
        let behind = || {
            anyhow::anyhow!("bad user input: requested VTXO lifetime 437 is too high (server VTXO lifetime is 432)").context("error requesting board cosign")
        };
        let done = while_server_catches_up(|| {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move { if n < 3 { Err(behind()) } else { Ok(n) } }
        })
        .await;
        assert_eq!(done.expect("third attempt"), 3);

        calls.set(0);
        let gave_up = while_server_catches_up(|| {
            calls.set(calls.get() + 1);
            async { Err::<(), _>(behind()) }
        })
        .await;
        assert!(gave_up.is_err());
        assert_eq!(calls.get(), SERVER_BEHIND_ATTEMPTS, "bounded");

        calls.set(0);
        let other = while_server_catches_up(|| {
            calls.set(calls.get() + 1);
            async { Err::<(), _>(anyhow::anyhow!("insufficient funds")) }
        })
        .await;
        assert!(other.is_err());
        assert_eq!(calls.get(), 1, "another error is not retried");
    }
}

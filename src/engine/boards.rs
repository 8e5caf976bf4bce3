//! Boarding: moving on-chain funds into VTXOs.

use bitcoin::Amount;

use super::{Engine, EngineError};

impl Engine {
    /// Board `amount` from the on-chain wallet (plus the on-chain fee). Returns once the
    /// funding transaction is signed and handed to the chain source; the VTXO becomes
    /// spendable after the server's required confirmations and a sync.
    pub async fn board_amount(
        &self,
        amount: Amount,
    ) -> Result<bark::persist::models::PendingBoard, EngineError> {
        let loaded = self.loaded().await?;
        self.check_board_amount(&loaded, amount).await?;
        refresh_fee_rates(&loaded).await;
        loaded
            .wallet
            .board_amount(amount)
            .await
            .map_err(EngineError::classify("boarding"))
    }

    /// Board every on-chain coin into one VTXO.
    pub async fn board_all(&self) -> Result<bark::persist::models::PendingBoard, EngineError> {
        let loaded = self.loaded().await?;
        // bark spends a VTXO key and asks the server before it notices an empty
        // wallet; say so up front.
        if loaded.onchain.read().await.balance().total() == Amount::ZERO {
            return Err(EngineError::InsufficientFunds(
                "the on-chain wallet has no funds to board (sync it first if funds just arrived)"
                    .into(),
            ));
        }
        refresh_fee_rates(&loaded).await;
        loaded
            .wallet
            .board_all()
            .await
            .map_err(EngineError::classify("boarding"))
    }

    /// Boards whose funding transaction has not confirmed enough yet.
    pub async fn pending_boards(
        &self,
    ) -> Result<Vec<bark::persist::models::PendingBoard>, EngineError> {
        let loaded = self.loaded().await?;
        loaded
            .wallet
            .pending_boards()
            .await
            .map_err(EngineError::internal("listing pending boards"))
    }

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
}

/// bark's fee-rate cache starts at the configured fallback and only its daemon
/// refreshes it; refresh it before building a transaction (a no-op within its TTL).
pub(super) async fn refresh_fee_rates(loaded: &super::LoadedWallet) {
    let fallback = loaded.wallet.config().fallback_fee_rate;
    if let Err(e) = loaded.wallet.chain().update_fee_rates(fallback).await {
        tracing::warn!(error = %format!("{e:#}"), "cannot refresh fee rates; using the cached ones");
    }
}

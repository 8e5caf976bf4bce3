//! The on-chain wallet (BDK, owned by bark) and the chain itself.

use bark::onchain::OnchainWalletTrait;
use bdk_wallet::Balance;

use super::{Engine, EngineError};

impl Engine {
    /// Reveal the next receive address of the on-chain wallet (persisted before it is
    /// handed out, so it is never reused after a crash).
    pub async fn onchain_next_address(&self) -> Result<bitcoin::Address, EngineError> {
        let loaded = self.loaded().await?;
        let mut onchain = loaded.onchain.write().await;
        OnchainWalletTrait::address(&mut *onchain)
            .await
            .map_err(EngineError::internal("revealing an on-chain address"))
    }

    /// The on-chain balance as BDK last saw it (call [`Engine::onchain_sync`] first
    /// for news from the chain).
    pub async fn onchain_balance(&self) -> Result<Balance, EngineError> {
        let loaded = self.loaded().await?;
        let onchain = loaded.onchain.read().await;
        Ok(onchain.balance())
    }

    /// Sync the on-chain wallet with the chain source.
    pub async fn onchain_sync(&self) -> Result<(), EngineError> {
        let loaded = self.loaded().await?;
        loaded
            .wallet
            .sync_onchain()
            .await
            .map_err(|e| EngineError::Unreachable {
                what: "the chain source",
                reason: format!("{e:#}"),
            })
    }

    /// The chain source's tip height.
    pub async fn chain_tip(&self) -> Result<u32, EngineError> {
        let loaded = self.loaded().await?;
        let tip = loaded
            .wallet
            .chain()
            .tip()
            .await
            .map_err(|e| EngineError::Unreachable {
                what: "the chain source",
                reason: format!("{e:#}"),
            })?;
        Ok(tip.to_u32())
    }
}

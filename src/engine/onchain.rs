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

impl Engine {
    /// Pay on-chain from the on-chain wallet: one or more (address, amount) outputs in
    /// one transaction at the chain's regular fee rate. Returns once the transaction is
    /// signed, recorded and handed to the chain source (a failed broadcast is retried
    /// on the next sync).
    pub async fn onchain_send(
        &self,
        destinations: &[(String, bitcoin::Amount)],
    ) -> Result<bitcoin::Txid, EngineError> {
        if destinations.is_empty() {
            return Err(EngineError::InvalidRequest(
                "at least one destination is needed".into(),
            ));
        }
        let network = self.network().await?;
        let outputs = destinations
            .iter()
            .map(|(address, amount)| Ok((super::parse_address(address, network)?, *amount)))
            .collect::<Result<Vec<_>, EngineError>>()?;
        let loaded = self.loaded().await?;
        let fee_rate = regular_fee_rate(&loaded).await;
        let chain = loaded.wallet.chain().clone();
        let mut onchain = loaded.onchain.write().await;
        onchain
            .send_many(&chain, &outputs, fee_rate)
            .await
            .map_err(EngineError::classify("sending on-chain"))
    }

    /// Send every on-chain coin to `destination`, less the fee.
    pub async fn onchain_drain(&self, destination: &str) -> Result<bitcoin::Txid, EngineError> {
        let address = self.address(destination).await?;
        let loaded = self.loaded().await?;
        let fee_rate = regular_fee_rate(&loaded).await;
        let chain = loaded.wallet.chain().clone();
        let mut onchain = loaded.onchain.write().await;
        onchain
            .drain(&chain, address, fee_rate)
            .await
            .map_err(EngineError::classify("draining the on-chain wallet"))
    }

    /// The on-chain wallet's transactions, oldest first (confirmed by height, then
    /// unconfirmed ones).
    pub async fn onchain_transactions(
        &self,
    ) -> Result<Vec<bark::onchain::WalletTxInfo>, EngineError> {
        let loaded = self.loaded().await?;
        let mut txs = loaded
            .onchain
            .read()
            .await
            .list_transaction_infos()
            .map_err(EngineError::internal("listing on-chain transactions"))?;
        txs.sort_by_key(|tx| tx.confirmation.map_or(u32::MAX, |b| b.height.to_u32()));
        Ok(txs)
    }

    /// The on-chain wallet's unspent outputs.
    pub async fn onchain_utxos(&self) -> Result<Vec<bark::UtxoInfo>, EngineError> {
        let loaded = self.loaded().await?;
        let utxos = loaded.onchain.read().await.utxos();
        Ok(utxos.into_iter().map(bark::UtxoInfo::from).collect())
    }
}

/// The chain's regular (3-block) fee rate, refreshed first.
async fn regular_fee_rate(loaded: &super::LoadedWallet) -> bitcoin::FeeRate {
    super::boards::refresh_fee_rates(loaded).await;
    loaded.wallet.chain().fee_rates().await.regular
}

//! The on-chain wallet (BDK, owned by bark) and the chain itself.

use bark::onchain::OnchainWalletTrait;
use bdk_wallet::Balance;

use super::spending::{Outcome, PaymentKind, Spender};
use super::{Engine, EngineError};

/// The chain's regular (3-block) fee rate, refreshed first.
async fn regular_fee_rate(loaded: &super::LoadedWallet) -> bitcoin::FeeRate {
    super::boards::refresh_fee_rates(loaded).await;
    loaded.wallet.chain().fee_rates().await.regular
}

/// The on-chain wallet: addresses, balance, sync, sends and the chain tip (`/api/v1/onchain`).
pub struct Onchain<'a> {
    engine: &'a Engine,
}

impl Engine {
    pub fn onchain(&self) -> Onchain<'_> {
        Onchain { engine: self }
    }
}

impl Onchain<'_> {
    /// Reveal the next receive address of the on-chain wallet (persisted before it is
    /// handed out, so it is never reused after a crash).
    pub async fn next_address(&self) -> Result<bitcoin::Address, EngineError> {
        let loaded = self.engine.loaded().await?;
        let mut onchain = loaded.onchain.write().await;
        OnchainWalletTrait::address(&mut *onchain)
            .await
            .map_err(EngineError::internal("revealing an on-chain address"))
    }

    /// The on-chain balance as BDK last saw it (call [`Onchain::sync`] first
    /// for news from the chain).
    pub async fn balance(&self) -> Result<Balance, EngineError> {
        let loaded = self.engine.loaded().await?;
        let onchain = loaded.onchain.read().await;
        Ok(onchain.balance())
    }

    /// Sync the on-chain wallet with the chain source.
    pub async fn sync(&self) -> Result<(), EngineError> {
        let loaded = self.engine.loaded().await?;
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
    pub async fn tip(&self) -> Result<u32, EngineError> {
        let loaded = self.engine.loaded().await?;
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

    /// Pay on-chain from the on-chain wallet: one or more (address, amount) outputs in
    /// one transaction at the chain's regular fee rate. Returns once the transaction is
    /// signed, recorded and handed to the chain source (a failed broadcast is retried
    /// on the next sync).
    pub async fn send(
        &self,
        destinations: &[(String, bitcoin::Amount)],
        who: &Spender,
    ) -> Result<bitcoin::Txid, EngineError> {
        let total = destinations
            .iter()
            .try_fold(bitcoin::Amount::ZERO, |sum, (_, a)| sum.checked_add(*a))
            .ok_or_else(|| EngineError::InvalidRequest("the amounts add up to too much".into()))?;
        let spending = self.engine.spending();
        let grant = spending
            .authorize(who, PaymentKind::Onchain, Some(total))
            .await?;
        let payment = Box::pin(self.send_now(destinations));
        spending.spend(grant, payment, |_| Outcome::Done).await
    }

    async fn send_now(
        &self,
        destinations: &[(String, bitcoin::Amount)],
    ) -> Result<bitcoin::Txid, EngineError> {
        if destinations.is_empty() {
            return Err(EngineError::InvalidRequest(
                "at least one destination is needed".into(),
            ));
        }
        let network = self.engine.network().await?;
        let outputs = destinations
            .iter()
            .map(|(address, amount)| Ok((super::parse_address(address, network)?, *amount)))
            .collect::<Result<Vec<_>, EngineError>>()?;
        let loaded = self.engine.loaded().await?;
        let fee_rate = regular_fee_rate(&loaded).await;
        let chain = loaded.wallet.chain().clone();
        let mut onchain = loaded.onchain.write().await;
        onchain
            .send_many(&chain, &outputs, fee_rate)
            .await
            .map_err(EngineError::classify("sending on-chain"))
    }

    /// Send every on-chain coin to `destination`, less the fee.
    pub async fn drain(
        &self,
        destination: &str,
        who: &Spender,
    ) -> Result<bitcoin::Txid, EngineError> {
        let spending = self.engine.spending();
        let grant = spending.authorize(who, PaymentKind::Onchain, None).await?;
        let payment = Box::pin(self.drain_now(destination));
        spending.spend(grant, payment, |_| Outcome::Done).await
    }

    async fn drain_now(&self, destination: &str) -> Result<bitcoin::Txid, EngineError> {
        let address = self.engine.address(destination).await?;
        let loaded = self.engine.loaded().await?;
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
    pub async fn transactions(&self) -> Result<Vec<bark::onchain::WalletTxInfo>, EngineError> {
        let loaded = self.engine.loaded().await?;
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
    pub async fn utxos(&self) -> Result<Vec<bark::UtxoInfo>, EngineError> {
        let loaded = self.engine.loaded().await?;
        let utxos = loaded.onchain.read().await.utxos();
        Ok(utxos.into_iter().map(bark::UtxoInfo::from).collect())
    }
}

//! Fee estimates: what an operation would cost, before doing it. They need the Ark
//! server's fee schedule (cached after the first contact) and, for on-chain legs, the
//! chain's fee rates.

use bitcoin::Amount;

use super::boards::refresh_fee_rates;
use super::{Engine, EngineError};

/// Fee estimates for the operations that spend VTXOs (they all need the Ark server's
/// fee schedule).
impl Engine {
    fn server_error(e: anyhow::Error) -> EngineError {
        EngineError::Unreachable {
            what: "the Ark server",
            reason: format!("{e:#}"),
        }
    }
}

/// Fee estimates, before the operation they are for (`/api/v1/fees`).
pub struct Fees<'a> {
    engine: &'a Engine,
}

impl Engine {
    pub fn fees(&self) -> Fees<'_> {
        Fees { engine: self }
    }
}

impl Fees<'_> {
    /// The server's fee to board `amount` (400 outside its limits).
    pub async fn board(&self, amount: Amount) -> Result<bark::FeeEstimate, EngineError> {
        let loaded = self.engine.loaded().await?;
        self.engine.check_board_amount(&loaded, amount).await?;
        loaded
            .wallet
            .estimate_board_offchain_fee(amount)
            .await
            .map_err(EngineError::classify("estimating the board fee"))
    }

    /// The chain's fee rates, refreshed first.
    pub async fn onchain_rates(&self) -> Result<bark::chain::FeeRates, EngineError> {
        let loaded = self.engine.loaded().await?;
        refresh_fee_rates(&loaded).await;
        Ok(loaded.wallet.chain().fee_rates().await)
    }

    /// The server's fee for an Ark payment (arkoor) of `amount`.
    pub async fn arkoor(&self, amount: Amount) -> Result<bark::FeeEstimate, EngineError> {
        let loaded = self.engine.loaded().await?;
        loaded
            .wallet
            .estimate_arkoor_payment_fee(amount)
            .await
            .map_err(Engine::server_error)
    }

    pub async fn lightning_send(&self, amount: Amount) -> Result<bark::FeeEstimate, EngineError> {
        let loaded = self.engine.loaded().await?;
        loaded
            .wallet
            .estimate_lightning_send_fee(amount)
            .await
            .map_err(Engine::server_error)
    }

    pub async fn lightning_receive(
        &self,
        amount: Amount,
    ) -> Result<bark::FeeEstimate, EngineError> {
        let loaded = self.engine.loaded().await?;
        if let Some(info) = self.engine.ark().info().await?
            && let Some(max) = info.max_vtxo_amount
            && amount > max
        {
            return Err(EngineError::InvalidRequest(format!(
                "amount_sat {} is above the Ark server's maximum of {} sat",
                amount.to_sat(),
                max.to_sat()
            )));
        }
        loaded
            .wallet
            .estimate_lightning_receive_fee(amount)
            .await
            .map_err(Engine::server_error)
    }

    pub async fn offboard(
        &self,
        address: &str,
        ids: &[ark::VtxoId],
    ) -> Result<bark::FeeEstimate, EngineError> {
        let vtxos = self.engine.rounds().vtxos_by_id(ids).await?;
        let address = self.engine.address(address).await?;
        let loaded = self.engine.loaded().await?;
        let bare: Vec<_> = vtxos.into_iter().map(|v| v.vtxo).collect();
        loaded
            .wallet
            .estimate_offboard(&address, &bare)
            .await
            .map_err(Engine::server_error)
    }

    pub async fn offboard_all(&self, address: &str) -> Result<bark::FeeEstimate, EngineError> {
        let address = self.engine.address(address).await?;
        let loaded = self.engine.loaded().await?;
        loaded
            .wallet
            .estimate_offboard_all(&address)
            .await
            .map_err(Engine::server_error)
    }

    pub async fn send_onchain(
        &self,
        address: &str,
        amount: Amount,
    ) -> Result<bark::FeeEstimate, EngineError> {
        let address = self.engine.address(address).await?;
        let loaded = self.engine.loaded().await?;
        loaded
            .wallet
            .estimate_send_onchain(&address, amount)
            .await
            .map_err(Engine::server_error)
    }

    /// What exiting these VTXOs (all spendable ones by default) would cost, and
    /// whether the on-chain wallet's confirmed coins can pay the broadcast leg.
    pub async fn exit(
        &self,
        ids: Option<&[ark::VtxoId]>,
        fee_rate: Option<bitcoin::FeeRate>,
        destination: Option<&str>,
    ) -> Result<(bark::exit::ExitFeeEstimate, bool), EngineError> {
        let destination = match destination {
            Some(d) => Some(self.engine.address(d).await?),
            None => None,
        };
        let loaded = self.engine.loaded().await?;
        let ids = match ids {
            Some(ids) => {
                self.engine.rounds().vtxos_by_id(ids).await?;
                ids.to_vec()
            }
            None => loaded
                .wallet
                .spendable_vtxos()
                .await
                .map_err(EngineError::internal("listing spendable VTXOs"))?
                .iter()
                .map(|v| v.vtxo.id())
                .collect(),
        };
        let estimate = loaded
            .wallet
            .estimate_emergency_exit_fee(&ids, fee_rate, destination, None)
            .await
            .map_err(|e| match e {
                bark::exit::ExitError::TipRetrievalFailure { .. }
                | bark::exit::ExitError::BlockRetrievalFailure { .. }
                | bark::exit::ExitError::TransactionRetrievalFailure { .. } => {
                    EngineError::Unreachable {
                        what: "the chain source",
                        reason: e.to_string(),
                    }
                }
                other => EngineError::InvalidRequest(format!("estimating the exit fee: {other}")),
            })?;
        // The fee-paying children spend only confirmed on-chain coins; count them as
        // the chain has them now.
        if let Err(e) = loaded.wallet.sync_onchain().await {
            tracing::warn!(error = %format!("{e:#}"), "cannot sync the on-chain wallet for an exit fee estimate");
        }
        let confirmed = loaded.onchain.read().await.balance().confirmed;
        let fundable = estimate.txs_to_broadcast == 0 || confirmed >= estimate.exit_broadcast_fee;
        Ok((estimate, fundable))
    }
}

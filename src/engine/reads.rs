//! Wallet reads that never wait on the network: the balance, the VTXOs, the history.
//!
//! They come from the store alone, so they answer whether or not bark has opened the
//! wallet. While it has not (its chain source unreachable at start, a node still
//! syncing) they are [`Freshness::PossiblyStale`]: what the wallet knew when it was
//! last open. Only operations that need the network wait for the wallet to load.

use ark::VtxoId;
use ark::encode::ProtocolEncoding;
use bark::persist::BarkPersister;

use super::{Engine, EngineError};
use crate::store::ChainView;

/// Whether a wallet read reflects the wallet as bark has it open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// The wallet is open: its state is kept up to date.
    Current,
    /// bark cannot open the wallet yet: this is the state it was last left in, and
    /// payments, rounds or blocks since then are not in it.
    PossiblyStale,
}

impl Engine {
    /// The chain view the balance is judged against: the open wallet's, recorded in the
    /// store whenever it changes (the session keeps the last one recorded); else the
    /// recorded one.
    async fn chain_view(&self) -> Result<ChainView, EngineError> {
        let Some(session) = self.state.borrow().session().cloned() else {
            return Ok(self.store.chain_view().await?);
        };
        let loaded = &session.wallet;
        let mut recorded = session.chain_view.lock().await;
        if recorded.is_none() {
            *recorded = Some(self.store.chain_view().await?);
        }
        let last = recorded.unwrap_or_default();
        let seen = ChainView {
            tip: loaded
                .wallet
                .chain()
                .last_observed_tip()
                .await
                .map(|h| h.to_u32()),
            max_exit_depth: loaded
                .wallet
                .ark_info()
                .await
                .ok()
                .flatten()
                .map(|info| info.max_vtxo_exit_depth),
        };
        let now = ChainView {
            tip: seen.tip.or(last.tip),
            max_exit_depth: seen.max_exit_depth.or(last.max_exit_depth),
        };
        if now != last {
            self.store.record_chain_view(now).await?;
            *recorded = Some(now);
        }
        Ok(now)
    }
    /// How a wallet read is served now. [`EngineError::NoWallet`] without a wallet,
    /// [`EngineError::Locked`] while its seed waits for its passphrase (the owner chose
    /// to keep it closed). Never waits for the wallet to load.
    pub async fn freshness(&self) -> Result<Freshness, EngineError> {
        if self.is_loaded() {
            return Ok(Freshness::Current);
        }
        self.require_wallet().await?;
        if self.is_locked() {
            return Err(EngineError::Locked);
        }
        Ok(Freshness::PossiblyStale)
    }
}

/// Wallet reads from the store alone (balance, VTXOs, history): they answer whether or not the wallet is open (see the module docs).
pub struct Reads<'a> {
    engine: &'a Engine,
}

impl Engine {
    pub fn reads(&self) -> Reads<'_> {
        Reads { engine: self }
    }
}

impl Reads<'_> {
    /// The wallet's Ark balance by state, as bark defines it, at a cost that does not
    /// grow with the number of VTXOs (`Store::ark_balance`). Judged against the chain
    /// tip and the server's exit depth limit as the open wallet last saw them (no
    /// request to the chain source), or as recorded when it was last open.
    pub async fn balance(&self) -> Result<bark::Balance, EngineError> {
        self.engine.freshness().await?;
        let view = self.engine.chain_view().await?;
        Ok(self
            .engine
            .store
            .ark_balance(view.tip, view.max_exit_depth)
            .await?)
    }

    /// The wallet's VTXOs: unspent ones (spendable or locked), or every one with `all`.
    pub async fn vtxos(&self, all: bool) -> Result<Vec<bark::WalletVtxo>, EngineError> {
        self.engine.freshness().await?;
        let vtxos = if all {
            BarkPersister::get_all_vtxos(&self.engine.store).await
        } else {
            BarkPersister::get_vtxos_by_state(
                &self.engine.store,
                bark::vtxo::VtxoStateKind::UNSPENT_STATES,
            )
            .await
        };
        vtxos.map_err(EngineError::internal("listing VTXOs"))
    }

    /// One VTXO of the wallet, in any state; `None` if the wallet has no such VTXO.
    pub async fn vtxo(&self, id: VtxoId) -> Result<Option<bark::WalletVtxo>, EngineError> {
        self.engine.freshness().await?;
        // bark's own lookup answers "not found" and a database failure alike.
        BarkPersister::get_wallet_vtxo(&self.engine.store, id)
            .await
            .map_err(EngineError::internal("reading a VTXO"))
    }

    /// A VTXO with its whole exit chain, ark-encoded, hex; `None` if unknown.
    pub async fn vtxo_encoded(&self, id: VtxoId) -> Result<Option<String>, EngineError> {
        self.engine.freshness().await?;
        let full = BarkPersister::get_full_vtxo(&self.engine.store, id)
            .await
            .map_err(EngineError::internal("reading a VTXO"))?;
        Ok(full.map(|vtxo| vtxo.serialize_hex()))
    }

    /// Changes whenever the wallet's database commits a write (bark's or ours): what a
    /// cache of a read keys on. Read it before the read it keys.
    pub fn store_generation(&self) -> u64 {
        self.engine.store.commit_count()
    }

    /// A page of the history: up to `limit` movements with ids below `before`, newest
    /// id first.
    pub async fn history_page(
        &self,
        before: Option<u32>,
        limit: usize,
    ) -> Result<Vec<bark::movement::Movement>, EngineError> {
        self.engine.freshness().await?;
        Ok(self.engine.store.movements_before(before, limit).await?)
    }

    /// The wallet's movements, newest first; only those paying or paid by `method`
    /// when given.
    pub async fn history(
        &self,
        method: Option<&bark::movement::PaymentMethod>,
    ) -> Result<Vec<bark::movement::Movement>, EngineError> {
        self.engine.freshness().await?;
        let mut movements = match method {
            None => BarkPersister::get_all_movements(&self.engine.store).await,
            Some(method) => {
                BarkPersister::get_movements_by_payment_method(&self.engine.store, method).await
            }
        }
        .map_err(EngineError::internal("reading the history"))?;
        // The filtered list comes oldest first; one order for both.
        movements.sort_by_key(|m| std::cmp::Reverse((m.time.created_at, m.id.0)));
        Ok(movements)
    }
}

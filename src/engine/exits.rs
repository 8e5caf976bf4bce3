//! Unilateral exits: starting them, advancing them headlessly, claiming them.
//!
//! bark's own daemon (which Berth does not run) advances exits only once a minute; an exit
//! takes several steps (broadcast with a fee-paying child, confirm, wait for the exit
//! delta), so the engine runs its own driver: on every new tip (polled every few
//! seconds) and at least every `[exits] progress_interval_secs` while an exit is live,
//! it syncs the on-chain wallet and advances every exit as far as the chain allows,
//! paying the `[exits]` fee rate (the estimate, capped, unless one is fixed). Nothing
//! ever claims exited funds except an explicit claim call.

use std::time::Duration;

use ark::VtxoId;
use bark::exit::{ExitError, ExitStateKind};
use bark::onchain::OnchainWalletTrait;
use bark::persist::BarkPersister;

use super::spending::{Outcome, PaymentKind, Spender};
use super::{Engine, EngineError, LoadedWallet};

/// How often the driver looks at the chain tip while an exit is live. Without a new
/// block it advances exits every `[exits] progress_interval_secs` (to retry a failed
/// broadcast, say).
const TIP_POLL: Duration = Duration::from_secs(2);

/// Which exits to list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitList {
    All,
    /// From `start` to `claim-in-progress`.
    Live,
    /// Claimed, canceled, already spent or swept.
    Finished,
}

/// The outcome of advancing exits.
pub struct ExitProgress {
    /// No exit waits for a transaction or confirmation any more.
    pub done: bool,
    pub exits: Vec<bark::exit::ExitProgressStatus>,
    pub claimable_height: Option<u32>,
    /// Why the on-chain wallet could not be synced first, if it could not.
    pub sync_error: Option<String>,
}

impl Engine {
    /// Start the driver that advances live exits on every new block (and at least
    /// every `[exits] progress_interval_secs`), for as long as `loaded` is the
    /// engine's wallet (see `wallet_tasks`). Supervised: a failing pass is retried
    /// with backoff.
    pub(super) fn spawn_exit_driver(
        self: &std::sync::Arc<Self>,
        loaded: LoadedWallet,
    ) -> tokio::task::JoinHandle<()> {
        #[derive(Default)]
        struct Seen {
            tip: Option<u32>,
            progressed_at: Option<tokio::time::Instant>,
        }
        let seen = std::sync::Arc::new(tokio::sync::Mutex::new(Seen::default()));
        let engine = std::sync::Arc::clone(self);
        let step = move || {
            let engine = std::sync::Arc::clone(&engine);
            let loaded = loaded.clone();
            let seen = std::sync::Arc::clone(&seen);
            async move {
                let mut seen = seen.lock().await;
                // Ask the chain source only while an exit is live: on esplora every
                // tip poll is an HTTP request.
                let live = loaded
                    .wallet
                    .exit_mgr()
                    .get_exit_vtxos()
                    .await
                    .iter()
                    .any(|e| ExitStateKind::LIVE_STATES.contains(&e.state().kind()));
                if !live {
                    seen.tip = None;
                    return Ok(());
                }
                let tip: Option<u32> = loaded.wallet.chain().tip().await.ok().map(Into::into);
                let new_block = tip.is_some() && tip != seen.tip;
                let interval = engine.autopilot_policy.exit_progress_interval;
                let due = seen.progressed_at.is_none_or(|t| t.elapsed() >= interval);
                if !new_block && !due {
                    return Ok(());
                }
                seen.tip = tip;
                seen.progressed_at = Some(tokio::time::Instant::now());
                let fee_rate = super::autopilot::exit_fee_rate(
                    &engine.autopilot_policy,
                    loaded.wallet.chain().fee_rates().await.fast,
                );
                let (exits, _) = advance_exits(&loaded, &engine.exit_lock, Some(fee_rate))
                    .await
                    .map_err(|e| format!("cannot advance exits yet: {e}"))?;
                for exit in exits {
                    tracing::info!(target: "berth::exits", vtxo = %exit.vtxo_id,
                        state = %exit.state.kind(), error = ?exit.error, "exit advanced");
                }
                Ok(())
            }
        };
        self.tasks
            .spawn("exit-driver", step, || tokio::time::sleep(TIP_POLL))
    }
}

/// Sync the on-chain wallet (the fee-paying children spend its confirmed coins),
/// then advance every exit, one caller at a time. Also returns why the sync failed,
/// if it did (the exits still advance as far as they can).
async fn advance_exits(
    loaded: &LoadedWallet,
    exit_lock: &tokio::sync::Mutex<()>,
    fee_rate: Option<bitcoin::FeeRate>,
) -> Result<(Vec<bark::exit::ExitProgressStatus>, Option<String>), EngineError> {
    let _exclusive = exit_lock.lock().await;
    let sync_error = match loaded.wallet.sync_onchain().await {
        Ok(()) => None,
        Err(e) => {
            let reason = format!("cannot sync the on-chain wallet: {e:#}");
            tracing::warn!(target: "berth::exits", error = %reason, "advancing exits without a fresh on-chain view");
            Some(reason)
        }
    };
    let statuses = loaded
        .wallet
        .exit_mgr()
        .progress_exits_with_cpfp(&loaded.wallet, fee_rate)
        .await
        .map_err(|e| EngineError::Unreachable {
            what: "the chain source",
            reason: format!("advancing exits: {e:#}"),
        })?;
    Ok((statuses.unwrap_or_default(), sync_error))
}

fn classify_exit(context: &'static str) -> impl FnOnce(anyhow::Error) -> EngineError {
    move |e| match e.downcast::<ExitError>() {
        Ok(exit) => exit_error(context, exit),
        Err(e) => EngineError::internal(context)(e),
    }
}

/// bark's exit errors: the wallet's state, the client's mistake, an unreachable
/// chain, or an internal failure.
fn exit_error(context: &'static str, e: ExitError) -> EngineError {
    use ExitError as E;
    match e {
        E::DustLimit { .. }
        | E::NonStandardVtxo { .. }
        | E::ClaimMissingInputs
        | E::ClaimFeeExceedsOutput { .. }
        | E::VtxoAlreadyExited { .. }
        | E::VtxoAlreadySpent { .. }
        | E::VtxoSwept { .. } => EngineError::WrongState(format!("{context}: {e}")),
        E::NotExiting { vtxo } => EngineError::NoExit(vtxo),
        E::CannotCancelExit { .. }
        | E::ExitTxAlreadyBroadcast { .. }
        | E::VtxoNotClaimable { .. }
        | E::UnknownVtxo { .. } => EngineError::InvalidRequest(format!("{context}: {e}")),
        E::TipRetrievalFailure { .. }
        | E::BlockRetrievalFailure { .. }
        | E::TransactionRetrievalFailure { .. }
        | E::AncestorRetrievalFailure { .. }
        | E::ExitPackageBroadcastFailure { .. } => EngineError::Unreachable {
            what: "the chain source",
            reason: format!("{context}: {e}"),
        },
        other => EngineError::Internal {
            context,
            source: other.into(),
        },
    }
}

/// An exit's status from its stored record alone (the wallet not open): its state and
/// history, no transactions.
fn stored_exit_status(
    exit: bark::persist::models::StoredExit,
    history: bool,
) -> bark::exit::ExitTransactionStatus {
    bark::exit::ExitTransactionStatus {
        vtxo_id: exit.vtxo_id,
        state: exit.state,
        history: history.then_some(exit.history),
        transactions: Vec::new(),
    }
}

/// Unilateral exits: start, progress, claim, cancel, list (`/api/v1/exits`).
pub struct Exits<'a> {
    engine: &'a Engine,
}

impl Engine {
    pub fn exits(&self) -> Exits<'_> {
        Exits { engine: self }
    }
}

impl Exits<'_> {
    /// Start exits for every unspent VTXO; how many were started.
    pub async fn start_all(&self, who: &Spender) -> Result<usize, EngineError> {
        let spending = self.engine.spending();
        let grant = spending.authorize(who, PaymentKind::Exit, None).await?;
        let payment = Box::pin(self.start_all_now());
        spending.spend(grant, payment, |_| Outcome::Done).await
    }

    async fn start_all_now(&self) -> Result<usize, EngineError> {
        let loaded = self.engine.loaded().await?;
        let exits = loaded.wallet.exit_mgr();
        let before = exits.get_exit_vtxo_ids().await.len();
        exits
            .start_exit_for_entire_wallet()
            .await
            .map_err(classify_exit("starting exits"))?;
        Ok(exits.get_exit_vtxo_ids().await.len() - before)
    }

    /// Start exits for these VTXOs (each spendable or locked); how many were started
    /// (one already exiting is skipped).
    pub async fn start_vtxos(&self, ids: &[VtxoId], who: &Spender) -> Result<usize, EngineError> {
        let spending = self.engine.spending();
        let grant = spending.authorize(who, PaymentKind::Exit, None).await?;
        let payment = Box::pin(self.start_vtxos_now(ids));
        spending.spend(grant, payment, |_| Outcome::Done).await
    }

    async fn start_vtxos_now(&self, ids: &[VtxoId]) -> Result<usize, EngineError> {
        let vtxos = self.engine.rounds().vtxos_by_id(ids).await?;
        if let Some(v) = vtxos.iter().find(|v| {
            !matches!(
                v.state,
                bark::vtxo::VtxoState::Spendable | bark::vtxo::VtxoState::Locked { .. }
            )
        }) {
            return Err(EngineError::WrongState(format!(
                "VTXO {} cannot be exited (it is {})",
                v.vtxo.id(),
                v.state.kind()
            )));
        }
        let loaded = self.engine.loaded().await?;
        let exits = loaded.wallet.exit_mgr();
        let before = exits.get_exit_vtxo_ids().await.len();
        let bare: Vec<_> = vtxos.into_iter().map(|v| v.vtxo).collect();
        exits
            .start_exit_for_vtxos(&bare)
            .await
            .map_err(classify_exit("starting exits"))?;
        Ok(exits.get_exit_vtxo_ids().await.len() - before)
    }

    /// Sync the on-chain wallet and advance every exit now (what the driver does on
    /// each block).
    pub async fn progress(
        &self,
        fee_rate: Option<bitcoin::FeeRate>,
    ) -> Result<ExitProgress, EngineError> {
        let loaded = self.engine.loaded().await?;
        let (exits, sync_error) = advance_exits(&loaded, &self.engine.exit_lock, fee_rate).await?;
        let mgr = loaded.wallet.exit_mgr();
        Ok(ExitProgress {
            done: !mgr.has_pending_exits().await,
            exits,
            claimable_height: mgr.all_claimable_at_height().await.map(|h| h.to_u32()),
            sync_error,
        })
    }

    pub async fn list(
        &self,
        which: ExitList,
        history: bool,
        transactions: bool,
    ) -> Result<Vec<bark::exit::ExitTransactionStatus>, EngineError> {
        let Some(loaded) = self.engine.loaded_now() else {
            // Not open: the exits as stored, without their transactions (their
            // on-chain status needs the chain source).
            self.engine.freshness().await?;
            let states = match which {
                ExitList::All => None,
                ExitList::Live => Some(ExitStateKind::LIVE_STATES),
                ExitList::Finished => Some(ExitStateKind::FINISHED_STATES),
            };
            let stored = match states {
                None => BarkPersister::get_exit_vtxo_entries(&self.engine.store).await,
                Some(states) => {
                    BarkPersister::get_exit_vtxo_entries_with_states(&self.engine.store, states)
                        .await
                }
            }
            .map_err(EngineError::internal("listing exits"))?;
            return Ok(stored
                .into_iter()
                .map(|exit| stored_exit_status(exit, history))
                .collect());
        };
        let exits = loaded.wallet.exit_mgr();
        match which {
            ExitList::All => exits.list_all(history, transactions).await,
            ExitList::Live => exits.list_live(history, transactions).await,
            ExitList::Finished => exits.list_finished(history, transactions).await,
        }
        .map_err(EngineError::internal("listing exits"))
    }

    pub async fn status(
        &self,
        id: VtxoId,
        history: bool,
        transactions: bool,
    ) -> Result<Option<bark::exit::ExitTransactionStatus>, EngineError> {
        let Some(loaded) = self.engine.loaded_now() else {
            self.engine.freshness().await?;
            let stored = BarkPersister::get_exit_vtxo_entry(&self.engine.store, &id)
                .await
                .map_err(EngineError::internal("reading an exit"))?;
            return Ok(stored.map(|exit| stored_exit_status(exit, history)));
        };
        loaded
            .wallet
            .exit_mgr()
            .get_exit_status(id, history, transactions)
            .await
            .map_err(EngineError::internal("reading an exit"))
    }

    /// Claim claimable exits (all, or these) to `destination`: one transaction,
    /// broadcast; its txid.
    pub async fn claim(
        &self,
        destination: &str,
        ids: Option<&[VtxoId]>,
        fee_rate: Option<bitcoin::FeeRate>,
        who: &Spender,
    ) -> Result<bitcoin::Txid, EngineError> {
        let spending = self.engine.spending();
        let grant = spending.authorize(who, PaymentKind::Exit, None).await?;
        let payment = Box::pin(self.claim_now(destination, ids, fee_rate));
        spending.spend(grant, payment, |_| Outcome::Done).await
    }

    async fn claim_now(
        &self,
        destination: &str,
        ids: Option<&[VtxoId]>,
        fee_rate: Option<bitcoin::FeeRate>,
    ) -> Result<bitcoin::Txid, EngineError> {
        let address = self.engine.address(destination).await?;
        let loaded = self.engine.loaded().await?;
        let _exclusive = self.engine.exit_lock.lock().await;
        let mgr = loaded.wallet.exit_mgr();
        let claimable = mgr.list_claimable().await;
        let inputs = match ids {
            None => claimable,
            Some(ids) => {
                if let Some(id) = ids
                    .iter()
                    .find(|id| !claimable.iter().any(|c| c.id() == **id))
                {
                    return Err(EngineError::InvalidRequest(format!(
                        "VTXO {id} has no claimable exit"
                    )));
                }
                claimable
                    .into_iter()
                    .filter(|c| ids.contains(&c.id()))
                    .collect()
            }
        };
        let psbt = mgr
            .drain_exits(&inputs, &loaded.wallet, address.clone(), fee_rate)
            .await
            .map_err(|e| exit_error("claiming exits", e))?;
        let tx = psbt.extract_tx().map_err(|e| EngineError::Internal {
            context: "finishing the claim transaction",
            source: e.into(),
        })?;
        loaded
            .wallet
            .chain()
            .broadcast_tx(&tx)
            .await
            .map_err(|e| EngineError::Unreachable {
                what: "the chain source",
                reason: format!("broadcasting the claim: {e:#}"),
            })?;
        // A claim to the wallet's own address is its money now: tell BDK at once.
        {
            let mut onchain = loaded.onchain.write().await;
            if OnchainWalletTrait::is_mine(&*onchain, &address.script_pubkey())
                .await
                .unwrap_or(false)
                && let Err(e) = OnchainWalletTrait::register_tx(&mut *onchain, &tx).await
            {
                tracing::warn!(error = %format!("{e:#}"), "cannot record the claim in the on-chain wallet");
            }
        }
        // Move the exits to claim-in-progress now, so a second call does not rebuild
        // the same claim.
        if let Err(e) = mgr.sync(&loaded.wallet).await {
            tracing::warn!(error = %format!("{e:#}"), "cannot sync exits after a claim");
        }
        Ok(tx.compute_txid())
    }

    pub async fn cancel(&self, id: VtxoId) -> Result<(), EngineError> {
        let loaded = self.engine.loaded().await?;
        let _exclusive = self.engine.exit_lock.lock().await;
        loaded
            .wallet
            .exit_mgr()
            .cancel_exit(id)
            .await
            .map_err(|e| exit_error("canceling an exit", e))
    }
}

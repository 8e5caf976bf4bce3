//! Refreshing VTXOs in rounds (offboarding, which in bark 0.8 does not use rounds, is
//! in `offboards`).
//!
//! Refresh calls only record the participation; bark's background daemon plays the
//! round when the server runs one, and a later sync completes it once its funding
//! transaction confirms.
//!
//! At wallet load, a refresh a crash cut off between its movement and its round state
//! is finished as failed ([`Engine::fail_orphaned_round_movements`]).

use std::collections::HashSet;

use ark::VtxoId;
use bark::movement::{Movement, MovementId, MovementStatus};
use bark::persist::models::StoredRoundState;
use bark::subsystem::Subsystem;
use bark::vtxo::VtxoLockHolder;

use super::{Engine, EngineError};

impl Engine {
    /// [`Rounds::vtxos_by_id`], each of which must be spendable (422 otherwise).
    pub(super) async fn spendable_by_id(
        &self,
        ids: &[VtxoId],
    ) -> Result<Vec<bark::WalletVtxo>, EngineError> {
        let vtxos = self.rounds().vtxos_by_id(ids).await?;
        if let Some(v) = vtxos
            .iter()
            .find(|v| !matches!(v.state, bark::vtxo::VtxoState::Spendable))
        {
            return Err(EngineError::WrongState(format!(
                "VTXO {} is not spendable (it is {})",
                v.vtxo.id(),
                v.state.kind()
            )));
        }
        Ok(vtxos)
    }

    async fn join_refresh(
        &self,
        ids: Vec<VtxoId>,
    ) -> Result<StoredRoundState<bark::persist::models::Unlocked>, EngineError> {
        let loaded = self.loaded().await?;
        let participation = loaded
            .wallet
            .build_refresh_participation(ids)
            .await
            .map_err(EngineError::classify("refreshing"))?
            .ok_or_else(|| EngineError::WrongState("no VTXOs to refresh".into()))?;
        let state = loaded
            .wallet
            .join_next_round(participation, Some(bark::subsystem::RoundMovement::Refresh))
            .await
            .map_err(EngineError::classify("joining a round"))?;
        // Release bark's lock on the round state before answering.
        Ok(state.unlock())
    }
}

impl Engine {
    /// Finish as failed every pending round movement that no stored round state names
    /// (the load goes on whatever happens; failures are logged).
    ///
    /// bark 0.8's `join_next_round` and `join_delegated_round` write a refresh in
    /// separate transactions: the movement (pending, `bark.round`), its inputs and
    /// amounts, and only then the round state that names it. A SIGKILL in between
    /// leaves a pending movement that nothing in bark ever finishes: bark drives only
    /// stored round states, and reads no pending movement at load. bark's own guard
    /// fails the movement when the join is dropped in-process; this does the same
    /// after a crash, as bark's `persist_round_failure` would: release the inputs
    /// from the movement's lock (a no-op in 0.8, which locks them only when an
    /// attempt starts), then mark it failed (bark notifies it, and the event
    /// recorder records it).
    ///
    /// Safe for an interactive join: nothing reached the server. A delegated join may
    /// have been taken by the server before the kill; bark's mailbox recovery then
    /// rebuilds the round with no movement and claims its outputs, and this movement
    /// stays failed, as after a join dropped in-process (docs/reliability.md).
    ///
    /// Must run before anything can join a round (the wallet's tasks, the API), or it
    /// could fail a join in its window; and after the event recorder starts.
    ///
    /// `pending`: the wallet's pending movements of this and other subsystems (one scan
    /// of the history serves every repair at load).
    pub(super) async fn fail_orphaned_round_movements(
        &self,
        wallet: &bark::Wallet,
        pending: &[Movement],
    ) {
        let orphans = match self.orphaned_round_movements(wallet, pending).await {
            Ok(orphans) => orphans,
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"),
                    "cannot check for refreshes a crash left pending; they stay pending");
                return;
            }
        };
        for movement in orphans {
            let id = movement.id;
            let finished = async {
                wallet
                    .unlock_vtxos(&movement.input_vtxos, Some(VtxoLockHolder::Movement { id }))
                    .await?;
                wallet
                    .movements_mgr()
                    .finish_movement(id, MovementStatus::Failed)
                    .await?;
                anyhow::Ok(())
            };
            match finished.await {
                Ok(()) => tracing::warn!(
                    movement_id = id.0,
                    kind = %movement.subsystem.kind,
                    inputs = movement.input_vtxos.len(),
                    "a round movement a crash left pending with no round state: marked failed"
                ),
                Err(e) => tracing::error!(
                    movement_id = id.0,
                    error = %format!("{e:#}"),
                    "cannot mark as failed a round movement a crash left pending"
                ),
            }
        }
    }

    /// The pending `bark.round` movements no stored round state names.
    async fn orphaned_round_movements<'m>(
        &self,
        wallet: &bark::Wallet,
        pending: &'m [Movement],
    ) -> anyhow::Result<Vec<&'m Movement>> {
        use anyhow::Context as _;
        let pending: Vec<&Movement> = pending
            .iter()
            .filter(|m| m.subsystem.name == Subsystem::ROUND.as_name())
            .collect();
        if pending.is_empty() {
            return Ok(pending);
        }
        let named: HashSet<MovementId> = wallet
            .pending_round_states()
            .await
            .context("listing round states")?
            .iter()
            .filter_map(|state| match state.state().lock_holder() {
                Some(VtxoLockHolder::Movement { id }) => Some(id),
                _ => None,
            })
            .collect();
        Ok(pending
            .into_iter()
            .filter(|m| !named.contains(&m.id))
            .collect())
    }
}

/// The wallet's spendable VTXOs; a wrong-state error saying `none` when it has none.
pub(super) async fn spendable_or(
    loaded: &super::LoadedWallet,
    none: &str,
) -> Result<Vec<bark::WalletVtxo>, EngineError> {
    let spendable = loaded
        .wallet
        .spendable_vtxos()
        .await
        .map_err(EngineError::internal("listing spendable VTXOs"))?;
    if spendable.is_empty() {
        return Err(EngineError::WrongState(none.into()));
    }
    Ok(spendable)
}

/// Refreshes and the rounds they join, and importing VTXOs (`/api/v1/wallet/refresh/*`).
pub struct Rounds<'a> {
    engine: &'a Engine,
}

impl Engine {
    pub fn rounds(&self) -> Rounds<'_> {
        Rounds { engine: self }
    }
}

impl Rounds<'_> {
    /// The wallet's VTXOs with these ids, in order; every id must be known and
    /// given once.
    pub async fn vtxos_by_id(&self, ids: &[VtxoId]) -> Result<Vec<bark::WalletVtxo>, EngineError> {
        if ids.is_empty() {
            return Err(EngineError::InvalidRequest(
                "vtxos must not be empty".into(),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = ids.iter().find(|id| !seen.insert(**id)) {
            return Err(EngineError::InvalidRequest(format!(
                "VTXO {dup} is listed twice"
            )));
        }
        let mut found = Vec::with_capacity(ids.len());
        let mut missing = Vec::new();
        for id in ids {
            match self.engine.reads().vtxo(*id).await? {
                Some(v) => found.push(v),
                None => missing.push(*id),
            }
        }
        if !missing.is_empty() {
            return Err(EngineError::UnknownVtxos(missing));
        }
        Ok(found)
    }

    /// Join the next round to refresh these VTXOs (all must be spendable).
    pub async fn refresh_vtxos(
        &self,
        ids: &[VtxoId],
    ) -> Result<StoredRoundState<bark::persist::models::Unlocked>, EngineError> {
        self.engine.spendable_by_id(ids).await?;
        self.engine.join_refresh(ids.to_vec()).await
    }

    /// Join the next round to refresh every spendable VTXO.
    pub async fn refresh_all(
        &self,
    ) -> Result<StoredRoundState<bark::persist::models::Unlocked>, EngineError> {
        let loaded = self.engine.loaded().await?;
        let spendable = spendable_or(&loaded, "no VTXOs to refresh").await?;
        self.engine
            .join_refresh(spendable.iter().map(|v| v.vtxo.id()).collect())
            .await
    }

    /// The wallet's round participations that have not finished.
    pub async fn pending(
        &self,
    ) -> Result<Vec<StoredRoundState<bark::persist::models::Unlocked>>, EngineError> {
        let loaded = self.engine.loaded().await?;
        loaded
            .wallet
            .pending_round_states()
            .await
            .map_err(EngineError::internal("listing rounds"))
    }

    /// Join the next round to refresh the VTXOs that carry counterparty risk (out-of-
    /// round VTXOs received from others); `None` when there are none.
    pub async fn refresh_counterparty(
        &self,
    ) -> Result<Option<StoredRoundState<bark::persist::models::Unlocked>>, EngineError> {
        let loaded = self.engine.loaded().await?;
        let filter = bark::vtxo::VtxoFilter::new(&loaded.wallet).counterparty();
        let risky =
            loaded
                .wallet
                .spendable_vtxos_with(&filter)
                .await
                .map_err(EngineError::internal(
                    "finding VTXOs with counterparty risk",
                ))?;
        if risky.is_empty() {
            return Ok(None);
        }
        self.engine
            .join_refresh(risky.iter().map(|v| v.vtxo.id()).collect())
            .await
            .map(Some)
    }

    /// Hand these VTXOs to the server for a delegated refresh (no need to be online
    /// for the round), in the next round or once the chain reaches `height`.
    pub async fn refresh_delegated(
        &self,
        ids: &[VtxoId],
        height: Option<u32>,
    ) -> Result<StoredRoundState<bark::persist::models::Unlocked>, EngineError> {
        self.engine.spendable_by_id(ids).await?;
        let loaded = self.engine.loaded().await?;
        let joined = match height {
            None => loaded.wallet.refresh_vtxos_delegated(ids.to_vec()).await,
            Some(h) => {
                loaded
                    .wallet
                    .refresh_vtxos_scheduled(ids.to_vec(), bitcoin_ext::BlockHeight::new(h))
                    .await
            }
        };
        joined
            .map_err(EngineError::classify("joining a delegated round"))?
            .ok_or_else(|| EngineError::WrongState("no VTXOs to refresh".into()))
    }

    /// Import VTXOs (ark-encoded) that belong to this wallet's seed; their ids.
    pub async fn import_vtxos(
        &self,
        vtxos: Vec<ark::Vtxo<ark::vtxo::Full>>,
    ) -> Result<Vec<bark::WalletVtxo>, EngineError> {
        use bark::ImportVtxoError as E;
        let loaded = self.engine.loaded().await?;
        let ids = loaded
            .wallet
            .import_vtxos(&vtxos, bark::ImportVtxoArgs::default())
            .await
            .map_err(|e| match e {
                E::Invalid { .. } | E::KeyNotFound { .. } => {
                    EngineError::InvalidRequest(e.to_string())
                }
                E::InFlight { .. } => EngineError::WrongState(e.to_string()),
                E::Transient(source) => EngineError::Unreachable {
                    what: "the Ark server",
                    reason: format!("{source:#}"),
                },
            })?;
        let all = self.engine.reads().vtxos(true).await?;
        Ok(all
            .into_iter()
            .filter(|v| ids.contains(&v.vtxo.id()))
            .collect())
    }
}

//! What the watchdog reads of the wallet: its unspent VTXOs with their custody (free,
//! scheduled for a round, in a pending round, locked), read again before it acts.

use std::collections::HashSet;

use ark::VtxoId;

use super::decisions::{Custody, VtxoFacts};
use crate::engine::EngineError;

/// The ids of the inputs of the wallet's pending round participations, whether or
/// not their round has started (bark locks them only then).
pub(super) async fn participation_inputs(wallet: &bark::Wallet) -> anyhow::Result<HashSet<VtxoId>> {
    Ok(wallet
        .pending_round_states()
        .await?
        .iter()
        .flat_map(|s| s.state().locked_pending_inputs().iter().map(|v| v.id()))
        .collect())
}

/// The unspent VTXOs not being exited, with what the watchdog needs of each.
pub(super) async fn watched_vtxos(
    wallet: &bark::Wallet,
    exiting: &HashSet<VtxoId>,
) -> Result<Vec<VtxoFacts>, EngineError> {
    let unspent = wallet
        .vtxos()
        .await
        .map_err(EngineError::internal("listing VTXOs"))?;
    let in_round: HashSet<VtxoId> = wallet
        .pending_round_input_vtxos()
        .await
        .map_err(EngineError::internal("listing round inputs"))?
        .iter()
        .map(|v| v.vtxo.id())
        .collect();
    let scheduled = participation_inputs(wallet)
        .await
        .map_err(EngineError::internal("listing round participations"))?;
    Ok(unspent
        .iter()
        .filter(|v| !exiting.contains(&v.vtxo.id()))
        .map(|v| {
            let id = v.vtxo.id();
            VtxoFacts {
                id,
                amount: v.vtxo.amount(),
                expiry_height: v.vtxo.expiry_height().into(),
                exit_depth: v.exit_depth,
                custody: custody(&v.state, in_round.contains(&id), scheduled.contains(&id)),
            }
        })
        .collect())
}

fn custody(state: &bark::vtxo::VtxoState, in_round: bool, scheduled: bool) -> Custody {
    match state {
        _ if in_round => Custody::InPendingRound,
        bark::vtxo::VtxoState::Spendable if scheduled => Custody::Scheduled,
        bark::vtxo::VtxoState::Spendable => Custody::Free,
        _ => Custody::Locked,
    }
}

/// Which of `ids` are still spendable now (free or scheduled), read again.
pub(super) async fn still_free(
    wallet: &bark::Wallet,
    ids: &[VtxoId],
) -> anyhow::Result<Vec<(VtxoId, Custody)>> {
    let scheduled = participation_inputs(wallet).await?;
    let mut free = Vec::with_capacity(ids.len());
    for id in ids {
        let v = wallet.get_vtxo_by_id(*id).await?;
        match custody(&v.state, false, scheduled.contains(id)) {
            Custody::Locked | Custody::InPendingRound => {}
            c => free.push((*id, c)),
        }
    }
    Ok(free)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custody_reads_bark_state_and_rounds() {
        use bark::vtxo::VtxoState;
        let locked = VtxoState::Locked { holder: None };
        assert_eq!(custody(&VtxoState::Spendable, false, false), Custody::Free);
        assert_eq!(
            custody(&VtxoState::Spendable, false, true),
            Custody::Scheduled
        );
        assert_eq!(custody(&locked, false, false), Custody::Locked);
        assert_eq!(custody(&locked, true, true), Custody::InPendingRound);
        assert_eq!(custody(&VtxoState::Spent, false, false), Custody::Locked);
    }
}

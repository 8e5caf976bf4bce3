//! The `rounds` task (`wallet_tasks`): following the Ark server's round events as
//! bark's daemon does. Each event advances the wallet's round participations, and at
//! each round's first attempt bark's own maintenance refresh joins it with the VTXOs
//! bark considers due (near expiry, or uneconomical to exit).
//!
//! bark decides refreshes. Its daemon joins for maintenance with a crate-private call
//! that submits to the attempt at once, drops the inputs the server rejects as unusable
//! (their ids travel in the rejection's gRPC metadata, which bark's round state machine
//! does not keep) and submits the rest to the same attempt, so one unusable VTXO does
//! not stop the others from being refreshed. The one public form of that call is
//! `Wallet::maintenance_refresh`, which then drives the round on a subscription of its
//! own, holding that round state's lock until the round is done. So the task runs it,
//! in a tokio task of its own, beside its event loop; while it runs, the loop plays each
//! event on every other participation itself ([`Engine::play_on_state`], bark's
//! `progress_pending_rounds` step for step) instead of through `progress_pending_rounds`,
//! which would wait up to 10 s on the held lock at every event.
//!
//! Each event is handled under the autopilot's round gate, kept from a round's first
//! attempt until its next event (at most [`ATTEMPT_GATE`]): the watchdog never exits a
//! VTXO a participation or the maintenance refresh is submitting. Failed participations
//! and maintenance refreshes that left due VTXOs unrefreshed are failed refresh
//! attempts to the watchdog.

use std::collections::HashSet;
use std::time::Duration;

use ark::VtxoId;
use ark::rounds::RoundEvent;
use bark::persist::BarkPersister;
use bark::persist::models::RoundStateId;
use bark::round::RoundStatus;
use futures_util::StreamExt;

use super::{Engine, LoadedWallet};

/// How long the round gate stays held after a round's first attempt, at most, while
/// the participations and bark's maintenance refresh submit to it (the server's submit
/// window: 5 s on the e2e stack).
const ATTEMPT_GATE: Duration = Duration::from_secs(30);

/// How long to wait for the lock of a round state that bark's maintenance refresh may
/// be driving before leaving that state to it.
const LOCK_PROBE: Duration = Duration::from_millis(200);

/// bark's maintenance refresh under way, in a task of its own.
struct Maintenance {
    run: tokio::task::JoinHandle<anyhow::Result<Option<RoundStatus>>>,
    /// The VTXOs bark found due when it started.
    due: Vec<VtxoId>,
    /// The round states that existed when it started: none of them is its own.
    known: HashSet<RoundStateId>,
    /// The round states found held by it (it drives them).
    held: HashSet<RoundStateId>,
}

impl Drop for Maintenance {
    /// The task stops with the `rounds` step (the wallet unloaded), like any bark call
    /// of that step; a finished task is not affected.
    fn drop(&mut self) {
        self.run.abort();
    }
}

/// How playing an event on one round state went.
enum Played {
    Done,
    /// Its lock is held: the maintenance refresh drives it.
    Held(RoundStateId),
}

impl Engine {
    /// One subscription to the round events, followed until it ends (and the
    /// maintenance refresh it started, if still under way, has finished).
    pub(super) async fn follow_rounds(&self, loaded: &LoadedWallet) -> Result<(), String> {
        let wallet = &loaded.wallet;
        let mut events = wallet
            .subscribe_round_events()
            .await
            .map_err(|e| format!("subscribing to round events: {e:#}"))?;
        let mut delivered = false;
        let mut maintenance: Option<Maintenance> = None;
        // The round gate, kept from a round's first attempt until its next event.
        let mut attempt_gate = None;
        let ended = loop {
            let gate_until = attempt_gate
                .as_ref()
                .map_or_else(tokio::time::Instant::now, |(_, until)| *until);
            tokio::select! {
                event = events.next() => {
                    let event = match event {
                        Some(Ok(event)) => event,
                        None => break Ok(()),
                        // After events came through, a broken stream is the usual idle reset.
                        Some(Err(e)) if delivered => {
                            tracing::debug!(target: "berth::rounds", error = %format!("{e:#}"),
                                "the round event stream broke; subscribing again");
                            break Ok(());
                        }
                        Some(Err(e)) => break Err(format!("the round event stream failed: {e:#}")),
                    };
                    delivered = true;
                    let gate = match attempt_gate.take() {
                        Some((gate, _)) => gate,
                        None => loaded.autopilot.round_gate().await,
                    };
                    self.play_round_event(wallet, &event, maintenance.as_mut()).await;
                    let first_attempt =
                        matches!(&event, RoundEvent::Attempt(a) if a.attempt_seq == 0);
                    if first_attempt && maintenance.is_none() {
                        maintenance = self.start_maintenance_refresh(wallet).await;
                    }
                    self.count_failed_rounds(loaded).await;
                    if first_attempt {
                        attempt_gate = Some((gate, tokio::time::Instant::now() + ATTEMPT_GATE));
                    }
                }
                outcome = finished(&mut maintenance), if maintenance.is_some() => {
                    if let Some(done) = maintenance.take() {
                        self.maintenance_finished(loaded, &done, outcome).await;
                    }
                }
                () = tokio::time::sleep_until(gate_until), if attempt_gate.is_some() => {
                    attempt_gate = None;
                }
            }
        };
        drop(attempt_gate);
        // The maintenance refresh follows its round on its own subscription: let it
        // finish before this task subscribes again and could start another.
        if let Some(mut done) = maintenance.take() {
            let outcome = (&mut done.run).await;
            self.maintenance_finished(loaded, &done, outcome).await;
        }
        match ended {
            Ok(()) if delivered => Ok(()),
            Ok(()) => Err("the round event stream closed before any event".into()),
            Err(e) => Err(e),
        }
    }

    /// Start bark's maintenance refresh for the round whose first attempt just came,
    /// when bark finds VTXOs due; it joins that attempt (the server sends a new
    /// subscriber the round's last event first).
    async fn start_maintenance_refresh(&self, wallet: &bark::Wallet) -> Option<Maintenance> {
        let found = async {
            let due = wallet.get_vtxos_to_refresh().await?;
            let known = wallet.pending_round_state_ids().await?;
            anyhow::Ok((due, known))
        };
        let (due, known) = match found.await {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(target: "berth::rounds", error = %format!("{e:#}"),
                    "cannot tell which VTXOs are due for a maintenance refresh");
                return None;
            }
        };
        if due.is_empty() {
            return None;
        }
        tracing::info!(target: "berth::rounds", vtxos = due.len(),
            "joining the round for a maintenance refresh");
        let run = tokio::spawn({
            let wallet = wallet.clone();
            async move { wallet.maintenance_refresh().await }
        });
        Some(Maintenance {
            run,
            due: due.iter().map(|v| v.vtxo.id()).collect(),
            known: known.into_iter().collect(),
            held: HashSet::new(),
        })
    }

    /// Record how the maintenance refresh went: a refresh joined or failed, and a
    /// failed attempt for each due VTXO still spendable (the refresh failed, or the
    /// server rejected it and bark refreshed the others without it).
    async fn maintenance_finished(
        &self,
        loaded: &LoadedWallet,
        done: &Maintenance,
        outcome: Result<anyhow::Result<Option<RoundStatus>>, tokio::task::JoinError>,
    ) {
        let (wallet, autopilot) = (&loaded.wallet, &loaded.autopilot);
        match outcome {
            Ok(Ok(Some(status))) => {
                tracing::info!(target: "berth::rounds", ?status, "the maintenance refresh's round finished");
                autopilot.record_refresh(true);
            }
            // Nothing economical to refresh after all: bark's decision, not a failure.
            Ok(Ok(None)) => return,
            Ok(Err(e)) => {
                tracing::warn!(target: "berth::rounds", error = %format!("{e:#}"),
                    "the maintenance refresh failed");
                autopilot.record_refresh(false);
            }
            Err(e) => {
                tracing::error!(target: "berth::rounds", error = %e, "the maintenance refresh stopped");
                autopilot.record_refresh(false);
            }
        }
        let mut unrefreshed = Vec::new();
        for id in &done.due {
            match wallet.get_vtxo_by_id(*id).await {
                Ok(v) if matches!(v.state, bark::vtxo::VtxoState::Spendable) => {
                    unrefreshed.push(*id)
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(target: "berth::rounds", vtxo = %id,
                    error = %format!("{e:#}"), "cannot read a VTXO after a maintenance refresh"),
            }
        }
        if !unrefreshed.is_empty() {
            tracing::warn!(target: "berth::rounds", vtxos = unrefreshed.len(),
                "VTXOs due for a maintenance refresh were not refreshed");
            autopilot.record_unrefreshed(unrefreshed);
        }
    }

    /// Advance the wallet's round participations with `event`: bark's
    /// `progress_pending_rounds`, or, while bark's maintenance refresh drives a round
    /// state of its own, the same for every state but that one.
    async fn play_round_event(
        &self,
        wallet: &bark::Wallet,
        event: &RoundEvent,
        maintenance: Option<&mut Maintenance>,
    ) {
        let Some(maintenance) = maintenance else {
            if let Err(e) = wallet.progress_pending_rounds(Some(event)).await {
                tracing::warn!(target: "berth::rounds", error = %format!("{e:#}"),
                    "cannot advance the wallet's rounds");
            }
            return;
        };
        let ids = match wallet.pending_round_state_ids().await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(target: "berth::rounds", error = %format!("{e:#}"),
                    "cannot list the wallet's rounds");
                return;
            }
        };
        let plays = ids
            .into_iter()
            .filter(|id| !maintenance.held.contains(id))
            .map(|id| {
                let maybe_its_own = !maintenance.known.contains(&id);
                self.play_on_state(wallet, id, event, maybe_its_own)
            });
        for played in futures_util::future::join_all(plays).await {
            if let Played::Held(id) = played {
                maintenance.held.insert(id);
            }
        }
    }

    /// What `progress_pending_rounds` does for one round state (bark 0.8's
    /// `inner_process_event`): lock it, play the event on an ongoing participation,
    /// sync it, and store it, or remove it once final. A state that may be the
    /// maintenance refresh's is left alone when its lock is not free at once.
    async fn play_on_state(
        &self,
        wallet: &bark::Wallet,
        id: RoundStateId,
        event: &RoundEvent,
        maybe_its_own: bool,
    ) -> Played {
        let locked = if maybe_its_own {
            match tokio::time::timeout(LOCK_PROBE, wallet.lock_wait_round_state(id)).await {
                Ok(locked) => locked,
                Err(_) => return Played::Held(id),
            }
        } else {
            wallet.lock_wait_round_state(id).await
        };
        let mut state = match locked {
            Ok(Some(state)) => state,
            Ok(None) => return Played::Done,
            Err(e) => {
                tracing::warn!(target: "berth::rounds", round_state = %id,
                    error = %format!("{e:#}"), "cannot lock a round state");
                return Played::Done;
            }
        };
        if state.state().ongoing_participation()
            && state.state_mut().process_event(wallet, event).await
            && let Err(e) = self.store.update_round_state(&state).await
        {
            tracing::error!(target: "berth::rounds", round_state = %id,
                error = %format!("{e:#}"), "cannot store a round state after progress");
        }
        let stored = match state.state_mut().sync(wallet).await {
            Err(e) => {
                tracing::warn!(target: "berth::rounds", round_state = %id,
                    error = %format!("{e:#}"), "cannot sync a round");
                return Played::Done;
            }
            Ok(status) if status.is_final() => {
                tracing::info!(target: "berth::rounds", round_state = %id, ?status, "a round finished");
                self.store.remove_round_state(&state).await
            }
            Ok(_) => self.store.update_round_state(&state).await,
        };
        if let Err(e) = stored {
            tracing::error!(target: "berth::rounds", round_state = %id,
                error = %format!("{e:#}"), "cannot store a round state");
        }
        Played::Done
    }

    /// Tell the watchdog about participations that failed (the server refused or
    /// aborted the round): each is a failed refresh attempt of its inputs. A failed
    /// state stays listed until the next sync; the autopilot counts each once.
    async fn count_failed_rounds(&self, loaded: &LoadedWallet) {
        match loaded.wallet.pending_round_states().await {
            Ok(states) => {
                for state in states
                    .iter()
                    .filter(|s| s.state().flow_kind() == bark::round::RoundFlowKind::Failed)
                {
                    let inputs = state.state().participation().inputs.iter().map(|v| v.id());
                    loaded.autopilot.record_failed_round(state.id(), inputs);
                }
            }
            Err(e) => tracing::warn!(target: "berth::rounds", error = %format!("{e:#}"),
                "cannot list the wallet's rounds"),
        }
    }
}

/// The maintenance refresh's outcome, once it has one (pending without one).
async fn finished(
    maintenance: &mut Option<Maintenance>,
) -> Result<anyhow::Result<Option<RoundStatus>>, tokio::task::JoinError> {
    match maintenance {
        Some(m) => (&mut m.run).await,
        None => std::future::pending().await,
    }
}

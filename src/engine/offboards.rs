//! Offboarding: sending VTXOs on-chain (everything, chosen VTXOs, or an exact amount to
//! a bitcoin address). bark 0.8 does not use rounds for it: the server builds the
//! transaction and the wallet broadcasts it.
//!
//! Each call starts a bark offboard *action*: bark picks and locks the inputs, stores
//! the action's checkpoint, and drives it once, through the server's calls, to the
//! broadcast. When a step fails transiently (the server or the chain source briefly
//! unavailable) bark parks the action and returns an error, yet the action stays
//! pending, its inputs stay locked, and the next wallet sync drives it on to the
//! broadcast. Such an offboard is accepted work, not a failure: answering it with an
//! error would tell a client it may pay again, and the `Idempotency-Key` layer would
//! give its key back for a retry that pays twice. So [`Engine::run_offboard`] tells the
//! two apart, drives a paused offboard again for a few seconds, and reports one still
//! paused as [`OffboardOutcome::Pending`] (202), which the idempotency layer keeps.
//!
//! The other way round too: bark parks the action once it is broadcast, releases it,
//! and reads its checkpoint back for the answer. When the wallet's sync drives it to
//! its end in between (no confirmations needed off mainnet, or a block came), the
//! checkpoint is gone and bark answers "finished without producing a txid" for money
//! that went (a power-cut run found it as a 500). Its movement, made by this call
//! (newer than the newest before it, paying what was asked), is then the answer.

use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use ark::VtxoId;
use bark::actions::offboard::{Offboard, OffboardKind, Progress};
use bark::movement::{Movement, MovementId, MovementStatus, PaymentMethod};
use bark::persist::BarkPersister as _;
use bark::subsystem::Subsystem;

use super::offchain::Ark;
use super::spending::{Outcome, PaymentKind, Spender};
use super::{Engine, EngineError, LoadedWallet};

/// How long a request waits for an offboard bark paused to be broadcast before it
/// answers "pending". Long enough for a few tries past a server's brief hiccup, short
/// enough for a client waiting on the answer, and well under the request time limit
/// (`[server] request_timeout_secs`, 120 s by default) with bark's own call before it.
const PAUSED_OFFBOARD_WAIT: Duration = Duration::from_secs(12);
/// The first pause before driving a paused offboard again; doubled after each try, up
/// to [`MAX_PAUSE`]. A step that failed a moment ago rarely succeeds at once, and bark
/// parks some steps so that a server that keeps refusing is not asked in a hot loop.
const FIRST_PAUSE: Duration = Duration::from_millis(500);
const MAX_PAUSE: Duration = Duration::from_secs(3);

/// What an offboard call came to.
#[derive(Debug, Clone)]
pub enum OffboardOutcome {
    /// The transaction is broadcast.
    Broadcast(bark::OffboardResult),
    /// Started, but not broadcast within [`PAUSED_OFFBOARD_WAIT`]: its inputs are
    /// spoken for and a later wallet sync takes it on. The client must not send it
    /// again; the history tells how it ends.
    Pending(PendingOffboard),
}

/// An offboard started and paused before its broadcast.
#[derive(Debug, Clone)]
pub struct PendingOffboard {
    /// bark's id of the offboard action.
    pub id: String,
    /// The movement that records it, once bark has created one (a send on-chain at its
    /// arkoor split, an offboard when the server has prepared the transaction).
    pub movement_id: Option<MovementId>,
}

/// How a granted offboard went: broadcast, done; paused, its movement's end decides.
fn offboard_outcome(outcome: &OffboardOutcome) -> Outcome {
    match outcome {
        OffboardOutcome::Broadcast(result) => Outcome::Paid {
            movement_id: Some(result.movement_id.0),
            payment_hash: None,
        },
        OffboardOutcome::Pending(p) => Outcome::Pending {
            movement_id: p.movement_id.map(|m| m.0),
            payment_hash: None,
        },
    }
}

/// Where a paused offboard stands.
enum Standing {
    Broadcast(bark::OffboardResult),
    Paused(Option<MovementId>),
    /// It ended without a broadcast (bark failed it and released its inputs) or left
    /// no trace: the call failed.
    Failed,
}

/// bark's kinds of `bark.offboard` movement (its `OffboardMovement`, not public).
const OFFBOARD_KIND: &str = "offboard";
const SEND_ONCHAIN_KIND: &str = "send_onchain";

/// What one offboard call asks for: how its action, and once bark has made it, its
/// movement, are told from others'.
enum Asked<'a> {
    /// Every spendable VTXO (`inputs` `None`), or these, to `to`.
    Whole {
        to: &'a bitcoin::Address,
        inputs: Option<HashSet<VtxoId>>,
    },
    /// `amount` to `to`, out of the Ark balance.
    SendOnchain {
        to: &'a bitcoin::Address,
        amount: bitcoin::Amount,
    },
}

impl Asked<'_> {
    fn is_action(&self, o: &Offboard) -> bool {
        match self {
            Asked::Whole { to, inputs } => {
                o.destination == *to.as_unchecked()
                    && matches!(&o.kind, OffboardKind::OffboardWhole { input_vtxo_ids }
                    if inputs.as_ref().is_none_or(|wanted| {
                        input_vtxo_ids.iter().copied().collect::<HashSet<_>>() == *wanted
                    }))
            }
            Asked::SendOnchain { to, amount } => {
                o.destination == *to.as_unchecked()
                    && o.onchain_output_amount == *amount
                    && matches!(o.kind, OffboardKind::SendOnchain { .. })
            }
        }
    }

    /// bark's movement of such an action: an offboard of the kind asked, paying `to`
    /// (the amount, for a send on-chain; the inputs, for chosen VTXOs).
    fn is_movement(&self, m: &Movement) -> bool {
        let pays = |to: &bitcoin::Address, amount: Option<bitcoin::Amount>| {
            m.sent_to.iter().any(|d| {
                matches!(&d.destination, PaymentMethod::Bitcoin(a) if a == to.as_unchecked())
                    && amount.is_none_or(|x| d.amount == x)
            })
        };
        m.subsystem.name == Subsystem::OFFBOARD.as_name()
            && match self {
                Asked::Whole { to, inputs } => {
                    m.subsystem.kind == OFFBOARD_KIND
                        && pays(to, None)
                        && inputs.as_ref().is_none_or(|wanted| {
                            m.input_vtxos.iter().copied().collect::<HashSet<_>>() == *wanted
                        })
                }
                Asked::SendOnchain { to, amount } => {
                    m.subsystem.kind == SEND_ONCHAIN_KIND && pays(to, Some(*amount))
                }
            }
    }
}

impl Engine {
    /// A bitcoin address of the wallet's network, or a fresh one of the on-chain wallet.
    async fn payout_address(&self, address: Option<&str>) -> Result<bitcoin::Address, EngineError> {
        match address {
            Some(text) => self.address(text).await,
            None => self.onchain().next_address().await,
        }
    }

    /// Run one of bark's offboard calls, `call`, and tell a failed offboard from one
    /// bark paused (module docs).
    ///
    /// bark returns the same kind of error for both, so the answer is in its pending
    /// actions: a new one that `ours` recognises (its destination, kind, amount or
    /// inputs) is the one this call started. The check by content matters because
    /// other requests may start offboards meanwhile; two identical requests at once
    /// cannot be told apart, which at worst names the other one's action (both paid
    /// the same destination the same way), never turns a paused offboard into a
    /// failure. Without a new action of ours, the error is the call's own, classified
    /// as any bark error.
    ///
    /// A paused offboard is driven again (bark's `sync_pending_offboards`, what the
    /// wallet's sync does) with growing pauses for at most [`PAUSED_OFFBOARD_WAIT`]. No
    /// lock of the engine is held meanwhile; bark's own per-action lock keeps the
    /// wallet's sync task and this from driving it at once.
    async fn run_offboard(
        &self,
        loaded: &LoadedWallet,
        context: &'static str,
        asked: &Asked<'_>,
        call: impl Future<Output = anyhow::Result<bark::OffboardResult>>,
    ) -> Result<OffboardOutcome, EngineError> {
        let wallet = &loaded.wallet;
        let before: HashSet<String> = wallet
            .pending_offboards()
            .await
            .map_err(EngineError::internal("listing pending offboards"))?
            .into_iter()
            .map(|o| o.id)
            .collect();
        let newest_movement = self.store.last_movement_id().await?;
        let error = match call.await {
            Ok(result) => return Ok(OffboardOutcome::Broadcast(result)),
            Err(error) => error,
        };
        let started = match wallet.pending_offboards().await {
            Ok(pending) => pending
                .into_iter()
                .find(|o| !before.contains(&o.id) && asked.is_action(o))
                .map(|o| o.id),
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"),
                    "cannot list pending offboards after a failed offboard");
                None
            }
        };
        let id = match started {
            Some(id) => {
                tracing::warn!(offboard_id = %id, error = %format!("{error:#}"),
                    "{context}: bark paused the offboard before its broadcast; driving it again");
                id
            }
            None => match self.finished_offboard_action(newest_movement, asked).await {
                // bark can finish the action within its call (broadcast, and done when a
                // block came meanwhile, or when the wallet's sync took it on) and then
                // answer "finished without producing a txid": its movement tells.
                Some(id) => {
                    tracing::warn!(offboard_id = %id, error = %format!("{error:#}"),
                        "{context}: bark answered with an error for an offboard that has \
                         ended; its outcome decides the answer");
                    id
                }
                None => return Err(EngineError::classify(context)(error)),
            },
        };

        let deadline = tokio::time::Instant::now() + PAUSED_OFFBOARD_WAIT;
        let mut pause = FIRST_PAUSE;
        let mut movement_id = None;
        loop {
            match self.offboard_standing(wallet, &id).await {
                Ok(Standing::Broadcast(result)) => {
                    tracing::info!(offboard_id = %id, txid = %result.txid,
                        "the paused offboard is broadcast");
                    return Ok(OffboardOutcome::Broadcast(result));
                }
                Ok(Standing::Failed) => return Err(EngineError::classify(context)(error)),
                Ok(Standing::Paused(movement)) => movement_id = movement.or(movement_id),
                // The action is stored: whatever this read says, it is not a failure to
                // answer as one.
                Err(e) => {
                    tracing::error!(offboard_id = %id, error = %e,
                        "cannot read a paused offboard; answering it as pending");
                    return Ok(OffboardOutcome::Pending(PendingOffboard {
                        id,
                        movement_id,
                    }));
                }
            }
            if tokio::time::Instant::now() + pause >= deadline {
                tracing::warn!(offboard_id = %id, movement_id = movement_id.map(|m| m.0),
                    "the offboard is still paused; a later wallet sync takes it on");
                return Ok(OffboardOutcome::Pending(PendingOffboard {
                    id,
                    movement_id,
                }));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_PAUSE);
            // Driven in a task of its own, so that the deadline cuts the wait and not
            // bark's step: a step stopped mid-way is a crash to bark, which is safe but
            // makes it redo server calls. A drive still running at the deadline ends
            // on its own.
            let drive = tokio::spawn({
                let wallet = wallet.clone();
                async move { wallet.sync_pending_offboards().await }
            });
            match tokio::time::timeout_at(deadline, drive).await {
                Ok(Ok(Ok(()))) | Err(_) => {}
                Ok(Ok(Err(e))) => tracing::warn!(offboard_id = %id, error = %format!("{e:#}"),
                    "cannot drive pending offboards"),
                Ok(Err(e)) => tracing::error!(offboard_id = %id, error = %e,
                    "driving pending offboards panicked"),
            }
        }
    }

    /// The finished action of this call, found by the movement it made (newer than
    /// `newest_movement`, the newest when the call started, and `asked`'s); `None`
    /// when there is none, or it cannot be read (logged).
    async fn finished_offboard_action(
        &self,
        newest_movement: u32,
        asked: &Asked<'_>,
    ) -> Option<String> {
        let found = async {
            for (action, movement_id) in self
                .store
                .actions_with_movements_after(newest_movement)
                .await?
            {
                let movement = self.store.get_movement_by_id(movement_id).await?;
                if asked.is_movement(&movement) {
                    return Ok(Some(action));
                }
            }
            anyhow::Ok(None)
        };
        found.await.unwrap_or_else(|e| {
            tracing::error!(error = %format!("{e:#}"),
                "cannot look for the movement of a failed offboard; taking it as failed");
            None
        })
    }

    /// Where the offboard action `id` stands: broadcast, paused, or failed.
    async fn offboard_standing(
        &self,
        wallet: &bark::Wallet,
        id: &str,
    ) -> Result<Standing, EngineError> {
        let checkpoint = wallet
            .offboard_checkpoint(&id.to_string())
            .await
            .map_err(EngineError::internal("reading an offboard"))?;
        let movement_id = self
            .store
            .get_movement_id_by_action(id)
            .await
            .map_err(EngineError::internal("reading an offboard's movement"))?;
        let progress = match checkpoint {
            Some(offboard) => offboard.progress,
            // The checkpoint is gone: bark finished the action. With no confirmations
            // required (bark's setting off mainnet) a drive can take it from the
            // broadcast to done at once, so its movement tells success from failure.
            None => return self.finished_offboard(movement_id).await,
        };
        Ok(match progress {
            Progress::AwaitingConfirmations {
                offboard_txid,
                movement_id,
                ..
            } => Standing::Broadcast(bark::OffboardResult {
                txid: offboard_txid,
                movement_id,
            }),
            Progress::Start
            | Progress::SplitWithArkoor
            | Progress::ArkoorRegistrationRequired { .. }
            | Progress::ReadyForOffboard { .. }
            | Progress::OffboardTxPrepared { .. }
            | Progress::ReadyForBroadcast { .. } => Standing::Paused(movement_id),
        })
    }

    /// How a finished offboard action ended, by its movement (`None`: it made none).
    async fn finished_offboard(
        &self,
        movement_id: Option<MovementId>,
    ) -> Result<Standing, EngineError> {
        let Some(movement_id) = movement_id else {
            return Ok(Standing::Failed);
        };
        let movement = self
            .store
            .get_movement_by_id(movement_id)
            .await
            .map_err(EngineError::internal("reading an offboard's movement"))?;
        Ok(match movement.status {
            MovementStatus::Successful => {
                // bark records the transaction in the movement when the server signs it.
                match movement
                    .metadata
                    .get("offboard_txid")
                    .and_then(|txid| serde_json::from_value(txid.clone()).ok())
                {
                    Some(txid) => Standing::Broadcast(bark::OffboardResult { txid, movement_id }),
                    // Paid, but the answer cannot say by which transaction: "pending"
                    // still tells the client not to pay again, and the history has it.
                    None => Standing::Paused(Some(movement_id)),
                }
            }
            MovementStatus::Failed | MovementStatus::Canceled => Standing::Failed,
            // Not bark's way (it finishes the movement before it drops the
            // checkpoint); if it happens, the movement is the truth.
            MovementStatus::Pending => Standing::Paused(Some(movement_id)),
        })
    }
}

impl Ark<'_> {
    /// Offboard every spendable VTXO to `address` (default: the on-chain wallet).
    pub async fn offboard_all(
        &self,
        address: Option<&str>,
        who: &Spender,
    ) -> Result<OffboardOutcome, EngineError> {
        let estimate = async {
            let to = self.engine.payout_address(address).await?.to_string();
            self.engine.fees().offboard_all(&to).await
        };
        let spending = self.engine.spending();
        let grant = spending.authorize(who, PaymentKind::Offboard, None).await?;
        let grant = spending.check_fee(grant, estimate).await?;
        let payment = Box::pin(self.offboard_all_now(address));
        spending.spend(grant, payment, offboard_outcome).await
    }

    async fn offboard_all_now(
        &self,
        address: Option<&str>,
    ) -> Result<OffboardOutcome, EngineError> {
        let address = self.engine.payout_address(address).await?;
        let loaded = self.engine.loaded().await?;
        super::rounds::spendable_or(&loaded, "no spendable VTXOs to offboard").await?;
        let asked = Asked::Whole {
            to: &address,
            inputs: None,
        };
        self.engine
            .run_offboard(
                &loaded,
                "offboarding",
                &asked,
                loaded.wallet.offboard_all(address.clone()),
            )
            .await
    }

    /// Offboard these VTXOs (all spendable) to `address` (default: the on-chain wallet).
    pub async fn offboard_vtxos(
        &self,
        ids: &[VtxoId],
        address: Option<&str>,
        who: &Spender,
    ) -> Result<OffboardOutcome, EngineError> {
        let estimate = async {
            let to = self.engine.payout_address(address).await?.to_string();
            self.engine.fees().offboard(&to, ids).await
        };
        let spending = self.engine.spending();
        let grant = spending.authorize(who, PaymentKind::Offboard, None).await?;
        let grant = spending.check_fee(grant, estimate).await?;
        let payment = Box::pin(self.offboard_vtxos_now(ids, address));
        spending.spend(grant, payment, offboard_outcome).await
    }

    async fn offboard_vtxos_now(
        &self,
        ids: &[VtxoId],
        address: Option<&str>,
    ) -> Result<OffboardOutcome, EngineError> {
        self.engine.spendable_by_id(ids).await?;
        let address = self.engine.payout_address(address).await?;
        let loaded = self.engine.loaded().await?;
        let asked = Asked::Whole {
            to: &address,
            inputs: Some(ids.iter().copied().collect()),
        };
        self.engine
            .run_offboard(
                &loaded,
                "offboarding",
                &asked,
                loaded.wallet.offboard_vtxos(ids.to_vec(), address.clone()),
            )
            .await
    }

    /// Pay `amount` on-chain to `destination` out of the Ark balance (the server's
    /// offboard fee comes on top).
    pub async fn send_onchain(
        &self,
        destination: &str,
        amount: bitcoin::Amount,
        who: &Spender,
    ) -> Result<OffboardOutcome, EngineError> {
        let spending = self.engine.spending();
        let grant = spending
            .authorize(who, PaymentKind::Offboard, Some(amount))
            .await?;
        let grant = spending
            .check_fee(grant, self.engine.fees().send_onchain(destination, amount))
            .await?;
        let payment = Box::pin(self.send_onchain_now(destination, amount));
        spending.spend(grant, payment, offboard_outcome).await
    }

    async fn send_onchain_now(
        &self,
        destination: &str,
        amount: bitcoin::Amount,
    ) -> Result<OffboardOutcome, EngineError> {
        let address = self.engine.address(destination).await?;
        let loaded = self.engine.loaded().await?;
        if amount < address.script_pubkey().minimal_non_dust() {
            return Err(EngineError::InvalidRequest(format!(
                "amount_sat {} is below the dust limit of the destination",
                amount.to_sat()
            )));
        }
        let asked = Asked::SendOnchain {
            to: &address,
            amount,
        };
        self.engine
            .run_offboard(
                &loaded,
                "sending on-chain",
                &asked,
                loaded.wallet.send_onchain(address.clone(), amount),
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr as _;

    use bark::movement::{MovementDestination, MovementSubsystem};
    use bitcoin::Amount;

    use super::*;

    /// A regtest address of its own for each `n`.
    fn address(n: u8) -> bitcoin::Address {
        let secp = bitcoin::secp256k1::Secp256k1::new();
        let key = bitcoin::secp256k1::SecretKey::from_slice(&[n; 32]).expect("a key");
        let public = bitcoin::CompressedPublicKey(key.public_key(&secp));
        bitcoin::Address::p2wpkh(&public, bitcoin::Network::Regtest)
    }

    /// A movement as bark makes it for an offboard of `kind` paying `amount` to `to`.
    fn offboard_movement(kind: &str, to: &bitcoin::Address, amount: u64) -> Movement {
        let mut m = Movement::new(
            MovementId(7),
            MovementStatus::Successful,
            &MovementSubsystem {
                name: Subsystem::OFFBOARD.as_name().to_owned(),
                kind: kind.into(),
            },
            chrono::Local::now(),
        );
        m.sent_to.push(MovementDestination::bitcoin(
            to.clone(),
            Amount::from_sat(amount),
        ));
        m
    }

    #[test]
    fn a_call_knows_its_own_movement_and_no_other() {
        let (to, other) = (address(1), address(2));
        let send = Asked::SendOnchain {
            to: &to,
            amount: Amount::from_sat(10_000),
        };
        assert!(send.is_movement(&offboard_movement("send_onchain", &to, 10_000)));
        assert!(!send.is_movement(&offboard_movement("send_onchain", &to, 10_001)));
        assert!(!send.is_movement(&offboard_movement("send_onchain", &other, 10_000)));
        assert!(
            !send.is_movement(&offboard_movement("offboard", &to, 10_000)),
            "an offboard of everything to the same address, of the same amount"
        );
        let mut arkoor = offboard_movement("send_onchain", &to, 10_000);
        arkoor.subsystem.name = Subsystem::ARKOOR.as_name().to_owned();
        assert!(!send.is_movement(&arkoor), "another subsystem's");

        let vtxo =
            VtxoId::from_str("5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a:0")
                .expect("a vtxo id");
        let mut whole = offboard_movement("offboard", &to, 99_000);
        whole.input_vtxos.push(vtxo);
        let all = Asked::Whole {
            to: &to,
            inputs: None,
        };
        assert!(all.is_movement(&whole), "any amount, any inputs");
        let these = Asked::Whole {
            to: &to,
            inputs: Some([vtxo].into()),
        };
        assert!(these.is_movement(&whole));
        let others = Asked::Whole {
            to: &to,
            inputs: Some(HashSet::new()),
        };
        assert!(!others.is_movement(&whole), "other inputs");
        assert!(!all.is_movement(&offboard_movement("offboard", &other, 99_000)));
        assert!(!all.is_movement(&offboard_movement("send_onchain", &to, 99_000)));
    }
}

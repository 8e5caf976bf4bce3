//! The off-chain (Ark) side of the wallet: addresses, payments, sync (the reads that
//! need no network are in `reads`).

use std::collections::HashSet;
use std::time::Duration;

use bitcoin::Amount;

use bark::movement::MovementId;
use bark::persist::BarkPersister;

use super::spending::{Outcome, PaymentKind, Spender};
use super::{Engine, EngineError};
use crate::store::StoreError;

/// How long an Ark payment may take before the API answers. bark retries a payment
/// without end while the server or the recipient's mailbox is down; past this it goes
/// on in the background (its checkpoint survives restarts) and the client is told so.
const ARK_PAYMENT_TIMEOUT: Duration = Duration::from_secs(60);

/// What an Ark payment call came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArkPayment {
    /// Delivered to the recipient's mailbox; the movement that records it.
    Sent(MovementId),
    /// Started and stored, not complete within [`ARK_PAYMENT_TIMEOUT`]: its inputs are
    /// spoken for, and the wallet's sync completes it (or fails it, funds back). The
    /// movement, once bark has made it (after the server's cosignature).
    Pending { movement_id: Option<MovementId> },
}

/// The ids of the Ark payments bark has stored and not finished.
async fn pending_arkoor_send_ids(wallet: &bark::Wallet) -> Result<HashSet<String>, EngineError> {
    Ok(wallet
        .pending_arkoor_sends()
        .await
        .map_err(EngineError::internal("listing pending Ark payments"))?
        .into_iter()
        .map(|s| s.id)
        .collect())
}

/// Off-chain operations on the Ark: addresses, sends, boards and offboards, the server's info, mailbox sync, signing (`/api/v1/wallet`, `/api/v1/boards`).
pub struct Ark<'a> {
    pub(super) engine: &'a Engine,
}

impl Engine {
    pub fn ark(&self) -> Ark<'_> {
        Ark { engine: self }
    }
}

impl Ark<'_> {
    /// Everything bark syncs with the Ark server and the chain (rounds, boards,
    /// payments, exits); not the on-chain wallet. Never fails: bark logs what it
    /// could not reach, and the next sync tries again.
    pub async fn sync(&self) -> Result<(), EngineError> {
        let loaded = self.engine.loaded().await?;
        loaded.wallet.sync().await;
        Ok(())
    }

    /// Derive, store and return a new Ark address of the wallet.
    pub async fn address_next(&self) -> Result<ark::Address, EngineError> {
        let loaded = self.engine.loaded().await?;
        loaded
            .wallet
            .new_address()
            .await
            .map_err(EngineError::internal("deriving an Ark address"))
    }

    /// Pay `amount` to an Ark address out of round (arkoor).
    ///
    /// bark drives the payment (an action whose checkpoint survives restarts) until it
    /// is done, retrying while the server or the recipient's mailbox is down. Past
    /// [`ARK_PAYMENT_TIMEOUT`] the call stops waiting; the action stays, its inputs
    /// locked, and the wallet's sync drives it on. That is accepted work: answering it
    /// as an error would let the `Idempotency-Key` layer give the key back, and a
    /// client's retry would pay twice. So it is [`ArkPayment::Pending`] (202).
    pub async fn send(
        &self,
        destination: &ark::Address,
        amount: Amount,
        who: &Spender,
    ) -> Result<ArkPayment, EngineError> {
        let outcome = |paid: &ArkPayment| match paid {
            ArkPayment::Sent(movement) => Outcome::Paid {
                movement_id: Some(movement.0),
                payment_hash: None,
            },
            ArkPayment::Pending { movement_id } => Outcome::Pending {
                movement_id: movement_id.map(|m| m.0),
                payment_hash: None,
            },
        };
        let spending = self.engine.spending();
        let grant = spending
            .authorize(who, PaymentKind::Ark, Some(amount))
            .await?;
        let grant = spending
            .check_fee(grant, self.engine.fees().arkoor(amount))
            .await?;
        let payment = Box::pin(self.send_now(destination, amount));
        spending.spend(grant, payment, outcome).await
    }

    async fn send_now(
        &self,
        destination: &ark::Address,
        amount: Amount,
    ) -> Result<ArkPayment, EngineError> {
        use bark::ArkoorAddressError as E;
        let loaded = self.engine.loaded().await?;
        match loaded.wallet.validate_arkoor_address(destination).await {
            Ok(()) => {}
            Err(E::Other(reason)) => {
                return Err(EngineError::Unreachable {
                    what: "the Ark server",
                    reason,
                });
            }
            Err(e) => return Err(EngineError::InvalidRequest(e.to_string())),
        }
        let before = pending_arkoor_send_ids(&loaded.wallet).await?;
        let payment = loaded.wallet.send_arkoor_payment(destination, amount);
        match tokio::time::timeout(ARK_PAYMENT_TIMEOUT, payment).await {
            Ok(result) => result
                .map(ArkPayment::Sent)
                .map_err(EngineError::classify("paying an Ark address")),
            Err(_) => {
                // Dropping bark's drive mid-step is a crash to it: safe, and the
                // wallet's sync picks the checkpoint up.
                let started = loaded
                    .wallet
                    .pending_arkoor_sends()
                    .await
                    .map_err(EngineError::internal("listing pending Ark payments"))?
                    .into_iter()
                    .find(|s| {
                        !before.contains(&s.id)
                            && s.destination == *destination
                            && s.amount == amount
                    });
                let Some(started) = started else {
                    // No checkpoint: bark stopped before it stored the payment, so
                    // nothing was paid and a retry is safe.
                    return Err(EngineError::Unavailable(
                        "the payment could not start within a minute (Ark server unreachable); \
                         nothing was paid"
                            .into(),
                    ));
                };
                let movement_id = self
                    .engine
                    .store
                    .get_movement_id_by_action(&started.id)
                    .await
                    .map_err(EngineError::internal("reading an Ark payment's movement"))?;
                tracing::warn!(action_id = %started.id, movement_id = movement_id.map(|m| m.0),
                    "an Ark payment has not completed within a minute; the wallet's sync \
                     goes on with it");
                Ok(ArkPayment::Pending { movement_id })
            }
        }
    }

    /// The Ark server's parameters, asking it if the wallet has not yet; `None`
    /// when it cannot be reached.
    pub async fn info(&self) -> Result<Option<ark::ArkInfo>, EngineError> {
        let loaded = self.engine.loaded().await?;
        if let Ok(Some(info)) = loaded.wallet.ark_info().await {
            return Ok(Some(info));
        }
        Ok(loaded.wallet.require_ark_info().await.ok())
    }

    /// The wallet's Ark address at `index`, which must have been handed out before.
    pub async fn address_at(&self, index: u32) -> Result<Option<ark::Address>, EngineError> {
        let loaded = self.engine.loaded().await?;
        let (_, next) = loaded
            .wallet
            .peek_next_keypair()
            .await
            .map_err(EngineError::internal("reading the next key index"))?;
        if index >= next {
            return Ok(None);
        }
        loaded
            .wallet
            .peek_address(index)
            .await
            .map(Some)
            .map_err(EngineError::internal("deriving an Ark address"))
    }

    /// When the Ark server starts its next round.
    pub async fn next_round_start(&self) -> Result<std::time::SystemTime, EngineError> {
        let loaded = self.engine.loaded().await?;
        loaded
            .wallet
            .next_round_start_time()
            .await
            .map_err(|e| EngineError::Unreachable {
                what: "the Ark server",
                reason: format!("{e:#}"),
            })
    }

    /// Sign with the key behind one of the wallet's Ark addresses; `None` if the
    /// address is not the wallet's.
    pub async fn sign_message(
        &self,
        message: &[u8],
        address: &ark::Address,
    ) -> Result<Option<bitcoin::secp256k1::schnorr::Signature>, EngineError> {
        let loaded = self.engine.loaded().await?;
        loaded
            .wallet
            .sign_message(message, address)
            .await
            .map_err(EngineError::internal("signing a message"))
    }

    /// Fetch what the server's mailbox holds for the wallet (incoming payments);
    /// the checkpoint consumed up to.
    pub async fn sync_mailbox(&self) -> Result<u64, EngineError> {
        let loaded = self.engine.loaded().await?;
        loaded
            .wallet
            .sync_mailbox()
            .await
            .map_err(|e| EngineError::Unreachable {
                what: "the Ark server",
                reason: format!("{e:#}"),
            })?;
        loaded
            .wallet
            .get_mailbox_checkpoint()
            .await
            .map_err(EngineError::internal("reading the mailbox checkpoint"))
    }

    /// Merge `patch` (RFC 7396) into a movement's metadata; `false` if there is no
    /// such movement.
    pub async fn patch_movement_metadata(
        &self,
        id: u32,
        patch: &serde_json::Value,
    ) -> Result<bool, EngineError> {
        let loaded = self.engine.loaded().await?;
        match BarkPersister::get_movement_by_id(&self.engine.store, bark::movement::MovementId(id))
            .await
        {
            Ok(_) => {}
            Err(e) if matches!(e.downcast_ref(), Some(StoreError::NotFound(_))) => {
                return Ok(false);
            }
            Err(e) => return Err(EngineError::internal("reading a movement")(e)),
        }
        loaded
            .wallet
            .update_history_metadata(bark::movement::MovementId(id), patch)
            .await
            .map_err(EngineError::internal("updating a movement's metadata"))?;
        Ok(true)
    }

    /// A BIP-321 `bitcoin:` URI to be paid on: always a new Ark address; a BOLT11
    /// invoice when an amount is asked (the Ark server's Lightning service makes it);
    /// a new on-chain address when `onchain`.
    pub async fn bip321_uri(
        &self,
        amount: Option<bitcoin::Amount>,
        label: Option<String>,
        message: Option<String>,
        onchain: bool,
    ) -> Result<bark::payment_request::BarkBip321Uri, EngineError> {
        let loaded = self.engine.loaded().await?;
        // The builder borrows the wallet mutably; bark's wallet is a shared handle.
        let mut wallet = loaded.wallet.clone();
        let mut builder = wallet.bip321_uri().onchain(false);
        if let Some(amount) = amount {
            builder = builder.amount(amount);
        }
        if let Some(label) = label {
            builder = builder.label(label);
        }
        if let Some(message) = message {
            builder = builder.message(message);
        }
        let mut uri = builder.build().await.map_err(|e| match amount {
            Some(_) => EngineError::Unreachable {
                what: "the Ark server's Lightning service",
                reason: format!("{e:#}"),
            },
            None => EngineError::internal("building a payment URI")(e),
        })?;
        if onchain {
            let address = self.engine.onchain().next_address().await?;
            // BIP-321 puts mainnet addresses in the URI's body, others in `tb=`.
            let added = if loaded.wallet.chain().network() == bitcoin::Network::Bitcoin {
                uri.set_address(address.into_unchecked())
            } else {
                uri.push_tb(address.into_unchecked(), false)
            };
            added.map_err(|e| EngineError::Internal {
                context: "adding the on-chain address to the URI",
                source: anyhow::anyhow!("{e}"),
            })?;
        }
        Ok(uri)
    }
}

//! Incoming arkoor payments a kill or a power cut cut in half.
//!
//! bark 0.8 takes an arkoor package from the mailbox in three writes: the package's
//! VTXOs (spendable), a new pending `bark.arkoor` movement of kind `receive`, and then
//! that movement's amounts and VTXOs with status successful; the mailbox checkpoint
//! advances after all three. A cut after the first leaves the money spendable but the
//! payment out of the history: no movement, or an empty one pending for ever. The
//! server then delivers the package again, and bark skips it because it holds its VTXOs
//! already (bark marks the gap with a TODO), so the history never catches up.
//!
//! At every wallet load, before the mailbox is followed, berth looks for spendable
//! VTXOs no movement produced (`Store::spendable_vtxos_no_movement_produced`: the
//! newest movements, usually) and for empty pending receives. When there are some, it
//! reads the mailbox for the arkoor packages holding those VTXOs, and records each
//! payment as bark would have: an empty receive is finished with its package, and a
//! package bark has not processed (after the stored mailbox checkpoint) whose VTXOs
//! have no movement at all gets its receive movement now. No other task runs then, so
//! nothing else can be half-way through a receive.
//!
//! VTXOs seed recovery restores have no movement either: their packages come before
//! the checkpoint once bark has read the mailbox, and before that (checkpoint 0 in a
//! wallet imported from its phrase) none is recorded. They are left as bark leaves them
//! (`docs/reliability.md`). Until they are refreshed, each load reads the mailbox from
//! the checkpoint for a moment (`MAILBOX_IDLE`), as for imported VTXOs (`import-vtxo`:
//! bark makes no movement for them).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use anyhow::Context as _;
use ark::{ProtocolEncoding as _, Vtxo, VtxoId};
use bark::movement::update::MovementUpdate;
use bark::movement::{Movement, MovementDestination, MovementStatus};
use bark::persist::BarkPersister as _;
use bark::subsystem::Subsystem;
use bitcoin::Amount;
use futures_util::StreamExt as _;
use server_rpc::protos::mailbox_server::mailbox_message::Message;

use super::Engine;

/// bark's kind for a movement that received an arkoor package.
const RECEIVE_KIND: &str = "receive";
/// The mailbox is read from its start only while it answers: a pause this long means
/// every stored message has come (the stream then waits for new ones).
const MAILBOX_IDLE: Duration = Duration::from_secs(3);
/// A bound on the whole read, so a slow server cannot hold the wallet's load.
const MAILBOX_DEADLINE: Duration = Duration::from_secs(60);
/// A bound on the messages read: a wallet's mailbox holds one per incoming payment.
const MAILBOX_MAX_MESSAGES: usize = 100_000;

/// One arkoor package whose VTXOs are in the wallet and in no movement.
struct UnrecordedPackage {
    vtxos: Vec<Vtxo<ark::vtxo::Full>>,
    checkpoint: u64,
}

impl Engine {
    /// Records the incoming arkoor payments a kill left pending and empty (see the
    /// module's comment). Failures are logged: the wallet loads either way, and the
    /// next load tries again.
    ///
    /// `pending`: the wallet's pending movements of this and other subsystems (one scan
    /// of the history serves every repair at load).
    pub(super) async fn repair_interrupted_arkoor_receives(
        &self,
        wallet: &bark::Wallet,
        pending: &[Movement],
    ) {
        if let Err(e) = self.try_repair_arkoor_receives(wallet, pending).await {
            tracing::error!(error = %format!("{e:#}"),
                "cannot finish the incoming arkoor payments a crash left pending; \
                 the next load tries again");
        }
    }

    async fn try_repair_arkoor_receives(
        &self,
        wallet: &bark::Wallet,
        pending: &[Movement],
    ) -> anyhow::Result<()> {
        let empty_receives: Vec<&Movement> = pending
            .iter()
            .filter(|m| {
                m.subsystem.name == Subsystem::ARKOOR.as_name()
                    && m.subsystem.kind == RECEIVE_KIND
                    && m.output_vtxos.is_empty()
            })
            .collect();
        let unrecorded: HashSet<VtxoId> = self
            .store
            .spendable_vtxos_no_movement_produced()
            .await
            .context("listing the spendable vtxos no movement produced")?
            .into_iter()
            .collect();
        if empty_receives.is_empty() && unrecorded.is_empty() {
            return Ok(());
        }
        let checkpoint = self
            .store
            .get_mailbox_checkpoint()
            .await
            .context("reading the mailbox checkpoint")?;
        // A wallet restored from its phrase whose mailbox bark has not read yet: seed
        // recovery stored the VTXOs of its past payments with no movement, and their
        // packages are all after checkpoint 0. bark skips them, and so does this.
        let restored_unread = checkpoint == 0
            && self
                .store
                .wallet_record()
                .await
                .context("reading the wallet's record")?
                .is_some_and(|w| w.imported);
        if empty_receives.is_empty() && restored_unread {
            return Ok(());
        }
        tracing::info!(
            empty_receives = empty_receives.len(),
            candidates = unrecorded.len(),
            checkpoint,
            "spendable vtxos with no movement or empty incoming payments: reading the mailbox for them"
        );
        // An empty receive's package may have been skipped by bark since (a load whose
        // repair failed): those are read from the mailbox's start.
        let from = if empty_receives.is_empty() {
            checkpoint
        } else {
            0
        };
        let (mut packages, all_found) = if unrecorded.is_empty() {
            (Vec::new(), true)
        } else {
            unrecorded_packages(wallet, &unrecorded, from).await?
        };
        // The cuts that left empty receives were the latest: the newest packages are
        // theirs.
        let taken = packages.len().saturating_sub(empty_receives.len());
        let for_empty = packages.split_off(taken);
        let mut empty_receives = empty_receives.into_iter();
        // Packages first: `zip` takes from its first side before it finds the second empty.
        for (package, movement) in for_empty.into_iter().zip(empty_receives.by_ref()) {
            let ids: Vec<VtxoId> = package.vtxos.iter().map(|v| v.id()).collect();
            let update = receive_update(wallet, &package.vtxos).await?;
            wallet
                .movements_mgr()
                .finish_movement_with_update(movement.id, MovementStatus::Successful, update)
                .await
                .context("finishing an incoming arkoor payment's movement")?;
            tracing::warn!(
                movement_id = movement.id.0,
                checkpoint = package.checkpoint,
                vtxos = ?ids,
                "an incoming arkoor payment a crash left pending and empty: recorded"
            );
        }
        // The other packages bark has not processed yet: cut before their movement was
        // created. (Older ones are VTXOs seed recovery restored: left as they are.)
        for package in packages
            .iter()
            .filter(|p| p.checkpoint > checkpoint && !restored_unread)
        {
            let ids: Vec<VtxoId> = package.vtxos.iter().map(|v| v.id()).collect();
            let update = receive_update(wallet, &package.vtxos).await?;
            let id = wallet
                .movements_mgr()
                .new_finished_movement(
                    Subsystem::ARKOOR,
                    RECEIVE_KIND,
                    MovementStatus::Successful,
                    update,
                )
                .await
                .context("recording an incoming arkoor payment")?;
            tracing::warn!(
                movement_id = id.0,
                checkpoint = package.checkpoint,
                vtxos = ?ids,
                "an incoming arkoor payment a crash left with no movement: recorded"
            );
        }
        if !all_found {
            // Their packages may come in a later read: the rest stays for the next load.
            return Ok(());
        }
        // Every candidate is accounted for and a receive is still empty: bark writes a
        // package's VTXOs before its movement, so nothing stands behind this one.
        for movement in empty_receives {
            wallet
                .movements_mgr()
                .finish_movement(movement.id, MovementStatus::Failed)
                .await
                .context("failing an empty incoming arkoor movement")?;
            tracing::warn!(
                movement_id = movement.id.0,
                "an empty incoming arkoor movement with no payment behind it: marked failed"
            );
        }
        Ok(())
    }
}

/// The arkoor packages in the mailbox after checkpoint `from` that hold any of
/// `unrecorded`, oldest first, each with only those of its VTXOs, and whether every one
/// of `unrecorded` was found. The read stops once every one is found, when the mailbox
/// falls idle, or at the bounds above.
async fn unrecorded_packages(
    wallet: &bark::Wallet,
    unrecorded: &HashSet<VtxoId>,
    from: u64,
) -> anyhow::Result<(Vec<UnrecordedPackage>, bool)> {
    let mut missing = unrecorded.clone();
    let mut stream = wallet
        .subscribe_mailbox_messages(Some(from))
        .await
        .with_context(|| format!("reading the server mailbox from checkpoint {from}"))?;
    let deadline = tokio::time::Instant::now() + MAILBOX_DEADLINE;
    let mut packages = Vec::new();
    let mut read = 0usize;
    while !missing.is_empty() && read < MAILBOX_MAX_MESSAGES {
        let wait =
            MAILBOX_IDLE.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        let message = match tokio::time::timeout(wait, stream.next()).await {
            Err(_) | Ok(None) => break, // idle, or the stream ended
            Ok(Some(message)) => message.context("reading the server mailbox")?,
        };
        read += 1;
        let Some(Message::Arkoor(package)) = message.message else {
            continue;
        };
        let vtxos: Vec<_> = package
            .vtxos
            .iter()
            .filter_map(|bytes| Vtxo::<ark::vtxo::Full>::deserialize(bytes).ok())
            .filter(|vtxo| missing.remove(&vtxo.id()))
            .collect();
        if !vtxos.is_empty() {
            packages.push(UnrecordedPackage {
                vtxos,
                checkpoint: message.checkpoint,
            });
        }
    }
    if !missing.is_empty() {
        // Not an arkoor receive, or not found in time: left as it is.
        tracing::info!(
            vtxos = ?missing,
            messages_read = read,
            "vtxos no movement produced that no arkoor package in the mailbox holds"
        );
    }
    Ok((packages, missing.is_empty()))
}

/// The update bark gives a received package's movement: the VTXOs it produced, their
/// sum, and the wallet's addresses they came to.
async fn receive_update(
    wallet: &bark::Wallet,
    vtxos: &[Vtxo<ark::vtxo::Full>],
) -> anyhow::Result<MovementUpdate> {
    let total: Amount = vtxos.iter().map(|v| v.amount()).sum();
    let mut by_address = HashMap::<ark::Address, Amount>::new();
    for vtxo in vtxos {
        let key = wallet
            .pubkey_keypair(&vtxo.user_pubkey())
            .await
            .context("finding the key a received vtxo pays")?;
        if let Some((index, _)) = key {
            let address = wallet
                .peek_address(index)
                .await
                .context("deriving the address a received vtxo pays")?;
            *by_address.entry(address).or_default() += vtxo.amount();
        }
    }
    Ok(MovementUpdate::new()
        .produced_vtxos(vtxos.iter().map(|v| v.id()))
        .intended_and_effective_balance(total.to_signed().context("a received amount")?)
        .received_on(
            by_address
                .into_iter()
                .map(|(address, amount)| MovementDestination::ark(address, amount)),
        ))
}

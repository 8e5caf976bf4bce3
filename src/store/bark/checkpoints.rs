//! Checkpoints: the mailbox checkpoint (in `META`, never going backwards) and the wallet
//! action checkpoints, kept in the order each action was first stored.

use bark::actions::{WalletActionCheckpoint, WalletActionId};
use redb::ReadableTable;

use super::tables::{all_decoded, get_decoded, next_counter};
use crate::store::Store;
use crate::store::codec::Envelope;
use crate::store::error::{RedbResultExt, StoreError};
use crate::store::records::ActionCheckpointRow;
use crate::store::schema::*;

/// `BarkPersister::get_mailbox_checkpoint`.
pub(super) async fn mailbox(store: &Store) -> anyhow::Result<u64> {
    const CTX: &str = "reading the mailbox checkpoint";
    Ok(store
        .read(CTX, |tx| {
            let meta = tx.open_table(META).ctx(CTX)?;
            Ok(meta
                .get(meta_keys::MAILBOX_CHECKPOINT)
                .ctx(CTX)?
                .map(|v| v.value())
                .unwrap_or(0))
        })
        .await?)
}

/// `BarkPersister::store_mailbox_checkpoint`.
///
/// Refuses to go backwards (the trait's contract); storing the same value again is
/// an accepted no-op so a retried sync does not fail.
pub(super) async fn store_mailbox(store: &Store, checkpoint: u64) -> anyhow::Result<()> {
    const CTX: &str = "storing the mailbox checkpoint";
    store
        .write(CTX, move |tx| {
            let mut meta = tx.open_table(META).ctx(CTX)?;
            let current = meta
                .get(meta_keys::MAILBOX_CHECKPOINT)
                .ctx(CTX)?
                .map(|v| v.value())
                .unwrap_or(0);
            if checkpoint < current {
                return Err(StoreError::Rejected(format!(
                    "mailbox checkpoint {checkpoint} is behind the stored {current}"
                )));
            }
            meta.insert(meta_keys::MAILBOX_CHECKPOINT, checkpoint)
                .ctx(CTX)?;
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::upsert_wallet_action_checkpoint`.
pub(super) async fn upsert_action(
    store: &Store,
    id: &WalletActionId,
    checkpoint: &WalletActionCheckpoint,
) -> anyhow::Result<()> {
    const CTX: &str = "storing a wallet action checkpoint";
    let (id, checkpoint) = (id.clone(), checkpoint.clone());
    store
        .write(CTX, move |tx| {
            let existing_seq = {
                let table = tx.open_table(WALLET_ACTION_CHECKPOINTS).ctx(CTX)?;
                get_decoded(&table, id.as_str(), CTX)?.map(|row| row.created_seq)
            };
            let created_seq = match existing_seq {
                Some(seq) => seq,
                None => next_counter(tx, meta_keys::LAST_ACTION_SEQ, CTX)?,
            };
            let row = ActionCheckpointRow {
                created_seq,
                checkpoint,
            };
            let mut table = tx.open_table(WALLET_ACTION_CHECKPOINTS).ctx(CTX)?;
            table
                .insert(id.as_str(), Envelope::encode(&row)?)
                .ctx(CTX)?;
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::get_wallet_action_checkpoint`.
pub(super) async fn action(
    store: &Store,
    id: &WalletActionId,
) -> anyhow::Result<Option<WalletActionCheckpoint>> {
    const CTX: &str = "reading a wallet action checkpoint";
    let id = id.clone();
    let row = store
        .read(CTX, move |tx| {
            get_decoded(
                &tx.open_table(WALLET_ACTION_CHECKPOINTS).ctx(CTX)?,
                id.as_str(),
                CTX,
            )
        })
        .await?;
    Ok(row.map(|r| r.checkpoint))
}

/// `BarkPersister::get_all_wallet_action_checkpoints`.
///
/// Oldest first, by when each action was first checkpointed.
pub(super) async fn all_actions(store: &Store) -> anyhow::Result<Vec<WalletActionCheckpoint>> {
    const CTX: &str = "listing wallet action checkpoints";
    let mut rows = store
        .read(CTX, |tx| {
            all_decoded(&tx.open_table(WALLET_ACTION_CHECKPOINTS).ctx(CTX)?, CTX)
        })
        .await?;
    rows.sort_by_key(|r| r.created_seq);
    Ok(rows.into_iter().map(|r| r.checkpoint).collect())
}

/// `BarkPersister::remove_wallet_action_checkpoint`.
pub(super) async fn remove_action(store: &Store, id: &WalletActionId) -> anyhow::Result<()> {
    const CTX: &str = "removing a wallet action checkpoint";
    let id = id.clone();
    store
        .write(CTX, move |tx| {
            tx.open_table(WALLET_ACTION_CHECKPOINTS)
                .ctx(CTX)?
                .remove(id.as_str())
                .ctx(CTX)?;
            Ok(())
        })
        .await?;
    Ok(())
}

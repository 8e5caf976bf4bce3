//! The wallet as a whole: bark's wallet properties and the server's keys in them, the
//! on-chain (BDK) wallet's changeset, where a new wallet's first on-chain scan starts,
//! and deleting the wallet.

use bark::WalletProperties;
use bdk_wallet::ChangeSet;
use bdk_wallet::chain::Merge;
use bitcoin::secp256k1::PublicKey;
use redb::{ReadableTable, WriteTransaction};

use super::tables::get_decoded;
use crate::store::Store;
use crate::store::codec::Envelope;
use crate::store::error::{RedbResultExt, StoreError};
use crate::store::schema::*;

fn set_properties(
    tx: &WriteTransaction,
    ctx: &'static str,
    change: impl FnOnce(&mut WalletProperties),
) -> Result<(), StoreError> {
    let mut table = tx.open_table(PROPERTIES).ctx(ctx)?;
    let mut props = match table.get(()).ctx(ctx)? {
        Some(v) => v.value().decode()?,
        None => return Err(StoreError::Rejected("wallet not initialized".into())),
    };
    change(&mut props);
    table.insert((), Envelope::encode(&props)?).ctx(ctx)?;
    Ok(())
}

/// `BarkPersister::init_wallet`.
pub(super) async fn init(store: &Store, properties: &WalletProperties) -> anyhow::Result<()> {
    const CTX: &str = "initialising the wallet";
    let props = properties.clone();
    store
        .write(CTX, move |tx| {
            let mut table = tx.open_table(PROPERTIES).ctx(CTX)?;
            if table.get(()).ctx(CTX)?.is_some() {
                return Err(StoreError::Rejected("wallet is already initialized".into()));
            }
            table.insert((), Envelope::encode(&props)?).ctx(CTX)?;
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::initialize_bdk_wallet`.
pub(super) async fn bdk_changeset(store: &Store) -> anyhow::Result<ChangeSet> {
    const CTX: &str = "reading the on-chain wallet state";
    let changeset = store
        .read(CTX, |tx| {
            let table = tx.open_table(BDK_CHANGESET).ctx(CTX)?;
            get_decoded(&table, (), CTX)
        })
        .await?;
    Ok(changeset.unwrap_or_default())
}

/// `BarkPersister::store_bdk_wallet_changeset`.
pub(super) async fn merge_bdk_changeset(
    store: &Store,
    changeset: &ChangeSet,
) -> anyhow::Result<()> {
    const CTX: &str = "storing the on-chain wallet state";
    let changeset = changeset.clone();
    store
        .write(CTX, move |tx| {
            let mut table = tx.open_table(BDK_CHANGESET).ctx(CTX)?;
            let mut merged: ChangeSet = get_decoded(&table, (), CTX)?.unwrap_or_default();
            merged.merge(changeset);
            table.insert((), Envelope::encode(&merged)?).ctx(CTX)?;
            Ok(())
        })
        .await?;
    Ok(())
}

/// `BarkPersister::read_properties`.
pub(super) async fn properties(store: &Store) -> anyhow::Result<Option<WalletProperties>> {
    const CTX: &str = "reading wallet properties";
    Ok(store
        .read(CTX, |tx| {
            let table = tx.open_table(PROPERTIES).ctx(CTX)?;
            get_decoded(&table, (), CTX)
        })
        .await?)
}

/// `BarkPersister::set_server_pubkey`.
pub(super) async fn set_server_pubkey(
    store: &Store,
    server_pubkey: PublicKey,
) -> anyhow::Result<()> {
    const CTX: &str = "storing the server public key";
    store
        .write(CTX, move |tx| {
            set_properties(tx, CTX, |p| p.server_pubkey = Some(server_pubkey))
        })
        .await?;
    Ok(())
}

/// `BarkPersister::set_server_mailbox_pubkey`.
pub(super) async fn set_server_mailbox_pubkey(
    store: &Store,
    server_mailbox_pubkey: PublicKey,
) -> anyhow::Result<()> {
    const CTX: &str = "storing the server mailbox public key";
    store
        .write(CTX, move |tx| {
            set_properties(tx, CTX, |p| {
                p.server_mailbox_pubkey = Some(server_mailbox_pubkey)
            })
        })
        .await?;
    Ok(())
}

impl Store {
    /// Remove the wallet: every bark table emptied in one transaction, the mailbox
    /// checkpoint reset, its setup record and any first on-chain scan still to run
    /// removed, and the event log (which describes that wallet) cleared. Id counters are
    /// kept, so ids are never reused. Berth's other tables are untouched: idempotency
    /// keys, and paired devices with their tokens (access to the appliance, not wallet
    /// state).
    pub async fn wipe_wallet(&self) -> Result<(), StoreError> {
        const CTX: &str = "deleting the wallet";
        self.write(CTX, |tx| {
            clear_ark_state(tx, CTX)?;
            tx.delete_table(BDK_CHANGESET).ctx(CTX)?;
            tx.delete_table(WALLET_SETUP).ctx(CTX)?;
            tx.open_table(META)
                .ctx(CTX)?
                .remove(meta_keys::INITIAL_SCAN_FROM)
                .ctx(CTX)?;
            create_all(tx).ctx(CTX)?;
            crate::store::events::clear(tx, CTX)
        })
        .await
    }
}

/// Empty every table of bark's Ark wallet (its properties, VTXOs and keys, movements,
/// rounds, actions, Lightning records, exits) and reset the mailbox checkpoint and the
/// chain view, inside the caller's transaction. The on-chain (BDK) state is left alone.
pub(in crate::store) fn clear_ark_state(
    tx: &redb::WriteTransaction,
    ctx: &'static str,
) -> Result<(), StoreError> {
    tx.delete_table(PROPERTIES).ctx(ctx)?;
    tx.delete_table(VTXOS).ctx(ctx)?;
    tx.delete_table(VTXOS_FULL).ctx(ctx)?;
    tx.delete_table(VTXO_STATE_HISTORY).ctx(ctx)?;
    tx.delete_table(VTXOS_BY_STATE).ctx(ctx)?;
    tx.delete_table(VTXO_TOTALS).ctx(ctx)?;
    tx.delete_table(VTXO_KEYS).ctx(ctx)?;
    tx.delete_table(VTXO_KEYS_BY_INDEX).ctx(ctx)?;
    tx.delete_table(MOVEMENTS).ctx(ctx)?;
    tx.delete_table(MOVEMENTS_BY_PAYMENT_METHOD).ctx(ctx)?;
    tx.delete_table(MOVEMENTS_BY_ACTION).ctx(ctx)?;
    tx.delete_table(ROUND_STATES).ctx(ctx)?;
    tx.delete_table(WALLET_ACTION_CHECKPOINTS).ctx(ctx)?;
    tx.delete_table(PAID_INVOICES).ctx(ctx)?;
    tx.delete_table(SETTLED_LIGHTNING_RECEIVES).ctx(ctx)?;
    tx.delete_table(EXITS).ctx(ctx)?;
    tx.delete_table(EXIT_CHILD_TXS).ctx(ctx)?;
    let mut meta = tx.open_table(META).ctx(ctx)?;
    for name in [
        meta_keys::MAILBOX_CHECKPOINT,
        meta_keys::LAST_SEEN_TIP,
        meta_keys::MAX_VTXO_EXIT_DEPTH,
    ] {
        meta.remove(name).ctx(ctx)?;
    }
    drop(meta);
    create_all(tx).ctx(ctx)?;
    Ok(())
}

/// Where a new wallet's first on-chain scan starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitialScan {
    /// From the chain tip: a freshly generated seed has no history.
    FromTip,
    /// From this block height (an imported seed's birthday; 0 = genesis).
    FromHeight(u32),
}

impl InitialScan {
    /// Its value in [`meta_keys::INITIAL_SCAN_FROM`].
    pub(in crate::store) fn encode(self) -> u64 {
        match self {
            InitialScan::FromTip => u64::MAX,
            InitialScan::FromHeight(h) => u64::from(h),
        }
    }
}

impl Store {
    /// The first on-chain scan still to run, if any.
    pub async fn initial_scan(&self) -> Result<Option<InitialScan>, StoreError> {
        const CTX: &str = "reading the initial scan";
        self.read(CTX, |tx| {
            let meta = tx.open_table(META).ctx(CTX)?;
            let value = meta
                .get(meta_keys::INITIAL_SCAN_FROM)
                .ctx(CTX)?
                .map(|v| v.value());
            Ok(value.map(|v| match u32::try_from(v) {
                Ok(h) => InitialScan::FromHeight(h),
                Err(_) => InitialScan::FromTip,
            }))
        })
        .await
    }

    /// The first on-chain scan has run.
    pub async fn clear_initial_scan(&self) -> Result<(), StoreError> {
        const CTX: &str = "clearing the initial scan";
        self.write(CTX, |tx| {
            tx.open_table(META)
                .ctx(CTX)?
                .remove(meta_keys::INITIAL_SCAN_FROM)
                .ctx(CTX)?;
            Ok(())
        })
        .await
    }
}

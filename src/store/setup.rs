//! How the wallet came to be: Berth's own record beside bark's properties.
//!
//! bark writes its wallet properties when *it* creates the wallet, which berthd lets it
//! do inside `Wallet::open` with create-if-missing, because that is the call that runs
//! seed recovery (as barkd 0.8 does). Between `POST /api/v1/wallet/create` and that
//! open (the chain source may be down, and an import waits for its Ark server) the
//! wallet exists only here. The record also keeps what seed recovery found, for the
//! API and `/health`, and it marks an unfinished creation: a crash in the middle of
//! recovery leaves bark properties behind, and without this mark the next open would
//! treat the wallet as created and never recover (bark recovers only on the open that
//! creates). [`Store::restart_wallet_creation`] clears such a half-made wallet so the
//! next open creates it again.

use bitcoin::Network;
use bitcoin::bip32::Fingerprint;
use redb::ReadableTable;

use crate::store::Store;
use crate::store::bark::InitialScan;
use crate::store::codec::Envelope;
use crate::store::error::{RedbResultExt, StoreError};
use crate::store::records::{Recovery, WalletSetup};
use crate::store::schema::{META, PROPERTIES, WALLET_SETUP, meta_keys};

/// The wallet as Berth knows it, whether or not bark has created it yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalletRecord {
    pub network: Network,
    pub fingerprint: Fingerprint,
    /// Imported from a phrase (`false` for wallets made before schema version 4).
    pub imported: bool,
    /// bark has created and opened it: it opens without creating from now on.
    pub created: bool,
    /// How seed recovery went (`None` while unfinished, and for wallets made before
    /// schema version 4, whose recovery was never recorded).
    pub recovery: Option<Recovery>,
}

impl Store {
    /// The wallet, from its setup record, or from bark's properties for a wallet made
    /// before the record existed. `None`: no wallet.
    pub async fn wallet_record(&self) -> Result<Option<WalletRecord>, StoreError> {
        const CTX: &str = "reading the wallet";
        self.read(CTX, |tx| {
            let setup = tx.open_table(WALLET_SETUP).ctx(CTX)?;
            if let Some(row) = setup.get(()).ctx(CTX)? {
                let setup = row.value().decode()?;
                return Ok(Some(WalletRecord {
                    network: setup.network,
                    fingerprint: setup.fingerprint,
                    imported: setup.imported,
                    created: setup.recovery.is_some(),
                    recovery: setup.recovery,
                }));
            }
            let properties = tx.open_table(PROPERTIES).ctx(CTX)?;
            Ok(match properties.get(()).ctx(CTX)? {
                Some(row) => {
                    let p = row.value().decode()?;
                    Some(WalletRecord {
                        network: p.network,
                        fingerprint: p.fingerprint,
                        imported: false,
                        created: true,
                        recovery: None,
                    })
                }
                None => None,
            })
        })
        .await
    }

    /// Record a new wallet whose creation is about to start, and where its first
    /// on-chain scan begins, in one transaction. Refused when a wallet exists.
    pub async fn begin_wallet_creation(
        &self,
        network: Network,
        fingerprint: Fingerprint,
        imported: bool,
        scan: InitialScan,
    ) -> Result<(), StoreError> {
        const CTX: &str = "recording a new wallet";
        let setup = WalletSetup {
            network,
            fingerprint,
            imported,
            recovery: None,
        };
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(WALLET_SETUP).ctx(CTX)?;
            let exists = table.get(()).ctx(CTX)?.is_some()
                || tx
                    .open_table(PROPERTIES)
                    .ctx(CTX)?
                    .get(())
                    .ctx(CTX)?
                    .is_some();
            if exists {
                return Err(StoreError::Rejected("a wallet exists already".into()));
            }
            table.insert((), Envelope::encode(&setup)?).ctx(CTX)?;
            tx.open_table(META)
                .ctx(CTX)?
                .insert(meta_keys::INITIAL_SCAN_FROM, scan.encode())
                .ctx(CTX)?;
            Ok(())
        })
        .await
    }

    /// The creation is done: bark created and opened the wallet, and this is how its
    /// seed recovery went. Refused without an unfinished creation to finish.
    pub async fn finish_wallet_creation(&self, recovery: Recovery) -> Result<(), StoreError> {
        const CTX: &str = "recording the seed recovery";
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(WALLET_SETUP).ctx(CTX)?;
            let Some(mut setup) = table
                .get(())
                .ctx(CTX)?
                .map(|row| row.value().decode())
                .transpose()?
            else {
                return Err(StoreError::Rejected("no wallet is being created".into()));
            };
            if setup.recovery.is_some() {
                return Err(StoreError::Rejected("the wallet is created already".into()));
            }
            setup.recovery = Some(recovery);
            table.insert((), Envelope::encode(&setup)?).ctx(CTX)?;
            Ok(())
        })
        .await
    }

    /// Undo what an interrupted creation left of bark's wallet (its properties, and
    /// whatever recovery had stored) so that the next open creates it again and runs
    /// its seed recovery from the start. The on-chain wallet and its first scan are
    /// kept: they do not depend on the Ark side. Only for an unfinished creation.
    pub async fn restart_wallet_creation(&self) -> Result<(), StoreError> {
        const CTX: &str = "restarting an unfinished wallet creation";
        self.write(CTX, |tx| {
            let unfinished = tx
                .open_table(WALLET_SETUP)
                .ctx(CTX)?
                .get(())
                .ctx(CTX)?
                .map(|row| row.value().decode())
                .transpose()?
                .is_some_and(|setup| setup.recovery.is_none());
            if !unfinished {
                return Err(StoreError::Rejected(
                    "only an unfinished creation can be restarted".into(),
                ));
            }
            crate::store::bark::clear_ark_state(tx, CTX)
        })
        .await
    }
}

//! The engine: the one owner of the wallet. Handlers ask it; it asks the store and,
//! once wallets can be created and loaded (next step of the daemon issue), bark.

use bitcoin::bip32::Fingerprint;

use crate::store::{Store, StoreError};

/// What can go wrong below the API, for the API to translate.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("no wallet: create one with POST /api/v1/wallet/create")]
    NoWallet,
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub struct Engine {
    store: Store,
}

impl Engine {
    pub fn new(store: Store) -> Self {
        Engine { store }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The wallet's fingerprint, or `None` when no wallet exists.
    pub async fn wallet_fingerprint(&self) -> Result<Option<Fingerprint>, EngineError> {
        let props = bark::persist::BarkPersister::read_properties(&self.store)
            .await
            .map_err(|e| match e.downcast::<StoreError>() {
                Ok(store) => EngineError::Store(store),
                Err(other) => EngineError::Store(StoreError::Rejected(other.to_string())),
            })?;
        Ok(props.map(|p| p.fingerprint))
    }

    /// The wallet's fingerprint, or [`EngineError::NoWallet`].
    pub async fn require_wallet(&self) -> Result<Fingerprint, EngineError> {
        self.wallet_fingerprint()
            .await?
            .ok_or(EngineError::NoWallet)
    }
}

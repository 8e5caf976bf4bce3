//! The backup key: derived from the wallet's seed, so the phrase alone opens every
//! backup of the wallet and a backup file alone opens nothing.

use std::sync::Arc;

use hkdf::Hkdf;
use sha2::Sha256;
use zeroize::Zeroizing;

use super::BackupError;
use super::format::{KEY_CHECK_LEN, SALT_LEN};

/// The backup key as the engine holds it. Deriving it stretches the seed (BIP-39's
/// PBKDF2, milliseconds on a board), so a start does not wait for it: it is derived
/// beside the start, and what needs it waits for it ([`HeldKey::wait`]).
#[derive(Debug, Clone, Default)]
pub enum HeldKey {
    /// No wallet.
    #[default]
    None,
    /// Being derived for the wallet with this seed fingerprint.
    Deriving(bitcoin::bip32::Fingerprint),
    Ready(Arc<BackupKey>),
}

impl HeldKey {
    /// Hold `key`, derived for the wallet `fingerprint`, unless that wallet was deleted
    /// (or replaced) while it was derived. Whether it was held.
    pub fn finish(
        held: &tokio::sync::watch::Sender<HeldKey>,
        fingerprint: bitcoin::bip32::Fingerprint,
        key: Arc<BackupKey>,
    ) -> bool {
        held.send_if_modified(|now| match now {
            HeldKey::Deriving(f) if *f == fingerprint => {
                *now = HeldKey::Ready(key);
                true
            }
            _ => false,
        })
    }

    /// The key, once derived; `None` without a wallet.
    pub async fn wait(key: &mut tokio::sync::watch::Receiver<HeldKey>) -> Option<Arc<BackupKey>> {
        let held = key
            .wait_for(|held| !matches!(held, HeldKey::Deriving(_)))
            .await
            .map(|held| held.clone())
            .unwrap_or_default();
        match held {
            HeldKey::Ready(key) => Some(key),
            HeldKey::None | HeldKey::Deriving(_) => None,
        }
    }
}

/// The wallet's backup key: HKDF-SHA256 over the BIP-39 seed, domain-separated from
/// every other use of it. Each file gets its own key from this and its salt.
pub struct BackupKey {
    prk: Zeroizing<[u8; 32]>,
    /// The seed's BIP-32 fingerprint: a restored wallet must carry the same.
    fingerprint: String,
}

impl std::fmt::Debug for BackupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupKey")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

const KDF_SALT: &[u8] = b"berth backup v1";

impl BackupKey {
    pub fn from_mnemonic(mnemonic: &bip39::Mnemonic) -> BackupKey {
        let seed = Zeroizing::new(mnemonic.to_seed(""));
        let (prk, _) = Hkdf::<Sha256>::extract(Some(KDF_SALT), seed.as_ref());
        let mut bytes = Zeroizing::new([0u8; 32]);
        bytes.copy_from_slice(&prk);
        // The fingerprint of the BIP-32 master key does not depend on the network. From
        // the seed above: deriving it again from the mnemonic would cost as much again.
        let fingerprint = bark::WalletSeed::new_from_seed(bitcoin::Network::Bitcoin, &seed)
            .fingerprint()
            .to_string();
        BackupKey {
            prk: bytes,
            fingerprint,
        }
    }

    pub fn from_phrase(phrase: &str) -> Result<BackupKey, BackupError> {
        let mnemonic = bip39::Mnemonic::parse(phrase.trim()).map_err(|_| {
            BackupError::Invalid("the recovery phrase is not a valid BIP-39 mnemonic".into())
        })?;
        Ok(BackupKey::from_mnemonic(&mnemonic))
    }

    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    fn expand<const N: usize>(&self, label: &[u8], salt: &[u8; SALT_LEN]) -> Zeroizing<[u8; N]> {
        let hkdf = Hkdf::<Sha256>::from_prk(self.prk.as_ref()).expect("32-byte PRK");
        let mut out = Zeroizing::new([0u8; N]);
        hkdf.expand_multi_info(&[label, salt], out.as_mut())
            .expect("N is at most 255 * 32");
        out
    }

    pub(super) fn file_key(&self, salt: &[u8; SALT_LEN]) -> Zeroizing<[u8; 32]> {
        self.expand(b"berth backup v1: file key", salt)
    }

    pub(super) fn key_check(&self, salt: &[u8; SALT_LEN]) -> [u8; KEY_CHECK_LEN] {
        *self.expand::<KEY_CHECK_LEN>(b"berth backup v1: key check", salt)
    }
}

//! Key sources: where the 32-byte key that seals the seed comes from.
//!
//! Each source turns the envelope's salt (and, for a passphrase, its Argon2id
//! parameters) into a 32-byte key; [`Combined`] needs all of its parts and mixes their
//! keys with HKDF, so a copied SD card without the secure element (or without the
//! systemd credential, or the passphrase) opens nothing.

use std::path::PathBuf;

use argon2::{Algorithm, Argon2, Params, Version};
use embedded_hal::delay::DelayNs;
use embedded_hal::i2c::I2c;
use hkdf::Hkdf;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

use super::KeyError;
use super::atecc608::Atecc608;
use super::envelope::{Kdf, SALT_LEN, Sources};

/// A 32-byte key, wiped when dropped.
pub type Key = Zeroizing<[u8; 32]>;

/// Yields the key that seals (and opens) a seed envelope.
pub trait KeySource: Send {
    /// Which sources this is (several for [`Combined`]).
    fn sources(&self) -> Sources;

    /// What this source is bound to, recorded in the envelope and checked before
    /// opening: the secure element's serial number; empty for the others.
    fn binding(&mut self) -> Result<Vec<u8>, KeyError> {
        Ok(Vec::new())
    }

    /// The key for an envelope with this `salt` and `kdf`.
    fn key(&mut self, salt: &[u8; SALT_LEN], kdf: &Kdf) -> Result<Key, KeyError>;
}

/// A passphrase, stretched with Argon2id (its costs are the envelope's).
pub struct Passphrase(Zeroizing<String>);

impl Passphrase {
    pub fn new(passphrase: Zeroizing<String>) -> Result<Passphrase, KeyError> {
        if passphrase.is_empty() {
            return Err(KeyError::Source("the seed passphrase is empty".into()));
        }
        Ok(Passphrase(passphrase))
    }
}

impl std::fmt::Debug for Passphrase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Passphrase(<redacted>)")
    }
}

impl KeySource for Passphrase {
    fn sources(&self) -> Sources {
        Sources::PASSPHRASE
    }

    fn key(&mut self, salt: &[u8; SALT_LEN], kdf: &Kdf) -> Result<Key, KeyError> {
        let Kdf::Argon2id(p) = kdf else {
            return Err(KeyError::Malformed("a passphrase needs Argon2id".into()));
        };
        let params = Params::new(p.memory_kib, p.iterations, p.parallelism, Some(32))
            .map_err(|e| KeyError::Malformed(format!("Argon2id parameters: {e}")))?;
        let mut key = Zeroizing::new([0u8; 32]);
        Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
            .hash_password_into(self.0.as_bytes(), salt, key.as_mut())
            .map_err(|e| KeyError::Malformed(format!("Argon2id: {e}")))?;
        Ok(key)
    }
}

/// A credential file: systemd's `LoadCredentialEncrypted=` decrypts it (with the
/// host's TPM or `/var/lib/systemd/credential.secret`) into `$CREDENTIALS_DIRECTORY`
/// for the service only. Its bytes are stretched by HKDF, so they must already be
/// random: at least 32 of them.
#[derive(Debug)]
pub struct CredentialFile {
    path: PathBuf,
}

/// Fewer random bytes than this cannot make a 256-bit key.
pub const MIN_CREDENTIAL_LEN: usize = 32;

impl CredentialFile {
    pub fn new(path: PathBuf) -> CredentialFile {
        CredentialFile { path }
    }
}

impl KeySource for CredentialFile {
    fn sources(&self) -> Sources {
        Sources::CREDENTIAL
    }

    fn key(&mut self, salt: &[u8; SALT_LEN], _kdf: &Kdf) -> Result<Key, KeyError> {
        let secret = Zeroizing::new(std::fs::read(&self.path).map_err(|e| {
            KeyError::Source(format!(
                "cannot read the seed credential {}: {e} (on the appliance systemd decrypts \
                 it from /etc/credstore.encrypted/berth-seed with the machine's key; if the \
                 system partition was re-flashed both are gone: docs/seed.md, \"When the key \
                 is gone\")",
                self.path.display()
            ))
        })?);
        if secret.len() < MIN_CREDENTIAL_LEN {
            return Err(KeyError::Source(format!(
                "the seed credential {} holds {} bytes; it needs at least {MIN_CREDENTIAL_LEN} random bytes",
                self.path.display(),
                secret.len()
            )));
        }
        expand(salt, &secret, b"berth seed key v1: credential")
    }
}

/// An ATECC608 secure element: the key is the chip's MAC over a challenge made from
/// the salt, with a secret that never leaves the chip (see `atecc608`). The binding
/// is the chip's serial number.
pub struct SecureElement<I2C, D> {
    chip: Atecc608<I2C, D>,
    slot: u8,
}

impl<I2C, D> SecureElement<I2C, D> {
    pub fn new(chip: Atecc608<I2C, D>, slot: u8) -> Self {
        SecureElement { chip, slot }
    }
}

impl<I2C, D> std::fmt::Debug for SecureElement<I2C, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureElement")
            .field("chip", &self.chip)
            .field("slot", &self.slot)
            .finish()
    }
}

impl<I2C: I2c + Send, D: DelayNs + Send> KeySource for SecureElement<I2C, D> {
    fn sources(&self) -> Sources {
        Sources::SECURE_ELEMENT
    }

    fn binding(&mut self) -> Result<Vec<u8>, KeyError> {
        Ok(self.chip.serial_number()?.to_vec())
    }

    fn key(&mut self, salt: &[u8; SALT_LEN], _kdf: &Kdf) -> Result<Key, KeyError> {
        let mut challenge = [0u8; 32];
        challenge.copy_from_slice(
            &Sha256::new()
                .chain_update(b"berth seed key v1: secure element challenge")
                .chain_update(salt)
                .finalize(),
        );
        let response = self.chip.mac(self.slot, &challenge)?;
        // The chip's digest is already a uniform 32 bytes; HKDF only separates it
        // from any other use of the same slot.
        expand(
            salt,
            response.as_ref(),
            b"berth seed key v1: secure element",
        )
    }
}

/// Several sources, all needed: HKDF over their keys, in the order of their bits.
pub struct Combined {
    parts: Vec<Box<dyn KeySource>>,
}

impl Combined {
    /// At least two parts, each a different kind of source.
    pub fn new(mut parts: Vec<Box<dyn KeySource>>) -> Result<Combined, KeyError> {
        parts.sort_by_key(|p| p.sources().bits());
        let distinct = parts
            .windows(2)
            .all(|w| w[0].sources().bits() & w[1].sources().bits() == 0);
        if parts.len() < 2 || !distinct {
            return Err(KeyError::Source(
                "a combined key needs two or more different sources".into(),
            ));
        }
        Ok(Combined { parts })
    }
}

impl KeySource for Combined {
    fn sources(&self) -> Sources {
        self.parts
            .iter()
            .fold(self.parts[0].sources(), |all, p| all.union(p.sources()))
    }

    fn binding(&mut self) -> Result<Vec<u8>, KeyError> {
        let mut binding = Vec::new();
        for part in &mut self.parts {
            binding.extend(part.binding()?);
        }
        Ok(binding)
    }

    fn key(&mut self, salt: &[u8; SALT_LEN], kdf: &Kdf) -> Result<Key, KeyError> {
        let mut keys = Zeroizing::new(Vec::with_capacity(32 * self.parts.len()));
        for part in &mut self.parts {
            keys.extend_from_slice(part.key(salt, kdf)?.as_ref());
        }
        expand(salt, &keys, b"berth seed key v1: combined")
    }
}

/// HKDF-SHA256 of `secret`, salted by the envelope's salt, for one purpose.
fn expand(salt: &[u8; SALT_LEN], secret: &[u8], purpose: &[u8]) -> Result<Key, KeyError> {
    let mut key = Zeroizing::new([0u8; 32]);
    Hkdf::<Sha256>::new(Some(salt), secret)
        .expand(purpose, key.as_mut())
        .map_err(|_| KeyError::Malformed("HKDF output length".into()))?;
    Ok(key)
}

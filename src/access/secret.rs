//! How credentials are made, kept and shown: random secrets, their hashes, and a
//! wrapper whose `Debug` never prints them.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bitcoin::hashes::{Hash, sha256};

/// A secret handed to a client once (a pairing code or a device token): never logged.
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A new random secret, base64url: with `version`, barkd's token shape (that byte,
/// then 32 random bytes); without, a 16-byte code. `None` when no randomness is
/// available.
pub(crate) fn random_secret(version: Option<u8>) -> Option<Secret> {
    // Codes are 16 bytes; device tokens have barkd's token shape (a version byte, then
    // 32 random bytes), with version 1 where barkd's token has 0.
    let mut raw = [0u8; 33];
    let bytes = match version {
        Some(v) => {
            raw[0] = v;
            &mut raw[..]
        }
        None => &mut raw[..16],
    };
    let start = usize::from(version.is_some());
    getrandom::fill(&mut bytes[start..]).ok()?;
    Some(Secret(URL_SAFE_NO_PAD.encode(bytes)))
}

/// What is kept of a secret: its SHA-256. Every secret here has 128 random bits or
/// more, so a fast hash is enough — nothing can be brute-forced from it.
pub(crate) fn hash(secret: &str) -> [u8; 32] {
    sha256::Hash::hash(secret.as_bytes()).to_byte_array()
}

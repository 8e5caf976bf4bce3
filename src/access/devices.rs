//! Paired devices and their tokens.
//!
//! A device token has the shape of barkd's token (base64url of a version byte — 1
//! instead of barkd's 0 — and 32 random bytes) and is sent the same way. Each device is
//! listed and revoked on its own; the barkd-style `auth_token` stays the admin key.
//!
//! Device tokens are stored only as SHA-256 hashes (in redb by `store::tokens`, and in
//! memory for the per-request check); a token has 256 random bits, so a fast hash is
//! enough — nothing can be brute-forced from it. At most [`MAX_DEVICES`] are paired.

use std::collections::HashMap;
use std::sync::RwLock;

use crate::access::Credential;
use crate::access::scopes::Scopes;
use crate::access::secret::{Secret, hash, random_secret};
use crate::store::DeviceRecord;
use crate::store::{Store, StoreError};

/// Most paired devices.
pub const MAX_DEVICES: usize = 64;
/// Longest device name, in bytes.
pub const MAX_NAME_LEN: usize = 64;

/// A device name: 1 to 64 bytes of printable text.
pub fn check_device_name(name: &str) -> Result<String, &'static str> {
    let name = name.trim();
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err("the device name must be 1 to 64 bytes");
    }
    if name.chars().any(char::is_control) {
        return Err("the device name must not contain control characters");
    }
    Ok(name.to_string())
}

/// A paired device, as shown to its owner (no token, no hash).
#[derive(Debug, Clone)]
pub struct Device {
    pub id: String,
    pub name: String,
    pub scopes: Scopes,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// Who a device token belongs to.
#[derive(Debug, Clone)]
pub struct Authorized {
    pub device_id: String,
    pub scopes: Scopes,
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("{0}")]
    Invalid(&'static str),
    #[error("no randomness is available")]
    NoRandomness,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The paired devices: the store is the record, the map the per-request check.
pub struct Devices {
    store: Store,
    by_hash: RwLock<HashMap<[u8; 32], Authorized>>,
    /// Bumped at every revocation, so live streams can end theirs at once
    /// ([`Devices::revoked`]).
    revocations: tokio::sync::watch::Sender<u64>,
}

impl Devices {
    pub async fn load(store: Store) -> Result<Devices, StoreError> {
        let by_hash = store
            .devices()
            .await?
            .into_iter()
            .map(|d| {
                (
                    d.token_hash,
                    Authorized {
                        device_id: d.id,
                        scopes: Scopes::from_bits(d.scopes),
                    },
                )
            })
            .collect();
        Ok(Devices {
            store,
            by_hash: RwLock::new(by_hash),
            revocations: tokio::sync::watch::channel(0).0,
        })
    }

    /// Whether `credential` still works: the admin token always does, a device until it
    /// is revoked.
    pub fn holds(&self, credential: &Credential) -> bool {
        match credential {
            Credential::Admin => true,
            Credential::Device(id) => self
                .by_hash
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .any(|d| d.device_id == *id),
        }
    }

    /// Resolves once `credential` is revoked (at once if it already is; never for the
    /// admin token). A live stream races its work against this to end when its device
    /// is revoked, not when it next looks.
    pub async fn revoked(&self, credential: &Credential) {
        // Subscribed before looking, so a revocation between the two is not missed.
        let mut revocations = self.revocations.subscribe();
        while self.holds(credential) {
            if revocations.changed().await.is_err() {
                // The sender lives as long as `self`; without it nothing is revoked.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The device a presented token belongs to, if any.
    pub fn authenticate(&self, token: &str) -> Option<Authorized> {
        let by_hash = self.by_hash.read().unwrap_or_else(|e| e.into_inner());
        by_hash.get(&hash(token)).cloned()
    }

    /// Pair a new device: its token (shown once) and its record.
    pub async fn add(&self, name: &str, scopes: Scopes) -> Result<(Secret, Device), DeviceError> {
        let name = check_device_name(name).map_err(DeviceError::Invalid)?;
        let token = random_secret(Some(1)).ok_or(DeviceError::NoRandomness)?;
        let mut id = [0u8; 8];
        getrandom::fill(&mut id).map_err(|_| DeviceError::NoRandomness)?;
        let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let record = DeviceRecord {
            id: id.clone(),
            name,
            scopes: scopes.bits(),
            token_hash: hash(token.expose()),
            created_at_us: u64::try_from(chrono::Utc::now().timestamp_micros()).unwrap_or(0),
        };
        self.store.add_device(record.clone(), MAX_DEVICES).await?;
        self.by_hash
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                record.token_hash,
                Authorized {
                    device_id: id,
                    scopes,
                },
            );
        Ok((token, device_of(record)))
    }

    pub async fn list(&self) -> Result<Vec<Device>, StoreError> {
        Ok(self
            .store
            .devices()
            .await?
            .into_iter()
            .map(device_of)
            .collect())
    }

    /// Revoke a device: its token stops working at once. `false` if there is none.
    pub async fn revoke(&self, id: &str) -> Result<bool, StoreError> {
        let Some(removed) = self.store.remove_device(id).await? else {
            return Ok(false);
        };
        self.by_hash
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&removed.token_hash);
        self.revocations.send_modify(|n| *n = n.wrapping_add(1));
        Ok(true)
    }
}

fn device_of(record: DeviceRecord) -> Device {
    Device {
        id: record.id,
        name: record.name,
        scopes: Scopes::from_bits(record.scopes),
        created_at: i64::try_from(record.created_at_us)
            .ok()
            .and_then(chrono::DateTime::from_timestamp_micros)
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    #[test]
    fn device_tokens_have_barkd_token_shape_with_version_one() {
        let token = random_secret(Some(1)).expect("token");
        let raw = URL_SAFE_NO_PAD.decode(token.expose()).expect("base64url");
        assert_eq!(raw.len(), 33);
        assert_eq!(raw[0], 1);
        assert!(check_device_name("  Alice's phone ").is_ok());
        assert!(check_device_name("").is_err());
        assert!(check_device_name("a\nb").is_err());
        assert!(check_device_name(&"x".repeat(65)).is_err());
    }
}

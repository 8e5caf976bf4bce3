//! Pairing: how a phone on the LAN gets a token of its own.
//!
//! `berthd pair` (on the box itself, through the control socket) opens a pairing
//! window: a one-time code, shown as a QR code with the address and the CA pin. The
//! phone checks the pin, posts the code with its name to `POST /api/v1/pair` and gets a
//! device token carrying the scopes chosen when the window was opened. Each device is
//! listed and revoked on its own; the barkd-style `auth_token` stays the admin key.
//!
//! Codes (128 bits, single use, ten minutes) live only in memory, as hashes: a restart
//! closes every window. Device tokens are stored only as SHA-256 hashes (in redb, and
//! in memory for the per-request check); a token has 256 random bits, so a fast hash is
//! enough — nothing can be brute-forced from it.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bitcoin::hashes::{Hash, sha256};

use crate::store::DeviceRecord;
use crate::store::{Store, StoreError};

/// What a credential may do. A route needs exactly one scope (`api::scopes`);
/// `admin` includes every other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Balances, history, VTXOs, exits' status, fees, events.
    Read,
    /// New addresses and invoices.
    Receive,
    /// Anything that spends or moves funds: payments, boards, refreshes, offboards,
    /// exits, message signing.
    Send,
    /// Wallet creation and deletion, the mnemonic, devices.
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Receive, Scope::Send, Scope::Admin];

    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Receive => "receive",
            Scope::Send => "send",
            Scope::Admin => "admin",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Scope::Read => 1,
            Scope::Receive => 2,
            Scope::Send => 4,
            Scope::Admin => 8,
        }
    }
}

/// A set of scopes, stored as a bit set.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Scopes(u8);

impl Scopes {
    /// Nothing at all.
    pub const NONE: Scopes = Scopes(0);
    /// What the barkd-style `auth_token` (and `--no-auth`) grants.
    pub const FULL: Scopes = Scopes(15);
    /// What `berthd pair` grants unless told otherwise: a phone wallet reads, receives
    /// and pays, but cannot delete the wallet, read the mnemonic or manage devices.
    pub const PHONE_WALLET: Scopes = Scopes(1 | 2 | 4);

    pub fn bits(self) -> u8 {
        self.0
    }

    /// The scopes of stored bits; unknown bits (from a newer version) are dropped.
    pub fn from_bits(bits: u8) -> Scopes {
        Scopes(bits & Scopes::FULL.0)
    }

    /// Whether a holder of these scopes may use a route that needs `scope`.
    pub fn allows(self, scope: Scope) -> bool {
        self.0 & Scope::Admin.bit() != 0 || self.0 & scope.bit() != 0
    }

    /// Parse names such as `["read", "receive"]`; at least one, no unknown ones.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Scopes, String> {
        let mut bits = 0;
        for name in names {
            let name = name.as_ref().trim();
            let scope = Scope::ALL
                .into_iter()
                .find(|s| s.name() == name)
                .ok_or_else(|| {
                    format!("unknown scope {name:?} (expected read, receive, send or admin)")
                })?;
            bits |= scope.bit();
        }
        if bits == 0 {
            return Err("at least one scope is needed".into());
        }
        Ok(Scopes(bits))
    }

    pub fn names(self) -> Vec<&'static str> {
        Scope::ALL
            .into_iter()
            .filter(|s| self.0 & s.bit() != 0)
            .map(Scope::name)
            .collect()
    }
}

impl std::fmt::Debug for Scopes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.names().join(","))
    }
}

/// How long a pairing code is valid.
pub const CODE_TTL: Duration = Duration::from_secs(600);
/// Most pairing codes open at once.
pub const MAX_OPEN_CODES: usize = 16;
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

fn random_secret(version: Option<u8>) -> Option<Secret> {
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

fn hash(secret: &str) -> [u8; 32] {
    sha256::Hash::hash(secret.as_bytes()).to_byte_array()
}

/// What an open pairing code grants.
#[derive(Debug, Clone)]
pub struct Grant {
    pub scopes: Scopes,
    /// A name chosen by whoever opened the window; wins over the device's own.
    pub name: Option<String>,
}

struct OpenCode {
    hash: [u8; 32],
    grant: Grant,
    expires: Instant,
}

/// The open pairing codes.
#[derive(Default)]
pub struct PairingCodes {
    open: Mutex<Vec<OpenCode>>,
}

/// Why a code was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redeem {
    /// No window is open: pairing is not offered right now.
    Closed,
    /// A window is open but this is not one of its codes.
    WrongCode,
}

impl PairingCodes {
    /// Open a window: a new code valid for `CODE_TTL`, and its expiry.
    pub fn open(&self, grant: Grant) -> Result<(Secret, SystemTime), &'static str> {
        let code = random_secret(None).ok_or("no randomness is available")?;
        let now = Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|c| c.expires > now);
        if open.len() >= MAX_OPEN_CODES {
            return Err("too many pairing codes are open; use one or wait for them to expire");
        }
        open.push(OpenCode {
            hash: hash(code.expose()),
            grant,
            expires: now + CODE_TTL,
        });
        Ok((code, SystemTime::now() + CODE_TTL))
    }

    /// Whether any code is open.
    pub fn is_open(&self) -> bool {
        let now = Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|c| c.expires > now);
        !open.is_empty()
    }

    /// Spend `code`: its grant, once.
    pub fn redeem(&self, code: &str) -> Result<Grant, Redeem> {
        let now = Instant::now();
        let presented = hash(code.trim());
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|c| c.expires > now);
        if open.is_empty() {
            return Err(Redeem::Closed);
        }
        // Hashes of 128-bit random codes: comparing them leaks nothing useful.
        let at = open
            .iter()
            .position(|c| c.hash == presented)
            .ok_or(Redeem::WrongCode)?;
        Ok(open.swap_remove(at).grant)
    }
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
        })
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

    #[test]
    fn scopes_parse_print_and_admin_includes_all() {
        let s = Scopes::parse(&["read", " send"]).expect("parse");
        assert_eq!(s.names(), vec!["read", "send"]);
        assert!(s.allows(Scope::Read) && s.allows(Scope::Send));
        assert!(!s.allows(Scope::Receive) && !s.allows(Scope::Admin));
        let admin = Scopes::parse(&["admin"]).expect("admin");
        assert!(Scope::ALL.into_iter().all(|x| admin.allows(x)));
        assert!(Scopes::parse::<&str>(&[]).is_err());
        assert!(
            Scopes::parse(&["write"])
                .expect_err("unknown")
                .contains("write")
        );
        assert_eq!(Scopes::from_bits(0xff), Scopes::FULL);
        assert!(!Scopes::PHONE_WALLET.allows(Scope::Admin));
    }

    #[test]
    fn a_code_works_once_and_only_while_open() {
        let codes = PairingCodes::default();
        assert!(!codes.is_open());
        assert_eq!(codes.redeem("anything").err(), Some(Redeem::Closed));
        let grant = Grant {
            scopes: Scopes::PHONE_WALLET,
            name: None,
        };
        let (code, expires) = codes.open(grant).expect("open");
        assert_eq!(code.expose().len(), 22, "128 bits, base64url");
        assert!(expires > SystemTime::now() + CODE_TTL - Duration::from_secs(5));
        assert!(codes.is_open());
        assert_eq!(codes.redeem("wrong").err(), Some(Redeem::WrongCode));
        let granted = codes.redeem(code.expose()).expect("redeem");
        assert_eq!(granted.scopes, Scopes::PHONE_WALLET);
        assert_eq!(codes.redeem(code.expose()).err(), Some(Redeem::Closed));
        assert!(!format!("{code:?}").contains(code.expose()));
    }

    #[test]
    fn expired_codes_close_the_window_and_open_codes_are_bounded() {
        let codes = PairingCodes::default();
        for _ in 0..MAX_OPEN_CODES {
            codes
                .open(Grant {
                    scopes: Scopes::FULL,
                    name: None,
                })
                .expect("open");
        }
        assert!(
            codes
                .open(Grant {
                    scopes: Scopes::FULL,
                    name: None
                })
                .is_err()
        );
        // Age every code past its TTL.
        for c in codes.open.lock().expect("lock").iter_mut() {
            c.expires = Instant::now() - Duration::from_millis(1);
        }
        assert!(!codes.is_open());
    }

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

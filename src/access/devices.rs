//! Paired devices and their tokens.
//!
//! A device token has the shape of barkd's token (base64url of a version byte — 1
//! instead of barkd's 0 — and 32 random bytes) and is sent the same way. Each device is
//! listed and revoked on its own; the barkd-style `auth_token` stays the admin key.
//!
//! Device tokens are stored only as SHA-256 hashes (in redb by `store::tokens`, and in
//! memory for the per-request check); a token has 256 random bits, so a fast hash is
//! enough — nothing can be brute-forced from it. At most [`MAX_DEVICES`] are paired.
//!
//! A web console session is a device too (`console::session`), marked as one: it
//! expires after [`SessionPolicy::idle`] without use or [`SessionPolicy::max_age`] in
//! all, and is then removed like a revoked device, so a sign-in never leaves a
//! full-scope credential behind for good (nor fills the cap).

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

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

/// How long a console session lives (`berth.toml [console]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionPolicy {
    /// Without a request.
    pub idle: Duration,
    /// Since the sign-in, whatever its use.
    pub max_age: Duration,
}

impl Default for SessionPolicy {
    fn default() -> Self {
        SessionPolicy {
            idle: Duration::from_secs(7 * 24 * 3600),
            max_age: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

/// When a console session began and was last used. The last use is kept in memory
/// only: a restart gives every session a fresh idle period, never a longer life.
#[derive(Debug, Clone, Copy)]
struct SessionClock {
    began: SystemTime,
    last_used: Instant,
}

/// What a console session's token is.
#[derive(Debug, Clone)]
pub enum SessionCheck {
    /// A live session.
    Valid(Authorized),
    /// A session past its time: the caller removes the device.
    Expired(String),
    /// No session has this token (a phone's token is not a session's).
    Unknown,
}

/// The paired devices: the store is the record, the map the per-request check.
pub struct Devices {
    store: Store,
    by_hash: RwLock<HashMap<[u8; 32], Authorized>>,
    /// Bumped at every revocation, so live streams can end theirs at once
    /// ([`Devices::revoked`]).
    revocations: tokio::sync::watch::Sender<u64>,
    /// The console sessions among the devices, by device id.
    sessions: Mutex<HashMap<String, SessionClock>>,
    policy: SessionPolicy,
}

impl Devices {
    pub async fn load(store: Store, policy: SessionPolicy) -> Result<Devices, StoreError> {
        let records = store.devices().await?;
        let now = Instant::now();
        let sessions = records
            .iter()
            .filter(|d| d.console_session)
            .map(|d| {
                let clock = SessionClock {
                    began: began_at(d.created_at_us),
                    last_used: now,
                };
                (d.id.clone(), clock)
            })
            .collect();
        let by_hash = records
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
            sessions: Mutex::new(sessions),
            policy,
        })
    }

    pub fn session_policy(&self) -> SessionPolicy {
        self.policy
    }

    /// A console session's token, checked and its use recorded (`now`).
    pub fn check_session(&self, token: &str, now: Instant) -> SessionCheck {
        let Some(who) = self.authenticate(token) else {
            return SessionCheck::Unknown;
        };
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let Some(clock) = sessions.get_mut(&who.device_id) else {
            return SessionCheck::Unknown;
        };
        if self.expired(clock, now) {
            return SessionCheck::Expired(who.device_id);
        }
        clock.last_used = now;
        SessionCheck::Valid(who)
    }

    /// The console sessions past their time at `now`, to remove.
    pub fn expired_sessions(&self, now: Instant) -> Vec<String> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions
            .iter()
            .filter(|(_, clock)| self.expired(clock, now))
            .map(|(id, _)| id.clone())
            .collect()
    }

    fn expired(&self, clock: &SessionClock, now: Instant) -> bool {
        now.saturating_duration_since(clock.last_used) > self.policy.idle
            || SystemTime::now()
                .duration_since(clock.began)
                .is_ok_and(|age| age > self.policy.max_age)
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
        self.add_kind(name, scopes, false).await
    }

    /// Start a console session: a device that expires ([`SessionPolicy`]).
    pub async fn add_session(
        &self,
        name: &str,
        scopes: Scopes,
    ) -> Result<(Secret, Device), DeviceError> {
        self.add_kind(name, scopes, true).await
    }

    async fn add_kind(
        &self,
        name: &str,
        scopes: Scopes,
        console_session: bool,
    ) -> Result<(Secret, Device), DeviceError> {
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
            console_session,
        };
        self.store.add_device(record.clone(), MAX_DEVICES).await?;
        if console_session {
            self.sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(
                    record.id.clone(),
                    SessionClock {
                        began: began_at(record.created_at_us),
                        last_used: Instant::now(),
                    },
                );
        }
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
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        self.revocations.send_modify(|n| *n = n.wrapping_add(1));
        Ok(true)
    }
}

fn began_at(created_at_us: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_micros(created_at_us)
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

    #[tokio::test]
    async fn a_console_session_expires_when_idle_or_old_and_a_phone_token_is_no_session() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = Store::open_async(
            &dir.path().join("db.redb"),
            &crate::store::StoreConfig::default(),
        )
        .await
        .expect("open");
        let policy = SessionPolicy {
            idle: Duration::from_secs(60),
            max_age: Duration::from_secs(3600),
        };
        let devices = Devices::load(store.clone(), policy).await.expect("load");
        let (session, device) = devices
            .add_session("laptop", Scopes::FULL)
            .await
            .expect("session");
        let (phone, _) = devices.add("phone", Scopes::FULL).await.expect("phone");
        let t0 = Instant::now();
        assert!(matches!(
            devices.check_session(session.expose(), t0),
            SessionCheck::Valid(_)
        ));
        assert!(
            matches!(
                devices.check_session(phone.expose(), t0),
                SessionCheck::Unknown
            ),
            "a phone's token opens no console session"
        );
        // Used 50 s later: still live, and the idle period starts again.
        let t1 = t0 + Duration::from_secs(50);
        assert!(matches!(
            devices.check_session(session.expose(), t1),
            SessionCheck::Valid(_)
        ));
        assert!(
            devices
                .expired_sessions(t1 + Duration::from_secs(59))
                .is_empty()
        );
        let idle = t1 + Duration::from_secs(61);
        assert_eq!(devices.expired_sessions(idle), vec![device.id.clone()]);
        assert!(matches!(
            devices.check_session(session.expose(), idle),
            SessionCheck::Expired(id) if id == device.id
        ));
        // Removed: its token is nobody's; the phone stays.
        assert!(devices.revoke(&device.id).await.expect("revoke"));
        assert!(matches!(
            devices.check_session(session.expose(), t1),
            SessionCheck::Unknown
        ));
        assert!(devices.authenticate(phone.expose()).is_some());
        // A session kept across a restart keeps its age: one begun over an hour ago
        // (the record says so) is past its longest life whatever its use.
        let (old, _) = devices
            .add_session("old browser", Scopes::FULL)
            .await
            .expect("session");
        let mut records = store.devices().await.expect("records");
        let record = records
            .iter_mut()
            .find(|r| r.name == "old browser")
            .expect("record");
        record.created_at_us -= 2 * 3600 * 1_000_000;
        store.remove_device(&record.id).await.expect("remove");
        store
            .add_device(record.clone(), MAX_DEVICES)
            .await
            .expect("re-add");
        let reloaded = Devices::load(store, policy).await.expect("load");
        assert!(matches!(
            reloaded.check_session(old.expose(), Instant::now()),
            SessionCheck::Expired(_)
        ));
    }
}

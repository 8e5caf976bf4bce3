//! Idempotency keys: a fund-moving request sent twice with the same `Idempotency-Key`
//! moves funds once; the second gets the first one's answer. What the HTTP side does
//! with these records is `crate::api::idempotency`.
//!
//! A key is claimed (`in-flight`) in one transaction before the request runs, so two
//! concurrent requests with one key cannot both run. Records live 24 hours (the TTL
//! the caller passes) and at most [`MAX_KEYS`] are kept.

use redb::{ReadableTable, ReadableTableMetadata};

use crate::store::Store;
use crate::store::codec::Envelope;
use crate::store::error::{RedbResultExt, StoreError};
use crate::store::records::{IdempotencyEntry, IdempotencyState};
use crate::store::schema::{IDEMPOTENCY_KEYS, IDEMPOTENCY_KEYS_BY_TIME};

/// Most keys remembered; beyond it the oldest are forgotten first.
pub const MAX_KEYS: u64 = 10_000;

/// What claiming a key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key is new (or its record expired): the request may run.
    Claimed,
    /// The same request already succeeded: its answer.
    Replay { status: u16, body: Vec<u8> },
    /// The key was used for a different request.
    Mismatch,
    /// A request with this key is running now.
    InFlight,
    /// A request with this key was running when berthd stopped: its outcome is unknown.
    Interrupted,
}

/// The idempotency records alone: what the API's idempotency layer is handed (through
/// `Engine::idempotency_keys`), so it reaches nothing else of the store.
#[derive(Clone)]
pub struct IdempotencyKeys(Store);

impl IdempotencyKeys {
    pub fn new(store: Store) -> IdempotencyKeys {
        IdempotencyKeys(store)
    }

    /// [`Store::claim_idempotency_key`].
    pub async fn claim(
        &self,
        key: [u8; 32],
        request: [u8; 32],
        now_us: u64,
        ttl_us: u64,
    ) -> Result<Claim, StoreError> {
        self.0
            .claim_idempotency_key(key, request, now_us, ttl_us)
            .await
    }

    /// [`Store::finish_idempotency_key`].
    pub async fn finish(
        &self,
        key: [u8; 32],
        answer: Option<(u16, Vec<u8>)>,
    ) -> Result<(), StoreError> {
        self.0.finish_idempotency_key(key, answer).await
    }
}

impl Store {
    /// Claim `key` for `request` (both hashes) at `now_us`; records older than `ttl_us`
    /// do not count and are removed.
    pub async fn claim_idempotency_key(
        &self,
        key: [u8; 32],
        request: [u8; 32],
        now_us: u64,
        ttl_us: u64,
    ) -> Result<Claim, StoreError> {
        const CTX: &str = "claiming an idempotency key";
        self.write(CTX, move |tx| {
            let mut keys = tx.open_table(IDEMPOTENCY_KEYS).ctx(CTX)?;
            let mut by_time = tx.open_table(IDEMPOTENCY_KEYS_BY_TIME).ctx(CTX)?;
            // Forget the expired, and the oldest beyond the cap.
            let cutoff = now_us.saturating_sub(ttl_us);
            let mut len = keys.len().ctx(CTX)?;
            loop {
                let Some((at, old)) = by_time.first().ctx(CTX)?.map(|(k, _)| k.value()) else {
                    break;
                };
                if at >= cutoff && len < MAX_KEYS {
                    break;
                }
                by_time.remove((at, old)).ctx(CTX)?;
                if keys.remove(old).ctx(CTX)?.is_some() {
                    len -= 1;
                }
            }
            let existing = keys
                .get(key)
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?;
            if let Some(entry) = existing {
                if entry.request != request {
                    return Ok(Claim::Mismatch);
                }
                return Ok(match entry.state {
                    IdempotencyState::Done { status, body } => Claim::Replay { status, body },
                    IdempotencyState::InFlight => Claim::InFlight,
                    IdempotencyState::Interrupted => Claim::Interrupted,
                });
            }
            let entry = IdempotencyEntry {
                at_us: now_us,
                request,
                state: IdempotencyState::InFlight,
            };
            keys.insert(key, Envelope::encode(&entry)?).ctx(CTX)?;
            by_time.insert((now_us, key), ()).ctx(CTX)?;
            Ok(Claim::Claimed)
        })
        .await
    }

    /// The request with `key` finished: keep its answer (`Some`) for replays, or drop
    /// the claim (`None`) so the key may be used again.
    pub async fn finish_idempotency_key(
        &self,
        key: [u8; 32],
        answer: Option<(u16, Vec<u8>)>,
    ) -> Result<(), StoreError> {
        const CTX: &str = "recording an idempotent answer";
        self.write(CTX, move |tx| {
            let mut keys = tx.open_table(IDEMPOTENCY_KEYS).ctx(CTX)?;
            let Some(mut entry) = keys
                .get(key)
                .ctx(CTX)?
                .map(|v| v.value().decode())
                .transpose()?
            else {
                return Ok(());
            };
            match answer {
                Some((status, body)) => {
                    entry.state = IdempotencyState::Done { status, body };
                    keys.insert(key, Envelope::encode(&entry)?).ctx(CTX)?;
                }
                None => {
                    keys.remove(key).ctx(CTX)?;
                    tx.open_table(IDEMPOTENCY_KEYS_BY_TIME)
                        .ctx(CTX)?
                        .remove((entry.at_us, key))
                        .ctx(CTX)?;
                }
            }
            Ok(())
        })
        .await
    }

    /// At start: requests that were running when berthd stopped are marked
    /// interrupted (their outcome is unknown). Returns how many.
    pub async fn interrupt_idempotency_keys(&self) -> Result<usize, StoreError> {
        const CTX: &str = "marking interrupted idempotent requests";
        // After a clean stop nothing is in flight: look first, so a start does not
        // pay a write (an fsync) for nothing.
        let any_in_flight = self
            .read(CTX, |tx| {
                for entry in tx.open_table(IDEMPOTENCY_KEYS).ctx(CTX)?.iter().ctx(CTX)? {
                    if entry.ctx(CTX)?.1.value().decode()?.state == IdempotencyState::InFlight {
                        return Ok(true);
                    }
                }
                Ok(false)
            })
            .await?;
        if !any_in_flight {
            return Ok(0);
        }
        self.write(CTX, |tx| {
            let mut keys = tx.open_table(IDEMPOTENCY_KEYS).ctx(CTX)?;
            let mut running = Vec::new();
            for entry in keys.iter().ctx(CTX)? {
                let (key, value) = entry.ctx(CTX)?;
                let mut entry = value.value().decode()?;
                if entry.state == IdempotencyState::InFlight {
                    entry.state = IdempotencyState::Interrupted;
                    running.push((key.value(), entry));
                }
            }
            for (key, entry) in &running {
                keys.insert(*key, Envelope::encode(entry)?).ctx(CTX)?;
            }
            Ok(running.len())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreConfig;

    const HOUR: u64 = 3_600_000_000;

    #[tokio::test]
    async fn a_key_runs_once_replays_and_refuses_another_request() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = Store::open_async(&dir.path().join("db"), &StoreConfig::default())
            .await
            .expect("open");
        let (key, request, other) = ([1; 32], [2; 32], [3; 32]);
        let claim = |req, now| {
            let store = store.clone();
            async move {
                store
                    .claim_idempotency_key(key, req, now, 24 * HOUR)
                    .await
                    .expect("claim")
            }
        };
        assert_eq!(claim(request, HOUR).await, Claim::Claimed);
        assert_eq!(claim(request, HOUR).await, Claim::InFlight);
        store
            .finish_idempotency_key(key, Some((200, b"{}".to_vec())))
            .await
            .expect("finish");
        assert_eq!(
            claim(request, 2 * HOUR).await,
            Claim::Replay {
                status: 200,
                body: b"{}".to_vec()
            }
        );
        assert_eq!(claim(other, 2 * HOUR).await, Claim::Mismatch);
        // A day later the key is free again.
        assert_eq!(claim(other, 26 * HOUR).await, Claim::Claimed);
        assert_eq!(
            store.interrupt_idempotency_keys().await.expect("interrupt"),
            1
        );
        assert_eq!(claim(other, 26 * HOUR).await, Claim::Interrupted);
        // A failed request gives its key back.
        let (key2, req2) = ([9; 32], [8; 32]);
        store
            .claim_idempotency_key(key2, req2, HOUR, 24 * HOUR)
            .await
            .expect("claim");
        store
            .finish_idempotency_key(key2, None)
            .await
            .expect("drop");
        assert_eq!(
            store
                .claim_idempotency_key(key2, req2, HOUR, 24 * HOUR)
                .await
                .expect("claim"),
            Claim::Claimed
        );
    }
}

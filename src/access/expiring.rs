//! One bounded map whose entries expire: the shape of websocket tickets, pairing codes
//! and the auth-failure backoff.
//!
//! Each entry carries a stamp; it is live while less than the TTL has passed since its
//! stamp, and an expired entry is as good as absent to every read. The three users
//! differ, and each difference is a parameter ([`Policy`]) rather than a compromise:
//!
//! | user | key | TTL counts from | when full (a new key, after dropping expired ones) |
//! |---|---|---|---|
//! | tickets | SHA-256 of the ticket | its issue ([`Expiry::FromInsert`]) | the oldest goes ([`WhenFull::EvictOldest`]); sized so that it never happens while each credential keeps to its own cap |
//! | pairing codes | SHA-256 of the code | its opening ([`Expiry::FromInsert`]) | refused ([`WhenFull::Refuse`]) |
//! | backoff | the address, and an IPv6 address's /64 | the last failure ([`Expiry::FromLastWrite`]) | the oldest goes ([`WhenFull::EvictOldest`]) |
//!
//! Room is made only for a new key and only when the map holds `capacity` entries:
//! expired entries are dropped first, then, if it is still full, the entry with the
//! oldest stamp is evicted, or the insertion refused. Otherwise expired entries stay
//! until then, or until they are taken or removed; they are never visible.
//!
//! Time is always passed in (`now`), so tests move the clock instead of sleeping. The
//! map does no locking and no hashing: its users hold it in a `Mutex` and decide what
//! a key is (secrets are hashed before they become keys).

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// From when an entry's TTL counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// From its insertion: writing to it again does not make it live longer.
    FromInsert,
    /// From its last write ([`ExpiringMap::insert`], [`ExpiringMap::upsert`]): an
    /// entry expires after being left alone for the TTL. Reads do not count.
    FromLastWrite,
}

/// What a new key gets when the map is full of live entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenFull {
    /// The entry with the oldest stamp makes room.
    EvictOldest,
    /// The insertion is refused ([`Full`]); every entry stays.
    Refuse,
}

/// How a map bounds and expires its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// How long an entry stays live after its stamp.
    pub ttl: Duration,
    /// Most entries held, live or expired.
    pub capacity: usize,
    pub expiry: Expiry,
    pub when_full: WhenFull,
}

/// The map was full of live entries and its policy is [`WhenFull::Refuse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

#[derive(Debug)]
struct Entry<V> {
    value: V,
    stamp: Instant,
}

/// A map with a TTL per entry and a bound on its size (module documentation).
#[derive(Debug)]
pub struct ExpiringMap<K, V> {
    policy: Policy,
    entries: HashMap<K, Entry<V>>,
}

impl<K: Eq + Hash + Clone, V> ExpiringMap<K, V> {
    pub fn new(policy: Policy) -> Self {
        ExpiringMap {
            policy,
            entries: HashMap::new(),
        }
    }

    fn is_live(&self, entry: &Entry<V>, now: Instant) -> bool {
        now.saturating_duration_since(entry.stamp) < self.policy.ttl
    }

    /// Drop every expired entry.
    pub fn sweep(&mut self, now: Instant) {
        let ttl = self.policy.ttl;
        self.entries
            .retain(|_, e| now.saturating_duration_since(e.stamp) < ttl);
    }

    /// Make room for one new key, as the policy says.
    fn make_room(&mut self, now: Instant) -> Result<(), Full> {
        if self.entries.len() < self.policy.capacity {
            return Ok(());
        }
        self.sweep(now);
        if self.entries.len() < self.policy.capacity {
            return Ok(());
        }
        match self.policy.when_full {
            WhenFull::Refuse => Err(Full),
            WhenFull::EvictOldest => {
                let oldest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| e.stamp)
                    .map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    self.entries.remove(&oldest);
                }
                Ok(())
            }
        }
    }

    /// Put `value` under `key`, stamped `now`, replacing what was there.
    pub fn insert(&mut self, key: K, value: V, now: Instant) -> Result<(), Full> {
        if !self.entries.contains_key(&key) {
            self.make_room(now)?;
        }
        self.entries.insert(key, Entry { value, stamp: now });
        Ok(())
    }

    /// The live value under `key`, to change in place; a missing or expired one is
    /// first replaced by `init()` stamped `now`. Writing to a live entry restamps it
    /// with [`Expiry::FromLastWrite`] and leaves it alone with [`Expiry::FromInsert`].
    pub fn upsert(
        &mut self,
        key: K,
        now: Instant,
        init: impl FnOnce() -> V,
    ) -> Result<&mut V, Full> {
        let live = self.entries.get(&key).map(|e| self.is_live(e, now));
        if live.is_none() {
            self.make_room(now)?;
        }
        let from_last_write = self.policy.expiry == Expiry::FromLastWrite;
        let entry = match self.entries.entry(key) {
            std::collections::hash_map::Entry::Occupied(slot) => {
                let entry = slot.into_mut();
                if live == Some(false) {
                    // Expired: it starts again in its own slot, as a new entry would.
                    entry.value = init();
                    entry.stamp = now;
                } else if from_last_write {
                    entry.stamp = now;
                }
                entry
            }
            std::collections::hash_map::Entry::Vacant(slot) => slot.insert(Entry {
                value: init(),
                stamp: now,
            }),
        };
        Ok(&mut entry.value)
    }

    /// The live value under `key`.
    pub fn get(&self, key: &K, now: Instant) -> Option<&V> {
        self.entries
            .get(key)
            .filter(|e| self.is_live(e, now))
            .map(|e| &e.value)
    }

    /// Spend `key`: its value if it is live. Live or not, it is gone afterwards, so a
    /// single-use credential works once.
    pub fn take(&mut self, key: &K, now: Instant) -> Option<V> {
        let entry = self.entries.remove(key)?;
        self.is_live(&entry, now).then_some(entry.value)
    }

    /// Forget `key`, live or not.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        self.entries.remove(key).map(|e| e.value)
    }

    /// Forget every entry, live or not, whose value `pick` chooses.
    pub fn remove_where(&mut self, mut pick: impl FnMut(&V) -> bool) {
        self.entries.retain(|_, e| !pick(&e.value));
    }

    /// The live entries whose value `pick` chooses: how many, and the key of the one
    /// with the oldest stamp.
    pub fn live_where(&self, now: Instant, mut pick: impl FnMut(&V) -> bool) -> (usize, Option<K>) {
        let mut count = 0;
        let mut oldest: Option<(&K, Instant)> = None;
        for (key, entry) in &self.entries {
            if self.is_live(entry, now) && pick(&entry.value) {
                count += 1;
                if oldest.is_none_or(|(_, stamp)| entry.stamp < stamp) {
                    oldest = Some((key, entry.stamp));
                }
            }
        }
        (count, oldest.map(|(key, _)| key.clone()))
    }

    /// Whether any entry is live.
    pub fn any_live(&self, now: Instant) -> bool {
        self.entries.values().any(|e| self.is_live(e, now))
    }

    /// Entries held, live or expired (never more than the capacity, except with a
    /// capacity of 0 and [`WhenFull::EvictOldest`], which holds one).
    pub fn held(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(600);

    fn map(capacity: usize, expiry: Expiry, when_full: WhenFull) -> ExpiringMap<u32, &'static str> {
        ExpiringMap::new(Policy {
            ttl: TTL,
            capacity,
            expiry,
            when_full,
        })
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn an_entry_is_live_for_less_than_the_ttl_and_then_invisible() {
        for expiry in [Expiry::FromInsert, Expiry::FromLastWrite] {
            for when_full in [WhenFull::EvictOldest, WhenFull::Refuse] {
                let mut m = map(4, expiry, when_full);
                let t0 = Instant::now();
                m.insert(1, "a", t0).expect("room");
                assert_eq!(m.get(&1, t0), Some(&"a"));
                assert_eq!(m.get(&1, t0 + TTL - Duration::from_nanos(1)), Some(&"a"));
                assert_eq!(m.get(&1, t0 + TTL), None, "the TTL itself is too late");
                assert!(m.any_live(t0 + TTL - Duration::from_nanos(1)));
                assert!(!m.any_live(t0 + TTL));
                assert_eq!(m.held(), 1, "kept until room is needed");
                // A clock read before the stamp (another thread's `now`) is not expiry.
                if let Some(before) = t0.checked_sub(secs(1)) {
                    assert_eq!(m.get(&1, before), Some(&"a"));
                }
                m.sweep(t0 + TTL);
                assert_eq!(m.held(), 0);
            }
        }
    }

    #[test]
    fn take_works_once_and_not_after_expiry() {
        let mut m = map(4, Expiry::FromInsert, WhenFull::EvictOldest);
        let t0 = Instant::now();
        m.insert(1, "a", t0).expect("room");
        m.insert(2, "b", t0).expect("room");
        assert_eq!(m.take(&3, t0), None, "never inserted");
        assert_eq!(m.take(&1, t0 + secs(1)), Some("a"));
        assert_eq!(m.take(&1, t0 + secs(1)), None, "single use");
        assert_eq!(m.take(&2, t0 + TTL), None, "expired");
        assert_eq!(m.held(), 0, "an expired entry that is presented is dropped");
        m.insert(3, "c", t0).expect("room");
        assert_eq!(m.remove(&3), Some("c"));
        assert_eq!(m.take(&3, t0), None);
    }

    /// Tickets: when full, expired ones go first, then the oldest; never refused.
    #[test]
    fn evict_oldest_drops_expired_entries_first_then_the_oldest() {
        let mut m = map(3, Expiry::FromInsert, WhenFull::EvictOldest);
        let t0 = Instant::now();
        m.insert(1, "oldest", t0).expect("room");
        m.insert(2, "expires first", t0 + secs(1)).expect("room");
        m.insert(3, "young", t0 + secs(2)).expect("room");
        // By now the first two have expired: both go, nothing live is evicted.
        m.insert(4, "d", t0 + TTL + secs(1)).expect("never refused");
        assert_eq!(m.held(), 2);
        assert_eq!(m.get(&3, t0 + TTL + secs(1)), Some(&"young"));
        m.insert(5, "e", t0 + TTL + secs(1)).expect("never refused");
        assert_eq!(m.held(), 3);
        // Full of live entries: the one with the oldest stamp (3) makes room.
        m.insert(6, "f", t0 + TTL + secs(1)).expect("never refused");
        assert_eq!(m.held(), 3, "never more than the capacity");
        let now = t0 + TTL + secs(1);
        assert_eq!(m.get(&3, now), None, "the oldest made room");
        assert!([4, 5, 6].iter().all(|k| m.get(k, now).is_some()));
    }

    /// Pairing codes: when full of live entries a new one is refused and every open one
    /// stays; once one expires (or is taken) there is room again.
    #[test]
    fn refuse_keeps_every_entry_and_makes_room_from_expired_ones_only() {
        let mut m = map(2, Expiry::FromInsert, WhenFull::Refuse);
        let t0 = Instant::now();
        m.insert(1, "a", t0).expect("room");
        m.insert(2, "b", t0 + secs(10)).expect("room");
        assert_eq!(m.insert(3, "c", t0 + secs(20)), Err(Full));
        assert_eq!(m.held(), 2);
        assert_eq!(
            m.get(&1, t0 + secs(20)),
            Some(&"a"),
            "nothing was pushed out"
        );
        // Replacing an existing key needs no room.
        m.insert(2, "b2", t0 + secs(20)).expect("same key");
        // The first has expired at t0 + TTL; the second has not.
        m.insert(3, "c", t0 + TTL)
            .expect("the expired one made room");
        assert_eq!(m.get(&1, t0 + TTL), None);
        assert_eq!(m.get(&2, t0 + TTL), Some(&"b2"));
        assert_eq!(m.insert(4, "d", t0 + TTL), Err(Full));
        assert_eq!(m.take(&3, t0 + TTL), Some("c"));
        m.insert(4, "d", t0 + TTL).expect("a taken one made room");
        assert_eq!(
            m.upsert(5, t0 + TTL, || "e").err(),
            Some(Full),
            "upsert of a new key is bounded the same way"
        );
    }

    /// The backoff: every write restarts the TTL, and eviction goes by the last write.
    #[test]
    fn from_last_write_keeps_a_written_entry_live_and_evicts_the_least_recently_written() {
        let mut m = map(2, Expiry::FromLastWrite, WhenFull::EvictOldest);
        let t0 = Instant::now();
        *m.upsert(1, t0, || "fresh").expect("room") = "one";
        *m.upsert(2, t0 + secs(1), || "fresh").expect("room") = "two";
        // Written again just before it would expire: live for another TTL.
        let v = m.upsert(1, t0 + TTL - secs(1), || "fresh").expect("room");
        assert_eq!(*v, "one", "a live entry is kept");
        assert_eq!(m.get(&1, t0 + TTL + secs(5)), Some(&"one"));
        // Reads do not count as writes.
        assert_eq!(m.get(&2, t0 + TTL - secs(1)), Some(&"two"));
        assert_eq!(m.get(&2, t0 + TTL + secs(1)), None);
        // A new key when full: 2 has expired, so it goes, although 1 was inserted first.
        m.upsert(3, t0 + TTL + secs(1), || "three").expect("room");
        assert_eq!(m.get(&1, t0 + TTL + secs(1)), Some(&"one"));
        assert_eq!(m.held(), 2);
        // Full of live entries: 1 (last written at t0 + TTL - 1 s) is older than 3.
        let now = t0 + TTL + secs(2);
        m.upsert(4, now, || "four").expect("room");
        assert_eq!(m.held(), 2);
        assert_eq!(m.get(&1, now), None, "least recently written");
        assert_eq!(m.get(&3, now), Some(&"three"));
        assert_eq!(m.get(&4, now), Some(&"four"));
    }

    #[test]
    fn an_expired_entry_starts_again_on_upsert_without_evicting_anything() {
        let mut m = map(2, Expiry::FromLastWrite, WhenFull::EvictOldest);
        let t0 = Instant::now();
        *m.upsert(1, t0, || "fresh").expect("room") = "counted";
        m.upsert(2, t0 + TTL, || "other").expect("room");
        // 1 has expired: written again, it is a fresh entry in its own slot, and the
        // full map evicts nobody.
        let v = m.upsert(1, t0 + TTL, || "fresh").expect("room");
        assert_eq!(*v, "fresh");
        assert_eq!(m.held(), 2);
        assert_eq!(m.get(&2, t0 + TTL), Some(&"other"));
        assert_eq!(m.get(&1, t0 + TTL + TTL - secs(1)), Some(&"fresh"));
    }

    #[test]
    fn from_insert_is_not_extended_by_writes() {
        let mut m = map(2, Expiry::FromInsert, WhenFull::Refuse);
        let t0 = Instant::now();
        m.upsert(1, t0, || "a").expect("room");
        *m.upsert(1, t0 + secs(30), || "b").expect("room") = "changed";
        assert_eq!(m.get(&1, t0 + TTL - secs(1)), Some(&"changed"));
        assert_eq!(
            m.get(&1, t0 + TTL),
            None,
            "still counted from the insertion"
        );
        // `insert` replaces the entry and its stamp.
        m.insert(1, "new", t0 + secs(60)).expect("same key");
        assert_eq!(m.get(&1, t0 + TTL), Some(&"new"));
    }
}

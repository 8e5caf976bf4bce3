//! Per-address backoff after failed authentications (wrong bearer tokens, wrong
//! pairing codes): the first few failures are free (typos happen), then each further
//! one blocks the address for twice as long as the last, up to five minutes. While
//! blocked, requests are answered 429 with `Retry-After` before any credential is
//! looked at. A success clears the address's record.
//!
//! Tokens and codes have 128 bits or more, so guessing is hopeless anyway; the
//! backoff keeps a misbehaving client (or a scanner) from costing the board CPU and
//! log lines. IPv6 clients are tracked by /64, the block a single LAN host can pick
//! addresses from. The table is bounded: records idle for an hour are forgotten
//! first, then the oldest.

use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::access::expiring::{ExpiringMap, Expiry, Policy, WhenFull};

/// Failures allowed before the first block.
pub const FREE_FAILURES: u32 = 5;
/// Longest block.
pub const MAX_BLOCK: Duration = Duration::from_secs(300);
/// A record idle this long is forgotten.
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// Most addresses tracked at once.
pub const MAX_TRACKED: usize = 4096;

/// An address's failures. When its last failure was is the record's stamp in the map:
/// a record expires an hour after it ([`Expiry::FromLastWrite`]). A block is at most
/// five minutes, so an expired record never blocks.
#[derive(Debug, Clone, Copy)]
struct Record {
    failures: u32,
    blocked_until: Instant,
}

#[derive(Debug)]
pub struct AuthFailures {
    records: Mutex<ExpiringMap<IpAddr, Record>>,
}

impl Default for AuthFailures {
    fn default() -> Self {
        AuthFailures {
            records: Mutex::new(ExpiringMap::new(Policy {
                ttl: FORGET_AFTER,
                capacity: MAX_TRACKED,
                expiry: Expiry::FromLastWrite,
                // A new address is always tracked: the least recently failing one
                // makes room.
                when_full: WhenFull::EvictOldest,
            })),
        }
    }
}

/// The address a record is kept under: IPv4 as is, IPv6 by its /64.
fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

impl AuthFailures {
    /// `Err(seconds to wait)` while `ip` is blocked.
    pub fn check(&self, ip: IpAddr, now: Instant) -> Result<(), u64> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        match records.get(&key(ip), now) {
            Some(r) if r.blocked_until > now => {
                let wait = r.blocked_until - now;
                Err(wait.as_secs() + u64::from(wait.subsec_nanos() > 0))
            }
            _ => Ok(()),
        }
    }

    /// Record a failure from `ip`.
    pub fn failed(&self, ip: IpAddr, now: Instant) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        // An address idle for FORGET_AFTER starts again from no failures.
        let fresh = || Record {
            failures: 0,
            blocked_until: now,
        };
        // Never `Full`: the table evicts instead of refusing.
        let Ok(record) = records.upsert(key(ip), now, fresh) else {
            return;
        };
        record.failures = record.failures.saturating_add(1);
        if record.failures > FREE_FAILURES {
            let doublings = (record.failures - FREE_FAILURES - 1).min(16);
            let block = Duration::from_secs(1u64 << doublings).min(MAX_BLOCK);
            record.blocked_until = now + block;
        }
    }

    /// A success from `ip`: forget its failures.
    pub fn succeeded(&self, ip: IpAddr) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records.remove(&key(ip));
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.records.lock().map(|r| r.held()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    #[test]
    fn free_failures_then_doubling_blocks_up_to_the_cap() {
        let f = AuthFailures::default();
        let a = ip("192.168.1.20");
        let t0 = Instant::now();
        for _ in 0..FREE_FAILURES {
            f.failed(a, t0);
            assert_eq!(f.check(a, t0), Ok(()));
        }
        f.failed(a, t0);
        assert_eq!(f.check(a, t0), Err(1));
        assert_eq!(f.check(a, t0 + Duration::from_secs(1)), Ok(()));
        f.failed(a, t0 + Duration::from_secs(1));
        assert_eq!(f.check(a, t0 + Duration::from_secs(1)), Err(2));
        for _ in 0..40 {
            f.failed(a, t0 + Duration::from_secs(1));
        }
        assert_eq!(f.check(a, t0 + Duration::from_secs(1)), Err(300));
        // Another address is not affected; a success clears the record.
        assert_eq!(f.check(ip("192.168.1.21"), t0), Ok(()));
        f.succeeded(a);
        assert_eq!(f.check(a, t0 + Duration::from_secs(1)), Ok(()));
    }

    #[test]
    fn ipv6_is_tracked_by_its_64_and_mapped_ipv4_as_ipv4() {
        let f = AuthFailures::default();
        let t0 = Instant::now();
        for i in 0..=FREE_FAILURES {
            f.failed(ip(&format!("fd00:1:2:3::{i:x}")), t0);
        }
        assert!(f.check(ip("fd00:1:2:3::ffff"), t0).is_err());
        assert!(f.check(ip("fd00:1:2:4::1"), t0).is_ok());
        for _ in 0..=FREE_FAILURES {
            f.failed(ip("::ffff:10.0.0.7"), t0);
        }
        assert!(f.check(ip("10.0.0.7"), t0).is_err());
    }

    #[test]
    fn old_failures_are_forgotten_and_the_table_is_bounded() {
        let f = AuthFailures::default();
        let a = ip("10.1.1.1");
        let t0 = Instant::now();
        for _ in 0..FREE_FAILURES {
            f.failed(a, t0);
        }
        // An hour later the count starts again: one more failure does not block.
        f.failed(a, t0 + FORGET_AFTER);
        assert!(f.check(a, t0 + FORGET_AFTER).is_ok());

        for i in 0..(MAX_TRACKED as u32 + 10) {
            f.failed(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i)), t0);
        }
        assert!(f.tracked() <= MAX_TRACKED);
    }

    #[test]
    fn the_hour_counts_from_the_last_failure() {
        let f = AuthFailures::default();
        let a = ip("10.2.2.2");
        let t0 = Instant::now();
        let step = FORGET_AFTER - Duration::from_secs(60);
        // Failures 59 minutes apart keep adding up, and the sixth blocks.
        let mut at = t0;
        for _ in 0..=FREE_FAILURES {
            assert_eq!(f.check(a, at), Ok(()));
            f.failed(a, at);
            at += step;
        }
        let last = at - step;
        assert_eq!(f.check(a, last), Err(1));
        // A check is not a failure: it does not keep the record alive.
        assert_eq!(
            f.check(a, last + FORGET_AFTER - Duration::from_secs(1)),
            Ok(())
        );
        f.failed(a, last + FORGET_AFTER);
        assert_eq!(
            f.check(a, last + FORGET_AFTER),
            Ok(()),
            "counting again from 1"
        );
    }

    #[test]
    fn when_full_the_least_recently_failing_address_is_forgotten() {
        let f = AuthFailures::default();
        let t0 = Instant::now();
        let quiet = ip("10.3.0.1");
        let busy = ip("10.3.0.2");
        for _ in 0..FREE_FAILURES {
            f.failed(quiet, t0);
        }
        for _ in 0..=FREE_FAILURES {
            f.failed(busy, t0);
        }
        for i in 0..(MAX_TRACKED as u32 - 2) {
            f.failed(
                IpAddr::V4(std::net::Ipv4Addr::from(0x0b00_0000 + i)),
                t0 + Duration::from_secs(1),
            );
        }
        assert_eq!(f.tracked(), MAX_TRACKED);
        // A tracked address failing again needs no room, and is now recent.
        f.failed(busy, t0 + Duration::from_secs(2));
        assert_eq!(f.tracked(), MAX_TRACKED);
        // A new address: the one whose last failure is oldest (quiet) makes room.
        f.failed(ip("10.4.0.1"), t0 + Duration::from_secs(3));
        assert_eq!(f.tracked(), MAX_TRACKED);
        assert_eq!(f.check(busy, t0 + Duration::from_secs(3)), Err(1));
        f.failed(quiet, t0 + Duration::from_secs(4));
        assert_eq!(
            f.check(quiet, t0 + Duration::from_secs(4)),
            Ok(()),
            "forgotten: one failure, not six"
        );
    }
}

//! Per-address backoff after failed authentications (wrong bearer tokens, wrong
//! pairing codes): the first few failures are free (typos happen), then each further
//! one blocks the address for twice as long as the last, up to five minutes. A blocked
//! address's wrong credentials are answered 429 with `Retry-After`.
//!
//! The backoff sheds a guesser's load; it never locks the owner out. Tokens and codes
//! have 128 bits or more, so guessing is hopeless anyway, and:
//! - A request with a valid credential is always served, blocked address or not: the
//!   credential is looked at first (a constant-time compare and one hash, cheap), and
//!   only a wrong one meets the block.
//! - Failures are counted per address. An IPv6 /64 (the block one LAN host can pick
//!   addresses from, and the whole home network) is also counted as a whole, with a
//!   looser allowance ([`FREE_FAILURES_PER_NETWORK`]), so a host hopping addresses is
//!   slowed without one guessing host blocking its neighbours.
//! - Failures decay with time only: a record is forgotten an hour after its last
//!   failure. A success does not clear it, so a holder of one credential (a read-only
//!   display) cannot interleave successes to guess at another (the admin token) freely.
//!
//! The table is bounded: records idle for an hour are forgotten first, then the oldest.

use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::access::expiring::{ExpiringMap, Expiry, Policy, WhenFull};

/// Failures allowed from one address before its first block.
pub const FREE_FAILURES: u32 = 5;
/// Failures allowed from all the addresses of one IPv6 /64 together before it is
/// blocked as a whole.
pub const FREE_FAILURES_PER_NETWORK: u32 = 50;
/// Longest block.
pub const MAX_BLOCK: Duration = Duration::from_secs(300);
/// A record idle this long is forgotten.
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// Most records (addresses and /64 networks) tracked at once.
pub const MAX_TRACKED: usize = 4096;

/// What failures are counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Counted {
    /// One address (an IPv4-mapped IPv6 address as its IPv4 address).
    Address(IpAddr),
    /// Every address of an IPv6 /64.
    Network(Ipv6Addr),
}

impl Counted {
    fn free_failures(self) -> u32 {
        match self {
            Counted::Address(_) => FREE_FAILURES,
            Counted::Network(_) => FREE_FAILURES_PER_NETWORK,
        }
    }
}

/// The records a failure from `ip` counts against: its address, and for IPv6 its /64.
fn counted(ip: IpAddr) -> impl Iterator<Item = Counted> {
    let (address, network) = match ip {
        IpAddr::V4(_) => (ip, None),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => (IpAddr::V4(v4), None),
            None => {
                let s = v6.segments();
                let net = Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0);
                (ip, Some(Counted::Network(net)))
            }
        },
    };
    std::iter::once(Counted::Address(address)).chain(network)
}

/// A record's failures. When its last failure was is the record's stamp in the map:
/// a record expires an hour after it ([`Expiry::FromLastWrite`]). A block is at most
/// five minutes, so an expired record never blocks.
#[derive(Debug, Clone, Copy)]
struct Record {
    failures: u32,
    blocked_until: Instant,
}

#[derive(Debug)]
pub struct AuthFailures {
    records: Mutex<ExpiringMap<Counted, Record>>,
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

impl AuthFailures {
    /// `Err(seconds to wait)` while `ip` (or its IPv6 /64) is blocked. Asked only once a
    /// presented credential turned out wrong.
    pub fn check(&self, ip: IpAddr, now: Instant) -> Result<(), u64> {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let until = counted(ip)
            .filter_map(|c| records.get(&c, now))
            .map(|r| r.blocked_until)
            .max();
        match until {
            Some(until) if until > now => {
                let wait = until - now;
                Err(wait.as_secs() + u64::from(wait.subsec_nanos() > 0))
            }
            _ => Ok(()),
        }
    }

    /// Record a failure from `ip`.
    pub fn failed(&self, ip: IpAddr, now: Instant) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        for counted in counted(ip) {
            // A record idle for FORGET_AFTER starts again from no failures.
            let fresh = || Record {
                failures: 0,
                blocked_until: now,
            };
            // Never `Full`: the table evicts instead of refusing.
            let Ok(record) = records.upsert(counted, now, fresh) else {
                continue;
            };
            record.failures = record.failures.saturating_add(1);
            let free = counted.free_failures();
            if record.failures > free {
                let doublings = (record.failures - free - 1).min(16);
                let block = Duration::from_secs(1u64 << doublings).min(MAX_BLOCK);
                record.blocked_until = now + block;
            }
        }
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
        // Another address is not affected.
        assert_eq!(f.check(ip("192.168.1.21"), t0), Ok(()));
    }

    #[test]
    fn ipv6_is_counted_by_address_and_loosely_by_its_64_and_mapped_ipv4_as_ipv4() {
        let f = AuthFailures::default();
        let t0 = Instant::now();
        // One host's guesses block that host, not its neighbours in the /64.
        for _ in 0..=FREE_FAILURES {
            f.failed(ip("fd00:1:2:3::1"), t0);
        }
        assert!(f.check(ip("fd00:1:2:3::1"), t0).is_err());
        assert_eq!(f.check(ip("fd00:1:2:3::2"), t0), Ok(()), "a neighbour");
        // A host hopping addresses inside the /64 is slowed once the /64 as a whole
        // passes its looser allowance.
        for i in 0..FREE_FAILURES_PER_NETWORK {
            f.failed(ip(&format!("fd00:1:2:3::1:{i:x}")), t0);
        }
        assert!(f.check(ip("fd00:1:2:3::ffff"), t0).is_err(), "the /64");
        assert!(f.check(ip("fd00:1:2:4::1"), t0).is_ok(), "another /64");
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

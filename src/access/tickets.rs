//! Websocket tickets: a browser cannot set `Authorization` on a websocket, so a client
//! with the bearer token asks for a ticket and opens the socket with it in the query.
//!
//! A ticket is 32 random bytes, hex; valid once, for ten minutes. The book keeps only
//! a hash of each ticket (a leaked memory dump holds no usable ticket) and at most
//! `MAX_TICKETS` of them: when full, expired ones go first, then the oldest.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::access::expiring::{ExpiringMap, Expiry, Policy, WhenFull};
use crate::access::secret::hash;

/// How long a ticket stays valid.
pub const TICKET_TTL: Duration = Duration::from_secs(600);
/// Most outstanding tickets.
pub const MAX_TICKETS: usize = 1024;

#[derive(Debug)]
pub struct TicketBook {
    /// Hashes of the outstanding tickets.
    issued: Mutex<ExpiringMap<[u8; 32], ()>>,
}

impl Default for TicketBook {
    fn default() -> Self {
        TicketBook::new(TICKET_TTL)
    }
}

impl TicketBook {
    pub fn new(ttl: Duration) -> Self {
        TicketBook {
            issued: Mutex::new(ExpiringMap::new(Policy {
                ttl,
                capacity: MAX_TICKETS,
                expiry: Expiry::FromInsert,
                // Issuing never fails for lack of room.
                when_full: WhenFull::EvictOldest,
            })),
        }
    }

    /// A new ticket, or `None` when no randomness is available.
    pub fn issue(&self) -> Option<String> {
        self.issue_at(Instant::now())
    }

    fn issue_at(&self, now: Instant) -> Option<String> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).ok()?;
        let ticket: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        // Never `Full`: the book evicts instead of refusing.
        issued.insert(hash(&ticket), (), now).ok()?;
        Some(ticket)
    }

    /// Spend `ticket`: `true` once for a ticket issued less than the TTL ago.
    pub fn redeem(&self, ticket: &str) -> bool {
        self.redeem_at(ticket, Instant::now())
    }

    fn redeem_at(&self, ticket: &str, now: Instant) -> bool {
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        issued.take(&hash(ticket), now).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_is_64_hex_digits_and_works_once() {
        let book = TicketBook::default();
        let ticket = book.issue().expect("ticket");
        assert_eq!(ticket.len(), 64);
        assert!(ticket.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(!book.redeem("00".repeat(32).as_str()), "forged");
        assert!(book.redeem(&ticket));
        assert!(!book.redeem(&ticket), "reused");
    }

    #[test]
    fn an_expired_ticket_is_refused() {
        let book = TicketBook::new(Duration::from_millis(1));
        let t0 = Instant::now();
        let ticket = book.issue_at(t0).expect("ticket");
        assert!(!book.redeem_at(&ticket, t0 + Duration::from_millis(5)));
    }

    #[test]
    fn a_ticket_is_valid_for_less_than_ten_minutes() {
        let book = TicketBook::default();
        let t0 = Instant::now();
        let early = book.issue_at(t0).expect("ticket");
        let late = book.issue_at(t0).expect("ticket");
        assert!(book.redeem_at(&early, t0 + TICKET_TTL - Duration::from_millis(1)));
        assert!(!book.redeem_at(&late, t0 + TICKET_TTL));
        assert!(
            !book.redeem_at(&late, t0),
            "an expired ticket presented is gone"
        );
    }

    #[test]
    fn the_book_is_bounded_and_drops_the_oldest() {
        let book = TicketBook::default();
        let first = book.issue().expect("ticket");
        let rest: Vec<String> = (0..MAX_TICKETS).map(|_| book.issue().expect("t")).collect();
        assert_eq!(
            book.issued.lock().expect("lock").held(),
            MAX_TICKETS,
            "never more than the cap"
        );
        assert!(!book.redeem(&first), "the oldest made room");
        assert!(book.redeem(&rest[MAX_TICKETS - 1]));
    }
}

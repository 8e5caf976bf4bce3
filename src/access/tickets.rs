//! Websocket tickets: a browser cannot set `Authorization` on a websocket, so a client
//! with the bearer token asks for a ticket and opens the socket with it in the query.
//!
//! A ticket is 32 random bytes, hex; valid once, for ten minutes. The book keeps only
//! a hash of each ticket (a leaked memory dump holds no usable ticket) and at most
//! `MAX_TICKETS` of them: when full, expired ones go first, then the oldest.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bitcoin::hashes::{Hash, sha256};

/// How long a ticket stays valid.
pub const TICKET_TTL: Duration = Duration::from_secs(600);
/// Most outstanding tickets.
pub const MAX_TICKETS: usize = 1024;

#[derive(Debug)]
pub struct TicketBook {
    ttl: Duration,
    issued: Mutex<HashMap<[u8; 32], Instant>>,
}

impl Default for TicketBook {
    fn default() -> Self {
        TicketBook::new(TICKET_TTL)
    }
}

impl TicketBook {
    pub fn new(ttl: Duration) -> Self {
        TicketBook {
            ttl,
            issued: Mutex::new(HashMap::new()),
        }
    }

    /// A new ticket, or `None` when no randomness is available.
    pub fn issue(&self) -> Option<String> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).ok()?;
        let ticket: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let now = Instant::now();
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        if issued.len() >= MAX_TICKETS {
            issued.retain(|_, at| now.duration_since(*at) < self.ttl);
        }
        if issued.len() >= MAX_TICKETS
            && let Some(oldest) = issued.iter().min_by_key(|(_, at)| **at).map(|(k, _)| *k)
        {
            issued.remove(&oldest);
        }
        issued.insert(hash(&ticket), now);
        Some(ticket)
    }

    /// Spend `ticket`: `true` once for a ticket issued less than the TTL ago.
    pub fn redeem(&self, ticket: &str) -> bool {
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        match issued.remove(&hash(ticket)) {
            Some(at) => at.elapsed() < self.ttl,
            None => false,
        }
    }
}

fn hash(ticket: &str) -> [u8; 32] {
    sha256::Hash::hash(ticket.as_bytes()).to_byte_array()
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
        let ticket = book.issue().expect("ticket");
        std::thread::sleep(Duration::from_millis(5));
        assert!(!book.redeem(&ticket));
    }

    #[test]
    fn the_book_is_bounded_and_drops_the_oldest() {
        let book = TicketBook::default();
        let first = book.issue().expect("ticket");
        let rest: Vec<String> = (0..MAX_TICKETS).map(|_| book.issue().expect("t")).collect();
        assert_eq!(
            book.issued.lock().expect("lock").len(),
            MAX_TICKETS,
            "never more than the cap"
        );
        assert!(!book.redeem(&first), "the oldest made room");
        assert!(book.redeem(&rest[MAX_TICKETS - 1]));
    }
}

//! Websocket tickets: a browser cannot set `Authorization` on a websocket, so a client
//! with a bearer token asks for a ticket and opens the socket with it in the query.
//!
//! A ticket is 32 random bytes, hex; valid once, for ten minutes, and it belongs to the
//! credential that asked for it: redeeming it tells which, so the socket it opens is
//! that credential's (and ends when the credential is revoked), and revoking a device
//! throws its tickets away. The book keeps only a hash of each ticket (a leaked memory
//! dump holds no usable ticket).
//!
//! Bounds: a credential holds at most [`MAX_TICKETS_PER_CREDENTIAL`] outstanding
//! tickets; asking for one more drops its own oldest. The whole book holds
//! [`MAX_TICKETS`], enough for every credential that can exist at once (the admin and
//! [`MAX_DEVICES`] devices) to hold its share, so no device can push out another's
//! tickets.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::access::Credential;
use crate::access::devices::MAX_DEVICES;
use crate::access::expiring::{ExpiringMap, Expiry, Policy, WhenFull};
use crate::access::secret::hash;

/// How long a ticket stays valid.
pub const TICKET_TTL: Duration = Duration::from_secs(600);
/// Most outstanding tickets of one credential.
pub const MAX_TICKETS_PER_CREDENTIAL: usize = 16;
/// Most outstanding tickets: every credential's share, with room for the tickets of a
/// device revoked and replaced within their ten minutes (they are dropped at revocation,
/// but the room costs nothing).
pub const MAX_TICKETS: usize = (MAX_DEVICES + 2) * MAX_TICKETS_PER_CREDENTIAL;

#[derive(Debug)]
pub struct TicketBook {
    /// Hashes of the outstanding tickets, and whose each is.
    issued: Mutex<ExpiringMap<[u8; 32], Credential>>,
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
                // Issuing never fails for lack of room; with every credential held to
                // its own cap, the book is never full of live tickets.
                when_full: WhenFull::EvictOldest,
            })),
        }
    }

    /// A new ticket for `owner`, or `None` when no randomness is available.
    pub fn issue(&self, owner: &Credential) -> Option<String> {
        self.issue_at(owner, Instant::now())
    }

    fn issue_at(&self, owner: &Credential, now: Instant) -> Option<String> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).ok()?;
        let ticket: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        let (held, oldest) = issued.live_where(now, |c| c == owner);
        if held >= MAX_TICKETS_PER_CREDENTIAL
            && let Some(oldest) = oldest
        {
            issued.remove(&oldest);
        }
        // Never `Full`: the book evicts instead of refusing.
        issued.insert(hash(&ticket), owner.clone(), now).ok()?;
        Some(ticket)
    }

    /// Spend `ticket`: whose it is, once, for a ticket issued less than the TTL ago.
    pub fn redeem(&self, ticket: &str) -> Option<Credential> {
        self.redeem_at(ticket, Instant::now())
    }

    fn redeem_at(&self, ticket: &str, now: Instant) -> Option<Credential> {
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        issued.take(&hash(ticket), now)
    }

    /// Throw away every ticket of `owner` (its device was revoked).
    pub fn revoke(&self, owner: &Credential) {
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        issued.remove_where(|c| c == owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(id: &str) -> Credential {
        Credential::Device(id.to_string())
    }

    #[test]
    fn a_ticket_is_64_hex_digits_works_once_and_says_whose_it_is() {
        let book = TicketBook::default();
        let ticket = book.issue(&device("a1")).expect("ticket");
        assert_eq!(ticket.len(), 64);
        assert!(ticket.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(book.redeem("00".repeat(32).as_str()), None, "forged");
        assert_eq!(book.redeem(&ticket), Some(device("a1")));
        assert_eq!(book.redeem(&ticket), None, "reused");
    }

    #[test]
    fn an_expired_ticket_is_refused() {
        let book = TicketBook::new(Duration::from_millis(1));
        let t0 = Instant::now();
        let ticket = book.issue_at(&Credential::Admin, t0).expect("ticket");
        assert_eq!(book.redeem_at(&ticket, t0 + Duration::from_millis(5)), None);
    }

    #[test]
    fn a_ticket_is_valid_for_less_than_ten_minutes() {
        let book = TicketBook::default();
        let t0 = Instant::now();
        let early = book.issue_at(&Credential::Admin, t0).expect("ticket");
        let late = book.issue_at(&Credential::Admin, t0).expect("ticket");
        assert!(
            book.redeem_at(&early, t0 + TICKET_TTL - Duration::from_millis(1))
                .is_some()
        );
        assert!(book.redeem_at(&late, t0 + TICKET_TTL).is_none());
        assert!(
            book.redeem_at(&late, t0).is_none(),
            "an expired ticket presented is gone"
        );
    }

    #[test]
    fn a_credential_can_only_push_out_its_own_tickets() {
        let book = TicketBook::default();
        let t0 = Instant::now();
        let theirs: Vec<String> = (0..MAX_TICKETS_PER_CREDENTIAL)
            .map(|_| book.issue_at(&device("other"), t0).expect("t"))
            .collect();
        let mine_first = book.issue_at(&device("greedy"), t0).expect("t");
        let mine: Vec<String> = (1..=10 * MAX_TICKETS)
            .map(|i| {
                let at = t0 + Duration::from_micros(i as u64);
                book.issue_at(&device("greedy"), at).expect("t")
            })
            .collect();
        let later = t0 + Duration::from_secs(1);
        assert!(
            book.issued.lock().expect("lock").held() <= 2 * MAX_TICKETS_PER_CREDENTIAL,
            "a credential holds its cap, no more"
        );
        assert_eq!(
            book.redeem_at(&mine_first, later),
            None,
            "its own oldest went"
        );
        assert_eq!(
            book.redeem_at(&mine[mine.len() - 1], later),
            Some(device("greedy"))
        );
        for ticket in &theirs {
            assert_eq!(book.redeem_at(ticket, later), Some(device("other")));
        }
    }

    #[test]
    fn the_book_has_room_for_every_credential_at_its_cap() {
        let book = TicketBook::default();
        let t0 = Instant::now();
        let owners: Vec<Credential> = std::iter::once(Credential::Admin)
            .chain((0..MAX_DEVICES).map(|i| device(&format!("{i:016x}"))))
            .collect();
        let mut tickets = Vec::new();
        for owner in &owners {
            for _ in 0..MAX_TICKETS_PER_CREDENTIAL {
                tickets.push((book.issue_at(owner, t0).expect("t"), owner.clone()));
            }
        }
        for (ticket, owner) in tickets {
            assert_eq!(book.redeem_at(&ticket, t0), Some(owner));
        }
    }

    #[test]
    fn revoking_a_credential_throws_its_tickets_away() {
        let book = TicketBook::default();
        let gone = book.issue(&device("revoked")).expect("t");
        let kept = book.issue(&device("kept")).expect("t");
        book.revoke(&device("revoked"));
        assert_eq!(book.redeem(&gone), None);
        assert_eq!(book.redeem(&kept), Some(device("kept")));
    }
}

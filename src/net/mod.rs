//! Networking around the API: the listener (TLS, connection cap, timeouts), the local
//! control socket, pairing and device tokens, and the DNS-SD announcement
//! (`docs/architecture.md`, layout). The certificates the listener serves are
//! [`crate::tls`]'s.

pub mod control;
pub mod listener;
pub mod mdns;
pub mod pairing;

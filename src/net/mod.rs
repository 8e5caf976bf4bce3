//! Networking around the API: the listener (TLS, connection cap, timeouts), the local
//! control socket and the DNS-SD announcement (`docs/architecture.md`, layout). The
//! certificates the listener serves are [`crate::tls`]'s; pairing and device tokens
//! are [`crate::access`]'s.

pub mod control;
pub mod listener;
pub mod mdns;

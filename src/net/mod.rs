//! Networking around the API: the listener (TLS, connection cap, timeouts), the local
//! control socket, the DNS-SD announcement, and the egress policy every outbound fetch
//! made for a client goes through (`docs/architecture.md`, layout). The
//! certificates the listener serves are [`crate::tls`]'s; pairing and device tokens
//! are [`crate::access`]'s.

pub mod control;
pub mod egress;
pub mod listener;
pub mod mdns;

//! Networking around the API: the listener (TLS, connection cap, timeouts), the
//! certificates it serves, the local control socket, pairing and device tokens, and
//! the DNS-SD announcement (`docs/architecture.md`, layout).

pub mod certs;
pub mod control;
pub mod listener;
pub mod mdns;
pub mod pairing;

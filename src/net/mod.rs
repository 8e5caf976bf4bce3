//! Networking around the API: the listener (TLS, connection cap, timeouts), the
//! certificates it serves, and the DNS-SD announcement (ARCHITECTURE.md, layout).

pub mod certs;
pub mod listener;
pub mod mdns;

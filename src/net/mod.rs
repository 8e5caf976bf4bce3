//! Networking around the API: the listener (connection cap, timeouts). Later issues
//! add TLS, certificates, pairing and mDNS here (ARCHITECTURE.md, layout).

pub mod listener;

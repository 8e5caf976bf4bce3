//! Berth: a self-custodial bitcoin wallet daemon for a home appliance, serving the barkd
//! REST + websocket API on top of the `bark` engine.
//!
//! Module map (see `../shared/design/ARCHITECTURE.md` for the full layout and the
//! direction of dependencies):
//! - [`store`]: the wallet database (redb) — bark's persister and, later, Berth's own
//!   tables (event log, tokens, devices, webhooks, idempotency keys).
//! - [`cli`]: the `berthd` command line.

pub mod cli;
pub mod store;

//! Berth: a self-custodial bitcoin wallet daemon for a home appliance, serving the barkd
//! REST + websocket API on top of the `bark` engine.
//!
//! Module map (`docs/architecture.md` has the layout and the direction of dependencies:
//! `api → engine → store`; nothing below depends on anything above):
//! - [`access`]: who may do what — credentials (admin token, device tokens, pairing
//!   codes, websocket tickets), scopes, the auth-failure backoff.
//! - [`app`]: composition root — command line in, running daemon out (a `Daemon` that
//!   starts its parts in order and stops them in reverse).
//! - [`card_setup`]: the owner's request to apply the appliance card's settings again.
//! - [`commands`]: the subcommands (`secret`, `store`, `tls`, `seed`, `pair`, `backup`,
//!   `restore`).
//! - [`runtime`]: the bounded async runtime.
//! - [`cli`]: the `berthd` command line (barkd's flags and environment variables).
//! - [`config`]: `berth.toml`, and the daemon's `Settings` resolved once from it, the
//!   command line and the environment.
//! - [`datadir`]: the data directory's layout (every file's name) and the bearer token.
//! - [`fsutil`]: atomic writes, the owner check, the instance lock.
//! - [`api`]: the HTTP API (router, auth, errors, one file per group under `v1`).
//! - [`console`]: the web console at `/` (server-rendered pages, browser sessions).
//! - [`engine`]: the one owner of the wallet, and of its backups (`engine::backup`).
//! - [`store`]: the wallet database (redb).
//! - [`keys`]: the seed at rest (sealed envelope, key sources, the ATECC608 driver).
//! - [`events`]: the durable event log and its fan-out.
//! - [`net`]: the listener, the control socket, mDNS.
//! - [`tls`]: the listener's TLS identity (local CA, leaf, renewal, the pin).
//! - [`telemetry`], [`shutdown`], [`systemd`]: logging, signals, service notifications.

pub mod access;
pub mod api;
pub mod app;
pub mod card_setup;
pub mod cli;
pub mod commands;
pub mod config;
pub mod console;
pub mod datadir;
pub mod engine;
pub mod events;
pub mod fsutil;
pub mod keys;
pub mod net;
pub mod nwc;
pub mod runtime;
pub mod shutdown;
pub mod store;
pub mod system_update;
pub mod systemd;
pub mod telemetry;
pub mod tls;
pub mod webhooks;

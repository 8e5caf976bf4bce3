//! Access: who may do what.
//!
//! # Credentials
//!
//! - The admin token: barkd's bearer token in `<datadir>/auth_token`, full access, as
//!   in barkd. Its file format and loading are the datadir's
//!   ([`crate::datadir::AuthToken`]); it is compared in constant time.
//! - Device tokens ([`devices`]): one per paired phone, each with its own scopes and
//!   revocable on its own. Only their SHA-256 is kept (redb, and a map in memory).
//! - Pairing codes ([`pairing`]): one-time codes that `berthd pair` opens on the box
//!   itself (the control socket) and a phone exchanges for a device token.
//! - Websocket tickets ([`tickets`]): a browser cannot set `Authorization` on a
//!   websocket, so a bearer holder asks for a one-time ticket and puts it in the query.
//!
//! Every secret has 128 random bits or more and only its hash is kept ([`secret`]):
//! neither the database nor a memory dump holds a usable credential, and a fast hash
//! is enough. Secrets handed out are wrapped so that `Debug` never prints them.
//!
//! # Scopes
//!
//! A credential carries [`scopes::Scopes`]: `read`, `receive`, `send`, `admin`, which
//! do not imply each other except `admin`, which includes all. The admin token carries
//! every scope; a device token the ones chosen when its pairing window was opened. The
//! HTTP side (`api::auth` for the bearer check, `api::scopes` for the route-level
//! check) only asks this module.
//!
//! # Limits, and why
//!
//! - Pairing codes: ten minutes, single use, at most 16 open (opening a 17th is
//!   refused rather than pushing one out: a code shown on the screen keeps working).
//!   A restart closes every window, since codes live only in memory.
//! - Devices: at most 64 paired; names of 1 to 64 bytes.
//! - Websocket tickets: ten minutes, single use, at most 1,024 outstanding; when full,
//!   expired ones go first, then the oldest (issuing never fails for lack of room).
//! - Failed authentications ([`backoff`]): the first few per address are free, then
//!   doubling blocks up to five minutes, answered 429 before any credential is looked
//!   at. Guessing a credential is hopeless anyway; the backoff keeps a misbehaving
//!   client or a scanner from costing the board CPU and log lines. At most 4,096
//!   addresses are tracked; records idle for an hour are forgotten first, then the
//!   oldest.
//!
//! Tickets, pairing codes and the backoff are the same shape, a bounded map whose
//! entries expire ([`expiring`]); where they differ (when the TTL counts from, what
//! happens when full) the map is told which.
//!
//! This module uses only [`crate::store`] (devices are persisted by `store::tokens`)
//! and [`crate::datadir`]; nothing here knows about HTTP.

pub mod backoff;
pub mod devices;
pub mod expiring;
pub mod pairing;
pub mod scopes;
pub mod secret;
pub mod tickets;

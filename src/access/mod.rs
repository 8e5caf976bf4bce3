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
//! - The claim code ([`claim`]): written onto the card before first boot (or made by
//!   `berthd claim reset`), exchanged once for the first admin device.
//! - Enrolment ([`enrolment`]): pairing, claiming and revoking, the operations the API
//!   and the console both call.
//! - Websocket tickets ([`tickets`]): a browser cannot set `Authorization` on a
//!   websocket, so a bearer holder asks for a one-time ticket and puts it in the query.
//!
//! Every secret has 128 random bits or more and only its hash is kept ([`secret`]):
//! neither the database nor a memory dump holds a usable credential, and a fast hash
//! is enough. Secrets handed out are wrapped so that `Debug` never prints them.
//!
//! [`authenticate`] says which scopes a presented bearer token carries; the HTTP side
//! (`api::auth`) only reads the header and keeps the backoff's books.
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
//! - Websocket tickets: ten minutes, single use, each the credential's that asked for
//!   it, at most 16 outstanding per credential (asking for more drops its own oldest).
//! - Failed authentications ([`backoff`]): the first few per address are free, then
//!   doubling blocks up to five minutes (an IPv6 /64 is also counted as a whole, more
//!   loosely). A blocked address's wrong credentials are answered 429; a valid
//!   credential is always served, so the owner is never locked out. Failures are
//!   forgotten an hour after the last one, never by a success. At most 4,096 records.
//!
//! # Revocation
//!
//! Revoking a device ends everything its token opened, at once: the token stops
//! working, its unspent websocket tickets are thrown away, and its open websocket, SSE
//! and long-poll connections end ([`devices::Devices::revoked`]). What a credential
//! leaves behind is its own ([`Credential`]): idempotency records are kept per
//! credential, so one cannot see or block another's.
//!
//! Tickets, pairing codes and the backoff are the same shape, a bounded map whose
//! entries expire ([`expiring`]); where they differ (when the TTL counts from, what
//! happens when full) the map is told which.
//!
//! This module uses only [`crate::store`] (devices are persisted by `store::tokens`)
//! and [`crate::datadir`]; nothing here knows about HTTP.

pub mod backoff;
pub mod claim;
pub mod devices;
pub mod enrolment;
pub mod expiring;
pub mod pairing;
pub mod scopes;
pub mod secret;
pub mod tickets;

use subtle::ConstantTimeEq;

use crate::access::devices::Devices;
use crate::access::scopes::Scopes;
use crate::datadir::AuthToken;

/// The credential a request was made with. What a caller leaves behind (idempotency
/// records, websocket tickets, live notification streams) belongs to it: another
/// credential cannot see or use it, and revoking a device ends all of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Credential {
    /// The datadir's admin token. With authentication off (`--no-auth`) every caller
    /// is this one: whoever reaches the port has the admin's power anyway.
    Admin,
    /// A paired device, by its id.
    Device(String),
}

impl Credential {
    /// A name for this credential in counts and logs: a device's id, never a token.
    pub fn key(&self) -> String {
        match self {
            Credential::Admin => "admin".into(),
            Credential::Device(id) => format!("device:{id}"),
        }
    }
}

/// Who is calling: the credential and the scopes it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub credential: Credential,
    pub scopes: Scopes,
    /// Set only on a request berthd runs again itself once the owner approved it
    /// (`api::approvals`): the approval the payment is let through by. No request from
    /// the network carries one.
    pub approval: Option<[u8; 16]>,
}

impl Caller {
    /// The caller when authentication is off.
    pub const OPEN: Caller = Caller {
        credential: Credential::Admin,
        scopes: Scopes::FULL,
        approval: None,
    };
}

/// Who a presented bearer token belongs to: the admin (every scope; compared in
/// constant time), a paired device (its own scopes; looked up by hash), or `None`.
pub fn authenticate(presented: &str, admin: &AuthToken, devices: &Devices) -> Option<Caller> {
    // ConstantTimeEq on slices of different lengths is false without comparing the
    // contents; the token's length is public (it is a fixed format).
    if bool::from(presented.as_bytes().ct_eq(admin.expose().as_bytes())) {
        return Some(Caller::OPEN);
    }
    devices.authenticate(presented).map(|device| Caller {
        credential: Credential::Device(device.device_id),
        scopes: device.scopes,
        approval: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Store, StoreConfig};

    #[tokio::test]
    async fn the_admin_token_has_every_scope_and_a_device_token_its_own_until_revoked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = Store::open_async(&dir.path().join("db.redb"), &StoreConfig::default())
            .await
            .expect("open");
        let devices = Devices::load(store.clone(), Default::default())
            .await
            .expect("load");
        let admin = AuthToken::from_secret(&[7; 32]);
        let scopes = |token: &str, devices: &Devices| {
            authenticate(token, &admin, devices).map(|caller| caller.scopes)
        };
        assert_eq!(
            authenticate(admin.expose(), &admin, &devices),
            Some(Caller::OPEN),
            "the admin: every scope"
        );
        let read = Scopes::parse(&["read"]).expect("scopes");
        let (token, device) = devices.add("Kitchen display", read).await.expect("add");
        let (kept, _) = devices
            .add("Phone", Scopes::PHONE_WALLET)
            .await
            .expect("add");
        assert_eq!(
            authenticate(token.expose(), &admin, &devices),
            Some(Caller {
                credential: Credential::Device(device.id.clone()),
                scopes: read,
                approval: None,
            })
        );
        for wrong in ["", "Bearer", &admin.expose()[1..], &token.expose()[1..]] {
            assert_eq!(authenticate(wrong, &admin, &devices), None, "{wrong:?}");
        }
        assert!(devices.revoke(&device.id).await.expect("revoke"));
        assert_eq!(authenticate(token.expose(), &admin, &devices), None);
        // A restart loads the same devices, by hash, from the store.
        let reloaded = Devices::load(store, Default::default())
            .await
            .expect("load");
        assert_eq!(authenticate(token.expose(), &admin, &reloaded), None);
        assert_eq!(scopes(kept.expose(), &reloaded), Some(Scopes::PHONE_WALLET));
    }
}

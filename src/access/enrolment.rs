//! Enrolling and removing devices: a pairing code redeemed, the box claimed with its
//! claim code, a device revoked. These are the operations behind `POST /api/v1/pair`,
//! `POST /api/v1/claim` and `DELETE /api/v1/devices/{id}`, and behind the console's
//! sign-in and devices page: both faces call them, each turns an [`EnrolError`] into
//! its own answer, and neither repeats a rule.
//!
//! The auth-failure backoff is part of them: a wrong code counts against the address
//! it came from, and an address the backoff blocks is refused before anything is read
//! (a claim's check of the wallet and the devices, its file): a flood of wrong codes
//! costs memory lookups and never makes the owner's attempt wait.

use std::future::Future;
use std::net::IpAddr;
use std::time::Instant;

use super::Credential;
use super::backoff::AuthFailures;
use super::claim::{Claim, ClaimError, Redeem};
use super::devices::{Device, DeviceError, Devices, check_device_name};
use super::pairing::{PairingCodes, Redeem as PairingRedeem};
use super::scopes::Scopes;
use super::secret::Secret;
use super::tickets::TicketBook;
use crate::store::StoreError;

/// Why a device was not enrolled or removed.
#[derive(Debug, thiserror::Error)]
pub enum EnrolError {
    /// The name given for the device.
    #[error("{0}")]
    BadName(&'static str),
    /// No pairing window or claim is open (or another attempt took the claim first):
    /// as far as a client can tell, the endpoint does not exist.
    #[error("no such endpoint")]
    Closed,
    #[error("not a valid pairing code (codes work once, for 10 minutes)")]
    WrongPairingCode,
    #[error("not the claim code")]
    WrongClaimCode,
    /// The address is blocked by the backoff for this many more seconds.
    #[error("too many failed attempts; retry in {0} s")]
    Blocked(u64),
    #[error("no device {0}")]
    NoSuchDevice(String),
    /// Adding the device failed (too many devices, the store, randomness).
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// Reading, taking or closing the claim.
    #[error("{what}: {source}")]
    Claim {
        what: &'static str,
        source: ClaimError,
    },
    /// Listing or removing devices.
    #[error("{what}: {source}")]
    Store {
        what: &'static str,
        source: StoreError,
    },
    /// Whether the box has a wallet could not be read (the caller's error, as it was).
    #[error("reading the wallet: {0}")]
    Wallet(Box<dyn std::error::Error + Send + Sync>),
}

impl EnrolError {
    fn claim(what: &'static str) -> impl FnOnce(ClaimError) -> EnrolError {
        move |source| EnrolError::Claim { what, source }
    }

    fn store(what: &'static str) -> impl FnOnce(StoreError) -> EnrolError {
        move |source| EnrolError::Store { what, source }
    }
}

/// The parts enrolling touches, borrowed for one operation.
pub struct Enrolment<'a> {
    pub devices: &'a Devices,
    pub pairing: &'a PairingCodes,
    pub claim: &'a Claim,
    pub failures: &'a AuthFailures,
    pub tickets: &'a TicketBook,
}

impl Enrolment<'_> {
    /// Redeem a pairing code for a device named `name` (the window's name wins): a phone,
    /// or a console session (`session`: it expires).
    pub async fn pair(
        &self,
        code: &str,
        name: &str,
        peer: Option<IpAddr>,
        session: bool,
    ) -> Result<(Secret, Device), EnrolError> {
        let name = check_device_name(name).map_err(EnrolError::BadName)?;
        let grant = match self.pairing.redeem(code) {
            Ok(grant) => grant,
            Err(PairingRedeem::Closed) => return Err(EnrolError::Closed),
            Err(PairingRedeem::WrongCode) => {
                self.count_wrong_code(peer)?;
                return Err(EnrolError::WrongPairingCode);
            }
        };
        let name = grant.name.unwrap_or(name);
        let (token, device) = self.add(&name, grant.scopes, session).await?;
        tracing::info!(device = %device.id, name = %device.name, scopes = ?device.scopes, "device paired");
        Ok((token, device))
    }

    /// Whether a claim is open: the console shows its claim page then.
    pub fn claim_is_open(&self) -> bool {
        matches!(self.claim.read(), Ok(Some(_)))
    }

    /// Exchange the claim code for an admin device named `name`. `Closed` without an
    /// open claim, or with a provisioned one on a box that has a wallet (`has_wallet`,
    /// asked only once the address is known not to be blocked) or a device. Of two
    /// attempts with the right code, the one that takes the claim (`Claim::take`, an
    /// atomic rename) gets the device.
    pub async fn claim(
        &self,
        code: &str,
        name: &str,
        peer: Option<IpAddr>,
        session: bool,
        has_wallet: impl Future<Output = Result<bool, Box<dyn std::error::Error + Send + Sync>>>,
    ) -> Result<(Secret, Device), EnrolError> {
        let name = check_device_name(name).map_err(EnrolError::BadName)?;
        if let Some(ip) = peer {
            self.failures
                .check(ip, Instant::now())
                .map_err(EnrolError::Blocked)?;
        }
        let has_wallet = has_wallet.await.map_err(EnrolError::Wallet)?;
        let devices = self
            .devices
            .list()
            .await
            .map_err(EnrolError::store("listing devices"))?;
        let unclaimed = !has_wallet && devices.is_empty();
        let checked = self
            .claim
            .check(code, unclaimed)
            .map_err(EnrolError::claim("reading the claim"))?;
        match checked {
            Redeem::Closed => Err(EnrolError::Closed),
            Redeem::WrongCode => {
                // The address was not blocked when the attempt began (checked above).
                if let Some(ip) = peer {
                    self.failures.failed(ip, Instant::now());
                }
                Err(EnrolError::WrongClaimCode)
            }
            Redeem::Accepted => {
                let Some(taken) = self
                    .claim
                    .take(code)
                    .map_err(EnrolError::claim("taking the claim"))?
                else {
                    // Another attempt with the code took it first.
                    return Err(EnrolError::Closed);
                };
                let (token, device) = match self.add(&name, Scopes::FULL, session).await {
                    Ok(added) => added,
                    Err(e) => {
                        if let Err(e) = taken.put_back() {
                            tracing::error!(error = %e, "cannot open the claim again after a failed claim");
                        }
                        return Err(e.into());
                    }
                };
                // The device exists: a claim file left aside would only be litter, but a
                // failure to remove it is said.
                taken
                    .used()
                    .map_err(EnrolError::claim("closing the claim"))?;
                tracing::info!(device = %device.id, name = %device.name, "the box was claimed");
                Ok((token, device))
            }
        }
    }

    /// Revoke device `id`: its token stops working, its unspent tickets go and its live
    /// streams end (`Devices::revoked`).
    pub async fn revoke(&self, id: &str) -> Result<(), EnrolError> {
        let revoked = self
            .devices
            .revoke(id)
            .await
            .map_err(EnrolError::store("revoking a device"))?;
        if !revoked {
            return Err(EnrolError::NoSuchDevice(id.to_owned()));
        }
        self.tickets.revoke(&Credential::Device(id.to_owned()));
        tracing::info!(device = %id, "device revoked");
        Ok(())
    }

    /// A paired device, or a console session (which expires).
    async fn add(
        &self,
        name: &str,
        scopes: Scopes,
        session: bool,
    ) -> Result<(Secret, Device), DeviceError> {
        if session {
            self.devices.add_session(name, scopes).await
        } else {
            self.devices.add(name, scopes).await
        }
    }

    /// As with bearer tokens: a right code is always taken, a wrong one from a blocked
    /// address is refused, and counted otherwise.
    fn count_wrong_code(&self, peer: Option<IpAddr>) -> Result<(), EnrolError> {
        if let Some(ip) = peer {
            let now = Instant::now();
            self.failures.check(ip, now).map_err(EnrolError::Blocked)?;
            self.failures.failed(ip, now);
        }
        Ok(())
    }
}

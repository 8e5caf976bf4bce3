//! Pairing: how a phone on the LAN gets a token of its own.
//!
//! `berthd pair` (on the box itself, through the control socket) opens a pairing
//! window: a one-time code, shown as a QR code with the address and the CA pin
//! ([`PairingTarget::uri`]). The phone checks the pin, posts the code with its name to
//! `POST /api/v1/pair` and gets a device token ([`crate::access::devices`]) carrying
//! the scopes chosen when the window was opened.
//!
//! Codes (128 bits, single use, ten minutes) live only in memory, as hashes: a restart
//! closes every window. At most [`MAX_OPEN_CODES`] are open at once; when that many
//! are, opening another is refused (no open code is pushed out: the QR code on the
//! screen keeps working until it is used or expires).

use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use crate::access::expiring::{ExpiringMap, Expiry, Full, Policy, WhenFull};
use crate::access::scopes::Scopes;
use crate::access::secret::{Secret, hash, random_secret};

/// How long a pairing code is valid.
pub const CODE_TTL: Duration = Duration::from_secs(600);
/// Most pairing codes open at once.
pub const MAX_OPEN_CODES: usize = 16;

/// What an open pairing code grants.
#[derive(Debug, Clone)]
pub struct Grant {
    pub scopes: Scopes,
    /// A name chosen by whoever opened the window; wins over the device's own.
    pub name: Option<String>,
}

/// The open pairing codes, by the hash of the code.
pub struct PairingCodes {
    open: Mutex<ExpiringMap<[u8; 32], Grant>>,
}

impl Default for PairingCodes {
    fn default() -> Self {
        PairingCodes {
            open: Mutex::new(ExpiringMap::new(Policy {
                ttl: CODE_TTL,
                capacity: MAX_OPEN_CODES,
                expiry: Expiry::FromInsert,
                // A code on someone's screen is never pushed out by a newer one.
                when_full: WhenFull::Refuse,
            })),
        }
    }
}

/// Why a code was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redeem {
    /// No window is open: pairing is not offered right now.
    Closed,
    /// A window is open but this is not one of its codes.
    WrongCode,
}

impl PairingCodes {
    /// Open a window: a new code valid for `CODE_TTL`, and its expiry.
    pub fn open(&self, grant: Grant) -> Result<(Secret, SystemTime), &'static str> {
        self.open_at(grant, Instant::now())
    }

    fn open_at(&self, grant: Grant, now: Instant) -> Result<(Secret, SystemTime), &'static str> {
        let code = random_secret(None).ok_or("no randomness is available")?;
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.insert(hash(code.expose()), grant, now).map_err(
            |Full| "too many pairing codes are open; use one or wait for them to expire",
        )?;
        Ok((code, SystemTime::now() + CODE_TTL))
    }

    /// Whether any code is open.
    pub fn is_open(&self) -> bool {
        self.is_open_at(Instant::now())
    }

    fn is_open_at(&self, now: Instant) -> bool {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.any_live(now)
    }

    /// Spend `code`: its grant, once.
    pub fn redeem(&self, code: &str) -> Result<Grant, Redeem> {
        self.redeem_at(code, Instant::now())
    }

    fn redeem_at(&self, code: &str, now: Instant) -> Result<Grant, Redeem> {
        let presented = hash(code.trim());
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if !open.any_live(now) {
            return Err(Redeem::Closed);
        }
        // Looked up by the hash of a 128-bit random code: timing leaks nothing useful.
        open.take(&presented, now).ok_or(Redeem::WrongCode)
    }
}

/// Where phones reach the daemon: what goes in the pairing URI.
#[derive(Debug, Clone)]
pub struct PairingTarget {
    /// The bound address; an unspecified one (0.0.0.0, ::) means "every LAN address".
    pub bind: SocketAddr,
    /// The host name (without `.local`).
    pub hostname: String,
    /// The CA pin, when the API is served over TLS.
    pub pin: Option<String>,
}

impl PairingTarget {
    /// The address to put in the URI: the bound one, or else a LAN address, private
    /// ones first (the local CA may only name private, loopback and link-local
    /// addresses, so only those are on the leaf; `docs/lan.md`), IPv4 before IPv6
    /// (phones reach IPv4 more reliably); loopback when there is none.
    fn address(&self, lan_ips: &[IpAddr]) -> SocketAddr {
        let ip = self.bind.ip();
        if !ip.is_unspecified() {
            return self.bind;
        }
        let private = |ip: &&IpAddr| match ip {
            IpAddr::V4(v4) => v4.is_private() || v4.is_link_local(),
            IpAddr::V6(v6) => v6.is_unique_local() || v6.is_unicast_link_local(),
        };
        let chosen = lan_ips
            .iter()
            .filter(private)
            .find(|ip| ip.is_ipv4())
            .or_else(|| lan_ips.iter().find(private))
            .or_else(|| lan_ips.iter().find(|ip| ip.is_ipv4()))
            .or_else(|| lan_ips.first())
            .copied()
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        SocketAddr::new(chosen, self.bind.port())
    }

    /// `berth://pair?v=1&h=<host>.local&a=<ip>:<port>&pin=sha256/...&t=<code>&exp=<unix>`
    pub fn uri(&self, lan_ips: &[IpAddr], code: &str, expires_unix: u64) -> String {
        // Brackets of an IPv6 address are not allowed bare in a query.
        let address = self
            .address(lan_ips)
            .to_string()
            .replace('[', "%5B")
            .replace(']', "%5D");
        let mut uri = format!("berth://pair?v=1&h={}.local&a={address}", self.hostname);
        if let Some(pin) = &self.pin {
            uri.push_str("&pin=");
            uri.push_str(pin);
        }
        uri.push_str(&format!("&t={code}&exp={expires_unix}"));
        uri
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_works_once_and_only_while_open() {
        let codes = PairingCodes::default();
        assert!(!codes.is_open());
        assert_eq!(codes.redeem("anything").err(), Some(Redeem::Closed));
        let grant = Grant {
            scopes: Scopes::PHONE_WALLET,
            name: None,
        };
        let (code, expires) = codes.open(grant).expect("open");
        assert_eq!(code.expose().len(), 22, "128 bits, base64url");
        assert!(expires > SystemTime::now() + CODE_TTL - Duration::from_secs(5));
        assert!(codes.is_open());
        assert_eq!(codes.redeem("wrong").err(), Some(Redeem::WrongCode));
        let granted = codes.redeem(code.expose()).expect("redeem");
        assert_eq!(granted.scopes, Scopes::PHONE_WALLET);
        assert_eq!(codes.redeem(code.expose()).err(), Some(Redeem::Closed));
        assert!(!format!("{code:?}").contains(code.expose()));
    }

    #[test]
    fn expired_codes_close_the_window_and_open_codes_are_bounded() {
        let codes = PairingCodes::default();
        for _ in 0..MAX_OPEN_CODES {
            codes
                .open(Grant {
                    scopes: Scopes::FULL,
                    name: None,
                })
                .expect("open");
        }
        assert!(
            codes
                .open(Grant {
                    scopes: Scopes::FULL,
                    name: None
                })
                .is_err()
        );
        // Every code past its TTL.
        let later = Instant::now() + CODE_TTL;
        assert!(!codes.is_open_at(later));
        assert_eq!(
            codes.redeem_at("anything", later).err(),
            Some(Redeem::Closed)
        );
        // Expired codes make room for new ones.
        let grant = Grant {
            scopes: Scopes::FULL,
            name: None,
        };
        codes.open_at(grant, later).expect("room again");
        assert!(codes.is_open_at(later));
    }

    #[test]
    fn a_code_is_valid_for_less_than_ten_minutes_and_a_full_window_keeps_its_codes() {
        let codes = PairingCodes::default();
        let t0 = Instant::now();
        let grant = || Grant {
            scopes: Scopes::PHONE_WALLET,
            name: Some("Kitchen display".into()),
        };
        let (first, _) = codes.open_at(grant(), t0).expect("open");
        for _ in 1..MAX_OPEN_CODES {
            codes.open_at(grant(), t0).expect("open");
        }
        assert!(codes.open_at(grant(), t0).is_err(), "full");
        // The refusal pushed nothing out: the first code still works, once, with its
        // grant, until just before its ten minutes are up.
        let just_in_time = t0 + CODE_TTL - Duration::from_millis(1);
        let granted = codes.redeem_at(&format!(" {} ", first.expose()), just_in_time);
        assert_eq!(
            granted.expect("redeem").name.as_deref(),
            Some("Kitchen display")
        );
        assert_eq!(
            codes.redeem_at(first.expose(), just_in_time).err(),
            Some(Redeem::WrongCode),
            "used, while other codes are open"
        );
        codes
            .open_at(grant(), just_in_time)
            .expect("the used code made room");
        assert!(codes.open_at(grant(), just_in_time).is_err());
    }

    fn target(bind: &str, pin: Option<&str>) -> PairingTarget {
        PairingTarget {
            bind: bind.parse().expect("addr"),
            hostname: "berth-7f3a".into(),
            pin: pin.map(String::from),
        }
    }

    #[test]
    fn the_uri_names_host_address_pin_code_and_expiry() {
        let lan: Vec<IpAddr> = vec![
            "fd00::5".parse().expect("ip"),
            "192.168.1.40".parse().expect("ip"),
        ];
        let uri = target("0.0.0.0:3000", Some("sha256/abc_-")).uri(&lan, "CODE", 1_800_000_000);
        assert_eq!(
            uri,
            "berth://pair?v=1&h=berth-7f3a.local&a=192.168.1.40:3000&pin=sha256/abc_-&t=CODE&exp=1800000000"
        );
        // A bound address is used as is; IPv6 brackets are escaped; no pin without TLS.
        let uri = target("[fd00::9]:3443", None).uri(&lan, "C", 1);
        assert_eq!(
            uri,
            "berth://pair?v=1&h=berth-7f3a.local&a=%5Bfd00::9%5D:3443&t=C&exp=1"
        );
        let uri = target("0.0.0.0:3000", None).uri(&[], "C", 1);
        assert!(uri.contains("a=127.0.0.1:3000"), "{uri}");
    }

    #[test]
    fn a_private_address_the_leaf_carries_is_offered_before_a_public_one() {
        let ips = |list: &[&str]| -> Vec<IpAddr> {
            list.iter().map(|ip| ip.parse().expect("ip")).collect()
        };
        let offered = |lan: &[&str]| target("0.0.0.0:3000", None).address(&ips(lan)).ip();
        // lan_ips() sorts; a public IPv4 sorts before 192.168.x.
        assert_eq!(
            offered(&["81.2.69.160", "192.168.1.40", "2001:db8::1"]),
            "192.168.1.40".parse::<IpAddr>().expect("ip")
        );
        assert_eq!(
            offered(&["81.2.69.160", "fd00::5"]),
            "fd00::5".parse::<IpAddr>().expect("ip"),
            "a private IPv6 before a public IPv4"
        );
        assert_eq!(
            offered(&["2001:db8::1", "81.2.69.160"]),
            "81.2.69.160".parse::<IpAddr>().expect("ip"),
            "without a private one, IPv4 first"
        );
    }
}

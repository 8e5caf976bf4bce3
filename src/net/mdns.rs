//! DNS-SD announcement of the daemon on the LAN (`_berth._tcp`, RFC 6762/6763).
//!
//! Why: a phone on the home network should find the box as `<hostname>.local` without
//! anyone typing an IP address (which DHCP may change anyway). Several boxes can sit on
//! one LAN, and a name proves nothing, so the TXT record carries a short prefix of the
//! TLS CA pin: an app that paired with a box (and so holds its full pin) picks that box
//! out of the list, and still checks the full pin when it connects.
//!
//! What is announced ([`service_record`], a pure function):
//! - service type `_berth._tcp.local.`, instance name = the hostname;
//! - host `<hostname>.local.`, with every current address of the host's non-loopback
//!   interfaces (mdns-sd fills them in and announces addresses that appear later);
//! - TXT `v=1` and `pin=<base64url, unpadded, of the first 8 bytes of the pin's SHA-256>`.
//!
//! Whether to announce at all is the `[discovery] mdns` switch in `berth.toml`; the
//! config and the daemon wiring call [`announce`] and keep the [`MdnsHandle`].
//!
//! The switch should be off on an image that runs avahi (a static avahi service file
//! announces the service there instead): two responders would both answer for
//! `<hostname>.local`, and any address avahi publishes that we do not counts as a name
//! conflict to mdns-sd's probe, which then announces us as `<hostname>-2.local`.
//!
//! How: the `mdns-sd` crate runs one thread of its own (`mDNS_daemon`) that owns the
//! sockets (UDP 5353, opened with `SO_REUSEADDR`/`SO_REUSEPORT`), probes for name
//! conflicts, answers queries and re-reads the host's addresses every 5 s. We talk to it
//! over its bounded command channel, which never blocks. Its own logging is compiled out
//! (`default-features = false`; turned on, it would pour its many debug lines into the
//! debug log through the `log` bridge), so a second, small thread (`berth-mdns-log`)
//! turns the daemon's events (errors, name conflicts, address changes) into `tracing`
//! records; it ends when the daemon does.

use std::fmt;
use std::time::Duration;

use base64::Engine as _;
use base64::alphabet::URL_SAFE;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};
use mdns_sd::{
    DaemonEvent, DaemonStatus, IfKind, Receiver, ServiceDaemon, ServiceInfo, UnregisterStatus,
};

/// The DNS-SD service type Berth announces and apps browse for.
pub const SERVICE_TYPE: &str = "_berth._tcp.local.";

/// The value of the `v` TXT key: the version of this TXT layout.
pub const TXT_VERSION: &str = "1";

/// How many bytes of the pin's SHA-256 go into the `pin` TXT key (8 bytes, 11 characters):
/// enough to tell a handful of boxes apart, too short to stand in for the full pin.
pub const PIN_PREFIX_LEN: usize = 8;

/// The stable `tracing` target of this module.
const TARGET: &str = "berth::mdns";

/// The longest [`MdnsHandle::stop`] waits for each of the daemon's two answers
/// (unregistered, shut down). The daemon answers within microseconds when it is alive;
/// this only bounds the wait when it is not.
const STOP_WAIT: Duration = Duration::from_millis(500);

/// The forwarding thread only formats log lines.
const LOG_THREAD_STACK: usize = 64 * 1024;

/// Lenient on padding: the pin is `base64url` of 32 bytes, written with or without `=`.
const PIN_ENGINE: GeneralPurpose = GeneralPurpose::new(
    &URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// What the daemon asks to be announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    /// The host's name, one DNS label (`berth`, not `berth.local`).
    pub hostname: String,
    /// The port of the HTTPS API.
    pub port: u16,
    /// The TLS CA pin, `sha256/<base64url of 32 bytes>`.
    pub pin: String,
}

/// Everything that goes on the wire for one [`Announcement`], except the addresses
/// (mdns-sd reads those from the host's interfaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRecord {
    /// Always [`SERVICE_TYPE`].
    pub service_type: &'static str,
    /// The instance name: the hostname.
    pub instance: String,
    /// The SRV target: `<hostname>.local.`.
    pub host: String,
    pub port: u16,
    /// TXT key/value pairs, in the order they are sent: `v`, then `pin`.
    pub txt: Vec<(&'static str, String)>,
}

impl ServiceRecord {
    /// `<instance>.<service type>`, the name mdns-sd registers and browsers resolve.
    /// (The instance is a DNS label, so it needs no escaping.)
    pub fn fullname(&self) -> String {
        format!("{}.{}", self.instance, self.service_type)
    }

    /// The mdns-sd description: no fixed addresses, `addr_auto` on, so the daemon
    /// publishes the host's current addresses and follows them as they change.
    fn service_info(&self) -> Result<ServiceInfo, MdnsError> {
        let txt: Vec<(&str, &str)> = self.txt.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let info = ServiceInfo::new(
            self.service_type,
            &self.instance,
            &self.host,
            (),
            self.port,
            txt.as_slice(),
        )
        .map_err(|source| MdnsError::Daemon {
            context: "cannot describe the DNS-SD service",
            source,
        })?;
        Ok(info.enable_addr_auto())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MdnsError {
    #[error("invalid TLS pin {pin:?} for the DNS-SD announcement: {reason}")]
    Pin { pin: String, reason: &'static str },
    #[error(
        "hostname {0:?} cannot be announced: it must be one DNS label of 1 to 63 letters, \
         digits and '-', not starting or ending with '-'"
    )]
    Hostname(String),
    #[error("port 0 cannot be announced")]
    Port,
    #[error("{context}: {source}")]
    Daemon {
        context: &'static str,
        source: mdns_sd::Error,
    },
    #[error("cannot start the mDNS log thread: {0}")]
    Thread(std::io::Error),
}

/// What [`announce`] would put on the wire for `a`, without touching the network.
///
/// Errors: a hostname that is not a single DNS label ([`MdnsError::Hostname`]), port 0
/// ([`MdnsError::Port`]), a pin that is not `sha256/` + base64url of 32 bytes
/// ([`MdnsError::Pin`]).
pub fn service_record(a: &Announcement) -> Result<ServiceRecord, MdnsError> {
    if !is_dns_label(&a.hostname) {
        return Err(MdnsError::Hostname(a.hostname.clone()));
    }
    if a.port == 0 {
        return Err(MdnsError::Port);
    }
    let pin = pin_prefix(&a.pin)?;
    Ok(ServiceRecord {
        service_type: SERVICE_TYPE,
        instance: a.hostname.clone(),
        host: format!("{}.local.", a.hostname),
        port: a.port,
        txt: vec![("v", TXT_VERSION.to_owned()), ("pin", pin)],
    })
}

/// The `pin` TXT value: base64url without padding of the first [`PIN_PREFIX_LEN`] bytes
/// of the SHA-256 that `pin` (`sha256/<base64url>`) carries.
pub fn pin_prefix(pin: &str) -> Result<String, MdnsError> {
    let bad = |reason| MdnsError::Pin {
        pin: pin.to_owned(),
        reason,
    };
    let encoded = pin
        .strip_prefix("sha256/")
        .ok_or_else(|| bad("it does not start with \"sha256/\""))?;
    let digest = PIN_ENGINE
        .decode(encoded)
        .map_err(|_| bad("the part after \"sha256/\" is not base64url"))?;
    if digest.len() != 32 {
        return Err(bad("the digest is not 32 bytes long"));
    }
    Ok(URL_SAFE_NO_PAD.encode(&digest[..PIN_PREFIX_LEN]))
}

/// RFC 1123 host label: what `<hostname>.local` resolvers and phones accept.
fn is_dns_label(s: &str) -> bool {
    (1..=63).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Starts the mDNS daemon and announces `a` on every non-loopback interface.
///
/// Returns once the service is handed to the daemon thread; probing for name conflicts
/// and the announcements themselves follow on that thread (the first answer goes out
/// after about a second). Loopback is left out: no phone is on it, and a local client
/// has the control socket.
///
/// Errors: those of [`service_record`]; [`MdnsError::Daemon`] when mdns-sd cannot start
/// or refuses the service; [`MdnsError::Thread`] when the log thread cannot start.
/// Failures after this returns (a socket error, a name conflict) are logged, not returned.
pub fn announce(a: &Announcement) -> Result<MdnsHandle, MdnsError> {
    let record = service_record(a)?;
    let info = record.service_info()?;
    let daemon = ServiceDaemon::new().map_err(|source| MdnsError::Daemon {
        context: "cannot start the mDNS daemon",
        source,
    })?;
    // From here on an early return drops the handle, which shuts the daemon down.
    let handle = MdnsHandle {
        daemon: Some(daemon.clone()),
        fullname: info.get_fullname().to_owned(),
    };
    let daemon_err = |context| move |source| MdnsError::Daemon { context, source };

    daemon
        .disable_interface(vec![IfKind::LoopbackV4, IfKind::LoopbackV6])
        .map_err(daemon_err("cannot leave loopback out of the announcement"))?;
    // Subscribe before registering so that an error about the service is seen.
    let events = daemon
        .monitor()
        .map_err(daemon_err("cannot follow the mDNS daemon's events"))?;
    std::thread::Builder::new()
        .name("berth-mdns-log".to_owned())
        .stack_size(LOG_THREAD_STACK)
        .spawn(move || log_events(&events))
        .map_err(MdnsError::Thread)?;
    daemon
        .register(info)
        .map_err(daemon_err("cannot register the DNS-SD service"))?;

    tracing::info!(
        target: TARGET,
        service = %handle.fullname,
        host = %record.host,
        port = record.port,
        "announcing on the LAN by DNS-SD"
    );
    Ok(handle)
}

/// Turns the daemon's events into log records until the daemon exits (which drops the
/// sending side and ends the loop).
fn log_events(events: &Receiver<DaemonEvent>) {
    while let Ok(event) = events.recv() {
        match event {
            DaemonEvent::Error(e) => {
                tracing::warn!(target: TARGET, error = %e, "mDNS daemon error");
            }
            DaemonEvent::NameChange(change) => tracing::warn!(
                target: TARGET,
                original = %change.original,
                new_name = %change.new_name,
                "another host on the LAN uses this name; announcing under the new one"
            ),
            DaemonEvent::IpAdd(ip) => {
                tracing::info!(target: TARGET, %ip, "announcing on a new address");
            }
            DaemonEvent::IpDel(ip) => {
                tracing::info!(target: TARGET, %ip, "address gone, no longer announced");
            }
            DaemonEvent::Announce(service, addrs) => {
                tracing::debug!(target: TARGET, %service, %addrs, "announced");
            }
            DaemonEvent::Respond(intf) => {
                tracing::trace!(target: TARGET, %intf, "answered a query");
            }
            other => tracing::debug!(target: TARGET, event = ?other, "mDNS daemon event"),
        }
    }
}

/// A running announcement. [`stop`](Self::stop) or dropping it withdraws the service
/// (goodbye packets, so browsers forget it at once instead of after the records' TTL)
/// and shuts the mDNS daemon down.
pub struct MdnsHandle {
    /// `None` once stopped.
    daemon: Option<ServiceDaemon>,
    fullname: String,
}

impl fmt::Debug for MdnsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MdnsHandle")
            .field("fullname", &self.fullname)
            .field("running", &self.daemon.is_some())
            .finish()
    }
}

impl MdnsHandle {
    /// The announced instance, `<hostname>._berth._tcp.local.`.
    pub fn fullname(&self) -> &str {
        &self.fullname
    }

    /// Withdraws the service and stops the daemon thread.
    ///
    /// The packets go out from the daemon's thread; this waits for its two
    /// acknowledgements, each for at most 500 ms (microseconds when the daemon is
    /// alive), so it may be called from async code. Problems are logged, not returned:
    /// there is nothing a caller on its way out could do about them.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        let Some(daemon) = self.daemon.take() else {
            return;
        };
        // One goodbye per interface. mdns-sd would repeat it 120 ms later, but the
        // shutdown below cancels that repeat; waiting for it is not worth holding a
        // runtime thread on the way out.
        match daemon.unregister(&self.fullname) {
            Ok(answer) => match answer.recv_timeout(STOP_WAIT) {
                Ok(UnregisterStatus::OK) => tracing::info!(
                    target: TARGET,
                    service = %self.fullname,
                    "withdrew the DNS-SD announcement"
                ),
                Ok(UnregisterStatus::NotFound) => tracing::debug!(
                    target: TARGET,
                    service = %self.fullname,
                    "the service was not registered"
                ),
                Err(e) => tracing::warn!(
                    target: TARGET,
                    error = %e,
                    "no answer from the mDNS daemon to unregister"
                ),
            },
            Err(e) => tracing::warn!(target: TARGET, error = %e, "cannot unregister the service"),
        }
        match daemon.shutdown() {
            Ok(answer) => match answer.recv_timeout(STOP_WAIT) {
                Ok(DaemonStatus::Shutdown) => {}
                Ok(status) => {
                    tracing::warn!(target: TARGET, ?status, "the mDNS daemon did not shut down");
                }
                Err(e) => tracing::warn!(
                    target: TARGET,
                    error = %e,
                    "no answer from the mDNS daemon to shut down"
                ),
            },
            // Already gone: nothing left to stop.
            Err(mdns_sd::Error::DaemonShutdown) => {}
            Err(e) => tracing::warn!(target: TARGET, error = %e, "cannot stop the mDNS daemon"),
        }
    }
}

impl Drop for MdnsHandle {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// Name of an interface the announcement can go out on: up, not loopback, not
/// point-to-point, with an address, and flagged `IFF_MULTICAST` by the kernel.
/// `None` on a host without one (or where `/sys/class/net` cannot say): the daemon
/// then says that nobody will hear the announcement.
pub fn multicast_interface() -> Option<String> {
    const IFF_UP: u32 = 0x1;
    const IFF_MULTICAST: u32 = 0x1000;
    let flags = |name: &str| -> Option<u32> {
        let text = std::fs::read_to_string(format!("/sys/class/net/{name}/flags")).ok()?;
        u32::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
    };
    if_addrs::get_if_addrs()
        .ok()?
        .into_iter()
        .filter(|i| !i.is_loopback() && !i.is_p2p() && i.is_oper_up())
        .find(|i| flags(&i.name).is_some_and(|f| f & IFF_UP != 0 && f & IFF_MULTICAST != 0))
        .map(|i| i.name)
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use mdns_sd::ServiceEvent;

    use super::*;

    /// A pin whose first digest bytes exercise base64url's `-` and `_`.
    fn digest() -> [u8; 32] {
        let mut d = [0u8; 32];
        d[..8].copy_from_slice(&[0xfb, 0xff, 0xbf, 0x00, 0x01, 0x02, 0x03, 0x04]);
        for (i, b) in d.iter_mut().enumerate().skip(8) {
            *b = i as u8;
        }
        d
    }

    fn pin() -> String {
        format!("sha256/{}", URL_SAFE_NO_PAD.encode(digest()))
    }

    fn announcement(hostname: &str) -> Announcement {
        Announcement {
            hostname: hostname.to_owned(),
            port: 3535,
            pin: pin(),
        }
    }

    #[test]
    fn record_names_type_host_port_and_txt() {
        let record = service_record(&announcement("berth")).expect("valid announcement");
        assert_eq!(
            record,
            ServiceRecord {
                service_type: "_berth._tcp.local.",
                instance: "berth".to_owned(),
                host: "berth.local.".to_owned(),
                port: 3535,
                txt: vec![("v", "1".to_owned()), ("pin", "-_-_AAECAwQ".to_owned())],
            }
        );
        assert_eq!(record.fullname(), "berth._berth._tcp.local.");
    }

    #[test]
    fn pin_prefix_is_first_eight_bytes_unpadded() {
        assert_eq!(pin_prefix(&pin()).expect("valid pin"), "-_-_AAECAwQ");
        // A padded pin means the same digest.
        let padded = format!(
            "sha256/{}",
            base64::engine::general_purpose::URL_SAFE.encode(digest())
        );
        assert!(padded.ends_with('='));
        assert_eq!(pin_prefix(&padded).expect("valid pin"), "-_-_AAECAwQ");
    }

    #[test]
    fn malformed_pins_are_refused() {
        let standard_alphabet = format!(
            "sha256/{}",
            base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest())
        );
        let short = format!("sha256/{}", URL_SAFE_NO_PAD.encode([7u8; 31]));
        let long = format!("sha256/{}", URL_SAFE_NO_PAD.encode([7u8; 33]));
        let bare = URL_SAFE_NO_PAD.encode(digest());
        let sha1 = format!("sha1/{bare}");
        for bad in [
            "",
            "sha256/",
            "sha256/!!!!",
            bare.as_str(),
            sha1.as_str(),
            standard_alphabet.as_str(),
            short.as_str(),
            long.as_str(),
        ] {
            let err = pin_prefix(bad).expect_err(bad);
            assert!(matches!(err, MdnsError::Pin { .. }), "{bad:?}: {err}");
            let a = Announcement {
                pin: bad.to_owned(),
                ..announcement("berth")
            };
            assert!(matches!(service_record(&a), Err(MdnsError::Pin { .. })));
        }
    }

    #[test]
    fn hostname_must_be_one_label() {
        for good in ["berth", "Berth-2", "b", &"a".repeat(63)] {
            service_record(&announcement(good)).expect(good);
        }
        for bad in [
            "",
            "berth.local",
            "berth.",
            "-berth",
            "berth-",
            "ber th",
            "berth_1",
            "bérth",
            &"a".repeat(64),
        ] {
            assert!(
                matches!(
                    service_record(&announcement(bad)),
                    Err(MdnsError::Hostname(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn port_zero_is_refused() {
        let a = Announcement {
            port: 0,
            ..announcement("berth")
        };
        assert!(matches!(service_record(&a), Err(MdnsError::Port)));
    }

    #[test]
    fn service_info_follows_the_record_and_the_host_addresses() {
        let record = service_record(&announcement("berth")).expect("valid announcement");
        let info = record.service_info().expect("mdns-sd accepts the record");
        assert_eq!(info.get_type(), SERVICE_TYPE);
        assert_eq!(info.get_fullname(), "berth._berth._tcp.local.");
        assert_eq!(info.get_hostname(), "berth.local.");
        assert_eq!(info.get_port(), 3535);
        assert_eq!(info.get_property_val_str("v"), Some("1"));
        assert_eq!(info.get_property_val_str("pin"), Some("-_-_AAECAwQ"));
        let keys: Vec<&str> = info.get_properties().iter().map(|p| p.key()).collect();
        assert_eq!(keys, ["v", "pin"]);
        assert!(info.get_addresses().is_empty());
        assert!(info.is_addr_auto());
    }

    /// Announces for real and browses from a second mdns-sd daemon in this process
    /// (multicast loopback on the LAN interface delivers our own packets to it): the
    /// instance must resolve with its port and TXT, and vanish after `stop`.
    #[test]
    fn a_browser_on_the_lan_resolves_the_announcement() {
        let Some(interface) = multicast_interface() else {
            eprintln!(
                "skipped: no interface that is up, not loopback and multicast-capable \
                 (IFF_MULTICAST in /sys/class/net/*/flags), so nothing can be announced"
            );
            return;
        };
        eprintln!("announcing over {interface}");
        // Unique per run: other test runs on this host or LAN must not answer for us.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let hostname = format!("berth-test-{}-{nanos}", std::process::id());
        let a = announcement(&hostname);
        let fullname = format!("{hostname}.{SERVICE_TYPE}");

        let browser = ServiceDaemon::new().expect("browser daemon");
        let events = browser.browse(SERVICE_TYPE).expect("browse");
        let handle = announce(&a).expect("announce");
        assert_eq!(handle.fullname(), fullname);

        let deadline = Instant::now() + Duration::from_secs(8);
        let resolved = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match events.recv_timeout(left) {
                Ok(ServiceEvent::ServiceResolved(s)) if s.get_fullname() == fullname => break s,
                Ok(_) => {}
                Err(e) => panic!("{fullname} was not resolved within 8 s: {e}"),
            }
        };
        assert_eq!(resolved.get_port(), 3535);
        assert_eq!(resolved.get_hostname(), format!("{hostname}.local."));
        assert_eq!(resolved.get_property_val_str("v"), Some("1"));
        assert_eq!(resolved.get_property_val_str("pin"), Some("-_-_AAECAwQ"));
        assert!(!resolved.get_addresses().is_empty());
        assert!(
            resolved
                .get_addresses()
                .iter()
                .all(|ip| !ip.to_ip_addr().is_loopback()),
            "loopback announced: {:?}",
            resolved.get_addresses()
        );

        // Goodbye packets: the browser drops the instance well before its TTL (75 min).
        handle.stop();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match events.recv_timeout(left) {
                Ok(ServiceEvent::ServiceRemoved(_, name)) if name == fullname => break,
                Ok(_) => {}
                Err(e) => panic!("{fullname} was not withdrawn within 5 s: {e}"),
            }
        }
        let _ = browser.shutdown();
    }
}

//! What the leaf is issued for: this host's name as a DNS label, its LAN addresses, and
//! [`HostNames`], the list of names a leaf must carry.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rcgen::SanType;
use rustls::pki_types::{DnsName, ServerName};

/// The label used when the hostname cannot be made into a DNS label.
const FALLBACK_HOSTNAME: &str = "berth";

/// The names the leaf must be valid for: the hostname, `<hostname>.local`, `localhost`,
/// `127.0.0.1`, `::1` and the LAN addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostNames {
    hostname: String,
    ips: Vec<IpAddr>,
}

impl HostNames {
    /// This host, now: [`hostname`] and [`lan_ips`].
    pub fn current() -> Self {
        HostNames {
            hostname: hostname(),
            ips: lan_ips(),
        }
    }

    /// `hostname` is made into a DNS label (see [`hostname`]).
    pub fn new(hostname: &str, ips: impl IntoIterator<Item = IpAddr>) -> Self {
        let mut ips: Vec<IpAddr> = ips.into_iter().collect();
        ips.sort();
        ips.dedup();
        HostNames {
            hostname: dns_label(hostname),
            ips,
        }
    }

    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    pub fn ips(&self) -> &[IpAddr] {
        &self.ips
    }

    /// Every name the leaf must carry, hostnames first, without duplicates.
    pub(super) fn names(&self) -> Vec<SubjectName> {
        let mut names = vec![
            SubjectName::Dns(self.hostname.clone()),
            SubjectName::Dns(format!("{}.local", self.hostname)),
            SubjectName::Dns("localhost".to_string()),
            SubjectName::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            SubjectName::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        ];
        for ip in &self.ips {
            if !names.contains(&SubjectName::Ip(*ip)) {
                names.push(SubjectName::Ip(*ip));
            }
        }
        names
    }
}

/// One name a leaf is issued for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SubjectName {
    Dns(String),
    Ip(IpAddr),
}

impl SubjectName {
    pub(super) fn server_name(&self) -> Option<ServerName<'static>> {
        match self {
            SubjectName::Dns(name) => DnsName::try_from(name.clone())
                .ok()
                .map(ServerName::DnsName),
            SubjectName::Ip(ip) => Some(ServerName::IpAddress((*ip).into())),
        }
    }

    pub(super) fn san(&self) -> Result<SanType, rcgen::Error> {
        Ok(match self {
            SubjectName::Dns(name) => SanType::DnsName(name.clone().try_into()?),
            SubjectName::Ip(ip) => SanType::IpAddress(*ip),
        })
    }
}

impl std::fmt::Display for SubjectName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SubjectName::Dns(name) => f.write_str(name),
            SubjectName::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// The host's name as a DNS label: the kernel's node name (uname(2)), its first label,
/// lowercased, anything but letters, digits and `-` replaced by `-`; `berth` if nothing
/// usable is left.
///
/// uname(2), not `/proc/sys/kernel/hostname`: the systemd unit's `ProcSubset=pid` hides
/// `/proc/sys`, and reading it there gave every appliance the name `berth` (the image
/// boot test found it).
pub fn hostname() -> String {
    let uname = rustix::system::uname();
    dns_label(&uname.nodename().to_string_lossy())
}

fn dns_label(raw: &str) -> String {
    let first = raw.trim().split('.').next().unwrap_or_default();
    let mapped: String = first
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let mut label = mapped.trim_matches('-').to_string();
    label.truncate(63);
    let label = label.trim_end_matches('-');
    // An all-digit label would read as part of an IPv4 address and is refused as a name.
    match DnsName::try_from(label) {
        Ok(_) if !label.is_empty() => label.to_string(),
        _ => FALLBACK_HOSTNAME.to_string(),
    }
}

/// The addresses this host can be reached at on the LAN, sorted: every non-loopback
/// address of every interface that is up.
///
/// IPv6 link-local addresses (fe80::/10) are left out: they only work with a zone id
/// (`fe80::1%eth0`), which a certificate cannot name and URLs and phones handle badly;
/// the board stays reachable by its other addresses and by `<hostname>.local`.
pub fn lan_ips() -> Vec<IpAddr> {
    let interfaces = match if_addrs::get_if_addrs() {
        Ok(interfaces) => interfaces,
        Err(e) => {
            tracing::warn!(target: "berth::tls", error = %e, "cannot list the network interfaces");
            return Vec::new();
        }
    };
    let mut ips: Vec<IpAddr> = interfaces
        .iter()
        .filter(|interface| interface.is_oper_up() && !interface.is_loopback())
        .map(|interface| interface.ip())
        .filter(|ip| !is_ipv6_link_local(ip))
        .collect();
    ips.sort();
    ips.dedup();
    ips
}

fn is_ipv6_link_local(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.is_unicast_link_local())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostnames_become_dns_labels() {
        for (raw, label) in [
            ("berth-box\n", "berth-box"),
            ("Berth_Box.lan", "berth-box"),
            ("-weird name-", "weird-name"),
            ("", "berth"),
            ("...", "berth"),
            ("1234", "berth"),
            ("héllo", "h-llo"),
        ] {
            assert_eq!(dns_label(raw), label, "{raw:?}");
        }
        assert_eq!(dns_label(&"a".repeat(100)).len(), 63);
        let current = hostname();
        assert!(DnsName::try_from(current.as_str()).is_ok(), "{current}");
        // uname(2) and procfs name the same host, where procfs is readable.
        if let Ok(proc_name) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
            assert_eq!(current, dns_label(&proc_name));
        }
    }

    #[test]
    fn lan_addresses_leave_out_loopback_and_ipv6_link_local() {
        for ip in lan_ips() {
            assert!(!ip.is_loopback() && !is_ipv6_link_local(&ip), "{ip}");
        }
        assert!(is_ipv6_link_local(&"fe80::1".parse().expect("ip")));
        assert!(is_ipv6_link_local(&"febf::1".parse().expect("ip")));
        assert!(!is_ipv6_link_local(&"fd00::1".parse().expect("ip")));
        assert!(!is_ipv6_link_local(&"169.254.1.1".parse().expect("ip")));
    }
}

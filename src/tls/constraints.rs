//! What the local CA may sign for: its X.509 name constraints (RFC 5280, 4.2.1.10),
//! and which of the host's names fall inside them.
//!
//! Why: a phone that installed the local CA trusts whatever it signs. Without
//! constraints, whoever copies `tls/ca.key` off the card could mint a certificate for
//! any web site that phone visits. With them (critical, so a verifier that cannot check
//! them refuses the CA), the CA is good only for this box's names on the LAN: its host
//! name, `*.local`, `localhost`, and the private, loopback and link-local address
//! ranges.
//!
//! A leaf may carry only names inside them: a verifier that enforces them (webpki,
//! browsers, Android, iOS) refuses a leaf with *any* name outside, not just the one
//! asked for. So a public address of the box (a global IPv6 address, a public IPv4
//! one) is left off the leaf, and so is the host name after a rename (the CA was made
//! for the old one; `<new name>.local` is still covered). Replacing the CA for those
//! would break every pairing on a DHCP or hostname change.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rcgen::{CidrSubnet, GeneralSubtree, NameConstraints};

use super::names::SubjectName;

/// The address ranges the CA may sign for: private (RFC 1918), loopback, link-local,
/// IPv6 unique-local (where home routers number their LANs), IPv6 link-local and
/// loopback.
const PERMITTED_RANGES: [(IpAddr, u8); 8] = [
    (IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 8),
    (IpAddr::V4(Ipv4Addr::new(172, 16, 0, 0)), 12),
    (IpAddr::V4(Ipv4Addr::new(192, 168, 0, 0)), 16),
    (IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)), 8),
    (IpAddr::V4(Ipv4Addr::new(169, 254, 0, 0)), 16),
    (IpAddr::V6(Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0)), 7),
    (IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0)), 10),
    (IpAddr::V6(Ipv6Addr::LOCALHOST), 128),
];

/// One permitted subtree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Subtree {
    /// A DNS name and every name under it (`local` permits `box.local`).
    Dns(String),
    /// An address range.
    Ip { network: IpAddr, prefix: u8 },
}

impl Subtree {
    fn permits(&self, name: &SubjectName) -> bool {
        match (self, name) {
            (Subtree::Dns(base), SubjectName::Dns(name)) => {
                let (base, name) = (base.to_ascii_lowercase(), name.to_ascii_lowercase());
                name == base || name.ends_with(&format!(".{base}"))
            }
            (Subtree::Ip { network, prefix }, SubjectName::Ip(ip)) => {
                in_range(*ip, *network, *prefix)
            }
            _ => false,
        }
    }

    fn is_dns(&self) -> bool {
        matches!(self, Subtree::Dns(_))
    }
}

impl std::fmt::Display for Subtree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subtree::Dns(name) => f.write_str(name),
            Subtree::Ip { network, prefix } => write!(f, "{network}/{prefix}"),
        }
    }
}

fn in_range(ip: IpAddr, network: IpAddr, prefix: u8) -> bool {
    match (ip, network) {
        (IpAddr::V4(ip), IpAddr::V4(network)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(ip) & mask == u32::from(network) & mask
        }
        (IpAddr::V6(ip), IpAddr::V6(network)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(ip) & mask == u128::from(network) & mask
        }
        _ => false,
    }
}

/// The CA's permitted subtrees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Permitted(Vec<Subtree>);

impl Permitted {
    /// What a new CA for `hostname` may sign for: the host name, `local`, `localhost`
    /// and [`PERMITTED_RANGES`].
    pub(super) fn for_host(hostname: &str) -> Self {
        let mut subtrees = vec![Subtree::Dns(hostname.to_string())];
        for name in ["local", "localhost"] {
            if !subtrees.contains(&Subtree::Dns(name.to_string())) {
                subtrees.push(Subtree::Dns(name.to_string()));
            }
        }
        subtrees.extend(
            PERMITTED_RANGES
                .iter()
                .map(|&(network, prefix)| Subtree::Ip { network, prefix }),
        );
        Permitted(subtrees)
    }

    /// The subtrees read back from a certificate.
    pub(super) fn from_subtrees(subtrees: Vec<Subtree>) -> Self {
        Permitted(subtrees)
    }

    /// Whether a leaf may carry `name`. As RFC 5280 has it, a kind of name (DNS, IP)
    /// with no subtree of its kind is not constrained.
    pub(super) fn permits(&self, name: &SubjectName) -> bool {
        let kind_is_dns = matches!(name, SubjectName::Dns(_));
        let of_kind: Vec<&Subtree> = self
            .0
            .iter()
            .filter(|s| s.is_dns() == kind_is_dns)
            .collect();
        of_kind.is_empty() || of_kind.iter().any(|subtree| subtree.permits(name))
    }

    /// `names` split into those a leaf may carry and those it may not, in order.
    pub(super) fn split(&self, names: Vec<SubjectName>) -> (Vec<SubjectName>, Vec<SubjectName>) {
        names.into_iter().partition(|name| self.permits(name))
    }

    /// The extension rcgen writes (critical, as rcgen always marks it).
    pub(super) fn name_constraints(&self) -> NameConstraints {
        let permitted_subtrees = self
            .0
            .iter()
            .map(|subtree| match subtree {
                Subtree::Dns(name) => GeneralSubtree::DnsName(name.clone()),
                Subtree::Ip { network, prefix } => {
                    GeneralSubtree::IpAddress(CidrSubnet::from_addr_prefix(*network, *prefix))
                }
            })
            .collect();
        NameConstraints {
            permitted_subtrees,
            excluded_subtrees: Vec::new(),
        }
    }

    /// The subtrees as `berthd tls show` prints them.
    pub(super) fn describe(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dns(name: &str) -> SubjectName {
        SubjectName::Dns(name.to_string())
    }

    fn ip(ip: &str) -> SubjectName {
        SubjectName::Ip(ip.parse().expect("ip"))
    }

    #[test]
    fn a_new_ca_permits_the_host_the_lan_and_nothing_else() {
        let permitted = Permitted::for_host("berth-box");
        for name in [
            dns("berth-box"),
            dns("berth-box.local"),
            dns("BERTH-BOX.LOCAL"),
            dns("other.local"),
            dns("localhost"),
            ip("10.1.2.3"),
            ip("172.16.0.1"),
            ip("172.31.255.255"),
            ip("192.168.1.40"),
            ip("127.0.0.1"),
            ip("169.254.7.7"),
            ip("fd00::7"),
            ip("fc00::1"),
            ip("fe80::1"),
            ip("::1"),
        ] {
            assert!(permitted.permits(&name), "{name}");
        }
        for name in [
            dns("example.com"),
            dns("berth-box.example.com"),
            dns("notlocal"),
            dns("local.example"),
            ip("172.32.0.1"),
            ip("192.0.2.7"),
            ip("8.8.8.8"),
            ip("100.64.0.1"),
            ip("2001:db8::7"),
            ip("::2"),
            ip("::ffff:192.168.1.1"),
        ] {
            assert!(!permitted.permits(&name), "{name}");
        }
        assert_eq!(
            permitted.describe(),
            [
                "berth-box",
                "local",
                "localhost",
                "10.0.0.0/8",
                "172.16.0.0/12",
                "192.168.0.0/16",
                "127.0.0.0/8",
                "169.254.0.0/16",
                "fc00::/7",
                "fe80::/10",
                "::1/128"
            ]
        );
        // A host called `localhost` is not listed twice.
        assert_eq!(Permitted::for_host("localhost").describe().len(), 10);
    }

    #[test]
    fn a_kind_without_subtrees_is_not_constrained() {
        let only_dns = Permitted::from_subtrees(vec![Subtree::Dns("local".into())]);
        assert!(only_dns.permits(&ip("8.8.8.8")));
        assert!(!only_dns.permits(&dns("example.com")));
        let (inside, outside) = only_dns.split(vec![dns("a.local"), dns("b.com"), ip("::1")]);
        assert_eq!(inside, [dns("a.local"), ip("::1")]);
        assert_eq!(outside, [dns("b.com")]);
    }
}

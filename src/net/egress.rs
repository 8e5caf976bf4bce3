//! The egress policy: every outbound fetch berthd makes on a client's behalf (LNURL-pay
//! and Lightning addresses, Nostr relays, webhooks and push) goes through
//! one [`Egress`], so that a paired phone cannot turn the box into a way into the home
//! network, nor exhaust it with one slow or huge answer.
//!
//! - **Where**: by default only public unicast addresses (no loopback, private,
//!   link-local, shared, multicast, documentation or reserved ranges), checked after
//!   the name is resolved and on every connection: the resolver hands the HTTP client
//!   only the addresses it checked, so there is no window for a DNS answer to change
//!   between the check and the connection. The owner may allow names, addresses and
//!   ranges in `berth.toml` (`[egress] allow`), for a home LNbits or a test server.
//! - **How**: `https` only, except to a host the owner allowed (LUD-01 permits plain
//!   `http` for onion services alone, and berthd has no Tor); no proxy from the
//!   environment (a proxy would resolve names where the policy cannot see them);
//!   a redirect only to the same host, at most [`MAX_REDIRECTS`].
//! - **How much**: connect within [`Limits::connect`], the whole fetch within
//!   [`Limits::total`], an answer of at most [`Limits::body`] bytes, and at most
//!   [`Limits::per_caller`] fetches at once per credential and [`Limits::overall`] in
//!   all.
//!
//! A refused destination is refused before any connection is made, with the rule
//! that refused it; nothing about the target is probed.
//!
//! A destination the owner registered (a webhook, whose URL only an admin credential
//! can set) is allowed by that registration: [`Egress::registered`] reaches it
//! wherever its name points, over `http` or `https` (home automation lives on the
//! LAN), but follows no redirect, so the registration is the only thing that chooses
//! where a request goes. The same bounds on time, size and concurrency apply.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ipnet::IpNet;
use reqwest::Url;

/// Redirects followed at most (to the same host only).
pub const MAX_REDIRECTS: usize = 3;

/// The bounds on fetches.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub connect: Duration,
    pub total: Duration,
    pub body: usize,
    pub overall: usize,
    pub per_caller: usize,
}

impl Default for Limits {
    /// An LNURL answer is a few hundred bytes; a payee's server answers in well under a
    /// second when it answers at all.
    fn default() -> Self {
        Limits {
            connect: Duration::from_secs(5),
            total: Duration::from_secs(15),
            body: 64 * 1024,
            overall: 8,
            per_caller: 2,
        }
    }
}

/// What the owner allows beyond the public internet (`[egress] allow`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Host names, lowercase, matched exactly: any address they resolve to, and plain
    /// `http`, are allowed.
    hosts: Vec<String>,
    /// Addresses and ranges allowed whatever they are; an address literal in one may
    /// also be reached over plain `http`.
    nets: Vec<IpNet>,
    /// Every destination is allowed: the owner chose it ([`Egress::registered`]).
    everywhere: bool,
}

impl Policy {
    /// The policy from `[egress] allow`: names (`lnbits.lan`), addresses (`127.0.0.1`,
    /// `::1`) and ranges (`192.168.1.0/24`). A malformed entry is refused with why.
    pub fn from_allow(entries: &[String]) -> Result<Policy, String> {
        let mut policy = Policy::default();
        for entry in entries {
            let entry = entry.trim();
            if let Ok(net) = entry.parse::<IpNet>() {
                policy.nets.push(net.trunc());
            } else if let Ok(ip) = entry.parse::<IpAddr>() {
                policy.nets.push(IpNet::from(ip));
            } else if is_host_name(entry) {
                policy.hosts.push(entry.to_ascii_lowercase());
            } else {
                return Err(format!(
                    "[egress] allow: {entry:?} is not a host name, an address or a range \
                     (like 192.168.1.0/24)"
                ));
            }
        }
        Ok(policy)
    }

    fn allows_host(&self, host: &str) -> bool {
        if self.everywhere {
            return true;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts.contains(&host)
    }

    fn allows_ip(&self, ip: IpAddr) -> bool {
        self.everywhere || self.nets.iter().any(|net| net.contains(&ip)) || is_public_unicast(ip)
    }

    /// Of the addresses `host` resolved to, those the policy allows; refused, with
    /// why, when none is. Every connection berthd makes on a client's behalf gets its
    /// addresses from here (the HTTP client's resolver, a relay's websocket).
    fn allowed_of(&self, host: &str, found: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, String> {
        let named = self.allows_host(host);
        let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) = found
            .into_iter()
            .partition(|a| named || self.allows_ip(a.ip()));
        if allowed.is_empty() {
            let seen: Vec<String> = refused.iter().map(|a| a.ip().to_string()).collect();
            return Err(format!(
                "{host} resolves only to addresses that are not public ({}); the owner can \
                 allow it in berth.toml ([egress] allow)",
                seen.join(", ")
            ));
        }
        Ok(allowed)
    }

    /// Allowed by the owner (not merely public): such a host may be reached over
    /// plain `http`.
    fn owner_allows(&self, host: &url::Host<&str>) -> bool {
        if self.everywhere {
            return true;
        }
        match host {
            url::Host::Domain(name) => self.allows_host(name),
            url::Host::Ipv4(ip) => self.nets.iter().any(|n| n.contains(&IpAddr::V4(*ip))),
            url::Host::Ipv6(ip) => self.nets.iter().any(|n| n.contains(&IpAddr::V6(*ip))),
        }
    }
}

fn is_host_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Whether `ip` is a public unicast address: reachable on the internet, and not one
/// of the ranges a home network, the box itself or a carrier uses.
pub fn is_public_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        // Shared address space (carrier-grade NAT), RFC 6598.
        || (a == 100 && (64..128).contains(&b))
        // IETF protocol assignments, RFC 6890.
        || (a == 192 && b == 0 && c == 0)
        // Benchmarking, RFC 2544.
        || (a == 198 && (b == 18 || b == 19))
        // Reserved for future use (and 255.255.255.255).
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    // Global unicast is 2000::/3; within it, documentation (2001:db8::/32), Teredo
    // (2001::/32) and 6to4 (2002::/16), which tunnel to IPv4 addresses the policy
    // would have to check again, are refused.
    (segments[0] & 0xe000) == 0x2000
        && !(segments[0] == 0x2001 && segments[1] == 0x0db8)
        && !(segments[0] == 0x2001 && segments[1] == 0)
        && segments[0] != 0x2002
}

/// Why a fetch did not bring an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressError {
    /// The destination is not allowed; the text says by which rule. Nothing was
    /// connected to.
    #[error("{0}")]
    Refused(String),
    /// The caller (or berthd) has as many fetches under way as it may.
    #[error("{0}")]
    Busy(String),
    /// The server answered with an HTTP error status.
    #[error("the server answered HTTP {0}")]
    Status(u16),
    /// No usable answer: no connection, too slow, too large.
    #[error("{0}")]
    Failed(String),
}

/// A refusal raised inside the resolver, found again in the HTTP client's error.
#[derive(Debug)]
struct Refusal(String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// Resolves names for the HTTP client, keeping only the addresses the policy allows.
struct PolicyResolver {
    policy: Arc<Policy>,
}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = Arc::clone(&self.policy);
        Box::pin(async move {
            let host = name.as_str().to_string();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            match policy.allowed_of(&host, found) {
                Ok(allowed) => Ok(Box::new(allowed.into_iter()) as reqwest::dns::Addrs),
                Err(why) => Err(Box::new(Refusal(why)) as Box<dyn std::error::Error + Send + Sync>),
            }
        })
    }
}

/// The one way out: a client bound by the [`Policy`] and the [`Limits`].
pub struct Egress {
    policy: Arc<Policy>,
    limits: Limits,
    follow_redirects: bool,
    /// Made at the first fetch, not at the start: reqwest reads the OS's store of
    /// roots (ADR 0006) as it builds, tens of files and milliseconds that the start,
    /// and `/ping`, need not wait for.
    client: std::sync::OnceLock<Result<reqwest::Client, String>>,
    /// Fetches under way, per caller (entries removed at zero: bounded by `overall`).
    under_way: Mutex<HashMap<String, usize>>,
}

impl Egress {
    pub fn new(policy: Policy, limits: Limits) -> Result<Egress, String> {
        Egress::build(policy, limits, true)
    }

    /// The way out to destinations the owner registered (webhooks): any address, `http`
    /// or `https`, no redirect followed; the same bounds.
    pub fn registered(limits: Limits) -> Result<Egress, String> {
        let policy = Policy {
            everywhere: true,
            ..Policy::default()
        };
        Egress::build(policy, limits, false)
    }

    fn build(policy: Policy, limits: Limits, follow_redirects: bool) -> Result<Egress, String> {
        Ok(Egress {
            policy: Arc::new(policy),
            limits,
            follow_redirects,
            client: std::sync::OnceLock::new(),
            under_way: Mutex::new(HashMap::new()),
        })
    }

    fn client(&self) -> Result<&reqwest::Client, EgressError> {
        self.client
            .get_or_init(|| self.make_client())
            .as_ref()
            .map_err(|e| EgressError::Failed(e.clone()))
    }

    fn make_client(&self) -> Result<reqwest::Client, String> {
        let redirects = if !self.follow_redirects {
            reqwest::redirect::Policy::none()
        } else {
            reqwest::redirect::Policy::custom(|attempt| {
                let first = attempt.previous().first().and_then(Url::host_str);
                if attempt.previous().len() > MAX_REDIRECTS {
                    attempt.error(Refusal(format!("more than {MAX_REDIRECTS} redirects")))
                } else if first != attempt.url().host_str() {
                    let to = attempt.url().host_str().unwrap_or("?").to_string();
                    attempt.error(Refusal(format!(
                        "the server redirected to another host ({to}), which is refused"
                    )))
                } else if attempt.url().scheme() != "https"
                    && attempt.previous().last().map(Url::scheme) == Some("https")
                {
                    attempt.error(Refusal("a redirect from https to http is refused".into()))
                } else {
                    attempt.follow()
                }
            })
        };
        reqwest::Client::builder()
            .dns_resolver(Arc::new(PolicyResolver {
                policy: Arc::clone(&self.policy),
            }))
            .no_proxy()
            .redirect(redirects)
            .connect_timeout(self.limits.connect)
            .timeout(self.limits.total)
            .user_agent(concat!("berthd/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("building the outbound HTTP client: {e}"))
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Whether `url` may be fetched at all, before any name is resolved: the scheme,
    /// and an address literal's range. (Names are checked as they resolve.)
    pub fn check(&self, url: &Url) -> Result<(), EgressError> {
        self.check_as(url, "https", "http")
    }

    /// Whether a long-lived websocket to `url` (a Nostr relay) may be opened: `wss`,
    /// or plain `ws` to a host the owner allows, as [`Egress::check`] for fetches.
    pub fn check_websocket(&self, url: &Url) -> Result<(), EgressError> {
        self.check_as(url, "wss", "ws")
    }

    fn check_as(&self, url: &Url, secure: &str, plain: &str) -> Result<(), EgressError> {
        let host = url
            .host()
            .ok_or_else(|| EgressError::Refused(format!("{url} names no host")))?;
        match url.scheme() {
            s if s == secure => {}
            s if s == plain && self.policy.owner_allows(&host) => {}
            s if s == plain => {
                return Err(EgressError::Refused(format!(
                    "plain {plain} to {host} is refused: only {secure}, or a host the owner \
                     allows in berth.toml ([egress] allow)"
                )));
            }
            other => {
                return Err(EgressError::Refused(format!(
                    "the scheme {other:?} is refused: only {secure}"
                )));
            }
        }
        let literal = match host {
            url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
            url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
            url::Host::Domain(_) => None,
        };
        if let Some(ip) = literal.filter(|ip| !self.policy.allows_ip(*ip)) {
            return Err(EgressError::Refused(format!(
                "{ip} is not a public address; the owner can allow it in berth.toml \
                 ([egress] allow)"
            )));
        }
        Ok(())
    }

    /// The addresses of `url`'s host that the policy allows, for a connection berthd
    /// makes itself (a relay's websocket): refused when none is.
    pub async fn resolve(&self, url: &Url) -> Result<Vec<SocketAddr>, EgressError> {
        let host = url
            .host_str()
            .ok_or_else(|| EgressError::Refused(format!("{url} names no host")))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        // The url crate knows ws's and wss's default ports.
        let port = url
            .port_or_known_default()
            .ok_or_else(|| EgressError::Refused(format!("{url} names no port")))?;
        let found: Vec<SocketAddr> = tokio::time::timeout(
            self.limits.connect,
            tokio::net::lookup_host((host.as_str(), port)),
        )
        .await
        .map_err(|_| EgressError::Failed(format!("no answer for {host} in time")))?
        .map_err(|e| EgressError::Failed(format!("cannot resolve {host}: {e}")))?
        .collect();
        self.policy
            .allowed_of(&host, found)
            .map_err(EgressError::Refused)
    }

    /// GET `url` on behalf of `caller` (a name for its credential): the answer's
    /// body, at most `Limits::body` bytes.
    pub async fn get(&self, caller: &str, url: &Url) -> Result<Vec<u8>, EgressError> {
        self.check(url)?;
        let _slot = self.take_slot(caller)?;
        let fetched = tokio::time::timeout(self.limits.total, self.fetch(url)).await;
        fetched.unwrap_or_else(|_| {
            Err(EgressError::Failed(format!(
                "no answer within {} s",
                self.limits.total.as_secs()
            )))
        })
    }

    /// POST `body` with `headers` to `url` on behalf of `caller`: the answer's status
    /// (whatever it is), its body read up to `Limits::body` bytes and dropped.
    pub async fn post(
        &self,
        caller: &str,
        url: &Url,
        headers: reqwest::header::HeaderMap,
        body: Vec<u8>,
    ) -> Result<u16, EgressError> {
        self.check(url)?;
        let _slot = self.take_slot(caller)?;
        let posted = tokio::time::timeout(self.limits.total, async {
            let mut response = self
                .client()?
                .post(url.clone())
                .headers(headers)
                .body(body)
                .send()
                .await
                .map_err(|e| self.failure(&e))?;
            let mut read = 0;
            while let Some(chunk) = response.chunk().await.map_err(|e| self.failure(&e))? {
                read += chunk.len();
                if read > self.limits.body {
                    break;
                }
            }
            Ok(response.status().as_u16())
        })
        .await;
        posted.unwrap_or_else(|_| {
            Err(EgressError::Failed(format!(
                "no answer within {} s",
                self.limits.total.as_secs()
            )))
        })
    }

    async fn fetch(&self, url: &Url) -> Result<Vec<u8>, EgressError> {
        let mut response = self
            .client()?
            .get(url.clone())
            .send()
            .await
            .map_err(|e| self.failure(&e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(EgressError::Status(status.as_u16()));
        }
        let too_large = || {
            EgressError::Failed(format!(
                "the answer is larger than {} KiB",
                self.limits.body / 1024
            ))
        };
        if response
            .content_length()
            .is_some_and(|n| n > self.limits.body as u64)
        {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.failure(&e))? {
            if body.len() + chunk.len() > self.limits.body {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// A client error in our words: the policy's refusal when it was one.
    fn failure(&self, e: &reqwest::Error) -> EgressError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(cause) = source {
            if let Some(refusal) = cause.downcast_ref::<Refusal>() {
                return EgressError::Refused(refusal.0.clone());
            }
            source = cause.source();
        }
        if e.is_timeout() {
            return EgressError::Failed(format!(
                "no answer in time (connect {} s, all {} s)",
                self.limits.connect.as_secs(),
                self.limits.total.as_secs()
            ));
        }
        if e.is_connect() {
            return EgressError::Failed("cannot connect".into());
        }
        EgressError::Failed(format!("the fetch failed: {}", without_url(e)))
    }

    fn take_slot(&self, caller: &str) -> Result<Slot<'_>, EgressError> {
        let mut under_way = self.under_way.lock().unwrap_or_else(|e| e.into_inner());
        let total: usize = under_way.values().sum();
        if total >= self.limits.overall {
            return Err(EgressError::Busy(format!(
                "berthd has {total} outbound fetches under way, its most; try again shortly"
            )));
        }
        let mine = under_way.entry(caller.to_string()).or_default();
        if *mine >= self.limits.per_caller {
            return Err(EgressError::Busy(format!(
                "this credential has {} outbound fetches under way, its most; try again \
                 shortly",
                *mine
            )));
        }
        *mine += 1;
        Ok(Slot {
            egress: self,
            caller: caller.to_string(),
        })
    }
}

/// A fetch under way, counted until dropped.
struct Slot<'a> {
    egress: &'a Egress,
    caller: String,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut under_way = self
            .egress
            .under_way
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = under_way.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                under_way.remove(&self.caller);
            }
        }
    }
}

/// reqwest's error text without the URL (which may carry a client's comment).
fn without_url(e: &reqwest::Error) -> String {
    let mut e = e.to_string();
    if let Some(at) = e.find(" for url (") {
        e.truncate(at);
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn only_public_unicast_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "2001:db8::1",
            "2002:c0a8:0101::1",
            "2001:0:4136:e378::1",
            "::ffff:192.168.1.1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public_unicast(ip(private)), "{private}");
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:1.1.1.1",
        ] {
            assert!(is_public_unicast(ip(public)), "{public}");
        }
    }

    #[test]
    fn the_owner_allows_names_addresses_and_ranges() {
        let policy = Policy::from_allow(&[
            "127.0.0.1".into(),
            "192.168.1.0/24".into(),
            "LNbits.lan".into(),
            "fd00::/8".into(),
        ])
        .expect("a policy");
        assert!(policy.allows_ip(ip("127.0.0.1")));
        assert!(!policy.allows_ip(ip("127.0.0.2")));
        assert!(policy.allows_ip(ip("192.168.1.77")));
        assert!(!policy.allows_ip(ip("192.168.2.1")));
        assert!(policy.allows_ip(ip("fd00::5")));
        assert!(policy.allows_host("lnbits.lan"));
        assert!(policy.allows_host("lnbits.lan."));
        assert!(!policy.allows_host("evil.lnbits.lan"));
        for bad in ["192.168.1.0/33", "http://x", "a b", "-x.lan", ""] {
            assert!(Policy::from_allow(&[bad.into()]).is_err(), "{bad:?}");
        }
    }

    fn egress(allow: &[&str]) -> Egress {
        let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
        Egress::new(
            Policy::from_allow(&allow).expect("policy"),
            Limits::default(),
        )
        .expect("egress")
    }

    fn url(s: &str) -> Url {
        s.parse().expect("a URL")
    }

    #[test]
    fn https_only_and_no_private_literals_unless_allowed() {
        let none = egress(&[]);
        assert!(none.check(&url("https://example.com/x")).is_ok());
        assert!(none.check(&url("https://1.1.1.1/x")).is_ok());
        for refused in [
            "http://example.com/x",
            "ftp://example.com/x",
            "https://127.0.0.1:3000/",
            "https://[::1]/",
            "https://192.168.1.1/",
            "https://[::ffff:10.0.0.1]/",
            "http://127.0.0.1/",
        ] {
            assert!(
                matches!(none.check(&url(refused)), Err(EgressError::Refused(_))),
                "{refused}"
            );
        }
        let home = egress(&["127.0.0.1", "lnbits.lan"]);
        assert!(home.check(&url("http://127.0.0.1:8080/lnurlp")).is_ok());
        assert!(home.check(&url("http://lnbits.lan/lnurlp")).is_ok());
        assert!(home.check(&url("https://127.0.0.1/")).is_ok());
        assert!(home.check(&url("http://example.com/")).is_err());
    }

    /// A relay's websocket: wss, or ws to an allowed host; its name resolved through
    /// the same rule as a fetch's (localhost is loopback, refused unless allowed).
    #[tokio::test]
    async fn websockets_follow_the_same_rules_and_resolve_through_the_policy() {
        let none = egress(&[]);
        assert!(none.check_websocket(&url("wss://relay.example/")).is_ok());
        for refused in [
            "ws://relay.example/",
            "https://relay.example/",
            "wss://10.0.0.2/",
        ] {
            assert!(
                matches!(
                    none.check_websocket(&url(refused)),
                    Err(EgressError::Refused(_))
                ),
                "{refused}"
            );
        }
        match none.resolve(&url("wss://localhost:7777/")).await {
            Err(EgressError::Refused(why)) => assert!(why.contains("not public"), "{why}"),
            other => panic!("localhost resolved: {other:?}"),
        }
        let home = egress(&["127.0.0.1"]);
        assert!(home.check_websocket(&url("ws://127.0.0.1:7777/")).is_ok());
        let addresses = home
            .resolve(&url("ws://127.0.0.1/"))
            .await
            .expect("allowed");
        assert_eq!(addresses, vec!["127.0.0.1:80".parse().expect("address")]);
    }

    #[test]
    fn fetches_are_counted_per_caller_and_overall() {
        let egress = Egress::new(
            Policy::default(),
            Limits {
                overall: 3,
                per_caller: 2,
                ..Limits::default()
            },
        )
        .expect("egress");
        let a1 = egress.take_slot("a").expect("a's first");
        let _a2 = egress.take_slot("a").expect("a's second");
        assert!(matches!(egress.take_slot("a"), Err(EgressError::Busy(_))));
        let _b1 = egress.take_slot("b").expect("b's first");
        assert!(
            matches!(egress.take_slot("c"), Err(EgressError::Busy(_))),
            "three in all"
        );
        drop(a1);
        let _c1 = egress.take_slot("c").expect("a slot freed");
        assert_eq!(egress.under_way.lock().expect("map").len(), 3);
    }
}

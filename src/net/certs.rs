//! The TLS identity of the LAN listener: a local CA, the leaf it signs, and the rustls
//! configuration that serves them (`docs/lan.md`).
//!
//! Why a CA and not one self-signed certificate: a paired phone pins the *CA*
//! (`sha256/` + base64url of the SHA-256 of its SubjectPublicKeyInfo, see [`spki_pin`]).
//! The leaf can then be re-issued whenever the board's LAN addresses change (DHCP) or its
//! expiry nears, without a restart ([`ServerIdentity::refresh`] swaps the served
//! `ServerConfig`) and without pairing again. Leaves are short-lived (≤ 397 days, which
//! browsers and phones accept); the CA lives ten years and is never replaced silently.
//!
//! Leaf NotBefore is back-dated by a day: boards have no RTC and may boot with a clock
//! somewhat behind the phone's. A leaf whose NotBefore lies ahead of the board's clock,
//! or that was issued while the clock was wildly wrong, is simply re-issued.
//!
//! Files in the generated mode (`<datadir>/tls/`, 0700), each written atomically (tmp
//! file, fsync, rename, fsync of the directory):
//! - `ca.key`, `leaf.key`: PKCS#8 PEM private keys, 0600.
//! - `ca.pem`: the CA certificate (what a client may install or pin).
//! - `leaf.pem`: the leaf then the CA — the chain served.
//!
//! The key is written before its certificate: after a crash between the two, a leaf
//! whose key does not match is re-issued, and a `ca.key` without `ca.pem` gets its
//! certificate re-made from that key (same key, same pin). A `ca.pem` without its key,
//! or with a key that is not its own, is an error telling the operator what to do.
//!
//! Certificates are read with rustls-webpki (chain, expiry and name checks) and a small
//! DER walk (SubjectPublicKeyInfo, validity and subject alternative names, for the pin
//! and `berthd tls show`) instead of a full X.509 parser.
//!
//! Everything here does blocking file I/O: call it before serving or on `spawn_blocking`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bitcoin::hashes::{Hash as _, HashEngine as _, sha256};
use chrono::{DateTime, Utc};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData as _, SanType, SerialNumber,
};
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{
    CertificateDer, DnsName, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime,
};

use crate::datadir;

/// The directory, inside the datadir, of the generated mode's files.
pub const TLS_DIR: &str = "tls";
pub const CA_CERT_FILE: &str = "ca.pem";
pub const CA_KEY_FILE: &str = "ca.key";
pub const LEAF_CERT_FILE: &str = "leaf.pem";
pub const LEAF_KEY_FILE: &str = "leaf.key";

/// The longest leaf validity (and the default): what browsers and Apple accept.
pub const MAX_LEAF_VALIDITY_DAYS: u32 = 397;
/// A leaf is re-issued when it expires within this many days.
pub const RENEW_BEFORE_DAYS: u32 = 30;
/// The local CA's lifetime.
const CA_VALIDITY_DAYS: i64 = 3650;
/// NotBefore is back-dated by this much: boards have no RTC.
const BACKDATE_DAYS: i64 = 1;
/// The label used when the hostname cannot be made into a DNS label.
const FALLBACK_HOSTNAME: &str = "berth";

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Writing a file failed (`datadir::write_atomically`).
    #[error(transparent)]
    Write(#[from] crate::datadir::DataDirError),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {reason}")]
    BadFile { path: PathBuf, reason: String },
    #[error("not a usable X.509 certificate: {0}")]
    BadCertificate(&'static str),
    #[error(
        "{cert} exists but its key {key} is missing: restore {key} from a backup, or move both \
         files away to create a new local CA (paired devices must then pair again)"
    )]
    CaKeyMissing { cert: PathBuf, key: PathBuf },
    #[error(
        "{key} is not the key of the CA certificate {cert}: restore the matching pair from a \
         backup, or move both files away to create a new local CA (paired devices must then \
         pair again)"
    )]
    CaKeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("{key} is not the key of the first certificate in {cert}")]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error(
        "{path} was not created by berthd (its subject is not a single UTF-8 common name), so \
         it cannot sign leaves: move {path} and its key away to create a new local CA"
    )]
    ForeignCa { path: PathBuf },
    #[error(
        "the local CA {path} expires at {not_after}: move the {dir} directory away to create a \
         new one (paired devices must then pair again)"
    )]
    CaExpiring {
        path: PathBuf,
        dir: PathBuf,
        not_after: DateTime<Utc>,
    },
    #[error("no TLS identity in {0} yet: berthd creates it when it first serves TLS")]
    NotCreated(PathBuf),
    #[error("the leaf validity must be 1 to {MAX_LEAF_VALIDITY_DAYS} days, not {0}")]
    Validity(u32),
    #[error("cannot create a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot build the TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("a leaf certificate just issued fails its own check: {0}")]
    SelfCheck(Renewal),
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CertError {
    let path = path.to_path_buf();
    move |source| CertError::Io { what, path, source }
}

fn bad_file(path: &Path, reason: impl Into<String>) -> CertError {
    CertError::BadFile {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Where the served certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsSource {
    /// Berth's own local CA and leaf in `dir` (normally `<datadir>/tls`).
    Generated {
        dir: PathBuf,
        leaf_validity_days: u32,
    },
    /// The operator's PEM files: the chain (leaf first) and its key. The pin is that of
    /// the *last* certificate in the chain file.
    UserSupplied { cert_chain: PathBuf, key: PathBuf },
}

impl TlsSource {
    /// The generated mode in `<datadir>/tls` with the longest leaf validity.
    pub fn generated_in(datadir: &Path) -> Self {
        TlsSource::Generated {
            dir: datadir.join(TLS_DIR),
            leaf_validity_days: MAX_LEAF_VALIDITY_DAYS,
        }
    }
}

/// Why the served leaf was replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewal {
    /// There was no leaf yet (first start, or its files are gone).
    Missing,
    /// The leaf files could not be used (unreadable, or key and certificate differ).
    Unusable(String),
    /// Names the leaf is not valid for: a new LAN address, a renamed host.
    NewNames(Vec<String>),
    /// The leaf expires within [`RENEW_BEFORE_DAYS`] (or already has).
    Expiring,
    /// The leaf's NotBefore is ahead of the clock (the clock went back).
    NotYetValid,
    /// The leaf does not chain to the current CA (for server authentication).
    OtherCa,
    /// The operator's certificate or key file changed and was reloaded.
    Reloaded,
}

impl std::fmt::Display for Renewal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Renewal::Missing => f.write_str("there was no leaf certificate"),
            Renewal::Unusable(why) => write!(f, "the leaf certificate was unusable ({why})"),
            Renewal::NewNames(names) => {
                write!(f, "the leaf was not valid for {}", names.join(", "))
            }
            Renewal::Expiring => write!(f, "the leaf expires within {RENEW_BEFORE_DAYS} days"),
            Renewal::NotYetValid => f.write_str("the leaf is not valid yet (the clock went back)"),
            Renewal::OtherCa => f.write_str("the leaf was not signed by the current CA"),
            Renewal::Reloaded => f.write_str("the certificate files changed"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Host names and addresses

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
    fn names(&self) -> Vec<SubjectName> {
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

#[derive(Debug, Clone, PartialEq, Eq)]
enum SubjectName {
    Dns(String),
    Ip(IpAddr),
}

impl SubjectName {
    fn server_name(&self) -> Option<ServerName<'static>> {
        match self {
            SubjectName::Dns(name) => DnsName::try_from(name.clone())
                .ok()
                .map(ServerName::DnsName),
            SubjectName::Ip(ip) => Some(ServerName::IpAddress((*ip).into())),
        }
    }

    fn san(&self) -> Result<SanType, rcgen::Error> {
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

// ---------------------------------------------------------------------------------------
// The pin and the renewal decision

/// The pin of a certificate: `sha256/` + base64url (no padding) of the SHA-256 of its
/// SubjectPublicKeyInfo DER.
pub fn spki_pin(cert_der: &[u8]) -> Result<String, CertError> {
    let fields = der::certificate(cert_der).map_err(|e| CertError::BadCertificate(e.0))?;
    Ok(pin_of_spki(fields.spki))
}

fn pin_of_spki(spki_der: &[u8]) -> String {
    let digest = sha256::Hash::hash(spki_der).to_byte_array();
    format!("sha256/{}", URL_SAFE_NO_PAD.encode(digest))
}

/// Whether the served leaf must be re-issued, and why: when it does not chain to `ca` (the
/// only trust anchor) or is not valid now, when it expires within [`RENEW_BEFORE_DAYS`] of
/// `now`, or when one of `host`'s names is not valid for it. Names the leaf has and the
/// host no longer has (an address that went away) do not matter.
pub fn renewal_reason(
    leaf: &CertificateDer<'_>,
    ca: &CertificateDer<'_>,
    host: &HostNames,
    now: SystemTime,
) -> Option<Renewal> {
    let cert = match webpki::EndEntityCert::try_from(leaf) {
        Ok(cert) => cert,
        Err(e) => return Some(Renewal::Unusable(format!("leaf: {e}"))),
    };
    let anchor = match webpki::anchor_from_trusted_cert(ca) {
        Ok(anchor) => anchor,
        Err(_) => return Some(Renewal::OtherCa),
    };
    let anchors = [anchor];
    let verify_at = |at: Duration| {
        cert.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            &[],
            UnixTime::since_unix_epoch(at),
            webpki::KeyUsage::server_auth(),
            None,
            None,
        )
        .map(|_| ())
    };
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    match verify_at(since_epoch) {
        Ok(()) => {}
        Err(webpki::Error::CertExpired { .. }) => return Some(Renewal::Expiring),
        Err(webpki::Error::CertNotValidYet { .. }) => return Some(Renewal::NotYetValid),
        Err(_) => return Some(Renewal::OtherCa),
    }
    let missing: Vec<String> = host
        .names()
        .iter()
        .filter(|name| {
            name.server_name().is_none_or(|server_name| {
                cert.verify_is_valid_for_subject_name(&server_name).is_err()
            })
        })
        .map(ToString::to_string)
        .collect();
    if !missing.is_empty() {
        return Some(Renewal::NewNames(missing));
    }
    match verify_at(since_epoch + DAY * RENEW_BEFORE_DAYS) {
        Ok(()) => None,
        Err(_) => Some(Renewal::Expiring),
    }
}

// ---------------------------------------------------------------------------------------
// The served identity

/// The certificate the LAN listener serves, reloadable without a restart.
///
/// [`config`](Self::config) is cheap (an `Arc` clone under a read lock) and is meant to
/// be called for every accepted connection, so a refresh takes effect on the next one.
pub struct ServerIdentity {
    provider: Arc<CryptoProvider>,
    /// What the listener serves now.
    served: RwLock<Served>,
    /// Where it comes from; held for a whole refresh so two refreshes never interleave.
    source: Mutex<Source>,
}

struct Served {
    config: Arc<ServerConfig>,
    pin: String,
    leaf: CertificateDer<'static>,
}

enum Source {
    Generated {
        dir: PathBuf,
        leaf_validity_days: u32,
        ca: Box<LocalCa>,
    },
    UserSupplied {
        cert_chain: PathBuf,
        key: PathBuf,
        /// SHA-256 of both files as last loaded, to reload only what changed.
        digest: [u8; 32],
    },
}

/// The local CA, able to sign leaves.
struct LocalCa {
    cert: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
    pin: String,
    not_after: DateTime<Utc>,
}

// Never print a key by accident (rcgen's Debug elides it too, but say so here).
impl std::fmt::Debug for LocalCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCa")
            .field("pin", &self.pin)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for ServerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerIdentity")
            .field("pin", &self.ca_pin())
            .finish_non_exhaustive()
    }
}

impl ServerIdentity {
    /// Load (or, in the generated mode, create) the identity for this host now.
    /// See [`open_at`](Self::open_at).
    pub fn open(source: TlsSource) -> Result<Arc<Self>, CertError> {
        Self::open_at(source, &HostNames::current(), SystemTime::now())
    }

    /// Load the identity as if the host had `host`'s names and the time were `now`.
    ///
    /// Generated mode: creates the directory (0700), the CA and a leaf if they do not
    /// exist, reuses the CA if it does (an error if its key is missing or not its own),
    /// and re-issues the leaf if [`renewal_reason`] says so (or it cannot be read).
    /// User-supplied mode: reads the chain and key; an error if they do not match.
    pub fn open_at(
        source: TlsSource,
        host: &HostNames,
        now: SystemTime,
    ) -> Result<Arc<Self>, CertError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (source, served) = match source {
            TlsSource::Generated {
                dir,
                leaf_validity_days,
            } => {
                if !(1..=MAX_LEAF_VALIDITY_DAYS).contains(&leaf_validity_days) {
                    return Err(CertError::Validity(leaf_validity_days));
                }
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&dir)
                    .map_err(io("cannot create", &dir))?;
                let ca = load_or_create_ca(&dir, host, now)?;
                let served = match load_leaf(&dir, &ca, host, now, &provider) {
                    Ok(served) => served,
                    Err(reason) => issue_and_save(
                        &dir,
                        &ca,
                        host,
                        leaf_validity_days,
                        now,
                        &provider,
                        &reason,
                    )?,
                };
                let source = Source::Generated {
                    dir,
                    leaf_validity_days,
                    ca: Box::new(ca),
                };
                (source, served)
            }
            TlsSource::UserSupplied { cert_chain, key } => {
                let (served, digest) = load_user_supplied(&cert_chain, &key, now, &provider)?;
                let source = Source::UserSupplied {
                    cert_chain,
                    key,
                    digest,
                };
                (source, served)
            }
        };
        Ok(Arc::new(ServerIdentity {
            provider,
            served: RwLock::new(served),
            source: Mutex::new(source),
        }))
    }

    /// The configuration to accept the next connection with: ALPN `h2` then `http/1.1`,
    /// TLS 1.3 and 1.2, ring.
    pub fn config(&self) -> Arc<ServerConfig> {
        Arc::clone(
            &self
                .served
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .config,
        )
    }

    /// The pin clients check: of the local CA, or of the last certificate of a
    /// user-supplied chain.
    pub fn ca_pin(&self) -> String {
        self.served
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .pin
            .clone()
    }

    /// Re-check the identity against this host now. See [`refresh_at`](Self::refresh_at).
    pub fn refresh(&self) -> Result<Option<Renewal>, CertError> {
        self.refresh_at(&HostNames::current(), SystemTime::now())
    }

    /// Generated mode: re-issue the leaf (writing its files) if [`renewal_reason`] says so.
    /// User-supplied mode: re-read the files and serve them if they changed.
    /// Returns why the served certificate changed, or `None` if it did not. On error the
    /// previous configuration keeps being served.
    pub fn refresh_at(
        &self,
        host: &HostNames,
        now: SystemTime,
    ) -> Result<Option<Renewal>, CertError> {
        let mut source = self.source.lock().unwrap_or_else(PoisonError::into_inner);
        let (served, renewal) = match &mut *source {
            Source::Generated {
                dir,
                leaf_validity_days,
                ca,
            } => {
                check_ca_lifetime(dir, ca, now)?;
                let leaf = self
                    .served
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .leaf
                    .clone();
                let Some(reason) = renewal_reason(&leaf, &ca.cert, host, now) else {
                    return Ok(None);
                };
                let served = issue_and_save(
                    dir,
                    ca,
                    host,
                    *leaf_validity_days,
                    now,
                    &self.provider,
                    &reason,
                )?;
                (served, reason)
            }
            Source::UserSupplied {
                cert_chain,
                key,
                digest,
            } => {
                let (chain_pem, key_pem) = read_user_files(cert_chain, key)?;
                let new_digest = files_digest(&chain_pem, &key_pem);
                if new_digest == *digest {
                    return Ok(None);
                }
                let served = served_from_user_files(
                    cert_chain,
                    key,
                    &chain_pem,
                    &key_pem,
                    now,
                    &self.provider,
                )?;
                *digest = new_digest;
                tracing::info!(target: "berth::tls", path = %cert_chain.display(), pin = %served.pin,
                    "reloaded the TLS certificate");
                (served, Renewal::Reloaded)
            }
        };
        *self.served.write().unwrap_or_else(PoisonError::into_inner) = served;
        Ok(Some(renewal))
    }
}

fn server_config(
    provider: &Arc<CryptoProvider>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<ServerConfig>, rustls::Error> {
    let mut config = ServerConfig::builder_with_provider(Arc::clone(provider))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

// ---------------------------------------------------------------------------------------
// Generated mode

fn load_or_create_ca(dir: &Path, host: &HostNames, now: SystemTime) -> Result<LocalCa, CertError> {
    let cert_path = dir.join(CA_CERT_FILE);
    let key_path = dir.join(CA_KEY_FILE);
    let ca = match (read_optional(&cert_path)?, read_optional(&key_path)?) {
        (Some(cert_pem), Some(key_pem)) => {
            let cert = first_cert(&cert_path, &cert_pem)?;
            let key = parse_key_pair(&key_path, &key_pem)?;
            local_ca(&cert_path, &key_path, cert, key)?
        }
        (Some(_), None) => {
            return Err(CertError::CaKeyMissing {
                cert: cert_path,
                key: key_path,
            });
        }
        (None, key_pem) => {
            let key = match key_pem {
                // A crash between writing the key and its certificate: same key, same pin.
                Some(key_pem) => {
                    tracing::warn!(target: "berth::tls", path = %key_path.display(),
                        "the local CA's certificate is missing; re-making it from its key");
                    parse_key_pair(&key_path, &key_pem)?
                }
                None => {
                    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
                    datadir::write_atomically(&key_path, key.serialize_pem().as_bytes(), 0o600)?;
                    key
                }
            };
            let common_name = format!("Berth local CA {}", host.hostname());
            let mut params = ca_params(&common_name);
            params.not_before =
                time::OffsetDateTime::from(now) - time::Duration::days(BACKDATE_DAYS);
            params.not_after =
                time::OffsetDateTime::from(now) + time::Duration::days(CA_VALIDITY_DAYS);
            params.serial_number = Some(random_serial());
            let cert = params.self_signed(&key)?.der().clone();
            datadir::write_atomically(&cert_path, pem_of(&cert).as_bytes(), 0o644)?;
            let ca = local_ca(&cert_path, &key_path, cert, key)?;
            tracing::info!(target: "berth::tls", path = %cert_path.display(), pin = %ca.pin,
                "created the local CA");
            ca
        }
    };
    check_ca_lifetime(dir, &ca, now)?;
    Ok(ca)
}

/// The CA from its certificate and key, checking that they belong together and that the
/// certificate is one berthd made (so that leaves name it as their issuer exactly).
fn local_ca(
    cert_path: &Path,
    key_path: &Path,
    cert: CertificateDer<'static>,
    key: KeyPair,
) -> Result<LocalCa, CertError> {
    let fields = der::certificate(&cert).map_err(|e| bad_file(cert_path, e.0))?;
    if fields.spki != key.subject_public_key_info().as_slice() {
        return Err(CertError::CaKeyMismatch {
            cert: cert_path.to_path_buf(),
            key: key_path.to_path_buf(),
        });
    }
    let common_name =
        der::single_common_name(fields.subject).ok_or_else(|| CertError::ForeignCa {
            path: cert_path.to_path_buf(),
        })?;
    let not_after = fields.not_after().map_err(|e| bad_file(cert_path, e.0))?;
    let pin = pin_of_spki(fields.spki);
    Ok(LocalCa {
        issuer: Issuer::new(ca_params(&common_name), key),
        cert,
        pin,
        not_after,
    })
}

/// A CA that expires within the renewal margin cannot give leaves that last; replacing
/// it breaks every pairing, so that is the operator's call.
fn check_ca_lifetime(dir: &Path, ca: &LocalCa, now: SystemTime) -> Result<(), CertError> {
    let margin = DateTime::<Utc>::from(now + DAY * RENEW_BEFORE_DAYS);
    if ca.not_after < margin {
        return Err(CertError::CaExpiring {
            path: dir.join(CA_CERT_FILE),
            dir: dir.to_path_buf(),
            not_after: ca.not_after,
        });
    }
    Ok(())
}

/// The CA's subject, constraints and key usages. A re-loaded CA's issuer is built from
/// these (its subject becomes the leaves' issuer name, its key the authority key id),
/// so they must stay what [`load_or_create_ca`] makes.
fn ca_params(common_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
}

fn random_serial() -> SerialNumber {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    // Positive and 16 bytes long.
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    SerialNumber::from_slice(&bytes)
}

/// The leaf on disk, if it is still right for `host` at `now`; otherwise why not.
fn load_leaf(
    dir: &Path,
    ca: &LocalCa,
    host: &HostNames,
    now: SystemTime,
    provider: &Arc<CryptoProvider>,
) -> Result<Served, Renewal> {
    let cert_path = dir.join(LEAF_CERT_FILE);
    let key_path = dir.join(LEAF_KEY_FILE);
    let unusable = |e: CertError| Renewal::Unusable(e.to_string());
    let (Some(cert_pem), Some(key_pem)) = (
        read_optional(&cert_path).map_err(unusable)?,
        read_optional(&key_path).map_err(unusable)?,
    ) else {
        return Err(Renewal::Missing);
    };
    let leaf = first_cert(&cert_path, &cert_pem).map_err(unusable)?;
    let key = parse_key(&key_path, &key_pem).map_err(unusable)?;
    if let Some(reason) = renewal_reason(&leaf, &ca.cert, host, now) {
        return Err(reason);
    }
    let config = server_config(provider, vec![leaf.clone(), ca.cert.clone()], key)
        .map_err(|e| Renewal::Unusable(format!("{}: {e}", key_path.display())))?;
    Ok(Served {
        config,
        pin: ca.pin.clone(),
        leaf,
    })
}

/// Issue a leaf for `host`, write `leaf.key` then `leaf.pem`, and build its configuration.
fn issue_and_save(
    dir: &Path,
    ca: &LocalCa,
    host: &HostNames,
    leaf_validity_days: u32,
    now: SystemTime,
    provider: &Arc<CryptoProvider>,
    reason: &Renewal,
) -> Result<Served, CertError> {
    let (leaf, key) = issue_leaf(ca, host, leaf_validity_days, now)?;
    // Check what we made the way clients will, before anyone is served it. A leaf
    // configured to live less than the renewal margin is "expiring" from birth (and
    // renewed at every check, as documented); anything else is a real fault.
    match renewal_reason(&leaf, &ca.cert, host, now) {
        None => {}
        Some(Renewal::Expiring) if leaf_validity_days <= RENEW_BEFORE_DAYS => {}
        Some(problem) => return Err(CertError::SelfCheck(problem)),
    }
    datadir::write_atomically(
        &dir.join(LEAF_KEY_FILE),
        key.serialize_pem().as_bytes(),
        0o600,
    )?;
    let chain = vec![leaf.clone(), ca.cert.clone()];
    let chain_pem: String = chain.iter().map(pem_of).collect();
    datadir::write_atomically(&dir.join(LEAF_CERT_FILE), chain_pem.as_bytes(), 0o644)?;
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = server_config(provider, chain, key_der)?;
    let names: Vec<String> = host.names().iter().map(ToString::to_string).collect();
    tracing::info!(target: "berth::tls", %reason, names = %names.join(","),
        "issued a new leaf certificate");
    Ok(Served {
        config,
        pin: ca.pin.clone(),
        leaf,
    })
}

fn issue_leaf(
    ca: &LocalCa,
    host: &HostNames,
    leaf_validity_days: u32,
    now: SystemTime,
) -> Result<(CertificateDer<'static>, KeyPair), CertError> {
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let names = host.names();
    let now = time::OffsetDateTime::from(now);
    let ca_not_after = time::OffsetDateTime::from(SystemTime::from(ca.not_after));
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, host.hostname());
    params.subject_alt_names = names
        .iter()
        .map(SubjectName::san)
        .collect::<Result<_, _>>()?;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = now - time::Duration::days(BACKDATE_DAYS);
    // Never outlive the CA: some clients check the whole chain's validity.
    params.not_after =
        (now + time::Duration::days(i64::from(leaf_validity_days))).min(ca_not_after);
    params.serial_number = Some(random_serial());
    let cert = params.signed_by(&key, &ca.issuer)?.der().clone();
    Ok((cert, key))
}

// ---------------------------------------------------------------------------------------
// User-supplied mode

fn read_user_files(cert_chain: &Path, key: &Path) -> Result<(Vec<u8>, Vec<u8>), CertError> {
    let chain_pem = std::fs::read(cert_chain).map_err(io("cannot read", cert_chain))?;
    let key_pem = std::fs::read(key).map_err(io("cannot read", key))?;
    Ok((chain_pem, key_pem))
}

fn files_digest(chain_pem: &[u8], key_pem: &[u8]) -> [u8; 32] {
    let mut engine = sha256::Hash::engine();
    engine.input(&(chain_pem.len() as u64).to_be_bytes());
    engine.input(chain_pem);
    engine.input(key_pem);
    sha256::Hash::from_engine(engine).to_byte_array()
}

fn load_user_supplied(
    cert_chain: &Path,
    key: &Path,
    now: SystemTime,
    provider: &Arc<CryptoProvider>,
) -> Result<(Served, [u8; 32]), CertError> {
    let (chain_pem, key_pem) = read_user_files(cert_chain, key)?;
    let served = served_from_user_files(cert_chain, key, &chain_pem, &key_pem, now, provider)?;
    Ok((served, files_digest(&chain_pem, &key_pem)))
}

fn served_from_user_files(
    cert_chain: &Path,
    key_path: &Path,
    chain_pem: &[u8],
    key_pem: &[u8],
    now: SystemTime,
    provider: &Arc<CryptoProvider>,
) -> Result<Served, CertError> {
    let chain = parse_certs(cert_chain, chain_pem)?;
    let key = parse_key(key_path, key_pem)?;
    let (Some(leaf), Some(last)) = (chain.first().cloned(), chain.last()) else {
        return Err(bad_file(cert_chain, "no certificate in it"));
    };
    let pin = spki_pin(last).map_err(|e| bad_file(cert_chain, e.to_string()))?;
    // Not fatal (the operator renews it), but worth saying.
    if let Ok(not_after) = der::certificate(&leaf).and_then(|fields| fields.not_after())
        && not_after < DateTime::<Utc>::from(now + DAY * RENEW_BEFORE_DAYS)
    {
        tracing::warn!(target: "berth::tls", path = %cert_chain.display(), %not_after,
            "the TLS certificate expires soon");
    }
    let config = server_config(provider, chain, key).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => CertError::KeyMismatch {
            cert: cert_chain.to_path_buf(),
            key: key_path.to_path_buf(),
        },
        rustls::Error::InvalidCertificate(_) => bad_file(cert_chain, e.to_string()),
        // The key did not load (rustls' message does not quote it).
        other => bad_file(key_path, other.to_string()),
    })?;
    Ok(Served { config, pin, leaf })
}

// ---------------------------------------------------------------------------------------
// `berthd tls show`

/// What `berthd tls show` prints. Names and dates come from the certificates themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSummary {
    /// The pin clients check (see [`ServerIdentity::ca_pin`]).
    pub ca_pin: String,
    pub ca_not_after: DateTime<Utc>,
    /// `None` when no leaf has been issued yet.
    pub leaf: Option<LeafSummary>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafSummary {
    /// The subject alternative names (DNS names and IP addresses), in the certificate's
    /// order.
    pub names: Vec<String>,
    pub not_before: DateTime<Utc>,
    pub not_after: DateTime<Utc>,
}

/// Describe the identity on disk without changing anything (no daemon needed, no key
/// read): the CA pin and expiry, and the leaf's names and validity.
pub fn describe(source: &TlsSource) -> Result<TlsSummary, CertError> {
    let (ca_path, ca, leaf_path, leaf) = match source {
        TlsSource::Generated { dir, .. } => {
            let ca_path = dir.join(CA_CERT_FILE);
            let Some(ca_pem) = read_optional(&ca_path)? else {
                return Err(CertError::NotCreated(dir.clone()));
            };
            let ca = first_cert(&ca_path, &ca_pem)?;
            let leaf_path = dir.join(LEAF_CERT_FILE);
            let leaf = match read_optional(&leaf_path)? {
                Some(pem) => Some(first_cert(&leaf_path, &pem)?),
                None => None,
            };
            (ca_path, ca, leaf_path, leaf)
        }
        TlsSource::UserSupplied { cert_chain, .. } => {
            let pem = std::fs::read(cert_chain).map_err(io("cannot read", cert_chain))?;
            let chain = parse_certs(cert_chain, &pem)?;
            let (Some(leaf), Some(ca)) = (chain.first(), chain.last()) else {
                return Err(bad_file(cert_chain, "no certificate in it"));
            };
            (
                cert_chain.clone(),
                ca.clone(),
                cert_chain.clone(),
                Some(leaf.clone()),
            )
        }
    };
    let ca_fields = der::certificate(&ca).map_err(|e| bad_file(&ca_path, e.0))?;
    let leaf = match &leaf {
        Some(leaf) => {
            let bad = |e: der::Malformed| bad_file(&leaf_path, e.0);
            let fields = der::certificate(leaf).map_err(bad)?;
            Some(LeafSummary {
                names: der::subject_alt_names(fields.extensions).map_err(bad)?,
                not_before: fields.not_before().map_err(bad)?,
                not_after: fields.not_after().map_err(bad)?,
            })
        }
        None => None,
    };
    Ok(TlsSummary {
        ca_pin: pin_of_spki(ca_fields.spki),
        ca_not_after: ca_fields.not_after().map_err(|e| bad_file(&ca_path, e.0))?,
        leaf,
    })
}

// ---------------------------------------------------------------------------------------
// Files

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, CertError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("cannot read", path)(e)),
    }
}

fn parse_certs(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_file(path, format!("not a PEM certificate file ({e})")))?;
    if certs.is_empty() {
        return Err(bad_file(path, "no PEM certificate in it"));
    }
    Ok(certs)
}

fn first_cert(path: &Path, pem: &[u8]) -> Result<CertificateDer<'static>, CertError> {
    parse_certs(path, pem)?
        .into_iter()
        .next()
        .ok_or_else(|| bad_file(path, "no PEM certificate in it"))
}

// Key parse errors are not echoed: they could quote the file's contents.
fn parse_key(path: &Path, pem: &[u8]) -> Result<PrivateKeyDer<'static>, CertError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|_| bad_file(path, "not a PEM private key"))
}

fn parse_key_pair(path: &Path, pem: &[u8]) -> Result<KeyPair, CertError> {
    std::str::from_utf8(pem)
        .ok()
        .and_then(|pem| KeyPair::from_pem(pem).ok())
        .ok_or_else(|| bad_file(path, "not a PEM (PKCS#8) private key"))
}

fn pem_of(cert: &CertificateDer<'_>) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

// ---------------------------------------------------------------------------------------

/// Just enough DER to walk a certificate to fixed fields (RFC 5280 §4.1):
///
/// ```text
/// Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue }
/// tbsCertificate ::= SEQUENCE {
///     [0] version OPTIONAL, serialNumber INTEGER, signature SEQUENCE, issuer SEQUENCE,
///     validity SEQUENCE { notBefore Time, notAfter Time }, subject SEQUENCE,
///     subjectPublicKeyInfo SEQUENCE, [1] [2] unique ids OPTIONAL, [3] extensions OPTIONAL }
/// ```
mod der {
    use std::net::IpAddr;

    use chrono::{DateTime, NaiveDate, Utc};

    const SEQUENCE: u8 = 0x30;
    const SET: u8 = 0x31;
    const INTEGER: u8 = 0x02;
    const BOOLEAN: u8 = 0x01;
    const OCTET_STRING: u8 = 0x04;
    const OID: u8 = 0x06;
    const UTF8_STRING: u8 = 0x0c;
    const UTC_TIME: u8 = 0x17;
    const GENERALIZED_TIME: u8 = 0x18;
    const VERSION: u8 = 0xa0;
    const EXTENSIONS: u8 = 0xa3;
    const GENERAL_NAME_DNS: u8 = 0x82;
    const GENERAL_NAME_IP: u8 = 0x87;
    /// 2.5.29.17, subjectAltName.
    const OID_SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
    /// 2.5.4.3, commonName.
    const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(super) struct Malformed(pub &'static str);

    struct Reader<'a>(&'a [u8]);

    impl<'a> Reader<'a> {
        fn is_empty(&self) -> bool {
            self.0.is_empty()
        }

        fn peek_tag(&self) -> Option<u8> {
            self.0.first().copied()
        }

        /// The next element's tag and contents.
        fn next(&mut self) -> Result<(u8, &'a [u8]), Malformed> {
            const TRUNCATED: Malformed = Malformed("truncated DER");
            let (&tag, rest) = self.0.split_first().ok_or(TRUNCATED)?;
            if tag & 0x1f == 0x1f {
                return Err(Malformed("unexpected multi-byte DER tag"));
            }
            let (&first, rest) = rest.split_first().ok_or(TRUNCATED)?;
            let (len, rest) = if first < 0x80 {
                (usize::from(first), rest)
            } else {
                let count = usize::from(first & 0x7f);
                if count == 0 || count > 4 {
                    return Err(Malformed("unsupported DER length"));
                }
                let (bytes, rest) = rest.split_at_checked(count).ok_or(TRUNCATED)?;
                let len = bytes
                    .iter()
                    .fold(0usize, |len, byte| (len << 8) | usize::from(*byte));
                (len, rest)
            };
            let (contents, rest) = rest.split_at_checked(len).ok_or(TRUNCATED)?;
            self.0 = rest;
            Ok((tag, contents))
        }

        fn expect(&mut self, tag: u8) -> Result<&'a [u8], Malformed> {
            match self.next()? {
                (found, contents) if found == tag => Ok(contents),
                _ => Err(Malformed("unexpected DER element")),
            }
        }

        /// The next element whole (tag and length included).
        fn expect_whole(&mut self, tag: u8) -> Result<&'a [u8], Malformed> {
            let before = self.0;
            self.expect(tag)?;
            Ok(&before[..before.len() - self.0.len()])
        }
    }

    pub(super) struct Fields<'a> {
        /// notBefore and notAfter, each with its tag.
        validity: [(u8, &'a [u8]); 2],
        /// The subject Name's contents (its RDNs).
        pub subject: &'a [u8],
        /// The SubjectPublicKeyInfo, whole.
        pub spki: &'a [u8],
        /// The contents of the extensions SEQUENCE (empty without extensions).
        pub extensions: &'a [u8],
    }

    impl Fields<'_> {
        pub fn not_before(&self) -> Result<DateTime<Utc>, Malformed> {
            time(self.validity[0].0, self.validity[0].1)
        }

        pub fn not_after(&self) -> Result<DateTime<Utc>, Malformed> {
            time(self.validity[1].0, self.validity[1].1)
        }
    }

    pub(super) fn certificate(der: &[u8]) -> Result<Fields<'_>, Malformed> {
        let mut outer = Reader(der);
        let mut certificate = Reader(outer.expect(SEQUENCE)?);
        if !outer.is_empty() {
            return Err(Malformed("data after the certificate"));
        }
        let mut tbs = Reader(certificate.expect(SEQUENCE)?);
        if tbs.peek_tag() == Some(VERSION) {
            tbs.next()?;
        }
        tbs.expect(INTEGER)?; // serialNumber
        tbs.expect(SEQUENCE)?; // signature
        tbs.expect(SEQUENCE)?; // issuer
        let mut validity = Reader(tbs.expect(SEQUENCE)?);
        let validity = [validity.next()?, validity.next()?];
        let subject = tbs.expect(SEQUENCE)?;
        let spki = tbs.expect_whole(SEQUENCE)?;
        let mut extensions: &[u8] = &[];
        while !tbs.is_empty() {
            let (tag, contents) = tbs.next()?;
            if tag == EXTENSIONS {
                extensions = Reader(contents).expect(SEQUENCE)?;
            }
        }
        Ok(Fields {
            validity,
            subject,
            spki,
            extensions,
        })
    }

    /// UTCTime `YYMMDDHHMMSSZ` or GeneralizedTime `YYYYMMDDHHMMSSZ`, the two forms
    /// RFC 5280 allows.
    pub(super) fn time(tag: u8, text: &[u8]) -> Result<DateTime<Utc>, Malformed> {
        const BAD: Malformed = Malformed("bad certificate time");
        let (year, rest) = match (tag, text.len()) {
            (UTC_TIME, 13) => {
                let yy = digits(&text[..2]).ok_or(BAD)?;
                let year = if yy >= 50 { 1900 + yy } else { 2000 + yy };
                (year, &text[2..])
            }
            (GENERALIZED_TIME, 15) => (digits(&text[..4]).ok_or(BAD)?, &text[4..]),
            _ => return Err(BAD),
        };
        if rest.last() != Some(&b'Z') {
            return Err(BAD);
        }
        let field = |i: usize| digits(&rest[i..i + 2]).ok_or(BAD);
        let date =
            NaiveDate::from_ymd_opt(i32::try_from(year).map_err(|_| BAD)?, field(0)?, field(2)?)
                .ok_or(BAD)?;
        let at = date
            .and_hms_opt(field(4)?, field(6)?, field(8)?)
            .ok_or(BAD)?;
        Ok(at.and_utc())
    }

    fn digits(text: &[u8]) -> Option<u32> {
        text.iter().try_fold(0u32, |n, c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    }

    /// The DNS names and IP addresses of the subjectAltName extension, in order.
    pub(super) fn subject_alt_names(extensions: &[u8]) -> Result<Vec<String>, Malformed> {
        let mut list = Reader(extensions);
        while !list.is_empty() {
            let mut extension = Reader(list.expect(SEQUENCE)?);
            let oid = extension.expect(OID)?;
            if extension.peek_tag() == Some(BOOLEAN) {
                extension.next()?;
            }
            let value = extension.expect(OCTET_STRING)?;
            if oid != OID_SUBJECT_ALT_NAME {
                continue;
            }
            let mut general_names = Reader(Reader(value).expect(SEQUENCE)?);
            let mut names = Vec::new();
            while !general_names.is_empty() {
                match general_names.next()? {
                    (GENERAL_NAME_DNS, name) => {
                        names.push(String::from_utf8_lossy(name).into_owned());
                    }
                    (GENERAL_NAME_IP, octets) => {
                        let ip = if let Ok(v4) = <[u8; 4]>::try_from(octets) {
                            IpAddr::from(v4)
                        } else if let Ok(v6) = <[u8; 16]>::try_from(octets) {
                            IpAddr::from(v6)
                        } else {
                            return Err(Malformed("bad IP address in subjectAltName"));
                        };
                        names.push(ip.to_string());
                    }
                    _ => {}
                }
            }
            return Ok(names);
        }
        Ok(Vec::new())
    }

    /// The common name of a subject that is exactly one UTF-8 commonName, the way
    /// berthd writes its CA's subject.
    pub(super) fn single_common_name(subject: &[u8]) -> Option<String> {
        let mut rdns = Reader(subject);
        let mut rdn = Reader(rdns.expect(SET).ok()?);
        let mut attribute = Reader(rdn.expect(SEQUENCE).ok()?);
        let oid = attribute.expect(OID).ok()?;
        let value = attribute.expect(UTF8_STRING).ok()?;
        let single = rdns.is_empty() && rdn.is_empty() && attribute.is_empty();
        (single && oid == OID_COMMON_NAME)
            .then(|| String::from_utf8(value.to_vec()).ok())
            .flatten()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn times_in_both_forms() {
            let utc = time(UTC_TIME, b"491231235959Z").expect("utc");
            assert_eq!(utc.to_rfc3339(), "2049-12-31T23:59:59+00:00");
            let utc = time(UTC_TIME, b"500101000000Z").expect("utc");
            assert_eq!(utc.to_rfc3339(), "1950-01-01T00:00:00+00:00");
            let generalized = time(GENERALIZED_TIME, b"20500101120000Z").expect("generalized");
            assert_eq!(generalized.to_rfc3339(), "2050-01-01T12:00:00+00:00");
            let bad_times: [&[u8]; 4] = [
                b"4912312359Z",
                b"491231235959+",
                b"4913312359590",
                b"49\xc3\xa9231235959",
            ];
            for bad in bad_times {
                assert!(time(UTC_TIME, bad).is_err(), "{bad:?}");
            }
            assert!(time(SEQUENCE, b"491231235959Z").is_err());
        }

        #[test]
        fn lengths_short_long_and_truncated() {
            let mut long = vec![SEQUENCE, 0x81, 200];
            long.extend([7u8; 200]);
            let mut reader = Reader(&long);
            assert_eq!(reader.expect(SEQUENCE).expect("long form").len(), 200);
            assert!(reader.is_empty());
            let bad_elements: [&[u8]; 5] = [
                &[SEQUENCE],
                &[SEQUENCE, 3, 1],
                &[SEQUENCE, 0x80],
                &[SEQUENCE, 0x85, 0, 0, 0, 0, 1],
                &[0x1f, 0],
            ];
            for bad in bad_elements {
                assert!(Reader(bad).next().is_err(), "{bad:?}");
            }
            assert!(certificate(&[SEQUENCE, 0, 0]).is_err(), "trailing data");
        }
    }
}

#[cfg(test)]
#[path = "../../tests/harness/tls.rs"]
mod test_client;

/// The listener asks for the current configuration at every accept.
impl crate::net::listener::TlsConfigSource for ServerIdentity {
    fn current(&self) -> Arc<ServerConfig> {
        self.config()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use tempfile::TempDir;
    use tokio_rustls::{TlsAcceptor, TlsConnector};

    use super::*;

    const HOST: &str = "testbox";
    const LAN: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
    const LAN2: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 8));
    const LAN6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 7));

    fn host(ips: &[IpAddr]) -> HostNames {
        HostNames::new(HOST, ips.iter().copied())
    }

    fn generated(dir: &Path) -> TlsSource {
        TlsSource::Generated {
            dir: dir.to_path_buf(),
            leaf_validity_days: MAX_LEAF_VALIDITY_DAYS,
        }
    }

    fn open(dir: &Path, ips: &[IpAddr]) -> Arc<ServerIdentity> {
        ServerIdentity::open_at(generated(dir), &host(ips), SystemTime::now()).expect("open")
    }

    fn read(path: &Path) -> Vec<u8> {
        std::fs::read(path).expect("read")
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .expect("metadata")
            .permissions()
            .mode()
            & 0o777
    }

    fn certs_in(path: &Path) -> Vec<CertificateDer<'static>> {
        parse_certs(path, &read(path)).expect("certificates")
    }

    fn ca_pem(dir: &Path) -> String {
        String::from_utf8(read(&dir.join(CA_CERT_FILE))).expect("utf-8")
    }

    fn new_ca(dir: &Path) -> LocalCa {
        load_or_create_ca(dir, &host(&[]), SystemTime::now()).expect("ca")
    }

    fn valid_for(leaf: &CertificateDer<'_>, name: &str) -> bool {
        let cert = webpki::EndEntityCert::try_from(leaf).expect("leaf");
        let name = ServerName::try_from(name.to_string()).expect("name");
        cert.verify_is_valid_for_subject_name(&name).is_ok()
    }

    /// A TLS handshake over an in-memory pipe; the ALPN protocol agreed, or the client's error.
    async fn handshake(
        server: Arc<ServerConfig>,
        client: Arc<rustls::ClientConfig>,
        name: &str,
    ) -> Result<Option<Vec<u8>>, String> {
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let server_task = tokio::spawn(TlsAcceptor::from(server).accept(server_io));
        let name = ServerName::try_from(name.to_string()).expect("server name");
        let connected = TlsConnector::from(client).connect(name, client_io).await;
        let alpn = connected
            .map(|stream| stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec))
            .map_err(|e| e.to_string());
        let _ = server_task.await;
        alpn
    }

    #[test]
    fn first_open_creates_a_ca_and_a_leaf_with_private_keys() {
        let tmp = TempDir::new().expect("tempdir");
        let dir = tmp.path().join("tls");
        let identity = open(&dir, &[LAN]);

        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(CA_KEY_FILE)), 0o600);
        assert_eq!(mode(&dir.join(LEAF_KEY_FILE)), 0o600);
        let leaf_chain = certs_in(&dir.join(LEAF_CERT_FILE));
        let ca = certs_in(&dir.join(CA_CERT_FILE));
        assert_eq!(leaf_chain.len(), 2, "leaf then CA");
        assert_eq!(leaf_chain[1], ca[0]);
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .expect("list")
            .map(|entry| entry.expect("entry").file_name())
            .filter(|name| name.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");

        // The pin from the certificate is the pin from the key pair, and what is served.
        let key =
            KeyPair::from_pem(&String::from_utf8(read(&dir.join(CA_KEY_FILE))).expect("utf-8"))
                .expect("ca key");
        let from_key = pin_of_spki(&key.subject_public_key_info());
        assert_eq!(spki_pin(&ca[0]).expect("pin"), from_key);
        assert_eq!(identity.ca_pin(), from_key);
        assert!(from_key.starts_with("sha256/") && from_key.len() == 7 + 43);

        // The leaf chains to the CA for server auth and is back-dated by a day.
        assert_eq!(
            renewal_reason(&leaf_chain[0], &ca[0], &host(&[LAN]), SystemTime::now()),
            None
        );
        let summary = describe(&generated(&dir)).expect("describe");
        let leaf = summary.leaf.expect("leaf");
        let now = Utc::now();
        let age = now - leaf.not_before;
        assert!(age > chrono::Duration::hours(23) && age < chrono::Duration::hours(25));
        let life = leaf.not_after - now;
        assert!(life > chrono::Duration::days(396) && life <= chrono::Duration::days(397));
        assert!(summary.ca_not_after - now > chrono::Duration::days(3649));
        assert_eq!(summary.ca_pin, from_key);
    }

    #[test]
    fn a_second_open_reuses_the_ca_and_the_leaf() {
        let tmp = TempDir::new().expect("tempdir");
        let first = open(tmp.path(), &[LAN]);
        let ca = read(&tmp.path().join(CA_CERT_FILE));
        let leaf = read(&tmp.path().join(LEAF_CERT_FILE));
        let leaf_key = read(&tmp.path().join(LEAF_KEY_FILE));

        // An address that went away does not force a new leaf either.
        let second = open(tmp.path(), &[]);
        assert_eq!(second.ca_pin(), first.ca_pin());
        assert_eq!(read(&tmp.path().join(CA_CERT_FILE)), ca);
        assert_eq!(read(&tmp.path().join(LEAF_CERT_FILE)), leaf);
        assert_eq!(read(&tmp.path().join(LEAF_KEY_FILE)), leaf_key);
    }

    #[test]
    fn the_leaf_is_valid_for_the_host_names_and_addresses_only() {
        let tmp = TempDir::new().expect("tempdir");
        open(tmp.path(), &[LAN, LAN6]);
        let leaf = certs_in(&tmp.path().join(LEAF_CERT_FILE)).remove(0);
        for name in [
            "testbox",
            "testbox.local",
            "localhost",
            "127.0.0.1",
            "::1",
            "192.0.2.7",
            "fd00::7",
        ] {
            assert!(valid_for(&leaf, name), "{name}");
        }
        for name in ["192.0.2.8", "other.local", "testbox.example"] {
            assert!(!valid_for(&leaf, name), "{name}");
        }
        let summary = describe(&generated(tmp.path())).expect("describe");
        assert_eq!(
            summary.leaf.expect("leaf").names,
            [
                "testbox",
                "testbox.local",
                "localhost",
                "127.0.0.1",
                "::1",
                "192.0.2.7",
                "fd00::7"
            ]
        );
    }

    #[test]
    fn renewal_decisions() {
        let tmp = TempDir::new().expect("tempdir");
        let ca = new_ca(tmp.path());
        let now = SystemTime::now();
        let (leaf, _) = issue_leaf(&ca, &host(&[LAN]), 397, now).expect("leaf");
        let decide = |host: &HostNames, at: SystemTime| renewal_reason(&leaf, &ca.cert, host, at);

        assert_eq!(decide(&host(&[LAN]), now), None);
        assert_eq!(decide(&host(&[]), now), None, "an address that went away");
        assert_eq!(
            decide(&host(&[LAN, LAN2]), now),
            Some(Renewal::NewNames(vec!["192.0.2.8".into()]))
        );
        assert_eq!(
            decide(&HostNames::new("renamed", [LAN]), now),
            Some(Renewal::NewNames(vec![
                "renamed".into(),
                "renamed.local".into()
            ]))
        );
        assert_eq!(decide(&host(&[LAN]), now + DAY * 366), None, "31 days left");
        assert_eq!(
            decide(&host(&[LAN]), now + DAY * 368),
            Some(Renewal::Expiring)
        );
        assert_eq!(
            decide(&host(&[LAN]), now + DAY * 400),
            Some(Renewal::Expiring)
        );
        assert_eq!(
            decide(&host(&[LAN]), now - DAY * 2),
            Some(Renewal::NotYetValid)
        );

        // Another CA, even with the same subject name (same hostname), is not ours.
        let other_tmp = TempDir::new().expect("tempdir");
        let other = new_ca(other_tmp.path());
        assert_eq!(
            renewal_reason(&leaf, &other.cert, &host(&[LAN]), now),
            Some(Renewal::OtherCa)
        );
        assert!(matches!(
            renewal_reason(
                &CertificateDer::from(vec![0x30, 0]),
                &ca.cert,
                &host(&[]),
                now
            ),
            Some(Renewal::Unusable(_))
        ));
    }

    #[test]
    fn a_shorter_validity_is_honoured_and_out_of_range_refused() {
        let tmp = TempDir::new().expect("tempdir");
        let source = |days| TlsSource::Generated {
            dir: tmp.path().to_path_buf(),
            leaf_validity_days: days,
        };
        for days in [0, 398] {
            let err = ServerIdentity::open_at(source(days), &host(&[]), SystemTime::now())
                .expect_err("out of range");
            assert!(matches!(err, CertError::Validity(d) if d == days));
        }
        ServerIdentity::open_at(source(90), &host(&[]), SystemTime::now()).expect("open");
        let leaf = describe(&source(90)).expect("describe").leaf.expect("leaf");
        let life = leaf.not_after - Utc::now();
        assert!(life > chrono::Duration::days(89) && life <= chrono::Duration::days(90));
    }

    #[tokio::test]
    async fn refresh_swaps_to_a_new_leaf_under_the_same_pin() {
        let tmp = TempDir::new().expect("tempdir");
        let identity = open(tmp.path(), &[LAN]);
        let pin = identity.ca_pin();
        let before = identity.config();
        let client = test_client::pinned_client_config(&ca_pem(tmp.path()), true);
        assert!(
            handshake(identity.config(), client.clone(), "192.0.2.8")
                .await
                .is_err()
        );

        assert_eq!(
            identity
                .refresh_at(&host(&[LAN]), SystemTime::now())
                .expect("refresh"),
            None
        );
        assert!(
            Arc::ptr_eq(&before, &identity.config()),
            "nothing changed, nothing swapped"
        );

        let renewal = identity
            .refresh_at(&host(&[LAN, LAN2]), SystemTime::now())
            .expect("refresh");
        assert_eq!(renewal, Some(Renewal::NewNames(vec!["192.0.2.8".into()])));
        assert!(!Arc::ptr_eq(&before, &identity.config()));
        assert_eq!(identity.ca_pin(), pin);
        handshake(identity.config(), client.clone(), "192.0.2.8")
            .await
            .expect("new address");
        handshake(identity.config(), client, "192.0.2.7")
            .await
            .expect("old address");

        // The new leaf is on disk and chains to the same CA.
        let chain = certs_in(&tmp.path().join(LEAF_CERT_FILE));
        assert!(valid_for(&chain[0], "192.0.2.8"));
        assert_eq!(spki_pin(&chain[1]).expect("pin"), pin);
        assert_eq!(open(tmp.path(), &[LAN, LAN2]).ca_pin(), pin);
    }

    #[test]
    fn refresh_renews_a_leaf_near_its_expiry() {
        let tmp = TempDir::new().expect("tempdir");
        let long_ago = SystemTime::now() - DAY * 380;
        let identity =
            ServerIdentity::open_at(generated(tmp.path()), &host(&[LAN]), long_ago).expect("open");
        let renewal = identity
            .refresh_at(&host(&[LAN]), SystemTime::now())
            .expect("refresh");
        assert_eq!(renewal, Some(Renewal::Expiring));
        let leaf = describe(&generated(tmp.path()))
            .expect("describe")
            .leaf
            .expect("leaf");
        assert!(leaf.not_after - Utc::now() > chrono::Duration::days(396));
    }

    #[tokio::test]
    async fn a_client_pinning_the_ca_connects_by_address_and_by_name_only() {
        let tmp = TempDir::new().expect("tempdir");
        let identity = open(tmp.path(), &[LAN]);
        let checking = test_client::pinned_client_config(&ca_pem(tmp.path()), true);
        for name in ["192.0.2.7", "testbox.local", "testbox", "localhost", "::1"] {
            handshake(identity.config(), checking.clone(), name)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let err = handshake(identity.config(), checking, "elsewhere.local")
            .await
            .expect_err("name");
        assert!(err.contains("not valid for name"), "{err}");

        // Pin only: any name, as long as the chain ends at this CA.
        let pin_only = test_client::pinned_client_config(&ca_pem(tmp.path()), false);
        handshake(identity.config(), pin_only, "elsewhere.local")
            .await
            .expect("pin only");

        // ALPN: h2 first, http/1.1 for clients that only speak it.
        let h2 = test_client::pinned_client_config_with_alpn(
            &ca_pem(tmp.path()),
            true,
            &[b"h2", b"http/1.1"],
        );
        assert_eq!(
            handshake(identity.config(), h2, "testbox.local")
                .await
                .expect("h2"),
            Some(b"h2".to_vec())
        );
        let h1 =
            test_client::pinned_client_config_with_alpn(&ca_pem(tmp.path()), true, &[b"http/1.1"]);
        assert_eq!(
            handshake(identity.config(), h1, "testbox.local")
                .await
                .expect("h1"),
            Some(b"http/1.1".to_vec())
        );

        // A client pinning another CA refuses, whatever the name checks.
        let other = TempDir::new().expect("tempdir");
        new_ca(other.path());
        for check_name in [true, false] {
            let stranger = test_client::pinned_client_config(&ca_pem(other.path()), check_name);
            let err = handshake(identity.config(), stranger, "192.0.2.7")
                .await
                .expect_err("other CA");
            assert!(err.contains("invalid peer certificate"), "{err}");
        }
    }

    #[tokio::test]
    async fn a_handshake_over_loopback_tcp() {
        let tmp = TempDir::new().expect("tempdir");
        let identity = open(tmp.path(), &[]);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let acceptor = TlsAcceptor::from(identity.config());
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.expect("accept");
            let mut tls = acceptor.accept(stream).await.expect("server handshake");
            tokio::io::AsyncWriteExt::write_all(&mut tls, b"hello")
                .await
                .expect("write");
            tokio::io::AsyncWriteExt::shutdown(&mut tls)
                .await
                .expect("shutdown");
        });
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let client = test_client::pinned_client_config(&ca_pem(tmp.path()), true);
        let name = ServerName::try_from("127.0.0.1").expect("name");
        let mut tls = TlsConnector::from(client)
            .connect(name, stream)
            .await
            .expect("client handshake");
        let mut got = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut tls, &mut got)
            .await
            .expect("read");
        assert_eq!(got, b"hello");
        server.await.expect("server");
    }

    /// A chain (leaf, CA) and key as an operator would supply them, made by another CA.
    fn user_files(dir: &Path) -> (PathBuf, PathBuf, String) {
        let ca_dir = dir.join("their-ca");
        open(&ca_dir, &[LAN]);
        let chain = dir.join("chain.pem");
        let key = dir.join("key.pem");
        std::fs::copy(ca_dir.join(LEAF_CERT_FILE), &chain).expect("copy chain");
        std::fs::copy(ca_dir.join(LEAF_KEY_FILE), &key).expect("copy key");
        (chain, key, ca_pem(&ca_dir))
    }

    #[tokio::test]
    async fn user_supplied_files_are_served_and_reloaded() {
        let tmp = TempDir::new().expect("tempdir");
        let (chain, key, their_ca) = user_files(tmp.path());
        let source = TlsSource::UserSupplied {
            cert_chain: chain.clone(),
            key: key.clone(),
        };
        let identity =
            ServerIdentity::open_at(source.clone(), &host(&[]), SystemTime::now()).expect("open");
        let last = certs_in(&chain).pop().expect("last");
        assert_eq!(identity.ca_pin(), spki_pin(&last).expect("pin"));
        let client = test_client::pinned_client_config(&their_ca, true);
        handshake(identity.config(), client, "testbox.local")
            .await
            .expect("handshake");
        assert_eq!(
            describe(&source).expect("describe").ca_pin,
            identity.ca_pin()
        );

        assert_eq!(
            identity
                .refresh_at(&host(&[]), SystemTime::now())
                .expect("refresh"),
            None
        );

        // New files from yet another CA: reloaded, new pin, served.
        let newer = tmp.path().join("newer");
        std::fs::create_dir(&newer).expect("mkdir");
        let (new_chain, new_key, new_ca) = user_files(&newer);
        std::fs::copy(&new_chain, &chain).expect("replace chain");
        std::fs::copy(&new_key, &key).expect("replace key");
        let renewal = identity
            .refresh_at(&host(&[]), SystemTime::now())
            .expect("refresh");
        assert_eq!(renewal, Some(Renewal::Reloaded));
        assert_ne!(identity.ca_pin(), spki_pin(&last).expect("pin"));
        let client = test_client::pinned_client_config(&new_ca, true);
        handshake(identity.config(), client, "192.0.2.7")
            .await
            .expect("handshake");

        // A broken key: the refresh fails and the previous configuration stays.
        let served = identity.config();
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .expect("break key");
        let err = identity
            .refresh_at(&host(&[]), SystemTime::now())
            .expect_err("broken key");
        assert!(err.to_string().contains("key.pem"), "{err}");
        assert!(Arc::ptr_eq(&served, &identity.config()));
    }

    #[test]
    fn user_supplied_errors_name_the_file() {
        let tmp = TempDir::new().expect("tempdir");
        let (chain, key, _) = user_files(tmp.path());
        let open_user = |cert_chain: &Path, key: &Path| {
            let source = TlsSource::UserSupplied {
                cert_chain: cert_chain.to_path_buf(),
                key: key.to_path_buf(),
            };
            ServerIdentity::open_at(source, &host(&[]), SystemTime::now()).expect_err("must fail")
        };

        let missing = tmp.path().join("missing.pem");
        let err = open_user(&chain, &missing);
        assert!(
            matches!(&err, CertError::Io { path, .. } if *path == missing),
            "{err}"
        );

        let other = tmp.path().join("other");
        std::fs::create_dir(&other).expect("mkdir");
        let (_, other_key, _) = user_files(&other);
        let err = open_user(&chain, &other_key);
        assert!(matches!(err, CertError::KeyMismatch { .. }), "{err}");

        let garbage = tmp.path().join("garbage.pem");
        std::fs::write(&garbage, "not pem at all").expect("write");
        let err = open_user(&garbage, &key);
        assert!(err.to_string().contains("garbage.pem"), "{err}");
        let err = open_user(&chain, &garbage);
        assert_eq!(
            err.to_string(),
            format!("{}: not a PEM private key", garbage.display())
        );
    }

    #[test]
    fn a_missing_or_foreign_ca_key_is_an_error_that_says_what_to_do() {
        let tmp = TempDir::new().expect("tempdir");
        open(tmp.path(), &[LAN]);
        let ca_key = tmp.path().join(CA_KEY_FILE);
        let saved_key = read(&ca_key);

        std::fs::remove_file(&ca_key).expect("remove");
        let err = ServerIdentity::open_at(generated(tmp.path()), &host(&[LAN]), SystemTime::now())
            .expect_err("missing key");
        assert!(matches!(err, CertError::CaKeyMissing { .. }), "{err}");
        assert!(err.to_string().contains("restore"), "{err}");
        assert!(
            !tmp.path().join(CA_KEY_FILE).exists(),
            "nothing regenerated"
        );

        let other = TempDir::new().expect("tempdir");
        new_ca(other.path());
        std::fs::copy(other.path().join(CA_KEY_FILE), &ca_key).expect("copy");
        let err = ServerIdentity::open_at(generated(tmp.path()), &host(&[LAN]), SystemTime::now())
            .expect_err("foreign key");
        assert!(matches!(err, CertError::CaKeyMismatch { .. }), "{err}");

        std::fs::write(&ca_key, &saved_key).expect("restore");
        std::fs::write(
            tmp.path().join(CA_CERT_FILE),
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .expect("tamper");
        let err = ServerIdentity::open_at(generated(tmp.path()), &host(&[LAN]), SystemTime::now())
            .expect_err("tampered");
        assert!(
            matches!(&err, CertError::BadFile { path, .. } if path.ends_with(CA_CERT_FILE)),
            "{err}"
        );
    }

    #[test]
    fn a_lost_ca_certificate_is_remade_from_its_key_with_the_same_pin() {
        let tmp = TempDir::new().expect("tempdir");
        let pin = open(tmp.path(), &[LAN]).ca_pin();
        std::fs::remove_file(tmp.path().join(CA_CERT_FILE)).expect("remove");
        let identity = open(tmp.path(), &[LAN]);
        assert_eq!(identity.ca_pin(), pin);
        // The old leaf still chains: same issuer name and key.
        let chain = certs_in(&tmp.path().join(LEAF_CERT_FILE));
        assert_eq!(spki_pin(&chain[1]).expect("pin"), pin);
    }

    #[test]
    fn broken_leaf_files_are_replaced() {
        let tmp = TempDir::new().expect("tempdir");
        open(tmp.path(), &[LAN]);
        std::fs::write(tmp.path().join(LEAF_KEY_FILE), "garbage").expect("tamper");
        open(tmp.path(), &[LAN]);
        assert!(read(&tmp.path().join(LEAF_KEY_FILE)).starts_with(b"-----BEGIN PRIVATE KEY-----"));

        // A key that parses but is not the leaf's (as after a crash between the writes).
        let other = TempDir::new().expect("tempdir");
        open(other.path(), &[LAN]);
        std::fs::copy(
            other.path().join(LEAF_KEY_FILE),
            tmp.path().join(LEAF_KEY_FILE),
        )
        .expect("copy");
        let identity = open(tmp.path(), &[LAN]);
        let leaf = certs_in(&tmp.path().join(LEAF_CERT_FILE)).remove(0);
        let key = parse_key(
            &tmp.path().join(LEAF_KEY_FILE),
            &read(&tmp.path().join(LEAF_KEY_FILE)),
        )
        .expect("key");
        server_config(&identity.provider, vec![leaf], key).expect("key and leaf match again");

        std::fs::remove_file(tmp.path().join(LEAF_CERT_FILE)).expect("remove");
        open(tmp.path(), &[LAN]);
        assert!(tmp.path().join(LEAF_CERT_FILE).exists());
    }

    #[test]
    fn the_spki_walk_agrees_with_webpki_and_rcgen() {
        let tmp = TempDir::new().expect("tempdir");
        open(tmp.path(), &[LAN]);
        for cert in certs_in(&tmp.path().join(LEAF_CERT_FILE)) {
            let parsed = webpki::EndEntityCert::try_from(&cert).expect("webpki");
            let fields = der::certificate(&cert).expect("walk");
            assert_eq!(fields.spki, parsed.subject_public_key_info().as_ref());
        }
        let key = KeyPair::from_pem(
            &String::from_utf8(read(&tmp.path().join(LEAF_KEY_FILE))).expect("utf-8"),
        )
        .expect("key");
        let leaf = certs_in(&tmp.path().join(LEAF_CERT_FILE)).remove(0);
        assert_eq!(
            der::certificate(&leaf).expect("walk").spki,
            key.subject_public_key_info().as_slice()
        );
        let bad_certificates: [&[u8]; 3] = [
            b"",
            &[0x30, 0x03, 0x02, 0x01, 0x01],
            &leaf[..leaf.len() - 1],
        ];
        for bad in bad_certificates {
            assert!(matches!(spki_pin(bad), Err(CertError::BadCertificate(_))));
        }
    }

    #[test]
    fn describe_without_an_identity_says_so() {
        let tmp = TempDir::new().expect("tempdir");
        let err = describe(&generated(tmp.path())).expect_err("nothing yet");
        assert!(matches!(err, CertError::NotCreated(_)), "{err}");
        new_ca(tmp.path());
        assert_eq!(
            describe(&generated(tmp.path())).expect("describe").leaf,
            None
        );
    }

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

    #[test]
    fn debug_output_shows_no_key() {
        let tmp = TempDir::new().expect("tempdir");
        let identity = open(tmp.path(), &[LAN]);
        let ca = new_ca(tmp.path());
        let shown = format!("{identity:?} {ca:?}");
        assert!(shown.contains(&identity.ca_pin()));
        for secret in [CA_KEY_FILE, LEAF_KEY_FILE] {
            let pem = String::from_utf8(read(&tmp.path().join(secret))).expect("utf-8");
            let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
            assert!(!shown.contains(&body[..20]), "{secret}");
        }
        assert!(!shown.contains("PRIVATE"));
    }
}

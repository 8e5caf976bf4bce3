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
//! The CA is name-constrained (critical) to this box's names and the LAN's address
//! ranges, so its key cannot stand in for other sites (`constraints.rs`). A CA made
//! before that is replaced once, by a new key, with a warning naming the old and the
//! new pin; phones must then pair again.
//!
//! Leaf NotBefore is back-dated by a day: boards have no RTC and may boot with a clock
//! somewhat behind the phone's. A leaf whose NotBefore lies ahead of the board's clock,
//! or that was issued while the clock was wildly wrong, is simply re-issued.
//!
//! Files in the generated mode (`<datadir>/tls/`, 0700), each written atomically (tmp
//! file, fsync, rename, fsync of the directory):
//! - `ca.key`, `leaf.key`: PKCS#8 PEM private keys.
//! - `ca.pem`: the CA certificate (what a client may install or pin).
//! - `leaf.pem`: the leaf then the CA — the chain served.
//!
//! All 0600, like every file in the datadir (`docs/lan.md`, "Files on the box").
//!
//! The key is written before its certificate: after a crash between the two, a leaf
//! whose key does not match is re-issued, and a `ca.key` without `ca.pem` gets its
//! certificate re-made from that key (same key, same pin). A `ca.pem` without its key,
//! or with a key that is not its own, is an error telling the operator what to do.
//!
//! Certificates are checked with rustls-webpki (chain, expiry and names, the way clients
//! check them) and read with x509-parser (SubjectPublicKeyInfo, validity, subject
//! alternative names and the CA's common name, for the pin and `berthd tls show`).
//!
//! Everything here does blocking file I/O: call it before serving or on `spawn_blocking`.
//!
//! # Where things are
//!
//! - this file: the shared vocabulary — file names and lifetimes, [`TlsSource`],
//!   [`Renewal`], [`CertError`], and what is served (`Served`, `server_config`).
//! - `identity.rs`: [`ServerIdentity`], what the listener serves, opened once and
//!   refreshed in place.
//! - `issuance.rs`: the generated mode — the local CA and the leaves it signs (rcgen),
//!   and [`renewal_reason`], the decision to re-issue.
//! - `user_files.rs`: the user-supplied mode — the operator's chain and key, reloaded
//!   when they change.
//! - `constraints.rs`: what the CA may sign for — its name constraints, and which of
//!   the host's names fall inside them.
//! - `names.rs`: what a leaf is issued for — [`hostname`], [`lan_ips`], [`HostNames`].
//! - `summary.rs`: [`describe`], what `berthd tls show` prints.
//! - `certificate.rs`: reading a certificate's fields back (x509-parser), and
//!   [`spki_pin`].
//! - `files.rs`: reading the PEM files, writing a certificate as PEM.
//!
//! Dependencies: `tls` uses `fsutil` (atomic writes) and nothing else of ours; the
//! listener (`net::listener`), the API's pairing and `app` use it. Inside, every file
//! may use this one's vocabulary; `identity` uses `issuance` and `user_files`; they and
//! `summary` read certificates through `certificate` and `files`, and `issuance`
//! takes the names to issue for from `names`, filtered by `constraints`. Nothing
//! points back up.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

mod certificate;
mod constraints;
mod files;
mod identity;
mod issuance;
mod names;
mod summary;
#[cfg(test)]
mod test_support;
mod user_files;

pub use certificate::spki_pin;
pub use identity::ServerIdentity;
pub use issuance::renewal_reason;
pub use names::{HostNames, hostname, lan_ips};
pub use summary::{LeafSummary, TlsSummary, describe};

pub const CA_CERT_FILE: &str = "ca.pem";
pub const CA_KEY_FILE: &str = "ca.key";
pub const LEAF_CERT_FILE: &str = "leaf.pem";
pub const LEAF_KEY_FILE: &str = "leaf.key";

/// The longest leaf validity (and the default): what browsers and Apple accept.
pub const MAX_LEAF_VALIDITY_DAYS: u32 = 397;
/// A leaf is re-issued when it expires within this many days.
pub const RENEW_BEFORE_DAYS: u32 = 30;

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Writing a file failed (`fsutil::write_atomically`).
    #[error(transparent)]
    Write(#[from] crate::fsutil::FsError),
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
    #[error(
        "{path} has no name constraints and was not made by berthd, so berthd will not sign \
         with it (a key that can sign for any web site): move {path} and its key away to \
         create a new local CA"
    )]
    UnconstrainedCa { path: PathBuf },
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
    /// The generated mode in `dir` (the datadir's `tls`) with the longest leaf validity.
    pub fn generated_in(dir: &Path) -> Self {
        TlsSource::Generated {
            dir: dir.to_path_buf(),
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

/// What the listener serves at one time: the configuration, the pin clients check, and
/// the leaf (to decide about renewal).
struct Served {
    config: Arc<ServerConfig>,
    pin: String,
    leaf: CertificateDer<'static>,
}

/// The configuration for `chain` (leaf first) and `key`: ALPN `h2` then `http/1.1`,
/// TLS 1.3 and 1.2, ring.
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

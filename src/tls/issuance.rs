//! The generated mode: the local CA (made once, then re-loaded from its files) and the
//! leaves it signs for this host (rcgen), and [`renewal_reason`], the decision to
//! re-issue a leaf that no longer fits.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chrono::{DateTime, Utc};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData as _, SerialNumber,
};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};

use super::certificate::{CertificateFields, pin_of_spki};
use super::constraints::Permitted;
use super::files::{first_cert, parse_key, parse_key_pair, pem_of, read_optional};
use super::names::{HostNames, SubjectName};
use super::{
    CA_CERT_FILE, CA_KEY_FILE, CertError, DAY, LEAF_CERT_FILE, LEAF_KEY_FILE, RENEW_BEFORE_DAYS,
    Renewal, Served, bad_file, server_config,
};
use crate::fsutil;

/// The local CA's lifetime.
const CA_VALIDITY_DAYS: i64 = 3650;
/// NotBefore is back-dated by this much: boards have no RTC.
const BACKDATE_DAYS: i64 = 1;

/// The local CA, able to sign leaves.
pub(super) struct LocalCa {
    pub(super) cert: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
    pin: String,
    not_after: DateTime<Utc>,
    /// What it may sign for (its name constraints).
    permitted: Permitted,
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

/// The subject of every CA berthd makes starts so; the rest is the host name.
const CA_NAME_PREFIX: &str = "Berth local CA ";

pub(super) fn load_or_create_ca(
    dir: &Path,
    host: &HostNames,
    now: SystemTime,
) -> Result<LocalCa, CertError> {
    let cert_path = dir.join(CA_CERT_FILE);
    let key_path = dir.join(CA_KEY_FILE);
    let ca = match (read_optional(&cert_path)?, read_optional(&key_path)?) {
        (Some(cert_pem), key_pem) => {
            let cert = first_cert(&cert_path, &cert_pem)?;
            match ca_constraints(&cert_path, &cert)? {
                Constraints::Permitted(permitted) => {
                    let Some(key_pem) = key_pem else {
                        return Err(CertError::CaKeyMissing {
                            cert: cert_path,
                            key: key_path,
                        });
                    };
                    let key = parse_key_pair(&key_path, &key_pem)?;
                    local_ca(&cert_path, &key_path, cert, key, permitted)?
                }
                // Whatever key lies beside it (its own, none, or a new one a replacement
                // interrupted by a power cut wrote before the certificate) is not kept:
                // only a new key gives phones a CA a copied key cannot stand in for.
                Constraints::None { old_pin } => {
                    let ca = create_ca(dir, new_ca_key(&key_path)?, host, now)?;
                    tracing::warn!(target: "berth::tls", path = %cert_path.display(),
                        old_pin = %old_pin, pin = %ca.pin,
                        "replaced the local CA: it had no name constraints, so its key could \
                         sign for any web site; paired phones must pair again with the new pin \
                         (and install the new ca.pem in place of the old one)");
                    ca
                }
            }
        }
        (None, key_pem) => {
            let key = match key_pem {
                // A crash between writing the key and its certificate: same key, same pin.
                Some(key_pem) => {
                    tracing::warn!(target: "berth::tls", path = %key_path.display(),
                        "the local CA's certificate is missing; re-making it from its key");
                    parse_key_pair(&key_path, &key_pem)?
                }
                None => new_ca_key(&key_path)?,
            };
            let ca = create_ca(dir, key, host, now)?;
            tracing::info!(target: "berth::tls", path = %cert_path.display(), pin = %ca.pin,
                "created the local CA");
            ca
        }
    };
    check_ca_lifetime(dir, &ca, now)?;
    Ok(ca)
}

/// A new CA key, written (0600) before any certificate of it.
fn new_ca_key(key_path: &Path) -> Result<KeyPair, CertError> {
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    fsutil::write_atomically(key_path, key.serialize_pem().as_bytes(), 0o600)?;
    Ok(key)
}

/// Make, write and load the CA certificate of `key` for `host` (ten years, back-dated
/// a day, name-constrained to [`Permitted::for_host`]).
fn create_ca(
    dir: &Path,
    key: KeyPair,
    host: &HostNames,
    now: SystemTime,
) -> Result<LocalCa, CertError> {
    let cert_path = dir.join(CA_CERT_FILE);
    let common_name = format!("{CA_NAME_PREFIX}{}", host.hostname());
    let permitted = Permitted::for_host(host.hostname());
    let mut params = ca_params(&common_name, &permitted);
    params.not_before = time::OffsetDateTime::from(now) - time::Duration::days(BACKDATE_DAYS);
    params.not_after = time::OffsetDateTime::from(now) + time::Duration::days(CA_VALIDITY_DAYS);
    params.serial_number = Some(random_serial());
    let cert = params.self_signed(&key)?.der().clone();
    fsutil::write_atomically(&cert_path, pem_of(&cert).as_bytes(), 0o600)?;
    local_ca(&cert_path, &dir.join(CA_KEY_FILE), cert, key, permitted)
}

/// What a CA certificate on disk may sign for.
enum Constraints {
    /// Critical name constraints: a CA of this version.
    Permitted(Permitted),
    /// None, or not critical: berthd's CA from before name constraints, to replace.
    None { old_pin: String },
}

/// Read the CA certificate's name constraints. One without them is berthd's older CA
/// (its subject says so) or not berthd's at all: that one is an error, since replacing
/// it would throw away someone else's key.
fn ca_constraints(cert_path: &Path, cert: &CertificateDer<'_>) -> Result<Constraints, CertError> {
    let fields = CertificateFields::parse(cert).map_err(|e| bad_file(cert_path, e.0))?;
    let common_name = fields
        .single_common_name()
        .ok_or_else(|| CertError::ForeignCa {
            path: cert_path.to_path_buf(),
        })?;
    match fields
        .permitted_subtrees()
        .map_err(|e| bad_file(cert_path, e.0))?
    {
        Some((true, permitted)) => Ok(Constraints::Permitted(permitted)),
        _ if common_name.starts_with(CA_NAME_PREFIX) => Ok(Constraints::None {
            old_pin: pin_of_spki(fields.spki()),
        }),
        _ => Err(CertError::UnconstrainedCa {
            path: cert_path.to_path_buf(),
        }),
    }
}

/// The CA from its certificate and key, checking that they belong together and that the
/// certificate is one berthd made (so that leaves name it as their issuer exactly).
fn local_ca(
    cert_path: &Path,
    key_path: &Path,
    cert: CertificateDer<'static>,
    key: KeyPair,
    permitted: Permitted,
) -> Result<LocalCa, CertError> {
    let fields = CertificateFields::parse(&cert).map_err(|e| bad_file(cert_path, e.0))?;
    if fields.spki() != key.subject_public_key_info().as_slice() {
        return Err(CertError::CaKeyMismatch {
            cert: cert_path.to_path_buf(),
            key: key_path.to_path_buf(),
        });
    }
    let common_name = fields
        .single_common_name()
        .ok_or_else(|| CertError::ForeignCa {
            path: cert_path.to_path_buf(),
        })?;
    let not_after = fields.not_after().map_err(|e| bad_file(cert_path, e.0))?;
    let pin = pin_of_spki(fields.spki());
    Ok(LocalCa {
        issuer: Issuer::new(ca_params(&common_name, &permitted), key),
        cert,
        pin,
        not_after,
        permitted,
    })
}

/// A CA that expires within the renewal margin cannot give leaves that last; replacing
/// it breaks every pairing, so that is the operator's call.
pub(super) fn check_ca_lifetime(
    dir: &Path,
    ca: &LocalCa,
    now: SystemTime,
) -> Result<(), CertError> {
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
/// so they must stay what [`load_or_create_ca`] makes. The name constraints are
/// critical (`constraints`).
fn ca_params(common_name: &str, permitted: &Permitted) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.name_constraints = Some(permitted.name_constraints());
    params
}

/// The names a leaf of `ca` for `host` carries, and those left off because the CA may
/// not sign for them (`constraints`). A CA without readable constraints limits nothing.
fn leaf_names(ca: &CertificateDer<'_>, host: &HostNames) -> (Vec<SubjectName>, Vec<SubjectName>) {
    let permitted = CertificateFields::parse(ca)
        .ok()
        .and_then(|fields| fields.permitted_subtrees().ok().flatten());
    match permitted {
        Some((_, permitted)) => permitted.split(host.names()),
        None => (host.names(), Vec::new()),
    }
}

fn random_serial() -> SerialNumber {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    // Positive and 16 bytes long.
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    SerialNumber::from_slice(&bytes)
}

/// The leaf on disk, if it is still right for `host` at `now`; otherwise why not.
pub(super) fn load_leaf(
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
pub(super) fn issue_and_save(
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
    fsutil::write_atomically(
        &dir.join(LEAF_KEY_FILE),
        key.serialize_pem().as_bytes(),
        0o600,
    )?;
    let chain = vec![leaf.clone(), ca.cert.clone()];
    let chain_pem: String = chain.iter().map(pem_of).collect();
    fsutil::write_atomically(&dir.join(LEAF_CERT_FILE), chain_pem.as_bytes(), 0o600)?;
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = server_config(provider, chain, key_der)?;
    let (names, left_off) = ca.permitted.split(host.names());
    let names: Vec<String> = names.iter().map(ToString::to_string).collect();
    tracing::info!(target: "berth::tls", %reason, names = %names.join(","),
        "issued a new leaf certificate");
    if !left_off.is_empty() {
        let left_off: Vec<String> = left_off.iter().map(ToString::to_string).collect();
        tracing::warn!(target: "berth::tls", left_off = %left_off.join(","),
            "names outside the local CA's name constraints are left off the leaf (public \
             addresses; a host name the CA was not made for): reach the box by its \
             <hostname>.local name or a private address");
    }
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
    let (names, _) = ca.permitted.split(host.names());
    let now = time::OffsetDateTime::from(now);
    let ca_not_after = time::OffsetDateTime::from(SystemTime::from(ca.not_after));
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    // The first DNS name the CA permits: the host name, or `<host>.local` after a
    // rename. Some verifiers (OpenSSL) check a host-name-like common name against the
    // name constraints too.
    let common_name = names
        .iter()
        .find_map(|name| match name {
            SubjectName::Dns(name) => Some(name.as_str()),
            SubjectName::Ip(_) => None,
        })
        .unwrap_or("localhost");
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
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

/// Whether the served leaf must be re-issued, and why: when it does not chain to `ca` (the
/// only trust anchor, its name constraints enforced) or is not valid now, when it expires
/// within [`RENEW_BEFORE_DAYS`] of `now`, or when one of `host`'s names that `ca` may sign
/// for is not valid for it. Names the leaf has and the
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
    // Only names the CA may sign for: a leaf cannot carry the others.
    let (wanted, _) = leaf_names(ca, host);
    let missing: Vec<String> = wanted
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

#[cfg(test)]
mod tests;

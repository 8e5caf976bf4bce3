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
mod tests {
    use chrono::Utc;
    use tempfile::TempDir;

    use super::*;
    use crate::tls::test_support::*;
    use crate::tls::{ServerIdentity, describe, spki_pin};

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
            "192.168.2.7",
            "fd00::7",
        ] {
            assert!(valid_for(&leaf, name), "{name}");
        }
        for name in ["192.168.2.8", "other.local", "testbox.example"] {
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
                "192.168.2.7",
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
            Some(Renewal::NewNames(vec!["192.168.2.8".into()]))
        );
        // The bare new name is outside the CA's constraints (made for `testbox`), so
        // only `renamed.local` is wanted.
        assert_eq!(
            decide(&HostNames::new("renamed", [LAN]), now),
            Some(Renewal::NewNames(vec!["renamed.local".into()]))
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

    /// The CA's name constraints, as x509-parser reads them back: critical, the host
    /// name, `local`, `localhost` and the private, loopback and link-local ranges.
    #[test]
    fn the_ca_is_name_constrained_to_the_box_and_the_lan() {
        let tmp = TempDir::new().expect("tempdir");
        open(tmp.path(), &[LAN]);
        let ca = certs_in(&tmp.path().join(CA_CERT_FILE)).remove(0);
        let (critical, permitted) = CertificateFields::parse(&ca)
            .expect("parse")
            .permitted_subtrees()
            .expect("extension")
            .expect("name constraints");
        assert!(critical);
        assert_eq!(
            permitted.describe(),
            [
                "testbox",
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
        let summary = describe(&generated(tmp.path())).expect("describe");
        assert_eq!(summary.ca_permits, permitted.describe());
    }

    /// The point of the constraints: a leaf for another site, signed by the CA's own
    /// key, is refused by webpki (which rustls, and the test client, use), even by a
    /// client that pins the CA and checks no name; one for the box is accepted.
    #[tokio::test]
    async fn a_leaf_for_another_site_signed_by_the_ca_is_refused() {
        let tmp = TempDir::new().expect("tempdir");
        let ca = new_ca(tmp.path());
        let forge = |name: &str| {
            let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
            let mut params = CertificateParams::new(vec![name.to_string()]).expect("params");
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
            let cert = params.signed_by(&key, &ca.issuer).expect("sign");
            let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
            (cert.der().clone(), key)
        };
        let anchors = [webpki::anchor_from_trusted_cert(&ca.cert).expect("anchor")];
        let verify = |leaf: &CertificateDer<'_>| {
            webpki::EndEntityCert::try_from(leaf)
                .expect("leaf")
                .verify_for_usage(
                    webpki::ALL_VERIFICATION_ALGS,
                    &anchors,
                    &[],
                    UnixTime::now(),
                    webpki::KeyUsage::server_auth(),
                    None,
                    None,
                )
                .map(|_| ())
        };
        let (evil, evil_key) = forge("example.com");
        assert_eq!(verify(&evil), Err(webpki::Error::NameConstraintViolation));
        let (public_ip, _) = forge("8.8.8.8");
        assert_eq!(
            verify(&public_ip),
            Err(webpki::Error::NameConstraintViolation)
        );
        let (mine, _) = forge("testbox.local");
        assert_eq!(verify(&mine), Ok(()));

        // Served, to a client that pins the CA without checking names.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server =
            server_config(&provider, vec![evil, ca.cert.clone()], evil_key).expect("config");
        let pin_only = test_client::pinned_client_config(&ca_pem(tmp.path()), false);
        let err = handshake(server, pin_only, "example.com")
            .await
            .expect_err("refused");
        assert!(err.contains("invalid peer certificate"), "{err}");
    }

    /// A public address of the box cannot be in a leaf of the constrained CA: it is
    /// left off (and does not make the leaf due for renewal at every check); a renamed
    /// host keeps `<new name>.local` but not the bare new name, which the CA was not
    /// made for, and its common name is one the CA permits.
    #[test]
    fn names_outside_the_constraints_are_left_off_the_leaf() {
        let tmp = TempDir::new().expect("tempdir");
        let identity = open(tmp.path(), &[LAN, PUBLIC, PUBLIC6, LAN6]);
        let leaf = certs_in(&tmp.path().join(LEAF_CERT_FILE)).remove(0);
        let names = describe(&generated(tmp.path()))
            .expect("describe")
            .leaf
            .expect("leaf")
            .names;
        assert_eq!(
            names,
            [
                "testbox",
                "testbox.local",
                "localhost",
                "127.0.0.1",
                "::1",
                "192.168.2.7",
                "fd00::7"
            ]
        );
        let ca = certs_in(&tmp.path().join(CA_CERT_FILE)).remove(0);
        let now = SystemTime::now();
        assert_eq!(
            renewal_reason(&leaf, &ca, &host(&[LAN, PUBLIC, PUBLIC6, LAN6]), now),
            None
        );
        assert!(!valid_for(&leaf, "192.0.2.9"));

        let renamed = HostNames::new("renamed", [LAN]);
        assert_eq!(
            identity.refresh_at(&renamed, now).expect("refresh"),
            Some(Renewal::NewNames(vec!["renamed.local".into()]))
        );
        let leaf = certs_in(&tmp.path().join(LEAF_CERT_FILE)).remove(0);
        assert!(valid_for(&leaf, "renamed.local") && !valid_for(&leaf, "renamed"));
        assert_eq!(renewal_reason(&leaf, &ca, &renamed, now), None);
        let fields = CertificateFields::parse(&leaf).expect("leaf");
        assert_eq!(
            fields.single_common_name().as_deref(),
            Some("renamed.local")
        );
        assert_eq!(identity.refresh_at(&renamed, now).expect("refresh"), None);
    }

    /// A CA from before name constraints is replaced once, by a new key: a new pin, a
    /// new leaf chained to it, and a second open keeps it. A replacement cut short after
    /// the new key was written (the old certificate beside a key not its own) ends the
    /// same way. An unconstrained CA berthd did not make is refused, not replaced.
    #[test]
    fn an_unconstrained_ca_is_replaced_once() {
        let tmp = TempDir::new().expect("tempdir");
        let old_pin = old_style_ca(tmp.path(), "Berth local CA testbox");
        let old_key = read(&tmp.path().join(CA_KEY_FILE));

        let identity = open(tmp.path(), &[LAN]);
        let pin = identity.ca_pin();
        assert_ne!(pin, old_pin);
        assert_ne!(read(&tmp.path().join(CA_KEY_FILE)), old_key, "a new key");
        let summary = describe(&generated(tmp.path())).expect("describe");
        assert_eq!(summary.ca_pin, pin);
        assert!(summary.ca_permits.contains(&"local".to_string()));
        let chain = certs_in(&tmp.path().join(LEAF_CERT_FILE));
        assert_eq!(spki_pin(&chain[1]).expect("pin"), pin);
        assert_eq!(
            renewal_reason(&chain[0], &chain[1], &host(&[LAN]), SystemTime::now()),
            None
        );
        assert_eq!(open(tmp.path(), &[LAN]).ca_pin(), pin, "replaced once");

        // Cut short: the old certificate, and a key that is not its own.
        let cut = TempDir::new().expect("tempdir");
        let cut_pin = old_style_ca(cut.path(), "Berth local CA testbox");
        let stray = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        std::fs::write(cut.path().join(CA_KEY_FILE), stray.serialize_pem()).expect("write");
        let replaced = open(cut.path(), &[LAN]).ca_pin();
        assert_ne!(replaced, cut_pin);
        assert_ne!(replaced, pin_of_spki(&stray.subject_public_key_info()));

        let foreign = TempDir::new().expect("tempdir");
        old_style_ca(foreign.path(), "Someone's own CA");
        let before = read(&foreign.path().join(CA_KEY_FILE));
        let err =
            ServerIdentity::open_at(generated(foreign.path()), &host(&[LAN]), SystemTime::now())
                .expect_err("foreign");
        assert!(matches!(err, CertError::UnconstrainedCa { .. }), "{err}");
        assert_eq!(read(&foreign.path().join(CA_KEY_FILE)), before, "kept");
    }
}

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

pub(super) fn load_or_create_ca(
    dir: &Path,
    host: &HostNames,
    now: SystemTime,
) -> Result<LocalCa, CertError> {
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
                    fsutil::write_atomically(&key_path, key.serialize_pem().as_bytes(), 0o600)?;
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
            fsutil::write_atomically(&cert_path, pem_of(&cert).as_bytes(), 0o600)?;
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
        issuer: Issuer::new(ca_params(&common_name), key),
        cert,
        pin,
        not_after,
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
}

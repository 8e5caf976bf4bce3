//! The local CA and its leaves, on real files: made, re-loaded, constrained, renewed.

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
    let key = KeyPair::from_pem(&String::from_utf8(read(&dir.join(CA_KEY_FILE))).expect("utf-8"))
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
    let server = server_config(&provider, vec![evil, ca.cert.clone()], evil_key).expect("config");
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
    let err = ServerIdentity::open_at(generated(foreign.path()), &host(&[LAN]), SystemTime::now())
        .expect_err("foreign");
    assert!(matches!(err, CertError::UnconstrainedCa { .. }), "{err}");
    assert_eq!(read(&foreign.path().join(CA_KEY_FILE)), before, "kept");
}

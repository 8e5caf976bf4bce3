//! Reading a certificate back (x509-parser): its SubjectPublicKeyInfo, for the pin; its
//! validity; its subject alternative names, for `berthd tls show`; and, for the local
//! CA, its common name and its name constraints. Only fields are read here: chain, expiry and name checks are
//! rustls-webpki's ([`renewal_reason`](super::renewal_reason)).
//!
//! x509-parser is used without features, so it brings no crypto of its own (ring stays
//! the only one). It reads times a little more leniently than RFC 5280 writes them: a
//! UTCTime without seconds or with an offset is read, not refused. berthd only reads
//! times to report them and to warn about expiry; what is served is checked by the
//! clients' own verifiers.

use std::net::IpAddr;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bitcoin::hashes::{Hash as _, sha256};
use chrono::{DateTime, Utc};
use x509_parser::asn1_rs::Tag;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::oid_registry::OID_X509_COMMON_NAME;
use x509_parser::prelude::FromDer as _;
use x509_parser::time::ASN1Time;

use super::CertError;
use super::constraints::{Permitted, Subtree};

/// An iPAddress subtree: the address then the mask, 4 + 4 or 16 + 16 bytes, the mask
/// a run of ones.
fn ip_subtree(bytes: &[u8]) -> Result<Subtree, Malformed> {
    let bad = Malformed("bad address range in name constraints");
    let (network, mask_ones, mask_bits) = if let Ok(raw) = <[u8; 8]>::try_from(bytes) {
        let (addr, mask) = raw.split_at(4);
        let addr: [u8; 4] = addr.try_into().map_err(|_| bad)?;
        let mask = u32::from_be_bytes(mask.try_into().map_err(|_| bad)?);
        (IpAddr::from(addr), mask.leading_ones(), mask.count_ones())
    } else if let Ok(raw) = <[u8; 32]>::try_from(bytes) {
        let (addr, mask) = raw.split_at(16);
        let addr: [u8; 16] = addr.try_into().map_err(|_| bad)?;
        let mask = u128::from_be_bytes(mask.try_into().map_err(|_| bad)?);
        (IpAddr::from(addr), mask.leading_ones(), mask.count_ones())
    } else {
        return Err(bad);
    };
    if mask_ones != mask_bits {
        return Err(bad);
    }
    let prefix = u8::try_from(mask_ones).map_err(|_| bad)?;
    Ok(Subtree::Ip { network, prefix })
}

/// Why a certificate's DER could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Malformed(pub &'static str);

/// The pin of a certificate: `sha256/` + base64url (no padding) of the SHA-256 of its
/// SubjectPublicKeyInfo DER.
pub fn spki_pin(cert_der: &[u8]) -> Result<String, CertError> {
    let fields = CertificateFields::parse(cert_der).map_err(|e| CertError::BadCertificate(e.0))?;
    Ok(pin_of_spki(fields.spki()))
}

pub(super) fn pin_of_spki(spki_der: &[u8]) -> String {
    let digest = sha256::Hash::hash(spki_der).to_byte_array();
    format!("sha256/{}", URL_SAFE_NO_PAD.encode(digest))
}

/// One DER certificate, parsed, and the fields berthd reads from it.
pub(super) struct CertificateFields<'a> {
    x509: X509Certificate<'a>,
}

impl<'a> CertificateFields<'a> {
    /// Parse `der`: exactly one certificate, nothing after it.
    pub(super) fn parse(der: &'a [u8]) -> Result<Self, Malformed> {
        let (rest, x509) =
            X509Certificate::from_der(der).map_err(|_| Malformed("not a DER X.509 certificate"))?;
        if !rest.is_empty() {
            return Err(Malformed("data after the certificate"));
        }
        Ok(CertificateFields { x509 })
    }

    /// The SubjectPublicKeyInfo, whole (tag and length included): what the pin hashes.
    pub(super) fn spki(&self) -> &'a [u8] {
        self.x509.tbs_certificate.subject_pki.raw
    }

    pub(super) fn not_before(&self) -> Result<DateTime<Utc>, Malformed> {
        utc(self.x509.validity().not_before)
    }

    pub(super) fn not_after(&self) -> Result<DateTime<Utc>, Malformed> {
        utc(self.x509.validity().not_after)
    }

    /// The DNS names and IP addresses of the subjectAltName extension, in order; other
    /// kinds of name are left out. Empty without the extension.
    pub(super) fn subject_alt_names(&self) -> Result<Vec<String>, Malformed> {
        let Some(extension) = self
            .x509
            .subject_alternative_name()
            .map_err(|_| Malformed("bad subjectAltName extension"))?
        else {
            return Ok(Vec::new());
        };
        let mut names = Vec::new();
        for name in &extension.value.general_names {
            match name {
                GeneralName::DNSName(name) => names.push((*name).to_string()),
                // A dNSName that is not UTF-8 (x509-parser keeps its bytes): shown as is.
                GeneralName::Invalid(Tag(2), bytes) => {
                    names.push(String::from_utf8_lossy(bytes).into_owned());
                }
                GeneralName::IPAddress(octets) => {
                    let ip = if let Ok(v4) = <[u8; 4]>::try_from(*octets) {
                        IpAddr::from(v4)
                    } else if let Ok(v6) = <[u8; 16]>::try_from(*octets) {
                        IpAddr::from(v6)
                    } else {
                        return Err(Malformed("bad IP address in subjectAltName"));
                    };
                    names.push(ip.to_string());
                }
                _ => {}
            }
        }
        Ok(names)
    }

    /// The name constraints' permitted subtrees (DNS names and address ranges), and
    /// whether the extension is critical; `None` without the extension, or without
    /// permitted subtrees. Other kinds of subtree are left out: berthd writes none.
    pub(super) fn permitted_subtrees(&self) -> Result<Option<(bool, Permitted)>, Malformed> {
        let Some(extension) = self
            .x509
            .name_constraints()
            .map_err(|_| Malformed("bad name constraints extension"))?
        else {
            return Ok(None);
        };
        let Some(permitted) = &extension.value.permitted_subtrees else {
            return Ok(None);
        };
        let mut subtrees = Vec::new();
        for subtree in permitted {
            match &subtree.base {
                GeneralName::DNSName(name) => subtrees.push(Subtree::Dns((*name).to_string())),
                GeneralName::IPAddress(bytes) => subtrees.push(ip_subtree(bytes)?),
                _ => {}
            }
        }
        if subtrees.is_empty() {
            return Ok(None);
        }
        Ok(Some((
            extension.critical,
            Permitted::from_subtrees(subtrees),
        )))
    }

    /// The common name of a subject that is exactly one UTF-8 commonName, the way
    /// berthd writes its CA's subject.
    pub(super) fn single_common_name(&self) -> Option<String> {
        let mut rdns = self.x509.subject().iter_rdn();
        let (Some(rdn), None) = (rdns.next(), rdns.next()) else {
            return None;
        };
        let mut attributes = rdn.iter();
        let (Some(attribute), None) = (attributes.next(), attributes.next()) else {
            return None;
        };
        let is_utf8_common_name = *attribute.attr_type() == OID_X509_COMMON_NAME
            && attribute.attr_value().tag() == Tag::Utf8String;
        is_utf8_common_name
            .then(|| attribute.as_str().ok().map(str::to_string))
            .flatten()
    }
}

/// A certificate time (UTCTime or GeneralizedTime, already read by x509-parser) in UTC.
fn utc(time: ASN1Time) -> Result<DateTime<Utc>, Malformed> {
    DateTime::from_timestamp(time.timestamp(), 0).ok_or(Malformed("bad certificate time"))
}

#[cfg(test)]
mod tests {
    use rcgen::{
        CertificateParams, DistinguishedName, DnType, DnValue, KeyPair, PublicKeyData as _,
    };
    use tempfile::TempDir;

    use super::*;
    use crate::tls::test_support::*;
    use crate::tls::{CA_CERT_FILE, LEAF_CERT_FILE, LEAF_KEY_FILE};

    const SEQUENCE: u8 = 0x30;
    const UTC_TIME: u8 = 0x17;
    const GENERALIZED_TIME: u8 = 0x18;

    /// A DER time element with `tag` and `text`, read the way a certificate's are.
    fn time(tag: u8, text: &[u8]) -> Result<DateTime<Utc>, Malformed> {
        let mut der = vec![tag, u8::try_from(text.len()).expect("short")];
        der.extend_from_slice(text);
        let (_, time) = ASN1Time::from_der(&der).map_err(|_| Malformed("bad certificate time"))?;
        utc(time)
    }

    #[test]
    fn times_in_both_forms() {
        let utc = time(UTC_TIME, b"491231235959Z").expect("utc");
        assert_eq!(utc.to_rfc3339(), "2049-12-31T23:59:59+00:00");
        let utc = time(UTC_TIME, b"500101000000Z").expect("utc");
        assert_eq!(utc.to_rfc3339(), "1950-01-01T00:00:00+00:00");
        let generalized = time(GENERALIZED_TIME, b"20500101120000Z").expect("generalized");
        assert_eq!(generalized.to_rfc3339(), "2050-01-01T12:00:00+00:00");
        let bad_times: [&[u8]; 3] = [b"491231235959+", b"4913312359590", b"49\xc3\xa9231235959"];
        for bad in bad_times {
            assert!(time(UTC_TIME, bad).is_err(), "{bad:?}");
        }
        assert!(time(SEQUENCE, b"491231235959Z").is_err());
        // X.680 lets a UTCTime leave out the seconds (RFC 5280 does not); x509-parser
        // reads it, where the hand-written DER walk it replaced refused it.
        let no_seconds = time(UTC_TIME, b"4912312359Z").expect("without seconds");
        assert_eq!(no_seconds.to_rfc3339(), "2049-12-31T23:59:00+00:00");
    }

    #[test]
    fn lengths_short_long_and_truncated() {
        let mut long = vec![SEQUENCE, 0x81, 200];
        long.extend([7u8; 200]);
        let (rest, element) = x509_parser::asn1_rs::Any::from_der(&long).expect("long form");
        assert_eq!(element.data.len(), 200);
        assert!(rest.is_empty());
        let bad_elements: [&[u8]; 5] = [
            &[SEQUENCE],
            &[SEQUENCE, 3, 1],
            &[SEQUENCE, 0x80],
            &[SEQUENCE, 0x85, 0, 0, 0, 0, 1],
            &[0x1f, 0],
        ];
        for bad in bad_elements {
            assert!(CertificateFields::parse(bad).is_err(), "{bad:?}");
        }
        assert!(
            CertificateFields::parse(&[SEQUENCE, 0, 0]).is_err(),
            "trailing data"
        );
        let tmp = TempDir::new().expect("tempdir");
        open(tmp.path(), &[LAN]);
        let mut leaf = certs_in(&tmp.path().join(LEAF_CERT_FILE))
            .remove(0)
            .to_vec();
        leaf.push(0);
        assert_eq!(
            CertificateFields::parse(&leaf).err(),
            Some(Malformed("data after the certificate"))
        );
    }

    #[test]
    fn the_spki_agrees_with_webpki_and_rcgen() {
        let tmp = TempDir::new().expect("tempdir");
        open(tmp.path(), &[LAN]);
        for cert in certs_in(&tmp.path().join(LEAF_CERT_FILE)) {
            let parsed = webpki::EndEntityCert::try_from(&cert).expect("webpki");
            let fields = CertificateFields::parse(&cert).expect("parse");
            assert_eq!(fields.spki(), parsed.subject_public_key_info().as_ref());
        }
        let key = KeyPair::from_pem(
            &String::from_utf8(read(&tmp.path().join(LEAF_KEY_FILE))).expect("utf-8"),
        )
        .expect("key");
        let leaf = certs_in(&tmp.path().join(LEAF_CERT_FILE)).remove(0);
        assert_eq!(
            CertificateFields::parse(&leaf).expect("parse").spki(),
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
    fn only_a_single_utf8_common_name_is_read_as_the_ca_name() {
        let tmp = TempDir::new().expect("tempdir");
        new_ca(tmp.path());
        let ca = certs_in(&tmp.path().join(CA_CERT_FILE)).remove(0);
        assert_eq!(
            CertificateFields::parse(&ca)
                .expect("parse")
                .single_common_name()
                .as_deref(),
            Some("Berth local CA testbox")
        );

        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
        let common_name = |name: DistinguishedName| {
            let mut params = CertificateParams::default();
            params.distinguished_name = name;
            let cert = params.self_signed(&key).expect("certificate");
            CertificateFields::parse(cert.der())
                .expect("parse")
                .single_common_name()
        };
        let mut utf8 = DistinguishedName::new();
        utf8.push(DnType::CommonName, "mine");
        assert_eq!(common_name(utf8).as_deref(), Some("mine"));
        let mut printable = DistinguishedName::new();
        printable.push(
            DnType::CommonName,
            DnValue::PrintableString("mine".try_into().expect("printable")),
        );
        assert_eq!(common_name(printable), None);
        let mut two = DistinguishedName::new();
        two.push(DnType::CommonName, "mine");
        two.push(DnType::OrganizationName, "org");
        assert_eq!(common_name(two), None);
        let mut other = DistinguishedName::new();
        other.push(DnType::OrganizationName, "org");
        assert_eq!(common_name(other), None);
        assert_eq!(common_name(DistinguishedName::new()), None);
    }
}

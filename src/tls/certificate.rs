//! The pin: what clients check a server's chain against.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bitcoin::hashes::{Hash as _, sha256};

use super::{CertError, der};

/// The pin of a certificate: `sha256/` + base64url (no padding) of the SHA-256 of its
/// SubjectPublicKeyInfo DER.
pub fn spki_pin(cert_der: &[u8]) -> Result<String, CertError> {
    let fields = der::certificate(cert_der).map_err(|e| CertError::BadCertificate(e.0))?;
    Ok(pin_of_spki(fields.spki))
}

pub(super) fn pin_of_spki(spki_der: &[u8]) -> String {
    let digest = sha256::Hash::hash(spki_der).to_byte_array();
    format!("sha256/{}", URL_SAFE_NO_PAD.encode(digest))
}

#[cfg(test)]
mod tests {
    use rcgen::{KeyPair, PublicKeyData as _};
    use tempfile::TempDir;

    use super::*;
    use crate::tls::test_support::*;
    use crate::tls::{LEAF_CERT_FILE, LEAF_KEY_FILE};

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
}

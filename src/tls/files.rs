//! The PEM files: reading them (a missing file is `None` where it may be missing),
//! their certificates and keys, and writing a certificate as PEM.

use std::path::Path;

use base64::Engine as _;
use rcgen::KeyPair;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::{CertError, bad_file, io};

pub(super) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, CertError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("cannot read", path)(e)),
    }
}

pub(super) fn parse_certs(
    path: &Path,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_file(path, format!("not a PEM certificate file ({e})")))?;
    if certs.is_empty() {
        return Err(bad_file(path, "no PEM certificate in it"));
    }
    Ok(certs)
}

pub(super) fn first_cert(path: &Path, pem: &[u8]) -> Result<CertificateDer<'static>, CertError> {
    parse_certs(path, pem)?
        .into_iter()
        .next()
        .ok_or_else(|| bad_file(path, "no PEM certificate in it"))
}

// Key parse errors are not echoed: they could quote the file's contents.
pub(super) fn parse_key(path: &Path, pem: &[u8]) -> Result<PrivateKeyDer<'static>, CertError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|_| bad_file(path, "not a PEM private key"))
}

pub(super) fn parse_key_pair(path: &Path, pem: &[u8]) -> Result<KeyPair, CertError> {
    std::str::from_utf8(pem)
        .ok()
        .and_then(|pem| KeyPair::from_pem(pem).ok())
        .ok_or_else(|| bad_file(path, "not a PEM (PKCS#8) private key"))
}

pub(super) fn pem_of(cert: &CertificateDer<'_>) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(cert.as_ref());
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

//! What the unit tests of `tls` share: a test host, a generated identity in a
//! directory, reading files back, and TLS handshakes against a client that pins the CA.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::files::parse_certs;
use super::issuance::{LocalCa, load_or_create_ca};
use super::{CA_CERT_FILE, HostNames, MAX_LEAF_VALIDITY_DAYS, ServerIdentity, TlsSource};

/// The client a paired phone is (`tests/harness/tls.rs`, tested here too).
#[path = "../../tests/harness/tls.rs"]
pub(super) mod test_client;

const HOST: &str = "testbox";
pub(super) const LAN: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 168, 2, 7));
pub(super) const LAN2: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 168, 2, 8));
/// Public addresses (documentation ranges), which the local CA may not sign for.
pub(super) const PUBLIC: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9));
pub(super) const PUBLIC6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 9));
pub(super) const LAN6: IpAddr = IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 7));

pub(super) fn host(ips: &[IpAddr]) -> HostNames {
    HostNames::new(HOST, ips.iter().copied())
}

pub(super) fn generated(dir: &Path) -> TlsSource {
    TlsSource::Generated {
        dir: dir.to_path_buf(),
        leaf_validity_days: MAX_LEAF_VALIDITY_DAYS,
    }
}

pub(super) fn open(dir: &Path, ips: &[IpAddr]) -> Arc<ServerIdentity> {
    ServerIdentity::open_at(generated(dir), &host(ips), SystemTime::now()).expect("open")
}

pub(super) fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).expect("read")
}

pub(super) fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

pub(super) fn certs_in(path: &Path) -> Vec<CertificateDer<'static>> {
    parse_certs(path, &read(path)).expect("certificates")
}

pub(super) fn ca_pem(dir: &Path) -> String {
    String::from_utf8(read(&dir.join(CA_CERT_FILE))).expect("utf-8")
}

pub(super) fn new_ca(dir: &Path) -> LocalCa {
    load_or_create_ca(dir, &host(&[]), SystemTime::now()).expect("ca")
}

/// A CA as berthd made it before name constraints (or as someone else might), named
/// `common_name`, written to `dir`'s `ca.pem` and `ca.key`; its pin.
pub(super) fn old_style_ca(dir: &Path, common_name: &str) -> String {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).expect("key");
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params.self_signed(&key).expect("certificate");
    std::fs::create_dir_all(dir).expect("mkdir");
    std::fs::write(dir.join(CA_CERT_FILE), cert.pem()).expect("ca.pem");
    std::fs::write(dir.join(super::CA_KEY_FILE), key.serialize_pem()).expect("ca.key");
    super::spki_pin(cert.der()).expect("pin")
}

pub(super) fn valid_for(leaf: &CertificateDer<'_>, name: &str) -> bool {
    let cert = webpki::EndEntityCert::try_from(leaf).expect("leaf");
    let name = ServerName::try_from(name.to_string()).expect("name");
    cert.verify_is_valid_for_subject_name(&name).is_ok()
}

/// A TLS handshake over an in-memory pipe; the ALPN protocol agreed, or the client's error.
pub(super) async fn handshake(
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

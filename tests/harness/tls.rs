//! A TLS client for tests that trusts one CA only — the daemon's local CA — the way a
//! paired phone does. (Also compiled into the unit tests of `src/tls/`, which test it.)

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// A client that accepts a server only if its chain verifies (webpki, server auth, now)
/// to the first certificate of `ca_pem`, and, if `check_name`, only for the name it
/// connects to. With `check_name` false the CA is a pin and any name goes. No ALPN.
pub fn pinned_client_config(ca_pem: &str, check_name: bool) -> Arc<ClientConfig> {
    pinned_client_config_with_alpn(ca_pem, check_name, &[])
}

/// [`pinned_client_config`] offering `alpn` (e.g. `&[b"h2", b"http/1.1"]`).
pub fn pinned_client_config_with_alpn(
    ca_pem: &str,
    check_name: bool,
    alpn: &[&[u8]],
) -> Arc<ClientConfig> {
    let ca = CertificateDer::pem_slice_iter(ca_pem.as_bytes())
        .next()
        .expect("a certificate in ca_pem")
        .expect("a PEM certificate");
    let mut roots = RootCertStore::empty();
    roots.add(ca).expect("a usable CA certificate");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = PinnedCa {
        roots,
        check_name,
        algorithms: provider.signature_verification_algorithms,
    };
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|protocol| protocol.to_vec()).collect();
    Arc::new(config)
}

#[derive(Debug)]
struct PinnedCa {
    roots: RootCertStore,
    check_name: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algorithms.all,
        )?;
        if self.check_name {
            verify_server_name(&cert, server_name)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

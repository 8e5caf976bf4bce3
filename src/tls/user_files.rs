//! The user-supplied mode: the operator's chain (leaf first) and key, served as they
//! are and reloaded when either file changes. The pin is that of the chain's last
//! certificate.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use bitcoin::hashes::{Hash as _, HashEngine as _, sha256};
use chrono::{DateTime, Utc};
use rustls::crypto::CryptoProvider;

use super::certificate::{CertificateFields, spki_pin};
use super::files::{parse_certs, parse_key};
use super::{CertError, DAY, RENEW_BEFORE_DAYS, Served, bad_file, io, server_config};

pub(super) fn read_user_files(
    cert_chain: &Path,
    key: &Path,
) -> Result<(Vec<u8>, Vec<u8>), CertError> {
    let chain_pem = std::fs::read(cert_chain).map_err(io("cannot read", cert_chain))?;
    let key_pem = std::fs::read(key).map_err(io("cannot read", key))?;
    Ok((chain_pem, key_pem))
}

pub(super) fn files_digest(chain_pem: &[u8], key_pem: &[u8]) -> [u8; 32] {
    let mut engine = sha256::Hash::engine();
    engine.input(&(chain_pem.len() as u64).to_be_bytes());
    engine.input(chain_pem);
    engine.input(key_pem);
    sha256::Hash::from_engine(engine).to_byte_array()
}

pub(super) fn load_user_supplied(
    cert_chain: &Path,
    key: &Path,
    now: SystemTime,
    provider: &Arc<CryptoProvider>,
) -> Result<(Served, [u8; 32]), CertError> {
    let (chain_pem, key_pem) = read_user_files(cert_chain, key)?;
    let served = served_from_user_files(cert_chain, key, &chain_pem, &key_pem, now, provider)?;
    Ok((served, files_digest(&chain_pem, &key_pem)))
}

pub(super) fn served_from_user_files(
    cert_chain: &Path,
    key_path: &Path,
    chain_pem: &[u8],
    key_pem: &[u8],
    now: SystemTime,
    provider: &Arc<CryptoProvider>,
) -> Result<Served, CertError> {
    let chain = parse_certs(cert_chain, chain_pem)?;
    let key = parse_key(key_path, key_pem)?;
    let (Some(leaf), Some(last)) = (chain.first().cloned(), chain.last()) else {
        return Err(bad_file(cert_chain, "no certificate in it"));
    };
    let pin = spki_pin(last).map_err(|e| bad_file(cert_chain, e.to_string()))?;
    // Not fatal (the operator renews it), but worth saying.
    if let Ok(not_after) = CertificateFields::parse(&leaf).and_then(|fields| fields.not_after())
        && not_after < DateTime::<Utc>::from(now + DAY * RENEW_BEFORE_DAYS)
    {
        tracing::warn!(target: "berth::tls", path = %cert_chain.display(), %not_after,
            "the TLS certificate expires soon");
    }
    let config = server_config(provider, chain, key).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => CertError::KeyMismatch {
            cert: cert_chain.to_path_buf(),
            key: key_path.to_path_buf(),
        },
        rustls::Error::InvalidCertificate(_) => bad_file(cert_chain, e.to_string()),
        // The key did not load (rustls' message does not quote it).
        other => bad_file(key_path, other.to_string()),
    })?;
    Ok(Served { config, pin, leaf })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use tempfile::TempDir;

    use super::*;
    use crate::tls::test_support::*;
    use crate::tls::{LEAF_CERT_FILE, LEAF_KEY_FILE, Renewal, ServerIdentity, TlsSource, describe};

    /// A chain (leaf, CA) and key as an operator would supply them, made by another CA.
    fn user_files(dir: &Path) -> (PathBuf, PathBuf, String) {
        let ca_dir = dir.join("their-ca");
        open(&ca_dir, &[LAN]);
        let chain = dir.join("chain.pem");
        let key = dir.join("key.pem");
        std::fs::copy(ca_dir.join(LEAF_CERT_FILE), &chain).expect("copy chain");
        std::fs::copy(ca_dir.join(LEAF_KEY_FILE), &key).expect("copy key");
        (chain, key, ca_pem(&ca_dir))
    }

    #[tokio::test]
    async fn user_supplied_files_are_served_and_reloaded() {
        let tmp = TempDir::new().expect("tempdir");
        let (chain, key, their_ca) = user_files(tmp.path());
        let source = TlsSource::UserSupplied {
            cert_chain: chain.clone(),
            key: key.clone(),
        };
        let identity =
            ServerIdentity::open_at(source.clone(), &host(&[]), SystemTime::now()).expect("open");
        let last = certs_in(&chain).pop().expect("last");
        assert_eq!(identity.ca_pin(), spki_pin(&last).expect("pin"));
        let client = test_client::pinned_client_config(&their_ca, true);
        handshake(identity.config(), client, "testbox.local")
            .await
            .expect("handshake");
        assert_eq!(
            describe(&source).expect("describe").ca_pin,
            identity.ca_pin()
        );

        assert_eq!(
            identity
                .refresh_at(&host(&[]), SystemTime::now())
                .expect("refresh"),
            None
        );

        // New files from yet another CA: reloaded, new pin, served.
        let newer = tmp.path().join("newer");
        std::fs::create_dir(&newer).expect("mkdir");
        let (new_chain, new_key, new_ca) = user_files(&newer);
        std::fs::copy(&new_chain, &chain).expect("replace chain");
        std::fs::copy(&new_key, &key).expect("replace key");
        let renewal = identity
            .refresh_at(&host(&[]), SystemTime::now())
            .expect("refresh");
        assert_eq!(renewal, Some(Renewal::Reloaded));
        assert_ne!(identity.ca_pin(), spki_pin(&last).expect("pin"));
        let client = test_client::pinned_client_config(&new_ca, true);
        handshake(identity.config(), client, "192.168.2.7")
            .await
            .expect("handshake");

        // A broken key: the refresh fails and the previous configuration stays.
        let served = identity.config();
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .expect("break key");
        let err = identity
            .refresh_at(&host(&[]), SystemTime::now())
            .expect_err("broken key");
        assert!(err.to_string().contains("key.pem"), "{err}");
        assert!(Arc::ptr_eq(&served, &identity.config()));
    }

    #[test]
    fn user_supplied_errors_name_the_file() {
        let tmp = TempDir::new().expect("tempdir");
        let (chain, key, _) = user_files(tmp.path());
        let open_user = |cert_chain: &Path, key: &Path| {
            let source = TlsSource::UserSupplied {
                cert_chain: cert_chain.to_path_buf(),
                key: key.to_path_buf(),
            };
            ServerIdentity::open_at(source, &host(&[]), SystemTime::now()).expect_err("must fail")
        };

        let missing = tmp.path().join("missing.pem");
        let err = open_user(&chain, &missing);
        assert!(
            matches!(&err, CertError::Io { path, .. } if *path == missing),
            "{err}"
        );

        let other = tmp.path().join("other");
        std::fs::create_dir(&other).expect("mkdir");
        let (_, other_key, _) = user_files(&other);
        let err = open_user(&chain, &other_key);
        assert!(matches!(err, CertError::KeyMismatch { .. }), "{err}");

        let garbage = tmp.path().join("garbage.pem");
        std::fs::write(&garbage, "not pem at all").expect("write");
        let err = open_user(&garbage, &key);
        assert!(err.to_string().contains("garbage.pem"), "{err}");
        let err = open_user(&chain, &garbage);
        assert_eq!(
            err.to_string(),
            format!("{}: not a PEM private key", garbage.display())
        );
    }
}

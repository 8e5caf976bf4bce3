//! [`ServerIdentity`]: what the LAN listener serves, opened once and refreshed in place
//! when the host's names change, the leaf nears its expiry, or the operator's files
//! change.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::SystemTime;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;

use super::issuance::{
    LocalCa, check_ca_lifetime, issue_and_save, load_leaf, load_or_create_ca, renewal_reason,
};
use super::names::HostNames;
use super::user_files::{
    files_digest, load_user_supplied, read_user_files, served_from_user_files,
};
use super::{CertError, MAX_LEAF_VALIDITY_DAYS, Renewal, Served, TlsSource, io};

/// The certificate the LAN listener serves, reloadable without a restart.
///
/// [`config`](Self::config) is cheap (an `Arc` clone under a read lock) and is meant to
/// be called for every accepted connection, so a refresh takes effect on the next one.
pub struct ServerIdentity {
    provider: Arc<CryptoProvider>,
    /// What the listener serves now.
    served: RwLock<Served>,
    /// Where it comes from; held for a whole refresh so two refreshes never interleave.
    source: Mutex<Source>,
}

enum Source {
    Generated {
        dir: PathBuf,
        leaf_validity_days: u32,
        ca: Box<LocalCa>,
    },
    UserSupplied {
        cert_chain: PathBuf,
        key: PathBuf,
        /// SHA-256 of both files as last loaded, to reload only what changed.
        digest: [u8; 32],
    },
}

impl std::fmt::Debug for ServerIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerIdentity")
            .field("pin", &self.ca_pin())
            .finish_non_exhaustive()
    }
}

impl ServerIdentity {
    /// Load (or, in the generated mode, create) the identity for this host now.
    /// See [`open_at`](Self::open_at).
    pub fn open(source: TlsSource) -> Result<Arc<Self>, CertError> {
        Self::open_at(source, &HostNames::current(), SystemTime::now())
    }

    /// Load the identity as if the host had `host`'s names and the time were `now`.
    ///
    /// Generated mode: creates the directory (0700), the CA and a leaf if they do not
    /// exist, reuses the CA if it does (an error if its key is missing or not its own),
    /// and re-issues the leaf if [`renewal_reason`] says so (or it cannot be read).
    /// User-supplied mode: reads the chain and key; an error if they do not match.
    pub fn open_at(
        source: TlsSource,
        host: &HostNames,
        now: SystemTime,
    ) -> Result<Arc<Self>, CertError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (source, served) = match source {
            TlsSource::Generated {
                dir,
                leaf_validity_days,
            } => {
                if !(1..=MAX_LEAF_VALIDITY_DAYS).contains(&leaf_validity_days) {
                    return Err(CertError::Validity(leaf_validity_days));
                }
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&dir)
                    .map_err(io("cannot create", &dir))?;
                let ca = load_or_create_ca(&dir, host, now)?;
                let served = match load_leaf(&dir, &ca, host, now, &provider) {
                    Ok(served) => served,
                    Err(reason) => issue_and_save(
                        &dir,
                        &ca,
                        host,
                        leaf_validity_days,
                        now,
                        &provider,
                        &reason,
                    )?,
                };
                let source = Source::Generated {
                    dir,
                    leaf_validity_days,
                    ca: Box::new(ca),
                };
                (source, served)
            }
            TlsSource::UserSupplied { cert_chain, key } => {
                let (served, digest) = load_user_supplied(&cert_chain, &key, now, &provider)?;
                let source = Source::UserSupplied {
                    cert_chain,
                    key,
                    digest,
                };
                (source, served)
            }
        };
        Ok(Arc::new(ServerIdentity {
            provider,
            served: RwLock::new(served),
            source: Mutex::new(source),
        }))
    }

    /// The configuration to accept the next connection with: ALPN `h2` then `http/1.1`,
    /// TLS 1.3 and 1.2, ring.
    pub fn config(&self) -> Arc<ServerConfig> {
        Arc::clone(
            &self
                .served
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .config,
        )
    }

    /// The pin clients check: of the local CA, or of the last certificate of a
    /// user-supplied chain.
    pub fn ca_pin(&self) -> String {
        self.served
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .pin
            .clone()
    }

    /// Re-check the identity against this host now. See [`refresh_at`](Self::refresh_at).
    pub fn refresh(&self) -> Result<Option<Renewal>, CertError> {
        self.refresh_at(&HostNames::current(), SystemTime::now())
    }

    /// Generated mode: re-issue the leaf (writing its files) if [`renewal_reason`] says so.
    /// User-supplied mode: re-read the files and serve them if they changed.
    /// Returns why the served certificate changed, or `None` if it did not. On error the
    /// previous configuration keeps being served.
    pub fn refresh_at(
        &self,
        host: &HostNames,
        now: SystemTime,
    ) -> Result<Option<Renewal>, CertError> {
        let mut source = self.source.lock().unwrap_or_else(PoisonError::into_inner);
        let (served, renewal) = match &mut *source {
            Source::Generated {
                dir,
                leaf_validity_days,
                ca,
            } => {
                check_ca_lifetime(dir, ca, now)?;
                let leaf = self
                    .served
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .leaf
                    .clone();
                let Some(reason) = renewal_reason(&leaf, &ca.cert, host, now) else {
                    return Ok(None);
                };
                let served = issue_and_save(
                    dir,
                    ca,
                    host,
                    *leaf_validity_days,
                    now,
                    &self.provider,
                    &reason,
                )?;
                (served, reason)
            }
            Source::UserSupplied {
                cert_chain,
                key,
                digest,
            } => {
                let (chain_pem, key_pem) = read_user_files(cert_chain, key)?;
                let new_digest = files_digest(&chain_pem, &key_pem);
                if new_digest == *digest {
                    return Ok(None);
                }
                let served = served_from_user_files(
                    cert_chain,
                    key,
                    &chain_pem,
                    &key_pem,
                    now,
                    &self.provider,
                )?;
                *digest = new_digest;
                tracing::info!(target: "berth::tls", path = %cert_chain.display(), pin = %served.pin,
                    "reloaded the TLS certificate");
                (served, Renewal::Reloaded)
            }
        };
        *self.served.write().unwrap_or_else(PoisonError::into_inner) = served;
        Ok(Some(renewal))
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use rustls::pki_types::ServerName;
    use tempfile::TempDir;
    use tokio_rustls::{TlsAcceptor, TlsConnector};

    use super::*;
    use crate::tls::files::parse_key;
    use crate::tls::test_support::*;
    use crate::tls::{
        CA_KEY_FILE, DAY, LEAF_CERT_FILE, LEAF_KEY_FILE, describe, server_config, spki_pin,
    };

    #[test]
    fn a_shorter_validity_is_honoured_and_out_of_range_refused() {
        let tmp = TempDir::new().expect("tempdir");
        let source = |days| TlsSource::Generated {
            dir: tmp.path().to_path_buf(),
            leaf_validity_days: days,
        };
        for days in [0, 398] {
            let err = ServerIdentity::open_at(source(days), &host(&[]), SystemTime::now())
                .expect_err("out of range");
            assert!(matches!(err, CertError::Validity(d) if d == days));
        }
        ServerIdentity::open_at(source(90), &host(&[]), SystemTime::now()).expect("open");
        let leaf = describe(&source(90)).expect("describe").leaf.expect("leaf");
        let life = leaf.not_after - Utc::now();
        assert!(life > chrono::Duration::days(89) && life <= chrono::Duration::days(90));
    }

    #[tokio::test]
    async fn refresh_swaps_to_a_new_leaf_under_the_same_pin() {
        let tmp = TempDir::new().expect("tempdir");
        let identity = open(tmp.path(), &[LAN]);
        let pin = identity.ca_pin();
        let before = identity.config();
        let client = test_client::pinned_client_config(&ca_pem(tmp.path()), true);
        assert!(
            handshake(identity.config(), client.clone(), "192.168.2.8")
                .await
                .is_err()
        );

        assert_eq!(
            identity
                .refresh_at(&host(&[LAN]), SystemTime::now())
                .expect("refresh"),
            None
        );
        assert!(
            Arc::ptr_eq(&before, &identity.config()),
            "nothing changed, nothing swapped"
        );

        let renewal = identity
            .refresh_at(&host(&[LAN, LAN2]), SystemTime::now())
            .expect("refresh");
        assert_eq!(renewal, Some(Renewal::NewNames(vec!["192.168.2.8".into()])));
        assert!(!Arc::ptr_eq(&before, &identity.config()));
        assert_eq!(identity.ca_pin(), pin);
        handshake(identity.config(), client.clone(), "192.168.2.8")
            .await
            .expect("new address");
        handshake(identity.config(), client, "192.168.2.7")
            .await
            .expect("old address");

        // The new leaf is on disk and chains to the same CA.
        let chain = certs_in(&tmp.path().join(LEAF_CERT_FILE));
        assert!(valid_for(&chain[0], "192.168.2.8"));
        assert_eq!(spki_pin(&chain[1]).expect("pin"), pin);
        assert_eq!(open(tmp.path(), &[LAN, LAN2]).ca_pin(), pin);
    }

    #[test]
    fn refresh_renews_a_leaf_near_its_expiry() {
        let tmp = TempDir::new().expect("tempdir");
        let long_ago = SystemTime::now() - DAY * 380;
        let identity =
            ServerIdentity::open_at(generated(tmp.path()), &host(&[LAN]), long_ago).expect("open");
        let renewal = identity
            .refresh_at(&host(&[LAN]), SystemTime::now())
            .expect("refresh");
        assert_eq!(renewal, Some(Renewal::Expiring));
        let leaf = describe(&generated(tmp.path()))
            .expect("describe")
            .leaf
            .expect("leaf");
        assert!(leaf.not_after - Utc::now() > chrono::Duration::days(396));
    }

    #[tokio::test]
    async fn a_client_pinning_the_ca_connects_by_address_and_by_name_only() {
        let tmp = TempDir::new().expect("tempdir");
        let identity = open(tmp.path(), &[LAN]);
        let checking = test_client::pinned_client_config(&ca_pem(tmp.path()), true);
        for name in [
            "192.168.2.7",
            "testbox.local",
            "testbox",
            "localhost",
            "::1",
        ] {
            handshake(identity.config(), checking.clone(), name)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        let err = handshake(identity.config(), checking, "elsewhere.local")
            .await
            .expect_err("name");
        assert!(err.contains("not valid for name"), "{err}");

        // Pin only: any name, as long as the chain ends at this CA.
        let pin_only = test_client::pinned_client_config(&ca_pem(tmp.path()), false);
        handshake(identity.config(), pin_only, "elsewhere.local")
            .await
            .expect("pin only");

        // ALPN: h2 first, http/1.1 for clients that only speak it.
        let h2 = test_client::pinned_client_config_with_alpn(
            &ca_pem(tmp.path()),
            true,
            &[b"h2", b"http/1.1"],
        );
        assert_eq!(
            handshake(identity.config(), h2, "testbox.local")
                .await
                .expect("h2"),
            Some(b"h2".to_vec())
        );
        let h1 =
            test_client::pinned_client_config_with_alpn(&ca_pem(tmp.path()), true, &[b"http/1.1"]);
        assert_eq!(
            handshake(identity.config(), h1, "testbox.local")
                .await
                .expect("h1"),
            Some(b"http/1.1".to_vec())
        );

        // A client pinning another CA refuses, whatever the name checks.
        let other = TempDir::new().expect("tempdir");
        new_ca(other.path());
        for check_name in [true, false] {
            let stranger = test_client::pinned_client_config(&ca_pem(other.path()), check_name);
            let err = handshake(identity.config(), stranger, "192.168.2.7")
                .await
                .expect_err("other CA");
            assert!(err.contains("invalid peer certificate"), "{err}");
        }
    }

    #[tokio::test]
    async fn a_handshake_over_loopback_tcp() {
        let tmp = TempDir::new().expect("tempdir");
        let identity = open(tmp.path(), &[]);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let acceptor = TlsAcceptor::from(identity.config());
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.expect("accept");
            let mut tls = acceptor.accept(stream).await.expect("server handshake");
            tokio::io::AsyncWriteExt::write_all(&mut tls, b"hello")
                .await
                .expect("write");
            tokio::io::AsyncWriteExt::shutdown(&mut tls)
                .await
                .expect("shutdown");
        });
        let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let client = test_client::pinned_client_config(&ca_pem(tmp.path()), true);
        let name = ServerName::try_from("127.0.0.1").expect("name");
        let mut tls = TlsConnector::from(client)
            .connect(name, stream)
            .await
            .expect("client handshake");
        let mut got = Vec::new();
        tokio::io::AsyncReadExt::read_to_end(&mut tls, &mut got)
            .await
            .expect("read");
        assert_eq!(got, b"hello");
        server.await.expect("server");
    }

    #[test]
    fn broken_leaf_files_are_replaced() {
        let tmp = TempDir::new().expect("tempdir");
        open(tmp.path(), &[LAN]);
        std::fs::write(tmp.path().join(LEAF_KEY_FILE), "garbage").expect("tamper");
        open(tmp.path(), &[LAN]);
        assert!(read(&tmp.path().join(LEAF_KEY_FILE)).starts_with(b"-----BEGIN PRIVATE KEY-----"));

        // A key that parses but is not the leaf's (as after a crash between the writes).
        let other = TempDir::new().expect("tempdir");
        open(other.path(), &[LAN]);
        std::fs::copy(
            other.path().join(LEAF_KEY_FILE),
            tmp.path().join(LEAF_KEY_FILE),
        )
        .expect("copy");
        let identity = open(tmp.path(), &[LAN]);
        let leaf = certs_in(&tmp.path().join(LEAF_CERT_FILE)).remove(0);
        let key = parse_key(
            &tmp.path().join(LEAF_KEY_FILE),
            &read(&tmp.path().join(LEAF_KEY_FILE)),
        )
        .expect("key");
        server_config(&identity.provider, vec![leaf], key).expect("key and leaf match again");

        std::fs::remove_file(tmp.path().join(LEAF_CERT_FILE)).expect("remove");
        open(tmp.path(), &[LAN]);
        assert!(tmp.path().join(LEAF_CERT_FILE).exists());
    }

    #[test]
    fn debug_output_shows_no_key() {
        let tmp = TempDir::new().expect("tempdir");
        let identity = open(tmp.path(), &[LAN]);
        let ca = new_ca(tmp.path());
        let shown = format!("{identity:?} {ca:?}");
        assert!(shown.contains(&identity.ca_pin()));
        for secret in [CA_KEY_FILE, LEAF_KEY_FILE] {
            let pem = String::from_utf8(read(&tmp.path().join(secret))).expect("utf-8");
            let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
            assert!(!shown.contains(&body[..20]), "{secret}");
        }
        assert!(!shown.contains("PRIVATE"));
    }
}

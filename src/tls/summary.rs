//! `berthd tls show`: the identity on disk, described without changing it.

use chrono::{DateTime, Utc};

use super::certificate::{CertificateFields, Malformed, pin_of_spki};
use super::files::{first_cert, parse_certs, read_optional};
use super::{CA_CERT_FILE, CertError, LEAF_CERT_FILE, TlsSource, bad_file, io};

/// What `berthd tls show` prints. Names and dates come from the certificates themselves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSummary {
    /// The pin clients check (see [`ServerIdentity::ca_pin`]).
    pub ca_pin: String,
    pub ca_not_after: DateTime<Utc>,
    /// What the CA may sign for (its name constraints' permitted subtrees: DNS names and
    /// address ranges); empty when it is not constrained.
    pub ca_permits: Vec<String>,
    /// `None` when no leaf has been issued yet.
    pub leaf: Option<LeafSummary>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafSummary {
    /// The subject alternative names (DNS names and IP addresses), in the certificate's
    /// order.
    pub names: Vec<String>,
    pub not_before: DateTime<Utc>,
    pub not_after: DateTime<Utc>,
}

/// Describe the identity on disk without changing anything (no daemon needed, no key
/// read): the CA pin and expiry, and the leaf's names and validity.
pub fn describe(source: &TlsSource) -> Result<TlsSummary, CertError> {
    let (ca_path, ca, leaf_path, leaf) = match source {
        TlsSource::Generated { dir, .. } => {
            let ca_path = dir.join(CA_CERT_FILE);
            let Some(ca_pem) = read_optional(&ca_path)? else {
                return Err(CertError::NotCreated(dir.clone()));
            };
            let ca = first_cert(&ca_path, &ca_pem)?;
            let leaf_path = dir.join(LEAF_CERT_FILE);
            let leaf = match read_optional(&leaf_path)? {
                Some(pem) => Some(first_cert(&leaf_path, &pem)?),
                None => None,
            };
            (ca_path, ca, leaf_path, leaf)
        }
        TlsSource::UserSupplied { cert_chain, .. } => {
            let pem = std::fs::read(cert_chain).map_err(io("cannot read", cert_chain))?;
            let chain = parse_certs(cert_chain, &pem)?;
            let (Some(leaf), Some(ca)) = (chain.first(), chain.last()) else {
                return Err(bad_file(cert_chain, "no certificate in it"));
            };
            (
                cert_chain.clone(),
                ca.clone(),
                cert_chain.clone(),
                Some(leaf.clone()),
            )
        }
    };
    let ca_fields = CertificateFields::parse(&ca).map_err(|e| bad_file(&ca_path, e.0))?;
    let leaf = match &leaf {
        Some(leaf) => {
            let bad = |e: Malformed| bad_file(&leaf_path, e.0);
            let fields = CertificateFields::parse(leaf).map_err(bad)?;
            Some(LeafSummary {
                names: fields.subject_alt_names().map_err(bad)?,
                not_before: fields.not_before().map_err(bad)?,
                not_after: fields.not_after().map_err(bad)?,
            })
        }
        None => None,
    };
    let ca_permits = match ca_fields
        .permitted_subtrees()
        .map_err(|e| bad_file(&ca_path, e.0))?
    {
        Some((_, permitted)) => permitted.describe(),
        None => Vec::new(),
    };
    Ok(TlsSummary {
        ca_pin: pin_of_spki(ca_fields.spki()),
        ca_permits,
        ca_not_after: ca_fields.not_after().map_err(|e| bad_file(&ca_path, e.0))?,
        leaf,
    })
}

#[cfg(test)]
mod tests {
    use tempfile::TempDir;

    use super::*;
    use crate::tls::test_support::*;

    #[test]
    fn describe_without_an_identity_says_so() {
        let tmp = TempDir::new().expect("tempdir");
        let err = describe(&generated(tmp.path())).expect_err("nothing yet");
        assert!(matches!(err, CertError::NotCreated(_)), "{err}");
        new_ca(tmp.path());
        assert_eq!(
            describe(&generated(tmp.path())).expect("describe").leaf,
            None
        );
    }
}

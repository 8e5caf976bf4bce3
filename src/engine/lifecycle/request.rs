//! A create (or import) request, checked: what a client gives, as the REST API and the
//! console both take it, into the [`CreateWallet`] the engine runs. The checks live
//! here, beside the create they guard, so both front ends refuse the same things in the
//! same words ([`CreateRefused`]).

use bitcoin::Network;

use crate::engine::{ChainSource, CreateWallet, WalletConfig};

/// The shortest passphrase a new seed may be sealed with: a short one would add little
/// against someone who holds the card (Argon2id slows each guess, it cannot make up for
/// a tiny search space).
pub const MIN_SEED_PASSPHRASE: usize = 8;

/// Why a create request is refused before anything is written. Its text names the
/// request's field as the API spells it.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CreateRefused(String);

/// A create request as a client gives it: nothing checked yet.
#[derive(Default)]
pub struct CreateParts {
    pub network: Option<Network>,
    /// A BIP-39 phrase to import; `None` makes a new seed.
    pub mnemonic: Option<String>,
    pub birthday_height: Option<u32>,
    /// With `chain`, a new `config.toml`; without both, the datadir's own.
    pub ark_server: Option<String>,
    pub chain: Option<ChainSource>,
    pub force: bool,
    pub seed_passphrase: Option<String>,
}

impl CreateParts {
    /// The request, checked: the phrase is BIP-39, the URLs are http(s), the server and
    /// the chain source come together, the passphrase is long enough.
    pub fn check(self) -> Result<CreateWallet, CreateRefused> {
        let network = self
            .network
            .ok_or_else(|| CreateRefused("network is required".into()))?;
        let mnemonic = self
            .mnemonic
            .as_deref()
            .map(|m| bark::bip39::Mnemonic::parse(m.trim()))
            .transpose()
            .map_err(|_| CreateRefused("mnemonic is not a valid BIP-39 phrase".into()))?;
        let config = match (self.ark_server, self.chain) {
            (None, None) => WalletConfig::Existing,
            (Some(ark), Some(chain)) => WalletConfig::New {
                ark_server: http_url("ark_server", &ark)?,
                chain: match chain {
                    ChainSource::Esplora { url } => ChainSource::Esplora {
                        url: http_url("chain_source.esplora.url", &url)?,
                    },
                    ChainSource::Bitcoind { url, auth } => ChainSource::Bitcoind {
                        url: http_url("chain_source.bitcoind.bitcoind", &url)?,
                        auth,
                    },
                },
            },
            (Some(_), None) => {
                return Err(CreateRefused(
                    "chain_source is required with ark_server".into(),
                ));
            }
            (None, Some(_)) => {
                return Err(CreateRefused(
                    "ark_server is required with chain_source".into(),
                ));
            }
        };
        let seed_passphrase = match self.seed_passphrase {
            Some(p) if p.chars().count() < MIN_SEED_PASSPHRASE => {
                return Err(CreateRefused(format!(
                    "seed_passphrase must have at least {MIN_SEED_PASSPHRASE} characters"
                )));
            }
            p => p.map(zeroize::Zeroizing::new),
        };
        Ok(CreateWallet {
            network,
            mnemonic,
            birthday_height: self.birthday_height,
            config,
            force: self.force,
            new_seed: None,
            seed_passphrase,
        })
    }
}

fn http_url(field: &str, value: &str) -> Result<String, CreateRefused> {
    let ok = (value.starts_with("http://") || value.starts_with("https://")) && value.len() > 8;
    if ok && !value.chars().any(char::is_whitespace) {
        Ok(value.to_string())
    } else {
        Err(CreateRefused(format!(
            "{field} must be an http:// or https:// URL"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts() -> CreateParts {
        CreateParts {
            network: Some(Network::Regtest),
            ark_server: Some("https://ark.example".into()),
            chain: Some(ChainSource::Esplora {
                url: "https://esplora.example/api".into(),
            }),
            ..CreateParts::default()
        }
    }

    /// Each refusal, in the words both front ends show.
    #[test]
    fn a_request_is_refused_before_anything_is_written() {
        assert!(parts().check().is_ok());
        let refused = |p: CreateParts| p.check().err().map(|e| e.to_string());
        assert_eq!(
            refused(CreateParts {
                mnemonic: Some("not a phrase".into()),
                ..parts()
            }),
            Some("mnemonic is not a valid BIP-39 phrase".into())
        );
        assert_eq!(
            refused(CreateParts {
                ark_server: Some("ark.example".into()),
                ..parts()
            }),
            Some("ark_server must be an http:// or https:// URL".into())
        );
        assert_eq!(
            refused(CreateParts {
                chain: None,
                ..parts()
            }),
            Some("chain_source is required with ark_server".into())
        );
        assert_eq!(
            refused(CreateParts {
                ark_server: None,
                ..parts()
            }),
            Some("ark_server is required with chain_source".into())
        );
        assert_eq!(
            refused(CreateParts {
                seed_passphrase: Some("seven 7".into()),
                ..parts()
            }),
            Some("seed_passphrase must have at least 8 characters".into())
        );
        assert_eq!(
            refused(CreateParts {
                network: None,
                ..parts()
            }),
            Some("network is required".into())
        );
        let existing = CreateParts {
            ark_server: None,
            chain: None,
            ..parts()
        };
        assert!(matches!(
            existing.check().map(|c| c.config),
            Ok(WalletConfig::Existing)
        ));
    }
}

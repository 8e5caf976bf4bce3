//! Berth's own settings: `<datadir>/berth.toml`, beside bark's `config.toml` (which
//! stays bark's format, untouched, so a barkd datadir keeps working).
//!
//! Every key is optional; unknown keys are refused so a typo does not silently fall
//! back to a default. Example:
//!
//! ```toml
//! [store]
//! cache_size_mib = 16   # redb page cache
//! ```

use std::path::Path;

use serde::Deserialize;

pub const BERTH_TOML: &str = "berth.toml";

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct BerthToml {
    pub store: StoreSection,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSection {
    /// redb page cache, in MiB (1 to 4096).
    pub cache_size_mib: usize,
}

impl Default for StoreSection {
    fn default() -> Self {
        StoreSection {
            cache_size_mib: crate::store::DEFAULT_CACHE_SIZE / (1024 * 1024),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("invalid {path}: {reason}")]
    Invalid { path: String, reason: String },
}

impl BerthToml {
    /// Read `<datadir>/berth.toml`; defaults when the file does not exist.
    pub fn load(datadir: &Path) -> Result<Self, ConfigError> {
        let path = datadir.join(BERTH_TOML);
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: shown,
                    source,
                });
            }
        };
        let parsed: BerthToml = toml::from_str(&text).map_err(|e| ConfigError::Invalid {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        if !(1..=4096).contains(&parsed.store.cache_size_mib) {
            return Err(ConfigError::Invalid {
                path: shown,
                reason: format!(
                    "store.cache_size_mib must be 1 to 4096, got {}",
                    parsed.store.cache_size_mib
                ),
            });
        }
        Ok(parsed)
    }

    pub fn store_config(&self) -> crate::store::StoreConfig {
        crate::store::StoreConfig {
            cache_size: self.store.cache_size_mib * 1024 * 1024,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: Option<&str>) -> Result<BerthToml, ConfigError> {
        let dir = tempfile::tempdir().expect("tempdir");
        if let Some(text) = text {
            std::fs::write(dir.path().join(BERTH_TOML), text).expect("write");
        }
        BerthToml::load(dir.path())
    }

    #[test]
    fn defaults_without_a_file_and_values_from_one() {
        assert_eq!(load(None).expect("defaults").store.cache_size_mib, 16);
        assert_eq!(load(Some("")).expect("empty").store.cache_size_mib, 16);
        let custom = load(Some("[store]\ncache_size_mib = 64\n")).expect("custom");
        assert_eq!(custom.store_config().cache_size, 64 * 1024 * 1024);
    }

    #[test]
    fn typos_and_out_of_range_values_are_refused() {
        let typo = load(Some("[store]\ncache_size_mb = 64\n")).expect_err("unknown key");
        assert!(typo.to_string().contains("cache_size_mb"), "{typo}");
        assert!(load(Some("[stor]\n")).is_err());
        assert!(load(Some("[store]\ncache_size_mib = 0\n")).is_err());
        assert!(load(Some("[store]\ncache_size_mib = \"big\"\n")).is_err());
    }
}

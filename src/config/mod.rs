//! Berth's own settings: `<datadir>/berth.toml`, beside bark's `config.toml` (which
//! stays bark's format, untouched, so a barkd datadir keeps working).
//!
//! Every key is optional; unknown keys are refused so a typo does not silently fall
//! back to a default. Example:
//!
//! ```toml
//! [store]
//! cache_size_mib = 16   # redb page cache
//!
//! [events]
//! max_count = 10000     # events kept in the log, newest first
//! max_age_days = 30     # events older than this are removed
//! ```

use std::path::Path;

use serde::Deserialize;

pub const BERTH_TOML: &str = "berth.toml";

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct BerthToml {
    pub store: StoreSection,
    pub events: EventsSection,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct EventsSection {
    /// Events kept in the durable log (1 to 1,000,000).
    pub max_count: u64,
    /// Days an event is kept (1 to 3650).
    pub max_age_days: u64,
}

impl Default for EventsSection {
    fn default() -> Self {
        let retention = crate::store::EventRetention::default();
        EventsSection {
            max_count: retention.max_count,
            max_age_days: retention.max_age.as_secs() / 86_400,
        }
    }
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
        let ranges = [
            (
                "store.cache_size_mib",
                parsed.store.cache_size_mib as u64,
                1,
                4096,
            ),
            ("events.max_count", parsed.events.max_count, 1, 1_000_000),
            ("events.max_age_days", parsed.events.max_age_days, 1, 3650),
        ];
        for (key, value, min, max) in ranges {
            if !(min..=max).contains(&value) {
                return Err(ConfigError::Invalid {
                    path: shown,
                    reason: format!("{key} must be {min} to {max}, got {value}"),
                });
            }
        }
        Ok(parsed)
    }

    pub fn event_retention(&self) -> crate::store::EventRetention {
        crate::store::EventRetention {
            max_count: self.events.max_count,
            max_age: std::time::Duration::from_secs(self.events.max_age_days * 86_400),
        }
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
        assert_eq!(
            load(None).expect("defaults").event_retention(),
            crate::store::EventRetention::default()
        );
        let events = load(Some("[events]\nmax_count = 50\nmax_age_days = 2\n")).expect("events");
        assert_eq!(events.event_retention().max_count, 50);
        assert_eq!(events.event_retention().max_age.as_secs(), 2 * 86_400);
    }

    #[test]
    fn typos_and_out_of_range_values_are_refused() {
        let typo = load(Some("[store]\ncache_size_mb = 64\n")).expect_err("unknown key");
        assert!(typo.to_string().contains("cache_size_mb"), "{typo}");
        assert!(load(Some("[stor]\n")).is_err());
        assert!(load(Some("[store]\ncache_size_mib = 0\n")).is_err());
        assert!(load(Some("[store]\ncache_size_mib = \"big\"\n")).is_err());
        let count = load(Some("[events]\nmax_count = 0\n")).expect_err("zero events");
        assert!(count.to_string().contains("events.max_count"), "{count}");
        assert!(load(Some("[events]\nmax_age_days = 4000\n")).is_err());
    }
}

//! Berth's own settings: `<datadir>/berth.toml`, beside bark's `config.toml` (which
//! stays bark's format, untouched, so a barkd datadir keeps working).
//!
//! Every key is optional; unknown keys are refused so a typo does not silently fall
//! back to a default, and values out of range stop the start. Every key, its default
//! and its range: `docs/configuration.md` (`tests/integration/configuration.rs` holds the page
//! against this file).

mod bounded;
mod load;

pub use bounded::Bounded;
pub mod settings;

use serde::{Deserialize, Serialize};

/// The name of the layers under `$CONFIGURATION_DIRECTORY` (`/etc/berth`). The
/// datadir's own layer is named by `datadir::Layout`.
const ETC_FILE: &str = "berth.toml";

/// OWASP's minimum Argon2id costs (19 MiB, 2 passes): lower ones are refused.
pub const MIN_ARGON2_MEMORY_KIB: u32 = 19 * 1024;
pub const MIN_ARGON2_ITERATIONS: u32 = 2;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct BerthToml {
    pub store: StoreSection,
    pub events: EventsSection,
    pub server: ServerSection,
    pub tls: TlsSection,
    pub discovery: DiscoverySection,
    pub exits: ExitsSection,
    pub watchdog: WatchdogSection,
    pub seed: SeedSection,
    pub backup: BackupSection,
    pub claim: ClaimSection,
    pub egress: EgressSection,
    pub console: ConsoleSection,
    pub nwc: NwcSection,
    pub household: HouseholdSection,
    pub update: UpdateSection,
}

/// System updates through the API (`system_update`): where RAUC and the running
/// system's facts are (the image's places by default), and the largest bundle taken.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct UpdateSection {
    /// The largest update bundle taken, in MiB (1 to 16,384).
    pub max_bundle_mib: Bounded<1, 16_384>,
    /// The `rauc` program.
    pub rauc: std::path::PathBuf,
    /// RAUC's configuration (the board's `compatible`).
    pub system_conf: std::path::PathBuf,
    /// The certificates an update bundle's signature must chain to.
    pub keyring: std::path::PathBuf,
    /// The running system's release file (its build time).
    pub release: std::path::PathBuf,
    /// Where the system's side of an install keeps its progress (root's; berthd reads).
    pub status_dir: std::path::PathBuf,
}

impl Default for UpdateSection {
    fn default() -> Self {
        UpdateSection {
            // The image's bundles are a few hundred MiB (image/README.md, "Updates").
            max_bundle_mib: Bounded::of::<2048>(),
            rauc: "rauc".into(),
            system_conf: "/etc/rauc/system.conf".into(),
            keyring: "/etc/rauc/keyring.pem".into(),
            release: "/usr/lib/berth/release".into(),
            status_dir: "/run/berth-update".into(),
        }
    }
}

impl UpdateSection {
    pub fn settings(&self) -> crate::system_update::UpdateSettings {
        crate::system_update::UpdateSettings {
            rauc: self.rauc.clone(),
            system_conf: self.system_conf.clone(),
            keyring: self.keyring.clone(),
            release: self.release.clone(),
            max_bundle_bytes: self.max_bundle_mib.get() << 20,
            status_dir: self.status_dir.clone(),
        }
    }
}

/// Spending rules and approvals (`docs/household.md`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct HouseholdSection {
    /// How long a payment held for the owner's approval waits, in seconds (1 s to a
    /// day): then it expires.
    pub approval_expiry_secs: Bounded<1, 86_400>,
    /// The spending rules every newly paired device without the admin scope starts
    /// with; absent: none (the owner sets them per device).
    pub new_devices: Option<NewDeviceRules>,
}

impl Default for HouseholdSection {
    fn default() -> Self {
        HouseholdSection {
            approval_expiry_secs: Bounded::of::<600>(),
            new_devices: None,
        }
    }
}

impl HouseholdSection {
    /// The engine's household policy; `Err` names what is wrong with `new_devices`.
    pub fn spending_policy(&self) -> Result<crate::engine::spending::Policy, String> {
        let new_device_rules = match &self.new_devices {
            None => None,
            Some(r) => {
                let budgets: Vec<(u64, &str)> = r
                    .budgets
                    .iter()
                    .map(|b| (b.amount_sat, b.period.as_str()))
                    .collect();
                let rules = crate::engine::spending::Rules::parse(
                    r.max_payment_sat,
                    &budgets,
                    r.kinds.as_deref(),
                    r.max_fee_sat,
                    r.over_limit.as_deref(),
                )
                .and_then(|mut rules| {
                    rules.own_history =
                        crate::engine::spending::Rules::own_history_of(r.history.as_deref())?;
                    rules.check().map(|()| rules)
                })
                .map_err(|e| format!("household.new_devices: {e}"))?;
                Some(rules)
            }
        };
        Ok(crate::engine::spending::Policy {
            approval_expiry: std::time::Duration::from_secs(self.approval_expiry_secs.get()),
            new_device_rules,
        })
    }
}

/// Rules as `PUT /api/v1/devices/{id}/rules` takes them (every field optional).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NewDeviceRules {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_payment_sat: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<NewDeviceBudget>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_fee_sat: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_limit: Option<String>,
    /// `all` or `own`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NewDeviceBudget {
    pub amount_sat: u64,
    pub period: String,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ConsoleSection {
    /// Hours a console session lives without a request (1 to 8,760).
    pub session_idle_hours: Bounded<1, 8760>,
    /// Days a console session lives at most, however it is used (1 to 365).
    pub session_max_days: Bounded<1, 365>,
}

impl Default for ConsoleSection {
    fn default() -> Self {
        let policy = crate::access::devices::SessionPolicy::default();
        ConsoleSection {
            session_idle_hours: Bounded::new(policy.idle.as_secs() / 3600)
                .expect("the default idle time is in range"),
            session_max_days: Bounded::new(policy.max_age.as_secs() / 86_400)
                .expect("the default session age is in range"),
        }
    }
}

impl ConsoleSection {
    pub fn session_policy(&self) -> crate::access::devices::SessionPolicy {
        crate::access::devices::SessionPolicy {
            idle: std::time::Duration::from_secs(self.session_idle_hours.get() * 3600),
            max_age: std::time::Duration::from_secs(self.session_max_days.get() * 86_400),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct EgressSection {
    /// Destinations inside the home network (or otherwise not public) that berthd may
    /// fetch from on a client's behalf: host names, addresses and ranges (`net::egress`).
    /// Empty: public addresses over https only.
    pub allow: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct NwcSection {
    /// The relays a new Nostr Wallet Connect connection uses when its request names
    /// none (`wss://`, or `ws://` to a host `[egress] allow` names).
    pub relays: Vec<String>,
    /// How far a request's time may be from the box's clock, either way, in seconds
    /// (30 to 3,600): older or newer requests are refused, not executed.
    pub request_window_secs: Bounded<30, 3600>,
}

impl Default for NwcSection {
    fn default() -> Self {
        NwcSection {
            relays: vec!["wss://relay.getalby.com/v1".into()],
            request_window_secs: Bounded::of::<300>(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ClaimSection {
    /// A claim code written onto the card before first boot (an absolute path): taken
    /// up at start (its hash kept, the file removed). Unset: none.
    pub code_file: Option<std::path::PathBuf>,
    /// Hours a code from `berthd claim reset` works (1 to 720).
    pub reset_code_hours: Bounded<1, 720>,
}

impl Default for ClaimSection {
    fn default() -> Self {
        ClaimSection {
            code_file: None,
            reset_code_hours: Bounded::of::<24>(),
        }
    }
}

impl ClaimSection {
    /// How long a reset code works.
    pub fn reset_ttl(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.reset_code_hours.get() * 3600)
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct BackupSection {
    /// Where scheduled backups are written (an absolute path: a mounted USB stick or
    /// NAS share). Unset: no scheduled backups.
    pub directory: Option<std::path::PathBuf>,
    /// Backups of the wallet kept there, newest first (1 to 1000).
    pub keep: Bounded<1, 1000>,
    /// Seconds after the first change before a backup (1 to 86,400).
    pub debounce_secs: Bounded<1, 86400>,
    /// Hours between backups at most, changes or not (1 to 168).
    pub interval_hours: Bounded<1, 168>,
}

impl Default for BackupSection {
    fn default() -> Self {
        BackupSection {
            directory: None,
            keep: Bounded::of::<7>(),
            debounce_secs: Bounded::of::<60>(),
            interval_hours: Bounded::of::<24>(),
        }
    }
}

/// A key source named in `[seed] sources`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum SeedSource {
    Passphrase,
    Credential,
    SecureElement,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct SeedSection {
    /// The key sources that seal a new seed, combined when several.
    pub sources: Vec<SeedSource>,
    /// Sources added to `sources` when a new seed is sealed, if they answer then (the
    /// appliance: the secure element, where one is provisioned and fitted).
    pub optional_sources: Vec<SeedSource>,
    /// A file holding the passphrase (instead of `BERTH_SEED_PASSPHRASE`).
    pub passphrase_file: Option<std::path::PathBuf>,
    /// The credential: a name under `$CREDENTIALS_DIRECTORY`, or an absolute path.
    pub credential: String,
    pub i2c_bus: std::path::PathBuf,
    pub i2c_address: u8,
    pub secure_element_slot: Option<u8>,
    pub argon2_memory_kib: u32,
    pub argon2_iterations: u32,
    pub argon2_parallelism: u32,
}

impl Default for SeedSection {
    fn default() -> Self {
        SeedSection {
            sources: Vec::new(),
            optional_sources: Vec::new(),
            passphrase_file: None,
            credential: "berth-seed".into(),
            i2c_bus: "/dev/i2c-1".into(),
            i2c_address: crate::keys::atecc608::DEFAULT_ADDRESS,
            secure_element_slot: None,
            argon2_memory_kib: crate::keys::DEFAULT_ARGON2.memory_kib,
            argon2_iterations: crate::keys::DEFAULT_ARGON2.iterations,
            argon2_parallelism: crate::keys::DEFAULT_ARGON2.parallelism,
        }
    }
}

impl SeedSection {
    /// The seed's settings, with the passphrase from `BERTH_SEED_PASSPHRASE`
    /// (`env_passphrase`) and the credential directory from `$CREDENTIALS_DIRECTORY`.
    /// A passphrase in the environment seals new seeds when no sources are listed.
    pub fn settings(
        &self,
        env_passphrase: Option<zeroize::Zeroizing<String>>,
        credentials_directory: Option<std::path::PathBuf>,
    ) -> crate::keys::SeedSettings {
        use crate::keys::Sources;
        let union = |listed: &[SeedSource]| {
            listed.iter().fold(None, |all: Option<Sources>, s| {
                let kind = match s {
                    SeedSource::Passphrase => Sources::PASSPHRASE,
                    SeedSource::Credential => Sources::CREDENTIAL,
                    SeedSource::SecureElement => Sources::SECURE_ELEMENT,
                };
                Some(all.map_or(kind, |all| all.union(kind)))
            })
        };
        let seal_with =
            union(&self.sources).or(env_passphrase.as_ref().map(|_| Sources::PASSPHRASE));
        let seal_when_present = union(&self.optional_sources);
        let credential = std::path::Path::new(&self.credential);
        let credential = if credential.is_absolute() {
            Some(credential.to_path_buf())
        } else {
            credentials_directory.map(|dir| dir.join(credential))
        };
        crate::keys::SeedSettings {
            seal_with,
            seal_when_present,
            passphrase: env_passphrase,
            passphrase_file: self.passphrase_file.clone(),
            credential,
            secure_element: Some(crate::keys::SecureElementSettings {
                bus: self.i2c_bus.clone(),
                address: self.i2c_address,
                slot: self.secure_element_slot,
            }),
            argon2: Some(crate::keys::KdfParams {
                memory_kib: self.argon2_memory_kib,
                iterations: self.argon2_iterations,
                parallelism: self.argon2_parallelism,
            }),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ExitsSection {
    /// Seconds between progress passes over live exits without a new block (5 to 3600).
    pub progress_interval_secs: Bounded<5, 3600>,
    /// Fee rate for exit transactions' fee-paying children, sat/vB; 0 uses the chain
    /// source's estimate (0 to 10,000).
    pub fee_rate_sat_vb: Bounded<0, 10000>,
    /// Cap on the estimated rate, sat/vB (1 to 10,000).
    pub max_fee_rate_sat_vb: Bounded<1, 10000>,
}

impl Default for ExitsSection {
    fn default() -> Self {
        ExitsSection {
            progress_interval_secs: Bounded::of::<30>(),
            fee_rate_sat_vb: Bounded::of::<0>(),
            max_fee_rate_sat_vb: Bounded::of::<500>(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct WatchdogSection {
    /// Start exits on its own (never claims). Off: alerts only.
    pub enabled: bool,
    /// Seconds between checks (1 to 3600); a new block also triggers one.
    pub check_interval_secs: Bounded<1, 3600>,
    /// Alert when a VTXO is this close to its exit deadline, in blocks. Unset: derived
    /// from the wallet's bark config; a value can only make the alert come earlier.
    /// A `u16`: nothing longer than an Ark server's VTXO lifetime (a `u16` of blocks)
    /// can matter.
    pub warn_blocks: Option<Bounded<1, 65535>>,
    /// Treat a VTXO this close to its exit deadline as at risk, in blocks (a `u16`, as
    /// above). Unset: bark's `vtxo_exit_margin`; a value can only make the watchdog act
    /// earlier.
    pub exit_margin_blocks: Option<Bounded<1, 65535>>,
    /// Failed refresh attempts before an exit is started (1 to 100).
    pub refresh_attempts: Bounded<1, 100>,
    /// Most the estimated fees of one automatic exit batch may be, in sats.
    pub auto_exit_fee_budget_sat: Option<u64>,
}

impl Default for WatchdogSection {
    fn default() -> Self {
        WatchdogSection {
            enabled: true,
            check_interval_secs: Bounded::of::<60>(),
            warn_blocks: None,
            exit_margin_blocks: None,
            refresh_attempts: Bounded::of::<3>(),
            auto_exit_fee_budget_sat: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerSection {
    /// Most connections open at once (16 to 65,536).
    pub max_connections: Bounded<16, 65536>,
    /// Seconds a connection has to finish its TLS handshake (1 to 300).
    pub tls_handshake_timeout_secs: Bounded<1, 300>,
    /// Seconds a connection has to send a request's headers (1 to 300).
    pub header_read_timeout_secs: Bounded<1, 300>,
    /// Seconds a request may take, from its headers to the response's (5 to 3600).
    pub request_timeout_secs: Bounded<5, 3600>,
    /// Largest request body in KiB (1 to 65,536).
    pub max_body_kib: Bounded<1, 65536>,
    /// Most connections one source address may hold open (1 to `max_connections`).
    pub max_connections_per_source: Bounded<1, 65536>,
    /// Names besides the machine's own that requests may carry in `Host` (a DNS name
    /// in front of a port forward or a reverse proxy); any other is refused 421.
    pub allowed_hosts: Vec<String>,
}

impl Default for ServerSection {
    fn default() -> Self {
        let listener = crate::net::listener::ServerLimits::default();
        let requests = crate::net::listener::RequestLimits::default();
        ServerSection {
            max_connections: Bounded::new(listener.max_connections as u64)
                .expect("the default is in range"),
            tls_handshake_timeout_secs: Bounded::new(listener.tls_handshake_timeout.as_secs())
                .expect("the default is in range"),
            header_read_timeout_secs: Bounded::new(listener.header_read_timeout.as_secs())
                .expect("the default is in range"),
            request_timeout_secs: Bounded::new(requests.request_timeout.as_secs())
                .expect("the default is in range"),
            max_body_kib: Bounded::new((requests.max_body_bytes / 1024) as u64)
                .expect("the default is in range"),
            max_connections_per_source: Bounded::new(listener.max_connections_per_source as u64)
                .expect("the default is in range"),
            allowed_hosts: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct TlsSection {
    /// Lifetime of the generated leaf certificate, in days (1 to 397, the most
    /// browsers and phones accept). Below 30 it is re-issued at every check.
    pub leaf_validity_days: Bounded<1, 397>,
    /// Your own certificate chain (PEM), instead of the generated local CA.
    pub cert_file: Option<std::path::PathBuf>,
    /// The private key (PEM) of `cert_file`.
    pub key_file: Option<std::path::PathBuf>,
}

impl Default for TlsSection {
    fn default() -> Self {
        TlsSection {
            leaf_validity_days: Bounded::of::<397>(),
            cert_file: None,
            key_file: None,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct DiscoverySection {
    /// Announce the API on the LAN by DNS-SD (`_berth._tcp`).
    pub mdns: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct EventsSection {
    /// Events kept in the durable log (1 to 1,000,000).
    pub max_count: Bounded<1, 1000000>,
    /// Days an event is kept (1 to 3650).
    pub max_age_days: Bounded<1, 3650>,
}

impl Default for EventsSection {
    fn default() -> Self {
        let retention = crate::store::EventRetention::default();
        EventsSection {
            max_count: Bounded::new(retention.max_count).expect("the default is in range"),
            max_age_days: Bounded::new(retention.max_age.as_secs() / 86_400)
                .expect("the default is in range"),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSection {
    /// redb page cache, in MiB (1 to 4096).
    pub cache_size_mib: Bounded<1, 4096>,
}

impl Default for StoreSection {
    fn default() -> Self {
        StoreSection {
            cache_size_mib: Bounded::of::<
                { (crate::store::DEFAULT_CACHE_SIZE / (1024 * 1024)) as u64 },
            >(),
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
    pub fn server_limits(&self) -> crate::net::listener::ServerLimits {
        crate::net::listener::ServerLimits {
            max_connections: self.server.max_connections.to_usize(),
            max_connections_per_source: self.server.max_connections_per_source.to_usize(),
            tls_handshake_timeout: std::time::Duration::from_secs(
                self.server.tls_handshake_timeout_secs.get(),
            ),
            header_read_timeout: std::time::Duration::from_secs(
                self.server.header_read_timeout_secs.get(),
            ),
            ..crate::net::listener::ServerLimits::default()
        }
    }

    pub fn request_limits(&self) -> crate::net::listener::RequestLimits {
        crate::net::listener::RequestLimits {
            max_body_bytes: self.server.max_body_kib.to_usize() * 1024,
            request_timeout: std::time::Duration::from_secs(self.server.request_timeout_secs.get()),
        }
    }

    pub fn event_retention(&self) -> crate::store::EventRetention {
        crate::store::EventRetention {
            max_count: self.events.max_count.get(),
            max_age: std::time::Duration::from_secs(self.events.max_age_days.get() * 86_400),
        }
    }

    pub fn backup_settings(&self) -> crate::engine::backup::service::BackupSettings {
        crate::engine::backup::service::BackupSettings {
            directory: self.backup.directory.clone(),
            keep: self.backup.keep.to_usize(),
            debounce: std::time::Duration::from_secs(self.backup.debounce_secs.get()),
            interval: std::time::Duration::from_secs(self.backup.interval_hours.get() * 3600),
        }
    }

    /// The `[store]` section as the store takes it (`Settings::resolve` adds what the
    /// environment says).
    pub fn store_config(&self) -> crate::store::StoreConfig {
        crate::store::StoreConfig {
            cache_size: self.store.cache_size_mib.to_usize() * 1024 * 1024,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: Option<&str>) -> Result<BerthToml, ConfigError> {
        let dir = tempfile::tempdir().expect("tempdir");
        if let Some(text) = text {
            std::fs::write(dir.path().join("berth.toml"), text).expect("write");
        }
        BerthToml::load_layered(&dir.path().join("berth.toml"), None)
    }

    #[test]
    fn drop_ins_then_etc_then_the_datadir_win_key_by_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (etc, datadir) = (dir.path().join("etc"), dir.path().join("data"));
        std::fs::create_dir_all(etc.join("berth.toml.d")).expect("dirs");
        std::fs::create_dir_all(&datadir).expect("dirs");
        let write =
            |path: std::path::PathBuf, text: &str| std::fs::write(path, text).expect("write");
        write(
            etc.join("berth.toml.d/50-board.toml"),
            "[discovery]\nmdns = true\n[seed]\ni2c_bus = \"/dev/i2c-1\"\nsecure_element_slot = 9\n",
        );
        write(
            etc.join("berth.toml.d/60-site.toml"),
            "[seed]\ni2c_bus = \"/dev/i2c-3\"\n",
        );
        write(etc.join("berth.toml.d/notes.txt"), "not toml, not read");
        write(etc.join("berth.toml"), "[events]\nmax_count = 500\n");
        write(datadir.join("berth.toml"), "[events]\nmax_age_days = 3\n");
        let merged =
            BerthToml::load_layered(&datadir.join("berth.toml"), Some(&etc)).expect("merged");
        assert!(merged.discovery.mdns, "from the board");
        assert_eq!(
            merged.seed.i2c_bus,
            std::path::Path::new("/dev/i2c-3"),
            "a later drop-in wins"
        );
        assert_eq!(
            merged.seed.secure_element_slot,
            Some(9),
            "other keys of the table stay"
        );
        assert_eq!(merged.events.max_count.get(), 500, "from /etc");
        assert_eq!(merged.events.max_age_days.get(), 3, "from the datadir");
        // A mistake in any file names the files.
        write(
            etc.join("berth.toml.d/70-typo.toml"),
            "[discovery]\nmnds = true\n",
        );
        let error =
            BerthToml::load_layered(&datadir.join("berth.toml"), Some(&etc)).expect_err("typo");
        assert!(
            error.to_string().contains("merged from") && error.to_string().contains("mnds"),
            "{error}"
        );
    }

    #[test]
    fn defaults_without_a_file_and_values_from_one() {
        assert_eq!(load(None).expect("defaults").store.cache_size_mib.get(), 16);
        assert_eq!(
            load(Some("")).expect("empty").store.cache_size_mib.get(),
            16
        );
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
        assert!(load(Some("[server]\nmax_body_kib = 0\n")).is_err());
        assert!(load(Some("[tls]\nleaf_validity_days = 398\n")).is_err());
        assert!(load(Some("[watchdog]\nrefresh_attempts = 0\n")).is_err());
        assert!(load(Some("[exits]\nprogress_interval_secs = 0\n")).is_err());
        assert!(load(Some("[exits]\nmax_fee_rate_sat_vb = 0\n")).is_err());
        assert!(load(Some("[exits]\nfee_rate_sat_vb = 20000\n")).is_err());
        assert!(load(Some("[watchdog]\nexit_margin_blocks = 0\n")).is_err());
        assert!(load(Some("[watchdog]\nwarn_blocks = 70000\n")).is_err());
        let half = load(Some("[tls]\ncert_file = \"/x.pem\"\n")).expect_err("cert alone");
        assert!(half.to_string().contains("key_file"), "{half}");
    }

    #[test]
    fn watchdog_thresholds_are_unset_unless_written() {
        let d = load(None).expect("defaults");
        assert_eq!(d.watchdog.warn_blocks, None);
        assert_eq!(d.watchdog.exit_margin_blocks, None);
        let c = load(Some("[watchdog]\nexit_margin_blocks = 40\n")).expect("custom");
        assert_eq!(c.watchdog.exit_margin_blocks.map(|b| b.get()), Some(40));
        assert_eq!(c.watchdog.warn_blocks, None);
    }

    #[test]
    fn server_tls_and_discovery_sections() {
        let d = load(None).expect("defaults");
        assert_eq!(d.server_limits().max_connections, 4096);
        assert_eq!(d.request_limits().max_body_bytes, 1024 * 1024);
        assert_eq!(d.tls.leaf_validity_days.get(), 397);
        assert!(!d.discovery.mdns);
        let c = load(Some(
            "[server]\nheader_read_timeout_secs = 2\nmax_body_kib = 8\n[discovery]\nmdns = true\n",
        ))
        .expect("custom");
        assert_eq!(c.server_limits().header_read_timeout.as_secs(), 2);
        assert_eq!(c.request_limits().max_body_bytes, 8192);
        assert!(c.discovery.mdns);
    }

    #[test]
    fn a_source_gets_at_most_every_slot_and_allowed_hosts_are_bare_names() {
        let d = load(None).expect("defaults");
        assert_eq!(d.server_limits().max_connections_per_source, 1024);
        let c = load(Some(
            "[server]\nmax_connections = 64\nmax_connections_per_source = 64\n\
             allowed_hosts = [\"wallet.example.org\", \"192.0.2.7\", \"fd00::7\"]\n",
        ))
        .expect("custom");
        assert_eq!(c.server_limits().max_connections_per_source, 64);
        let over = load(Some(
            "[server]\nmax_connections = 64\nmax_connections_per_source = 65\n",
        ))
        .expect_err("more than every slot");
        assert!(
            over.to_string().contains("max_connections_per_source"),
            "{over}"
        );
        assert!(load(Some("[server]\nmax_connections_per_source = 0\n")).is_err());
        for bad in ["wallet.example.org:443", "", "a b", "https://x"] {
            let err =
                load(Some(&format!("[server]\nallowed_hosts = [\"{bad}\"]\n"))).expect_err(bad);
            assert!(err.to_string().contains("allowed_hosts"), "{err}");
        }
    }

    #[test]
    fn argon2_costs_below_owasps_minimum_are_refused() {
        for (memory, passes) in [(19_455, 2), (19_456, 1), (1024, 1)] {
            let err = load(Some(&format!(
                "[seed]\nargon2_memory_kib = {memory}\nargon2_iterations = {passes}\n"
            )))
            .expect_err("below the minimum");
            assert!(err.to_string().contains("OWASP"), "{err}");
        }
        let least = load(Some(
            "[seed]\nargon2_memory_kib = 19456\nargon2_iterations = 2\n",
        ))
        .expect("the minimum itself");
        assert_eq!(least.seed.argon2_memory_kib, 19_456);
    }
}

//! Reading `berth.toml`: its layers found, read and merged key by key, parsed into
//! [`BerthToml`], and every value checked against its range and its neighbours
//! ([`validate`]) before anything starts.

use std::path::Path;

use super::{BerthToml, ConfigError, ETC_FILE, MIN_ARGON2_ITERATIONS, MIN_ARGON2_MEMORY_KIB};

/// Merge `over` into `base`: tables merge key by key, anything else is replaced.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(base)), toml::Value::Table(over)) => merge(base, over),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

impl BerthToml {
    /// Read and merge, later files winning key by key: `<config_dir>/berth.toml.d/*.toml`
    /// (in name order: a board's defaults), `<config_dir>/berth.toml` (the operator's),
    /// then the datadir's `berth.toml` (`datadir_file`). `config_dir` is systemd's
    /// `$CONFIGURATION_DIRECTORY` (`/etc/berth`) when set. Defaults for whatever no file
    /// sets.
    pub fn load_layered(
        datadir_file: &Path,
        config_dir: Option<&Path>,
    ) -> Result<Self, ConfigError> {
        let mut files = Vec::new();
        if let Some(dir) = config_dir {
            let drop_ins = dir.join(format!("{ETC_FILE}.d"));
            match std::fs::read_dir(&drop_ins) {
                Ok(entries) => {
                    let mut found: Vec<_> = entries
                        .filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                        .collect();
                    found.sort();
                    files.extend(found);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(ConfigError::Read {
                        path: drop_ins.display().to_string(),
                        source,
                    });
                }
            }
            files.push(dir.join(ETC_FILE));
        }
        files.push(datadir_file.to_path_buf());

        let mut merged = toml::Table::new();
        let mut read = Vec::new();
        for path in &files {
            let shown = path.display().to_string();
            let text = match std::fs::read_to_string(path) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(ConfigError::Read {
                        path: shown,
                        source,
                    });
                }
            };
            let table: toml::Table = toml::from_str(&text).map_err(|e| ConfigError::Invalid {
                path: shown.clone(),
                reason: e.to_string(),
            })?;
            merge(&mut merged, table);
            read.push(shown);
        }
        let shown = match read.len() {
            0 => return Ok(Self::default()),
            1 => read.remove(0),
            _ => format!("berth.toml (merged from {})", read.join(", ")),
        };
        let parsed: BerthToml =
            toml::Value::Table(merged)
                .try_into()
                .map_err(|e: toml::de::Error| ConfigError::Invalid {
                    path: shown.clone(),
                    reason: e.to_string(),
                })?;
        validate(&parsed).map_err(|reason| ConfigError::Invalid {
            path: shown,
            reason,
        })?;
        Ok(parsed)
    }
}

/// The values that go together, together (each one's own range is its type's): why
/// not, for the error that names the file.
fn validate(parsed: &BerthToml) -> Result<(), String> {
    let (per_source, total) = (
        parsed.server.max_connections_per_source.get(),
        parsed.server.max_connections.get(),
    );
    if per_source > total {
        return Err(format!(
            "server.max_connections_per_source must be 1 to server.max_connections \
             ({total}), got {per_source}"
        ));
    }
    let seed = &parsed.seed;
    let argon2 = crate::keys::KdfParams {
        memory_kib: seed.argon2_memory_kib,
        iterations: seed.argon2_iterations,
        parallelism: seed.argon2_parallelism,
    };
    if !argon2.within_bounds() {
        return Err(
            "seed.argon2_*: memory 8 KiB per lane to 1 GiB, 1 to 64 iterations, \
                     1 to 64 lanes"
                .into(),
        );
    }
    // Below OWASP's minimum a stolen envelope's passphrase is too cheap to guess.
    // Only new seals use these; an envelope keeps the costs it was sealed with.
    if argon2.memory_kib < MIN_ARGON2_MEMORY_KIB || argon2.iterations < MIN_ARGON2_ITERATIONS {
        return Err(format!(
            "seed.argon2_*: at least {MIN_ARGON2_MEMORY_KIB} KiB (19 MiB) and \
                 {MIN_ARGON2_ITERATIONS} iterations (OWASP's minimum for Argon2id), got \
                 {} KiB and {}",
            argon2.memory_kib, argon2.iterations
        ));
    }
    if let Some(dir) = &parsed.backup.directory
        && !dir.is_absolute()
    {
        return Err(format!(
            "backup.directory must be an absolute path, got {}",
            dir.display()
        ));
    }
    if let Some(file) = &parsed.claim.code_file
        && !file.is_absolute()
    {
        return Err(format!(
            "claim.code_file must be an absolute path, got {}",
            file.display()
        ));
    }
    for name in &parsed.server.allowed_hosts {
        let bare = name.trim().trim_end_matches('.');
        let valid = bare.parse::<std::net::IpAddr>().is_ok()
            || rustls::pki_types::DnsName::try_from(bare).is_ok();
        if bare.is_empty() || !valid {
            return Err(format!(
                "server.allowed_hosts: {name:?} is not a host name or address (no port)"
            ));
        }
    }
    if seed.secure_element_slot.is_some_and(|slot| slot > 15) {
        return Err("seed.secure_element_slot must be 0 to 15".into());
    }
    if !(0x08..=0x77).contains(&seed.i2c_address) {
        return Err("seed.i2c_address must be a 7-bit address (0x08 to 0x77)".into());
    }
    crate::net::egress::Policy::from_allow(&parsed.egress.allow)?;
    for relay in &parsed.nwc.relays {
        let scheme = url::Url::parse(relay).map(|u| u.scheme().to_string());
        if !matches!(scheme.as_deref(), Ok("wss" | "ws")) {
            return Err(format!(
                "nwc.relays: {relay:?} is not a ws:// or wss:// URL"
            ));
        }
    }
    parsed.household.spending_policy()?;
    if parsed.tls.cert_file.is_some() != parsed.tls.key_file.is_some() {
        return Err("tls.cert_file and tls.key_file go together: set both or neither".into());
    }
    Ok(())
}

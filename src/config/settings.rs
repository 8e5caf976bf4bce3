//! The daemon's settings, resolved and validated once: the command line (with the
//! environment variables clap reads for it), the other environment variables, and the
//! `berth.toml` layers, into a [`Settings`] with nothing left to guess at. An unsafe
//! combination of flags is refused here, before the daemon touches anything.
//!
//! `docs/configuration.md` lists every setting; `tests/integration/configuration.rs` holds it
//! against the code.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use axum::http::HeaderValue;

use crate::cli::Cli;
use crate::config::BerthToml;
use crate::datadir::Layout;
use crate::keys::SeedSettings;
use crate::tls::TlsSource;

/// Everything the daemon is told, resolved.
#[derive(Debug)]
pub struct Settings {
    pub layout: Layout,
    /// The `berth.toml` layers, merged and validated.
    pub file: BerthToml,
    pub listen: SocketAddr,
    /// Where the listener's certificate comes from; `None`: plain HTTP (loopback, or
    /// allowed by a flag that says so).
    pub tls: Option<TlsSource>,
    /// Whether requests need a credential (`--no-auth`: they do not).
    pub auth: Auth,
    /// Origins CORS allows; empty: none.
    pub allowed_origins: Vec<HeaderValue>,
    pub expose_mnemonic: bool,
    pub log: Log,
    /// How the seed is sealed and unlocked.
    pub seed: SeedSettings,
    /// Where berthd may fetch from on a client's behalf (`[egress]`).
    pub egress: crate::net::egress::Policy,
    /// How the wallet database is opened (`[store]`; the fault tests' trigger from
    /// `BERTH_STORE_FAULTS`).
    pub store: crate::store::StoreConfig,
}

/// `berth.toml` for this datadir, its layers under systemd's `$CONFIGURATION_DIRECTORY`
/// (`/etc/berth`) first when that is set: for the daemon ([`Settings::resolve`]) and
/// the subcommands that read the file (`seed`, `restore`, `claim`, `tls`).
pub fn berth_toml(layout: &Layout) -> Result<BerthToml, crate::config::ConfigError> {
    let etc = std::env::var_os("CONFIGURATION_DIRECTORY").map(std::path::PathBuf::from);
    BerthToml::load_layered(&layout.berth_toml(), etc.as_deref())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// The datadir's bearer token and paired devices' tokens.
    Required,
    /// `--no-auth` (loopback) or `--dangerously-allow-remote-no-auth`.
    Disabled,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Log {
    pub verbose: bool,
    pub quiet: bool,
    /// The log file; `None` with `--no-logfile`.
    pub file: Option<PathBuf>,
}

impl Settings {
    /// Resolve the daemon's settings for the datadir `layout` names.
    pub fn resolve(cli: &Cli, layout: Layout) -> anyhow::Result<Settings> {
        // Refusals first, before anything is read or written.
        check_no_auth(cli)?;
        let tls = use_tls(cli)?;
        let allowed_origins = parse_origins(&cli.allowed_origins)?;
        let file = berth_toml(&layout)?;
        let log = Log {
            verbose: cli.verbose,
            quiet: cli.quiet,
            file: match (&cli.logfile, cli.no_logfile) {
                (_, true) => None,
                (Some(path), false) => Some(path.clone()),
                (None, false) => Some(layout.log_file()),
            },
        };
        let egress = crate::net::egress::Policy::from_allow(&file.egress.allow)
            .map_err(anyhow::Error::msg)?;
        let store = crate::store::StoreConfig {
            fault_trigger: std::env::var_os(crate::store::faults::FAULTS_ENV).map(Into::into),
            ..file.store_config()
        };
        Ok(Settings {
            egress,
            store,
            tls: tls.then(|| tls_source(&layout, &file)),
            seed: seed_settings(&file),
            auth: if cli.no_auth || cli.dangerously_allow_remote_no_auth {
                Auth::Disabled
            } else {
                Auth::Required
            },
            listen: SocketAddr::new(cli.host, cli.port),
            allowed_origins,
            expose_mnemonic: cli.expose_mnemonic,
            log,
            file,
            layout,
        })
    }
}

/// The seed's settings: `berth.toml [seed]`, the passphrase of `BERTH_SEED_PASSPHRASE`
/// and systemd's `$CREDENTIALS_DIRECTORY`.
pub fn seed_settings(file: &BerthToml) -> SeedSettings {
    let passphrase = std::env::var(crate::keys::PASSPHRASE_ENV)
        .ok()
        .filter(|p| !p.is_empty())
        .map(zeroize::Zeroizing::new);
    let credentials = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from);
    file.seed.settings(passphrase, credentials)
}

/// Where the listener's certificate comes from: the user's files, or the datadir's
/// generated local CA.
pub fn tls_source(layout: &Layout, file: &BerthToml) -> TlsSource {
    match (&file.tls.cert_file, &file.tls.key_file) {
        (Some(cert_chain), Some(key)) => TlsSource::UserSupplied {
            cert_chain: cert_chain.clone(),
            key: key.clone(),
        },
        _ => TlsSource::Generated {
            dir: layout.tls_dir(),
            leaf_validity_days: file.tls.leaf_validity_days.to_u32(),
        },
    }
}

/// Whether to serve TLS. It is on for every non-loopback address; plain HTTP there
/// needs a flag that says so, and barkd's `--dangerously-allow-remote-no-auth` keeps
/// its meaning (something in front of berthd protects the port, so it serves plain
/// HTTP as barkd does).
fn use_tls(cli: &Cli) -> anyhow::Result<bool> {
    if cli.dangerously_allow_remote_no_auth {
        return Ok(false);
    }
    if cli.no_tls {
        if !cli.host.is_loopback() && !cli.dangerously_allow_plaintext_lan {
            anyhow::bail!(
                "refusing to start: --no-tls on {} would send tokens and payments across the \
                 network unencrypted; bind a loopback address, or add \
                 --dangerously-allow-plaintext-lan",
                cli.host
            );
        }
        return Ok(false);
    }
    Ok(cli.tls || !cli.host.is_loopback())
}

/// Refuse to serve an unauthenticated API where other machines can reach it, unless
/// the operator said something else protects the port.
fn check_no_auth(cli: &Cli) -> anyhow::Result<()> {
    if cli.no_auth && !cli.dangerously_allow_remote_no_auth && !cli.host.is_loopback() {
        anyhow::bail!(
            "refusing to start: --no-auth on {} would give every client that reaches the \
             port full wallet access; bind a loopback address, or use \
             --dangerously-allow-remote-no-auth if something in front of berthd restricts access",
            cli.host
        );
    }
    Ok(())
}

fn parse_origins(origins: &[String]) -> anyhow::Result<Vec<HeaderValue>> {
    origins
        .iter()
        .map(|o| {
            let well_formed = (o.starts_with("http://") || o.starts_with("https://"))
                && !o.ends_with('/')
                && o.matches("://").count() == 1;
            anyhow::ensure!(
                well_formed,
                "invalid CORS origin {o:?} (expected http[s]://host[:port])"
            );
            o.parse()
                .with_context(|| format!("invalid CORS origin {o:?}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    fn resolve(args: &[&str]) -> anyhow::Result<Settings> {
        let dir = tempfile::tempdir().expect("tempdir");
        let cli = Cli::try_parse_from(std::iter::once("berthd").chain(args.iter().copied()))
            .expect("parses");
        Settings::resolve(&cli, Layout::new(dir.path().to_path_buf()))
    }

    #[test]
    fn loopback_is_plain_and_the_lan_is_tls_unless_a_flag_says_otherwise() {
        let local = resolve(&[]).expect("loopback");
        assert!(local.tls.is_none());
        assert_eq!(local.auth, Auth::Required);
        assert_eq!(local.listen, "127.0.0.1:3000".parse().expect("addr"));
        assert!(resolve(&["--tls"]).expect("tls").tls.is_some());
        assert!(resolve(&["--host", "0.0.0.0"]).expect("lan").tls.is_some());
        let refused = resolve(&["--host", "0.0.0.0", "--no-tls"]).expect_err("plain on the LAN");
        assert!(
            refused.to_string().starts_with("refusing to start"),
            "{refused}"
        );
        let forced = resolve(&[
            "--host",
            "0.0.0.0",
            "--no-tls",
            "--dangerously-allow-plaintext-lan",
        ])
        .expect("forced");
        assert!(forced.tls.is_none());
    }

    #[test]
    fn no_auth_is_for_loopback_unless_something_else_protects_the_port() {
        assert_eq!(
            resolve(&["--no-auth"]).expect("loopback").auth,
            Auth::Disabled
        );
        let refused = resolve(&["--host", "0.0.0.0", "--no-auth"]).expect_err("LAN");
        assert!(
            refused.to_string().starts_with("refusing to start"),
            "{refused}"
        );
        let remote = resolve(&["--host", "0.0.0.0", "--dangerously-allow-remote-no-auth"])
            .expect("behind a proxy");
        assert_eq!(remote.auth, Auth::Disabled);
        assert!(remote.tls.is_none(), "plain HTTP, as barkd");
    }

    #[test]
    fn origins_and_the_log_file() {
        let s = resolve(&["--allowed-origins", "https://a.example,http://b.local:8080"])
            .expect("origins");
        assert_eq!(s.allowed_origins.len(), 2);
        assert!(resolve(&["--allowed-origins", "https://a.example/"]).is_err());
        assert!(s.log.file.is_some_and(|f| f.ends_with("debug.log")));
        assert_eq!(resolve(&["--no-logfile"]).expect("none").log.file, None);
    }
}

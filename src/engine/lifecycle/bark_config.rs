//! A wallet's `config.toml` (bark's format, as barkd writes and reads it), read the way
//! `bark::Config::load` reads it: the network's defaults, then the file's keys, then
//! `BARK_*` environment variables (`BARK_ESPLORA_ADDRESS` sets `esplora_address`).
//!
//! bark's own loader does this with the `config` crate, which brings YAML, RON and JSON5
//! parsers along (~0.3 MB of berthd for a flat TOML file; issue 45). The tests hold this
//! reader to bark's on the same files.

use std::ffi::OsString;
use std::path::Path;

use anyhow::{Context, bail};
use bitcoin::Network;

/// The configuration in `path` (absent: the defaults) for a wallet on `network`.
pub(super) fn load(network: Network, path: &Path) -> anyhow::Result<bark::Config> {
    load_with_env(network, path, std::env::vars_os())
}

fn load_with_env(
    network: Network,
    path: &Path,
    env: impl IntoIterator<Item = (OsString, OsString)>,
) -> anyhow::Result<bark::Config> {
    let mut table = toml::Table::try_from(bark::Config::network_default(network))
        .context("the network's default configuration")?;
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let file: toml::Table = text
                .parse()
                .with_context(|| format!("error parsing {}", path.display()))?;
            // bark's configuration is flat: a key in the file replaces the default.
            table.extend(file);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    }
    for (key, value) in env {
        // As the `config` crate's environment source: names compared in lower case, the
        // prefix removed; a name that is not Unicode is skipped, a value that is not is
        // refused.
        let Ok(key) = key.into_string() else { continue };
        let key = key.to_lowercase();
        let Some(name) = key.strip_prefix("bark_") else {
            continue;
        };
        let value = value
            .into_string()
            .map_err(|_| anyhow::anyhow!("environment variable {key} is not Unicode"))?;
        let value = typed_like(table.get(name), name, value)?;
        table.insert(name.to_owned(), value);
    }
    let config: bark::Config = table.try_into().context("error parsing config")?;
    // bark refuses an out-of-range gap limit up front, not at the first scan.
    if config.vtxo_key_gap_limit > bark::MAX_VTXO_KEY_GAP_LIMIT {
        bail!(
            "vtxo_key_gap_limit {} is above the maximum of {}",
            config.vtxo_key_gap_limit,
            bark::MAX_VTXO_KEY_GAP_LIMIT
        );
    }
    Ok(config)
}

/// An environment variable's text as the type the key has (numbers and switches; text
/// for the rest), as the `config` crate converts it when the field asks.
fn typed_like(
    current: Option<&toml::Value>,
    name: &str,
    value: String,
) -> anyhow::Result<toml::Value> {
    Ok(match current {
        Some(toml::Value::Integer(_)) => {
            toml::Value::Integer(value.trim().parse().with_context(|| {
                format!("BARK_{}: {value:?} is not a number", name.to_uppercase())
            })?)
        }
        Some(toml::Value::Boolean(_)) => {
            toml::Value::Boolean(match value.trim().to_lowercase().as_str() {
                "true" | "on" | "yes" | "1" => true,
                "false" | "off" | "no" | "0" => false,
                _ => bail!(
                    "BARK_{}: {value:?} is not true or false",
                    name.to_uppercase()
                ),
            })
        }
        _ => toml::Value::String(value),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ours and bark's loader on the same file (bark's reads the real environment,
    /// which sets no `BARK_*` variable in tests).
    fn both(network: Network, text: Option<&str>) -> (bark::Config, bark::Config) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.toml");
        if let Some(text) = text {
            std::fs::write(&path, text).expect("write");
        }
        let ours = load_with_env(network, &path, []).expect("ours loads");
        let theirs = bark::Config::load(network, &path).expect("bark's loads");
        (ours, theirs)
    }

    fn same(ours: &bark::Config, theirs: &bark::Config) {
        // bark::Config has no PartialEq; its serialised form says everything it holds.
        assert_eq!(
            toml::to_string(ours).expect("serialises"),
            toml::to_string(theirs).expect("serialises")
        );
    }

    #[test]
    fn reads_files_as_bark_does() {
        let files = [
            None,
            Some(""),
            // What berthd writes for a new wallet (create.rs).
            Some(
                "server_address = \"http://127.0.0.1:3535\"\nesplora_address = \"http://e.example\"\n",
            ),
            Some(
                "server_address = \"https://ark.example\"\nbitcoind_address = \"http://127.0.0.1:18443\"\n\
                 bitcoind_user = \"u\"\nbitcoind_pass = \"p\"\n",
            ),
            Some(
                "server_address = \"a\"\nbitcoind_address = \"b\"\nbitcoind_cookiefile = \"/x/.cookie\"\n\
                 vtxo_refresh_expiry_threshold = 40\nvtxo_exit_margin = 7\nhtlc_recv_claim_delta = 30\n\
                 lightning_receive_claim_retries = 2\nfallback_fee_rate = 500\n\
                 round_tx_required_confirmations = 3\noffboard_required_confirmations = 4\n\
                 offboard_lost_tx_grace_period_secs = 99\ndaemon_sync_interval_secs = 5\n\
                 change_vtxo_split_factor = 3\ndaemon_manual_sync = true\nvtxo_key_gap_limit = 10\n\
                 user_agent = \"x/1\"\nbitcoind_zmq_address = \"tcp://127.0.0.1:28332\"\n",
            ),
        ];
        for network in [Network::Bitcoin, Network::Regtest, Network::Signet] {
            for text in files {
                let (ours, theirs) = both(network, text);
                same(&ours, &theirs);
            }
        }
        let (ours, _) = both(Network::Regtest, files[4]);
        assert!(ours.daemon_manual_sync);
        assert_eq!(ours.daemon_sync_interval_secs, 5);
    }

    #[test]
    fn refuses_what_bark_refuses() {
        for text in [
            "server_address = ",
            "vtxo_key_gap_limit = 1000000000",
            "daemon_manual_sync = \"perhaps\"",
            "change_vtxo_split_factor = -1",
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("config.toml");
            std::fs::write(&path, text).expect("write");
            assert!(
                load_with_env(Network::Regtest, &path, []).is_err(),
                "{text}"
            );
            assert!(
                bark::Config::load(Network::Regtest, &path).is_err(),
                "{text}"
            );
        }
    }

    #[test]
    fn environment_overrides_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("config.toml");
        std::fs::write(
            &path,
            "server_address = \"a\"\nesplora_address = \"file\"\n",
        )
        .expect("write");
        let env = |pairs: &[(&str, &str)]| -> Vec<(OsString, OsString)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect()
        };
        let config = load_with_env(
            Network::Regtest,
            &path,
            env(&[
                ("BARK_ESPLORA_ADDRESS", "http://env.example"),
                ("bark_daemon_sync_interval_secs", "7"),
                ("BARK_DAEMON_MANUAL_SYNC", "yes"),
                ("BARK_BITCOIND_PASS", "12345"),
                ("BARKLEY_SERVER_ADDRESS", "ignored"),
                ("SERVER_ADDRESS", "ignored"),
            ]),
        )
        .expect("loads");
        assert_eq!(
            config.esplora_address.as_deref(),
            Some("http://env.example")
        );
        assert_eq!(config.daemon_sync_interval_secs, 7);
        assert!(config.daemon_manual_sync);
        assert_eq!(
            config.bitcoind_pass.as_ref().map(|p| p.leak_ref().as_str()),
            Some("12345")
        );
        assert_eq!(config.server_address, "a");
        let bad = load_with_env(
            Network::Regtest,
            &path,
            env(&[("BARK_DAEMON_SYNC_INTERVAL_SECS", "soon")]),
        );
        let message = format!("{:#}", bad.expect_err("not a number"));
        assert!(
            message.contains("BARK_DAEMON_SYNC_INTERVAL_SECS"),
            "{message}"
        );
    }
}

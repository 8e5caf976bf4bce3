//! The `berthd` command line: barkd's flags and environment variables, so scripts
//! written for barkd work unchanged, plus Berth's own subcommands.
//!
//! The auth- and TLS-disabling flags deliberately have no environment variable: an
//! inherited environment must never turn authentication or encryption off.

use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::{Parser, Subcommand};

/// Berth wallet daemon: the barkd REST API for Ark, Lightning and on-chain payments.
#[derive(Debug, Parser)]
#[command(name = "berthd", version, about)]
pub struct Cli {
    /// Data directory (wallet database, auth token, configuration).
    #[arg(long, env = "BARKD_DATADIR", global = true)]
    pub datadir: Option<PathBuf>,

    /// Port to listen on.
    #[arg(long, env = "BARKD_BIND_PORT", default_value_t = 3000)]
    pub port: u16,

    /// Address to listen on. Anything but loopback exposes the API to the network.
    #[arg(long, env = "BARKD_BIND_HOST", default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,

    /// Log debug detail on the terminal.
    #[arg(long, short = 'v', env = "BARK_VERBOSE", global = true, value_parser = BoolishValueParser::new())]
    pub verbose: bool,

    /// No terminal logging (the log file is still written).
    #[arg(long, short = 'q', env = "BARK_QUIET", global = true, value_parser = BoolishValueParser::new())]
    pub quiet: bool,

    /// Comma-separated CORS origins allowed to call the API (default: none).
    #[arg(long, env = "BARKD_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,

    /// Serve `GET /api/v1/wallet/mnemonic` (404 without this flag).
    #[arg(long, env = "BARKD_EXPOSE_MNEMONIC", value_parser = BoolishValueParser::new())]
    pub expose_mnemonic: bool,

    /// Disable authentication. Loopback hosts only.
    #[arg(long)]
    pub no_auth: bool,

    /// Disable authentication on any host: only when something in front of berthd
    /// (a TLS-terminating proxy, a firewall) restricts who reaches the port.
    #[arg(long)]
    pub dangerously_allow_remote_no_auth: bool,

    /// Serve TLS even on a loopback address (it is always on for other addresses).
    #[arg(long, conflicts_with = "no_tls")]
    pub tls: bool,

    /// Serve plain HTTP. Loopback hosts only, unless
    /// --dangerously-allow-plaintext-lan is given too.
    #[arg(long)]
    pub no_tls: bool,

    /// With --no-tls, serve plain HTTP on a non-loopback host: tokens and payments
    /// then cross the LAN unencrypted.
    #[arg(long, requires = "no_tls")]
    pub dangerously_allow_plaintext_lan: bool,

    /// Log file (default: `<datadir>/debug.log`).
    #[arg(long, env = "BARKD_LOGFILE")]
    pub logfile: Option<PathBuf>,

    /// Do not write a log file.
    #[arg(long, env = "BARKD_NO_LOGFILE", value_parser = BoolishValueParser::new())]
    pub no_logfile: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Manage the API bearer token.
    Secret {
        #[command(subcommand)]
        action: SecretCommand,
    },
    /// Inspect the wallet database.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// The TLS certificates of the LAN listener.
    Tls {
        #[command(subcommand)]
        command: TlsCommand,
    },
    /// The wallet's seed at rest: sealed, or barkd's plaintext file.
    Seed {
        #[command(subcommand)]
        command: SeedCommand,
    },
    /// Encrypted backups of the whole wallet state (`docs/operations.md`, "Back up").
    Backup {
        #[command(subcommand)]
        command: BackupCommand,
    },
    /// Restore a backup into a datadir without a wallet database, and store the seed
    /// with the configured key sources. berthd then starts where the backup left off.
    Restore {
        /// The backup file.
        file: PathBuf,
        /// A file holding the wallet's recovery phrase (`-`: standard input). Needed
        /// unless the datadir already holds the wallet's seed.
        #[arg(long)]
        mnemonic_file: Option<PathBuf>,
    },
    /// Pair a phone: open a pairing window on the running daemon (through its local
    /// control socket) and show the QR code to scan.
    Pair {
        /// Comma-separated scopes for the device: read, receive, send, admin
        /// (default: read,receive,send).
        #[arg(long, value_delimiter = ',')]
        scopes: Vec<String>,
        /// The device's name (default: the name the device sends).
        #[arg(long)]
        name: Option<String>,
    },
    /// The box's claim code, which a browser exchanges once for the first admin device.
    Claim {
        #[command(subcommand)]
        command: ClaimCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum ClaimCommand {
    /// Open the claim with a new code (any open one is void) and show it as a QR code;
    /// it works once, whatever the box holds.
    Reset,
}

#[derive(Debug, Subcommand)]
pub enum SeedCommand {
    /// Show how the seed is stored: its key sources and binding, never the seed.
    Status,
    /// Seal barkd's plaintext `mnemonic` file with the key sources configured
    /// (`BERTH_SEED_PASSPHRASE`, berth.toml [seed]); the plaintext is removed only once
    /// the envelope has been read back.
    Seal,
}

#[derive(Debug, Subcommand)]
pub enum BackupCommand {
    /// Back up the datadir's wallet (berthd must not be running on it): written beside
    /// FILE, read back and verified, then renamed to FILE.
    Create {
        /// Where to write the backup.
        file: PathBuf,
    },
    /// Decrypt a backup, restore it into a scratch database and check it: integrity,
    /// invariants, counts, the wallet's fingerprint. Changes nothing.
    Verify {
        /// The backup file.
        file: PathBuf,
        /// A file holding the wallet's recovery phrase (`-`: standard input); by
        /// default the datadir's seed, opened with the configured key sources.
        #[arg(long)]
        mnemonic_file: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum TlsCommand {
    /// Print the CA pin clients check (`sha256/...`) and the certificates' details,
    /// creating them if they do not exist yet.
    Show,
}

#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Print the current bearer token.
    Show,
    /// Replace the token (with a random secret, or the given one) and print it.
    /// Running daemons keep the old token until they restart.
    Refresh {
        /// 32-byte secret as 64 hex characters.
        #[arg(long, value_parser = parse_hex_secret)]
        secret: Option<[u8; 32]>,
    },
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Open a wallet database (migrating it if it is older), check its integrity and
    /// invariants, and print a summary.
    Check {
        /// Path of the database file (default: the datadir's).
        path: Option<PathBuf>,
    },
}

fn parse_hex_secret(s: &str) -> Result<[u8; 32], String> {
    let bytes: Vec<u8> = bitcoin::hex::FromHex::from_hex(s)
        .map_err(|_| "must be 64 hex characters (32 bytes)".to_string())?;
    bytes
        .try_into()
        .map_err(|_| "must be 64 hex characters (32 bytes)".to_string())
}

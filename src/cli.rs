//! The `berthd` command line.
//!
//! Until the daemon lands (its own issue), `berthd` only answers `--help` and
//! `--version`, and `berthd store check <file>` opens a wallet database, runs the
//! integrity check and the invariant check, and prints what it found.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Berth wallet daemon (barkd-compatible API for Ark, Lightning and on-chain payments).
#[derive(Debug, Parser)]
#[command(name = "berthd", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect the wallet database.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Open a wallet database (migrating it if it is older), check its integrity and
    /// invariants, and print a summary.
    Check {
        /// Path of the database file.
        path: PathBuf,
    },
}

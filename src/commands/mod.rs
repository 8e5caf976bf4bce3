//! `berthd`'s subcommands, one file each: `secret` (the bearer token), `store check`,
//! `tls show`, `seed status | seal`, `backup create | verify` and `restore`, `claim
//! reset`, and `pair` (through the running daemon's control socket). Each works on the datadir `datadir::Layout` names; the daemon itself is
//! `app`.

mod backup;
mod claim;
mod pair;
mod secret;
mod seed;
mod store;
mod tls;

use crate::cli::{ClaimCommand, Command, StoreCommand, TlsCommand};
use crate::datadir::Layout;

/// Run `command` on the datadir `layout` names.
pub fn run(command: &Command, layout: &Layout) -> anyhow::Result<()> {
    match command {
        Command::Secret { action } => secret::run(layout, action),
        Command::Store {
            command: StoreCommand::Check { path },
        } => {
            let path = path.clone().unwrap_or_else(|| layout.database());
            crate::runtime::build()?.block_on(store::check(&path))
        }
        Command::Tls {
            command: TlsCommand::Show,
        } => tls::show(layout),
        Command::Seed { command } => seed::run(layout, command),
        Command::Backup { command } => backup::run(layout, command),
        Command::Restore {
            file,
            mnemonic_file,
        } => backup::restore(layout, file, mnemonic_file.as_deref()),
        Command::Claim {
            command: ClaimCommand::Reset,
        } => claim::reset(layout),
        Command::Pair { scopes, name } => {
            crate::runtime::build()?.block_on(pair::run(layout, scopes, name.as_deref()))
        }
    }
}

//! `berthd`: parse the command line and hand over to the library.

use std::process::ExitCode;

use berth::cli::{Cli, Command, StoreCommand};
use berth::store::{Store, StoreConfig};
use clap::Parser;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        None => {
            eprintln!("berthd: the daemon is not built yet; see `berthd --help`");
            ExitCode::from(2)
        }
        Some(Command::Store {
            command: StoreCommand::Check { path },
        }) => check_store(&path),
    }
}

fn check_store(path: &std::path::Path) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("berthd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async {
        let (store, report) = match Store::open_async(path, &StoreConfig::default()).await {
            Ok(opened) => opened,
            Err(e) => {
                eprintln!("berthd: {e}");
                return ExitCode::FAILURE;
            }
        };
        println!(
            "integrity: {}; schema: version {} (found {})",
            if report.integrity_ok {
                "ok"
            } else {
                "repaired"
            },
            report.schema_now,
            report.schema_found
        );
        match store.verify_invariants().await {
            Ok(r) => {
                println!(
                    "invariants: ok ({} vtxos, {} movements, {} round states)",
                    r.vtxos, r.movements, r.round_states
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("berthd: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

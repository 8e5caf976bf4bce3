//! `berthd`: parse the command line and hand over to the library.

use clap::Parser;

fn main() -> std::process::ExitCode {
    berth::app::main(berth::cli::Cli::parse())
}

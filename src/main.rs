//! `berthd`: parse the command line and hand over to the library.

use clap::Parser;

/// jemalloc, not glibc's malloc: after a spike of connections its background thread
/// gives the memory back to the OS within seconds, where glibc kept the freed heap
/// resident (docs/adr/0007-jemalloc-gives-memory-back.md). The binary only: the library
/// and its unit tests keep the system allocator; the integration tests run this binary.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    berth::app::main(berth::cli::Cli::parse())
}

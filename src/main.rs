//! `berthd`: parse the command line and hand over to the library.

use std::sync::OnceLock;

use clap::Parser;
use tikv_jemalloc_ctl::{Access as _, AsName as _, Mib};

/// jemalloc, not glibc's malloc: after a spike of connections its background thread
/// gives the memory back to the OS within seconds, where glibc kept the freed heap
/// resident (docs/adr/0007-jemalloc-gives-memory-back.md). The binary only: the library
/// and its unit tests keep the system allocator; the integration tests run this binary.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    berth::app::main(berth::cli::Cli::parse(), Some(empty_thread_cache))
}

/// Empties the calling thread's jemalloc cache; an async worker calls it each time it
/// runs out of work. A thread keeps freed blocks in its own cache for its next
/// allocations and trims it only as it allocates more, so a worker that goes idle after
/// a burst of connections kept megabytes the arenas' background thread cannot return
/// (scripts/bench-events, docs/adr/0007). Turning the cache off hands its blocks to the
/// arena; turning it on again starts an empty one.
fn empty_thread_cache() {
    static ENABLED: OnceLock<Option<Mib<[usize; 3]>>> = OnceLock::new();
    let mib = ENABLED.get_or_init(|| b"thread.tcache.enabled\0".name().mib().ok());
    if let Some(mib) = mib {
        // Failure leaves the cache as it was: nothing to report or to undo.
        let _ = mib.write(false);
        let _ = mib.write(true);
    }
}

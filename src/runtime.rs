//! The async runtime berthd runs on, bounded for a small board.

use anyhow::Context;

/// Two workers (the boards have two to four cores) and a capped blocking pool (redb,
/// fsync, I²C and Argon2id run there). `on_worker_idle` runs on a worker each time it
/// has run out of work, just before it sleeps: the binary gives its allocator's
/// per-thread cache back there (src/main.rs).
pub fn build(on_worker_idle: Option<fn()>) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder
        .worker_threads(2)
        .max_blocking_threads(16)
        .enable_all();
    if let Some(idle) = on_worker_idle {
        builder.on_thread_park(idle);
    }
    builder.build().context("cannot start the async runtime")
}

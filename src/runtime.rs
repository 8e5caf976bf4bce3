//! The async runtime berthd runs on, bounded for a small board.

use anyhow::Context;

/// Two workers (the boards have two to four cores) and a capped blocking pool (redb,
/// fsync, I²C and Argon2id run there).
pub fn build() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(16)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

//! Logging: `tracing` to the terminal (info; debug with `--verbose`; none with
//! `--quiet`) and, unless disabled, at debug level to a log file. bark logs through
//! the `log` crate; those records are bridged into `tracing`.

use std::path::Path;

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

pub struct LogOptions<'a> {
    pub verbose: bool,
    pub quiet: bool,
    pub file: Option<&'a Path>,
}

pub fn init(options: LogOptions<'_>) -> anyhow::Result<()> {
    let terminal_level = match (options.quiet, options.verbose) {
        (true, _) => LevelFilter::OFF,
        (false, true) => LevelFilter::DEBUG,
        (false, false) => LevelFilter::INFO,
    };
    let terminal = fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(terminal_level);
    let file = match options.file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| anyhow::anyhow!("cannot open log file {}: {e}", path.display()))?;
            Some(
                fmt::layer()
                    .with_ansi(false)
                    .with_writer(std::sync::Mutex::new(file))
                    .with_filter(LevelFilter::DEBUG),
            )
        }
        None => None,
    };
    // `try_init` also installs the `log` → `tracing` bridge (tracing-subscriber's
    // default `tracing-log` feature), so bark's records land here too.
    tracing_subscriber::registry()
        .with(terminal)
        .with(file)
        .try_init()?;
    Ok(())
}

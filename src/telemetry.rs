//! Logging: `tracing` to the terminal (info; debug with `--verbose`; none with
//! `--quiet`) and, unless disabled, at debug level to a log file. bark logs through
//! the `log` crate; those records are bridged into `tracing`.
//!
//! Under systemd (`$JOURNAL_STREAM` names our stderr) the terminal output goes to the
//! journal natively instead, with the event's fields as journal fields (`TARGET`,
//! `ERROR`, `VTXO`, ...), so `journalctl -u berthd ERROR=...` can filter on them.

use std::os::unix::fs::OpenOptionsExt as _;
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
    let journald = if stderr_is_the_journal() {
        match tracing_journald::layer() {
            Ok(layer) => Some(layer.with_filter(terminal_level)),
            Err(e) => {
                eprintln!("berthd: cannot log to the journal, logging to stderr: {e}");
                None
            }
        }
    } else {
        None
    };
    let terminal = journald.is_none().then(|| {
        fmt::layer()
            .with_writer(std::io::stderr)
            .with_filter(terminal_level)
    });
    let file = match options.file {
        Some(path) => {
            // 0600 whatever the umask: the log tells what the wallet does and holds.
            let file = std::fs::OpenOptions::new()
                .create(true)
                .mode(0o600)
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
        .with(journald)
        .with(terminal)
        .with(file)
        .try_init()?;
    Ok(())
}

/// Whether stderr is connected to the journal: systemd sets `$JOURNAL_STREAM` to the
/// `device:inode` of the stream it gave us, and a child whose stderr was redirected
/// elsewhere inherits the variable, so the two are compared.
fn stderr_is_the_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some((dev, ino)) = stream.to_str().and_then(|s| s.split_once(':')) else {
        return false;
    };
    let Ok(stat) = rustix::fs::fstat(std::io::stderr()) else {
        return false;
    };
    dev.parse::<u64>().ok() == Some(stat.st_dev) && ino.parse::<u64>().ok() == Some(stat.st_ino)
}

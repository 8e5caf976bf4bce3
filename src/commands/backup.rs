//! `berthd backup create | verify` and `berthd restore` (`docs/operations.md`,
//! "Back up" and "Restore"). They work on a datadir no daemon holds, except `verify`, which only
//! reads the backup file.

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use zeroize::Zeroizing;

use crate::cli::BackupCommand;
use crate::datadir::Layout;
use crate::engine::backup::{self, BackupKey};

pub fn run(layout: &Layout, command: &BackupCommand) -> anyhow::Result<()> {
    match command {
        BackupCommand::Create { file } => {
            let _lock = layout.lock()?;
            let key = BackupKey::from_phrase(&seeds(layout)?.read()?)?;
            // One pass over the database: a page cache would only hold pages read once.
            let (store, _) = crate::store::Store::open(
                &layout.database(),
                &crate::store::StoreConfig {
                    cache_size: 1 << 20,
                    ..Default::default()
                },
            )?;
            let scratch = file.parent().filter(|p| !p.as_os_str().is_empty());
            let report = backup::write_file(
                &store,
                layout.root(),
                &key,
                file,
                scratch.unwrap_or(Path::new(".")),
            )?;
            print_report("written and verified", file, &report);
        }
        BackupCommand::Verify {
            file,
            mnemonic_file,
        } => {
            let key = key_for(layout, mnemonic_file.as_deref())?;
            let scratch = std::env::temp_dir();
            let report =
                backup::verify_file(file, &key, backup::Scratch::for_file(file, &scratch))?;
            print_report("verified", file, &report);
        }
    }
    Ok(())
}

pub fn restore(layout: &Layout, file: &Path, mnemonic_file: Option<&Path>) -> anyhow::Result<()> {
    crate::fsutil::ensure_private_dir(layout.root())?;
    let _lock = layout.lock()?;
    let seeds = seeds(layout)?;
    // The phrase given, else the seed the datadir holds; a given phrase must be that
    // seed's, and one the datadir lacks is stored with the configured key sources.
    let held = seeds.location().is_some();
    let phrase = match (mnemonic_file, held) {
        (Some(path), _) => read_phrase(path)?,
        (None, true) => seeds.read()?,
        (None, false) => anyhow::bail!(
            "the datadir holds no seed: give the wallet's recovery phrase with --mnemonic-file"
        ),
    };
    let key = BackupKey::from_phrase(&phrase)?;
    if held && mnemonic_file.is_some() {
        let own = BackupKey::from_phrase(&seeds.read()?)?;
        anyhow::ensure!(
            own.fingerprint() == key.fingerprint(),
            "the datadir holds another wallet's seed (fingerprint {}) than the phrase given ({})",
            own.fingerprint(),
            key.fingerprint()
        );
    }
    let report = backup::restore(file, &key, &layout.database(), layout.root())?;
    if !held {
        let location = seeds.create(&phrase).context(
            "the database is restored, but storing the seed failed; run restore again once \
             the key source works (it refuses while the database is there: move berth.redb away)",
        )?;
        println!(
            "seed: {}",
            match location {
                crate::keys::SeedLocation::Sealed => "sealed with the configured key sources",
                crate::keys::SeedLocation::Plaintext =>
                    "plaintext mnemonic file (no key source is configured)",
            }
        );
    }
    let m = &report.manifest;
    println!(
        "restored {} into {}: backup of {} (berthd {}, schema version {})",
        file.display(),
        layout.root().display(),
        format_time(m.created_at_us),
        m.berthd_version,
        m.snapshot.schema_version
    );
    for path in &report.files {
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn seeds(layout: &Layout) -> anyhow::Result<crate::keys::Seeds> {
    let settings = crate::config::settings::berth_toml(layout)?;
    Ok(crate::keys::Seeds::new(
        layout.seed_files(),
        crate::config::settings::seed_settings(&settings),
    ))
}

fn key_for(layout: &Layout, mnemonic_file: Option<&Path>) -> anyhow::Result<BackupKey> {
    let phrase = match mnemonic_file {
        Some(path) => read_phrase(path)?,
        None => seeds(layout)?
            .read()
            .context("opening the datadir's seed (or give --mnemonic-file)")?,
    };
    Ok(BackupKey::from_phrase(&phrase)?)
}

fn read_phrase(path: &Path) -> anyhow::Result<Zeroizing<String>> {
    let mut text = Zeroizing::new(String::new());
    if path == Path::new("-") {
        std::io::stdin()
            .take(4096)
            .read_to_string(&mut text)
            .context("reading the phrase from standard input")?;
    } else {
        std::fs::File::open(path)
            .and_then(|f| f.take(4096).read_to_string(&mut text))
            .with_context(|| format!("reading {}", path.display()))?;
    }
    Ok(Zeroizing::new(text.trim().to_owned()))
}

fn print_report(what: &str, file: &Path, report: &backup::BackupReport) {
    let m = &report.manifest;
    let wallet = m
        .snapshot
        .wallet
        .as_ref()
        .map_or("no wallet".to_owned(), |w| {
            format!("wallet {} on {}", w.fingerprint, w.network)
        });
    let entries: u64 = m.snapshot.tables.iter().map(|(_, n)| n).sum();
    let count = |name: &str| {
        m.snapshot
            .tables
            .iter()
            .find(|(t, _)| t == name)
            .map_or(0, |(_, n)| *n)
    };
    println!(
        "{}: {what}: {wallet}, {} bytes, {entries} entries ({} vtxos, {} movements, {} exits, {} events), taken {}",
        file.display(),
        report.size,
        count("vtxos"),
        count("movements"),
        count("exits"),
        count("events"),
        format_time(m.created_at_us)
    );
}

fn format_time(us: u64) -> String {
    let secs = (us / 1_000_000) as i64;
    chrono::DateTime::from_timestamp(secs, 0).map_or_else(
        || format!("{secs} s"),
        |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

//! Reading a backup back: its header authenticated against the key, its records
//! decrypted and restored into a database (a scratch one to verify it, or the datadir's
//! to restore it), and the result checked against the manifest.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use super::format::{self, Header};
use super::{BackupError, BackupKey, BackupReport, FILES, Hashing, Manifest, hex, is_credentials};
use crate::store::snapshot::Restorer;
use crate::store::{Store, StoreConfig};

/// Read and authenticate a backup's header against `key`.
fn open_reader(
    file: &Path,
    key: &BackupKey,
) -> Result<format::DecryptingReader<BufReader<std::fs::File>>, BackupError> {
    let mut input = BufReader::new(
        std::fs::File::open(file)
            .map_err(BackupError::io(format!("opening {}", file.display())))?,
    );
    let mut bytes = Vec::with_capacity(format::HEADER_LEN);
    (&mut input)
        .take(format::HEADER_LEN as u64)
        .read_to_end(&mut bytes)
        .map_err(BackupError::io(format!("reading {}", file.display())))?;
    if bytes.len() < format::HEADER_LEN {
        return Err(if bytes.len() >= 8 && &bytes[..8] == format::MAGIC {
            BackupError::Truncated
        } else {
            BackupError::NotABackup
        });
    }
    let header = Header::parse(&bytes)?;
    if key.key_check(&header.salt) != header.key_check {
        return Err(BackupError::WrongWallet);
    }
    format::DecryptingReader::new(input, &header, &key.file_key(&header.salt))
        .map_err(BackupError::from_io)
}

/// Where a restore puts what it reads.
struct Target<'a> {
    restorer: Restorer,
    /// Files carried in the backup, to write into the datadir (or `None`: ignore).
    files: Option<&'a Path>,
    written_files: Vec<PathBuf>,
    /// Inside a credential table (`CREDENTIALS`): its entries are dropped, and counted.
    dropping: Option<u64>,
}

/// Where a backup's database is rebuilt.
pub enum Scratch<'a> {
    /// In memory: a verification then writes nothing to the disk under the datadir
    /// (on the box, the card, which wears), at the cost of holding the rebuilt
    /// database while it is checked; for backups up to [`Scratch::MEMORY_LIMIT`].
    Memory,
    /// A scratch database in this directory, removed afterwards.
    Dir(&'a Path),
}

impl<'a> Scratch<'a> {
    /// The largest backup file verified in memory. The rebuilt database is a small
    /// multiple of it (redb's pages and its file's growth), so tens of MiB at most on a
    /// board with a GiB or more; a larger one goes to `dir`.
    pub const MEMORY_LIMIT: u64 = 8 << 20;

    /// In memory when the backup `file` is small enough, else in `dir`.
    pub fn for_file(file: &Path, dir: &'a Path) -> Scratch<'a> {
        match std::fs::metadata(file) {
            Ok(meta) if meta.len() <= Self::MEMORY_LIMIT => Scratch::Memory,
            _ => Scratch::Dir(dir),
        }
    }
}

/// Decrypt `file` and rebuild its database with `restorer`. Every chunk is
/// authenticated before its contents are used. Returns the database, still open; on
/// any error the files written beside it are removed (the caller removes the
/// database's own file).
fn restore_into(
    file: &Path,
    key: &BackupKey,
    restorer: Restorer,
    files_dir: Option<&Path>,
) -> Result<(Restored, redb::Database), BackupError> {
    let mut input = Hashing::new(open_reader(file, key)?);
    let mut target = Target {
        restorer,
        files: files_dir,
        written_files: Vec::new(),
        dropping: None,
    };
    let read = read_records(&mut input, &mut target);
    let Target {
        restorer,
        written_files,
        ..
    } = target;
    let result = read.and_then(|(manifest, content_digest)| {
        let (db, tables) = restorer.finish_open()?;
        // Every table restored is listed with the same count, and every table listed
        // with entries was restored.
        for (name, entries) in &manifest.snapshot.tables {
            let restored = tables.iter().find(|(t, _)| t == name).map(|(_, n)| *n);
            // An older backup lists the credentials a restore drops.
            let entries = if is_credentials(name) { &0 } else { entries };
            if restored.unwrap_or(0) != *entries {
                return Err(BackupError::Check(format!(
                    "table {name}: {} entries restored, the manifest lists {entries}",
                    restored.unwrap_or(0)
                )));
            }
        }
        if let Some((name, _)) = tables
            .iter()
            .find(|(t, _)| !manifest.snapshot.tables.iter().any(|(l, _)| l == t))
        {
            return Err(BackupError::Check(format!(
                "table {name} was restored but is not in the manifest"
            )));
        }
        Ok((manifest, content_digest, db))
    });
    match result {
        Ok((manifest, content_digest, db)) => Ok((
            Restored {
                manifest,
                content_digest,
                files: written_files,
            },
            db,
        )),
        Err(e) => {
            for path in &written_files {
                let _ = std::fs::remove_file(path);
            }
            Err(e)
        }
    }
}

/// [`restore_into`] a new file at `db_path`, closed afterwards; on error the file is
/// removed.
fn restore_into_file(
    file: &Path,
    key: &BackupKey,
    db_path: &Path,
    files_dir: Option<&Path>,
) -> Result<Restored, BackupError> {
    let result = Restorer::create(db_path)
        .map_err(BackupError::from)
        .and_then(|restorer| restore_into(file, key, restorer, files_dir));
    match result {
        Ok((restored, _closed_on_drop)) => Ok(restored),
        Err(e) => {
            let _ = std::fs::remove_file(db_path);
            Err(e)
        }
    }
}

/// What [`restore_into`] read.
struct Restored {
    manifest: Manifest,
    content_digest: [u8; 32],
    files: Vec<PathBuf>,
}

/// Read every record into `target`; the manifest and the digest of the records before
/// it (the contents, as [`write`] hashed them).
fn read_records(
    input: &mut Hashing<format::DecryptingReader<BufReader<std::fs::File>>>,
    target: &mut Target<'_>,
) -> Result<(Manifest, [u8; 32]), BackupError> {
    loop {
        // The digest covers the records before the summary, not its tag.
        let contents = input.hash.clone();
        let tag = format::read_u8(input).map_err(BackupError::from_io)?;
        match tag {
            format::TAG_FILE => {
                let name = format::read_name(input)?;
                let bytes = format::read_blob(input, format::MAX_FILE, "file")?;
                if !FILES.contains(&name.as_str()) {
                    return Err(BackupError::Invalid(format!("an unknown file {name:?}")));
                }
                if let Some(dir) = target.files {
                    let path = dir.join(&name);
                    // The datadir's own copy (a configured box) wins over the backup's.
                    if !path.exists() {
                        crate::fsutil::write_atomically(&path, &bytes, 0o600)?;
                        target.written_files.push(path);
                    }
                }
            }
            format::TAG_TABLE => {
                let name = format::read_name(input)?;
                target.dropping = is_credentials(&name).then_some(0);
                target.restorer.begin_table(&name)?
            }
            format::TAG_ENTRY => {
                let key = format::read_blob(input, format::MAX_KEY, "key")?;
                let value = format::read_blob(input, format::MAX_VALUE, "value")?;
                match &mut target.dropping {
                    // An older backup's credentials: read (and counted), not restored.
                    Some(dropped) => *dropped += 1,
                    None => target.restorer.entry(&key, &value)?,
                }
            }
            format::TAG_TABLE_END => {
                let entries = format::read_u64(input).map_err(BackupError::from_io)?;
                match target.dropping.take() {
                    Some(dropped) if dropped != entries => {
                        return Err(BackupError::Invalid(format!(
                            "a table holds {dropped} entries, its end says {entries}"
                        )));
                    }
                    Some(_) => target.restorer.end_table(0)?,
                    None => target.restorer.end_table(entries)?,
                }
            }
            format::TAG_SUMMARY => {
                let bytes = format::read_blob(input, format::MAX_SUMMARY, "summary")?;
                let manifest: Manifest = serde_json::from_slice(&bytes)
                    .map_err(|e| BackupError::Invalid(format!("the manifest: {e}")))?;
                // The summary is the last record, and the last chunk must end here.
                let mut rest = [0u8; 1];
                let more = input.read(&mut rest).map_err(BackupError::from_io)?;
                if more != 0 || !input.inner.is_done() {
                    return Err(BackupError::Invalid("data after the summary".into()));
                }
                use sha2::Digest;
                return Ok((manifest, contents.finalize().into()));
            }
            other => {
                return Err(BackupError::Invalid(format!(
                    "an unknown record {other:#04x}"
                )));
            }
        }
    }
}

/// Check a backup file as a restore would use it: decrypt it with `key`, rebuild its
/// database in `scratch` (removed afterwards), open that (integrity check, migrations
/// to this version), check the store's invariants, the entry counts and that the
/// wallet is `key`'s. Blocks.
pub fn verify_file(
    file: &Path,
    key: &BackupKey,
    scratch: Scratch<'_>,
) -> Result<BackupReport, BackupError> {
    let (manifest, content_digest) = match scratch {
        Scratch::Memory => {
            let (restored, db) = restore_into(file, key, Restorer::create_in_memory()?, None)?;
            let (store, _) = Store::over(db, Path::new("(in memory)"), &check_config())?;
            check_restored(&store, &restored.manifest, key)?;
            (restored.manifest, restored.content_digest)
        }
        Scratch::Dir(dir) => {
            let mut suffix = [0u8; 8];
            getrandom::fill(&mut suffix).map_err(|e| {
                BackupError::Invalid(format!("no randomness for a scratch name: {e}"))
            })?;
            let scratch = dir.join(format!(".backup-verify-{}", hex(&suffix)));
            std::fs::create_dir(&scratch)
                .map_err(BackupError::io(format!("creating {}", scratch.display())))?;
            let db_path = scratch.join("berth.redb");
            let checked = restore_into_file(file, key, &db_path, None).and_then(|restored| {
                let (store, _) = Store::open(&db_path, &check_config())?;
                check_restored(&store, &restored.manifest, key)?;
                Ok(restored)
            });
            let _ = std::fs::remove_dir_all(&scratch);
            let restored = checked?;
            (restored.manifest, restored.content_digest)
        }
    };
    let size = std::fs::metadata(file)
        .map_err(BackupError::io(format!("reading {}", file.display())))?
        .len();
    Ok(BackupReport {
        manifest,
        size,
        content_digest,
    })
}

/// How a restored database is opened for its check: as berthd would, with the full
/// integrity check, a small cache.
fn check_config() -> StoreConfig {
    StoreConfig {
        cache_size: 1 << 20,
        full_check: true,
        ..StoreConfig::default()
    }
}

/// Check a restored database, opened as berthd would open it.
fn check_restored(store: &Store, manifest: &Manifest, key: &BackupKey) -> Result<(), BackupError> {
    let report = store
        .verify_invariants_blocking()
        .map_err(|e| BackupError::Check(e.to_string()))?;
    let listed = |name: &str| {
        manifest
            .snapshot
            .tables
            .iter()
            .find(|(t, _)| t == name && !is_credentials(name))
            .map_or(0, |(_, n)| *n)
    };
    for (name, seen) in [
        ("vtxos", report.vtxos),
        ("movements", report.movements),
        ("round_states", report.round_states),
        ("events", report.events),
        ("devices", report.devices),
    ] {
        if listed(name) != seen {
            return Err(BackupError::Check(format!(
                "{name}: {seen} in the restored database, {} in the manifest",
                listed(name)
            )));
        }
    }
    match &manifest.snapshot.wallet {
        Some(wallet) if wallet.fingerprint != key.fingerprint() => {
            Err(BackupError::Check(format!(
                "the backup's wallet has fingerprint {}, the seed's is {}",
                wallet.fingerprint,
                key.fingerprint()
            )))
        }
        _ => Ok(()),
    }
}

/// What [`restore`] did.
#[derive(Debug)]
pub struct RestoreReport {
    pub manifest: Manifest,
    /// Files written beside the database (bark's config).
    pub files: Vec<PathBuf>,
}

/// Restore `file` into `datadir`'s wallet database, which must not exist: rebuild it
/// under a temporary name, check it as [`verify_file`] does, then rename it into place.
/// The seed is the caller's business (it is not in the backup). Blocks.
pub fn restore(
    file: &Path,
    key: &BackupKey,
    db_path: &Path,
    datadir: &Path,
) -> Result<RestoreReport, BackupError> {
    if db_path.exists() {
        return Err(BackupError::Invalid(format!(
            "{} exists: restore into a datadir without a wallet database",
            db_path.display()
        )));
    }
    let partial = db_path.with_extension("redb.restoring");
    let _ = std::fs::remove_file(&partial);
    let Restored {
        manifest, files, ..
    } = restore_into_file(file, key, &partial, Some(datadir))?;
    let checked = Store::open(&partial, &check_config())
        .map_err(BackupError::from)
        .and_then(|(store, _)| check_restored(&store, &manifest, key))
        .and_then(|()| {
            std::fs::rename(&partial, db_path).map_err(BackupError::io(format!(
                "renaming to {}",
                db_path.display()
            )))
        });
    if let Err(e) = checked {
        let _ = std::fs::remove_file(&partial);
        for path in &files {
            let _ = std::fs::remove_file(path);
        }
        return Err(e);
    }
    crate::fsutil::sync_dir(datadir)?;
    Ok(RestoreReport { manifest, files })
}

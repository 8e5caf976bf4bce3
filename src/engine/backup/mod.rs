//! Encrypted, verified backups of the whole wallet state, and restoring from them.
//!
//! A backup is every table of `berth.redb`, copied in one read transaction (so one
//! committed state, even while the wallet writes: `store::snapshot`), plus bark's
//! `config.toml` (the Ark server and chain source the wallet reopens with), encrypted
//! under a key derived from the wallet's seed ([`BackupKey`]). The phrase plus any
//! backup file restores everything; a backup file alone reveals nothing; the seed is
//! never in it. The file format is [`format`]; `docs/storage.md` ("Backups") documents
//! it for other readers.
//!
//! A backup counts only once it has been read back, decrypted, restored into a
//! scratch database and checked ([`verify_file`]): integrity, the store's invariants,
//! the entry counts and the wallet's fingerprint.
//!
//! Here: what a backup carries and writing it. `key`: the backup key and how the
//! engine holds it while it is derived. `restore`: reading a backup back, verifying
//! and restoring it. `service`: the daemon's schedule.

pub mod format;
mod key;
mod restore;
pub mod service;

pub use key::{BackupKey, HeldKey};
pub use restore::{RestoreReport, Scratch, restore, verify_file};

use std::io::{BufWriter, Read, Write};
use std::path::Path;

use sha2::Sha256;

use crate::store::snapshot::{SnapshotError, SnapshotItem, SnapshotSummary};
use crate::store::{Store, now_us};
use format::{Header, SALT_LEN};

/// Why a backup could not be made, read or restored. Messages name the problem, never
/// the contents.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("not a Berth backup file")]
    NotABackup,
    #[error("backup format version {0} is unknown to this berthd (it reads 1 to {v}): upgrade berthd", v = format::FORMAT_VERSION)]
    UnknownFormat(u8),
    #[error(
        "this backup was not made with this wallet's seed (another wallet's backup, or a \
         modified header)"
    )]
    WrongWallet,
    #[error("the backup file ends early: it is truncated")]
    Truncated,
    #[error("the backup is damaged or was modified: {0}")]
    Damaged(String),
    #[error("the backup's contents are invalid: {0}")]
    Invalid(String),
    #[error("the restored copy fails its checks: {0}")]
    Check(String),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    #[error(transparent)]
    File(#[from] crate::fsutil::FsError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl BackupError {
    /// A read error, unwrapping the backup errors the decrypting reader carries.
    fn from_io(error: std::io::Error) -> BackupError {
        if error.get_ref().is_some_and(|e| e.is::<BackupError>()) {
            return *error
                .into_inner()
                .expect("checked")
                .downcast::<BackupError>()
                .expect("checked");
        }
        if error.kind() == std::io::ErrorKind::UnexpectedEof {
            return BackupError::Invalid("the payload ends inside a record".into());
        }
        BackupError::Io {
            context: "reading the backup".into(),
            source: error,
        }
    }

    fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> BackupError {
        let context = context.into();
        move |source| BackupError::Io { context, source }
    }
}

impl From<SnapshotError> for BackupError {
    fn from(error: SnapshotError) -> Self {
        match error {
            SnapshotError::Store(e) => BackupError::Store(e),
            SnapshotError::Io(e) => BackupError::from_io(e),
            SnapshotError::Invalid(reason) => BackupError::Invalid(reason),
        }
    }
}

/// The closing record of a backup: what was copied and when.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Manifest {
    /// Microseconds since the epoch.
    pub created_at_us: u64,
    pub berthd_version: String,
    pub snapshot: SnapshotSummary,
    /// Files copied beside the tables (by name in the datadir).
    pub files: Vec<String>,
}

/// What a written or verified backup holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    pub manifest: Manifest,
    /// Bytes of the backup file.
    pub size: u64,
    /// SHA-256 of the contents before encryption (files and tables, not the manifest,
    /// which carries the time): equal for two backups of the same state.
    pub content_digest: [u8; 32],
}

/// The datadir files a backup carries: bark's wallet configuration.
const FILES: &[&str] = &["config.toml"];

/// Tables that hold credentials, or what belongs to one: paired devices (phones and
/// console sessions) and their tokens, and the idempotency records of each
/// credential's requests. A backup carries them empty, and a restore drops what an
/// older backup carried: a restored box pairs its phones again, so a phone revoked
/// after the backup was taken (a stolen one) does not come back with it. The admin
/// token is a datadir file a backup never held (the new box makes its own); websocket
/// tickets and pairing codes live in memory only.
const CREDENTIALS: &[&str] = &[
    "devices",
    "tokens",
    "idempotency_keys",
    "idempotency_keys_by_time",
];

fn is_credentials(table: &str) -> bool {
    CREDENTIALS.contains(&table)
}

/// Write a backup of `store` (and the `FILES` found in `datadir`) to `out`, encrypted
/// under `key`. Streams: memory stays bounded whatever the wallet's size. Blocks.
pub fn write(
    store: &Store,
    datadir: &Path,
    key: &BackupKey,
    out: impl Write,
) -> Result<BackupReport, BackupError> {
    write_from(|sink| store.snapshot_blocking(sink), datadir, key, out)
}

/// [`write`] from a database file opened directly, as it is (no migration): for tools
/// that keep a backup of an older schema version (`tests/integration/backup.rs`).
pub fn write_db(
    db: &redb::Database,
    datadir: &Path,
    key: &BackupKey,
    out: impl Write,
) -> Result<BackupReport, BackupError> {
    write_from(
        |sink| crate::store::snapshot::copy_all(db, sink),
        datadir,
        key,
        out,
    )
}

type Sink<'a> = dyn FnMut(SnapshotItem<'_>) -> std::io::Result<()> + 'a;

fn write_from(
    snapshot: impl FnOnce(&mut Sink<'_>) -> Result<SnapshotSummary, SnapshotError>,
    datadir: &Path,
    key: &BackupKey,
    out: impl Write,
) -> Result<BackupReport, BackupError> {
    let mut salt = [0u8; SALT_LEN];
    let mut nonce_prefix = [0u8; format::NONCE_PREFIX_LEN];
    getrandom::fill(&mut salt)
        .and_then(|()| getrandom::fill(&mut nonce_prefix))
        .map_err(|e| BackupError::Invalid(format!("no randomness for the backup: {e}")))?;
    let header = Header {
        version: format::FORMAT_VERSION,
        chunk_size: format::CHUNK_SIZE,
        salt,
        nonce_prefix,
        key_check: key.key_check(&salt),
    };
    let mut writer = format::EncryptingWriter::new(out, &header, &key.file_key(&salt))
        .map_err(BackupError::io("writing the backup"))?;
    let mut hashing = Hashing::new(&mut writer);
    let (snapshot, files) = encode_contents(snapshot, datadir, &mut hashing)?;
    let content_digest = hashing.finish();
    let manifest = Manifest {
        created_at_us: now_us(),
        berthd_version: env!("CARGO_PKG_VERSION").to_owned(),
        snapshot,
        files,
    };
    let summary = serde_json::to_vec(&manifest)
        .map_err(|e| BackupError::Invalid(format!("encoding the manifest: {e}")))?;
    writer
        .write_all(&[format::TAG_SUMMARY])
        .and_then(|()| format::write_blob(&mut writer, &summary))
        .map_err(BackupError::io("writing the backup"))?;
    let (_, written) = writer
        .finish()
        .map_err(BackupError::io("writing the backup"))?;
    Ok(BackupReport {
        manifest,
        size: (format::HEADER_LEN as u64) + written,
        content_digest,
    })
}

/// The digest a backup of `store` taken now would carry as its
/// [`BackupReport::content_digest`]: equal digests, equal contents. Reads every table
/// (one read transaction) but writes nothing, so a scheduler can skip a backup that
/// would repeat the newest one. Blocks.
pub fn content_digest(store: &Store, datadir: &Path) -> Result<[u8; 32], BackupError> {
    let mut hashing = Hashing::new(std::io::sink());
    encode_contents(|sink| store.snapshot_blocking(sink), datadir, &mut hashing)?;
    Ok(hashing.finish())
}

/// Write the records of a backup's contents (the datadir's `FILES`, then every table)
/// to `out`: everything but the closing manifest.
fn encode_contents(
    snapshot: impl FnOnce(&mut Sink<'_>) -> Result<SnapshotSummary, SnapshotError>,
    datadir: &Path,
    out: &mut impl Write,
) -> Result<(SnapshotSummary, Vec<String>), BackupError> {
    let mut files = Vec::new();
    for name in FILES {
        let path = datadir.join(name);
        match std::fs::read(&path) {
            Ok(bytes) if bytes.len() <= format::MAX_FILE => {
                format::write_name(out, format::TAG_FILE, name)
                    .and_then(|()| format::write_blob(out, &bytes))
                    .map_err(BackupError::io("writing the backup"))?;
                files.push((*name).to_owned());
            }
            Ok(_) => {
                return Err(BackupError::Invalid(format!(
                    "{} is larger than {} bytes",
                    path.display(),
                    format::MAX_FILE
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(BackupError::io(format!("reading {}", path.display()))(e)),
        }
    }
    // The credential tables are written empty (`CREDENTIALS`).
    let mut withheld = false;
    let mut snapshot = snapshot(&mut |item| match item {
        SnapshotItem::Table(name) => {
            withheld = is_credentials(name);
            format::write_name(out, format::TAG_TABLE, name)
        }
        SnapshotItem::Entry { .. } if withheld => Ok(()),
        SnapshotItem::Entry { key, value } => {
            out.write_all(&[format::TAG_ENTRY])?;
            format::write_blob(out, key)?;
            format::write_blob(out, value)
        }
        SnapshotItem::EndTable { entries } => {
            let entries = if withheld { 0 } else { entries };
            out.write_all(&[format::TAG_TABLE_END])?;
            out.write_all(&entries.to_be_bytes())
        }
    })?;
    for (name, entries) in &mut snapshot.tables {
        if is_credentials(name) {
            *entries = 0;
        }
    }
    Ok((snapshot, files))
}

/// Passes reads or writes on to `inner` and hashes the bytes that went through
/// (SHA-256): a backup's [`BackupReport::content_digest`].
struct Hashing<T> {
    inner: T,
    hash: Sha256,
}

impl<T> Hashing<T> {
    fn new(inner: T) -> Self {
        Hashing {
            inner,
            hash: Sha256::default(),
        }
    }

    fn finish(self) -> [u8; 32] {
        use sha2::Digest;
        self.hash.finalize().into()
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use sha2::Digest;
        let n = self.inner.write(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use sha2::Digest;
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        Ok(n)
    }
}

/// Write a backup to `path` atomically: a temporary file beside it, synced, verified
/// (restored into a scratch database, in memory or under `scratch_dir` for a large one
/// ([`Scratch::for_file`]), and checked), then renamed
/// into place and the directory synced. Nothing is left under `path` unless all of
/// that succeeded. Blocks.
pub fn write_file(
    store: &Store,
    datadir: &Path,
    key: &BackupKey,
    path: &Path,
    scratch_dir: &Path,
) -> Result<BackupReport, BackupError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let partial = dir.join(format!(".{}.partial", name.unwrap_or_default()));
    let result = (|| {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&partial)
            .map_err(BackupError::io(format!("creating {}", partial.display())))?;
        let mut out = BufWriter::new(file);
        let report = write(store, datadir, key, &mut out)?;
        let file = out
            .into_inner()
            .map_err(|e| BackupError::io("writing the backup")(e.into_error()))?;
        file.sync_all()
            .map_err(BackupError::io(format!("syncing {}", partial.display())))?;
        drop(file);
        let verified = verify_file(&partial, key, Scratch::for_file(&partial, scratch_dir))?;
        if verified.manifest != report.manifest || verified.content_digest != report.content_digest
        {
            return Err(BackupError::Check(
                "the file read back differs from what was written".into(),
            ));
        }
        std::fs::rename(&partial, path)
            .map_err(BackupError::io(format!("renaming to {}", path.display())))?;
        crate::fsutil::sync_dir(dir)?;
        Ok(report)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    //! Payloads no berthd writes, encrypted under the right key, so that only the
    //! payload's own checks can refuse them: the bounds on lengths, unknown tables and
    //! records, anything after the summary.

    use std::path::PathBuf;
    use std::sync::Arc;

    use super::*;

    const PHRASE: &str =
        "legal winner thank year wave sausage worth useful legal winner thank yellow";

    fn fingerprint(n: u8) -> bitcoin::bip32::Fingerprint {
        bitcoin::bip32::Fingerprint::from([n; 4])
    }

    #[tokio::test]
    async fn a_key_being_derived_is_waited_for() {
        let held = tokio::sync::watch::Sender::new(HeldKey::Deriving(fingerprint(1)));
        let mut rx = held.subscribe();
        let waiter = tokio::spawn(async move { HeldKey::wait(&mut rx).await });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "returned before the key was derived");
        let key = Arc::new(BackupKey::from_phrase(PHRASE).expect("key"));
        assert!(HeldKey::finish(&held, fingerprint(1), Arc::clone(&key)));
        let got = waiter.await.expect("join").expect("the key");
        assert_eq!(got.fingerprint(), key.fingerprint());
    }

    #[tokio::test]
    async fn a_delete_during_the_derivation_wins() {
        let held = tokio::sync::watch::Sender::new(HeldKey::Deriving(fingerprint(1)));
        held.send_replace(HeldKey::None);
        let key = Arc::new(BackupKey::from_phrase(PHRASE).expect("key"));
        assert!(!HeldKey::finish(&held, fingerprint(1), Arc::clone(&key)));
        assert!(HeldKey::wait(&mut held.subscribe()).await.is_none());
        // Another wallet, created meanwhile, does not get this one's key either.
        held.send_replace(HeldKey::Deriving(fingerprint(2)));
        assert!(!HeldKey::finish(&held, fingerprint(1), key));
        assert!(matches!(*held.borrow(), HeldKey::Deriving(f) if f == fingerprint(2)));
    }

    /// `payload`, encrypted as a backup file under `key`, in `dir`.
    fn craft(dir: &Path, key: &BackupKey, payload: &[u8]) -> PathBuf {
        let salt = [7u8; SALT_LEN];
        let header = Header {
            version: format::FORMAT_VERSION,
            chunk_size: format::CHUNK_SIZE,
            salt,
            nonce_prefix: [9u8; format::NONCE_PREFIX_LEN],
            key_check: key.key_check(&salt),
        };
        let path = dir.join("crafted");
        let file = std::fs::File::create(&path).expect("create");
        let mut writer =
            format::EncryptingWriter::new(file, &header, &key.file_key(&salt)).expect("header");
        writer.write_all(payload).expect("payload");
        writer.finish().expect("finish");
        path
    }

    fn refusal(payload: &[u8]) -> String {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = BackupKey::from_phrase(PHRASE).expect("key");
        let file = craft(dir.path(), &key, payload);
        let error = verify_file(&file, &key, Scratch::Dir(dir.path())).expect_err("refused");
        assert!(
            matches!(error, BackupError::Invalid(_)),
            "{error}: the payload's checks, not the cipher, refuse it"
        );
        // Nothing is left of the scratch database.
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);
        error.to_string()
    }

    fn table(name: &str) -> Vec<u8> {
        let mut out = vec![format::TAG_TABLE, name.len() as u8];
        out.extend_from_slice(name.as_bytes());
        out
    }

    #[test]
    fn a_length_over_its_bound_is_refused_before_it_is_read() {
        let mut payload = table("meta");
        payload.push(format::TAG_ENTRY);
        payload.extend_from_slice(&(format::MAX_KEY as u32 + 1).to_be_bytes());
        let said = refusal(&payload);
        assert!(said.contains("a key of 65537 bytes"), "{said}");

        let mut payload = vec![format::TAG_SUMMARY];
        payload.extend_from_slice(&(format::MAX_SUMMARY as u32 + 1).to_be_bytes());
        assert!(refusal(&payload).contains("summary"));
    }

    #[test]
    fn unknown_tables_and_records_and_trailing_data_are_refused() {
        let said = refusal(&table("a_table_from_the_future"));
        assert!(said.contains("made by a newer berthd"), "{said}");
        let said = refusal(b"?");
        assert!(said.contains("unknown record"), "{said}");
        // A whole summary, then one byte more.
        let manifest = Manifest {
            created_at_us: 1,
            berthd_version: "test".into(),
            snapshot: SnapshotSummary {
                schema_version: 4,
                wallet: None,
                tables: Vec::new(),
            },
            files: Vec::new(),
        };
        let json = serde_json::to_vec(&manifest).expect("json");
        let mut payload = vec![format::TAG_SUMMARY];
        payload.extend_from_slice(&(json.len() as u32).to_be_bytes());
        payload.extend_from_slice(&json);
        payload.push(0);
        let said = refusal(&payload);
        assert!(said.contains("after the summary"), "{said}");
    }
}

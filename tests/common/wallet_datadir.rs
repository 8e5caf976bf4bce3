//! A datadir holding a wallet from a committed store fixture, whose seed is a known
//! phrase in barkd's plaintext file: berthd starts with it and holds its backup key,
//! with no chain source or Ark server (the wallet never loads; backups do not need it).

use std::path::{Path, PathBuf};

use berth::store::codec::{Envelope, PropertiesRecord};
use berth::store::snapshot::SnapshotItem;
use berth::store::{Store, StoreConfig};

pub const MNEMONIC: &str =
    "legal winner thank year wave sausage worth useful legal winner thank yellow";
pub const OTHER: &str =
    "letter advice cage absurd amount doctor acoustic avoid letter advice cage above";
pub const BARK_CONFIG: &str =
    "ark = \"http://127.0.0.1:1\"\nesplora_address = \"http://127.0.0.1:1\"\n";

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A datadir holding fixture `name` (migrated to this version), its wallet under
/// MNEMONIC's fingerprint (the fixtures carry a placeholder), MNEMONIC in barkd's
/// plaintext file and a bark config.
pub fn fixture_datadir(name: &str) -> (tempfile::TempDir, PathBuf) {
    let (tmp, datadir) = new_datadir();
    std::fs::create_dir_all(&datadir).expect("datadir");
    let db = datadir.join("berth.redb");
    std::fs::copy(fixture(name), &db).expect("copy fixture");
    drop(Store::open(&db, &StoreConfig::default()).expect("migrates"));
    let mnemonic = bip39::Mnemonic::parse(MNEMONIC).expect("valid");
    let mut properties = super::properties();
    properties.fingerprint =
        bark::WalletSeed::new_from_mnemonic(properties.network, &mnemonic).fingerprint();
    let raw = redb::Database::create(&db).expect("open");
    let tx = raw.begin_write().expect("write");
    tx.open_table(berth::store::schema::PROPERTIES)
        .expect("table")
        .insert(
            (),
            &Envelope::<PropertiesRecord>::encode(&properties).expect("encode"),
        )
        .expect("insert");
    tx.commit().expect("commit");
    drop(raw);
    std::fs::write(datadir.join("mnemonic"), MNEMONIC).expect("mnemonic");
    std::fs::write(datadir.join("config.toml"), BARK_CONFIG).expect("config");
    (tmp, datadir)
}

/// Every table's entries, as stored.
pub type Dump = Vec<(String, Vec<(Vec<u8>, Vec<u8>)>)>;

pub fn dump(store: &Store) -> Dump {
    let mut tables: Dump = Vec::new();
    store
        .snapshot_blocking(&mut |item| {
            match item {
                SnapshotItem::Table(name) => tables.push((name.to_owned(), Vec::new())),
                SnapshotItem::Entry { key, value } => tables
                    .last_mut()
                    .expect("in a table")
                    .1
                    .push((key.to_vec(), value.to_vec())),
                SnapshotItem::EndTable { .. } => {}
            }
            Ok(())
        })
        .expect("snapshot");
    tables
}

/// The tables a backup carries empty and a restore drops (`engine::backup`, credentials).
pub const CREDENTIAL_TABLES: [&str; 4] = [
    "devices",
    "tokens",
    "idempotency_keys",
    "idempotency_keys_by_time",
];

/// `dump` with the credential tables emptied: what a restore of it must give.
pub fn without_credentials(mut dump: Dump) -> Dump {
    for (name, entries) in &mut dump {
        if CREDENTIAL_TABLES.contains(&name.as_str()) {
            entries.clear();
        }
    }
    dump
}

/// Entries of `table` in `dump` (0 when it has no such table).
pub fn entries_of(dump: &Dump, table: &str) -> usize {
    dump.iter()
        .find(|(t, _)| t == table)
        .map_or(0, |(_, entries)| entries.len())
}

pub fn dump_file(path: &Path) -> Dump {
    let (store, _) = Store::open(path, &StoreConfig::default()).expect("open");
    dump(&store)
}

/// An empty datadir path inside a new temporary directory (as `harness::new_datadir`).
fn new_datadir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let datadir = tmp.path().join("data");
    (tmp, datadir)
}

//! Labels imported by the owner (BIP-329 records, `engine::labels` reads and checks
//! them): [`LABELS`], `<type>:<ref>` → [`LabelRecord`]. Kept whether or not a movement
//! has the reference yet (a fresh address), at most [`MAX_LABELS`].

use redb::{ReadableTable, ReadableTableMetadata};

use crate::store::Store;
use crate::store::codec::Envelope;
use crate::store::error::{RedbResultExt, StoreError};
pub use crate::store::records::LabelRecord;
use crate::store::schema::LABELS;

/// The most labels kept.
pub const MAX_LABELS: u64 = 10_000;

fn key(record: &LabelRecord) -> String {
    format!("{}:{}", record.kind, record.reference)
}

/// What [`Store::put_labels`] came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Put {
    /// Written: so many set, so many removed.
    Done { set: usize, removed: usize },
    /// They would make more than [`MAX_LABELS`]: nothing written.
    TooMany,
}

impl Store {
    /// Set each record's label (an empty label removes the record), in one transaction.
    pub async fn put_labels(&self, records: Vec<LabelRecord>) -> Result<Put, StoreError> {
        const CTX: &str = "importing labels";
        self.write(CTX, move |tx| {
            let mut table = tx.open_table(LABELS).ctx(CTX)?;
            // The count after: refused before anything is written.
            let mut after: std::collections::BTreeMap<String, bool> = Default::default();
            for record in &records {
                after.insert(key(record), !record.label.is_empty());
            }
            let mut count = table.len().ctx(CTX)?;
            for (key, kept) in &after {
                let present = table.get(key.as_str()).ctx(CTX)?.is_some();
                match (present, *kept) {
                    (false, true) => count += 1,
                    (true, false) => count -= 1,
                    _ => {}
                }
            }
            if count > MAX_LABELS {
                return Ok(Put::TooMany);
            }
            let (mut set, mut removed) = (0, 0);
            for record in records {
                let key = key(&record);
                if record.label.is_empty() {
                    if table.remove(key.as_str()).ctx(CTX)?.is_some() {
                        removed += 1;
                    }
                } else {
                    table
                        .insert(key.as_str(), Envelope::encode(&record)?)
                        .ctx(CTX)?;
                    set += 1;
                }
            }
            Ok(Put::Done { set, removed })
        })
        .await
    }

    /// Every imported label, by type and reference.
    pub async fn labels(&self) -> Result<Vec<LabelRecord>, StoreError> {
        const CTX: &str = "listing labels";
        self.read(CTX, |tx| {
            let table = tx.open_table(LABELS).ctx(CTX)?;
            let mut out = Vec::new();
            for entry in table.iter().ctx(CTX)? {
                out.push(entry.ctx(CTX)?.1.value().decode()?);
            }
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreConfig;

    fn label(reference: String, label: &str) -> LabelRecord {
        LabelRecord {
            kind: "addr".into(),
            reference,
            label: label.into(),
            origin: None,
            spendable: None,
        }
    }

    #[tokio::test]
    async fn at_most_ten_thousand_labels_are_kept_and_an_import_over_it_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, _) = Store::open_async(&dir.path().join("db.redb"), &StoreConfig::default())
            .await
            .expect("open");
        let all: Vec<LabelRecord> = (0..MAX_LABELS)
            .map(|n| label(format!("a{n}"), "x"))
            .collect();
        assert_eq!(
            store.put_labels(all).await.expect("put"),
            Put::Done {
                set: 10_000,
                removed: 0
            }
        );
        // One more is refused, nothing written; replacing one is not "more".
        assert_eq!(
            store
                .put_labels(vec![label("new".into(), "x"), label("a0".into(), "")])
                .await
                .expect("put"),
            Put::Done { set: 1, removed: 1 },
            "one removed makes room for one"
        );
        assert_eq!(
            store
                .put_labels(vec![label("newer".into(), "x")])
                .await
                .expect("put"),
            Put::TooMany
        );
        let kept = store.labels().await.expect("labels");
        assert_eq!(kept.len(), 10_000);
        assert!(!kept.iter().any(|l| l.reference == "newer"));
        assert!(
            store
                .put_labels(vec![label("a1".into(), "renamed")])
                .await
                .expect("put")
                == Put::Done { set: 1, removed: 0 }
        );
    }
}

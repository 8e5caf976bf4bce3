//! Labels: the owner's names for payments, addresses and transactions, in and out as
//! BIP-329 JSON Lines (`docs/household.md`, "Accounting export").
//!
//! A movement's label is its metadata's `label` (set with `POST
//! /api/v1/history/{id}/metadata`). An imported record is kept in the store whether or
//! not a movement has its reference yet (a fresh address that will be paid), and is
//! written onto the movements that have it now. A movement's references: the Ark and
//! bitcoin addresses it paid or was paid on (`addr`), its Lightning payment hash and any
//! transaction id in its metadata (`tx`).

use bark::movement::{Movement, PaymentMethod};

use crate::engine::{Engine, EngineError};
use crate::store::labels::{LabelRecord, Put};

/// BIP-329's record types.
pub const TYPES: [&str; 6] = ["tx", "addr", "pubkey", "input", "output", "xpub"];
/// The metadata key of a movement's label.
pub const LABEL_KEY: &str = "label";
/// Longest label kept, in characters (BIP-329 suggests truncating at 255).
pub const MAX_LABEL_CHARS: usize = 255;
/// Longest reference accepted, in characters.
const MAX_REF_CHARS: usize = 1_000;
/// Most records one import may hold.
pub const MAX_IMPORT: usize = 10_000;

/// The records of a BIP-329 JSON Lines body (blank lines skipped), or what is wrong,
/// naming the line. A record without a label (or with an empty one) removes the label
/// of its reference; a longer label is cut at [`MAX_LABEL_CHARS`], as BIP-329 asks.
pub fn parse_jsonl(body: &str) -> Result<Vec<LabelRecord>, String> {
    #[derive(serde::Deserialize)]
    struct Line {
        #[serde(rename = "type")]
        kind: String,
        #[serde(rename = "ref")]
        reference: String,
        #[serde(default)]
        label: Option<String>,
        #[serde(default)]
        origin: Option<String>,
        #[serde(default)]
        spendable: Option<bool>,
    }
    let mut out = Vec::new();
    for (n, line) in body.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = n + 1;
        if out.len() == MAX_IMPORT {
            return Err(format!("line {at}: at most {MAX_IMPORT} records at once"));
        }
        let record: Line = serde_json::from_str(line)
            .map_err(|e| format!("line {at}: not a BIP-329 record: {e}"))?;
        if !TYPES.contains(&record.kind.as_str()) {
            return Err(format!(
                "line {at}: type {:?}; one of {}",
                record.kind,
                TYPES.join(", ")
            ));
        }
        if record.reference.is_empty() || record.reference.chars().count() > MAX_REF_CHARS {
            return Err(format!(
                "line {at}: ref must be 1 to {MAX_REF_CHARS} characters"
            ));
        }
        out.push(LabelRecord {
            kind: record.kind,
            reference: record.reference,
            label: record
                .label
                .unwrap_or_default()
                .chars()
                .take(MAX_LABEL_CHARS)
                .collect(),
            origin: record.origin,
            spendable: record.spendable,
        });
    }
    Ok(out)
}

/// A movement's label, if it has one.
pub fn label_of(m: &Movement) -> Option<&str> {
    m.metadata
        .get(LABEL_KEY)
        .and_then(|v| v.as_str())
        .filter(|l| !l.is_empty())
}

/// A movement's references, as BIP-329 (type, ref) pairs.
pub fn refs_of(m: &Movement) -> Vec<(&'static str, String)> {
    let mut refs = Vec::new();
    for d in m.sent_to.iter().chain(&m.received_on) {
        if matches!(
            d.destination,
            PaymentMethod::Ark(_) | PaymentMethod::Bitcoin(_)
        ) {
            refs.push(("addr", d.destination.value_string()));
        }
    }
    for (key, value) in m.metadata.iter() {
        let Some(value) = value.as_str() else {
            continue;
        };
        let hex64 = value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit());
        if hex64 && (key == "payment_hash" || key.ends_with("txid")) {
            refs.push(("tx", value.to_string()));
        }
    }
    refs.sort();
    refs.dedup();
    refs
}

/// What an import did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Imported {
    /// Records kept (set or replaced).
    pub set: usize,
    /// Labels removed (records without a label).
    pub removed: usize,
    /// Movements whose label was written now.
    pub applied: usize,
}

impl Engine {
    pub fn labels(&self) -> Labels<'_> {
        Labels { engine: self }
    }
}

/// The labels, on the engine.
pub struct Labels<'a> {
    engine: &'a Engine,
}

impl Labels<'_> {
    /// Keep `records` and write each onto the movements that have its reference now
    /// (when the wallet is open; the export reads the kept records either way).
    pub async fn import(&self, records: Vec<LabelRecord>) -> Result<Imported, EngineError> {
        let (set, removed) = match self.engine.store.put_labels(records.clone()).await? {
            Put::Done { set, removed } => (set, removed),
            Put::TooMany => {
                return Err(EngineError::InvalidRequest(format!(
                    "at most {} labels are kept",
                    crate::store::labels::MAX_LABELS
                )));
            }
        };
        let mut applied = 0;
        if self.engine.loaded().await.is_ok() {
            for record in &records {
                for id in self.movements_with(&record.kind, &record.reference).await? {
                    let label = if record.label.is_empty() {
                        serde_json::Value::Null
                    } else {
                        serde_json::Value::String(record.label.clone())
                    };
                    let patch = serde_json::json!({ LABEL_KEY: label });
                    if self
                        .engine
                        .ark()
                        .patch_movement_metadata(id, &patch)
                        .await?
                    {
                        applied += 1;
                    }
                }
            }
        }
        Ok(Imported {
            set,
            removed,
            applied,
        })
    }

    /// The movements that have a reference, found through the store's indexes: an
    /// address's payments, a Lightning payment hash's send.
    async fn movements_with(&self, kind: &str, reference: &str) -> Result<Vec<u32>, EngineError> {
        match kind {
            "addr" => {
                let method = PaymentMethod::from_type_value("ark", reference)
                    .or_else(|_| PaymentMethod::from_type_value("bitcoin", reference));
                let Ok(method) = method else {
                    return Ok(Vec::new());
                };
                Ok(self
                    .engine
                    .reads()
                    .history(Some(&method))
                    .await?
                    .iter()
                    .map(|m| m.id.0)
                    .collect())
            }
            "tx" => {
                let Ok(hash) = reference.parse::<ark::lightning::PaymentHash>() else {
                    return Ok(Vec::new());
                };
                Ok(self
                    .engine
                    .lightning()
                    .send_movement(hash)
                    .await?
                    .map(|m| m.id.0)
                    .into_iter()
                    .collect())
            }
            _ => Ok(Vec::new()),
        }
    }

    /// The imported records.
    pub async fn kept(&self) -> Result<Vec<LabelRecord>, EngineError> {
        Ok(self.engine.store.labels().await?)
    }

    /// Every label as BIP-329 records: each labelled movement's, one per reference
    /// (its label wins), then (`with_kept`) the kept records no movement covered.
    pub async fn export(
        &self,
        movements: &[Movement],
        with_kept: bool,
    ) -> Result<Vec<LabelRecord>, EngineError> {
        let mut out = Vec::new();
        let mut covered = std::collections::HashSet::new();
        for m in movements {
            let Some(label) = label_of(m) else {
                continue;
            };
            for (kind, reference) in refs_of(m) {
                if covered.insert((kind.to_string(), reference.clone())) {
                    out.push(LabelRecord {
                        kind: kind.into(),
                        reference,
                        label: label.to_string(),
                        origin: None,
                        spendable: None,
                    });
                }
            }
        }
        if !with_kept {
            return Ok(out);
        }
        for record in self.kept().await? {
            if !covered.contains(&(record.kind.clone(), record.reference.clone())) {
                out.push(record);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bip329_body_is_read_line_by_line_and_a_bad_line_is_named() {
        let body = "{\"type\":\"addr\",\"ref\":\"bc1qxy\",\"label\":\"Savings\",\"spendable\":true}\n\n\
                    {\"type\":\"tx\",\"ref\":\"ab\",\"label\":\"Rent\",\"origin\":\"wpkh([d34db33f/84'/0'/0'])\"}\n\
                    {\"type\":\"addr\",\"ref\":\"bc1qzz\"}";
        let records = parse_jsonl(body).expect("parse");
        assert_eq!(records.len(), 3);
        assert_eq!(records[0].label, "Savings");
        assert_eq!(records[0].spendable, Some(true));
        assert_eq!(
            records[1].origin.as_deref(),
            Some("wpkh([d34db33f/84'/0'/0'])")
        );
        assert_eq!(records[2].label, "", "no label: a removal");
        let long = format!(
            "{{\"type\":\"tx\",\"ref\":\"ab\",\"label\":\"{}\"}}",
            "é".repeat(300)
        );
        assert_eq!(
            parse_jsonl(&long).expect("parse")[0].label.chars().count(),
            MAX_LABEL_CHARS
        );
        let bad =
            parse_jsonl("{\"type\":\"addr\",\"ref\":\"x\"}\n{\"type\":\"utxo\",\"ref\":\"y\"}")
                .expect_err("a bad type");
        assert!(bad.starts_with("line 2: type \"utxo\""), "{bad}");
        let bad = parse_jsonl("not json").expect_err("not json");
        assert!(bad.starts_with("line 1: not a BIP-329 record"), "{bad}");
        let bad = parse_jsonl("{\"type\":\"addr\",\"ref\":\"\"}").expect_err("empty ref");
        assert!(bad.contains("ref must be"), "{bad}");
        let line = "{\"type\":\"addr\",\"ref\":\"a\",\"label\":\"x\"}\n";
        assert_eq!(
            parse_jsonl(&line.repeat(MAX_IMPORT))
                .expect("at the bound")
                .len(),
            MAX_IMPORT
        );
        let over = parse_jsonl(&line.repeat(MAX_IMPORT + 1)).expect_err("one over");
        assert!(over.starts_with("line 10001: at most 10000"), "{over}");
    }
}

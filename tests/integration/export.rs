//! The accounting export on the real binary (`api::v1::export`, `engine::labels`):
//! BIP-329 labels imported (the owner only), kept for references no movement has yet,
//! exported again as they came; a bad line refused by number; the history as CSV read
//! back by Python's `csv` module, as a spreadsheet would read it. Movements with labels,
//! devices and fees in the CSV are on the regtest stack (`tests/e2e/household.rs`).

use serde_json::{Value, json};

use crate::harness::*;

#[test]
fn labels_go_in_and_out_as_bip329_and_the_history_reads_as_csv() {
    let (_tmp, datadir, daemon, admin) = berthd_with_offline_wallet("", &[]);
    let (phone, _) = pair_device(&daemon, &datadir, "read,receive,send");
    let fresh = foreign_ark_address();
    let body = format!(
        "{}\n\n{}\n",
        json!({"type": "addr", "ref": fresh, "label": "Pocket money", "spendable": true}),
        json!({"type": "tx", "ref": "f".repeat(64), "label": "Rent", "origin": "wpkh([d34db33f/84'/0'/0'])"}),
    );
    let import = |bearer: &str, body: &str| {
        request(
            daemon.port,
            "POST",
            "/api/v1/import/labels",
            &[
                ("Authorization", bearer),
                ("Content-Type", "application/jsonl"),
            ],
            Some(body),
        )
    };
    let (status, _) = import(&phone, &body);
    assert_eq!(status, 403, "only the owner imports");
    let (status, raw) = import(&admin, &body);
    assert_eq!(status, 200, "{raw}");
    assert_eq!(
        json_of(&raw),
        json!({"set": 2, "removed": 0, "applied": 0}),
        "kept, though no movement has them yet"
    );
    let (status, raw) = import(
        &admin,
        "{\"type\":\"addr\",\"ref\":\"a\",\"label\":\"x\"}\n{\"type\":\"utxo\",\"ref\":\"b\"}",
    );
    assert_eq!(status, 400, "{raw}");
    assert!(
        json_of(&raw)["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("line 2"),
        "{raw}"
    );

    // Out again, as they came (a device with the read scope may export).
    let (status, raw) = request(
        daemon.port,
        "GET",
        "/api/v1/export/labels.jsonl",
        &[("Authorization", &phone)],
        None,
    );
    assert_eq!(status, 200, "{raw}");
    assert!(
        raw.to_lowercase()
            .contains("content-type: application/jsonl"),
        "{raw}"
    );
    let mut lines: Vec<Value> = body_of(&raw)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    lines.sort_by_key(|l| l["type"].as_str().unwrap_or_default().to_string());
    assert_eq!(
        lines,
        vec![
            json!({"type": "addr", "ref": fresh, "label": "Pocket money", "spendable": true}),
            json!({"type": "tx", "ref": "f".repeat(64), "label": "Rent", "origin": "wpkh([d34db33f/84'/0'/0'])"}),
        ]
    );
    // A record without a label removes it.
    let (status, raw) = import(
        &admin,
        &json!({"type": "tx", "ref": "f".repeat(64)}).to_string(),
    );
    assert_eq!(status, 200, "{raw}");
    assert_eq!(json_of(&raw)["removed"], 1, "{raw}");

    // The history as CSV: a header row a CSV reader takes as is (no movements here).
    let (status, raw) = request(
        daemon.port,
        "GET",
        "/api/v1/export/history.csv",
        &[("Authorization", &phone)],
        None,
    );
    assert_eq!(status, 200, "{raw}");
    assert!(
        raw.to_lowercase().contains("content-type: text/csv"),
        "{raw}"
    );
    let read = python_csv(body_of(&raw));
    assert_eq!(
        read["columns"],
        json!([
            "id",
            "created_at",
            "completed_at",
            "status",
            "kind",
            "amount_sat",
            "fee_sat",
            "balance_change_sat",
            "destination",
            "device",
            "label",
            "references"
        ])
    );
    assert_eq!(read["rows"], json!([]));
}

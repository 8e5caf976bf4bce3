//! Pages of the history, the VTXO list and the exits' list through the real `berthd` (the `limit`
//! and `cursor` extension): every item exactly once, in order, with a `Next-Cursor`
//! header while more follow, and the whole list unchanged without parameters.
//!
//! The wallet must be loaded, so this needs `BITCOIND_EXEC` (its chain source) and is
//! `#[ignore]`d, run by `scripts/e2e`; the movements and VTXOs are put in its store
//! through the store API while it is stopped.

use crate::harness;

use ark::test_util::VTXO_VECTORS;
use bark::persist::BarkPersister;
use bark::vtxo::VtxoState;
use serde_json::Value;

use harness::*;

fn next_cursor(raw: &str) -> Option<String> {
    raw.split("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("next-cursor")
                .then(|| value.trim().to_string())
        })
}

/// Follow `path` page by page (`limit` each); every page's items by `key`.
fn pages(daemon: &Daemon, bearer: &str, path: &str, limit: u32, key: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = match &cursor {
            None => format!("{path}{sep}limit={limit}"),
            Some(c) => format!("{path}{sep}limit={limit}&cursor={c}"),
        };
        let (status, raw) = daemon.get(&url, &[("Authorization", bearer)]);
        assert_eq!(status, 200, "{url}: {raw}");
        let items: Vec<String> = json_of(&raw)
            .as_array()
            .expect("array")
            .iter()
            .map(|i| match &i[key] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        out.push(items);
        cursor = next_cursor(&raw);
        if cursor.is_none() {
            return out;
        }
        assert!(out.len() < 100, "pages never end");
    }
}

#[test]
#[ignore = "needs BITCOIND_EXEC: run scripts/e2e"]
fn history_and_vtxos_come_in_pages_without_gaps_or_repeats() {
    let bitcoind = Bitcoind::start("history_and_vtxos_come_in_pages");
    let (_tmp, datadir) = datadir_with_wallet(&bitcoind);
    with_store(&datadir, async |store| {
        for _ in 0..25 {
            new_movement(store, "page").await;
        }
        let v = &VTXO_VECTORS;
        store
            .store_vtxos(&[
                (&v.board_vtxo, &VtxoState::Spendable),
                (&v.round1_vtxo, &VtxoState::Spendable),
                (&v.round2_vtxo, &VtxoState::Spendable),
            ])
            .await
            .expect("vtxos");
        crate::common::big_wallet::fill_exits(store, 5).await;
    });
    // No waiting for the load: the first request that needs the wallet waits for it.
    let daemon = Daemon::start(&datadir, &[]);
    let bearer = format!("Bearer {}", token(&datadir));
    let auth = [("Authorization", bearer.as_str())];

    for path in [
        "/api/v1/history",
        "/api/v1/wallet/movements",
        "/api/v1/wallet/history",
    ] {
        let got = pages(&daemon, &bearer, path, 10, "id");
        let expected: Vec<Vec<String>> = [(16, 25), (6, 15), (1, 5)]
            .into_iter()
            .map(|(low, high)| (low..=high).rev().map(|i: u32| i.to_string()).collect())
            .collect();
        assert_eq!(got, expected, "{path}: three pages, newest first");
        let (_, raw) = daemon.get(path, &auth);
        assert!(next_cursor(&raw).is_none(), "no pages without limit");
        assert_eq!(
            json_of(&raw).as_array().map(Vec::len),
            Some(25),
            "the whole list"
        );
    }

    let all_vtxos: Vec<String> = json_of(&daemon.get("/api/v1/wallet/vtxos", &auth).1)
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v["id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(all_vtxos.len(), 3);
    let paged: Vec<String> = pages(&daemon, &bearer, "/api/v1/wallet/vtxos", 2, "id")
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(paged, all_vtxos, "the same VTXOs in the same order");

    // A page is kept as sent until the wallet's database changes (api::v1::page_cache):
    // the same page again, then a write (bark's metadata update of the newest movement),
    // then the page must show it, on all three paths.
    let first = |path: &str| json_of(&daemon.get(&format!("{path}?limit=10"), &auth).1);
    let before = first("/api/v1/history");
    assert_eq!(first("/api/v1/history"), before, "a page asked twice");
    assert!(before[0]["metadata"]["label"].is_null());
    let (status, raw) = daemon.post(
        "/api/v1/history/25/metadata",
        &[("Authorization", bearer.as_str())],
        r#"{"label":"kept pages never go stale"}"#,
    );
    assert_eq!(status, 200, "{raw}");
    for path in [
        "/api/v1/history",
        "/api/v1/wallet/movements",
        "/api/v1/wallet/history",
    ] {
        let page = first(path);
        assert_eq!(
            page[0]["metadata"]["label"], "kept pages never go stale",
            "{path}: the page after the write"
        );
    }

    // The exits' lists: in pages too, and kept as sent until the store changes: an exit
    // started now is in the next list.
    let exit_ids = |path: &str| -> Vec<String> {
        json_of(&daemon.get(path, &auth).1)
            .as_array()
            .expect("array")
            .iter()
            .map(|e| e["vtxo_id"].as_str().expect("vtxo_id").to_string())
            .collect()
    };
    let all_exits = exit_ids("/api/v1/exits/status/all");
    assert_eq!(all_exits.len(), 5);
    assert_eq!(
        exit_ids("/api/v1/exits/status/all"),
        all_exits,
        "asked twice"
    );
    assert_eq!(exit_ids("/api/v1/exits/status/finished"), all_exits);
    assert!(exit_ids("/api/v1/exits/status/live").is_empty());
    let paged = pages(
        &daemon,
        &bearer,
        "/api/v1/exits/status/all?history=true",
        2,
        "vtxo_id",
    );
    assert_eq!(paged.len(), 3, "5 exits, 2 a page");
    assert_eq!(
        paged.concat(),
        all_exits,
        "the same exits in the same order"
    );
    let board = VTXO_VECTORS.board_vtxo.id().to_string();
    let (status, raw) = daemon.post(
        "/api/v1/exits/start/vtxos",
        &auth,
        &format!(r#"{{"vtxos":["{board}"]}}"#),
    );
    assert_eq!(status, 200, "{raw}");
    let after = exit_ids("/api/v1/exits/status/all");
    assert_eq!(after.len(), 6, "the started exit is listed: {after:?}");
    assert!(after.contains(&board));
    assert_eq!(exit_ids("/api/v1/exits/status/live"), vec![board]);

    for bad in [
        "/api/v1/exits/status/all?limit=0",
        "/api/v1/exits/status/live?limit=2&cursor=nosuch",
        "/api/v1/history?limit=0",
        "/api/v1/history?limit=1001",
        "/api/v1/history?limit=5&cursor=zz",
        "/api/v1/wallet/vtxos?limit=2&cursor=nosuch",
        "/api/v1/onchain/transactions?limit=-1",
    ] {
        let (status, raw) = daemon.get(bad, &auth);
        assert_eq!(status, 400, "{bad}: {raw}");
    }
}

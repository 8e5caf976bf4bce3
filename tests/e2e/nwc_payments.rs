//! Scenario: an app pays and is paid over Nostr Wallet Connect, with real Lightning
//! nodes. berthd reaches a real relay (`nostr-relay`, on loopback, allowed by the
//! egress policy); the app is Alby's SDK (`tests/nwc/client.mjs`). `make_invoice` is
//! paid by the outside node and `lookup_invoice` sees it settled; `pay_invoice` of the
//! outside node's invoices returns their preimages and takes from the budget; the
//! history and `GET /api/v1/nwc/connections` agree; apps hear `payment_received` and
//! `payment_sent` (under NIP-44 and NIP-04); `list_transactions` is the history's
//! Lightning part; the history and the events name the connection; berthd killed
//! while a payment is under way answers it once after the restart, paid once;
//! `multi_pay_invoice` pays each invoice and answers each with its `d` tag; above the
//! owner's rules for the connection a payment waits, and the owner's approval pays it
//! once and answers the app. Prints
//! the latency of `get_balance` and `pay_invoice` through the relay.

use std::time::Instant;

use serde_json::{Value, json};

use crate::harness::nwc::{Relay, Tools, wait_for_info};
use crate::lightning_payments::preimage_matches;
use crate::stack::{Stack, wait_for};

const TEST: &str = "nwc_payments::an_app_pays_and_is_paid_over_nostr_wallet_connect";
/// The stack's directory name (PostgreSQL's socket path must stay short).
const STACK: &str = "nwc_payments";

/// The p-th percentile (0 to 100) of `ms`, nearest rank.
fn percentile(ms: &[f64], p: usize) -> f64 {
    let mut sorted = ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// How many Lightning payments of `hash` the wallet's history has.
fn lightning_sends(berthd: &crate::stack::Berthd, hash: &str) -> usize {
    berthd
        .get_ok("/api/v1/history")
        .as_array()
        .expect("history")
        .iter()
        .filter(|m| {
            m["subsystem"]["name"] == "bark.lightning_send" && m["metadata"]["payment_hash"] == hash
        })
        .count()
}

fn result(answer: &Value) -> &Value {
    assert!(answer["error"].is_null(), "{answer}");
    &answer["result"]
}

#[test]
#[ignore = "needs the regtest stack with Core Lightning: run scripts/e2e"]
fn an_app_pays_and_is_paid_over_nostr_wallet_connect() {
    let Some(tools) = Tools::find(TEST) else {
        return;
    };
    let Some(stack) = Stack::start_with_lightning(STACK) else {
        return;
    };
    let started = Instant::now();
    let ln = stack.ln();
    let relay = Relay::start(&tools);
    let alice = stack.berthd_with(
        "alice",
        &format!(
            "[egress]\nallow = [\"127.0.0.1\"]\n\n[nwc]\nrelays = [\"{}\"]\n",
            relay.url()
        ),
    );
    crate::board_and_confirm(&stack, &alice, 1_000_000);
    stack.lightning_at_tip();
    let created = alice.post_ok(
        "/api/v1/nwc/connections",
        json!({ "name": "Alby Go", "budget_sat": 200_000, "budget_renewal": "daily" }),
    );
    let uri = created["uri"].as_str().expect("uri").to_string();
    wait_for_info(&tools, &uri);

    // Two apps listening for the wallet's notifications, one under NIP-44 (kind
    // 23197) and one that speaks only NIP-04 (23196).
    let heard = tools.listen(&uri, 6, 300_000, false);
    let heard_nip04 = tools.listen(&uri, 1, 300_000, true);

    // Receive: the app makes an invoice, the outside node pays it, and the app sees it
    // settled with its preimage.
    let made = tools.call(
        &uri,
        "make_invoice",
        json!({ "amount": 30_000_000, "description": "nwc e2e" }),
    );
    let made = result(&made);
    let bolt11 = made["invoice"].as_str().expect("invoice").to_string();
    let hash = made["payment_hash"].as_str().expect("hash").to_string();
    assert_eq!(made["amount"], 30_000_000, "{made}");
    std::thread::scope(|scope| {
        let payer = scope.spawn(|| ln.external.pay(&bolt11));
        let settled = wait_for("the invoice to settle", 120, || {
            let looked = tools.call(&uri, "lookup_invoice", json!({ "payment_hash": hash }));
            (looked["result"]["state"] == "settled").then_some(looked)
        });
        let preimage = settled["result"]["preimage"].as_str().expect("preimage");
        assert!(preimage_matches(preimage, &hash), "{settled}");
        assert_eq!(settled["result"]["type"], "incoming", "{settled}");
        payer
            .join()
            .expect("payer thread")
            .expect("the outside node paid");
    });

    // Pay: five invoices of the outside node, each answered with its preimage once
    // it settled, each taken from the budget.
    let mut pay_ms = Vec::new();
    let mut sent = Vec::new();
    for i in 0..5 {
        let label = format!("nwc-{i}");
        let (invoice, hash) = ln.external.invoice(Some(10_000_000), &label);
        // The app's metadata (a LUD-12 comment), kept with the payment.
        let paid = tools.call(
            &uri,
            "pay_invoice",
            json!({ "invoice": invoice, "metadata": { "comment": format!("coffee {i}") } }),
        );
        let preimage = result(&paid)["preimage"].as_str().expect("preimage");
        assert!(preimage_matches(preimage, &hash), "{paid}");
        assert_eq!(ln.external.invoice_status(&label), "paid");
        pay_ms.push(paid["ms"].as_f64().expect("ms"));
        // Paid: it is in the history, as any payment.
        let lookup = tools.call(&uri, "lookup_invoice", json!({ "payment_hash": hash }));
        assert_eq!(result(&lookup)["type"], "outgoing", "{lookup}");
        assert_eq!(result(&lookup)["state"], "settled", "{lookup}");
        sent.push(hash);
    }
    let budget = tools.call(&uri, "get_budget", json!({}));
    assert_eq!(result(&budget)["used_budget"], 50_000_000, "{budget}");
    let listed = alice.get_ok("/api/v1/nwc/connections");
    assert_eq!(listed[0]["spent_total_sat"], 50_000, "{listed}");
    assert_eq!(listed[0]["payments"], 5, "{listed}");
    assert_eq!(listed[0]["budget"]["used_sat"], 50_000, "{listed}");
    let sends = alice
        .get_ok("/api/v1/history")
        .as_array()
        .expect("history")
        .iter()
        .filter(|m| m["subsystem"]["name"] == "bark.lightning_send" && m["status"] == "successful")
        .count();
    assert_eq!(sends, 5, "the five payments are in the history");

    // Every app granted notifications heard each payment once: the one received, then
    // the five sent, in order, with what they were.
    let notes = heard.collected();
    let kinds: Vec<&str> = notes
        .iter()
        .filter_map(|n| n["notification_type"].as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "payment_received",
            "payment_sent",
            "payment_sent",
            "payment_sent",
            "payment_sent",
            "payment_sent"
        ],
        "{notes:?}"
    );
    let received = &notes[0]["notification"];
    assert_eq!(received["payment_hash"], hash.as_str(), "{received}");
    assert_eq!(received["amount"], 30_000_000, "{received}");
    assert_eq!(received["state"], "settled", "{received}");
    assert!(
        preimage_matches(received["preimage"].as_str().unwrap_or_default(), &hash),
        "{received}"
    );
    for (note, hash) in notes[1..].iter().zip(&sent) {
        let paid = &note["notification"];
        assert_eq!(paid["payment_hash"], hash.as_str(), "{paid}");
        assert_eq!(paid["type"], "outgoing", "{paid}");
        assert_eq!(paid["amount"], 10_000_000, "{paid}");
        assert!(paid["settled_at"].as_i64().is_some(), "{paid}");
    }
    let notes_nip04 = heard_nip04.collected();
    assert_eq!(notes_nip04.len(), 1, "{notes_nip04:?}");
    assert_eq!(notes_nip04[0]["notification_type"], "payment_received");
    assert_eq!(
        notes_nip04[0]["notification"]["payment_hash"],
        hash.as_str()
    );

    // list_transactions is the history's Lightning part, newest first.
    let history = alice.get_ok("/api/v1/history");
    let mut lightning: Vec<(i64, String)> = history
        .as_array()
        .expect("history")
        .iter()
        .filter(|m| {
            m["status"] == "successful"
                && (m["subsystem"]["name"] == "bark.lightning_send"
                    || m["subsystem"]["name"] == "bark.lightning_receive")
        })
        .map(|m| {
            let at = chrono::DateTime::parse_from_rfc3339(
                m["time"]["created_at"].as_str().expect("created_at"),
            )
            .expect("time")
            .timestamp();
            (
                at,
                m["metadata"]["payment_hash"]
                    .as_str()
                    .expect("hash")
                    .to_string(),
            )
        })
        .collect();
    lightning.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    let listed = tools.call(&uri, "list_transactions", json!({}));
    let transactions = result(&listed)["transactions"]
        .as_array()
        .expect("transactions")
        .clone();
    let hashes: Vec<&str> = transactions
        .iter()
        .filter_map(|t| t["payment_hash"].as_str())
        .collect();
    assert_eq!(hashes.len(), 6, "{listed}");
    let mut expected: Vec<&str> = lightning.iter().map(|(_, h)| h.as_str()).collect();
    let mut got = hashes.clone();
    expected.sort_unstable();
    got.sort_unstable();
    assert_eq!(got, expected, "the same payments as the history");
    let times: Vec<i64> = transactions
        .iter()
        .filter_map(|t| t["created_at"].as_i64())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {listed}"
    );
    let first = transactions
        .iter()
        .find(|t| t["payment_hash"] == sent[0].as_str())
        .expect("the first payment");
    assert_eq!(first["metadata"]["comment"], "coffee 0", "{first}");
    assert_eq!(
        first["fees_paid"].as_u64().map(|f| f % 1000),
        Some(0),
        "{first}"
    );
    let outgoing = tools.call(&uri, "list_transactions", json!({ "type": "outgoing" }));
    assert_eq!(
        result(&outgoing)["transactions"].as_array().map(Vec::len),
        Some(5)
    );
    let page = tools.call(
        &uri,
        "list_transactions",
        json!({ "limit": 2, "offset": 1 }),
    );
    let page_hashes: Vec<&str> = result(&page)["transactions"]
        .as_array()
        .expect("page")
        .iter()
        .filter_map(|t| t["payment_hash"].as_str())
        .collect();
    assert_eq!(page_hashes, hashes[1..3], "{page}");

    // The history and the event log say which connection paid.
    let movement = history
        .as_array()
        .expect("history")
        .iter()
        .find(|m| m["metadata"]["payment_hash"] == sent[0].as_str())
        .expect("the movement");
    assert_eq!(
        movement["metadata"]["nwc"]["connection"], "Alby Go",
        "{movement}"
    );
    assert_eq!(
        movement["metadata"]["nwc"]["metadata"]["comment"], "coffee 0",
        "{movement}"
    );
    let (_, events) =
        alice.get("/api/v1/notifications/wait?after=0&timeout=0&types=movement-updated");
    assert!(
        events["notifications"]
            .as_array()
            .is_some_and(|n| n.iter().any(|e| {
                e["movement"]["metadata"]["payment_hash"] == sent[0].as_str()
                    && e["movement"]["metadata"]["nwc"]["connection"] == "Alby Go"
            })),
        "an event names the connection: {events}"
    );

    // berthd killed while a payment is under way (the outside node holds its HTLC):
    // after the restart the app's request is answered once, with the preimage, and
    // the payee was paid once.
    let preimage = [0x5a_u8; 32];
    let held_hash = {
        use bitcoin::hashes::{Hash, sha256};
        sha256::Hash::hash(&preimage).to_string()
    };
    let held = ln.external.rpc(
        "holdinvoice",
        json!({ "payment_hash": held_hash, "amount": 20_000_000 }),
    )["bolt11"]
        .as_str()
        .expect("bolt11")
        .to_string();
    let hold_state = || {
        ln.external.rpc("listholdinvoices", json!({ "payment_hash": held_hash }))["holdinvoices"]
            [0]["state"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let mut alice = alice;
    let killed_at = std::thread::scope(|scope| {
        let app = scope.spawn(|| {
            tools.raw(
                &uri,
                "pay_invoice",
                json!({ "invoice": held }),
                json!({ "wait_ms": 180_000, "until": 1 }),
            )
        });
        wait_for("the outside node to hold the payment", 120, || {
            (hold_state() == "accepted").then_some(())
        });
        alice.kill();
        let killed_at = Instant::now();
        alice.restart();
        ln.external.rpc(
            "settleholdinvoice",
            json!({ "preimage": bitcoin::hex::DisplayHex::to_lower_hex_string(&preimage[..]) }),
        );
        let answered = app.join().expect("app thread");
        let responses = answered["responses"].as_array().expect("responses");
        assert_eq!(responses.len(), 1, "answered once: {answered}");
        let paid = result(&responses[0]);
        assert!(
            preimage_matches(paid["preimage"].as_str().expect("preimage"), &held_hash),
            "{answered}"
        );
        killed_at
    });
    assert_eq!(hold_state(), "paid");
    let listed = alice.get_ok("/api/v1/nwc/connections");
    assert_eq!(listed[0]["payments"], 6, "begun once: {listed}");
    assert_eq!(listed[0]["spent_total_sat"], 70_000, "{listed}");
    let held_sends = lightning_sends(&alice, &held_hash);
    assert_eq!(held_sends, 1, "paid once");
    println!(
        "nwc: a payment under way when berthd was killed: answered within {:.1} s of the kill",
        killed_at.elapsed().as_secs_f64()
    );

    // Several invoices at once, as older clients send them: each paid and answered
    // with its own `d` tag; /metrics counts them with the connection's name.
    let (one, one_hash) = ln.external.invoice(Some(5_000_000), "nwc-multi-1");
    let (two, two_hash) = ln.external.invoice(Some(5_000_000), "nwc-multi-2");
    let multi = tools.call(
        &uri,
        "multi_pay_invoice",
        json!({ "invoices": [{ "id": "one", "invoice": one }, { "invoice": two }] }),
    );
    let paid = result(&multi)["invoices"]
        .as_array()
        .expect("invoices")
        .clone();
    assert_eq!(paid.len(), 2, "{multi}");
    for (d, hash) in [("one", &one_hash), (two_hash.as_str(), &two_hash)] {
        let answer = paid
            .iter()
            .find(|p| p["dTag"] == d)
            .unwrap_or_else(|| panic!("no answer for {d}: {multi}"));
        assert!(
            preimage_matches(answer["preimage"].as_str().unwrap_or_default(), hash),
            "{multi}"
        );
    }
    assert_eq!(ln.external.invoice_status("nwc-multi-1"), "paid");
    assert_eq!(ln.external.invoice_status("nwc-multi-2"), "paid");
    let listed = alice.get_ok("/api/v1/nwc/connections");
    assert_eq!(listed[0]["payments"], 8, "{listed}");
    assert_eq!(listed[0]["spent_total_sat"], 80_000, "{listed}");
    let authorization = alice.authorization();
    let (_, metrics) = crate::harness::request(
        alice.port(),
        "GET",
        "/metrics",
        &[("Authorization", &authorization)],
        None,
    );
    let id = listed[0]["id"].as_str().expect("id");
    for line in [
        format!("berth_nwc_payments_total{{id=\"{id}\",connection=\"Alby Go\"}} 8"),
        format!("berth_nwc_paid_sats_total{{id=\"{id}\",connection=\"Alby Go\"}} 80000"),
    ] {
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }

    // The owner's rules on the connection: above 10,000 sat a payment waits for the
    // owner. The app (Alby's SDK, still waiting) gets the preimage once the owner
    // approves; the payee is paid once, and the approval records the app's answer.
    let id = id.to_string();
    let (status, _, set) = alice.call_with(
        "PUT",
        &format!("/api/v1/nwc/connections/{id}/rules"),
        Some(json!({ "max_payment_sat": 10_000, "over_limit": "approve" })),
        &[],
    );
    assert_eq!(status, 200, "{set}");
    let (big, big_hash) = ln.external.invoice(Some(15_000_000), "nwc-approved");
    std::thread::scope(|scope| {
        let app = scope.spawn(|| tools.call(&uri, "pay_invoice", json!({ "invoice": big })));
        let waiting = wait_for("the app's payment to wait for the owner", 60, || {
            let all = alice.get_ok("/api/v1/approvals");
            all.as_array()?
                .iter()
                .find(|a| a["state"] == "pending")
                .cloned()
        });
        assert_eq!(waiting["device_id"], format!("nwc:{id}"), "{waiting}");
        assert_eq!(waiting["amount_sat"], 15_000, "{waiting}");
        assert_eq!(ln.external.invoice_status("nwc-approved"), "unpaid");
        let approval = waiting["id"].as_str().expect("id");
        let ran = alice.post_ok(&format!("/api/v1/approvals/{approval}/approve"), json!({}));
        assert_eq!(ran["state"], "executed", "{ran}");
        let paid = app.join().expect("app thread");
        let preimage = result(&paid)["preimage"].as_str().expect("preimage");
        assert!(preimage_matches(preimage, &big_hash), "{paid}");
        // Paid while the approve call ran (200, the preimage), or still under way
        // then (202): the app is answered when it ends.
        let recorded = alice.get_ok(&format!("/api/v1/approvals/{approval}"));
        match recorded["result"]["status"].as_u64() {
            Some(200) => assert_eq!(
                recorded["result"]["body"]["result"]["preimage"], preimage,
                "{recorded}"
            ),
            Some(202) => {}
            _ => panic!("the approval's result: {recorded}"),
        }
    });
    assert_eq!(ln.external.invoice_status("nwc-approved"), "paid");
    let approved_sends = lightning_sends(&alice, &big_hash);
    assert_eq!(approved_sends, 1, "paid once");

    // What an app waits for, through the relay on loopback.
    let balance = tools.client(&["bench", &uri, "get_balance", "25"]);
    let balance_ms: Vec<f64> = balance["ms"]
        .as_array()
        .expect("ms")
        .iter()
        .filter_map(Value::as_f64)
        .collect();
    assert_eq!(balance_ms.len(), 25, "{balance}");
    let spendable = result(&tools.call(&uri, "get_balance", json!({})))["balance"].clone();
    let api = alice.get_ok("/api/v1/wallet/balance");
    assert_eq!(
        spendable.as_u64(),
        api["spendable_sat"].as_u64().map(|s| s * 1000),
        "NWC's balance is the API's spendable, in msat: {api}"
    );
    println!(
        "nwc: get_balance p50 {:.1} ms p95 {:.1} ms (25 requests); pay_invoice p50 {:.0} ms \
         p95 {:.0} ms (5 payments of 10,000 sat); scenario {:.0} s",
        percentile(&balance_ms, 50),
        percentile(&balance_ms, 95),
        percentile(&pay_ms, 50),
        percentile(&pay_ms, 95),
        started.elapsed().as_secs_f64()
    );
    drop(relay);
}

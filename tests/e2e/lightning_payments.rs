//! Scenario 15: Lightning over real nodes (`crate::lightning`): the Ark server pays
//! and receives through its Core Lightning node, which has a channel to a node
//! outside. berthd pays that node's invoices (with an amount, amountless with
//! `amount_sat`), its BOLT12 offer, and an LNURL-pay link served on loopback (comments
//! checked and delivered), through `lightning/pay` and `wallet/send`; is paid by it
//! (an invoice, and one whose funds go to another wallet's Ark address); cancels an
//! unpaid receive, and sees an unroutable
//! payment fail with its funds returned. Each step checks balances, the history and
//! the notifications, not only status codes, and the payment and receive latencies
//! are measured over 20 of each.

use std::time::{Duration, Instant};

use bitcoin::hashes::{Hash as _, sha256};
use serde_json::{Value, json};

use crate::stack::{Berthd, Stack, wait_for};
use crate::{board_and_confirm, harness};

const TEST: &str = "lightning_pays_and_receives_over_real_nodes";

fn spendable(berthd: &Berthd) -> i64 {
    berthd.get_ok("/api/v1/wallet/balance")["spendable_sat"]
        .as_i64()
        .expect("spendable_sat")
}

/// The newest event id (a cursor to read what comes after).
fn last_event(berthd: &Berthd) -> u64 {
    berthd.get_ok("/api/v1/notifications/wait?timeout=0&types=movement-created")["last_event_id"]
        .as_u64()
        .unwrap_or(0)
}

/// The notifications after event `after` until `done` holds (long-poll, as a phone
/// app follows them).
fn notifications_after(berthd: &Berthd, after: u64, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut cursor = after;
    let mut seen = Vec::new();
    while !done(&seen) {
        assert!(
            Instant::now() < deadline,
            "{}: notifications never got there: {seen:?}",
            berthd.name
        );
        let answer = berthd.get_ok(&format!(
            "/api/v1/notifications/wait?after={cursor}&timeout=5"
        ));
        seen.extend(
            answer["notifications"]
                .as_array()
                .expect("array")
                .iter()
                .cloned(),
        );
        cursor = answer["last_event_id"].as_u64().unwrap_or(cursor);
    }
    seen
}

/// The movement of `subsystem` whose notifications reached `status`.
fn movement_reached(seen: &[Value], subsystem: &str, status: &str) -> Option<Value> {
    seen.iter()
        .map(|n| &n["movement"])
        .find(|m| m["subsystem"]["name"] == subsystem && m["status"] == status)
        .cloned()
}

pub(crate) fn preimage_matches(preimage: &str, hash: &str) -> bool {
    let bytes: Vec<u8> = bitcoin::hex::FromHex::from_hex(preimage).expect("hex preimage");
    sha256::Hash::hash(&bytes).to_string() == hash
}

/// Follow the send of `hash` until it is paid (as a client polls it); the send.
fn wait_paid(berthd: &Berthd, hash: &str, what: &str) -> Value {
    wait_for(what, 120, || {
        let send = berthd.get_ok(&format!("/api/v1/lightning/sends/{hash}"));
        (send["state"] == "paid").then_some(send)
    })
}

/// Pay `invoice` and follow the send until it is paid; the final send and how long it
/// took.
fn pay_and_settle(alice: &Berthd, body: Value, hash: &str) -> (Value, Value, Duration) {
    let started = Instant::now();
    let paid = alice.post_ok("/api/v1/lightning/pay", body);
    assert_eq!(paid["payment_hash"], hash, "{paid}");
    let send = poll_fast("the payment to settle", || {
        let send = alice.get_ok(&format!("/api/v1/lightning/sends/{hash}"));
        (send["state"] == "paid").then_some(send)
    });
    (paid, send, started.elapsed())
}

/// Poll `check` every 20 ms (a latency is measured by it) for at most 120 s.
fn poll_fast<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn percentile(sorted: &[Duration], p: usize) -> f64 {
    let at = (sorted.len() * p)
        .div_ceil(100)
        .saturating_sub(1)
        .min(sorted.len() - 1);
    sorted[at].as_secs_f64()
}

#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn lightning_pays_and_receives_over_real_nodes() {
    let Some(stack) = Stack::start_with_lightning(TEST) else {
        return;
    };
    let started = Instant::now();
    let ln = stack.ln();
    // The LNURL server runs on loopback: the owner allows it (the egress policy refuses
    // the home network and the box itself by default, tests/integration/egress.rs).
    let alice = stack.berthd_with("alice", "[egress]\nallow = [\"127.0.0.1\"]\n");
    board_and_confirm(&stack, &alice, 2_000_000);
    stack.lightning_at_tip();

    // An invoice with an amount: paid, the preimage matches, the payee saw it.
    let before = spendable(&alice);
    let cursor = last_event(&alice);
    let (invoice, hash) = ln.external.invoice(Some(50_000_000), "with-amount");
    let (paid, send, took) = pay_and_settle(&alice, json!({"destination": invoice}), &hash);
    let preimage = send["preimage"]
        .as_str()
        .expect("a paid send has its preimage");
    assert!(preimage_matches(preimage, &hash), "{send}");
    if let Some(at_once) = paid["preimage"].as_str() {
        assert_eq!(at_once, preimage, "{paid}");
    }
    assert_eq!(ln.external.invoice_status("with-amount"), "paid");
    let seen = notifications_after(&alice, cursor, |seen| {
        movement_reached(seen, "bark.lightning_send", "successful").is_some()
    });
    let movement = movement_reached(&seen, "bark.lightning_send", "successful").expect("movement");
    let fee = movement["offchain_fee_sat"].as_i64().expect("fee");
    assert_eq!(
        movement["effective_balance_sat"],
        -(50_000 + fee),
        "{movement}"
    );
    assert!(
        seen.iter()
            .any(|n| n["type"] == "movement-created" && n["movement"]["id"] == movement["id"]),
        "movement-created came first: {seen:?}"
    );
    assert_eq!(
        spendable(&alice),
        before - 50_000 - fee,
        "the balance paid for it, fee included"
    );
    let history = alice.get_ok("/api/v1/history");
    assert!(
        history
            .as_array()
            .expect("history")
            .iter()
            .any(|m| m["id"] == movement["id"] && m["status"] == "successful"),
        "{history}"
    );
    println!(
        "lightning: a 50,000 sat BOLT11 payment settled in {:.2} s",
        took.as_secs_f64()
    );

    // An amountless invoice, with amount_sat, through wallet/send.
    let (invoice, hash) = ln.external.invoice(None, "amountless");
    let (status, body) = alice.post("/api/v1/wallet/send", json!({"destination": invoice}));
    assert_eq!(status, 400, "amountless needs amount_sat: {body}");
    let sent = alice.post_ok(
        "/api/v1/wallet/send",
        json!({"destination": invoice, "amount_sat": 21_000}),
    );
    assert_eq!(sent["payment_hash"], hash.as_str(), "{sent}");
    wait_paid(&alice, &hash, "the amountless payment to settle");
    let received = ln
        .external
        .rpc("listinvoices", json!({"label": "amountless"}))["invoices"][0]
        .clone();
    assert_eq!(received["status"], "paid", "{received}");
    assert_eq!(received["amount_received_msat"], 21_000_000, "{received}");

    // A BOLT12 offer of the outside node (any amount): its invoice is fetched by the
    // server's node, paid, and the payee records it.
    let offer = ln.external.offer("berth e2e offer");
    let (status, body) = alice.post("/api/v1/lightning/pay", json!({"destination": offer}));
    assert_eq!(
        status, 400,
        "an offer for any amount needs amount_sat: {body}"
    );
    let before = spendable(&alice);
    let paid = alice.post_ok(
        "/api/v1/lightning/pay",
        json!({"destination": offer, "amount_sat": 15_000}),
    );
    let hash = paid["payment_hash"]
        .as_str()
        .expect("payment_hash")
        .to_string();
    wait_paid(&alice, &hash, "the offer's payment to settle");
    assert_eq!(ln.external.offer_payments(&offer), vec![15_000_000]);
    let sent = alice.post_ok(
        "/api/v1/wallet/send",
        json!({"destination": offer, "amount_sat": 16_000}),
    );
    let hash = sent["payment_hash"]
        .as_str()
        .expect("payment_hash")
        .to_string();
    wait_paid(&alice, &hash, "the second offer payment to settle");
    let mut got = ln.external.offer_payments(&offer);
    got.sort_unstable();
    assert_eq!(got, vec![15_000_000, 16_000_000]);
    assert!(
        spendable(&alice) <= before - 31_000,
        "both offer payments left the balance"
    );

    // An LNURL-pay link (LUD-06) whose server allows 32-character comments (LUD-12):
    // the amount is required, a long comment is refused before anything is asked of
    // the server or paid, and a short one reaches the payee.
    let lnurl_server = crate::lightning::LnurlServer::start(&ln.external);
    let lnurl = lnurl_server.lnurl();
    let (status, body) = alice.post("/api/v1/lightning/pay", json!({"destination": lnurl}));
    assert_eq!(status, 400, "an LNURL needs amount_sat: {body}");
    let before = spendable(&alice);
    let too_long = "x".repeat(crate::lightning::LNURL_COMMENT_ALLOWED + 8);
    let (status, body) = alice.post(
        "/api/v1/lightning/pay",
        json!({"destination": lnurl, "amount_sat": 12_000, "comment": too_long}),
    );
    assert_eq!(
        status, 400,
        "a comment longer than the server allows: {body}"
    );
    assert!(
        lnurl_server.calls().amounts.is_empty(),
        "no invoice was asked for"
    );
    assert_eq!(spendable(&alice), before, "nothing moved");
    let paid = alice.post_ok(
        "/api/v1/lightning/pay",
        json!({"destination": lnurl, "amount_sat": 12_000, "comment": "thanks from berth"}),
    );
    let hash = paid["payment_hash"]
        .as_str()
        .expect("payment_hash")
        .to_string();
    wait_paid(&alice, &hash, "the LNURL payment to settle");
    let calls = lnurl_server.calls();
    assert_eq!(calls.amounts, vec![12_000_000], "{calls:?}");
    assert_eq!(
        calls.comments,
        vec!["thanks from berth".to_string()],
        "{calls:?}"
    );
    assert_eq!(ln.external.invoice_status(&calls.labels[0]), "paid");
    let sent = alice.post_ok(
        "/api/v1/wallet/send",
        json!({"destination": format!("lightning:{lnurl}"), "amount_sat": 13_000}),
    );
    let hash = sent["payment_hash"]
        .as_str()
        .expect("payment_hash")
        .to_string();
    wait_paid(&alice, &hash, "the LNURL payment by wallet/send to settle");
    assert_eq!(lnurl_server.calls().amounts, vec![12_000_000, 13_000_000]);

    // Receive: an invoice the outside node pays; berthd claims it and the balance rises,
    // and a websocket client sees the receive's movement created, then updated.
    let before = spendable(&alice);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let frames = alice.websocket_frames(&rt);
    // And a webhook and a phone's push (an ntfy-like receiver), both on loopback.
    let (hook, phone_push) = crate::listeners::of_payments(&alice);
    let made = alice.post_ok(
        "/api/v1/lightning/receives/invoice",
        json!({"amount_sat": 30_000}),
    );
    let (bolt11, hash) = (
        made["invoice"].as_str().expect("invoice").to_string(),
        made["payment_hash"].as_str().expect("hash").to_string(),
    );
    let pending = alice.get_ok(&format!("/api/v1/lightning/receives/{hash}"));
    assert_eq!(pending["state"], "awaiting-payment", "{pending}");
    let receive_took = std::thread::scope(|scope| {
        let started = Instant::now();
        // The payer's call returns only once berthd has claimed the payment.
        let payer = scope.spawn(|| ln.external.pay(&bolt11));
        let settled = wait_for("the receive to settle", 120, || {
            let r = alice.get_ok(&format!("/api/v1/lightning/receives/{hash}"));
            (r["state"] == "settled").then_some(r)
        });
        assert!(
            settled["payment_preimage"]
                .as_str()
                .is_some_and(|p| preimage_matches(p, &hash)),
            "{settled}"
        );
        payer
            .join()
            .expect("payer thread")
            .expect("the outside node's payment succeeded");
        started.elapsed()
    });
    let seen = wait_for("the receive's notifications on the websocket", 60, || {
        let frames = frames.lock().expect("frames").clone();
        movement_reached(&frames, "bark.lightning_receive", "successful").map(|_| frames)
    });
    let movement =
        movement_reached(&seen, "bark.lightning_receive", "successful").expect("movement");
    assert_eq!(movement["effective_balance_sat"], 30_000, "{movement}");
    let of_it: Vec<&Value> = seen
        .iter()
        .filter(|n| n["movement"]["id"] == movement["id"])
        .collect();
    assert_eq!(
        of_it[0]["type"], "movement-created",
        "created first: {seen:?}"
    );
    assert!(
        of_it.iter().any(|n| n["type"] == "movement-updated"),
        "then updated: {seen:?}"
    );
    wait_for("the received funds to be spendable", 60, || {
        (spendable(&alice) == before + 30_000).then_some(())
    });
    assert_eq!(
        alice.get_ok("/api/v1/lightning/receives"),
        json!([]),
        "nothing left pending"
    );
    println!(
        "lightning: a 30,000 sat receive settled in {:.2} s",
        receive_took.as_secs_f64()
    );
    crate::listeners::told_within_a_second(&hook, &phone_push, &movement);

    // An invoice whose funds go to another wallet's Ark address (bob's): the outside
    // node pays it, and bob's balance rises.
    let bob = stack.berthd("bob");
    let bob_address = bob.post_ok("/api/v1/wallet/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_string();
    let made = alice.post_ok(
        "/api/v1/lightning/receives/invoice/for-address",
        json!({"amount_sat": 25_000, "address": bob_address}),
    );
    let (bolt11, hash) = (
        made["invoice"].as_str().expect("invoice").to_string(),
        made["payment_hash"].as_str().expect("hash").to_string(),
    );
    let alice_before = spendable(&alice);
    std::thread::scope(|scope| {
        let payer = scope.spawn(|| ln.external.pay(&bolt11));
        wait_for("the receive for bob's address to settle", 120, || {
            (alice.get_ok(&format!("/api/v1/lightning/receives/{hash}"))["state"] == "settled")
                .then_some(())
        });
        payer.join().expect("payer").expect("paid");
    });
    wait_for("bob to hold the payment", 120, || {
        bob.post_ok("/api/v1/wallet/sync", json!({}));
        (spendable(&bob) == 25_000).then_some(())
    });
    assert_eq!(
        spendable(&alice),
        alice_before,
        "the funds went to bob, not alice"
    );

    // An unpaid receive is cancelled: the payer can no longer pay it.
    let made = alice.post_ok(
        "/api/v1/lightning/receives/invoice",
        json!({"amount_sat": 5_000}),
    );
    let hash = made["payment_hash"].as_str().expect("hash").to_string();
    let (status, body) = alice.call_delete(&format!("/api/v1/lightning/receives/{hash}"));
    assert_eq!(status, 200, "{body}");
    let (status, body) = alice.get(&format!("/api/v1/lightning/receives/{hash}"));
    assert_eq!(status, 404, "a cancelled receive is gone: {body}");
    let refused = ln.external.pay(made["invoice"].as_str().expect("invoice"));
    assert!(
        refused.is_err(),
        "a cancelled invoice cannot be paid: {refused:?}"
    );

    // A payment the network cannot route (the payee is no node anyone knows): it
    // fails, the funds come back, and the history says so.
    let before = spendable(&alice);
    let nowhere = harness::invoice(lightning_invoice::Currency::Regtest, Some(10_000_000), 77);
    let hash = harness::invoice_hash(77);
    let (status, body) = alice.post("/api/v1/lightning/pay", json!({"destination": nowhere}));
    assert!(
        status == 200 || status == 422,
        "started, or refused once the server failed it: {status} {body}"
    );
    let failed = wait_for("the unroutable payment to fail", 120, || {
        let send = alice.get_ok(&format!("/api/v1/lightning/sends/{hash}"));
        (send["state"] == "unknown" && send["movement_status"] == "failed").then_some(send)
    });
    assert!(failed["preimage"].is_null(), "{failed}");
    let history = alice.get_ok("/api/v1/history");
    assert!(
        history.as_array().expect("history").iter().any(|m| {
            m["id"] == failed["movement_id"]
                && m["subsystem"]["name"] == "bark.lightning_send"
                && m["status"] == "failed"
        }),
        "the history says it failed: {history}"
    );
    wait_for("the funds to return", 60, || {
        (spendable(&alice) == before).then_some(())
    });
    let unknown = alice.get_ok(&format!(
        "/api/v1/lightning/sends/{}",
        harness::invoice_hash(78)
    ));
    assert_eq!(unknown["state"], "unknown", "{unknown}");
    assert!(
        unknown.get("movement_status").is_none(),
        "never tried: {unknown}"
    );

    // Latency: 20 payments and 20 receives of 1,000 sats.
    let mut pays = Vec::new();
    for i in 0..20 {
        let label = format!("latency-pay-{i}");
        let (invoice, hash) = ln.external.invoice(Some(1_000_000), &label);
        pays.push(pay_and_settle(&alice, json!({"destination": invoice}), &hash).2);
    }
    let mut receives = Vec::new();
    for _ in 0..20 {
        let made = alice.post_ok(
            "/api/v1/lightning/receives/invoice",
            json!({"amount_sat": 1_000}),
        );
        let bolt11 = made["invoice"].as_str().expect("invoice").to_string();
        let hash = made["payment_hash"].as_str().expect("hash").to_string();
        receives.push(std::thread::scope(|scope| {
            let started = Instant::now();
            let payer = scope.spawn(|| ln.external.pay(&bolt11));
            poll_fast("a receive to settle", || {
                (alice.get_ok(&format!("/api/v1/lightning/receives/{hash}"))["state"] == "settled")
                    .then_some(())
            });
            payer.join().expect("payer").expect("paid");
            started.elapsed()
        }));
    }
    pays.sort();
    receives.sort();
    println!(
        "lightning latency over 20: payments p50 {:.2} s, p95 {:.2} s; receives p50 {:.2} s, p95 {:.2} s",
        percentile(&pays, 50),
        percentile(&pays, 95),
        percentile(&receives, 50),
        percentile(&receives, 95)
    );
    println!(
        "e2e {TEST}: stack up in {:.1} s, scenario {:.1} s",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// A payment in flight (the payee holds its HTLC: a hold invoice) when berthd is
/// SIGKILLed: after the restart the payee settles it and berthd sees it paid, debited
/// once; a second one the payee cancels instead is failed and its funds come back.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn lightning_payments_in_flight_survive_a_sigkill() {
    const TEST: &str = "lightning_payments_in_flight_survive_a_sigkill";
    let Some(stack) = Stack::start_with_lightning(TEST) else {
        return;
    };
    let started = Instant::now();
    let ln = stack.ln();
    let mut alice = stack.berthd("alice");
    board_and_confirm(&stack, &alice, 1_000_000);
    stack.lightning_at_tip();

    for (round, settle) in [(1u8, true), (2u8, false)] {
        let preimage = [round; 32];
        let hash = sha256::Hash::hash(&preimage).to_string();
        let preimage_hex: String = preimage.iter().map(|b| format!("{b:02x}")).collect();
        let invoice = ln.external.rpc(
            "holdinvoice",
            json!({"payment_hash": hash, "amount": 40_000_000}),
        )["bolt11"]
            .as_str()
            .expect("hold invoice")
            .to_string();
        let before = spendable(&alice);
        let paid = alice.post_ok("/api/v1/lightning/pay", json!({"destination": invoice}));
        assert_eq!(paid["payment_hash"], hash.as_str(), "{paid}");
        wait_for("the payee to hold the HTLC", 60, || {
            let held = ln
                .external
                .rpc("listholdinvoices", json!({"payment_hash": hash}));
            (held["holdinvoices"][0]["state"] == "accepted").then_some(())
        });
        let in_flight = alice.get_ok(&format!("/api/v1/lightning/sends/{hash}"));
        assert!(
            !["paid", "unknown"].contains(&in_flight["state"].as_str().unwrap_or("")),
            "in flight: {in_flight}"
        );

        alice.kill();
        alice.restart();
        let after_restart = alice.get_ok(&format!("/api/v1/lightning/sends/{hash}"));
        assert!(
            !["paid", "unknown"].contains(&after_restart["state"].as_str().unwrap_or("")),
            "still in flight after the restart: {after_restart}"
        );

        if settle {
            ln.external
                .rpc("settleholdinvoice", json!({"preimage": preimage_hex}));
            let send = wait_paid(
                &alice,
                &hash,
                "the payment to be seen paid after the restart",
            );
            assert_eq!(send["preimage"], preimage_hex.as_str(), "{send}");
            let history = alice.get_ok("/api/v1/history");
            let sends: Vec<&Value> = history
                .as_array()
                .expect("history")
                .iter()
                .filter(|m| {
                    m["subsystem"]["name"] == "bark.lightning_send"
                        && m["intended_balance_sat"] == -40_000
                })
                .collect();
            assert_eq!(sends.len(), 1, "one movement, not two: {history}");
            assert_eq!(sends[0]["status"], "successful", "{history}");
            let fee = sends[0]["offchain_fee_sat"].as_i64().expect("fee");
            assert_eq!(spendable(&alice), before - 40_000 - fee, "debited once");
        } else {
            ln.external
                .rpc("cancelholdinvoice", json!({"payment_hash": hash}));
            let send = wait_for(
                "the cancelled payment to fail after the restart",
                180,
                || {
                    let send = alice.get_ok(&format!("/api/v1/lightning/sends/{hash}"));
                    (send["state"] == "unknown" && send["movement_status"] == "failed")
                        .then_some(send)
                },
            );
            assert!(send["preimage"].is_null(), "{send}");
            wait_for("the funds to come back", 120, || {
                (spendable(&alice) == before).then_some(())
            });
        }
    }
    println!(
        "e2e {TEST}: stack up in {:.1} s, scenario {:.1} s",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// A Lightning address (LUD-16), `alice@localhost`: resolved over HTTPS at
/// `https://localhost/.well-known/lnurlp/alice` (port 443, a CA the OS store is told
/// about through `SSL_CERT_FILE`, as an owner would add a CA to the box), `amount_sat`
/// required, a long comment refused with a 400 before anything is asked or paid, a
/// short one delivered, paid through `lightning/pay` and `wallet/send`. Skipped when port
/// 443 cannot be bound.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn a_lightning_address_is_paid_over_https() {
    const TEST: &str = "a_lightning_address_is_paid_over_https";
    if let Err(why) = std::net::TcpListener::bind("127.0.0.1:443") {
        harness::skip(
            TEST,
            &format!("cannot listen on 127.0.0.1:443 ({why}); run as root"),
        );
        return;
    }
    let Some(stack) = Stack::start_with_lightning(TEST) else {
        return;
    };
    let started = Instant::now();
    let ln = stack.ln();
    let ca_file = stack.dir().join("lnurl-ca.pem");
    let server = crate::lightning::LnurlServer::start_https(&ln.external, &ca_file)
        .expect("the HTTPS LNURL server");
    // `localhost` is the box itself: the owner allows it by name (the egress policy).
    let datadir = stack.datadir_with_config("alice", "[egress]\nallow = [\"localhost\"]\n");
    let alice = Berthd::start_with_env(
        "alice",
        &datadir,
        &[("SSL_CERT_FILE", ca_file.to_str().expect("utf-8 path"))],
    );
    let (status, body) = alice.post("/api/v1/wallet/create", json!({"network": "regtest"}));
    assert_eq!(status, 200, "{body}");
    board_and_confirm(&stack, &alice, 500_000);
    stack.lightning_at_tip();

    let address = "alice@localhost";
    let (status, body) = alice.post("/api/v1/lightning/pay", json!({"destination": address}));
    assert_eq!(status, 400, "a Lightning address needs amount_sat: {body}");
    let before = spendable(&alice);
    let (status, body) = alice.post(
        "/api/v1/lightning/pay",
        json!({"destination": address, "amount_sat": 11_000, "comment": "y".repeat(40)}),
    );
    assert_eq!(
        status, 400,
        "a comment longer than the server allows: {body}"
    );
    assert!(
        server.calls().amounts.is_empty(),
        "no invoice was asked for"
    );
    assert_eq!(spendable(&alice), before, "nothing moved");

    let paid = alice.post_ok(
        "/api/v1/lightning/pay",
        json!({"destination": address, "amount_sat": 11_000, "comment": "from berth"}),
    );
    let hash = paid["payment_hash"]
        .as_str()
        .expect("payment_hash")
        .to_string();
    wait_paid(&alice, &hash, "the Lightning address payment to settle");
    let calls = server.calls();
    assert_eq!(calls.amounts, vec![11_000_000], "{calls:?}");
    assert_eq!(calls.comments, vec!["from berth".to_string()], "{calls:?}");
    assert_eq!(ln.external.invoice_status(&calls.labels[0]), "paid");
    let sent = alice.post_ok(
        "/api/v1/wallet/send",
        json!({"destination": address, "amount_sat": 9_000}),
    );
    let hash = sent["payment_hash"]
        .as_str()
        .expect("payment_hash")
        .to_string();
    wait_paid(
        &alice,
        &hash,
        "the second Lightning address payment to settle",
    );
    assert_eq!(server.calls().amounts, vec![11_000_000, 9_000_000]);
    assert!(
        spendable(&alice) <= before - 20_000,
        "both payments left the balance"
    );
    println!(
        "e2e {TEST}: stack up in {:.1} s, scenario {:.1} s",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

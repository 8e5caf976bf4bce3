//! End-to-end tests: berthd against a real bitcoind, Ark server (captaind) and
//! PostgreSQL, driven only through its REST API, as a phone app would drive it.
//!
//! Needs `BITCOIND_EXEC`, `CAPTAIND_EXEC` and `POSTGRES_BINS` (`docs/testing.md`), so
//! every scenario is `#[ignore]`d: `scripts/test` reports them as skipped, and
//! `scripts/e2e` runs them (and fails without the binaries), one at a time, showing
//! each scenario's wall time (the stacks are heavy; one at a time suits a 2-core
//! machine).

mod ark_proxy;
mod backup_restore;
mod barkd_fidelity;
mod card;
mod chaos;
mod console_funding;
mod console_send;
#[path = "../harness/mod.rs"]
mod harness;
mod household;
mod interrupted_board;
mod interrupted_receive;
mod interrupted_refresh;
mod lightning;
mod lightning_payments;
mod listeners;
mod maintenance_rejected;
mod manual_sync;
mod nwc_payments;
mod offboard_pending;
mod payment_pending;
mod power_cut;
mod refresh_window;
mod server_holds_coins;
mod stack;
mod writes;

use std::time::Instant;

use serde_json::json;

use stack::{Stack, wait_for};

/// Scenario 1: create a wallet; get an on-chain address; fund it; sync; the on-chain
/// balance shows the funds.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn onchain_funds_arrive() {
    let stack = Stack::start("onchain_funds_arrive");
    let started = Instant::now();
    let alice = stack.berthd("alice");

    let address = alice.post_ok("/api/v1/onchain/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_string();
    assert!(address.starts_with("bcrt1"), "a regtest address: {address}");
    let tip = alice.get_ok("/api/v1/bitcoin/tip")["tip_height"]
        .as_u64()
        .expect("tip_height");
    assert_eq!(tip, stack.bitcoind.height(), "berthd sees bitcoind's tip");

    let txid = stack.bitcoind.send_to(&address, 250_000);
    let before = alice.get_ok("/api/v1/onchain/balance");
    assert_eq!(before["confirmed_sat"], 0, "{before}");
    stack.bitcoind.mine(1);
    wait_for("the funds to show as confirmed", 60, || {
        alice.post_ok("/api/v1/onchain/sync", json!({}));
        let balance = alice.get_ok("/api/v1/onchain/balance");
        (balance["confirmed_sat"] == 250_000).then_some(balance)
    });
    let balance = alice.get_ok("/api/v1/onchain/balance");
    assert_eq!(balance["total_sat"], 250_000, "{balance}");
    assert_eq!(balance["trusted_spendable_sat"], 250_000, "{balance}");
    assert_eq!(stack.bitcoind.confirmations(&txid), 1);

    let utxos = alice.get_ok("/api/v1/onchain/utxos");
    assert_eq!(
        utxos[0]["outpoint"].as_str().map(|o| o.starts_with(&txid)),
        Some(true),
        "{utxos}"
    );
    assert_eq!(utxos[0]["amount_sat"], 250_000, "{utxos}");
    assert!(utxos[0]["confirmation_height"].is_u64(), "{utxos}");
    let txs = alice.get_ok("/api/v1/onchain/transactions");
    assert_eq!(txs[0]["txid"], txid.as_str(), "{txs}");
    assert_eq!(txs[0]["balance_change_sat"], 250_000, "{txs}");
    let rates = alice.get_ok("/api/v1/fees/onchain");
    assert!(
        rates["regular_sat_per_vb"].as_u64().is_some_and(|r| r > 0),
        "{rates}"
    );

    // Spend it: one payee, then two, then everything.
    let (status, body) = alice.post(
        "/api/v1/onchain/send",
        json!({"destination": stack.bitcoind.new_address(), "amount_sat": 10_000_000}),
    );
    assert_eq!(status, 422, "more than the wallet holds: {body}");
    let payee = stack.bitcoind.new_address();
    let sent = alice.post_ok(
        "/api/v1/onchain/send",
        json!({"destination": payee, "amount_sat": 50_000}),
    );
    let sent_txid = sent["txid"].as_str().expect("txid").to_string();
    let (one, two) = (stack.bitcoind.new_address(), stack.bitcoind.new_address());
    let many = alice.post_ok(
        "/api/v1/onchain/send-many",
        json!({"destinations": [format!("{one}:10000"), format!("{two}:0.0002 btc")]}),
    );
    let many_txid = many["txid"].as_str().expect("txid").to_string();
    stack.bitcoind.mine(1);
    assert_eq!(stack.bitcoind.paid_to(&sent_txid, &payee), 50_000);
    assert_eq!(stack.bitcoind.paid_to(&many_txid, &one), 10_000);
    assert_eq!(stack.bitcoind.paid_to(&many_txid, &two), 20_000);
    let rest = stack.bitcoind.new_address();
    let drained = alice.post_ok("/api/v1/onchain/drain", json!({"destination": rest}));
    stack.bitcoind.mine(1);
    let drained_sats = stack
        .bitcoind
        .paid_to(drained["txid"].as_str().expect("txid"), &rest);
    assert!(
        drained_sats > 160_000 && drained_sats < 170_000,
        "250k less 80k paid, less fees: {drained_sats}"
    );
    wait_for("the on-chain wallet to be empty", 60, || {
        alice.post_ok("/api/v1/onchain/sync", json!({}));
        let balance = alice.get_ok("/api/v1/onchain/balance");
        (balance["total_sat"] == 0).then_some(())
    });

    println!(
        "e2e onchain_funds_arrive: stack up in {:.1} s, scenario {:.1} s",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// What a client sees of exits must stay empty: no exit was started, by anyone.
pub(crate) fn assert_no_exit(berthd: &stack::Berthd, when: &str) {
    let exits = berthd.get_ok("/api/v1/exits/status/all");
    assert_eq!(
        exits,
        json!([]),
        "{}: an exit was started {when}",
        berthd.name
    );
}

/// The id of `berthd`'s first VTXO.
fn first_vtxo_id(berthd: &stack::Berthd) -> String {
    berthd.get_ok("/api/v1/wallet/vtxos")[0]["id"]
        .as_str()
        .expect("vtxo id")
        .to_string()
}

/// Mine a block every 2.5 s until the exit at `status_path` is in phase `kind`;
/// berthd advances it by itself.
fn mine_until_exit_is(
    stack: &Stack,
    berthd: &stack::Berthd,
    status_path: &str,
    kind: &str,
    secs: u64,
) {
    wait_for(&format!("the exit to be {kind}"), secs, || {
        if berthd.get_ok(status_path)["state"]["type"] == kind {
            return Some(());
        }
        stack.bitcoind.mine(1);
        std::thread::sleep(std::time::Duration::from_millis(2500));
        None
    });
}

/// Fund `berthd`'s on-chain wallet with `sats` and wait until it is confirmed there.
pub(crate) fn fund_onchain(stack: &Stack, berthd: &stack::Berthd, sats: u64) {
    let address = berthd.post_ok("/api/v1/onchain/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_string();
    let before = berthd.get_ok("/api/v1/onchain/balance")["confirmed_sat"]
        .as_u64()
        .expect("confirmed_sat");
    stack.bitcoind.send_to(&address, sats);
    stack.bitcoind.mine(1);
    wait_for("on-chain funds to confirm", 60, || {
        berthd.post_ok("/api/v1/onchain/sync", json!({}));
        let confirmed = berthd.get_ok("/api/v1/onchain/balance")["confirmed_sat"].as_u64()?;
        (confirmed == before + sats).then_some(())
    });
}

/// Scenario 2: board an amount and board all; mine confirmations; the VTXOs become
/// spendable; pending boards are listed, then gone.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn boards_become_spendable() {
    let stack = Stack::start("boards_become_spendable");
    let started = Instant::now();
    let alice = stack.berthd("alice");
    fund_onchain(&stack, &alice, 1_000_000);

    let (status, body) = alice.post("/api/v1/boards/board-amount", json!({"amount_sat": 1000}));
    assert_eq!(status, 400, "below the server's minimum board: {body}");

    // With an Idempotency-Key, as a client retrying after a lost answer would send it.
    let key = [("Idempotency-Key", "board-1")];
    let board = json!({"amount_sat": 300_000});
    let (status, _, first) = alice.call_with(
        "POST",
        "/api/v1/boards/board-amount",
        Some(board.clone()),
        &key,
    );
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["amount_sat"], 300_000, "{first}");
    let (status, raw, again) =
        alice.call_with("POST", "/api/v1/boards/board-amount", Some(board), &key);
    assert_eq!(
        (status, &again),
        (200, &first),
        "the retry gets the first answer"
    );
    assert!(
        raw.to_ascii_lowercase()
            .contains("idempotent-replayed: true"),
        "{raw}"
    );
    let (status, _, other) = alice.call_with(
        "POST",
        "/api/v1/boards/board-amount",
        Some(json!({"amount_sat": 250_000})),
        &key,
    );
    assert_eq!(status, 422, "the key belongs to another request: {other}");
    let pending = alice.get_ok("/api/v1/boards/pending");
    assert_eq!(
        pending.as_array().map(Vec::len),
        Some(1),
        "one board, not two: {pending}"
    );
    let first_vtxo = first["vtxos"][0].as_str().expect("vtxo id").to_string();
    // The funding transaction must reach the on-chain wallet before its change can
    // be boarded again.
    wait_for(
        "the first board's funding tx in the on-chain wallet",
        60,
        || {
            alice.post_ok("/api/v1/onchain/sync", json!({}));
            let total = alice.get_ok("/api/v1/onchain/balance")["total_sat"].as_u64()?;
            (total < 1_000_000 - 300_000).then_some(())
        },
    );
    let onchain_left = alice.get_ok("/api/v1/onchain/balance")["total_sat"]
        .as_u64()
        .expect("total_sat");
    let second = alice.post_ok("/api/v1/boards/board-all", json!({}));
    let second_amount = second["amount_sat"].as_u64().expect("amount_sat");
    assert!(
        second_amount > 0 && second_amount < onchain_left,
        "board-all boards the rest minus the on-chain fee: {second}"
    );

    let pending = alice.get_ok("/api/v1/boards/pending");
    let pending_ids: Vec<&str> = pending
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|b| b["vtxos"][0].as_str())
        .collect();
    assert!(pending_ids.contains(&first_vtxo.as_str()), "{pending}");
    assert_eq!(pending_ids.len(), 2, "{pending}");
    let balance = alice.get_ok("/api/v1/wallet/balance");
    assert_eq!(
        balance["spendable_sat"], 0,
        "nothing spendable before confirmations: {balance}"
    );

    stack.bitcoind.mine(3);
    let expected = 300_000 + second_amount;
    wait_for("both boards to become spendable", 120, || {
        alice.post_ok("/api/v1/wallet/sync", json!({}));
        let balance = alice.get_ok("/api/v1/wallet/balance");
        (balance["spendable_sat"] == expected).then_some(())
    });
    // bark marks a VTXO spendable a moment before it drops the pending board.
    wait_for("no pending boards left", 30, || {
        (alice.get_ok("/api/v1/boards/pending") == json!([])).then_some(())
    });
    let vtxos = alice.get_ok("/api/v1/wallet/vtxos");
    let vtxos = vtxos.as_array().expect("array");
    assert_eq!(vtxos.len(), 2, "{vtxos:?}");
    assert!(
        vtxos.iter().all(|v| v["state"]["type"] == "spendable"),
        "{vtxos:?}"
    );
    let one = alice.get_ok(&format!("/api/v1/wallet/vtxos/{first_vtxo}"));
    assert_eq!(one["amount_sat"], 300_000, "{one}");
    let encoded = alice.get_ok(&format!("/api/v1/wallet/vtxos/{first_vtxo}/encoded"));
    assert!(
        encoded["encoded"].as_str().is_some_and(|h| h.len() > 100),
        "{encoded}"
    );

    println!(
        "e2e boards_become_spendable: stack up in {:.1} s, scenario {:.1} s",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// After a crash window's repair and the same operation done again: `berthd`'s history
/// holds two movements of `subsystem`, the repaired `orphan` failed and a successful
/// one, and nothing pending.
pub(crate) fn assert_failed_then_done_again(berthd: &stack::Berthd, subsystem: &str, orphan: u32) {
    let history = berthd.get_ok("/api/v1/history");
    let ours: Vec<(&serde_json::Value, &serde_json::Value)> = history
        .as_array()
        .expect("history")
        .iter()
        .filter(|m| m["subsystem"]["name"] == subsystem)
        .map(|m| (&m["id"], &m["status"]))
        .collect();
    assert_eq!(ours.len(), 2, "the failed one and the new one: {history}");
    assert!(
        ours.contains(&(&json!(orphan), &json!("failed")))
            && ours.iter().any(|(_, status)| *status == "successful"),
        "{history}"
    );
    assert!(
        !history.to_string().contains(r#""status":"pending""#),
        "nothing left pending: {history}"
    );
}

/// Fund, board `sats` and wait until the VTXO is spendable.
pub(crate) fn board_and_confirm(stack: &Stack, berthd: &stack::Berthd, sats: u64) {
    fund_onchain(stack, berthd, sats + 100_000);
    let before = berthd.get_ok("/api/v1/wallet/balance")["spendable_sat"]
        .as_u64()
        .expect("spendable_sat");
    berthd.post_ok("/api/v1/boards/board-amount", json!({"amount_sat": sats}));
    stack.bitcoind.wait_for_mempool("the board's funding tx");
    stack.bitcoind.mine(3);
    wait_for("the board to become spendable", 120, || {
        berthd.post_ok("/api/v1/wallet/sync", json!({}));
        let spendable = berthd.get_ok("/api/v1/wallet/balance")["spendable_sat"].as_u64()?;
        (spendable == before + sats).then_some(())
    });
}

/// Scenario 3: an Ark payment (arkoor) from one berthd to another's Ark address;
/// balances and history on both sides.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn ark_payment_between_two_berthds() {
    let stack = Stack::start("ark_payment_between_two_berthds");
    let started = Instant::now();
    let alice = stack.berthd("alice");
    // Bob's webhook and phone listen on loopback, which his egress policy allows.
    let bob = stack.berthd_with("bob", "[egress]\nallow = [\"127.0.0.1\"]\n");
    let (hook, phone_push) = listeners::of_payments(&bob);
    board_and_confirm(&stack, &alice, 400_000);

    let bob_address = bob.post_ok("/api/v1/wallet/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_string();
    let info = alice.get_ok("/api/v1/wallet/ark-info");
    assert_eq!(info["network"], "regtest", "{info}");
    assert_eq!(info["min_board_amount_sat"], 20_000, "{info}");
    assert_eq!(info["vtxo_exit_delta"], 12, "{info}");
    let fee = alice.get_ok("/api/v1/fees/board?amount_sat=100000");
    assert_eq!(
        (
            fee["gross_amount_sat"].as_u64(),
            fee["net_amount_sat"].as_u64()
        ),
        (Some(100_000), Some(100_000)),
        "no board fee on this server: {fee}"
    );
    let (status, body) = alice.get("/api/v1/fees/board?amount_sat=1000");
    assert_eq!(status, 400, "below the minimum board: {body}");
    let (status, body) = bob.get("/api/v1/wallet/addresses/index/1000000");
    assert_eq!(status, 404, "an index never handed out: {body}");
    let handed_out: Vec<serde_json::Value> = (0..8)
        .map(|i| bob.get(&format!("/api/v1/wallet/addresses/index/{i}")))
        .filter(|(status, _)| *status == 200)
        .map(|(_, body)| body["address"].clone())
        .collect();
    assert!(
        handed_out.contains(&json!(bob_address)),
        "the address is found again by its index: {handed_out:?}"
    );
    let (status, body) = alice.post(
        "/api/v1/wallet/send",
        json!({"destination": bob_address, "amount_sat": 10_000_000}),
    );
    assert_eq!(status, 422, "more than alice has: {body}");

    let sent = alice.post_ok(
        "/api/v1/wallet/send",
        json!({"destination": bob_address, "amount_sat": 150_000}),
    );
    assert_eq!(sent["payment_hash"], serde_json::Value::Null, "{sent}");
    let movement_id = sent["movement_id"].as_u64().expect("movement_id");

    let alice_balance = alice.get_ok("/api/v1/wallet/balance");
    assert_eq!(alice_balance["spendable_sat"], 250_000, "{alice_balance}");
    wait_for("bob to receive the payment", 60, || {
        bob.post_ok("/api/v1/wallet/sync", json!({}));
        let spendable = bob.get_ok("/api/v1/wallet/balance")["spendable_sat"].as_u64()?;
        (spendable == 150_000).then_some(())
    });

    let alice_history = alice.get_ok("/api/v1/history");
    let send = alice_history
        .as_array()
        .expect("array")
        .iter()
        .find(|m| m["id"] == movement_id)
        .unwrap_or_else(|| panic!("alice's payment in her history: {alice_history}"));
    assert_eq!(send["subsystem"]["name"], "bark.arkoor", "{send}");
    assert_eq!(send["subsystem"]["kind"], "send", "{send}");
    assert_eq!(send["status"], "successful", "{send}");
    assert_eq!(send["effective_balance_sat"], -150_000, "{send}");
    assert_eq!(send["sent_to"][0]["destination"]["type"], "ark", "{send}");
    assert_eq!(
        send["sent_to"][0]["destination"]["value"],
        bob_address.as_str(),
        "{send}"
    );
    assert_eq!(
        alice_history[0]["id"], movement_id,
        "newest first: the payment is alice's latest movement"
    );

    let bob_history = bob.get_ok("/api/v1/history");
    let receive = &bob_history[0];
    assert_eq!(receive["subsystem"]["kind"], "receive", "{bob_history}");
    assert_eq!(receive["effective_balance_sat"], 150_000, "{bob_history}");
    listeners::told_within_a_second(&hook, &phone_push, receive);
    // Annotate the payment; the history shows the note.
    let (status, body) = alice.post(
        &format!("/api/v1/history/{movement_id}/metadata"),
        json!({"note": "rent"}),
    );
    assert_eq!(status, 200, "{body}");
    let annotated = alice.get_ok("/api/v1/history");
    assert_eq!(annotated[0]["metadata"]["note"], "rent", "{annotated}");
    let (status, body) = alice.post("/api/v1/history/999999/metadata", json!({"note": "x"}));
    assert_eq!(status, 404, "{body}");
    let (status, body) = alice.post(
        &format!("/api/v1/history/{movement_id}/metadata"),
        json!([1]),
    );
    assert_eq!(status, 400, "a patch must be an object: {body}");

    // Bob signs with the key behind his address; anyone can verify it.
    let signed = bob.post_ok(
        "/api/v1/message/sign",
        json!({"message": "hello", "address": bob_address}),
    );
    let signature = signed["signature"].as_str().expect("signature").to_string();
    let verify = |message: &str| {
        alice.post_ok(
            "/api/v1/message/verify",
            json!({"message": message, "signature": signature, "address": bob_address}),
        )["valid"]
            .clone()
    };
    assert_eq!(verify("hello"), true);
    assert_eq!(verify("hullo"), false);
    let (status, body) = alice.post(
        "/api/v1/message/sign",
        json!({"message": "hello", "address": bob_address}),
    );
    assert_eq!(status, 400, "alice cannot sign for bob's address: {body}");
    let mailbox = bob.post_ok("/api/v1/wallet/sync/mailbox", json!({}));
    assert!(
        mailbox["checkpoint"].as_u64().is_some_and(|c| c > 0),
        "{mailbox}"
    );

    let filtered = bob.get_ok(&format!("/api/v1/history?type=ark&value={bob_address}"));
    assert_eq!(filtered.as_array().map(Vec::len), Some(1), "{filtered}");
    assert_eq!(
        bob.get_ok("/api/v1/wallet/movements"),
        bob_history,
        "the deprecated alias answers the same"
    );

    // A payment URI: an Ark address always, an on-chain one on request.
    let uri = bob.post_ok(
        "/api/v1/wallet/bip321?uppercase=false",
        json!({"onchain": true}),
    );
    let text = uri["bip321"].as_str().expect("uri");
    let ark = uri["ark"].as_str().expect("ark address");
    let onchain = uri["onchain"].as_str().expect("on-chain address");
    assert!(
        text.starts_with("bitcoin:") && text.contains(ark) && text.contains(onchain),
        "{uri}"
    );
    assert_eq!(
        uri["bolt11"],
        serde_json::Value::Null,
        "no amount, no invoice: {uri}"
    );
    let upper = bob.post_ok("/api/v1/wallet/bip321?uppercase=true", json!({}));
    assert!(
        upper["bip321"]
            .as_str()
            .is_some_and(|u| u.starts_with("BITCOIN:")),
        "{upper}"
    );
    let (status, body) = bob.post(
        "/api/v1/wallet/bip321?uppercase=true",
        json!({"label": "coffee"}),
    );
    assert_eq!(
        status, 400,
        "a lower-case label cannot be upper-cased: {body}"
    );
    let (status, body) = bob.post("/api/v1/wallet/bip321", json!({"amount_sat": 5000}));
    assert_eq!(
        status, 503,
        "this Ark server has no Lightning to make the invoice: {body}"
    );

    // Bob's VTXO came out of round from alice: it carries counterparty risk until he
    // refreshes it. And it is his, not alice's to import.
    let bob_vtxo = first_vtxo_id(&bob);
    let encoded = bob.get_ok(&format!("/api/v1/wallet/vtxos/{bob_vtxo}/encoded"))["encoded"]
        .as_str()
        .expect("encoded")
        .to_string();
    let (status, body) = alice.post("/api/v1/wallet/import-vtxo", json!({"vtxos": [encoded]}));
    assert_eq!(status, 400, "not alice's key: {body}");
    let round = bob.post_ok("/api/v1/wallet/refresh/counterparty", json!({}));
    assert_eq!(
        round["participation"]["inputs"],
        json!([bob_vtxo]),
        "{round}"
    );
    assert_eq!(round["status"]["status"], "pending", "{round}");

    println!(
        "e2e ark_payment_between_two_berthds: stack up in {:.1} s, scenario {:.1} s",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// Scenario 4: refresh VTXOs in a round; send on-chain from the Ark balance; offboard
/// everything to an on-chain address.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn refresh_send_onchain_and_offboard() {
    let stack = Stack::start("refresh_send_onchain_and_offboard");
    let started = Instant::now();
    let alice = stack.berthd("alice");
    board_and_confirm(&stack, &alice, 400_000);
    let boarded = first_vtxo_id(&alice);

    // Refresh: join, let the server run a round, confirm it, sync.
    let round = alice.post_ok("/api/v1/wallet/refresh/all", json!({}));
    assert_eq!(round["status"]["status"], "pending", "{round}");
    assert_eq!(
        round["participation"]["inputs"],
        json!([boarded]),
        "{round}"
    );
    let round_started = Instant::now();
    stack.finish_round(&alice);
    let round_secs = round_started.elapsed().as_secs_f64();
    let vtxos = alice.get_ok("/api/v1/wallet/vtxos");
    assert_eq!(vtxos.as_array().map(Vec::len), Some(1), "{vtxos}");
    assert_ne!(vtxos[0]["id"], boarded.as_str(), "a new VTXO: {vtxos}");
    assert_eq!(
        vtxos[0]["amount_sat"], 400_000,
        "no refresh fee here: {vtxos}"
    );
    assert_eq!(vtxos[0]["state"]["type"], "spendable", "{vtxos}");
    let history = alice.get_ok("/api/v1/history");
    assert!(
        history
            .as_array()
            .expect("array")
            .iter()
            .any(|m| { m["subsystem"]["name"] == "bark.round" && m["status"] == "successful" }),
        "a successful refresh in the history: {history}"
    );

    // Fee estimates for what comes next (this server charges no Ark fees; the
    // offboard's on-chain share remains).
    let payee = stack.bitcoind.new_address();
    let refreshed = vtxos[0]["id"].as_str().expect("id").to_string();
    let fee = alice.get_ok(&format!(
        "/api/v1/fees/send-onchain?amount_sat=50000&address={payee}"
    ));
    assert_eq!(fee["net_amount_sat"], 50_000, "{fee}");
    assert!(
        fee["gross_amount_sat"]
            .as_u64()
            .is_some_and(|g| g >= 50_000),
        "{fee}"
    );
    let fee = alice.post_ok(
        "/api/v1/fees/offboard",
        json!({"address": payee, "vtxos": [refreshed]}),
    );
    assert_eq!(fee["gross_amount_sat"], 400_000, "{fee}");
    assert_eq!(fee["vtxos_spent"], json!([refreshed]), "{fee}");
    let fee = alice.get_ok(&format!("/api/v1/fees/offboard-all?address={payee}"));
    assert_eq!(fee["gross_amount_sat"], 400_000, "{fee}");
    let fee = alice.get_ok("/api/v1/fees/lightning/receive?amount_sat=10000");
    assert_eq!(fee["net_amount_sat"], 10_000, "{fee}");
    let fee = alice.get_ok("/api/v1/fees/lightning/pay?amount_sat=10000");
    assert_eq!(fee["net_amount_sat"], 10_000, "{fee}");
    let (status, body) = alice.get("/api/v1/fees/send-onchain?amount_sat=50000&address=nope");
    assert_eq!(status, 400, "{body}");

    // Send on-chain out of the Ark balance.
    let sent = alice.post_ok(
        "/api/v1/wallet/send-onchain",
        json!({"destination": payee, "amount_sat": 50_000}),
    );
    let send_txid = sent["offboard_txid"].as_str().expect("txid").to_string();
    stack.bitcoind.mine(1);
    assert_eq!(stack.bitcoind.confirmations(&send_txid), 1, "{sent}");
    assert_eq!(stack.bitcoind.paid_to(&send_txid, &payee), 50_000);

    // Offboard the rest.
    let (status, body) = alice.post(
        "/api/v1/wallet/offboard/all",
        json!({"address": "bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq"}),
    );
    assert_eq!(status, 400, "a mainnet address on regtest: {body}");
    let out = stack.bitcoind.new_address();
    let offboard = alice.post_ok("/api/v1/wallet/offboard/all", json!({"address": out}));
    let offboard_txid = offboard["offboard_txid"]
        .as_str()
        .expect("txid")
        .to_string();
    stack.bitcoind.mine(1);
    let received = stack.bitcoind.paid_to(&offboard_txid, &out);
    assert!(
        received > 300_000 && received < 350_000,
        "the rest, less the on-chain fee: {received}"
    );
    alice.post_ok("/api/v1/wallet/sync", json!({}));
    let balance = alice.get_ok("/api/v1/wallet/balance");
    assert_eq!(balance["spendable_sat"], 0, "{balance}");
    let (status, body) = alice.post("/api/v1/wallet/offboard/all", json!({}));
    assert_eq!(status, 422, "nothing left to offboard: {body}");

    println!(
        "e2e refresh_send_onchain_and_offboard: stack up in {:.1} s, scenario {:.1} s \
         (refresh round to completion {round_secs:.1} s)",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// Scenario 5: a full unilateral exit, headless. Nobody calls progress: berthd
/// advances the exit while blocks are mined until it is claimable; the status shows
/// the phases and their history; nothing is claimed until the claim call, which sends
/// the funds to an address where they confirm.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn headless_unilateral_exit() {
    let stack = Stack::start("headless_unilateral_exit");
    let started = Instant::now();
    let alice = stack.berthd("alice");
    // The board leaves confirmed on-chain coins behind to pay the exit's fees.
    board_and_confirm(&stack, &alice, 300_000);
    let vtxo = first_vtxo_id(&alice);
    let status_path = format!("/api/v1/exits/status/vtxo/{vtxo}?history=true");
    let (status, body) = alice.get(&status_path);
    assert_eq!(status, 404, "no exit yet: {body}");

    let fee = alice.get_ok(&format!("/api/v1/exits/fee?vtxo_ids={vtxo}"));
    assert_eq!(
        fee["txs_to_broadcast"], 1,
        "a board VTXO exits in one transaction: {fee}"
    );
    assert_eq!(fee["fundable"], true, "confirmed coins pay for it: {fee}");
    assert!(
        fee["exit_broadcast_fee_sat"]
            .as_u64()
            .is_some_and(|f| f > 0),
        "{fee}"
    );
    let start = alice.post_ok("/api/v1/exits/start/vtxos", json!({"vtxos": [vtxo]}));
    assert_eq!(start["started"], 1, "{start}");
    let exit_started = Instant::now();
    let start_height = stack.bitcoind.height();

    // Mine a block every few seconds; berthd must take the exit to claimable alone.
    let mut seen = Vec::new();
    let claimable = wait_for(
        "the exit to become claimable without progress calls",
        300,
        || {
            let state = alice.get_ok(&status_path)["state"].clone();
            let kind = state["type"].as_str().unwrap_or_default().to_string();
            assert!(
                !kind.starts_with("claim") || kind == "claimable",
                "nothing may be claimed without the claim call: {state}"
            );
            if seen.last() != Some(&kind) {
                seen.push(kind.clone());
            }
            if kind == "claimable" {
                return Some(state);
            }
            stack.bitcoind.mine(1);
            std::thread::sleep(std::time::Duration::from_millis(2500));
            None
        },
    );
    let to_claimable = exit_started.elapsed().as_secs_f64();
    let blocks = stack.bitcoind.height() - start_height;
    assert!(
        claimable["claimable_since"]["height"].is_u64(),
        "{claimable}"
    );

    let status = alice.get_ok(&status_path);
    let history: Vec<&str> = status["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|s| s["type"].as_str())
        .collect();
    for phase in ["start", "processing", "awaiting-delta"] {
        assert!(history.contains(&phase), "{phase} in the history: {status}");
    }
    let live = alice.get_ok("/api/v1/exits/status/live");
    assert_eq!(live.as_array().map(Vec::len), Some(1), "{live}");

    // More blocks, more driver rounds: still nothing claimed.
    stack.bitcoind.mine(2);
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert_eq!(alice.get_ok(&status_path)["state"]["type"], "claimable");

    let destination = stack.bitcoind.new_address();
    let claim = alice.post_ok(
        "/api/v1/exits/claim/all",
        json!({"destination": destination}),
    );
    let claim_txid = claim["txid"].as_str().expect("txid").to_string();
    stack.bitcoind.mine(1);
    assert_eq!(stack.bitcoind.confirmations(&claim_txid), 1, "{claim}");
    let received = stack.bitcoind.paid_to(&claim_txid, &destination);
    assert!(
        received > 290_000 && received < 300_000,
        "the VTXO's value less the claim fee: {received}"
    );
    wait_for("the exit to be claimed", 60, || {
        let state = alice.get_ok(&status_path)["state"]["type"].clone();
        (state == "claimed").then_some(())
    });
    let (status, body) = alice.post(
        "/api/v1/exits/claim/all",
        json!({"destination": destination}),
    );
    assert_eq!(status, 422, "nothing left to claim: {body}");

    println!(
        "e2e headless_unilateral_exit: stack up in {:.1} s, scenario {:.1} s; exit start to \
         claimable {to_claimable:.1} s over {blocks} blocks (exit delta 12); phases seen {seen:?}",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// Scenario 7: berthd is killed (SIGKILL, as in a power cut) in the middle of a board
/// and in the middle of an exit, and restarted; both flows complete and the balances
/// are right.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn crash_during_board_and_exit() {
    let stack = Stack::start("crash_during_board_and_exit");
    let started = Instant::now();
    let mut alice = stack.berthd("alice");
    fund_onchain(&stack, &alice, 600_000);

    // A board whose funding tx is out but not confirmed.
    let board = alice.post_ok(
        "/api/v1/boards/board-amount",
        json!({"amount_sat": 250_000}),
    );
    let board_vtxo = board["vtxos"][0].as_str().expect("vtxo").to_string();
    stack.bitcoind.wait_for_mempool("the board's funding tx");
    alice.kill();
    stack.bitcoind.mine(3);
    alice.restart();
    let pending = alice.get_ok("/api/v1/boards/pending");
    assert!(
        pending.as_array().is_some_and(|p| p.is_empty()
            || p.iter().any(|b| b["vtxos"][0] == board_vtxo.as_str())),
        "the board survived the crash: {pending}"
    );
    wait_for("the board to complete after the restart", 120, || {
        alice.post_ok("/api/v1/wallet/sync", json!({}));
        let spendable = alice.get_ok("/api/v1/wallet/balance")["spendable_sat"].as_u64()?;
        (spendable == 250_000).then_some(())
    });
    // bark marks the VTXO spendable a moment before it drops the pending board.
    wait_for("the pending board to be gone", 30, || {
        (alice.get_ok("/api/v1/boards/pending") == json!([])).then_some(())
    });

    // An exit killed while it is being processed.
    alice.post_ok("/api/v1/exits/start/vtxos", json!({"vtxos": [board_vtxo]}));
    let status_path = format!("/api/v1/exits/status/vtxo/{board_vtxo}");
    mine_until_exit_is(&stack, &alice, &status_path, "processing", 120);
    alice.kill();
    stack.bitcoind.mine(1);
    alice.restart();
    mine_until_exit_is(&stack, &alice, &status_path, "claimable", 300);
    let destination = stack.bitcoind.new_address();
    let claim = alice.post_ok(
        "/api/v1/exits/claim/all",
        json!({"destination": destination}),
    );
    let claim_txid = claim["txid"].as_str().expect("txid").to_string();
    stack.bitcoind.mine(1);
    let received = stack.bitcoind.paid_to(&claim_txid, &destination);
    assert!(
        received > 240_000 && received < 250_000,
        "the VTXO's value less the claim fee: {received}"
    );
    let balance = alice.get_ok("/api/v1/wallet/balance");
    assert_eq!(balance["spendable_sat"], 0, "{balance}");

    println!(
        "e2e crash_during_board_and_exit: stack up in {:.1} s, scenario {:.1} s",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// What a long-poll client following barkd's contract sees: call `wait` with the last
/// answer's `last_pushed_at` as `since`, until `done` says it has what it needs.
fn long_poll_until(
    berthd: &stack::Berthd,
    what: &str,
    done: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + std::time::Duration::from_secs(120);
    let mut since: Option<String> = None;
    let mut seen = Vec::new();
    while !done(&seen) {
        assert!(
            Instant::now() < deadline,
            "{}: long-poll never saw {what}: {seen:?}",
            berthd.name
        );
        let query = match &since {
            Some(s) => format!(
                "?since={}&timeout=5",
                s.replace('+', "%2B").replace(':', "%3A")
            ),
            None => "?timeout=5".to_string(),
        };
        let answer = berthd.get_ok(&format!("/api/v1/notifications/wait{query}"));
        seen.extend(
            answer["notifications"]
                .as_array()
                .expect("array")
                .iter()
                .cloned(),
        );
        since = answer["last_pushed_at"].as_str().map(str::to_string);
    }
    seen
}

/// (type, movement id, status) of each notification.
fn summary(notifications: &[serde_json::Value]) -> Vec<(String, u64, String)> {
    notifications
        .iter()
        .map(|n| {
            (
                n["type"].as_str().unwrap_or_default().to_string(),
                n["movement"]["id"].as_u64().unwrap_or_default(),
                n["movement"]["status"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// Scenario 6: notifications. A websocket client and a long-poll client of the sender
/// see `movement-created` and `movement-updated` for a board and an Ark payment, in
/// the same order; the receiver's long-poll sees the payment arrive.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn notifications_follow_board_and_payment() {
    let stack = Stack::start("notifications_follow_board_and_payment");
    let started = Instant::now();
    let alice = stack.berthd("alice");
    let bob = stack.berthd("bob");
    let rt = tokio::runtime::Runtime::new().expect("runtime");

    // The websocket listens from before anything happens, live.
    let frames = alice.websocket_frames(&rt);

    board_and_confirm(&stack, &alice, 300_000);
    let bob_address = bob.post_ok("/api/v1/wallet/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_string();
    let sent = alice.post_ok(
        "/api/v1/wallet/send",
        json!({"destination": bob_address, "amount_sat": 100_000}),
    );
    let send_id = sent["movement_id"].as_u64().expect("movement_id");

    let successful = |id: u64| {
        move |seen: &[serde_json::Value]| {
            seen.iter()
                .any(|n| n["movement"]["id"] == id && n["movement"]["status"] == "successful")
        }
    };
    let polled = long_poll_until(&alice, "the payment succeed", successful(send_id));
    let polled = summary(&polled);
    let board_id = polled
        .iter()
        .find(|(kind, _, _)| kind == "movement-created")
        .map(|(_, id, _)| *id)
        .expect("a movement-created for the board");
    assert_ne!(board_id, send_id);
    for id in [board_id, send_id] {
        let of: Vec<&(String, u64, String)> = polled.iter().filter(|n| n.1 == id).collect();
        assert_eq!(
            of[0].0, "movement-created",
            "movement {id} is created first: {polled:?}"
        );
        assert!(
            of.iter().any(|n| n.2 == "successful"),
            "movement {id} ends successful: {polled:?}"
        );
    }
    let board_created = polled.iter().position(|n| n.1 == board_id).expect("board");
    let send_created = polled.iter().position(|n| n.1 == send_id).expect("send");
    assert!(
        board_created < send_created,
        "in the order they happened: {polled:?}"
    );
    assert!(
        polled
            .iter()
            .any(|n| n.0 == "movement-updated" && n.1 == board_id),
        "the board's confirmation is an update: {polled:?}"
    );

    let ws_seen = wait_for(
        "the websocket to see everything the long-poll saw",
        30,
        || {
            let frames = frames.lock().expect("frames");
            (frames.len() >= polled.len()).then(|| summary(&frames))
        },
    );
    assert_eq!(
        ws_seen[..polled.len()],
        polled[..],
        "the websocket and the long-poll see the same notifications in the same order"
    );

    // Server-Sent Events replay the same log from the start.
    let bearer = format!("Bearer {}", harness::token(&alice.datadir));
    let sse = harness::read_sse(
        alice.port(),
        &[("Authorization", &bearer)],
        "after=0",
        polled.len(),
    );
    let sse_seen: Vec<serde_json::Value> = sse.into_iter().map(|(_, n)| n).collect();
    assert_eq!(
        summary(&sse_seen),
        polled,
        "SSE sees the same notifications"
    );

    wait_for("bob to receive the payment", 60, || {
        bob.post_ok("/api/v1/wallet/sync", json!({}));
        let spendable = bob.get_ok("/api/v1/wallet/balance")["spendable_sat"].as_u64()?;
        (spendable == 100_000).then_some(())
    });
    let bob_seen = long_poll_until(&bob, "the payment arrive", |seen| {
        seen.iter().any(|n| {
            n["movement"]["effective_balance_sat"] == 100_000
                && n["movement"]["status"] == "successful"
        })
    });
    assert_eq!(bob_seen[0]["type"], "movement-created", "{bob_seen:?}");
    println!(
        "scenario 6 (notifications over a board and a payment): {:.1} s, {} notifications",
        started.elapsed().as_secs_f64(),
        polled.len()
    );
}

/// Lightning against an Ark server without a Lightning node (the only kind this stack
/// has): a BOLT11 payment starts and is tracked, with its funds held; invoice creation
/// says the server has no Lightning node; receives and sends answer by hash, invoice
/// and preimage.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn lightning_payments_start_and_are_tracked() {
    use lightning_invoice::Currency;

    let stack = Stack::start("lightning_payments_start_and_are_tracked");
    let started = Instant::now();
    let alice = stack.berthd("alice");
    board_and_confirm(&stack, &alice, 300_000);

    let invoice = harness::invoice(Currency::Regtest, Some(50_000 * 1000), 11);
    let hash = harness::invoice_hash(11);
    let paid = alice.post_ok("/api/v1/lightning/pay", json!({"destination": invoice}));
    assert_eq!(paid["payment_hash"], hash.as_str(), "{paid}");
    assert_eq!(paid["message"], "Payment initiated successfully", "{paid}");

    for identifier in [&hash, &invoice] {
        let send = alice.get_ok(&format!("/api/v1/lightning/sends/{identifier}"));
        assert_eq!(send["payment_hash"], hash.as_str(), "{send}");
        assert_eq!(send["invoice"], invoice.as_str(), "{send}");
        assert_eq!(send["amount_sat"], 50_000, "{send}");
        assert!(
            ["start", "htlc-received", "payment-initiated"]
                .contains(&send["state"].as_str().unwrap_or("")),
            "in progress (the server has no node to pay with): {send}"
        );
    }
    let balance = alice.get_ok("/api/v1/wallet/balance");
    let fee = alice.get_ok(&format!("/api/v1/lightning/sends/{hash}"))["fee_sat"]
        .as_u64()
        .expect("fee_sat");
    assert_eq!(
        balance["pending_lightning_send_sat"].as_u64(),
        Some(50_000 + fee),
        "the payment's funds are held: {balance}"
    );
    let unknown = alice.get_ok(&format!(
        "/api/v1/lightning/sends/{}",
        harness::invoice_hash(99)
    ));
    assert_eq!(unknown["state"], "unknown", "{unknown}");

    // The same rules through wallet/send.
    let second = harness::invoice(Currency::Regtest, None, 12);
    let sent = alice.post_ok(
        "/api/v1/wallet/send",
        json!({"destination": second, "amount_sat": 20_000}),
    );
    assert_eq!(
        sent["payment_hash"],
        harness::invoice_hash(12).as_str(),
        "{sent}"
    );
    let (status, body) = alice.post(
        "/api/v1/lightning/pay",
        json!({"destination": harness::invoice(Currency::Bitcoin, Some(1_000_000), 13)}),
    );
    assert_eq!(status, 400, "a mainnet invoice on regtest: {body}");
    let (status, body) = alice.post(
        "/api/v1/lightning/pay",
        json!({"destination": harness::invoice(Currency::Regtest, Some(10_000_000_000), 14)}),
    );
    assert_eq!(status, 422, "more than alice has: {body}");

    // Receiving needs a Lightning node at the server.
    let (status, body) = alice.post(
        "/api/v1/lightning/receives/invoice",
        json!({"amount_sat": 10_000}),
    );
    assert_eq!(status, 503, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("Lightning node")),
        "says why: {body}"
    );
    assert_eq!(alice.get_ok("/api/v1/lightning/receives"), json!([]));
    let missing = harness::invoice_hash(50);
    let (status, body) = alice.get(&format!("/api/v1/lightning/receives/{missing}"));
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["resources"][0], missing.as_str(), "{body}");
    let (status, body) = alice.call_delete(&format!("/api/v1/lightning/receives/{missing}"));
    assert_eq!(status, 404, "{body}");

    let history = alice.get_ok("/api/v1/history");
    assert!(
        history.as_array().is_some_and(|h| h
            .iter()
            .any(|m| m["subsystem"]["name"] == "bark.lightning_send")),
        "the payment is in the history: {history}"
    );
    println!(
        "lightning (no node at the server): {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Scenario 9: the Ark server goes away and a VTXO approaches expiry. With nobody
/// calling the API, berthd's watchdog counts each block without the server as a failed
/// refresh, starts the exit after two, and the exit driver takes it to claimable;
/// nothing is claimed until `claim` is called. The alerts reach a client that asked for
/// them, and `/health` says what is wrong. The exit started only once no refresh could
/// happen: the history holds no refresh, and the server was reported unreachable first.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn watchdog_exits_a_vtxo_near_expiry_when_the_server_is_gone() {
    let mut stack = Stack::start("watchdog_exits_a_vtxo_near_expiry");
    let started = Instant::now();
    // Margins wider than the derived ones (12 blocks: berth.toml may only make the
    // watchdog act earlier) so the scenario takes seconds: warn 100 blocks before the
    // exit deadline, act 40 before it, exit after 2 failed refreshes.
    let alice = stack.berthd_with(
        "alice",
        "[watchdog]\ncheck_interval_secs = 1\nwarn_blocks = 100\nexit_margin_blocks = 40\n\
         refresh_attempts = 2\n[exits]\nprogress_interval_secs = 5\n",
    );
    board_and_confirm(&stack, &alice, 200_000);
    let vtxos = alice.get_ok("/api/v1/wallet/vtxos");
    let vtxo = vtxos[0]["id"].as_str().expect("id").to_string();
    let expiry = vtxos[0]["expiry_height"].as_u64().expect("expiry_height");
    let health = wait_for(
        "/health to say ready once the wallet was checked",
        30,
        || {
            let (status, health) = alice.get("/health");
            let checked = health["vtxo_expiry"]["thresholds"].is_object();
            (status == 200 && health["status"] == "ready" && checked).then_some(health)
        },
    );
    let thresholds = &health["vtxo_expiry"]["thresholds"];
    assert_eq!(thresholds["warn_blocks"], 100, "{health}");
    assert_eq!(thresholds["exit_margin_blocks"], 40, "{health}");

    stack.stop_captaind();
    // A board exits in one transaction: its deadline is expiry - 1. Leave 30 blocks:
    // inside the 40-block margin, outside its last quarter (so refresh is tried first).
    let tip = stack.bitcoind.height();
    let target = expiry - 1 - 30;
    assert!(
        target > tip,
        "the VTXO expires at {expiry}, the tip is {tip}"
    );
    stack.bitcoind.mine(target - tip);
    let exit_path = format!("/api/v1/exits/status/vtxo/{vtxo}");
    // A block at a time, as a chain goes: each one without the server is a failed
    // attempt, and the second starts the exit, well before the margin's last quarter.
    let mut blocks = 0;
    wait_for("the watchdog to start the exit on its own", 120, || {
        let (status, _) = alice.get(&exit_path);
        if status == 200 {
            return Some(());
        }
        let tip = stack.bitcoind.height();
        let checked = alice.get("/health").1["chain_tip"]["height"] == tip;
        if checked && blocks < 8 {
            stack.bitcoind.mine(1);
            blocks += 1;
        }
        None
    });
    let exit_started_at = stack.bitcoind.height();
    assert!(
        exit_started_at < expiry - 1 - 10,
        "started on failed attempts, before the last quarter: {exit_started_at}"
    );
    assert!(
        alice
            .get_ok("/api/v1/history")
            .as_array()
            .expect("history")
            .iter()
            .all(|m| m["subsystem"]["name"] != "bark.round"),
        "no refresh was possible: none in the history"
    );
    mine_until_exit_is(&stack, &alice, &exit_path, "claimable", 300);
    // More blocks and watchdog passes: still not claimed.
    stack.bitcoind.mine(2);
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert_eq!(alice.get_ok(&exit_path)["state"]["type"], "claimable");

    let (_, wait) = alice.get(
        "/api/v1/notifications/wait?after=0&timeout=0&types=vtxo-expiring,exit-started,\
         exit-claimable,ark-server-unreachable",
    );
    let kinds: Vec<&str> = wait["notifications"]
        .as_array()
        .expect("notifications")
        .iter()
        .filter_map(|n| n["type"].as_str())
        .collect();
    for kind in [
        "ark-server-unreachable",
        "vtxo-expiring",
        "exit-started",
        "exit-claimable",
    ] {
        assert!(kinds.contains(&kind), "{kind} alert missing: {wait}");
    }
    let started_alert = wait["notifications"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["type"] == "exit-started"))
        .expect("exit-started");
    let position = |kind: &str| kinds.iter().position(|k| *k == kind);
    assert!(
        position("ark-server-unreachable") < position("exit-started"),
        "the server was unreachable before the exit started: {wait}"
    );
    assert_eq!(started_alert["vtxos"][0], vtxo.as_str(), "{started_alert}");
    // Clients that did not ask see none of them.
    let (_, standard) = alice.get("/api/v1/notifications/wait?after=0&timeout=0");
    assert!(
        !standard.to_string().contains("exit-started"),
        "alerts are opt-in: {standard}"
    );

    let (status, health) = alice.get("/health");
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["ark_server"]["reachable"], false, "{health}");
    assert_eq!(health["exits"]["claimable"], 1, "{health}");
    assert_eq!(health["exits"]["started_automatically"], 1, "{health}");

    let destination = stack.bitcoind.new_address();
    let claim = alice.post_ok(
        "/api/v1/exits/claim/all",
        json!({"destination": destination}),
    );
    let txid = claim["txid"].as_str().expect("txid").to_string();
    stack.bitcoind.mine(1);
    assert!(
        stack.bitcoind.paid_to(&txid, &destination) > 190_000,
        "{claim}"
    );
    println!(
        "e2e watchdog: scenario {:.1} s; exit started at height {exit_started_at} with the \
         deadline at {}",
        started.elapsed().as_secs_f64(),
        expiry - 1
    );
}

/// Scenario 10: berthd's own `rounds` task (in place of bark's daemon) refreshes a
/// VTXO that comes within bark's refresh threshold (12 blocks on regtest) at the next
/// round, with no API call; the watchdog is off so only the maintenance refresh acts.
/// `/health` shows the wallet's tasks, all healthy.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn maintenance_refresh_joins_a_round_on_its_own() {
    let stack = Stack::start("maintenance_refresh");
    let started = Instant::now();
    let alice = stack.berthd_with("alice", "[watchdog]\nenabled = false\n");
    board_and_confirm(&stack, &alice, 200_000);
    let vtxos = alice.get_ok("/api/v1/wallet/vtxos");
    let old = vtxos[0]["id"].as_str().expect("id").to_string();
    let expiry = vtxos[0]["expiry_height"].as_u64().expect("expiry_height");

    // Into the threshold: 11 blocks before expiry.
    stack.bitcoind.mine(expiry - 11 - stack.bitcoind.height());
    let mut rounds = 0;
    let fresh = wait_for("a maintenance refresh round with no API call", 120, || {
        let pending = alice.get_ok("/api/v1/wallet/rounds");
        match pending.as_array().and_then(|r| r.first()) {
            // A round's first attempt is what the rounds task acts on: start one, and
            // again if it came before the wallet saw the new tip.
            None if rounds < 8 => {
                stack.trigger_round();
                rounds += 1;
                std::thread::sleep(std::time::Duration::from_secs(2));
            }
            // The round's transaction needs a confirmation.
            Some(round) if round["funding_txid"].is_string() => {
                stack.bitcoind.mine(1);
                alice.post_ok("/api/v1/wallet/sync", json!({}));
            }
            _ => {}
        }
        let vtxos = alice.get_ok("/api/v1/wallet/vtxos");
        let fresh = vtxos.as_array()?.iter().find(|v| {
            v["id"] != old.as_str()
                && v["state"]["type"] == "spendable"
                && v["expiry_height"].as_u64() > Some(expiry)
        })?;
        Some(fresh["id"].as_str()?.to_string())
    });
    let movements = alice.get_ok("/api/v1/wallet/movements");
    assert!(
        movements.to_string().contains("refresh"),
        "a refresh movement: {movements}"
    );
    let (_, health) = alice.get("/health");
    let tasks = health["tasks"].as_array().expect("tasks");
    for name in [
        "onchain-sync",
        "ark-sync",
        "rounds",
        "mailbox",
        "exit-driver",
        "autopilot",
    ] {
        let task = tasks
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} in /health: {health}"));
        assert_eq!(task["consecutive_failures"], 0, "{name}: {health}");
    }
    println!(
        "e2e maintenance refresh: scenario {:.1} s, {rounds} round trigger(s); {old} -> {fresh}",
        started.elapsed().as_secs_f64()
    );
}

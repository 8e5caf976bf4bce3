//! Scenario 17: an offboard the Ark server fails transiently, half-way. bark 0.8 starts
//! an offboard *action* (inputs locked, checkpoint stored), drives it once, and when a
//! step fails transiently returns an error though the action stays pending and a later
//! sync completes it. berthd answered that with a 500, and its `Idempotency-Key` layer
//! gave the key back, so a client retrying with the same key paid a second time (seen
//! twice in `scripts/chaos`). Now berthd drives the action again for a few seconds and
//! answers 202 "pending" if it is still not broadcast (`engine::offboards`).
//!
//! The failure is not left to chance: berthd's wallet reaches captaind through a gRPC
//! proxy in this process ([`ArkProxy`]) that answers the one method the scenario names
//! with a transient error, as an overloaded or restarting server would.

use std::time::Instant;

use serde_json::{Value, json};

use crate::ark_proxy::{ArkProxy, assert_replayed_202};
use crate::stack::{Berthd, Stack, wait_for};

/// The `bark.offboard` movements of `berthd`'s history.
fn offboard_movements(berthd: &Berthd) -> Vec<Value> {
    let history = berthd.get_ok("/api/v1/history");
    history
        .as_array()
        .expect("history")
        .iter()
        .filter(|m| m["subsystem"]["name"] == "bark.offboard")
        .cloned()
        .collect()
}

/// What the bitcoind wallet's `address` has received in confirmed transactions, in sats.
fn received_by(stack: &Stack, address: &str) -> u64 {
    let btc = stack
        .bitcoind
        .try_rpc("/wallet/miner", "getreceivedbyaddress", json!([address, 1]))
        .expect("getreceivedbyaddress");
    (btc.as_f64().expect("an amount") * 1e8).round() as u64
}

/// Post `body` to `path` while the proxy fails `method`; the answer must be the 202
/// "pending" body. The answer, and the status and raw response of the same request
/// sent again with the same key.
fn post_while_failing(
    berthd: &Berthd,
    proxy: &ArkProxy,
    method: &str,
    path: &str,
    body: Value,
    key: &str,
) -> (Value, (u16, String, Value)) {
    proxy.fail(method);
    let headers = [("Idempotency-Key", key)];
    let asked = Instant::now();
    let (status, _, first) = berthd.call_with("POST", path, Some(body.clone()), &headers);
    let took = asked.elapsed();
    assert_eq!(
        status, 202,
        "an offboard in flight is not a failure: {first}"
    );
    assert_eq!(first["status"], "pending", "{first}");
    assert!(
        first["offboard_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "{first}"
    );
    assert!(
        first["message"]
            .as_str()
            .is_some_and(|m| m.contains("do not send it again")),
        "{first}"
    );
    assert!(
        proxy.failed(method) >= 2,
        "berthd drove the offboard again before answering ({} failed calls)",
        proxy.failed(method)
    );
    assert!(
        took.as_secs() < 60,
        "the wait is bounded: {took:?} for {path}"
    );
    println!(
        "e2e offboard pending: {path} answered 202 after {:.1} s, {} failed {method} calls",
        took.as_secs_f64(),
        proxy.failed(method)
    );
    let again = berthd.call_with("POST", path, Some(body), &headers);
    (first, again)
}

#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn an_offboard_the_server_interrupts_is_accepted_once() {
    let stack = Stack::start("offboard_pending");
    let started = Instant::now();
    let proxy = ArkProxy::start(&stack.ark_url);
    let alice = proxy.berthd(&stack, "alice");
    crate::board_and_confirm(&stack, &alice, 300_000);

    // Send on-chain: the arkoor split goes through and records the movement, then the
    // server fails the offboard's preparation.
    let payee = stack.bitcoind.new_address();
    let (first, replay) = post_while_failing(
        &alice,
        &proxy,
        "PrepareOffboard",
        "/api/v1/wallet/send-onchain",
        json!({"destination": payee, "amount_sat": 50_000}),
        "send-onchain-1",
    );
    let movement_id = first["movement_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("the split recorded the movement: {first}"));
    assert_replayed_202(&first, replay);
    let offboards = offboard_movements(&alice);
    assert_eq!(offboards.len(), 1, "one offboard, not two: {offboards:?}");
    assert_eq!(offboards[0]["id"], movement_id, "{offboards:?}");
    assert_eq!(offboards[0]["status"], "pending", "{offboards:?}");

    // The server recovers: a sync finishes the payment, once.
    proxy.heal();
    wait_for("the send on-chain to complete", 60, || {
        alice.post_ok("/api/v1/wallet/sync", json!({}));
        let offboards = offboard_movements(&alice);
        (offboards.first()?["status"] == "successful").then_some(())
    });
    stack.bitcoind.wait_for_mempool("the offboard transaction");
    stack.bitcoind.mine(1);
    assert_eq!(received_by(&stack, &payee), 50_000, "paid once");
    assert_eq!(offboard_movements(&alice).len(), 1);

    // Offboard the change: the server prepares the transaction, then fails the
    // exchange of signatures (the movement exists by then). Back within the server's
    // offboard session (30 s here), a sync finishes it.
    let vtxos = alice.get_ok("/api/v1/wallet/vtxos");
    let spendable: Vec<&str> = vtxos
        .as_array()
        .expect("vtxos")
        .iter()
        .filter(|v| v["state"]["type"] == "spendable")
        .filter_map(|v| v["id"].as_str())
        .collect();
    assert!(!spendable.is_empty(), "the change: {vtxos}");
    let change: u64 = vtxos
        .as_array()
        .expect("vtxos")
        .iter()
        .filter(|v| v["state"]["type"] == "spendable")
        .filter_map(|v| v["amount_sat"].as_u64())
        .sum();
    let destination = stack.bitcoind.new_address();
    let (first, replay) = post_while_failing(
        &alice,
        &proxy,
        "FinishOffboard",
        "/api/v1/wallet/offboard/vtxos",
        json!({"vtxos": spendable, "address": destination}),
        "offboard-1",
    );
    assert_replayed_202(&first, replay);
    let movement_id = first["movement_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("the prepared offboard has its movement: {first}"));
    proxy.heal();
    wait_for("the offboard to complete", 60, || {
        alice.post_ok("/api/v1/wallet/sync", json!({}));
        let offboards = offboard_movements(&alice);
        let this = offboards.iter().find(|m| m["id"] == movement_id)?;
        (this["status"] == "successful").then_some(())
    });
    stack.bitcoind.wait_for_mempool("the offboard transaction");
    stack.bitcoind.mine(1);
    let paid = received_by(&stack, &destination);
    assert!(
        paid > 0 && paid <= change,
        "the change less the offboard fee, once: {paid} of {change}"
    );
    assert_eq!(offboard_movements(&alice).len(), 2);
    let balance = alice.get_ok("/api/v1/wallet/balance");
    assert_eq!(balance["spendable_sat"], 0, "{balance}");

    println!(
        "e2e offboard pending: stack up in {:.1} s, scenario {:.1} s",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

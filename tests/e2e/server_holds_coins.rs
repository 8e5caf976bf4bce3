//! Scenario 24: a payment the Ark server refuses because it still holds the wallet's
//! coins. After a restart cut a round off, bark 0.8 abandons its attempt at once (its
//! nonces were in memory) and counts the VTXOs spendable, while captaind keeps them "in
//! flux" until the round's signing times out, and refuses to cosign a spend of them:
//! `INVALID_ARGUMENT`, "some VTXO is already locked by another process". berthd
//! answered that with a 500 though nothing was spent and the same request goes through
//! seconds later (found by `image/power-cut-test`); now it is a 503 that says so.
//!
//! The refusal is not left to a power cut's timing: berthd's wallet reaches captaind
//! through the gRPC proxy ([`ArkProxy`]), which refuses the cosign with captaind's own
//! code and words; bark, berthd and the rest of the stack are real.

use serde_json::{Value, json};

use crate::ark_proxy::ArkProxy;
use crate::stack::{Berthd, Stack, wait_for};

fn spendable(berthd: &Berthd) -> u64 {
    berthd.get_ok("/api/v1/wallet/balance")["spendable_sat"]
        .as_u64()
        .expect("spendable_sat")
}

/// The movements newer than `after` that moved or may move money (not `failed`).
fn live_movements_after(berthd: &Berthd, after: u64) -> Vec<Value> {
    berthd
        .get_ok("/api/v1/history")
        .as_array()
        .expect("history")
        .iter()
        .filter(|m| m["id"].as_u64().is_some_and(|id| id > after))
        .filter(|m| m["status"] != "failed")
        .cloned()
        .collect()
}

/// The answer must be the 503 for held coins: what happened and to try again.
fn assert_held(what: &str, (status, body): (u16, Value)) {
    assert_eq!(status, 503, "{what}: {body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("still holds") && message.contains("try again"),
        "{what}: the client is told what happened: {body}"
    );
    assert!(
        !message.contains("locked by another process"),
        "{what}: the server's words stay in the log: {body}"
    );
}

#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn a_payment_refused_for_coins_the_server_holds_is_a_503_and_goes_through_later() {
    let stack = Stack::start("server_holds_coins");
    let proxy = ArkProxy::start(&stack.ark_url);
    let alice = proxy.berthd(&stack, "alice");
    let bob = stack.berthd("bob");
    crate::board_and_confirm(&stack, &alice, 300_000);
    let before = spendable(&alice);
    let newest = alice
        .get_ok("/api/v1/history")
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|m| m["id"].as_u64())
        .max()
        .unwrap_or(0);
    let vtxo = alice.get_ok("/api/v1/wallet/vtxos")[0]["id"]
        .as_str()
        .expect("the board's VTXO")
        .to_string();
    proxy.refuse(
        "RequestArkoorCosign",
        &format!("bad user input: some VTXO is already locked by another process: {vtxo}"),
    );

    let address = bob.post_ok("/api/v1/wallet/addresses/next", json!({}))["address"]
        .as_str()
        .expect("bob's address")
        .to_string();
    let payment = json!({"destination": address, "amount_sat": 20_000});
    assert_held(
        "an Ark payment",
        alice.post("/api/v1/wallet/send", payment.clone()),
    );
    let payee = stack.bitcoind.new_address();
    assert_held(
        "a send on-chain",
        alice.post(
            "/api/v1/wallet/send-onchain",
            json!({"destination": payee, "amount_sat": 30_000}),
        ),
    );
    assert!(
        proxy.failed("RequestArkoorCosign") >= 2,
        "both reached the server and were refused"
    );
    // Nothing was spent: the coins are spendable again, and no movement moved money.
    assert_eq!(spendable(&alice), before);
    let live = live_movements_after(&alice, newest);
    assert!(live.is_empty(), "only failed attempts: {live:?}");

    // The server lets go: the same payment goes through, once.
    proxy.heal();
    alice.post_ok("/api/v1/wallet/send", payment);
    wait_for("bob to receive the payment", 60, || {
        bob.post_ok("/api/v1/wallet/sync", json!({}));
        (spendable(&bob) == 20_000).then_some(())
    });
    assert_eq!(live_movements_after(&alice, newest).len(), 1);
}

//! Scenario 20: an Ark payment the recipient's mailbox holds up. bark 0.8 stores the
//! payment (an action: inputs locked, checkpoint kept) and drives it until the package
//! reaches the recipient's mailbox, retrying without end. berthd stops waiting after a
//! minute; it answered that with a 503, and its `Idempotency-Key` layer gave the key
//! back, so a client retrying with the same key paid a second time. Now the answer is
//! a 202 the key keeps (`engine::offchain`), and the wallet's sync completes the
//! payment once the mailbox is back.
//!
//! The mailbox failure is not left to chance: the payer reaches captaind through the
//! e2e gRPC proxy ([`ArkProxy`]), which fails the mailbox's `PostArkoorMessage`.

use std::time::Instant;

use serde_json::{Value, json};

use crate::ark_proxy::{ArkProxy, assert_replayed_202};
use crate::stack::{Berthd, Stack, wait_for};

const POST: &str = "PostArkoorMessage";

fn arkoor(berthd: &Berthd, kind: &str) -> Vec<Value> {
    berthd
        .get_ok("/api/v1/history")
        .as_array()
        .expect("history")
        .iter()
        .filter(|m| m["subsystem"]["name"] == "bark.arkoor" && m["subsystem"]["kind"] == kind)
        .cloned()
        .collect()
}

#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn an_ark_payment_the_mailbox_holds_up_is_accepted_once() {
    let stack = Stack::start("payment_pending");
    let started = Instant::now();
    let proxy = ArkProxy::start(&stack.ark_url);
    let alice = proxy.berthd(&stack, "alice");
    let bob = stack.berthd("bob");
    crate::board_and_confirm(&stack, &alice, 300_000);
    let address = bob.post_ok("/api/v1/wallet/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_string();

    proxy.fail(POST);
    let body = json!({"destination": address, "amount_sat": 120_000});
    let headers = [("Idempotency-Key", "pay-bob-1")];
    let asked = Instant::now();
    let (status, _, first) =
        alice.call_with("POST", "/api/v1/wallet/send", Some(body.clone()), &headers);
    let took = asked.elapsed();
    assert_eq!(status, 202, "a payment under way is not a failure: {first}");
    assert!(
        first["message"]
            .as_str()
            .is_some_and(|m| m.contains("do not send it again")),
        "{first}"
    );
    let movement_id = first["movement_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("the server cosigned, so the movement exists: {first}"));
    assert!(proxy.failed(POST) >= 1, "the mailbox post was tried");
    assert!(
        took.as_secs() >= 60 && took.as_secs() < 110,
        "a minute's wait, within the request limit: {took:?}"
    );

    let replay = alice.call_with("POST", "/api/v1/wallet/send", Some(body), &headers);
    assert_replayed_202(&first, replay);
    let sends = arkoor(&alice, "send");
    assert_eq!(sends.len(), 1, "one payment, not two: {sends:?}");
    assert_eq!(sends[0]["id"], movement_id, "{sends:?}");
    assert_eq!(sends[0]["status"], "pending", "{sends:?}");

    // The mailbox is back: the wallet's sync delivers the payment, once (bark waits a
    // minute between delivery attempts).
    proxy.heal();
    wait_for("the payment to complete", 180, || {
        alice.post_ok("/api/v1/wallet/sync", json!({}));
        let sends = arkoor(&alice, "send");
        (sends.first()?["status"] == "successful").then_some(())
    });
    wait_for("bob to receive the payment", 60, || {
        bob.post_ok("/api/v1/wallet/sync", json!({}));
        let spendable = bob.get_ok("/api/v1/wallet/balance")["spendable_sat"].as_u64()?;
        (spendable == 120_000).then_some(())
    });
    assert_eq!(arkoor(&alice, "send").len(), 1);
    let receives = arkoor(&bob, "receive");
    assert_eq!(receives.len(), 1, "{receives:?}");
    assert_eq!(
        receives[0]["effective_balance_sat"], 120_000,
        "{receives:?}"
    );
    let balance = alice.get_ok("/api/v1/wallet/balance");
    assert_eq!(balance["spendable_sat"], 180_000, "the change: {balance}");

    println!(
        "e2e payment pending: stack up in {:.1} s, scenario {:.1} s; 202 after {:.1} s",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        took.as_secs_f64()
    );
}

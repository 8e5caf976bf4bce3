//! Scenario 16: the web console funds the wallet with no app and no terminal. A
//! browser session (a device with the send scope) sees the on-chain funds that arrived
//! on the overview and the Receive page, boards them into Ark with one form post, and
//! the VTXO becomes spendable. Over plain HTTP here, with the session cookie sent by
//! hand as `tests/console.rs` does (the e2e stack serves no TLS).

use serde_json::json;

use crate::stack::{Stack, wait_for};
use crate::{fund_onchain, harness};

#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn the_console_boards_the_funds_that_arrived_on_chain() {
    let stack = Stack::start("the_console_boards_the_funds_that_arrived_on_chain");
    let alice = stack.berthd("alice");
    fund_onchain(&stack, &alice, 400_000);

    let cookie =
        harness::console_session(alice.port(), &alice.datadir, "read,receive,send", "Laptop");
    let origin = format!("http://127.0.0.1:{}", alice.port());

    let page = |path: &str| {
        harness::try_request(alice.port(), "GET", path, &[("Cookie", &cookie)], None).expect("GET")
    };
    let (status, overview) = page("/");
    assert_eq!(status, 200, "{overview}");
    assert!(
        overview.contains("On-chain, confirmed</th><td class=\"num\">400000<"),
        "the overview shows the funds: {overview}"
    );
    let (_, receive) = page("/console/receive");
    assert!(receive.contains("400000 sats"), "{receive}");
    assert!(receive.contains(r#"action="/console/board""#), "{receive}");

    let (status, boarded) = harness::post_form(
        alice.port(),
        "/console/board",
        &[("Origin", &origin), ("Cookie", &cookie)],
        "",
    );
    assert_eq!(status, 200, "{boarded}");
    assert!(boarded.contains("Boarding "), "{boarded}");
    stack.bitcoind.wait_for_mempool("the board's funding tx");
    stack.bitcoind.mine(3);
    wait_for("the board to become spendable", 120, || {
        alice.post_ok("/api/v1/wallet/sync", json!({}));
        let spendable = alice.get_ok("/api/v1/wallet/balance")["spendable_sat"].as_u64()?;
        (spendable > 0).then_some(())
    });
    let (_, overview) = page("/");
    assert!(
        !overview.contains("Spendable</th><td class=\"num\">0<"),
        "the overview shows the VTXO: {overview}"
    );
}

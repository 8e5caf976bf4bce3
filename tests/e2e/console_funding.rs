//! Scenario 16: the web console funds the wallet with no app and no terminal. A
//! browser session (a device with the send scope) sees the on-chain funds that arrived
//! on the overview and the Receive page, boards them into Ark with one form post, and
//! the VTXO becomes spendable. Over plain HTTP here, with the session cookie sent by
//! hand as `tests/integration/console.rs` does (the e2e stack serves no TLS).

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
    // A coinbase of its own, not spendable for 100 blocks: the API's balance, /metrics,
    // the overview and /health are one status snapshot (api::status) and count it alike.
    let address = alice.post_ok("/api/v1/onchain/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_string();
    stack.bitcoind.rpc("generatetoaddress", json!([1, address]));
    let onchain = wait_for("the coinbase to show as immature", 60, || {
        alice.post_ok("/api/v1/onchain/sync", json!({}));
        let balance = alice.get_ok("/api/v1/onchain/balance");
        (balance["immature_sat"].as_u64()? > 0).then_some(balance)
    });
    let sat = |field: &str| onchain[field].as_u64().expect(field);
    let unconfirmed =
        sat("immature_sat") + sat("trusted_pending_sat") + sat("untrusted_pending_sat");
    assert_eq!(sat("confirmed_sat"), 400_000, "{onchain}");
    let (status, overview) = page("/");
    assert_eq!(status, 200, "{overview}");
    assert!(
        overview.contains("<dt>On-chain, confirmed</dt><dd>400,000 sats</dd>"),
        "the overview shows the funds: {overview}"
    );
    assert!(
        overview.contains(&format!(
            "<dt>On-chain, unconfirmed</dt><dd>{} sats</dd>",
            berth::engine::spending::sats(unconfirmed)
        )),
        "the overview counts the immature coinbase ({unconfirmed}): {overview}"
    );
    let bearer = format!("Bearer {}", harness::token(&alice.datadir));
    let (_, metrics) = harness::try_request(
        alice.port(),
        "GET",
        "/metrics",
        &[("Authorization", &bearer)],
        None,
    )
    .expect("GET /metrics");
    for line in [
        "berth_wallet_loaded 1".to_owned(),
        "berth_balance_sats{state=\"onchain_confirmed\"} 400000".to_owned(),
        format!("berth_balance_sats{{state=\"onchain_unconfirmed\"}} {unconfirmed}"),
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "/metrics: {line}: {metrics}"
        );
    }
    let (_, health) = harness::try_request(
        alice.port(),
        "GET",
        "/health",
        &[("Authorization", &bearer)],
        None,
    )
    .expect("GET /health");
    let health = harness::json_of(&health);
    assert_eq!(health["wallet"]["loaded"], true, "{health}");
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
        !overview.contains(r#"<span class="amount big">0 <"#),
        "the overview shows the VTXO: {overview}"
    );
}

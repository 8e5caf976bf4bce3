//! Scenario 20: bark's maintenance refresh goes around a VTXO the Ark server rejects
//! (issue 46). Two boards under a server whose VTXOs live 32 blocks, both aged past
//! their expiry; the server refuses one of them as a round input, as captaind refuses
//! an input it holds unusable (`INVALID_ARGUMENT` with the id in the `identifiers`
//! metadata). In the one round the scenario starts, berthd's rounds task (bark's own
//! maintenance refresh) submits both, drops the rejected one and submits the other to
//! the same round; the history keeps both attempts as barkd's does, a failed refresh
//! with both inputs and a successful one with the healthy input; and the watchdog,
//! on, never exits either VTXO while the server answers.
//!
//! Before, berthd joined maintenance refreshes with a participation of its own that a
//! rejection failed as a whole, to be tried again only at the next round, and its
//! watchdog exited VTXOs under a lifetime it computed too short to refresh into.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::ark_proxy::ArkProxy;
use crate::stack::{Berthd, Stack, wait_for};

/// The Ark server's VTXO lifetime in this scenario (barkd's own test uses the same),
/// with its default exit delta of 12 blocks.
const LIFETIME: u16 = 32;

fn vtxo_ids(berthd: &Berthd) -> Vec<String> {
    let vtxos = berthd.get_ok("/api/v1/wallet/vtxos");
    vtxos
        .as_array()
        .expect("vtxos")
        .iter()
        .filter_map(|v| v["id"].as_str().map(str::to_string))
        .collect()
}

/// The wallet's `bark.round` refresh movements.
pub(crate) fn refresh_movements(berthd: &Berthd) -> Vec<Value> {
    let history = berthd.get_ok("/api/v1/history");
    history
        .as_array()
        .expect("history")
        .iter()
        .filter(|m| m["subsystem"]["name"] == "bark.round" && m["subsystem"]["kind"] == "refresh")
        .cloned()
        .collect()
}

fn inputs(movement: &Value) -> Vec<&str> {
    movement["input_vtxos"]
        .as_array()
        .expect("input_vtxos")
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn maintenance_refresh_goes_around_an_input_the_server_rejects() {
    let stack = Stack::start_with_terms(
        "maintenance_rejected",
        LIFETIME,
        crate::stack::DEFAULT_VTXO_EXIT_DELTA,
    );
    let started = Instant::now();
    let proxy = ArkProxy::start(&stack.ark_url);
    // The watchdog on, checking every second: a wrong exit would have many chances.
    // bark syncs every 3 s, as in barkd's test harness: the round's confirmation is
    // seen within the blocks the scenario mines.
    let alice = proxy.berthd_with(
        &stack,
        "alice",
        "[watchdog]\ncheck_interval_secs = 1\n",
        "daemon_sync_interval_secs = 3\n",
    );
    // Two boards, so that there are two VTXOs: one to reject, one to refresh.
    crate::fund_onchain(&stack, &alice, 900_000);
    for sats in [300_000, 400_000] {
        alice.post_ok("/api/v1/boards/board-amount", json!({"amount_sat": sats}));
        stack.bitcoind.wait_for_mempool("the board's funding tx");
        stack.bitcoind.mine(3);
    }
    wait_for("both boards to become spendable", 120, || {
        alice.post_ok("/api/v1/wallet/sync", json!({}));
        let spendable = alice.get_ok("/api/v1/wallet/balance")["spendable_sat"].as_u64()?;
        (spendable == 700_000).then_some(())
    });
    let vtxos = alice.get_ok("/api/v1/wallet/vtxos");
    let by_amount = |sats: u64| {
        vtxos
            .as_array()
            .expect("vtxos")
            .iter()
            .find(|v| v["amount_sat"] == sats)
            .and_then(|v| v["id"].as_str())
            .unwrap_or_else(|| panic!("a {sats}-sat VTXO: {vtxos}"))
            .to_string()
    };
    let (bad, good) = (by_amount(300_000), by_amount(400_000));
    proxy.reject_input(&bad);

    // Both past their expiry, as in barkd's test: due for bark's maintenance refresh,
    // past their exit deadline too; the server answers, so no exit.
    stack.bitcoind.mine(u64::from(LIFETIME));
    let tip = stack.bitcoind.height();
    wait_for("the watchdog to see the new tip", 60, || {
        let (_, h) = alice.get("/health");
        (h["chain_tip"]["height"] == tip).then_some(())
    });
    crate::assert_no_exit(&alice, "with the VTXOs past expiry and the server up");

    // One round only: the healthy VTXO must be refreshed in it.
    stack.trigger_round();
    let mut refreshed = false;
    for _ in 0..30 {
        stack.bitcoind.mine(1);
        std::thread::sleep(Duration::from_secs(1));
        crate::assert_no_exit(&alice, "while the round was played");
        if !vtxo_ids(&alice).contains(&good) {
            refreshed = true;
            break;
        }
    }
    let ids = vtxo_ids(&alice);
    assert!(
        refreshed,
        "the healthy VTXO is refreshed in the one round: {ids:?}; rounds {}; health {}",
        alice.get_ok("/api/v1/wallet/rounds"),
        alice.get("/health").1
    );
    assert!(
        ids.contains(&bad),
        "the rejected VTXO is left as it was: {ids:?}"
    );
    assert_eq!(ids.len(), 2, "the rejected VTXO and the new one: {ids:?}");
    let (rejected, submitted) = proxy.submissions();
    assert!(
        rejected >= 1 && submitted >= 1,
        "rejected {rejected}, submitted {submitted}"
    );

    // Two movements, as barkd records them: the rejected batch failed, the rest made it.
    let refreshes = wait_for("the successful refresh in the history", 60, || {
        let refreshes = refresh_movements(&alice);
        refreshes
            .iter()
            .any(|m| m["status"] == "successful")
            .then_some(refreshes)
    });
    let failed = refreshes
        .iter()
        .find(|m| m["status"] == "failed")
        .unwrap_or_else(|| panic!("a failed refresh for the rejected batch: {refreshes:?}"));
    let failed_inputs = inputs(failed);
    assert!(
        failed_inputs.contains(&bad.as_str()) && failed_inputs.contains(&good.as_str()),
        "the failed refresh tried both inputs: {failed}"
    );
    let succeeded = refreshes
        .iter()
        .find(|m| m["status"] == "successful")
        .expect("a successful refresh");
    assert_eq!(
        inputs(succeeded),
        vec![good.as_str()],
        "the successful refresh dropped the rejected input: {succeeded}"
    );
    assert_ne!(failed["id"], succeeded["id"], "two distinct movements");

    // The rejected VTXO stays spendable, and the watchdog has not exited anything.
    let (_, health) = alice.get("/health");
    assert_eq!(health["exits"]["started_automatically"], 0, "{health}");
    assert_eq!(health["autopilot"]["acting"], true, "{health}");
    crate::assert_no_exit(&alice, "at the end");
    println!(
        "e2e maintenance around a rejected input: stack up in {:.1} s, scenario {:.1} s; \
         {rejected} submission(s) rejected, {submitted} passed",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

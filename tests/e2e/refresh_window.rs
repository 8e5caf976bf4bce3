//! Scenario 13: under an Ark server whose VTXOs live 32 blocks (and whose exits wait
//! the usual 12), a VTXO that enters bark's refresh window, and then goes past its exit
//! deadline and its expiry with nobody calling the API, is refreshed in the next round
//! by bark's maintenance refresh, and the watchdog never starts an exit while the
//! server answers (issues 18 and 46).
//!
//! With the watchdog's old fixed margins (72 and 288 blocks against a 32-block
//! lifetime) every VTXO was "at risk" from birth, and one 10 blocks from its exit
//! deadline was in the margin's "last quarter": the watchdog exited it while the
//! maintenance refresh was taking it into the round (issue 18). Then the watchdog
//! computed that bark could not refresh into VTXOs this short-lived with a 12-block
//! exit delta, kept the maintenance refresh out of rounds and exited the VTXO; but bark
//! forfeits an expired input into any new VTXO, and barkd refreshes it (issue 46).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::assert_no_exit;
use crate::stack::{self, Stack, wait_for};

/// The Ark server's VTXO lifetime in this scenario, in blocks (barkd's own test of the
/// maintenance refresh uses the same), with its default exit delta.
const LIFETIME: u16 = 32;
const EXIT_DELTA: u16 = stack::DEFAULT_VTXO_EXIT_DELTA;

fn health(alice: &stack::Berthd) -> Value {
    alice.get("/health").1
}

#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn a_vtxo_due_for_refresh_is_refreshed_in_the_next_round_and_never_exited() {
    let stack = Stack::start_with_terms("refresh_window", LIFETIME, EXIT_DELTA);
    let started = Instant::now();
    // No thresholds in berth.toml: the watchdog derives them. Checks every second so
    // that a wrong decision would have many chances to show.
    let alice = stack.berthd_with("alice", "[watchdog]\ncheck_interval_secs = 1\n");
    crate::board_and_confirm(&stack, &alice, 200_000);
    let vtxos = alice.get_ok("/api/v1/wallet/vtxos");
    let old = vtxos[0]["id"].as_str().expect("id").to_string();
    let expiry = vtxos[0]["expiry_height"].as_u64().expect("expiry_height");

    // The thresholds come from bark's regtest config and the server's lifetime.
    let thresholds = wait_for("the watchdog's thresholds in /health", 30, || {
        let h = health(&alice);
        let t = &h["vtxo_expiry"]["thresholds"];
        (t["vtxo_lifetime_blocks"] == LIFETIME).then(|| t.clone())
    });
    assert_eq!(thresholds["warn_blocks"], 12, "{thresholds}");
    assert_eq!(thresholds["exit_margin_blocks"], 12, "{thresholds}");
    assert_eq!(thresholds["refresh_threshold_blocks"], 12, "{thresholds}");
    assert_eq!(
        thresholds["vtxo_exit_delta_blocks"], EXIT_DELTA,
        "{thresholds}"
    );
    // No rule of Berth's own about the lifetime a refresh needs.
    assert!(thresholds.get("refresh_possible").is_none(), "{thresholds}");

    // Into bark's refresh window (tip > expiry - 12): 11 blocks before expiry, 10
    // before the board's exit deadline, inside the watchdog's 12-block margin.
    let tip = stack.bitcoind.mine(expiry - 11 - stack.bitcoind.height());
    let seen = wait_for("the watchdog to see the VTXO at risk", 60, || {
        assert_no_exit(&alice, "while the VTXO waited for its round");
        let h = health(&alice);
        let at_tip = h["chain_tip"]["height"] == tip;
        (at_tip && h["vtxo_expiry"]["at_risk"] == 1).then_some(h)
    });
    assert_eq!(
        seen["vtxo_expiry"]["blocks_until_first_at_risk"], 10,
        "{seen}"
    );
    assert_eq!(seen["vtxo_expiry"]["held"], 0, "{seen}");
    assert!(seen["vtxo_expiry"]["next_round_at"].is_string(), "{seen}");
    assert_eq!(seen["ark_server"]["reachable"], true, "{seen}");
    assert_eq!(seen["autopilot"]["acting"], true, "{seen}");

    // Past the exit deadline and the expiry, with the server up and no round yet: bark
    // refreshes an expired VTXO too, so the watchdog must not exit it. Several checks
    // (one a second) at the new tip.
    let tip = stack.bitcoind.mine(expiry + 2 - stack.bitcoind.height());
    let past = wait_for("the watchdog to see the VTXO past expiry", 60, || {
        let h = health(&alice);
        (h["chain_tip"]["height"] == tip).then_some(h)
    });
    assert!(
        past["vtxo_expiry"]["blocks_until_first_at_risk"]
            .as_i64()
            .is_some_and(|left| left < 0),
        "{past}"
    );
    for _ in 0..5 {
        std::thread::sleep(Duration::from_secs(1));
        assert_no_exit(&alice, "while the VTXO was past its expiry, the server up");
    }

    // The server runs a round (its own interval is an hour). The rounds task joins it
    // with the VTXO; nobody calls the API to refresh.
    stack.trigger_round();
    let mut triggered = Instant::now();
    let mut triggers = 1;
    let mut mined_for: Option<String> = None;
    let fresh = wait_for("the maintenance refresh to replace the VTXO", 180, || {
        assert_no_exit(&alice, "while the VTXO was being refreshed");
        let vtxos = alice.get_ok("/api/v1/wallet/vtxos");
        let vtxos = vtxos.as_array()?;
        if let Some(fresh) = vtxos.iter().find(|v| {
            v["id"] != old.as_str()
                && v["state"]["type"] == "spendable"
                && v["expiry_height"].as_u64() > Some(expiry)
        }) {
            return Some(fresh["id"].as_str()?.to_string());
        }
        let untouched = vtxos
            .iter()
            .any(|v| v["id"] == old.as_str() && v["state"]["type"] == "spendable");
        let pending = alice.get_ok("/api/v1/wallet/rounds");
        match pending.as_array().and_then(|r| r.first()) {
            // The round's funding transaction needs a confirmation: the chain moves on.
            Some(round) if round["funding_txid"].is_string() => {
                let txid = round["funding_txid"].as_str().map(str::to_string);
                if mined_for != txid {
                    stack.bitcoind.mine(1);
                    mined_for = txid;
                }
            }
            // No round took the VTXO: the round may have started before the rounds task
            // was following the server; ask for another, not more often than every 15 s.
            None if untouched && triggered.elapsed() > Duration::from_secs(15) && triggers < 4 => {
                stack.trigger_round();
                triggered = Instant::now();
                triggers += 1;
            }
            _ => {}
        }
        None
    });

    // The pending round clears once its funding transaction confirmed, with no call
    // (the ark-sync task's next pass: a new tip, at most daemon_sync_interval_secs).
    wait_for("no pending rounds", 120, || {
        assert_no_exit(&alice, "after the round");
        (alice.get_ok("/api/v1/wallet/rounds") == json!([])).then_some(())
    });
    let vtxos = alice.get_ok("/api/v1/wallet/vtxos");
    let ids: Vec<&str> = vtxos
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|v| v["id"].as_str())
        .collect();
    assert_eq!(
        ids,
        vec![fresh.as_str()],
        "only the new VTXO is left: {vtxos}"
    );
    let balance = alice.get_ok("/api/v1/wallet/balance");
    assert_eq!(balance["spendable_sat"], 200_000, "{balance}");

    // The watchdog saw the new VTXO and has nothing to do; it never started an exit.
    let tip = stack.bitcoind.height();
    let after = wait_for("the watchdog to check the new VTXO", 30, || {
        let h = health(&alice);
        (h["chain_tip"]["height"] == tip && h["vtxo_expiry"]["at_risk"] == 0).then_some(h)
    });
    assert_eq!(after["exits"]["started_automatically"], 0, "{after}");
    assert_eq!(after["status"], "ready", "{after}");
    let (_, alerts) =
        alice.get("/api/v1/notifications/wait?after=0&timeout=0&types=vtxo-expiring,exit-started");
    let kinds: Vec<&str> = alerts["notifications"]
        .as_array()
        .expect("notifications")
        .iter()
        .filter_map(|n| n["type"].as_str())
        .collect();
    assert!(
        kinds.contains(&"vtxo-expiring"),
        "the watchdog saw the VTXO due: {alerts}"
    );
    assert!(!kinds.contains(&"exit-started"), "{alerts}");
    assert_no_exit(&alice, "at the end");

    println!(
        "e2e refresh window: stack up in {:.1} s, scenario {:.1} s, {triggers} round \
         trigger(s); {old} -> {fresh}",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

//! Scenario 21: bark's `daemon_manual_sync` (issue 46). A wallet whose `config.toml`
//! says `daemon_manual_sync = true` is left alone as barkd leaves it: no background
//! sync, round following or exit progression, and the watchdog only watches. So an exit
//! started through the API broadcasts nothing on its own and stays cancellable (barkd's
//! own test relies on that), until the client advances it; payments arrive when the
//! client syncs; `/health` says the autopilot does not act.
//!
//! Before, berthd ran its background tasks whatever the setting, and its exit driver
//! broadcast an exit within a second of `exit/start`.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::stack::{Berthd, Stack, wait_for};

/// The fee-paying children an exit's status lists: an exit transaction goes out with
/// one, so none means nothing was broadcast.
fn fee_paying_children(status: &serde_json::Value) -> usize {
    status["transactions"]
        .as_array()
        .map_or(0, |t| t.iter().filter(|p| !p["child"].is_null()).count())
}

#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn manual_sync_leaves_syncing_refreshing_and_exits_to_the_client() {
    let stack = Stack::start("manual_sync");
    let started = Instant::now();
    let alice = stack.berthd("alice");
    crate::board_and_confirm(&stack, &alice, 500_000);

    let datadir = stack.datadir_with_config("bob", "[watchdog]\ncheck_interval_secs = 1\n");
    let config = datadir.join("config.toml");
    let mut text = std::fs::read_to_string(&config).expect("config.toml");
    text.push_str("daemon_manual_sync = true\n");
    std::fs::write(&config, text).expect("config.toml");
    let bob = Berthd::start("bob", &datadir);
    let (status, body) = bob.post("/api/v1/wallet/create", json!({"network": "regtest"}));
    assert_eq!(status, 200, "create: {body}");
    // On-chain coins for the exit's fee-paying child.
    crate::fund_onchain(&stack, &bob, 1_000_000);

    // /health: the autopilot watches but does not act, and no wallet task runs.
    let health = wait_for("the autopilot's first check of bob's wallet", 30, || {
        let (_, h) = bob.get("/health");
        h["autopilot"]["manual_sync"].is_boolean().then_some(h)
    });
    assert_eq!(health["autopilot"]["manual_sync"], true, "{health}");
    assert_eq!(health["autopilot"]["acting"], false, "{health}");
    assert_eq!(health["autopilot"]["watchdog"], true, "{health}");
    let tasks: Vec<&str> = health["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for name in [
        "onchain-sync",
        "ark-sync",
        "rounds",
        "mailbox",
        "exit-driver",
    ] {
        assert!(
            !tasks.contains(&name),
            "{name} runs under manual sync: {health}"
        );
    }
    assert!(tasks.contains(&"autopilot"), "{health}");

    // Payments wait for the client's sync.
    let address = bob.post_ok("/api/v1/wallet/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_string();
    for sats in [200_000, 100_000] {
        alice.post_ok(
            "/api/v1/wallet/send",
            json!({"destination": address, "amount_sat": sats}),
        );
    }
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        bob.get_ok("/api/v1/wallet/vtxos"),
        json!([]),
        "nothing is received without a sync"
    );
    let vtxos = wait_for("bob's sync to bring both payments", 60, || {
        bob.post_ok("/api/v1/wallet/sync", json!({}));
        let vtxos = bob.get_ok("/api/v1/wallet/vtxos");
        (vtxos.as_array()?.len() == 2).then_some(vtxos)
    });
    let live = vtxos[0]["id"].as_str().expect("id").to_string();
    let canceled = vtxos[1]["id"].as_str().expect("id").to_string();

    // Exits start, one is cancelled; nothing is broadcast on its own, blocks or not:
    // the live exit stays at its start, with no transaction.
    bob.post_ok("/api/v1/exits/start/all", json!({}));
    bob.post_ok(&format!("/api/v1/exits/cancel/{canceled}"), json!({}));
    let live_path = format!("/api/v1/exits/status/vtxo/{live}");
    for _ in 0..5 {
        std::thread::sleep(Duration::from_secs(2));
        let status = bob.get_ok(&format!("{live_path}?transactions=true"));
        assert_eq!(status["state"]["type"], "start", "{status}");
        assert_eq!(
            fee_paying_children(&status),
            0,
            "nothing broadcast: {status}"
        );
        stack.bitcoind.mine(1);
    }
    let finished = bob.get_ok("/api/v1/exits/status/finished");
    assert_eq!(finished[0]["vtxo_id"], canceled.as_str(), "{finished}");
    assert_eq!(finished[0]["state"]["type"], "canceled", "{finished}");
    let (_, health) = bob.get("/health");
    assert_eq!(health["exits"]["started_automatically"], 0, "{health}");

    // What the client asks for still runs: the exit advances when told to.
    wait_for("the exit to advance when the client asks", 60, || {
        bob.post_ok("/api/v1/exits/progress", json!({}));
        let status = bob.get_ok(&format!("{live_path}?transactions=true"));
        (fee_paying_children(&status) > 0).then_some(())
    });
    println!(
        "e2e manual sync: stack up in {:.1} s, scenario {:.1} s",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

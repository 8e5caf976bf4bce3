//! berthd as a drop-in for barkd, driven the way barkd clients drive it (Umbrel's
//! bark-web, barkd's own integration harness): no waiting between create and the next
//! call, no waiting after a restart; and "restore from the phrase" running bark's seed
//! recovery, with what it found told honestly.

use std::time::Instant;

use serde_json::{Value, json};

use crate::stack::{Berthd, Stack, wait_for};
use crate::{board_and_confirm, harness};

/// The body of a create for this stack, with `extra` fields merged in.
fn create_body(stack: &Stack, ark_server: &str, bitcoind_url: &str, extra: Value) -> Value {
    let mut body = json!({
        "network": "regtest",
        "ark_server": ark_server,
        "chain_source": {"bitcoind": {
            "bitcoind": bitcoind_url,
            "bitcoind_auth": {"cookie": {"cookie": stack.bitcoind.cookie().display().to_string()}},
        }},
    });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    body
}

/// A berthd on an empty datadir (no `config.toml`: the create names the sources).
fn bare_berthd(stack: &Stack, name: &str) -> Berthd {
    let datadir = stack.dir().join(format!("berthd-{name}"));
    std::fs::create_dir_all(&datadir).expect("datadir");
    Berthd::start(name, &datadir)
}

/// Scenario 11: every call a barkd client makes right after create succeeds, at once:
/// create through barkd's alias `POST /api/v1/wallet`, then an Ark address, the server
/// info, the next round, `connected`, an on-chain address, the balance. After a SIGKILL
/// and restart, the first request that needs the wallet waits for its load instead of
/// failing. Without `force` an unreachable Ark server or chain source is a 503 that
/// leaves nothing behind; with `force` the answer comes at once and the wallet loads
/// once they answer.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn a_barkd_client_uses_the_wallet_the_moment_create_returns() {
    let stack = Stack::start("a_barkd_client_uses_the_wallet_the_moment_create_returns");
    let started = Instant::now();
    let mut carol = bare_berthd(&stack, "carol");
    let created = carol.post_ok(
        "/api/v1/wallet",
        create_body(&stack, &stack.ark_url, &stack.bitcoind.url(), json!({})),
    );
    let fingerprint = created["fingerprint"]
        .as_str()
        .expect("fingerprint")
        .to_string();
    // No pause: each of these is what a client asks next.
    let wallet = carol.get_ok("/api/v1/wallet");
    assert_eq!(wallet["fingerprint"], fingerprint.as_str(), "{wallet}");
    assert_eq!(wallet["loaded"], true, "{wallet}");
    assert_eq!(
        wallet["recovery"],
        Value::Null,
        "a new seed has nothing to recover: {wallet}"
    );
    let address = carol.post_ok("/api/v1/wallet/addresses/next", json!({}));
    assert!(address["address"].is_string(), "{address}");
    let info = carol.get_ok("/api/v1/wallet/ark-info");
    assert_eq!(info["network"], "regtest", "{info}");
    carol.get_ok("/api/v1/wallet/next-round");
    let connected = carol.get_ok("/api/v1/wallet/connected");
    assert_eq!(connected["connected"], true, "{connected}");
    let onchain = carol.post_ok("/api/v1/onchain/addresses/next", json!({}));
    assert!(
        onchain["address"]
            .as_str()
            .is_some_and(|a| a.starts_with("bcrt1")),
        "{onchain}"
    );
    let balance = carol.get_ok("/api/v1/wallet/balance");
    assert_eq!(balance["spendable_sat"], 0, "{balance}");
    let (status, body) = carol.post(
        "/api/v1/wallet/create",
        create_body(&stack, &stack.ark_url, &stack.bitcoind.url(), json!({})),
    );
    assert_eq!(status, 422, "a wallet exists: {body}");

    // A power cut, and the client asks again the moment berthd answers.
    carol.kill();
    let restarted = Instant::now();
    carol.restart();
    let balance = carol.get_ok("/api/v1/wallet/balance");
    assert_eq!(balance["spendable_sat"], 0, "{balance}");
    let connected = carol.get_ok("/api/v1/wallet/connected");
    assert_eq!(connected["connected"], true, "{connected}");
    carol.get_ok("/api/v1/wallet/ark-info");
    let reload = restarted.elapsed();

    // Without force: an unreachable Ark server, then chain source, is a 503, and the
    // datadir holds nothing of the attempt.
    let dave = bare_berthd(&stack, "dave");
    let dead = format!("http://127.0.0.1:{}", harness::free_port());
    for (what, ark, chain) in [
        ("Ark server", dead.as_str(), stack.bitcoind.url()),
        ("chain source", stack.ark_url.as_str(), dead.clone()),
    ] {
        let (status, body) = dave.post(
            "/api/v1/wallet/create",
            create_body(&stack, ark, &chain, json!({})),
        );
        assert_eq!(status, 503, "{what} unreachable: {body}");
        assert!(
            body["message"].as_str().is_some_and(|m| m.contains(what)),
            "the answer names the {what}: {body}"
        );
        let wallet = dave.get_ok("/api/v1/wallet");
        assert_eq!(wallet["fingerprint"], Value::Null, "{wallet}");
        for file in ["config.toml", "mnemonic", "seed.sealed"] {
            assert!(
                !dave.datadir.join(file).exists(),
                "{what}: {file} left behind"
            );
        }
    }
    // With force and a dead chain source: an answer at once, a wallet that is not
    // loaded, and requests that need it say so.
    let forced = dave.post_ok(
        "/api/v1/wallet/create",
        create_body(&stack, &stack.ark_url, &dead, json!({"force": true})),
    );
    assert!(forced["fingerprint"].is_string(), "{forced}");
    let wallet = dave.get_ok("/api/v1/wallet");
    assert_eq!(wallet["loaded"], false, "{wallet}");
    let (status, body) = dave.get("/api/v1/onchain/balance");
    assert_eq!(status, 503, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("not loaded yet")),
        "{body}"
    );
    // Reads come from the store, marked (Berth; barkd answers 503 here).
    let balance = dave.get_ok("/api/v1/wallet/balance");
    assert_eq!(balance["possibly_stale"], true, "{balance}");

    println!(
        "e2e a_barkd_client_uses_the_wallet_the_moment_create_returns: stack up in {:.1} s, \
         scenario {:.1} s, first answers after a restart {:.2} s",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        reload.as_secs_f64()
    );
}

/// The recovery outcome on `GET /api/v1/wallet`, as a tuple that is compared whole.
fn recovery_summary(wallet: &Value) -> (String, u64, u64, u64, u64, u64, u64) {
    let r = &wallet["recovery"];
    let n = |k: &str| {
        r[k].as_u64()
            .unwrap_or_else(|| panic!("recovery.{k}: {wallet}"))
    };
    (
        r["status"].as_str().unwrap_or_default().to_string(),
        n("found"),
        n("recovered"),
        n("unconfirmed"),
        n("unconfirmed_sat"),
        n("unavailable"),
        n("beyond_gap_limit"),
    )
}

/// Scenario 12: a wallet that boarded and received an Ark payment is wiped to its
/// phrase (its SD card died) and imported into a fresh berthd. bark's seed recovery
/// runs before create answers: it reads the mailboxes and reports what this Ark server
/// could and could not return (it is older than bark 0.8 and cannot serve recovered
/// VTXOs or their state, so nothing is restored as spendable, and the wallet, `/health`
/// and a `seed-recovery` event say so). The on-chain balance comes back from the
/// birthday. Importing again gives the same result, and a restart does not forget it.
#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn import_runs_seed_recovery_and_says_what_it_found() {
    let stack = Stack::start("import_runs_seed_recovery_and_says_what_it_found");
    let started = Instant::now();
    let birthday = stack.bitcoind.height();
    let mut alice = stack.berthd("alice");
    let bob = stack.berthd("bob");
    board_and_confirm(&stack, &alice, 300_000);
    board_and_confirm(&stack, &bob, 200_000);
    let alice_address = alice.post_ok("/api/v1/wallet/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_string();
    bob.post_ok(
        "/api/v1/wallet/send",
        json!({"destination": alice_address, "amount_sat": 50_000}),
    );
    wait_for("alice to receive the payment", 60, || {
        alice.post_ok("/api/v1/wallet/sync", json!({}));
        let spendable = alice.get_ok("/api/v1/wallet/balance")["spendable_sat"].as_u64()?;
        (spendable == 350_000).then_some(())
    });
    alice.post_ok("/api/v1/onchain/sync", json!({}));
    let onchain = alice.get_ok("/api/v1/onchain/balance")["confirmed_sat"]
        .as_u64()
        .expect("confirmed_sat");
    assert!(onchain > 0, "alice keeps on-chain change");
    let fingerprint = alice.get_ok("/api/v1/wallet")["fingerprint"].clone();
    let phrase = std::fs::read_to_string(alice.datadir.join("mnemonic"))
        .expect("alice's plaintext mnemonic")
        .trim()
        .to_string();
    alice.kill();

    // A new box: an empty datadir, and the phrase with the sources in the request.
    let mut restored = bare_berthd(&stack, "alice-restored");
    let import = create_body(
        &stack,
        &stack.ark_url,
        &stack.bitcoind.url(),
        json!({"mnemonic": phrase, "birthday_height": birthday}),
    );
    let imported_at = Instant::now();
    let created = restored.post_ok("/api/v1/wallet/create", import.clone());
    let import_took = imported_at.elapsed();
    assert_eq!(created["fingerprint"], fingerprint, "{created}");
    let wallet = restored.get_ok("/api/v1/wallet");
    assert_eq!(wallet["loaded"], true, "{wallet}");
    // What this server can do: the mailboxes name the board (by id, in the recovery
    // mailbox) and carry the payment (whole, in the arkoor mailbox); it cannot return
    // the board's VTXO, nor say whether either is unspent.
    println!("e2e: what seed recovery found: {}", wallet["recovery"]);
    let first = recovery_summary(&wallet);
    assert_eq!(
        first,
        ("incomplete".to_string(), 2, 0, 1, 50_000, 1, 0),
        "status, found, recovered, unconfirmed, unconfirmed_sat, unavailable, beyond gap: {wallet}"
    );
    assert!(
        wallet["recovery"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("could not return")),
        "{wallet}"
    );
    let balance = restored.get_ok("/api/v1/wallet/balance");
    assert_eq!(
        balance["spendable_sat"], 0,
        "nothing shown as spendable: {balance}"
    );
    let (status, health) = restored.get("/health");
    assert_eq!(status, 503, "{health}");
    assert!(
        health["reasons"].as_array().is_some_and(|r| r
            .iter()
            .any(|r| r.as_str().is_some_and(|r| r.contains("seed recovery")))),
        "{health}"
    );
    let events = restored.get_ok("/api/v1/notifications/wait?types=seed-recovery&timeout=0");
    let event = &events["notifications"][0];
    assert_eq!(event["type"], "seed-recovery", "{events}");
    assert_eq!(event["vtxos"].as_array().map(Vec::len), Some(2), "{events}");
    // The on-chain wallet, from the birthday.
    restored.post_ok("/api/v1/onchain/sync", json!({}));
    let balance = restored.get_ok("/api/v1/onchain/balance");
    assert_eq!(balance["confirmed_sat"], onchain, "{balance}");

    // A restart keeps what recovery found (it does not run again).
    restored.kill();
    restored.restart();
    assert_eq!(recovery_summary(&restored.get_ok("/api/v1/wallet")), first);
    // As barkd: what recovery restored has no movement (no payment told again), the
    // load's repair of cut receives included.
    let history = restored.get_ok("/api/v1/history");
    assert!(
        !history.to_string().contains(r#""kind":"receive""#),
        "{history}"
    );

    // Delete and import again: the same result. barkd's lock survives the delete.
    let (status, _, deleted) = restored.call_with(
        "DELETE",
        "/api/v1/wallet",
        Some(json!({"dangerous": true, "fingerprint": fingerprint})),
        &[],
    );
    assert_eq!(status, 200, "{deleted}");
    assert!(restored.datadir.join("barkd.lock").exists());
    let again = restored.post_ok("/api/v1/wallet/create", import);
    assert_eq!(again["fingerprint"], fingerprint, "{again}");
    assert_eq!(recovery_summary(&restored.get_ok("/api/v1/wallet")), first);
    println!(
        "e2e import_runs_seed_recovery_and_says_what_it_found: stack up in {:.1} s, scenario \
         {:.1} s, import (recovery included) {:.2} s",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        import_took.as_secs_f64()
    );
}

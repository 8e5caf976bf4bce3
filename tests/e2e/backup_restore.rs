//! Scenario 14: the SD card dies. A wallet that boarded, paid and started an exit backs
//! up to its backup directory; berthd is killed (SIGKILL) and its datadir wiped; one
//! `berthd restore` with the phrase brings the datadir back; berthd starts as before
//! the loss: the same balance and VTXOs, the exit goes on to claimable, and a payment
//! goes out (issue 21).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::stack::{Berthd, Stack, wait_for};
use crate::{board_and_confirm, fund_onchain, mine_until_exit_is};

/// The VTXOs as a restore must bring them back: id, amount and state, sorted.
fn vtxos(berthd: &Berthd) -> Vec<(String, u64, String)> {
    let mut vtxos: Vec<(String, u64, String)> = berthd
        .get_ok("/api/v1/wallet/vtxos")
        .as_array()
        .expect("vtxos")
        .iter()
        .map(|v| {
            (
                v["id"].as_str().expect("id").to_owned(),
                v["amount_sat"].as_u64().expect("amount"),
                v["state"]["type"].as_str().expect("state").to_owned(),
            )
        })
        .collect();
    vtxos.sort();
    vtxos
}

fn ark_address(berthd: &Berthd) -> String {
    berthd.post_ok("/api/v1/wallet/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_owned()
}

#[test]
#[ignore = "needs the regtest stack: run scripts/e2e"]
fn a_backup_brings_the_wallet_back_after_the_card_dies() {
    let stack = Stack::start("a_backup_brings_the_wallet_back_after_the_card_dies");
    let started = Instant::now();
    let usb = stack.dir().join("usb");
    std::fs::create_dir_all(&usb).expect("backup directory");
    let berth_toml = format!("[backup]\ndirectory = \"{}\"\n", usb.display());
    let mut alice = stack.berthd_with("alice", &berth_toml);
    let bob = stack.berthd("bob");

    // Board twice (two VTXOs: one to exit, one to pay from), pay bob, start an exit of
    // one VTXO and let it broadcast.
    fund_onchain(&stack, &alice, 300_000);
    board_and_confirm(&stack, &alice, 300_000);
    alice.post_ok(
        "/api/v1/boards/board-amount",
        json!({"amount_sat": 200_000}),
    );
    stack
        .bitcoind
        .wait_for_mempool("the second board's funding tx");
    stack.bitcoind.mine(3);
    wait_for("both boards to be spendable", 120, || {
        alice.post_ok("/api/v1/wallet/sync", json!({}));
        let spendable = alice.get_ok("/api/v1/wallet/balance")["spendable_sat"].as_u64()?;
        (spendable == 500_000).then_some(())
    });
    let bob_address = ark_address(&bob);
    alice.post_ok(
        "/api/v1/wallet/send",
        json!({"destination": bob_address, "amount_sat": 50_000}),
    );
    let exiting = alice
        .get_ok("/api/v1/wallet/vtxos")
        .as_array()
        .expect("vtxos")
        .iter()
        .filter(|v| v["state"]["type"] == "spendable")
        .min_by_key(|v| v["amount_sat"].as_u64())
        .map(|v| v["id"].as_str().expect("id").to_owned())
        .expect("a spendable VTXO");
    alice.post_ok(
        "/api/v1/exits/start/vtxos",
        json!({"vtxos": [exiting.clone()]}),
    );
    let status_path = format!("/api/v1/exits/status/vtxo/{exiting}");
    mine_until_exit_is(&stack, &alice, &status_path, "processing", 120);

    // Back up now (the schedule would too, a minute after the change), then note what
    // a restore must bring back; no block is mined in between.
    let backup = alice.post_ok("/api/v1/backups", json!({}));
    assert_eq!(backup["verified"], true, "{backup}");
    let file = usb.join(backup["name"].as_str().expect("name"));
    let listed = alice.get_ok("/api/v1/backups");
    assert!(
        listed["backups"]
            .as_array()
            .is_some_and(|b| b.iter().any(|b| b["name"] == backup["name"])),
        "{listed}"
    );
    let balance = alice.get_ok("/api/v1/wallet/balance");
    let before = vtxos(&alice);
    let onchain = alice.get_ok("/api/v1/onchain/balance")["confirmed_sat"].clone();
    assert!(
        before.iter().any(|(id, _, _)| *id == exiting),
        "the exiting VTXO is listed: {before:?}"
    );
    let fingerprint = alice.get_ok("/api/v1/wallet")["fingerprint"].clone();
    // The phrase, written down when the wallet was made (barkd's plaintext file here).
    let phrase = stack.dir().join("alice-phrase");
    std::fs::copy(alice.datadir.join("mnemonic"), &phrase).expect("keep the phrase");

    // The card dies.
    alice.kill();
    std::fs::remove_dir_all(&alice.datadir).expect("wipe the datadir");

    // A new card: the box's settings, then one command.
    std::fs::create_dir_all(&alice.datadir).expect("new datadir");
    std::fs::write(alice.datadir.join("berth.toml"), &berth_toml).expect("berth.toml");
    let out = crate::harness::berthd(
        &alice.datadir,
        &[
            "restore",
            &file.display().to_string(),
            "--mnemonic-file",
            &phrase.display().to_string(),
        ],
    );
    assert!(
        out.status.success(),
        "restore: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let restored_at = Instant::now();
    let alice = Berthd::start("alice", &alice.datadir);
    assert_eq!(alice.get_ok("/api/v1/wallet")["fingerprint"], fingerprint);
    // Read from the restored store at once, before the wallet may have loaded: the
    // same sums, whether or not they are marked possibly stale yet.
    let sums = |mut b: serde_json::Value| {
        b.as_object_mut().map(|o| o.remove("possibly_stale"));
        b
    };
    assert_eq!(
        sums(alice.get_ok("/api/v1/wallet/balance")),
        sums(balance.clone())
    );
    assert_eq!(vtxos(&alice), before);
    assert_eq!(
        alice.get_ok("/api/v1/onchain/balance")["confirmed_sat"],
        onchain
    );

    // The console's overview shows the restored wallet: its VTXOs' expiry chart and
    // its movements.
    let code = crate::harness::uri_param(&crate::harness::open_window(&alice.datadir, "read"), "t")
        .to_owned();
    let origin = format!("http://127.0.0.1:{}", alice.port());
    let (status, raw) = crate::harness::post_form(
        alice.port(),
        "/console/sign-in",
        &[("Origin", &origin)],
        &format!("code={code}&name=Browser"),
    );
    assert_eq!(status, 303, "{raw}");
    let cookie = raw
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .expect("session cookie")
        .to_owned();
    // The expiry chart is the autopilot's view, which its first check after the load
    // fills: wait for that check, not for a page served in the moment before it.
    let shown = [
        "Unspent value by time left",
        "Latest movements",
        "Board (board)",
    ];
    let mut last = String::new();
    let found = (0..60).any(|_| {
        let (status, page) =
            crate::harness::request(alice.port(), "GET", "/", &[("Cookie", &cookie)], None);
        assert_eq!(status, 200, "{page}");
        let all = shown.iter().all(|s| page.contains(s));
        last = page;
        if !all {
            std::thread::sleep(Duration::from_millis(500));
        }
        all
    });
    assert!(found, "the overview shows {shown:?} within 30 s: {last}");

    // The exit goes on where it was, to claimable, with no call but status.
    mine_until_exit_is(&stack, &alice, &status_path, "claimable", 300);
    // And a payment goes out.
    let paid_before = bob.get_ok("/api/v1/wallet/balance")["spendable_sat"]
        .as_u64()
        .expect("spendable");
    alice.post_ok(
        "/api/v1/wallet/send",
        json!({"destination": ark_address(&bob), "amount_sat": 20_000}),
    );
    wait_for("bob to receive the payment after the restore", 60, || {
        bob.post_ok("/api/v1/wallet/sync", json!({}));
        let spendable = bob.get_ok("/api/v1/wallet/balance")["spendable_sat"].as_u64()?;
        (spendable == paid_before + 20_000).then_some(())
    });
    // The restored daemon backs up on its own again, to the same directory.
    wait_for("a backup by the restored daemon", 180, || {
        let listed: Value = alice.get_ok("/api/v1/backups");
        let newest = listed["backups"][0].clone();
        (newest["name"] != backup["name"] && newest["verified"] == true).then_some(())
    });

    println!(
        "e2e a_backup_brings_the_wallet_back_after_the_card_dies: stack up in {:.1} s, \
         scenario {:.1} s, restore to claimable and paid {:.1} s; backup {} bytes",
        stack.started_in.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        restored_at.elapsed().as_secs_f64(),
        backup["size_bytes"]
    );
}

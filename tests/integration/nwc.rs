//! Nostr Wallet Connect through real parts: berthd, a real relay (`nostr-relay`, the
//! PyPI package, a process of its own on loopback, stopped by pid) and the client
//! library apps use (Alby's `@getalby/sdk`, driven by node: `tests/nwc/client.mjs`).
//! `scripts/ensure-deps` installs both; without them the tests are skipped, and say so.
//!
//! No regtest stack: the wallet is created with dead chain and Ark URLs, so it holds
//! nothing. That is enough for everything but paying (`tests/e2e` pays): an
//! over-limit payment is `QUOTA_EXCEEDED` even from an empty wallet, and one within
//! the limits `INSUFFICIENT_BALANCE`, its budget given back.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::nwc::{Relay, Strict, TestCa, Tools, code, now, wait_for_info};
use crate::harness::*;

mod household;
mod relays;

/// berthd with a wallet (dead URLs: it holds nothing), allowed to reach the loopback
/// relay at `relay`, and its admin bearer.
fn berthd_with_wallet(relay: &str) -> (tempfile::TempDir, PathBuf, Daemon, String) {
    berthd_with_wallet_env(relay, &[])
}

/// The same, with extra environment for berthd.
fn berthd_with_wallet_env(
    relay: &str,
    env: &[(&str, &str)],
) -> (tempfile::TempDir, PathBuf, Daemon, String) {
    berthd_with_offline_wallet(
        &format!("[egress]\nallow = [\"127.0.0.1\"]\n\n[nwc]\nrelays = [\"{relay}\"]\n"),
        env,
    )
}

fn connect(daemon: &Daemon, bearer: &str, body: Value) -> (String, Value) {
    let (status, raw) = daemon.post(
        "/api/v1/nwc/connections",
        &[("Authorization", bearer)],
        &body.to_string(),
    );
    assert_eq!(status, 200, "{raw}");
    let created = json_of(&raw);
    (
        created["uri"].as_str().expect("uri").to_string(),
        created["connection"].clone(),
    )
}

fn connections(daemon: &Daemon, bearer: &str) -> Value {
    let (status, raw) = daemon.get("/api/v1/nwc/connections", &[("Authorization", bearer)]);
    assert_eq!(status, 200, "{raw}");
    json_of(&raw)
}

#[test]
fn an_app_reaches_the_wallet_through_a_relay_within_its_limits() {
    let Some(tools) =
        Tools::find("nwc::an_app_reaches_the_wallet_through_a_relay_within_its_limits")
    else {
        return;
    };
    let relay = Relay::start(&tools);
    let (_tmp, _datadir, daemon, bearer) = berthd_with_wallet(&relay.url());
    let (uri, connection) = connect(
        &daemon,
        &bearer,
        json!({ "name": "Alby Go", "max_payment_sat": 1000, "budget_sat": 5000, "budget_renewal": "daily" }),
    );
    assert!(uri.starts_with("nostr+walletconnect://"), "{uri}");
    assert!(
        !connection.to_string().contains(uri_param(&uri, "secret")),
        "the secret is not listed"
    );

    // The info event, as the client reads it before its first request.
    let info = wait_for_info(&tools, &uri);
    assert_eq!(info["encryptions"], json!(["nip44_v2", "nip04"]), "{info}");
    let served = json!([
        "pay_invoice",
        "multi_pay_invoice",
        "make_invoice",
        "lookup_invoice",
        "list_transactions",
        "get_balance",
        "get_info",
        "get_budget"
    ]);
    let mut capabilities = served.clone();
    capabilities
        .as_array_mut()
        .expect("array")
        .push(json!("notifications"));
    assert_eq!(info["capabilities"], capabilities, "{info}");
    let notifications = json!(["payment_received", "payment_sent"]);
    assert_eq!(info["notifications"], notifications, "{info}");

    // /health and /metrics show the relay connected.
    let (_, raw) = daemon.get("/health", &[("Authorization", &bearer)]);
    let health = json_of(&raw);
    let relays = &health["nwc_relays"];
    assert_eq!(relays[0]["url"], format!("{}/", relay.url()), "{health}");
    assert_eq!(relays[0]["connected"], true, "{health}");
    let (_, metrics) = daemon.get("/metrics", &[("Authorization", &bearer)]);
    assert!(
        metrics.contains(&format!(
            "berth_nwc_relay_connected{{relay=\"{}/\"}} 1",
            relay.url()
        )),
        "{metrics}"
    );

    let got = tools.call(&uri, "get_info", json!({}));
    assert_eq!(got["result"]["methods"], served, "{got}");
    assert_eq!(got["result"]["network"], "regtest", "{got}");
    assert_eq!(got["result"]["notifications"], notifications, "{got}");
    assert!(
        got["result"].get("pubkey").is_none(),
        "an Ark wallet has no node key: {got}"
    );

    let balance = tools.call(&uri, "get_balance", json!({}));
    assert_eq!(balance["result"]["balance"], 0, "{balance}");

    let budget = tools.call(&uri, "get_budget", json!({}));
    assert_eq!(budget["result"]["total_budget"], 5_000_000, "{budget}");
    assert_eq!(budget["result"]["used_budget"], 0, "{budget}");
    assert_eq!(budget["result"]["renewal_period"], "daily", "{budget}");
    assert!(
        budget["result"]["renews_at"].as_u64().unwrap_or(0) > now(),
        "{budget}"
    );

    // Over the per-payment limit: refused before the (empty) balance is looked at.
    let regtest = || lightning_invoice::Currency::Regtest;
    let over = invoice(regtest(), Some(2_000_000), 1);
    let paid = tools.call(&uri, "pay_invoice", json!({ "invoice": over }));
    assert_eq!(code(&paid), "QUOTA_EXCEEDED", "{paid}");
    // Within the limits, but the wallet is empty: the budget it took is given back.
    let within = invoice(regtest(), Some(500_000), 2);
    let paid = tools.call(&uri, "pay_invoice", json!({ "invoice": within }));
    assert_eq!(code(&paid), "INSUFFICIENT_BALANCE", "{paid}");
    let budget = tools.call(&uri, "get_budget", json!({}));
    assert_eq!(budget["result"]["used_budget"], 0, "{budget}");

    // Several invoices at once (`multi_pay_invoice`, still sent by older clients): one
    // answer each, told apart by its `d` tag (the invoice's id, or its payment hash),
    // each checked against the limits on its own.
    let second = invoice(regtest(), Some(400_000), 4);
    let multi = tools.raw(
        &uri,
        "multi_pay_invoice",
        json!({ "invoices": [{ "id": "big", "invoice": over }, { "invoice": second }] }),
        json!({ "until": 2 }),
    );
    let answers = multi["responses"].as_array().expect("responses");
    assert_eq!(answers.len(), 2, "{multi}");
    let by_d = |d: &str| {
        answers
            .iter()
            .find(|a| a["d"] == d)
            .unwrap_or_else(|| panic!("no answer with d = {d}: {multi}"))
    };
    assert_eq!(code(by_d("big")), "QUOTA_EXCEEDED", "{multi}");
    assert_eq!(by_d("big")["result_type"], "multi_pay_invoice", "{multi}");
    let hash = <lightning_invoice::Bolt11Invoice as std::str::FromStr>::from_str(&second)
        .expect("invoice")
        .payment_hash()
        .to_string();
    assert_eq!(code(by_d(&hash)), "INSUFFICIENT_BALANCE", "{multi}");
    let budget = tools.call(&uri, "get_budget", json!({}));
    assert_eq!(budget["result"]["used_budget"], 0, "given back: {budget}");

    // The wallet's Lightning payments: the history cannot be read while the wallet
    // waits for its (dead) chain source, and the app is told why, as the REST history
    // says it (`tests/e2e` lists real payments); a page asked for in a way the spec
    // does not know is refused before that.
    let listed = tools.call(
        &uri,
        "list_transactions",
        json!({ "limit": 10, "unpaid": true }),
    );
    assert_eq!(code(&listed), "INTERNAL", "{listed}");
    assert!(
        listed["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not loaded yet"),
        "{listed}"
    );
    let odd = tools.call(&uri, "list_transactions", json!({ "type": "sideways" }));
    assert_eq!(code(&odd), "OTHER", "{odd}");

    // /metrics counts the payments each connection asked for, by its name.
    let asked = connections(&daemon, &bearer)[0]["payments"]
        .as_u64()
        .expect("payments");
    assert_eq!(asked, 2, "the two payments within the limits were begun");
    let (_, metrics) = daemon.get("/metrics", &[("Authorization", &bearer)]);
    let id = connection["id"].as_str().expect("id");
    assert!(
        metrics.contains(&format!(
            "berth_nwc_payments_total{{id=\"{id}\",connection=\"Alby Go\"}} {asked}"
        )),
        "{metrics}"
    );

    // A client that speaks only NIP-04 (no encryption tag).
    let balance = tools.client(&["call", &uri, "get_balance", "{}", "nip04"]);
    assert_eq!(balance["result"]["balance"], 0, "NIP-04: {balance}");
    // An encryption berthd does not speak.
    let odd = tools.raw(
        &uri,
        "get_balance",
        json!({}),
        json!({ "encryption": "nip99", "until": 1 }),
    );
    assert_eq!(
        code(&odd["responses"][0]),
        "UNSUPPORTED_ENCRYPTION",
        "{odd}"
    );

    // Requests outside the window are refused, not executed: one from the future is
    // answered so; one from an hour ago the subscription does not even receive (the
    // relay applies its `since`), so it is neither answered nor begun.
    let future = tools.raw(
        &uri,
        "get_balance",
        json!({}),
        json!({ "created_at": now() + 3600, "until": 1 }),
    );
    assert_eq!(code(&future["responses"][0]), "OTHER", "{future}");
    let paid_before = connections(&daemon, &bearer)[0]["payments"].clone();
    let stale = tools.raw(
        &uri,
        "pay_invoice",
        json!({ "invoice": invoice(regtest(), Some(1_000), 9) }),
        json!({ "created_at": now() - 3600 }),
    );
    assert_eq!(stale["responses"], json!([]), "{stale}");
    assert_eq!(connections(&daemon, &bearer)[0]["payments"], paid_before);
    let expired = tools.raw(
        &uri,
        "get_balance",
        json!({}),
        json!({ "expiration": now() - 5, "until": 1 }),
    );
    assert_eq!(code(&expired["responses"][0]), "OTHER", "{expired}");
    assert!(
        expired["responses"][0]["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("expired"),
        "{expired}"
    );

    // A connection on two relays: the app sends its payment to both, berthd hears it
    // twice and begins it once; the app gets one answer.
    let second = Relay::start(&tools);
    let (both, _) = connect(
        &daemon,
        &bearer,
        json!({ "name": "Two relays", "relays": [relay.url(), second.url()] }),
    );
    wait_for_info(&tools, &both);
    let twice = tools.raw(
        &both,
        "pay_invoice",
        json!({ "invoice": invoice(regtest(), Some(300_000), 3) }),
        json!({ "until": 1 }),
    );
    let responses = twice["responses"].as_array().expect("responses");
    assert_eq!(responses.len(), 1, "{twice}");
    assert_eq!(code(&responses[0]), "INSUFFICIENT_BALANCE", "{twice}");
    let listed = connections(&daemon, &bearer);
    assert_eq!(listed[1]["name"], "Two relays", "{listed}");
    assert_eq!(listed[1]["payments"], 1, "begun once: {listed}");
    drop(second);

    // A connection granted less is told so.
    let (narrow, _) = connect(
        &daemon,
        &bearer,
        json!({ "name": "Zeus", "methods": ["get_info"] }),
    );
    wait_for_info(&tools, &narrow);
    let refused = tools.call(&narrow, "get_balance", json!({}));
    assert_eq!(code(&refused), "RESTRICTED", "{refused}");

    // Revoked: unauthorized at once, and no longer listed.
    let id = connection["id"].as_str().expect("id");
    let (status, raw) = request(
        daemon.port,
        "DELETE",
        &format!("/api/v1/nwc/connections/{id}"),
        &[("Authorization", &bearer)],
        None,
    );
    assert_eq!(status, 200, "{raw}");
    let revoked = tools.raw(&uri, "get_balance", json!({}), json!({ "until": 1 }));
    assert_eq!(code(&revoked["responses"][0]), "UNAUTHORIZED", "{revoked}");
    let listed = connections(&daemon, &bearer);
    let names: Vec<&str> = listed
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["Two relays", "Zeus"], "{listed}");

    // The relay restarts: berthd is back and answering within seconds.
    let mut relay = relay;
    relay.restart();
    let restarted = Instant::now();
    loop {
        let got = tools.call(&narrow, "get_info", json!({}));
        if got.get("result").is_some() {
            break;
        }
        assert!(
            restarted.elapsed() < Duration::from_secs(30),
            "not answering after the relay restarted: {got}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "nwc: answering again {:.1} s after the relay restarted",
        restarted.elapsed().as_secs_f64()
    );

    // An app asking as fast as it can: served up to its burst, then RATE_LIMITED.
    let flood = tools.client(&["bench", &narrow, "get_info", "80"]);
    assert_eq!(code(&flood), "RATE_LIMITED", "{flood}");
    drop(relay);
}

#[test]
fn a_relay_over_tls_that_requires_authentication_is_served() {
    let Some(tools) = Tools::find("nwc::a_relay_over_tls_that_requires_authentication_is_served")
    else {
        return;
    };
    let certs = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::make(certs.path());
    let relay = Relay::start_strict(
        &tools,
        Strict {
            tls: Some((ca.chain.clone(), ca.key.clone())),
            auth: true,
        },
    );
    assert!(relay.url().starts_with("wss://"), "{}", relay.url());
    // The app trusts the test CA as node's extra CA; berthd as the OS's store
    // (`SSL_CERT_FILE`), beside the web's roots it carries.
    let tools = tools.trusting(&ca.ca);
    let ca_file = ca.ca.display().to_string();
    let (_tmp, _datadir, daemon, bearer) =
        berthd_with_wallet_env(&relay.url(), &[("SSL_CERT_FILE", &ca_file)]);
    let (uri, _) = connect(&daemon, &bearer, json!({ "name": "Strict relay" }));

    // The relay takes the connection's info event only from a connection that
    // authenticated as its key (NIP-42): the app finds it, so berthd did.
    let info = wait_for_info(&tools, &uri);
    assert_eq!(info["encryptions"], json!(["nip44_v2", "nip04"]), "{info}");
    let balance = tools.call(&uri, "get_balance", json!({}));
    assert_eq!(balance["result"]["balance"], 0, "{balance}");
    // berthd answered the challenge before publishing: nothing of its was refused.
    assert!(
        !relay.log().contains("permission denied"),
        "{}",
        relay.log()
    );
    // The rule is in force: the app, which never authenticates, may send requests
    // but not publish anything else (nostr-relay's refusal names no event, so the
    // client sees no acceptance; the relay logs why).
    let forged = tools.raw(
        &uri,
        "get_balance",
        json!({}),
        json!({ "kind": 23195, "wait_ms": 500 }),
    );
    assert_ne!(forged["published"], json!(["ok"]), "{forged}");
    assert!(relay.log().contains("permission denied"), "{}", relay.log());
    let asked = tools.raw(&uri, "get_balance", json!({}), json!({ "until": 1 }));
    assert_eq!(asked["published"], json!(["ok"]), "{asked}");
    assert_eq!(asked["responses"][0]["result"]["balance"], 0, "{asked}");
    let (_, raw) = daemon.get("/health", &[("Authorization", &bearer)]);
    let health = json_of(&raw);
    assert_eq!(health["nwc_relays"][0]["connected"], true, "{health}");
}

#[test]
fn connections_are_checked_when_they_are_made() {
    let (_tmp, datadir) = datadir_with_berth_toml("[nwc]\nrelays = [\"wss://relay.example\"]\n");
    let daemon = Daemon::start(&datadir, &["-q"]);
    let bearer = format!("Bearer {}", token(&datadir));
    let refused = |body: Value| {
        let (status, raw) = daemon.post(
            "/api/v1/nwc/connections",
            &[("Authorization", &bearer)],
            &body.to_string(),
        );
        (
            status,
            json_of(&raw)["message"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    };
    // The egress policy: a relay in the home network, or plain ws, only if allowed.
    let (status, why) = refused(json!({ "name": "a", "relays": ["ws://192.168.1.5:7777"] }));
    assert_eq!(status, 400, "{why}");
    assert!(why.contains("[egress] allow"), "{why}");
    let (status, why) = refused(json!({ "name": "a", "relays": ["https://relay.example"] }));
    assert_eq!(status, 400, "{why}");
    let (status, why) = refused(json!({ "name": "a", "methods": ["pay_keysend"] }));
    assert_eq!(status, 400, "{why}");
    assert!(why.contains("pay_keysend"), "{why}");
    let (status, why) = refused(json!({ "name": "a", "budget_renewal": "daily" }));
    assert_eq!(status, 400, "{why}");
    let (status, why) = refused(json!({ "name": "", }));
    assert_eq!(status, 400, "{why}");
    let (status, why) = refused(json!({ "name": "a", "expires_at": "2020-01-01T00:00:00Z" }));
    assert_eq!(status, 400, "{why}");
    let (status, why) = refused(json!({ "name": "a", "relays": [
        "wss://a.example", "wss://b.example", "wss://c.example", "wss://d.example", "wss://e.example"
    ] }));
    assert_eq!(status, 400, "at most 4 relays a connection: {why}");
    // Made with the defaults of berth.toml; the URI carries the relay and a secret,
    // the list neither the secret nor anything it could be derived from.
    let (status, raw) = daemon.post(
        "/api/v1/nwc/connections",
        &[("Authorization", &bearer)],
        &json!({ "name": "Damus" }).to_string(),
    );
    assert_eq!(status, 200, "{raw}");
    let uri = json_of(&raw)["uri"].as_str().expect("uri").to_string();
    assert_eq!(uri_param(&uri, "relay"), "wss%3A%2F%2Frelay.example%2F");
    assert_eq!(uri_param(&uri, "secret").len(), 64);
    let listed = connections(&daemon, &bearer);
    assert!(!listed.to_string().contains(uri_param(&uri, "secret")));
    // At most 8 relays over all connections (relay.example is one).
    for batch in [["r1", "r2", "r3", "r4"], ["r5", "r6", "r7", "r1"]] {
        let relays: Vec<String> = batch.iter().map(|r| format!("wss://{r}.example")).collect();
        let (status, raw) = daemon.post(
            "/api/v1/nwc/connections",
            &[("Authorization", &bearer)],
            &json!({ "name": "many", "relays": relays }).to_string(),
        );
        assert_eq!(status, 200, "{raw}");
    }
    let (status, why) = refused(json!({ "name": "a", "relays": ["wss://r8.example"] }));
    assert_eq!(status, 422, "a ninth relay: {why}");
    assert!(why.contains("at most 8 relays"), "{why}");
    // Not admin: refused.
    let (reader, _) = pair_device(&daemon, &datadir, "read");
    let (status, _) = daemon.get("/api/v1/nwc/connections", &[("Authorization", &reader)]);
    assert_eq!(status, 403);
}

//! The owner's spending rules on a Nostr Wallet Connect connection (`docs/household.md`):
//! the same rules as a paired device's, enforced by the engine beside the connection's
//! own NIP-47 limits; refused payments are `QUOTA_EXCEEDED` naming the rule, even from
//! an empty wallet; with `over_limit: approve` the app's request waits, unanswered,
//! for the owner (through a restart), and the app (Alby's SDK, still waiting) gets the
//! answer the owner's decision makes. The rules are set by API and in the console;
//! revoking the connection removes them. An approved payment that settles is on the
//! regtest stack (`tests/e2e/nwc_payments.rs`).

use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

use super::connect;
use crate::harness::nwc::{Relay, Tools, code, wait_for_info};
use crate::harness::*;

fn admin(
    daemon: &Daemon,
    bearer: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    json_call(daemon, method, path, bearer, body)
}

/// The one pending approval, once it is there.
fn pending(daemon: &Daemon, bearer: &str) -> Value {
    let mut found = Value::Null;
    wait_until("the app's payment waits for approval", 30, || {
        let (_, all) = admin(daemon, bearer, "GET", "/api/v1/approvals", None);
        found = all
            .as_array()
            .and_then(|all| all.iter().find(|a| a["state"] == "pending").cloned())
            .unwrap_or(Value::Null);
        !found.is_null()
    });
    found
}

fn message(answer: &Value) -> &str {
    answer["error"]["message"].as_str().unwrap_or_default()
}

#[test]
fn the_owners_rules_hold_an_apps_payments_and_wait_for_the_owner() {
    let Some(tools) = Tools::find(
        "nwc::household::the_owners_rules_hold_an_apps_payments_and_wait_for_the_owner",
    ) else {
        return;
    };
    let relay = Relay::start(&tools);
    let toml = format!(
        "[egress]\nallow = [\"127.0.0.1\"]\n\n[nwc]\nrelays = [\"{}\"]\n",
        relay.url()
    );
    let (tmp, datadir, daemon, bearer) = berthd_with_offline_wallet(&toml, &[]);
    // No NIP-47 limits: only the owner's rules stand in the way.
    let (uri, connection) = connect(&daemon, &bearer, json!({ "name": "Game" }));
    let id = connection["id"].as_str().expect("id").to_string();
    wait_for_info(&tools, &uri);
    let rules_path = format!("/api/v1/nwc/connections/{id}/rules");

    let (status, none) = admin(&daemon, &bearer, "GET", &rules_path, None);
    assert_eq!(status, 200, "{none}");
    assert_eq!(none["rules"], Value::Null, "{none}");
    let (status, unknown) = admin(
        &daemon,
        &bearer,
        "PUT",
        "/api/v1/nwc/connections/ffffffffffffffff/rules",
        Some(json!({ "max_payment_sat": 1 })),
    );
    assert_eq!(status, 404, "{unknown}");

    // A per-payment maximum: over it, refused before the (empty) balance is read.
    let (status, set) = admin(
        &daemon,
        &bearer,
        "PUT",
        &rules_path,
        Some(
            json!({ "max_payment_sat": 1_000, "budgets": [{ "amount_sat": 5_000, "period": "day" }] }),
        ),
    );
    assert_eq!(status, 200, "{set}");
    assert_eq!(set["connection_id"], id.as_str(), "{set}");
    assert_eq!(set["budgets"][0]["left_sat"], 5_000, "{set}");
    let regtest = || lightning_invoice::Currency::Regtest;
    let paid = tools.call(
        &uri,
        "pay_invoice",
        json!({ "invoice": invoice(regtest(), Some(2_000_000), 31) }),
    );
    assert_eq!(code(&paid), "QUOTA_EXCEEDED", "{paid}");
    assert_eq!(
        message(&paid),
        "payment of 2,000 sat exceeds this connection's limit of 1,000 sat per payment",
        "{paid}"
    );
    // Within them, the empty wallet answers; the budget gets the amount back.
    let paid = tools.call(
        &uri,
        "pay_invoice",
        json!({ "invoice": invoice(regtest(), Some(500_000), 32) }),
    );
    assert_eq!(code(&paid), "INSUFFICIENT_BALANCE", "{paid}");
    let (_, now) = admin(&daemon, &bearer, "GET", &rules_path, None);
    assert_eq!(now["budgets"][0]["used_sat"], 0, "{now}");

    // In the console: the apps page sums the rules up, and its form sets them (here:
    // Ark payments only, so a Lightning payment is refused by kind).
    let cookie = console_session(daemon.port, &datadir, "read,receive,send,admin", "Laptop");
    let (status, apps) = daemon.get("/console/apps", &[("Cookie", &cookie)]);
    assert_eq!(status, 200, "{apps}");
    assert!(
        apps.contains("1,000 sat a payment") && apps.contains(&format!("/console/apps/{id}/rules")),
        "{apps}"
    );
    let (status, page) = daemon.get(&format!("/console/apps/{id}/rules"), &[("Cookie", &cookie)]);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Spending rules of Game"), "{page}");
    assert!(
        !page.contains("own_history"),
        "no history choice for an app: {page}"
    );
    let (status, raw) = post_form(
        daemon.port,
        &format!("/console/apps/{id}/rules"),
        &[
            ("Cookie", &cookie),
            ("Origin", &format!("http://127.0.0.1:{}", daemon.port)),
        ],
        "max_payment_sat=&max_fee_sat=&budget_day=&budget_week=&budget_month=&budget_year=&ark=on&over_limit=refuse",
    );
    assert_eq!(status, 303, "{raw}");
    let (_, set) = admin(&daemon, &bearer, "GET", &rules_path, None);
    assert_eq!(set["rules"]["kinds"], json!(["ark"]), "{set}");
    let paid = tools.call(
        &uri,
        "pay_invoice",
        json!({ "invoice": invoice(regtest(), Some(500_000), 33) }),
    );
    assert_eq!(code(&paid), "QUOTA_EXCEEDED", "{paid}");
    assert_eq!(
        message(&paid),
        "this connection may not make lightning payments (allowed: ark)",
        "{paid}"
    );

    // Above its limit the payment waits for the owner; the app, still waiting, hears
    // the owner's "no".
    let (status, set) = admin(
        &daemon,
        &bearer,
        "PUT",
        &rules_path,
        Some(json!({ "max_payment_sat": 1_000, "over_limit": "approve" })),
    );
    assert_eq!(status, 200, "{set}");
    let denied_invoice = invoice(regtest(), Some(2_000_000), 34);
    let app = {
        let (tools, uri, invoice) = (tools.clone(), uri.clone(), denied_invoice.clone());
        thread::spawn(move || tools.call(&uri, "pay_invoice", json!({ "invoice": invoice })))
    };
    let waiting = pending(&daemon, &bearer);
    assert_eq!(waiting["device_id"], format!("nwc:{id}"), "{waiting}");
    assert_eq!(waiting["amount_sat"], 2_000, "{waiting}");
    assert_eq!(waiting["destination"], denied_invoice.as_str(), "{waiting}");
    let approval = waiting["id"].as_str().expect("id").to_string();
    thread::sleep(Duration::from_secs(2));
    assert!(!app.is_finished(), "the app waits while the owner decides");
    let (status, denied) = admin(
        &daemon,
        &bearer,
        "POST",
        &format!("/api/v1/approvals/{approval}/deny"),
        None,
    );
    assert_eq!(status, 200, "{denied}");
    let answer = app.join().expect("the app");
    assert_eq!(code(&answer), "QUOTA_EXCEEDED", "{answer}");
    assert!(
        message(&answer).ends_with("the owner denied this payment"),
        "{answer}"
    );

    // A payment held through a restart: not answered from bark's state when berthd
    // starts again; approved, it runs (the empty wallet answers), and the app hears it.
    let approved_invoice = invoice(regtest(), Some(3_000_000), 35);
    let app = {
        let (tools, uri, invoice) = (tools.clone(), uri.clone(), approved_invoice.clone());
        thread::spawn(move || tools.call(&uri, "pay_invoice", json!({ "invoice": invoice })))
    };
    let waiting = pending(&daemon, &bearer);
    let approval = waiting["id"].as_str().expect("id").to_string();
    let (status, _) = daemon.terminate();
    assert!(status.success());
    let daemon = Daemon::start_logged(&datadir, &["-q"], &[], &tmp.path().join("berthd-2.log"));
    wait_for_info(&tools, &uri);
    thread::sleep(Duration::from_secs(2));
    let (_, still) = admin(
        &daemon,
        &bearer,
        "GET",
        &format!("/api/v1/approvals/{approval}"),
        None,
    );
    assert_eq!(still["state"], "pending", "{still}");
    assert!(!app.is_finished(), "not answered by the restart");
    let (status, ran) = admin(
        &daemon,
        &bearer,
        "POST",
        &format!("/api/v1/approvals/{approval}/approve"),
        None,
    );
    assert_eq!(status, 200, "{ran}");
    assert_eq!(ran["state"], "executed", "{ran}");
    assert_eq!(ran["result"]["status"], 422, "{ran}");
    let answer = app.join().expect("the app");
    assert_eq!(code(&answer), "INSUFFICIENT_BALANCE", "{answer}");
    assert_eq!(
        ran["result"]["body"]["error"]["code"], "INSUFFICIENT_BALANCE",
        "the approval records what the app was told: {ran}"
    );

    // Revoking the connection removes its rules.
    let (status, _) = admin(
        &daemon,
        &bearer,
        "DELETE",
        &format!("/api/v1/nwc/connections/{id}"),
        None,
    );
    assert_eq!(status, 200);
    let (status, gone) = admin(&daemon, &bearer, "GET", &rules_path, None);
    assert_eq!(status, 404, "{gone}");
}

//! Spending rules of paired devices on the real binary (`engine::spending`,
//! `docs/household.md`): the owner sets them, the device reads its own, and every
//! payment route refuses a payment over them with 403 `spending_rule`, naming the
//! rule, before the wallet is touched: the wallet here has dead chain and Ark URLs, so
//! a payment the rules let through fails at the wallet (503) and gives its amount back.
//! Budgets used by payments that went through, and periods that renew, are on the
//! regtest stack (`tests/e2e/household.rs`).

use serde_json::{Value, json};

use crate::harness::*;

/// berthd with a wallet it cannot open (dead URLs), its admin bearer, and a device
/// that may send.
fn berthd_with_a_device() -> (tempfile::TempDir, Daemon, String, String, String) {
    let (tmp, datadir, daemon, admin) = berthd_with_offline_wallet("", &[]);
    let (device, id) = pair_device(&daemon, &datadir, "read,receive,send");
    (tmp, daemon, admin, device, id)
}

fn call(
    daemon: &Daemon,
    method: &str,
    path: &str,
    bearer: &str,
    body: Option<Value>,
) -> (u16, Value) {
    json_call(daemon, method, path, bearer, body)
}

fn refused(answer: &(u16, Value)) -> &str {
    assert_eq!(answer.0, 403, "{answer:?}");
    assert_eq!(answer.1["code"], "spending_rule", "{answer:?}");
    answer.1["message"].as_str().unwrap_or_default()
}

#[test]
fn a_devices_rules_refuse_what_is_over_them_before_the_wallet_is_touched() {
    let (_tmp, daemon, admin, device, id) = berthd_with_a_device();
    let send = |bearer: &str, body: Value| {
        call(&daemon, "POST", "/api/v1/wallet/send", bearer, Some(body))
    };
    let ark = foreign_ark_address();

    // No rules: the device pays as its scope allows (here the wallet cannot).
    let (status, _) = send(&device, json!({ "destination": ark, "amount_sat": 50_000 }));
    assert_ne!(status, 403, "no rules, no refusal");

    // Only the owner sets rules.
    let rules = json!({
        "max_payment_sat": 1_000,
        "budgets": [{ "amount_sat": 5_000, "period": "week" }, { "amount_sat": 20_000, "period": "month" }],
        "kinds": ["ark", "lightning"],
    });
    let path = format!("/api/v1/devices/{id}/rules");
    let (status, _) = call(&daemon, "PUT", &path, &device, Some(rules.clone()));
    assert_eq!(status, 403, "a device cannot set rules");
    let (status, set) = call(&daemon, "PUT", &path, &admin, Some(rules));
    assert_eq!(status, 200, "{set}");
    assert_eq!(set["rules"]["max_payment_sat"], 1_000, "{set}");
    assert_eq!(set["budgets"][0]["left_sat"], 5_000, "{set}");
    assert_eq!(set["budgets"][1]["period"], "month", "{set}");
    assert!(set["budgets"][0]["renews_at"].is_string(), "{set}");

    // Over the per-payment limit: refused, naming the rule and the figures.
    let over = send(&device, json!({ "destination": ark, "amount_sat": 2_000 }));
    assert_eq!(
        refused(&over),
        "payment of 2,000 sat exceeds this device's limit of 1,000 sat per payment"
    );
    // A Lightning invoice's own amount counts.
    let bolt11 = invoice(lightning_invoice::Currency::Regtest, Some(1_500_000), 7);
    let over = send(&device, json!({ "destination": bolt11 }));
    assert!(refused(&over).contains("1,500 sat"), "{over:?}");
    let over = call(
        &daemon,
        "POST",
        "/api/v1/lightning/pay",
        &device,
        Some(json!({ "destination": bolt11 })),
    );
    assert!(refused(&over).contains("per payment"), "{over:?}");
    // Kinds not allowed.
    let onchain = call(
        &daemon,
        "POST",
        "/api/v1/onchain/send",
        &device,
        Some(
            json!({ "destination": "bcrt1qw508d6qejxtdg4y5r3zarvary0c5xw7kygt080", "amount_sat": 500 }),
        ),
    );
    assert_eq!(
        refused(&onchain),
        "this device may not make onchain payments (allowed: ark, lightning)"
    );
    let exit = call(
        &daemon,
        "POST",
        "/api/v1/exits/start/all",
        &device,
        Some(json!({})),
    );
    assert!(refused(&exit).contains("exit payments"), "{exit:?}");

    // Within the rules: on to the wallet, which cannot pay; the amount comes back.
    let within = send(&device, json!({ "destination": ark, "amount_sat": 1_000 }));
    assert_ne!(within.0, 403, "{within:?}");
    let (status, me) = call(&daemon, "GET", "/api/v1/devices/me", &device, None);
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["id"], id.as_str(), "{me}");
    assert_eq!(
        me["budgets"][0]["used_sat"], 0,
        "a failed payment gives its amount back: {me}"
    );
    assert_eq!(me["rules"]["kinds"], json!(["ark", "lightning"]), "{me}");

    // The admin token has no rules.
    let admin_over = send(&admin, json!({ "destination": ark, "amount_sat": 2_000 }));
    assert_ne!(admin_over.0, 403, "{admin_over:?}");
    let (_, me) = call(&daemon, "GET", "/api/v1/devices/me", &admin, None);
    assert_eq!(me["id"], Value::Null, "{me}");
    assert_eq!(me["rules"], Value::Null, "{me}");

    // A payment whose amount is not known before it is made (everything, or every
    // exit) is refused to a device with limits, even of a kind it may make.
    let (status, _) = call(
        &daemon,
        "PUT",
        &path,
        &admin,
        Some(json!({ "max_payment_sat": 1_000, "kinds": ["offboard"] })),
    );
    assert_eq!(status, 200);
    let all = call(
        &daemon,
        "POST",
        "/api/v1/wallet/offboard/all",
        &device,
        Some(json!({})),
    );
    assert!(
        refused(&all).contains("not known before it is made"),
        "{all:?}"
    );

    // What the owner may not set.
    for (bad, why) in [
        (
            json!({ "budgets": [{ "amount_sat": 5, "period": "fortnight" }] }),
            "fortnight",
        ),
        (json!({ "over_limit": "approve" }), "needs a limit"),
        (json!({ "over_limit": "ask" }), "ask"),
        (json!({ "history": "mine" }), "mine"),
        (json!({ "kinds": ["keysend"] }), "keysend"),
        (
            json!({ "budgets": [{ "amount_sat": 5, "period": "day" }, { "amount_sat": 9, "period": "day" }] }),
            "one budget per period",
        ),
        (json!({ "max_fee": 5 }), "max_fee"),
    ] {
        let (status, body) = call(&daemon, "PUT", &path, &admin, Some(bad));
        assert_eq!(status, 400, "{body}");
        assert!(
            body["message"].as_str().unwrap_or_default().contains(why),
            "{why}: {body}"
        );
    }
    let (status, _) = call(
        &daemon,
        "GET",
        "/api/v1/devices/0000000000000000/rules",
        &admin,
        None,
    );
    assert_eq!(status, 404);

    // Revoked: its rules go with it.
    let (status, _) = call(
        &daemon,
        "DELETE",
        &format!("/api/v1/devices/{id}"),
        &admin,
        None,
    );
    assert_eq!(status, 200);
    let (status, _) = call(&daemon, "GET", &path, &admin, None);
    assert_eq!(status, 404);
}

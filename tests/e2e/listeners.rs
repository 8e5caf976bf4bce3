//! Listeners of a berthd's payments in the e2e scenarios: a webhook and a paired
//! phone's push, on loopback receivers (`tests/harness/webhooks.rs`), and the check that
//! a receive reached both within a second of its event (issue 43).

use serde_json::{Value, json};

use crate::harness;
use crate::stack::{Berthd, wait_for};

/// A webhook for the movement events, and a paired phone's push for payments, on
/// loopback receivers (`berthd` must allow 127.0.0.1 in its egress policy).
pub fn of_payments(berthd: &Berthd) -> (harness::webhooks::Receiver, harness::webhooks::Receiver) {
    let hook = harness::webhooks::Receiver::start();
    let push = harness::webhooks::Receiver::start();
    berthd.post_ok(
        "/api/v1/webhooks",
        json!({"url": hook.url(), "events": ["movement-created", "movement-updated"]}),
    );
    let uri = harness::open_window(&berthd.datadir, "read");
    let code = harness::uri_param(&uri, "t");
    let paired = berthd.post_ok("/api/v1/pair", json!({"code": code, "name": "phone"}));
    let phone = format!("Bearer {}", paired["token"].as_str().expect("token"));
    let body = json!({"url": push.url(), "categories": ["payments"]}).to_string();
    let (status, raw) = harness::request(
        berthd.port(),
        "PUT",
        "/api/v1/devices/me/push",
        &[
            ("Authorization", &phone),
            ("Content-Type", "application/json"),
        ],
        Some(&body),
    );
    assert_eq!(status, 200, "{raw}");
    (hook, push)
}

/// The webhook and the push heard of the receive within a second of the event that
/// settled it (its timestamp in the webhook's payload).
pub fn told_within_a_second(
    hook: &harness::webhooks::Receiver,
    push: &harness::webhooks::Receiver,
    movement: &Value,
) {
    let settled = wait_for("the webhook of the settled receive", 10, || {
        hook.delivered().into_iter().find(|r| {
            let data = &r.json()["data"]["movement"];
            data["id"] == movement["id"] && data["status"] == "successful"
        })
    });
    let event_at = chrono::DateTime::parse_from_rfc3339(
        settled.json()["timestamp"].as_str().expect("timestamp"),
    )
    .expect("RFC 3339")
    .with_timezone(&chrono::Utc);
    let after = |at: std::time::SystemTime| {
        (chrono::DateTime::<chrono::Utc>::from(at) - event_at).num_milliseconds()
    };
    let pushed = wait_for("the phone's push", 10, || {
        push.delivered()
            .into_iter()
            .find(|r| r.headers.get("title").map(String::as_str) == Some("Payment received"))
    });
    assert_eq!(pushed.body, "A payment arrived in your wallet.");
    let (hook_ms, push_ms) = (after(settled.at), after(pushed.at));
    println!("the receive's webhook {hook_ms} ms and push {push_ms} ms after its event");
    assert!(
        hook_ms < 1_000 && push_ms < 1_000,
        "{hook_ms} ms, {push_ms} ms"
    );
}

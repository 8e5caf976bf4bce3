//! Webhooks on the real binary (issue 43, `src/webhooks/`): a receiver on loopback
//! takes the deliveries, and the Standard Webhooks reference verifier (npm
//! `standardwebhooks`, `tests/webhooks/verify.mjs`) checks every signature it got, as a
//! receiver in the wild would. The retry schedule is scaled down with
//! `BERTH_WEBHOOK_RETRY_SCALE` (the same binary; three days become seconds).

use crate::harness;

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use harness::webhooks::{Received, Receiver, Reply};
use harness::{Daemon, bearer, json_call, new_datadir, skip, token, wait_until};
use serde_json::{Value, json};

fn verifier_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/webhooks")
}

/// Why the reference verifier cannot run here, if it cannot.
fn verifier_missing() -> Option<String> {
    if !verifier_dir()
        .join("node_modules/standardwebhooks")
        .exists()
    {
        return Some("tests/webhooks has no node_modules (npm ci; scripts/ensure-deps)".into());
    }
    match Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => None,
        _ => Some("node is not installed".into()),
    }
}

/// For each delivery, for each secret: whether the reference verifier accepts it.
fn verify(secrets: &[&str], deliveries: &[Received]) -> Vec<Vec<bool>> {
    let input = json!({
        "secrets": secrets,
        "deliveries": deliveries
            .iter()
            .map(|d| json!({"headers": d.headers, "body": d.body}))
            .collect::<Vec<_>>(),
    });
    let mut child = Command::new("node")
        .arg(verifier_dir().join("verify.mjs"))
        .current_dir(verifier_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run node");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("node");
    assert!(out.status.success(), "verify.mjs failed");
    serde_json::from_slice(&out.stdout).expect("verify.mjs's answer")
}

fn now_us() -> u64 {
    let since = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970");
    u64::try_from(since.as_micros()).expect("µs fit")
}

/// A berthd without a wallet (webhooks need none: test events and alerts), retries
/// scaled by `scale`.
fn berthd(scale: &str) -> (tempfile::TempDir, PathBuf, Daemon, String) {
    let (tmp, datadir) = new_datadir();
    let daemon = start(&datadir, scale);
    let admin = bearer(&token(&datadir));
    (tmp, datadir, daemon, admin)
}

fn start(datadir: &Path, scale: &str) -> Daemon {
    Daemon::try_start_with_env(datadir, &[], &[("BERTH_WEBHOOK_RETRY_SCALE", scale)])
        .unwrap_or_else(|e| panic!("berthd did not start: {e}"))
}

fn call(
    daemon: &Daemon,
    admin: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    json_call(daemon, method, path, admin, body)
}

/// Register a webhook for `events` at `url`: its id and secret.
fn register(daemon: &Daemon, admin: &str, url: &str, events: Value) -> (String, String) {
    let (status, created) = call(
        daemon,
        admin,
        "POST",
        "/api/v1/webhooks",
        Some(json!({"url": url, "events": events, "description": "test receiver"})),
    );
    assert_eq!(status, 200, "{created}");
    let secret = created["secret"].as_str().expect("secret").to_string();
    assert!(secret.starts_with("whsec_"), "{secret}");
    (created["id"].as_str().expect("id").to_string(), secret)
}

fn send_test(daemon: &Daemon, admin: &str, id: &str) -> u64 {
    let (status, queued) = call(
        daemon,
        admin,
        "POST",
        &format!("/api/v1/webhooks/{id}/test"),
        None,
    );
    assert_eq!(status, 202, "{queued}");
    queued["event_id"].as_u64().expect("event id")
}

fn deliveries(daemon: &Daemon, admin: &str, id: &str) -> Vec<Value> {
    let (status, rows) = call(
        daemon,
        admin,
        "GET",
        &format!("/api/v1/webhooks/{id}/deliveries?limit=500"),
        None,
    );
    assert_eq!(status, 200, "{rows}");
    rows.as_array().expect("rows").clone()
}

/// A receiver that answers 500 three times, then recovers, gets every event, in order,
/// each once as delivered; every attempt at an event carries the same `webhook-id`,
/// and the reference verifier accepts every signature. The deliveries list shows each
/// attempt with its status and number.
#[test]
fn a_failing_receiver_that_recovers_gets_every_event_once_in_order_signed() {
    if let Some(why) = verifier_missing() {
        return skip(
            "webhooks::a_failing_receiver_that_recovers_gets_every_event_once_in_order_signed",
            &why,
        );
    }
    let receiver = Receiver::start();
    receiver.then(&[Reply::Status(500), Reply::Status(503), Reply::Status(500)]);
    // 5 s, 30 s, 2 min become 50 ms, 300 ms, 1.2 s.
    let (_tmp, _datadir, daemon, admin) = berthd("0.01");
    let (id, secret) = register(&daemon, &admin, &receiver.url(), json!(["*"]));
    let sent: Vec<u64> = (0..5).map(|_| send_test(&daemon, &admin, &id)).collect();
    wait_until("five events delivered", 30, || {
        receiver.delivered().len() >= 5
    });
    std::thread::sleep(Duration::from_millis(300));

    let all = receiver.received();
    assert_eq!(all.len(), 8, "3 failed attempts and 5 deliveries: {all:?}");
    let delivered = receiver.delivered();
    let ids: Vec<String> = delivered.iter().map(|r| r.id().to_string()).collect();
    let expected: Vec<String> = sent.iter().map(|e| format!("msg_{id}_{e}")).collect();
    assert_eq!(ids, expected, "each event once, in the log's order");
    assert!(
        all[..4].iter().all(|r| r.id() == expected[0]),
        "every retry of the first event carries its id"
    );
    for r in &delivered {
        let body = r.json();
        assert_eq!(body["type"], "test");
        assert_eq!(body["data"]["type"], "test");
        assert_eq!(body["data"]["webhook_id"], id.as_str());
        assert!(body["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
        assert_eq!(r.headers["content-type"], "application/json");
    }
    let verified = verify(&[&secret, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], &all);
    assert!(
        verified.iter().all(|v| v[0]),
        "the secret verifies all: {verified:?}"
    );
    assert!(
        verified.iter().all(|v| !v[1]),
        "another secret verifies none"
    );

    let rows = deliveries(&daemon, &admin, &id);
    assert_eq!(rows.len(), 8);
    let first: Vec<&Value> = rows.iter().rev().take(4).collect();
    for (n, row) in first.iter().enumerate() {
        assert_eq!(row["event_id"], sent[0]);
        assert_eq!(row["attempt"], n + 1);
        assert_eq!(row["webhook_id"], id.as_str());
    }
    assert_eq!(first[0]["status"], "failed");
    assert_eq!(first[0]["response_code"], 500);
    assert_eq!(first[1]["response_code"], 503);
    assert_eq!(first[3]["status"], "delivered");
    assert_eq!(first[3]["response_code"], 204);
    let (_, info) = call(
        &daemon,
        &admin,
        "GET",
        &format!("/api/v1/webhooks/{id}"),
        None,
    );
    assert_eq!(info["failed_attempts"], 0, "{info}");
    assert!(
        info.get("secret").is_none(),
        "the secret is shown only once"
    );
}

/// After a rotation every delivery carries two signatures for a day: the old secret
/// and the new both verify, with the reference library.
#[test]
fn a_rotated_secret_signs_beside_the_new_one() {
    if let Some(why) = verifier_missing() {
        return skip("webhooks::a_rotated_secret_signs_beside_the_new_one", &why);
    }
    let receiver = Receiver::start();
    let (_tmp, _datadir, daemon, admin) = berthd("1");
    let (id, old) = register(&daemon, &admin, &receiver.url(), json!(["device-paired"]));
    send_test(&daemon, &admin, &id);
    wait_until("delivered", 10, || receiver.delivered().len() == 1);
    let (status, rotated) = call(
        &daemon,
        &admin,
        "POST",
        &format!("/api/v1/webhooks/{id}/rotate-secret"),
        None,
    );
    assert_eq!(status, 200, "{rotated}");
    let new = rotated["secret"].as_str().expect("secret").to_string();
    assert_ne!(new, old);
    assert!(
        rotated["previous_secret_expires_at"].is_string(),
        "{rotated}"
    );
    send_test(&daemon, &admin, &id);
    wait_until("delivered", 10, || receiver.delivered().len() == 2);
    let got = receiver.delivered();
    assert_eq!(got[1].headers["webhook-signature"].split(' ').count(), 2);
    assert_eq!(
        verify(&[&old, &new], &got),
        vec![vec![true, false], vec![true, true]]
    );
}

/// A receiver that is down (connections refused) and then comes back on the same port
/// gets the event; a receiver that holds the request while berthd is SIGKILLed gets it
/// again after the restart under the same id, and it is recorded delivered once.
#[test]
fn nothing_is_lost_to_a_refused_connection_or_a_killed_daemon() {
    if let Some(why) = verifier_missing() {
        return skip(
            "webhooks::nothing_is_lost_to_a_refused_connection_or_a_killed_daemon",
            &why,
        );
    }
    // A port with nobody listening, for now.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let (_tmp, datadir, mut daemon, admin) = berthd("0.01");
    let url = format!("http://127.0.0.1:{port}/hook");
    let (id, secret) = register(&daemon, &admin, &url, json!(["*"]));
    let first = send_test(&daemon, &admin, &id);
    wait_until("two refused attempts", 20, || {
        deliveries(&daemon, &admin, &id).len() >= 2
    });
    let rows = deliveries(&daemon, &admin, &id);
    assert!(
        rows.iter()
            .all(|r| r["status"] == "failed" && r["response_code"].is_null())
    );
    assert!(
        rows[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("connect")),
        "{rows:?}"
    );
    let (_, health) = call(&daemon, &admin, "GET", "/health", None);
    let mine = &health["webhooks"][0];
    assert_eq!(mine["id"], id.as_str());
    assert!(
        mine["failed_attempts"].as_u64().is_some_and(|n| n >= 2),
        "{health}"
    );

    // The receiver comes back on that port, and holds the next event's request.
    let receiver = Receiver::on(TcpListener::bind(("127.0.0.1", port)).expect("rebind"));
    receiver.then(&[Reply::Status(204), Reply::Hold(Duration::from_secs(30))]);
    wait_until("the first event delivered", 20, || {
        receiver.delivered().len() == 1
    });
    assert_eq!(receiver.delivered()[0].id(), format!("msg_{id}_{first}"));
    let second = send_test(&daemon, &admin, &id);
    wait_until("the second event's request held", 10, || {
        receiver.received().len() == 2
    });
    daemon.child.kill().expect("SIGKILL");
    daemon.child.wait().expect("reap");

    let daemon = start(&datadir, "0.01");
    wait_until("the second event delivered after the restart", 20, || {
        receiver.delivered().len() == 2
    });
    let got = receiver.received();
    assert_eq!(got[1].id(), format!("msg_{id}_{second}"));
    assert_eq!(got[2].id(), got[1].id(), "the same id after the restart");
    wait_until("the second delivery recorded", 10, || {
        deliveries(&daemon, &admin, &id)
            .iter()
            .filter(|r| r["status"] == "delivered")
            .count()
            >= 2
    });
    let rows = deliveries(&daemon, &admin, &id);
    let delivered: Vec<&Value> = rows.iter().filter(|r| r["status"] == "delivered").collect();
    assert_eq!(
        delivered.len(),
        2,
        "each event recorded delivered once: {rows:?}"
    );
    assert!(verify(&[&secret], &got).iter().all(|v| v[0]));
}

/// An endpoint that fails through the whole schedule (three days, scaled to seconds) is
/// disabled: `/health` says so (by id, not URL), a `webhook-disabled` event reaches
/// another webhook, and enabling it again delivers what it missed.
#[test]
fn an_endpoint_failing_for_three_days_is_disabled_and_said_so() {
    if let Some(why) = verifier_missing() {
        return skip(
            "webhooks::an_endpoint_failing_for_three_days_is_disabled_and_said_so",
            &why,
        );
    }
    let dead = Receiver::start();
    dead.then(&[Reply::Status(500); 15]);
    let watcher = Receiver::start();
    // 71.7 hours become about 5 s.
    let (_tmp, _datadir, daemon, admin) = berthd("0.00002");
    let (id, _) = register(&daemon, &admin, &dead.url(), json!(["*"]));
    let (watcher_id, _) = register(&daemon, &admin, &watcher.url(), json!(["webhook-disabled"]));
    let event = send_test(&daemon, &admin, &id);
    wait_until("the webhook-disabled event", 60, || {
        !watcher.delivered().is_empty()
    });
    assert_eq!(
        dead.received().len(),
        15,
        "15 attempts: the first and 14 retries"
    );
    let alert = watcher.delivered()[0].json();
    assert_eq!(alert["type"], "webhook-disabled");
    assert_eq!(alert["data"]["webhook_id"], id.as_str());
    let said = alert["data"]["message"].as_str().expect("message");
    assert!(
        said.contains("127.0.0.1") && !said.contains("/hook"),
        "the host, not the URL (it may carry a token): {said}"
    );
    let (status, health) = call(&daemon, &admin, "GET", "/health", None);
    assert_eq!(status, 503);
    let reasons = health["reasons"].to_string();
    assert!(
        reasons.contains(&format!("webhook {id} was disabled")),
        "{reasons}"
    );
    assert!(
        !reasons.contains("127.0.0.1"),
        "no URL in the public reasons"
    );
    let (_, info) = call(
        &daemon,
        &admin,
        "GET",
        &format!("/api/v1/webhooks/{id}"),
        None,
    );
    assert_eq!(info["enabled"], false);
    assert!(
        info["disabled_reason"]
            .as_str()
            .is_some_and(|r| r.contains("three days"))
    );

    // Enabled again: the event it stopped at is delivered at once.
    let (status, info) = call(
        &daemon,
        &admin,
        "PATCH",
        &format!("/api/v1/webhooks/{id}"),
        Some(json!({"enabled": true})),
    );
    assert_eq!((status, &info["enabled"]), (200, &json!(true)), "{info}");
    // The event it stopped at, then (it takes every type) the news of its own disabling.
    wait_until("delivered after enabling", 10, || {
        dead.delivered().len() == 2
    });
    assert_eq!(dead.delivered()[0].id(), format!("msg_{id}_{event}"));
    assert_eq!(dead.delivered()[1].json()["type"], "webhook-disabled");
    let (status, _) = call(&daemon, &admin, "GET", "/health", None);
    assert_eq!(status, 200);
    assert!(
        watcher.received().len() == 1,
        "the watcher got only its type"
    );
    let _ = watcher_id;
}

/// Redelivery sends an event again, once, with its id; a paused webhook receives
/// nothing until resumed, then what it missed; only admin credentials manage webhooks;
/// bad input is refused with why; removing one removes its deliveries.
#[test]
fn webhooks_are_managed_by_the_owner_only_and_checked() {
    let receiver = Receiver::start();
    let (_tmp, datadir, daemon, admin) = berthd("1");
    for (body, why) in [
        (json!({"url": "ftp://x/", "events": ["*"]}), "http"),
        (
            json!({"url": "http://h/", "events": ["payment"]}),
            "not an event type",
        ),
        (json!({"url": "http://h/", "events": []}), "1 to 32"),
        (json!({"url": "http://u:p@h/", "events": ["*"]}), "password"),
        (
            json!({"url": "http://h/", "events": ["*"], "extra": 1}),
            "unknown field",
        ),
    ] {
        let (status, e) = call(&daemon, &admin, "POST", "/api/v1/webhooks", Some(body));
        assert_eq!(status, 400, "{e}");
        assert!(
            e["message"].as_str().is_some_and(|m| m.contains(why)),
            "{e}"
        );
    }
    let (device, _) = harness::pair_device(&daemon, &datadir, "read,send");
    let (status, _) = json_call(
        &daemon,
        "POST",
        "/api/v1/webhooks",
        &device,
        Some(json!({"url": receiver.url(), "events": ["*"]})),
    );
    assert_eq!(status, 403, "a device with send cannot register a webhook");
    let (id, _) = register(&daemon, &admin, &receiver.url(), json!(["device-paired"]));
    send_test(&daemon, &admin, &id);
    // The receiver has it before berthd records the answer.
    wait_until("the delivery recorded", 10, || {
        !deliveries(&daemon, &admin, &id).is_empty()
    });
    let rows = deliveries(&daemon, &admin, &id);
    let delivery = rows[0]["id"].as_str().expect("delivery id");
    let (status, queued) = call(
        &daemon,
        &admin,
        "POST",
        &format!("/api/v1/webhooks/{id}/deliveries/{delivery}/redeliver"),
        None,
    );
    assert_eq!(status, 202, "{queued}");
    wait_until("redelivered", 10, || receiver.delivered().len() == 2);
    let got = receiver.delivered();
    assert_eq!(got[0].id(), got[1].id(), "a redelivery keeps the id");
    assert_eq!(deliveries(&daemon, &admin, &id)[0]["redelivery"], true);

    let (status, _) = call(
        &daemon,
        &admin,
        "PATCH",
        &format!("/api/v1/webhooks/{id}"),
        Some(json!({"enabled": false})),
    );
    assert_eq!(status, 200);
    // Paused, it takes no redelivery off its queue, so the queue's bound shows.
    let redeliver = format!("/api/v1/webhooks/{id}/deliveries/{delivery}/redeliver");
    for _ in 0..100 {
        let (status, body) = call(&daemon, &admin, "POST", &redeliver, None);
        assert_eq!(status, 202, "{body}");
    }
    let (status, body) = call(&daemon, &admin, "POST", &redeliver, None);
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("100 redeliveries")),
        "{body}"
    );
    let (status, body) = call(
        &daemon,
        &admin,
        "GET",
        &format!("/api/v1/webhooks/{id}/deliveries?limit=0"),
        None,
    );
    assert_eq!(status, 400, "{body}");
    let missed = send_test(&daemon, &admin, &id);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        receiver.received().len(),
        2,
        "a paused webhook receives nothing"
    );
    call(
        &daemon,
        &admin,
        "PATCH",
        &format!("/api/v1/webhooks/{id}"),
        Some(json!({"enabled": true})),
    );
    // The 100 queued redeliveries first, then what it missed.
    wait_until("what it missed", 20, || receiver.delivered().len() == 103);
    let got = receiver.delivered();
    assert!(
        got[2..102].iter().all(|r| r.id() == got[0].id()),
        "redeliveries first"
    );
    assert_eq!(got[102].id(), format!("msg_{id}_{missed}"));

    // At most 16 webhooks: the 17th is refused with why.
    for n in 1..16 {
        register(
            &daemon,
            &admin,
            &format!("http://127.0.0.1:9/{n}"),
            json!(["device-paired"]),
        );
    }
    let (status, body) = call(
        &daemon,
        &admin,
        "POST",
        "/api/v1/webhooks",
        Some(json!({"url": "http://127.0.0.1:9/17", "events": ["device-paired"]})),
    );
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("16 webhooks")),
        "{body}"
    );

    let (status, _) = call(
        &daemon,
        &admin,
        "DELETE",
        &format!("/api/v1/webhooks/{id}"),
        None,
    );
    assert_eq!(status, 200);
    for path in [
        format!("/api/v1/webhooks/{id}"),
        format!("/api/v1/webhooks/{id}/deliveries"),
    ] {
        let (status, e) = call(&daemon, &admin, "GET", &path, None);
        assert_eq!(status, 404, "{e}");
    }
    let (_, list) = call(&daemon, &admin, "GET", "/api/v1/webhooks", None);
    assert_eq!(list.as_array().map(Vec::len), Some(15), "{list}");
}

/// Events of the wallet's log written while berthd was stopped (two movements, here
/// put into the store directly) reach a webhook registered before, in order, as the
/// barkd transports render them.
#[test]
fn movement_events_from_while_berthd_was_stopped_are_delivered() {
    let receiver = Receiver::start();
    let (_tmp, datadir, mut daemon, admin) = berthd("1");
    let (id, _) = register(
        &daemon,
        &admin,
        &receiver.url(),
        json!(["movement-created", "movement-updated"]),
    );
    daemon.child.kill().expect("kill");
    daemon.child.wait().expect("reap");
    let ids = harness::with_store(&datadir, async |store| {
        let mut ids = Vec::new();
        for kind in ["created", "updated"] {
            let movement_id = harness::new_movement(store, "arkoor").await;
            let movement = bark::persist::BarkPersister::get_movement_by_id(store, movement_id)
                .await
                .expect("movement");
            let kind = if kind == "created" {
                berth::events::EventKind::MovementCreated
            } else {
                berth::events::EventKind::MovementUpdated
            };
            let (event, _) = store
                .append_event(
                    kind,
                    Some(movement),
                    now_us(),
                    berth::store::EventRetention::default(),
                )
                .await
                .expect("append");
            ids.push(event);
        }
        ids
    });
    let daemon = start(&datadir, "1");
    wait_until("both delivered", 10, || receiver.delivered().len() == 2);
    let got = receiver.delivered();
    for (r, (event, kind)) in got
        .iter()
        .zip(ids.iter().zip(["movement-created", "movement-updated"]))
    {
        assert_eq!(r.id(), format!("msg_{id}_{event}"));
        let body = r.json();
        assert_eq!(body["type"], kind);
        assert_eq!(
            body["data"]["type"], kind,
            "data is what the barkd transports send"
        );
        assert!(body["data"]["movement"]["id"].is_number(), "{body}");
    }
    drop(daemon);
}

// ---- push to phones -----------------------------------------------------------------

/// A settled Ark receive written into the log while berthd is stopped (created, then
/// updated again): the movement event pair a payment makes.
fn payment_events(datadir: &Path) {
    harness::with_store(datadir, async |store| {
        use bark::persist::BarkPersister;
        let subsystem = bark::movement::MovementSubsystem {
            name: "bark.arkoor".into(),
            kind: "receive".into(),
        };
        let id = store
            .create_new_movement(
                bark::movement::MovementStatus::Successful,
                &subsystem,
                chrono::Local::now(),
                None,
            )
            .await
            .expect("movement");
        let mut movement = store.get_movement_by_id(id).await.expect("read");
        movement.effective_balance = bitcoin::SignedAmount::from_sat(21_000);
        movement.intended_balance = bitcoin::SignedAmount::from_sat(21_000);
        store.update_movement(&movement).await.expect("update");
        for kind in [
            berth::events::EventKind::MovementCreated,
            berth::events::EventKind::MovementUpdated,
        ] {
            store
                .append_event(
                    kind,
                    Some(movement.clone()),
                    now_us(),
                    berth::store::EventRetention::default(),
                )
                .await
                .expect("append");
        }
    });
}

fn set_push(daemon: &Daemon, device: &str, body: Value) -> (u16, Value) {
    json_call(daemon, "PUT", "/api/v1/devices/me/push", device, Some(body))
}

/// Each paired device hears what it chose, as ntfy's format (the text as the body,
/// `Title`/`Priority`/`Tags`): amounts only when it opted in, approvals and pairings as
/// the API would show them, a payment once though its movement is updated again; its
/// URL goes through the egress policy (loopback only because `berth.toml` allows it);
/// unpairing the device ends its pushes.
#[test]
fn each_device_hears_what_it_chose_and_no_more() {
    let phone = Receiver::start();
    let owner = Receiver::start();
    let (_tmp, datadir) = harness::datadir_with_berth_toml("");
    let mut daemon = start(&datadir, "0.01");
    let admin = bearer(&token(&datadir));
    let (kid, kid_id) = harness::pair_device(&daemon, &datadir, "read,send");
    // Loopback over http is a destination the owner has not allowed.
    let (status, refused) = set_push(
        &daemon,
        &kid,
        json!({"url": phone.url(), "categories": ["payments"]}),
    );
    assert_eq!(status, 400, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.contains("[egress] allow")),
        "{refused}"
    );
    let (status, e) = set_push(
        &daemon,
        &admin,
        json!({"url": phone.url(), "categories": ["payments"]}),
    );
    assert_eq!(status, 422, "the admin token has no device: {e}");
    daemon.child.kill().expect("kill");
    daemon.child.wait().expect("reap");

    std::fs::write(
        datadir.join("berth.toml"),
        "[egress]\nallow = [\"127.0.0.1\"]\n",
    )
    .expect("berth.toml");
    let mut daemon = start(&datadir, "0.01");
    let (mum, _) = harness::pair_device(&daemon, &datadir, "read,send,admin");
    let (status, e) = set_push(
        &daemon,
        &kid,
        json!({"url": phone.url(), "categories": ["updates"]}),
    );
    assert_eq!(status, 400, "{e}");
    phone.then(&[Reply::Status(500)]);
    let (status, sub) = set_push(
        &daemon,
        &kid,
        json!({"url": phone.url(), "categories": ["payments", "pairing"]}),
    );
    assert_eq!(status, 200, "{sub}");
    assert_eq!(sub["device_id"], kid_id.as_str());
    assert_eq!(sub["details"], false);
    let (status, _) = set_push(
        &daemon,
        &mum,
        json!({"url": owner.url(), "categories": ["payments", "pairing", "approvals"], "details": true}),
    );
    assert_eq!(status, 200);

    // A pairing: both hear it; only the owner's text names the device.
    harness::pair_device(&daemon, &datadir, "read");
    wait_until("both told of the pairing", 10, || {
        phone.delivered().len() == 1 && owner.delivered().len() == 1
    });
    let (kid_push, mum_push) = (&phone.delivered()[0], &owner.delivered()[0]);
    assert_eq!(kid_push.headers["title"], "New device paired");
    assert_eq!(kid_push.headers["priority"], "4");
    assert!(kid_push.headers["content-type"].starts_with("text/plain"));
    assert_eq!(kid_push.body, "A new device was paired with your wallet.");
    assert!(
        mum_push.body.contains("A new device was paired: read"),
        "{}",
        mum_push.body
    );
    assert_eq!(
        phone.received().len(),
        2,
        "the kid's first attempt failed and was retried"
    );
    assert_eq!(
        phone.received()[0].headers["x-berth-event"],
        kid_push.headers["x-berth-event"]
    );

    // A payment while berthd was stopped: told once to each, amount only to the owner.
    daemon.child.kill().expect("kill");
    daemon.child.wait().expect("reap");
    payment_events(&datadir);
    let daemon = start(&datadir, "0.01");
    wait_until("both told of the payment", 10, || {
        phone.delivered().len() == 2 && owner.delivered().len() == 2
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        phone.delivered().len(),
        2,
        "the movement's update is not told again"
    );
    assert_eq!(phone.delivered()[1].headers["title"], "Payment received");
    assert_eq!(
        phone.delivered()[1].body,
        "A payment arrived in your wallet."
    );
    assert_eq!(owner.delivered()[1].body, "You received 21,000 sat.");
    let (status, health) = call(&daemon, &admin, "GET", "/health", None);
    assert!(
        health["webhooks"].as_array().is_some_and(|w| w.len() == 2),
        "{status} {health}"
    );

    // Unpaired: its subscription goes with it.
    let (status, _) = call(
        &daemon,
        &admin,
        "DELETE",
        &format!("/api/v1/devices/{kid_id}"),
        None,
    );
    assert_eq!(status, 200);
    let (_, health) = call(&daemon, &admin, "GET", "/health", None);
    assert_eq!(
        health["webhooks"].as_array().map(Vec::len),
        Some(1),
        "{health}"
    );
    let (_, list) = call(&daemon, &admin, "GET", "/api/v1/webhooks", None);
    assert_eq!(list, json!([]), "push subscriptions are not webhooks");
    let (status, _) = json_call(&daemon, "DELETE", "/api/v1/devices/me/push", &mum, None);
    assert_eq!(status, 200);
    let (status, _) = json_call(&daemon, "GET", "/api/v1/devices/me/push", &mum, None);
    assert_eq!(status, 404);
}

//! Payments held for the owner's approval on the real binary (`api::approvals`,
//! `engine::spending::approvals`, `docs/household.md`): a device whose rules say
//! `over_limit: approve` gets 202 for a payment over a limit; the owner approves (it
//! runs once, as it was asked), denies or lets it expire; `Idempotency-Key` replays
//! the 202, then the final answer; the events tell the owner and the device only;
//! a restart keeps a pending approval. The wallet here has dead chain and Ark URLs, so
//! an approved payment gets past the rules to the wallet, which cannot pay (its answer
//! is the approval's result). A payment approved and settled is on the regtest stack
//! (`tests/e2e/household.rs`).

use serde_json::{Value, json};

use crate::harness::*;

fn call(
    daemon: &Daemon,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, Value, String) {
    let body = body.map(|b| b.to_string());
    let mut all = vec![("Content-Type", "application/json")];
    all.extend_from_slice(headers);
    let (status, raw) = request(daemon.port, method, path, &all, body.as_deref());
    let value = if body_of(&raw).is_empty() {
        Value::Null
    } else {
        json_of(&raw)
    };
    (status, value, raw)
}

struct Household {
    _tmp: tempfile::TempDir,
    datadir: std::path::PathBuf,
    daemon: Daemon,
    admin: String,
    child: String,
    child_id: String,
}

/// berthd (approvals waiting `expiry_secs`) with a wallet it cannot open, and a child's
/// device that may pay 1,000 sat at a time and asks the owner above that.
fn household(expiry_secs: u64) -> Household {
    let (tmp, datadir, daemon, admin) = berthd_with_offline_wallet(
        &format!("[household]\napproval_expiry_secs = {expiry_secs}\n"),
        &[],
    );
    let (child, child_id) = pair_device(&daemon, &datadir, "read,receive,send");
    let (status, set, _) = call(
        &daemon,
        "PUT",
        &format!("/api/v1/devices/{child_id}/rules"),
        &[("Authorization", &admin)],
        Some(json!({ "max_payment_sat": 1_000, "over_limit": "approve" })),
    );
    assert_eq!(status, 200, "{set}");
    assert_eq!(set["rules"]["over_limit"], "approve", "{set}");
    Household {
        _tmp: tmp,
        datadir,
        daemon,
        admin,
        child,
        child_id,
    }
}

impl Household {
    /// The child pays `sats` to an Ark address with `Idempotency-Key: key`.
    fn pay(&self, sats: u64, key: &str) -> (u16, Value, String) {
        call(
            &self.daemon,
            "POST",
            "/api/v1/wallet/send",
            &[("Authorization", &self.child), ("Idempotency-Key", key)],
            Some(json!({ "destination": foreign_ark_address(), "amount_sat": sats })),
        )
    }

    fn admin(&self, method: &str, path: &str) -> (u16, Value) {
        let (status, body, _) = call(
            &self.daemon,
            method,
            path,
            &[("Authorization", &self.admin)],
            None,
        );
        (status, body)
    }

    /// The approval `id` as the owner lists it.
    fn listed(&self, id: &str) -> Value {
        let (status, all) = self.admin("GET", "/api/v1/approvals");
        assert_eq!(status, 200, "{all}");
        all.as_array()
            .expect("a list")
            .iter()
            .find(|a| a["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} not listed: {all}"))
    }
}

/// A held payment's 202: its approval id.
fn held(answer: &(u16, Value, String)) -> String {
    assert_eq!(answer.0, 202, "{answer:?}");
    assert_eq!(answer.1["status"], "awaiting-approval", "{answer:?}");
    let message = answer.1["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("payment of 2,000 sat exceeds this device's limit of 1,000 sat")
            && message.contains("waits for the owner's approval"),
        "{message}"
    );
    answer.1["approval_id"]
        .as_str()
        .expect("an approval id")
        .to_string()
}

/// The approval events `bearer` can read, as (type, approval id, state).
fn approval_events(daemon: &Daemon, bearer: &str) -> Vec<(String, String, String)> {
    let (status, page, _) = call(
        daemon,
        "GET",
        "/api/v1/notifications/wait?after=0&timeout=0&types=approval-requested,approval-updated",
        &[("Authorization", bearer)],
        None,
    );
    assert_eq!(status, 200, "{page}");
    page["notifications"]
        .as_array()
        .expect("notifications")
        .iter()
        .map(|n| {
            (
                n["type"].as_str().unwrap_or_default().to_string(),
                n["approval"]["id"].as_str().unwrap_or_default().to_string(),
                n["approval"]["state"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

#[test]
fn a_payment_over_a_limit_waits_for_the_owner_and_runs_once_as_it_was_asked() {
    let h = household(600);
    let first = h.pay(2_000, "k-approve");
    let id = held(&first);
    // The same key: the 202 again, nothing held twice.
    let again = h.pay(2_000, "k-approve");
    assert_eq!(held(&again), id);
    assert!(again.2.contains("idempotent-replayed: true"), "{}", again.2);

    // Within the limit: no approval (the wallet cannot pay; that is its answer).
    let within = h.pay(1_000, "k-within");
    assert!(
        within.0 != 202 && within.0 != 403,
        "within the rules: {within:?}"
    );

    // Only admin credentials list, approve or deny.
    for (method, path) in [
        ("GET", "/api/v1/approvals".to_string()),
        ("POST", format!("/api/v1/approvals/{id}/approve")),
        ("POST", format!("/api/v1/approvals/{id}/deny")),
    ] {
        let (status, _, _) = call(
            &h.daemon,
            method,
            &path,
            &[("Authorization", &h.child)],
            None,
        );
        assert_eq!(status, 403, "{method} {path}");
    }
    // The device sees its own waiting payment.
    let (_, me, _) = call(
        &h.daemon,
        "GET",
        "/api/v1/devices/me",
        &[("Authorization", &h.child)],
        None,
    );
    assert_eq!(me["approvals"][0]["id"], id.as_str(), "{me}");
    assert_eq!(me["approvals"][0]["state"], "pending", "{me}");

    let listed = h.listed(&id);
    assert_eq!(listed["state"], "pending", "{listed}");
    assert_eq!(listed["device_id"], h.child_id.as_str(), "{listed}");
    assert_eq!(listed["kind"], "ark", "{listed}");
    assert_eq!(listed["amount_sat"], 2_000, "{listed}");
    assert_eq!(
        listed["destination"],
        foreign_ark_address().as_str(),
        "{listed}"
    );
    assert_eq!(listed["request"], "POST /api/v1/wallet/send", "{listed}");

    // Approved: it runs once, as it was asked, past the rules to the wallet.
    let (status, approved) = h.admin("POST", &format!("/api/v1/approvals/{id}/approve"));
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["state"], "executed", "{approved}");
    let result = approved["result"]["status"].as_u64().expect("a result");
    assert!(
        result != 202 && result != 403,
        "the approved payment reached the wallet: {approved}"
    );
    // A failed payment gives its amount back to no budget (there is none here) and
    // the approval cannot be used again.
    let (status, twice) = h.admin("POST", &format!("/api/v1/approvals/{id}/approve"));
    assert_eq!(status, 422, "{twice}");
    assert!(
        twice["message"]
            .as_str()
            .unwrap_or_default()
            .contains("executed"),
        "{twice}"
    );
    // The device's retry with its key gets the final answer now.
    let last = h.pay(2_000, "k-approve");
    assert_eq!(u64::from(last.0), result, "{last:?}");
    assert_eq!(last.1, approved["result"]["body"], "{last:?}");

    // The owner was told, and the device: requested, approved, executed.
    let states: Vec<String> = approval_events(&h.daemon, &h.admin)
        .into_iter()
        .filter(|e| e.1 == id)
        .map(|e| format!("{}:{}", e.0, e.2))
        .collect();
    assert_eq!(
        states,
        [
            "approval-requested:pending",
            "approval-updated:approved",
            "approval-updated:executed"
        ]
    );
    assert_eq!(approval_events(&h.daemon, &h.child).len(), 3);
    // Another device of the household hears nothing of it.
    let (other, _) = pair_device(&h.daemon, &h.datadir, "read");
    assert!(approval_events(&h.daemon, &other).is_empty());
}

#[test]
fn a_denied_or_expired_payment_never_runs_and_its_key_says_so() {
    let h = household(2);
    // Denied.
    let denied = held(&h.pay(2_000, "k-deny"));
    let (status, body) = h.admin("POST", &format!("/api/v1/approvals/{denied}/deny"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["state"], "denied", "{body}");
    let retry = h.pay(2_000, "k-deny");
    assert_eq!(retry.0, 403, "{retry:?}");
    assert_eq!(retry.1["code"], "spending_rule", "{retry:?}");
    assert!(
        retry.1["message"]
            .as_str()
            .unwrap_or_default()
            .contains("the owner denied this payment"),
        "{retry:?}"
    );
    let (status, _) = h.admin("POST", &format!("/api/v1/approvals/{denied}/approve"));
    assert_eq!(status, 422, "a denied payment cannot be approved after");

    // Expired: not answered within 2 s.
    let late = held(&h.pay(2_000, "k-late"));
    wait_until("the approval expires", 10, || {
        h.listed(&late)["state"] == "expired"
    });
    let (status, body) = h.admin("POST", &format!("/api/v1/approvals/{late}/approve"));
    assert_eq!(status, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("expired"),
        "{body}"
    );
    wait_until("the key's answer is the refusal", 10, || {
        h.pay(2_000, "k-late").0 == 403
    });
    let retry = h.pay(2_000, "k-late");
    assert!(
        retry.1["message"]
            .as_str()
            .unwrap_or_default()
            .contains("did not approve this payment in time"),
        "{retry:?}"
    );
    assert!(h.listed(&denied)["result"].is_null(), "never ran");
    assert!(h.listed(&late)["decided_at"].is_string());
    let (status, _) = h.admin("GET", "/api/v1/approvals/00000000000000000000000000000000");
    assert_eq!(status, 404);
}

#[test]
fn a_restart_keeps_a_pending_approval() {
    let h = household(600);
    let id = held(&h.pay(2_000, "k-restart"));
    let Household {
        _tmp,
        datadir,
        daemon,
        admin,
        child,
        child_id,
    } = h;
    let (status, _) = daemon.terminate();
    assert!(status.success());
    let daemon = Daemon::start_logged(&datadir, &["-q"], &[], &_tmp.path().join("berthd-2.log"));
    let h = Household {
        _tmp,
        datadir,
        daemon,
        admin,
        child,
        child_id,
    };
    assert_eq!(h.listed(&id)["state"], "pending");
    let (status, approved) = h.admin("POST", &format!("/api/v1/approvals/{id}/approve"));
    assert_eq!(status, 200, "{approved}");
    assert_eq!(approved["state"], "executed", "{approved}");
    let last = h.pay(2_000, "k-restart");
    assert_eq!(
        u64::from(last.0),
        approved["result"]["status"].as_u64().expect("status"),
        "{last:?}"
    );
}

#[test]
fn newly_paired_devices_start_with_the_owners_rules() {
    let toml = "[household.new_devices]\nmax_payment_sat = 5000\nkinds = [\"ark\", \"lightning\"]\n\
                max_fee_sat = 10\nover_limit = \"approve\"\nhistory = \"own\"\n\
                budgets = [{ amount_sat = 20000, period = \"week\" }]\n";
    let (_tmp, datadir, daemon, admin) = berthd_with_offline_wallet(toml, &[]);
    let (_, phone) = pair_device(&daemon, &datadir, "read,receive,send");
    let (status, rules, _) = call(
        &daemon,
        "GET",
        &format!("/api/v1/devices/{phone}/rules"),
        &[("Authorization", &admin)],
        None,
    );
    assert_eq!(status, 200, "{rules}");
    assert_eq!(
        rules["rules"],
        json!({
            "max_payment_sat": 5000,
            "budgets": [{ "amount_sat": 20000, "period": "week" }],
            "kinds": ["ark", "lightning"],
            "max_fee_sat": 10,
            "over_limit": "approve",
            "history": "own",
        }),
        "{rules}"
    );
    // An admin device could lift them: it starts without.
    let (_, owner) = pair_device(&daemon, &datadir, "read,receive,send,admin");
    let (_, rules, _) = call(
        &daemon,
        "GET",
        &format!("/api/v1/devices/{owner}/rules"),
        &[("Authorization", &admin)],
        None,
    );
    assert_eq!(rules["rules"], Value::Null, "{rules}");
}

#[test]
fn rules_for_new_devices_that_make_no_sense_stop_the_start() {
    let (tmp, datadir) = datadir_with_berth_toml(
        "[household.new_devices]\nbudgets = [{ amount_sat = 5, period = \"fortnight\" }]\n",
    );
    let err = Daemon::try_start(&datadir, &["-q"])
        .err()
        .expect("refused to start");
    assert!(
        err.contains("household.new_devices") && err.contains("fortnight"),
        "{err}"
    );
    drop(tmp);
}

#[test]
fn the_owner_sets_the_rules_new_devices_start_with_in_the_console() {
    let toml = "[household.new_devices]\nmax_payment_sat = 5000\n";
    let (_tmp, datadir, daemon, admin) = berthd_with_offline_wallet(toml, &[]);
    let path = "/api/v1/household/new-device-rules";
    let (status, from_file, _) = call(&daemon, "GET", path, &[("Authorization", &admin)], None);
    assert_eq!(status, 200, "{from_file}");
    assert_eq!(from_file["source"], "berth.toml", "{from_file}");
    assert_eq!(from_file["rules"]["max_payment_sat"], 5000, "{from_file}");
    let (_, before) = pair_device(&daemon, &datadir, "read,receive,send");

    // The console's form replaces berth.toml's rules for devices paired from now on.
    let cookie = console_session(daemon.port, &datadir, "read,receive,send,admin", "Laptop");
    let (status, page) = daemon.get("/console/household/new-devices", &[("Cookie", &cookie)]);
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("Rules for new devices") && page.contains("5000"),
        "{page}"
    );
    let (status, raw) = post_form(
        daemon.port,
        "/console/household/new-devices",
        &[
            ("Cookie", &cookie),
            ("Origin", &format!("http://127.0.0.1:{}", daemon.port)),
        ],
        "max_payment_sat=700&max_fee_sat=&budget_day=&budget_week=2000&budget_month=\
         &budget_year=&lightning=on&over_limit=approve&own_history=on",
    );
    assert_eq!(status, 303, "{raw}");
    let (_, devices) = daemon.get("/console/devices", &[("Cookie", &cookie)]);
    assert!(
        devices
            .contains("Rules for new devices: 700 sat a payment; 2,000 sat a week; only lightning"),
        "{devices}"
    );
    let (_, set, _) = call(&daemon, "GET", path, &[("Authorization", &admin)], None);
    assert_eq!(set["source"], "owner", "{set}");
    let (_, phone) = pair_device(&daemon, &datadir, "read,receive,send");
    let rules_of = |id: &str| {
        call(
            &daemon,
            "GET",
            &format!("/api/v1/devices/{id}/rules"),
            &[("Authorization", &admin)],
            None,
        )
        .1["rules"]
            .clone()
    };
    assert_eq!(
        rules_of(&phone),
        json!({
            "max_payment_sat": 700,
            "budgets": [{ "amount_sat": 2000, "period": "week" }],
            "kinds": ["lightning"],
            "over_limit": "approve",
            "history": "own",
        })
    );
    assert_eq!(
        rules_of(&before)["max_payment_sat"],
        5000,
        "paired before: kept"
    );

    // "None" by API: new devices start without rules, whatever berth.toml says.
    let (status, none, _) = call(
        &daemon,
        "PUT",
        path,
        &[("Authorization", &admin)],
        Some(json!({})),
    );
    assert_eq!(status, 200, "{none}");
    assert_eq!(none["rules"], Value::Null, "{none}");
    assert_eq!(none["source"], "owner", "{none}");
    let (_, tablet) = pair_device(&daemon, &datadir, "read,receive,send");
    assert_eq!(rules_of(&tablet), Value::Null);
    // A device's own rules are not set through this path.
    let (status, _, _) = call(
        &daemon,
        "PUT",
        &format!("/api/v1/devices/nwc:{tablet}/rules"),
        &[("Authorization", &admin)],
        Some(json!({ "max_payment_sat": 1 })),
    );
    assert_eq!(status, 404);
}

/// The console's Send page pays through the API as the browser's device: its rules
/// apply, a payment over them waits for the owner (once, whatever the number of
/// confirms: the review's idempotency key), one within them reaches the wallet, which
/// here cannot pay and says so; a device without the send scope has no Send page.
#[test]
fn the_console_send_page_obeys_the_devices_rules_and_a_payment_over_them_waits() {
    let (_tmp, datadir, daemon, admin) =
        berthd_with_offline_wallet("[household]\napproval_expiry_secs = 600\n", &[]);
    let (status, set, _) = call(
        &daemon,
        "PUT",
        "/api/v1/household/new-device-rules",
        &[("Authorization", &admin)],
        Some(json!({ "max_payment_sat": 1_000, "over_limit": "approve" })),
    );
    assert_eq!(status, 200, "{set}");
    let cookie = console_session(daemon.port, &datadir, "read,receive,send", "Child laptop");
    let origin = format!("http://127.0.0.1:{}", daemon.port);
    let post = |path: &str, form: &str| {
        post_form(
            daemon.port,
            path,
            &[("Cookie", &cookie), ("Origin", &origin)],
            form,
        )
    };
    let (status, page) = daemon.get("/console/send", &[("Cookie", &cookie)]);
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("Pay to") && page.contains("/console/send.js"),
        "{page}"
    );

    // The field says what it does not recognise, and asks for an amount it needs.
    let ark = foreign_ark_address();
    let (status, page) = post("/console/send/review", "destination=hello&amount=");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("not an Ark address"), "{page}");
    let (_, page) = post(
        "/console/send/review",
        &format!("destination={ark}&amount="),
    );
    assert!(
        page.contains("Enter the amount: an Ark address carries none"),
        "{page}"
    );
    // The fee estimate needs the wallet loaded: no Pay button without one.
    let (_, page) = post(
        "/console/send/review",
        &format!("destination={ark}&amount=2000"),
    );
    assert!(
        page.contains("No fee estimate") && !page.contains("Pay 2,000"),
        "{page}"
    );

    // Over the device's limit: held for the owner, once for two confirms.
    let form = format!("destination={ark}&amount=2000&comment=&key=0123456789abcdef");
    for _ in 0..2 {
        let (status, page) = post("/console/send", &form);
        assert_eq!(status, 200, "{page}");
        assert!(
            page.contains("Waiting for the owner&#39;s approval")
                && page.contains("exceeds this device&#39;s limit of 1,000 sat"),
            "{page}"
        );
    }
    let (status, all, _) = call(
        &daemon,
        "GET",
        "/api/v1/approvals",
        &[("Authorization", &admin)],
        None,
    );
    assert_eq!(status, 200, "{all}");
    let waiting: Vec<&Value> = all
        .as_array()
        .expect("approvals")
        .iter()
        .filter(|a| a["state"] == "pending")
        .collect();
    assert_eq!(waiting.len(), 1, "one approval for two confirms: {all}");
    assert_eq!(waiting[0]["amount_sat"], 2000, "{all}");

    // Within the limit: past the rules to the wallet, which cannot pay (not loaded).
    let (status, page) = post(
        "/console/send",
        &format!("destination={ark}&amount=500&comment=&key=fedcba9876543210"),
    );
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Not paid:"), "{page}");

    // A device that may only look has no Send page and cannot post to it.
    let viewer = console_session(daemon.port, &datadir, "read", "Display");
    let (status, _) = daemon.get("/console/send", &[("Cookie", &viewer)]);
    assert_eq!(status, 403);
    let (status, _) = post_form(
        daemon.port,
        "/console/send",
        &[("Cookie", &viewer), ("Origin", &origin)],
        &form,
    );
    assert_eq!(status, 403);
}

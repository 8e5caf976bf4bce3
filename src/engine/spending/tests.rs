//! The rules' check, periods and grants; reservations on a real database.

use chrono::{Duration, FixedOffset};

use super::*;

fn at(s: &str) -> DateTime<FixedOffset> {
    DateTime::parse_from_rfc3339(s).expect("time")
}

#[test]
fn periods_are_calendar_periods_in_the_boxs_time_zone() {
    // A Wednesday evening, two hours east of UTC.
    let now = at("2026-11-25T21:30:00+02:00");
    assert_eq!(Period::Day.start(&now), at("2026-11-25T00:00:00+02:00"));
    assert_eq!(Period::Day.end(&now), at("2026-11-26T00:00:00+02:00"));
    assert_eq!(Period::Week.start(&now), at("2026-11-23T00:00:00+02:00"));
    assert_eq!(Period::Week.end(&now), at("2026-11-30T00:00:00+02:00"));
    assert_eq!(Period::Month.start(&now), at("2026-11-01T00:00:00+02:00"));
    assert_eq!(Period::Month.end(&now), at("2026-12-01T00:00:00+02:00"));
    assert_eq!(Period::Year.start(&now), at("2026-01-01T00:00:00+02:00"));
    assert_eq!(Period::Year.end(&now), at("2027-01-01T00:00:00+02:00"));
    let december = at("2026-12-31T23:59:00+02:00");
    assert_eq!(
        Period::Month.end(&december),
        at("2027-01-01T00:00:00+02:00")
    );
}

fn record(
    max: Option<u64>,
    budgets: &[(u64, &str)],
    kinds: Option<&[&str]>,
) -> SpendingRulesRecord {
    SpendingRulesRecord {
        max_payment_sat: max,
        budgets: budgets
            .iter()
            .map(|(amount, period)| BudgetRecord {
                amount_sat: *amount,
                period: (*period).into(),
                used_sat: 0,
                period_start_us: 0,
            })
            .collect(),
        kinds: kinds.map(|k| k.iter().map(|k| (*k).to_string()).collect()),
        over_limit: "refuse".into(),
        max_fee_sat: None,
        own_history: false,
    }
}

#[test]
fn each_rule_refuses_with_its_figures_and_a_budget_renews() {
    let now = Local::now();
    let sat = |n| Some(Amount::from_sat(n));
    let mut rules = record(
        Some(1_000),
        &[(5_000, "week"), (50_000, "month")],
        Some(&["ark", "lightning"]),
    );
    let over = check(&mut rules, PaymentKind::Ark, sat(10_000), "d", &now).expect_err("over");
    assert_eq!(
        over.to_string(),
        "payment of 10,000 sat exceeds this device's limit of 1,000 sat per payment"
    );
    let kind = check(&mut rules, PaymentKind::Onchain, sat(10), "d", &now).expect_err("kind");
    assert_eq!(
        kind.to_string(),
        "this device may not make onchain payments (allowed: ark, lightning)"
    );
    for _ in 0..5 {
        check(&mut rules, PaymentKind::Lightning, sat(1_000), "d", &now).expect("within");
    }
    let budget = check(&mut rules, PaymentKind::Ark, sat(1), "d", &now).expect_err("budget");
    assert_eq!(
        budget.to_string(),
        "payment of 1 sat exceeds this device's budget: 0 of 5,000 sat left this week"
    );
    assert_eq!(rules.budgets[1].used_sat, 5_000, "taken from every budget");
    let unknown = check(&mut rules, PaymentKind::Ark, None, "d", &now).expect_err("unknown");
    assert!(unknown.to_string().contains("not known"), "{unknown}");
    // A week later the weekly budget starts again; the monthly one may not.
    let later = now + Duration::days(7);
    let taken = check(&mut rules, PaymentKind::Ark, sat(1_000), "d", &later).expect("renewed");
    assert_eq!(rules.budgets[0].used_sat, 1_000);
    assert_eq!(taken.taken.len(), 2);
    assert_eq!(taken.taken[0].1, micros(&Period::Week.start(&later)));
}

/// A hundred payments at once against one budget, on a real database: never more
/// than the budget together; the failed ones' amounts come back; a device's removal
/// takes its rules.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_payments_at_once_never_pass_a_budget() {
    use crate::store::{DeviceRecord, Store, StoreConfig};
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, _) = Store::open_async(&dir.path().join("berth.redb"), &StoreConfig::default())
        .await
        .expect("open");
    let device = DeviceRecord {
        id: "00000000000000aa".into(),
        name: "child".into(),
        scopes: 0b111,
        token_hash: [7; 32],
        created_at_us: 1,
        console_session: false,
    };
    store.add_device(device, 8).await.expect("device");
    let rules = record(None, &[(10_000, "day")], None);
    assert!(
        store
            .set_spending_rules("00000000000000aa", move |_| Some(rules))
            .await
            .expect("set")
    );
    let mut payments = tokio::task::JoinSet::new();
    for n in 0..100u8 {
        let store = store.clone();
        payments.spawn(async move {
            let now = Local::now();
            let id = [n; 16];
            let reserved = store
                .spending_reserve("00000000000000aa", id, move |r| {
                    check(
                        r,
                        PaymentKind::Ark,
                        Some(Amount::from_sat(700)),
                        "00000000000000aa",
                        &now,
                    )
                })
                .await
                .expect("reserve");
            matches!(reserved, Reserved::Taken { .. }).then_some(id)
        });
    }
    let mut taken = Vec::new();
    while let Some(done) = payments.join_next().await {
        if let Some(id) = done.expect("task") {
            taken.push(id);
        }
    }
    assert_eq!(
        taken.len(),
        14,
        "10,000 sat covers fourteen payments of 700"
    );
    let used = |store: Store| async move {
        store
            .spending_rules("00000000000000aa")
            .await
            .expect("rules")
            .expect("some")
            .budgets[0]
            .used_sat
    };
    assert_eq!(used(store.clone()).await, 9_800);
    assert_eq!(store.spending_reservations().await.expect("list").len(), 14);
    // Half of them fail: their amounts come back; the rest stay spent.
    for (i, id) in taken.iter().enumerate() {
        assert!(
            store
                .spending_finish(*id, i % 2 == 0)
                .await
                .expect("finish")
        );
    }
    assert_eq!(used(store.clone()).await, 4_900);
    assert!(
        store
            .spending_reservations()
            .await
            .expect("list")
            .is_empty()
    );
    store
        .remove_device("00000000000000aa")
        .await
        .expect("remove");
    assert!(
        store
            .spending_rules("00000000000000aa")
            .await
            .expect("rules")
            .is_none()
    );
}

#[test]
fn kinds_alone_limit_no_amount_and_amounts_read_as_people_write_them() {
    let now = Local::now();
    let mut rules = record(None, &[], Some(&["exit"]));
    check(&mut rules, PaymentKind::Exit, None, "d", &now).expect("an exit of any size");
    assert!(check(&mut rules, PaymentKind::Ark, None, "d", &now).is_err());
    assert_eq!(sats(1_234_567), "1,234,567");
    assert_eq!(sats(12), "12");
}

/// An engine over a real store in `dir`, with a paired device whose rules hold payments
/// over 1,000 sat (a 5,000 sat weekly budget, a 25 sat fee cap) for approval.
async fn engine_with_a_device(dir: &std::path::Path, device: &str) -> std::sync::Arc<Engine> {
    use crate::store::{DeviceRecord, EventRetention, Store, StoreConfig};
    let (store, _) = Store::open_async(&dir.join("berth.redb"), &StoreConfig::default())
        .await
        .expect("store");
    store
        .add_device(
            DeviceRecord {
                id: device.into(),
                name: "child".into(),
                scopes: 0b111,
                token_hash: [8; 32],
                created_at_us: 1,
                console_session: false,
            },
            8,
        )
        .await
        .expect("device");
    let events = crate::events::EventHub::open(store.clone(), EventRetention::default())
        .await
        .expect("events");
    let layout = crate::datadir::Layout::new(dir.to_path_buf());
    let engine = Engine::new(
        store,
        layout.clone(),
        crate::keys::Seeds::new(layout.seed_files(), Default::default()),
        events,
        crate::engine::autopilot::Policy::default(),
        Policy::default(),
    );
    let rules = Rules::parse(
        Some(1_000),
        &[(5_000, "week")],
        None,
        Some(25),
        Some("approve"),
    )
    .expect("rules");
    assert!(
        engine
            .spending()
            .set_rules(device, Some(rules))
            .await
            .expect("set")
    );
    engine
}

/// An approved payment is let through once, and only the payment approved: on a real
/// database, through the engine.
#[tokio::test]
async fn an_approval_lets_through_only_its_own_payment_and_only_once() {
    use crate::store::approvals::HeldRequestRecord;
    let dir = tempfile::tempdir().expect("tempdir");
    let device = "00000000000000bb";
    let engine = engine_with_a_device(dir.path(), device).await;
    let who = Spender::Device(device.into());
    let sat = |n| Some(Amount::from_sat(n));
    let asked = match engine
        .spending()
        .authorize(&who, PaymentKind::Ark, sat(2_000))
        .await
    {
        Err(EngineError::NeedsApproval(asked)) => *asked,
        other => panic!("expected NeedsApproval, got {other:?}"),
    };
    assert_eq!(asked.max_fee, sat(25), "the fee cap is held with it");
    let request = HeldRequestRecord {
        method: "POST".into(),
        path: "/api/v1/wallet/send".into(),
        body: "{}".into(),
        idempotency_key: None,
        nwc_key: None,
    };
    let approval = engine
        .approvals()
        .hold(asked, None, request)
        .await
        .expect("hold");
    let id = approvals::parse_id(&approval.id).expect("id");
    let approved = Spender::Approved {
        device: device.into(),
        approval: id,
    };
    // Not approved yet: nothing runs.
    let early = engine
        .spending()
        .authorize(&approved, PaymentKind::Ark, sat(2_000))
        .await
        .expect_err("pending");
    assert!(early.to_string().contains("not approved"), "{early}");
    engine
        .approvals()
        .decide(id, true)
        .await
        .expect("decide")
        .expect("found");
    // Another amount, another kind, another device: not the payment approved.
    for (who, kind, amount) in [
        (&approved, PaymentKind::Ark, sat(2_001)),
        (&approved, PaymentKind::Lightning, sat(2_000)),
        (
            &Spender::Approved {
                device: "00000000000000cc".into(),
                approval: id,
            },
            PaymentKind::Ark,
            sat(2_000),
        ),
    ] {
        let wrong = engine
            .spending()
            .authorize(who, kind, amount)
            .await
            .expect_err("not the one approved");
        assert!(wrong.to_string().contains("not the payment"), "{wrong}");
    }
    let grant = engine
        .spending()
        .authorize(&approved, PaymentKind::Ark, sat(2_000))
        .await
        .expect("the approved payment");
    assert_eq!(grant.max_fee, sat(25));
    assert!(grant.reservation.is_some(), "counted against the budget");
    let again = engine
        .spending()
        .authorize(&approved, PaymentKind::Ark, sat(2_000))
        .await
        .expect_err("once");
    assert!(again.to_string().contains("already ran"), "{again}");
    engine.spending().finish(grant, Outcome::Done).await;
    let view = engine
        .spending()
        .rules(device)
        .await
        .expect("rules")
        .expect("some");
    assert_eq!(
        view.budgets[0].used,
        Amount::from_sat(2_000),
        "an approved payment counts against the budget"
    );
}

/// A stop in the middle of an approved payment: at the next start the approval is
/// executed with its outcome unknown, and its `Idempotency-Key` answers that, not the
/// 202 any more; it never runs again.
#[tokio::test]
async fn an_approved_payment_cut_short_by_a_stop_is_not_run_again_and_its_key_says_so() {
    use crate::store::approvals::HeldRequestRecord;
    use crate::store::idempotency::Claim;
    let dir = tempfile::tempdir().expect("tempdir");
    let device = "00000000000000bb";
    let engine = engine_with_a_device(dir.path(), device).await;
    let keys = engine.idempotency_keys();
    let (key, request) = ([0x4b; 32], [0x52; 32]);
    assert_eq!(
        keys.claim(key, request, 1, u64::MAX / 2)
            .await
            .expect("claim"),
        Claim::Claimed
    );
    keys.finish(key, Some((202, b"{}".to_vec())))
        .await
        .expect("the 202 kept");
    let sat = |n| Some(Amount::from_sat(n));
    let who = Spender::Device(device.into());
    let Err(EngineError::NeedsApproval(asked)) = engine
        .spending()
        .authorize(&who, PaymentKind::Ark, sat(2_000))
        .await
    else {
        panic!("expected NeedsApproval");
    };
    let held = HeldRequestRecord {
        method: "POST".into(),
        path: "/api/v1/wallet/send".into(),
        body: "{}".into(),
        idempotency_key: Some(key),
        nwc_key: None,
    };
    let approval = engine
        .approvals()
        .hold(*asked, None, held)
        .await
        .expect("hold");
    let id = approvals::parse_id(&approval.id).expect("id");
    engine.approvals().decide(id, true).await.expect("decide");
    // Let through (started), then the stop: no answer recorded.
    let grant = engine
        .spending()
        .authorize(
            &Spender::Approved {
                device: device.into(),
                approval: id,
            },
            PaymentKind::Ark,
            sat(2_000),
        )
        .await
        .expect("let through");
    drop(grant);
    let recovered = engine.approvals().recover().await.expect("recover");
    assert!(recovered.to_run.is_empty(), "started once: never run again");
    assert_eq!(
        recovered
            .cut_short
            .iter()
            .map(|a| a.record.state.as_str())
            .collect::<Vec<_>>(),
        ["executed"],
        "cut short: executed, for its transport to answer from what it knows"
    );
    let after = engine
        .approvals()
        .get(id)
        .await
        .expect("get")
        .expect("found");
    assert_eq!(after.record.state, "executed");
    assert_eq!(after.record.result.as_ref().map(|r| r.status), Some(409));
    match keys
        .claim(key, request, 2, u64::MAX / 2)
        .await
        .expect("claim")
    {
        Claim::Replay { status, body } => {
            assert_eq!(status, 409);
            assert!(String::from_utf8_lossy(&body).contains("outcome is unknown"));
        }
        other => panic!("expected the 409 replayed, got {other:?}"),
    }
}

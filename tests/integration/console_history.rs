//! The console's history page over HTTP (`src/console/history.rs`), on a box whose
//! wallet has no movements (dead chain and Ark URLs): the page lists none, a filter
//! that is not one is answered 400 naming the field, a movement that is not there is
//! 404, and a device without the send scope may not label. The page
//! listing, filtering, detailing and labelling real movements runs on the regtest
//! stack (`tests/e2e/household.rs`); the browser test checks it for phones and
//! accessibility.

use crate::harness::*;

#[test]
fn the_history_page_says_what_it_cannot_show_and_what_is_wrong_with_a_filter() {
    let (_tmp, datadir, daemon, _admin) = berthd_with_offline_wallet("", &[]);
    let cookie = console_session(daemon.port, &datadir, "read,receive,send,admin", "Laptop");
    let page = |path: &str| {
        let (status, raw) = daemon.get(path, &[("Cookie", &cookie)]);
        (status, body_of(&raw).to_string())
    };
    let (status, html) = page("/console/history");
    assert!(html.contains("<h1>History</h1>"), "{html}");
    assert!(html.contains("/console/history.csv"), "{html}");
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains("0 movement(s)"),
        "read from the store, whether bark can reach its server or not: {html}"
    );
    let (status, html) = page("/console/history?from=yesterday");
    assert_eq!(status, 400, "{html}");
    assert!(html.contains("From: a date as YYYY-MM-DD"), "{html}");
    let (status, _) = page("/console/history/4242");
    assert_eq!(status, 404, "no movement 4242");
    let (status, _) = post_form(
        daemon.port,
        "/console/history/4242/label",
        &[
            ("Cookie", &cookie),
            ("Origin", &format!("http://127.0.0.1:{}", daemon.port)),
        ],
        "label=x",
    );
    assert_eq!(status, 404, "no label for a movement that is not there");
    // A device that may only read sees the page, and may not post a label.
    let reader = console_session(daemon.port, &datadir, "read", "Kitchen tablet");
    let (status, _) = daemon.get("/console/history", &[("Cookie", &reader)]);
    assert_eq!(status, 200);
    let (status, _) = post_form(
        daemon.port,
        "/console/history/1/label",
        &[
            ("Cookie", &reader),
            ("Origin", &format!("http://127.0.0.1:{}", daemon.port)),
        ],
        "label=x",
    );
    assert_eq!(status, 403, "the send scope labels movements");
}

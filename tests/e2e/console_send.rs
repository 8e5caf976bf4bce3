//! Scenario: the owner pays from the console's Send page, in Chromium (skipped without
//! it, or without Core Lightning): an Ark address of another wallet (bob's), then a
//! Lightning invoice of the outside node. Each is pasted into the one field, recognised,
//! reviewed with its fee estimate, confirmed, and arrives; both are then in the
//! console's History. Over plain HTTP (the e2e stack serves no TLS), the session
//! cookie made as a pairing window's sign-in makes it.

use serde_json::{Value, json};

use crate::harness;
use crate::stack::{Stack, wait_for};

const TEST: &str = "console_send::the_console_pays_an_ark_address_and_an_invoice";

#[test]
#[ignore = "needs the regtest stack with Core Lightning: run scripts/e2e"]
fn the_console_pays_an_ark_address_and_an_invoice() {
    let Some(chromium) = harness::browser::chromium_binary(TEST) else {
        return;
    };
    let Some(stack) = Stack::start_with_lightning("console-send") else {
        return;
    };
    let ln = stack.ln();
    let alice = stack.berthd("alice");
    let bob = stack.berthd("bob");
    crate::board_and_confirm(&stack, &alice, 600_000);
    stack.lightning_at_tip();
    let port = alice.port();
    let bob_address = bob.post_ok("/api/v1/wallet/addresses/next", json!({}))["address"]
        .as_str()
        .expect("address")
        .to_owned();
    let (invoice, _) = ln.external.invoice(Some(21_000_000), "console-send");
    // Reviewed for the screenshots, never paid.
    let (shown_invoice, _) = ln.external.invoice(Some(5_000_000), "console-shown");

    let cookie = harness::console_session(port, &alice.datadir, "read,receive,send,admin", "Owner");
    let base = format!("http://127.0.0.1:{port}");
    let browser = harness::browser::Chromium::start(&chromium, "");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let mut page = harness::browser::Page::signed_in(&browser, &base, &cookie, "e2e-send-screenshots").await;
        for (n, (destination, amount, kind, shown, done)) in [
            (
                bob_address.as_str(),
                "12345",
                "an Ark address",
                "12,345 sats",
                "Paid: the payment reached the recipient.",
            ),
            (
                invoice.as_str(),
                "",
                "a Lightning invoice",
                "21,000 sats",
                "The Lightning payment is under way",
            ),
        ]
        .into_iter()
        .enumerate()
        {
            page.open(&format!("{base}/console/send")).await;
            page.wait_for("/console/send", "Pay to").await;
            page.eval(&format!(
                "(() => {{ const f = document.querySelector('form[action=\"/console/send/review\"]'); \
                 f.destination.value = '{destination}'; f.amount.value = '{amount}'; f.submit(); return true }})()"
            ))
            .await;
            let review = page.wait_for("/console/send/review", "Check, then pay").await;
            assert!(
                review.contains(kind) && review.contains(shown) && review.contains("Fee (estimate)"),
                "{review}"
            );
            page.screenshot(&format!("{}-review", n + 1)).await;
            if let Some(axe) = harness::browser::axe_source() {
                let faults = page.accessibility_faults(&axe).await;
                assert!(faults.is_empty(), "the review: {faults:#?}");
            }
            page.eval(
                "(() => { document.querySelector('form[action=\"/console/send\"] button').click(); return true })()",
            )
            .await;
            let outcome = page.wait_for("/console/send", done).await;
            page.screenshot(&format!("{}-paid", n + 1)).await;
            assert!(!outcome.contains("Not paid"), "{outcome}");
            if kind == "an Ark address" {
                // The answer names its movement: the page links to it.
                let linked = page
                    .eval("!!document.querySelector('.notice a[href^=\"/console/history/\"]')")
                    .await;
                assert_eq!(linked, json!(true), "{outcome}");
            }
        }

        // Both arrived: bob's Ark balance, the outside node's invoice.
        wait_for("bob to receive the Ark payment", 120, || {
            bob.post_ok("/api/v1/wallet/sync", json!({}));
            let spendable = bob.get_ok("/api/v1/wallet/balance")["spendable_sat"].as_u64()?;
            (spendable >= 12_345).then_some(())
        });
        wait_for("the invoice to be paid", 120, || {
            (ln.external.invoice_status("console-send") == "paid").then_some(())
        });

        // And both are in the console's History, each linked to its details.
        let history = alice.get_ok("/api/v1/history");
        let newest = |subsystem: &str| -> u64 {
            history
                .as_array()
                .expect("history")
                .iter()
                .find(|m: &&Value| m["subsystem"]["name"] == subsystem)
                .and_then(|m| m["id"].as_u64())
                .unwrap_or_else(|| panic!("no {subsystem} movement: {history}"))
        };
        let ark = newest("bark.arkoor");
        let lightning = newest("bark.lightning_send");
        page.open(&format!("{base}/console/history")).await;
        page.wait_for("/console/history", "movement(s)").await;
        let links = page
            .eval("[...document.querySelectorAll('a')].map(a => a.getAttribute('href')).join(' ')")
            .await;
        let links = links.as_str().unwrap_or_default();
        for id in [ark, lightning] {
            assert!(
                links.contains(&format!("/console/history/{id}")),
                "movement {id} in History: {links}"
            );
        }
        page.screenshot("3-history").await;

        // The pages with money in them, for docs/ (scripts/console-screenshots): the
        // home screen, Send and History at a phone's width and a laptop's, light and
        // dark (at one device pixel per CSS pixel: they are checked in).
        for (width, height, mobile, dark, size) in [
            (390, 844, true, false, "phone"),
            (1280, 900, false, false, "laptop"),
            (390, 844, true, true, "phone-dark"),
            (1280, 900, false, true, "laptop-dark"),
        ] {
            page.call(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
            )
            .await;
            page.set_dark(dark).await;
            for (path, marker, name) in [
                ("/", "Balance", "home"),
                ("/console/history", "movement(s)", "history"),
            ] {
                page.open(&format!("{base}{path}")).await;
                page.wait_for(path, marker).await;
                page.screenshot(&format!("{name}-{size}")).await;
            }
            // Send, as the owner sees it before confirming.
            page.open(&format!("{base}/console/send")).await;
            page.wait_for("/console/send", "Pay to").await;
            page.eval(&format!(
                "(() => {{ const f = document.querySelector('form[action=\"/console/send/review\"]'); \
                 f.destination.value = '{shown_invoice}'; f.submit(); return true }})()"
            ))
            .await;
            page.wait_for("/console/send/review", "Check, then pay").await;
            page.screenshot(&format!("send-{size}")).await;
        }
    });
    println!(
        "{TEST}: an Ark address and a Lightning invoice paid from the Send page, both in History"
    );
}

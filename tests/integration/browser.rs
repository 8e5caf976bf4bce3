//! The web console in a real browser: Debian's headless Chromium, driven over the
//! Chrome DevTools Protocol, against the real binary over TLS (the box's own CA,
//! accepted by its key's hash, as a user who checked the pin would). Claim the box with
//! a provisioned code, see the overview, create the wallet (its phrase shown once and
//! confirmed), open a pairing window and read the pairing
//! link by decoding the QR code in a screenshot of the page, as a phone's camera would;
//! pair with it, revoke that device from the page, and see its token refused; a page
//! of another origin that posts to the console changes nothing. A household: a child's
//! device paired from the page, its spending rules set on its own page, its payment
//! over them waiting on the approvals page (and the overview), approved there and run
//! once. The Send page refuses what it cannot pay (paying is on the regtest stack,
//! `tests/e2e/console_send.rs`). Every page, at a phone's width and a laptop's, in the
//! light and the dark colour scheme, is checked with axe-core (no serious or critical
//! accessibility fault; skipped without it, `tests/console`), and walked with the Tab
//! key at a laptop's width (every control reached, each with a visible focus mark).
//! Screenshots of each page are kept under `target/tmp/browser-screenshots/`.
//!
//! The same flow runs against a booted appliance image (`image/boot-test` with
//! `BERTH_BOOT_BROWSER=1`): `BERTH_BROWSER_BOX_PORT` (the box's API, forwarded to
//! 127.0.0.1), `BERTH_BROWSER_BOX_CHAIN` (the PEM chain the box served, leaf first),
//! `BERTH_BROWSER_BOX_CLAIM_CODE` (the code `image/provision` wrote), and optionally
//! `BERTH_BROWSER_BOX_BITCOIND` (`URL USER PASS`: the chain source the box's wallet is
//! created with). Its screenshots go to `target/tmp/browser-screenshots-box/`.

use crate::harness;
use crate::harness::browser::{Chromium, Page, chromium_binary, shots_dir};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TEST: &str = "a_browser_claims_the_box_pairs_a_phone_by_its_qr_code_and_revokes_it";
const BOX_TEST: &str = "a_booted_box_is_claimed_and_paired_from_a_browser";
const CODE: &str = "browser-claim-code-0123456789";

/// The text inside the first QR code in a PNG screenshot.
fn decode_qr(png_bytes: &[u8]) -> String {
    let decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    let mut reader = decoder.read_info().expect("png");
    let mut pixels = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut pixels).expect("frame");
    let channels = info.color_type.samples();
    let (width, height) = (info.width as usize, info.height as usize);
    let mut image = rqrr::PreparedImage::prepare_from_greyscale(width, height, |x, y| {
        let at = (y * width + x) * channels;
        // The page is black on white: the first channel is enough.
        pixels[at]
    });
    let grids = image.detect_grids();
    let grid = grids.first().expect("a QR code on the page");
    grid.decode().expect("a readable QR code").1
}

/// `sha256/<base64url>` → the standard base64 Chromium's SPKI list takes.
fn chromium_pin(pin: &str) -> String {
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(pin.trim_start_matches("sha256/"))
        .expect("pin");
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// The chain a booted box served (`BERTH_BROWSER_BOX_CHAIN`: PEM, leaf first, its CA
/// last), as `image/boot-test` saved it.
pub(crate) fn served_chain() -> Vec<String> {
    let chain_file = std::env::var("BERTH_BROWSER_BOX_CHAIN").expect("BERTH_BROWSER_BOX_CHAIN");
    let chain_pem = std::fs::read_to_string(&chain_file).expect("the served chain");
    let certs: Vec<String> = chain_pem
        .split_inclusive("-----END CERTIFICATE-----")
        .filter(|c| c.contains("BEGIN CERTIFICATE"))
        .map(|c| c.trim_start().to_owned())
        .collect();
    assert!(
        certs.len() >= 2,
        "the box serves its leaf and its CA: {chain_pem}"
    );
    certs
}

/// A certificate's SPKI hash as Chromium's `--ignore-certificate-errors-spki-list`
/// takes it.
pub(crate) fn pem_pin(pem: &str) -> String {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let der = CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .expect("a certificate")
        .expect("pem");
    chromium_pin(&berth::tls::spki_pin(&der).expect("pin"))
}

/// Where the browser goes and how the test checks what it did there.
struct Target {
    port: u16,
    /// Trusts the box's CA, for the requests a phone makes.
    tls: Arc<rustls::ClientConfig>,
    /// The SPKI hashes Chromium accepts (the box's CA and leaf).
    pins: String,
    /// The pin the pages must show (the CA's).
    ca_pin: String,
    claim_code: String,
    /// The chain source of the wallet the browser creates (a form's fields).
    chain: String,
    /// The admin token and the backup directory, where the test can reach them (a
    /// local daemon).
    admin: Option<(String, PathBuf)>,
    /// The wallet's chain source answers, so it loads and can receive.
    loads: bool,
    shots: PathBuf,
    patience: Duration,
}

#[test]
fn a_browser_claims_the_box_pairs_a_phone_by_its_qr_code_and_revokes_it() {
    let Some(chromium) = chromium_binary(TEST) else {
        return;
    };
    let (tmp, datadir) = harness::new_datadir();
    std::fs::create_dir_all(&datadir).expect("datadir");
    let card = tmp.path().join("berth-claim-code");
    std::fs::write(&card, CODE).expect("card");
    let backups = tmp.path().join("backups");
    std::fs::create_dir_all(&backups).expect("backup directory");
    std::fs::write(
        datadir.join("berth.toml"),
        // The first backup (made when the wallet is) succeeds; later ones only when
        // asked. The flow then removes the directory and asks: that failure's alert
        // must reach the open overview by itself.
        format!(
            "[claim]\ncode_file = \"{}\"\n[backup]\ndirectory = \"{}\"\ndebounce_secs = 86400\n",
            card.display(),
            backups.display()
        ),
    )
    .expect("berth.toml");
    let (daemon, tls, ca) = harness::start_tls(&datadir, &["-q", "--tls"]);
    let leaf = std::fs::read_to_string(datadir.join("tls").join("leaf.pem")).expect("leaf");
    let dead = format!("http://127.0.0.1:{}", harness::free_port());
    // With a regtest bitcoind (scripts/e2e) the wallet loads, and the flow receives too.
    let bitcoind = std::env::var_os("BITCOIND_EXEC").map(|_| harness::Bitcoind::start(TEST));
    let chain = match &bitcoind {
        Some(node) => format!(
            "f.chain.value = 'bitcoind'; f.bitcoind_url.value = '{}'; f.bitcoind_cookie.value = '{}';",
            node.url(),
            node.cookie().display()
        ),
        None => format!("f.chain.value = 'esplora'; f.esplora_url.value = '{dead}';"),
    };
    let target = Target {
        port: daemon.port,
        tls,
        pins: format!("{},{}", pem_pin(&ca), pem_pin(&leaf)),
        ca_pin: berth_pin(&ca),
        claim_code: CODE.to_owned(),
        chain,
        admin: Some((harness::bearer(&harness::token(&datadir)), backups.clone())),
        loads: bitcoind.is_some(),
        shots: shots_dir("browser-screenshots"),
        patience: Duration::from_secs(30),
    };
    run_flow(&chromium, &target);
}

/// The flow against a booted image (`image/boot-test`); skipped without one.
#[test]
fn a_booted_box_is_claimed_and_paired_from_a_browser() {
    let Some(port) = std::env::var("BERTH_BROWSER_BOX_PORT").ok() else {
        harness::skip(
            BOX_TEST,
            "no booted box (image/boot-test runs it with BERTH_BOOT_BROWSER=1)",
        );
        return;
    };
    let Some(chromium) = chromium_binary(BOX_TEST) else {
        return;
    };
    let port: u16 = port.parse().expect("BERTH_BROWSER_BOX_PORT is a port");
    let certs = served_chain();
    let ca = certs.last().expect("ca").clone();
    let loads = std::env::var_os("BERTH_BROWSER_BOX_BITCOIND").is_some_and(|v| !v.is_empty());
    let chain = match std::env::var("BERTH_BROWSER_BOX_BITCOIND")
        .ok()
        .filter(|v| !v.is_empty())
    {
        Some(spec) => {
            let parts: Vec<&str> = spec.split_whitespace().collect();
            let [url, user, pass] = parts[..] else {
                panic!("BERTH_BROWSER_BOX_BITCOIND is `URL USER PASS`: {spec}");
            };
            format!(
                "f.chain.value = 'bitcoind'; f.bitcoind_url.value = '{url}'; \
                 f.bitcoind_user.value = '{user}'; f.bitcoind_pass.value = '{pass}';"
            )
        }
        None => {
            let dead = "http://10.0.2.2:9";
            format!("f.chain.value = 'esplora'; f.esplora_url.value = '{dead}';")
        }
    };
    let target = Target {
        port,
        tls: harness::tls::pinned_client_config(&ca, false),
        pins: certs
            .iter()
            .map(|c| pem_pin(c))
            .collect::<Vec<_>>()
            .join(","),
        ca_pin: berth_pin(&ca),
        claim_code: std::env::var("BERTH_BROWSER_BOX_CLAIM_CODE")
            .expect("BERTH_BROWSER_BOX_CLAIM_CODE"),
        chain,
        admin: None,
        loads,
        shots: shots_dir("browser-screenshots-box"),
        patience: Duration::from_secs(180),
    };
    run_flow(&chromium, &target);
}

/// The pin as berthd shows it (`sha256/<base64url>`).
fn berth_pin(pem: &str) -> String {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let der = CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .expect("a certificate")
        .expect("pem");
    berth::tls::spki_pin(&der).expect("pin")
}

fn run_flow(chromium: &Path, target: &Target) {
    let base = format!("https://localhost:{}", target.port);
    let browser = Chromium::start(chromium, &target.pins);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let tls = &target.tls;
    let port = target.port;
    runtime.block_on(async {
        let mut page = Page::connect(&browser, target.shots.clone(), target.patience).await;

        // The unclaimed box: its claim page, with the pin of the CA this browser
        // trusted; the code claims it.
        page.open(&format!("{base}/")).await;
        let claim = page.wait_for("/", "Claim this box").await;
        assert!(claim.contains(&target.ca_pin), "the page shows the CA's pin: {claim}");
        page.screenshot("1-claim").await;
        assert_accessible(&mut page, "the claim page").await;
        page.eval(&format!(
            "(() => {{ const f = document.querySelector('form[action=\"/console/sign-in\"]'); \
             f.code.value = '{}'; f.name.value = 'Chromium'; f.submit(); return true }})()",
            target.claim_code
        ))
        .await;
        let overview = page.wait_for("/", "Overview").await;
        assert!(overview.contains("No wallet yet"), "{overview}");
        page.screenshot("2-overview").await;
        // The session cookie is out of the page's reach.
        let cookies = page.eval("document.cookie").await;
        assert_eq!(cookies, json!(""), "HttpOnly: scripts see no cookie");

        // Create the wallet (its Ark server is a dead port; "create it now" anyway):
        // the phrase shown once, two of its words typed back.
        page.open(&format!("{base}/console/wallet")).await;
        page.wait_for("/console/wallet", "Create the wallet").await;
        let dead = format!("http://127.0.0.1:{}", harness::free_port());
        page.eval(&format!(
            "(() => {{ const f = document.querySelector('form[action=\"/console/wallet/new\"]'); \
             f.network.value = 'regtest'; f.ark_server.value = '{dead}'; {} \
             f.force.checked = true; f.submit(); return true }})()",
            target.chain
        ))
        .await;
        page.wait_for("/console/wallet/new", "Your recovery phrase").await;
        page.screenshot("3-phrase").await;
        assert_accessible(&mut page, "the recovery phrase").await;
        let asked = page
            .eval(
                "JSON.stringify({words: [...document.querySelectorAll('ol.phrase li')].map(li => li.textContent), \
                 labels: [...document.querySelectorAll('form[action=\"/console/wallet/confirm\"] label')].map(l => l.textContent)})",
            )
            .await;
        let asked: Value = serde_json::from_str(asked.as_str().expect("json")).expect("json");
        let words: Vec<&str> = asked["words"]
            .as_array()
            .expect("words")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(words.len(), 12, "{asked}");
        let position = |i: usize| -> usize {
            asked["labels"][i]
                .as_str()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse::<usize>().ok())
                .expect("a word's position")
                - 1
        };
        page.eval(&format!(
            "(() => {{ const f = document.querySelector('form[action=\"/console/wallet/confirm\"]'); \
             f.first.value = '{}'; f.second.value = '{}'; f.submit(); return true }})()",
            words[position(0)],
            words[position(1)]
        ))
        .await;
        let overview = page.wait_for("/", "Wallet").await;
        assert!(!overview.contains("No wallet yet"), "{overview}");
        page.screenshot("4-wallet").await;

        // The overview is live: its script holds the notifications websocket.
        let deadline = Instant::now() + target.patience;
        while page.eval("document.getElementById('live').textContent").await
            .as_str()
            .is_none_or(|s| !s.starts_with("Live"))
        {
            assert!(Instant::now() < deadline, "the overview did not go live");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // Where the test holds the admin token: an event (a backup that fails once its
        // directory is gone) shows up without the page being loaded again.
        if let Some((admin, backups)) = &target.admin {
            // The first backup is written (and verified) before the directory goes.
            harness::wait_until("the wallet's first backup", 60, || {
                std::fs::read_dir(backups).is_ok_and(|entries| {
                    entries
                        .flatten()
                        .any(|e| !e.file_name().to_string_lossy().starts_with('.'))
                })
            });
            std::fs::remove_dir_all(backups).expect("remove the backup directory");
            let before = page.eval("document.getElementById('overview').innerText").await;
            assert!(
                before.as_str().is_some_and(|s| !s.contains("backup-failed")),
                "no failure yet: {before}"
            );
            page.eval("window.stillThisPage = true").await;
            let (status, raw) = harness::tls_request(
                port,
                Arc::clone(tls),
                "POST",
                "/api/v1/backups",
                &[("Authorization", admin)],
                None,
            )
            .expect("back up now");
            assert_ne!(status, 200, "the backup directory is missing: {raw}");
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let shown = page
                    .eval("document.getElementById('overview').innerText")
                    .await;
                if shown.as_str().is_some_and(|s| s.contains("backup-failed")) {
                    break;
                }
                assert!(Instant::now() < deadline, "the alert did not arrive: {shown}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            assert_eq!(
                page.eval("window.stillThisPage === true").await,
                json!(true),
                "updated in place, not loaded again"
            );
            page.screenshot("4b-live-alert").await;
        }

        // Receive (a wallet that loads): a new on-chain address as a QR code, read from
        // a screenshot as the payer's phone would.
        if target.loads {
            page.open(&format!("{base}/console/receive")).await;
            page.wait_for("/console/receive", "A new bitcoin (on-chain) address").await;
            page.eval(
                "(() => { document.querySelector('button[value=\"onchain\"]').click(); return true })()",
            )
            .await;
            let shown = page.wait_for("/console/receive", "A new bitcoin address").await;
            page.eval("document.querySelector('.qr').scrollIntoView()").await;
            let shot = page.screenshot("4c-receive").await;
            let uri = decode_qr(&shot);
            let address = uri.strip_prefix("bitcoin:").unwrap_or_else(|| panic!("{uri}"));
            assert!(address.starts_with("BCRT1"), "{uri}");
            assert!(
                shown.contains(&address.to_lowercase()),
                "the QR code holds the address shown: {shown}"
            );
        }

        // Pair a phone: the QR code on the page, read from a screenshot.
        page.open(&format!("{base}/console/devices")).await;
        page.wait_for("/console/devices", "Chromium (this browser)").await;
        page.screenshot("5-devices").await;
        page.eval(
            "(() => { const f = document.querySelector('form[action=\"/console/pairing\"]'); \
             f.send.checked = false; f.submit(); return true })()",
        )
        .await;
        page.wait_for("/console/pairing", "Scan this with the phone").await;
        // The QR code in view, alone, large enough to read.
        page.eval("document.querySelector('.qr').scrollIntoView()").await;
        let shot = page.screenshot("6-pairing").await;
        let link = decode_qr(&shot);
        assert!(link.starts_with("berth://pair?v=1&"), "{link}");
        let code = harness::uri_param(&link, "t").to_owned();
        let (status, raw) = harness::tls_request(
            port,
            Arc::clone(tls),
            "POST",
            "/api/v1/pair",
            &[("Content-Type", "application/json")],
            Some(&json!({"code": code, "name": "Phone"}).to_string()),
        )
        .expect("pair");
        assert_eq!(status, 200, "{raw}");
        let paired = harness::json_of(&raw);
        assert_eq!(paired["device"]["scopes"], json!(["read", "receive"]));
        let phone = harness::bearer(paired["token"].as_str().expect("token"));
        let phone_id = paired["device"]["id"].as_str().expect("id").to_owned();
        let wallet = |token: &str| {
            harness::tls_request(
                port,
                Arc::clone(tls),
                "GET",
                "/api/v1/wallet",
                &[("Authorization", token)],
                None,
            )
            .expect("request")
            .0
        };
        assert_eq!(wallet(&phone), 200);

        // A household: a child's device that may pay 1,000 sat at a time and asks the
        // owner above that, its rules set on its page; a payment over them waits on
        // the approvals page, where the owner approves it (its payment then runs once:
        // here the Ark server is a dead port, so its answer is that failure).
        if target.admin.is_some() {
            household(&mut page, &base, port, tls, &target.admin).await;
        }

        // A page of another origin posts a revoke to the console: nothing changes.
        page.open(&format!(
            "data:text/html,<form method=post action=\"{base}/console/devices/{phone_id}/revoke\"></form>\
             <script>document.forms[0].submit()</script>"
        ))
        .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        page.screenshot("7-cross-site").await;
        assert_eq!(wallet(&phone), 200, "a cross-site post revoked nothing");

        // The page's own revoke button: the phone's token is refused at once.
        page.open(&format!("{base}/console/devices")).await;
        page.wait_for("/console/devices", "Phone").await;
        page.eval(&format!(
            "(() => {{ document.querySelector('form[action=\"/console/devices/{phone_id}/revoke\"]').submit(); \
             return true }})()"
        ))
        .await;
        // The form's navigation may not have begun yet: wait for the page without it.
        let deadline = Instant::now() + target.patience;
        loop {
            let text = page.wait_for("/console/devices", "Chromium (this browser)").await;
            if !text.contains("Phone") {
                break;
            }
            assert!(Instant::now() < deadline, "the phone is still listed: {text}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        page.screenshot("8-revoked").await;
        assert_eq!(wallet(&phone), 401);

        // Send: the one field says what it cannot pay, and asks for the amount an Ark
        // address does not carry (paying is on the regtest stack: tests/e2e).
        page.open(&format!("{base}/console/send")).await;
        page.wait_for("/console/send", "Pay to").await;
        page.eval(
            "(() => { const f = document.querySelector('form[action=\"/console/send/review\"]'); \
             f.destination.value = 'not a destination'; f.submit(); return true })()",
        )
        .await;
        let refused = page.wait_for("/console/send/review", "not an Ark address").await;
        assert!(refused.contains("Pay to"), "the form stays for another try: {refused}");
        page.screenshot("8b-send-refused").await;
        assert_accessible(&mut page, "the Send page's refusal").await;

        // Every page at a phone's width and a laptop's: none is wider than a phone's
        // screen (nothing to scroll sideways), and axe-core finds no serious or
        // critical accessibility fault on any (when it is installed).
        let axe = harness::browser::axe_source();
        if axe.is_none() {
            harness::skip(
                "browser::the console's accessibility check (axe-core)",
                "axe-core is not installed (scripts/ensure-deps installs it)",
            );
        }
        let mut faults = Vec::new();
        let pages = [
            ("/", "Overview", "overview"),
            ("/console/devices", "Pair a device", "devices"),
            ("/console/receive", "Receive", "receive"),
            ("/console/history", "History", "history"),
            ("/console/backups", "Backups", "backups"),
            ("/console/settings", "Settings", "settings"),
            ("/console/approvals", "Answered", "approvals"),
            (
                "/console/household/new-devices",
                "Rules for new devices",
                "new-devices",
            ),
            ("/console/apps", "Connect an app", "apps"),
            ("/console/webhooks", "Add a webhook", "webhooks"),
            ("/console/send", "Pay to", "send"),
        ];
        let mut keyboard = Vec::new();
        for (width, height, mobile, dark, prefix) in [
            (390, 844, true, false, "9-phone"),
            (390, 844, true, true, "9-phone-dark"),
            (1280, 900, false, false, "10-laptop"),
            (1280, 900, false, true, "10-laptop-dark"),
        ] {
            page.call(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": width, "height": height, "deviceScaleFactor": 2, "mobile": mobile}),
            )
            .await;
            page.set_dark(dark).await;
            let scheme = if dark { "dark" } else { "light" };
            for (path, marker, shot) in pages {
                page.open(&format!("{base}{path}")).await;
                page.wait_for(path, marker).await;
                if let Some(axe) = &axe {
                    for fault in page.accessibility_faults(axe).await {
                        faults.push(format!("{path} at {width} px, {scheme}: {fault}"));
                    }
                }
                page.screenshot(&format!("{prefix}-{shot}")).await;
                // A keyboard alone reaches every control, each with a visible focus
                // mark, and the first Tab offers to skip the navigation.
                if width == 1280 && !dark {
                    let walk = page.keyboard_walk().await;
                    if !walk.first.contains("Skip to the content") {
                        keyboard.push(format!("{path}: the first Tab is not the skip link: {}", walk.first));
                    }
                    for what in walk.unreached {
                        keyboard.push(format!("{path}: Tab never reaches {what}"));
                    }
                    for what in walk.unmarked {
                        keyboard.push(format!("{path}: no visible focus on {what}"));
                    }
                }
                if !mobile {
                    continue;
                }
                // The rightmost edge of anything laid out (a mobile browser widens its
                // viewport to fit content, so the window's own width proves nothing).
                let right = page
                    .eval(
                        "Math.max(...[...document.querySelectorAll('body *')]\
                         .map(e => e.getBoundingClientRect().right))",
                    )
                    .await;
                if !right.as_f64().is_some_and(|r| r <= 390.0) {
                    // Which element, for the failure's message.
                    let widest = page
                        .eval(
                            "(() => { let w = null, r = 0; for (const e of document.querySelectorAll('body *')) \
                             { const x = e.getBoundingClientRect().right; if (x > r) { r = x; w = e.outerHTML.slice(0, 120); } } \
                             return w })()",
                        )
                        .await;
                    panic!("{path} is wider than a phone's 390 px: {right} ({widest})");
                }
            }
        }
        page.set_dark(false).await;
        assert!(
            faults.is_empty(),
            "axe-core's serious and critical faults: {faults:#?}"
        );
        assert!(keyboard.is_empty(), "keyboard faults: {keyboard:#?}");
    });
}

/// No serious or critical fault axe-core finds on the page as it is now (a page state
/// the width loop of [`run_flow`] does not visit), in the light and the dark colour
/// scheme. Without axe-core, nothing: that loop reported it skipped.
pub(crate) async fn assert_accessible(page: &mut Page, what: &str) {
    if let Some(axe) = harness::browser::axe_source() {
        for dark in [false, true] {
            page.set_dark(dark).await;
            let faults = page.accessibility_faults(&axe).await;
            assert!(
                faults.is_empty(),
                "{what} (dark: {dark}): axe-core: {faults:#?}"
            );
        }
        page.set_dark(false).await;
    }
}

/// The household part of the flow (see its call).
async fn household(
    page: &mut Page,
    base: &str,
    port: u16,
    tls: &Arc<rustls::ClientConfig>,
    admin: &Option<(String, PathBuf)>,
) {
    let admin = admin
        .as_ref()
        .map(|(token, _)| token.clone())
        .unwrap_or_default();
    let api = |method: &str, path: &str, headers: &[(&str, &str)], body: Option<String>| {
        let mut all = vec![("Content-Type", "application/json")];
        all.extend_from_slice(headers);
        harness::tls_request(port, Arc::clone(tls), method, path, &all, body.as_deref())
            .expect("request")
    };
    // Pair the child's device: the pairing link as the page prints it.
    page.open(&format!("{base}/console/devices")).await;
    page.wait_for("/console/devices", "Pair a device").await;
    page.eval(
        "(() => { document.querySelector('form[action=\"/console/pairing\"]').submit(); return true })()",
    )
    .await;
    page.wait_for("/console/pairing", "Scan this with the phone")
        .await;
    let link = page
        .eval("document.querySelector('code.link').textContent")
        .await;
    let code = harness::uri_param(link.as_str().expect("a link"), "t").to_owned();
    let (status, raw) = api(
        "POST",
        "/api/v1/pair",
        &[],
        Some(json!({"code": code, "name": "Child"}).to_string()),
    );
    assert_eq!(status, 200, "{raw}");
    let paired = harness::json_of(&raw);
    let child = harness::bearer(paired["token"].as_str().expect("token"));
    let child_id = paired["device"]["id"].as_str().expect("id").to_owned();

    // Its rules, on its page.
    let rules = format!("/console/devices/{child_id}/rules");
    page.open(&format!("{base}{rules}")).await;
    page.wait_for(&rules, "Spending rules of Child").await;
    assert_accessible(page, &rules).await;
    page.eval(&format!(
        "(() => {{ const f = document.querySelector('form[action=\"{rules}\"]'); \
         f.max_payment_sat.value = '1000'; f.budget_week.value = '5000'; \
         f.querySelector('input[name=over_limit][value=approve]').checked = true; \
         f.submit(); return true }})()"
    ))
    .await;
    let devices = page
        .wait_for("/console/devices", "asks you above its limits")
        .await;
    assert!(
        devices.contains("1,000 sat a payment")
            && devices.contains("5,000 of 5,000 sat left this week"),
        "{devices}"
    );
    page.screenshot("7a-rules").await;

    // Over its limit: the child's payment waits.
    let pay = || {
        api(
            "POST",
            "/api/v1/wallet/send",
            &[("Authorization", &child), ("Idempotency-Key", "child-1")],
            Some(
                json!({"destination": harness::foreign_ark_address(), "amount_sat": 2_000})
                    .to_string(),
            ),
        )
    };
    let (status, raw) = pay();
    assert_eq!(status, 202, "{raw}");
    assert_eq!(
        harness::json_of(&raw)["status"],
        "awaiting-approval",
        "{raw}"
    );

    // The owner sees it on the overview and on the approvals page, and approves it.
    page.open(&format!("{base}/")).await;
    page.wait_for("/", "1 payment(s) wait for your approval")
        .await;
    page.open(&format!("{base}/console/approvals")).await;
    let waiting = page.wait_for("/console/approvals", "Waiting for you").await;
    assert!(
        waiting.contains("Child") && waiting.contains("2,000 sat, ark"),
        "{waiting}"
    );
    page.screenshot("7b-approvals").await;
    assert_accessible(page, "/console/approvals (a payment waiting)").await;
    page.eval(
        "(() => { document.querySelector('#pending form[action$=\"/approve\"]').submit(); return true })()",
    )
    .await;
    let answered = page.wait_for("/console/approvals", "executed").await;
    assert!(
        answered.contains("failed ("),
        "the Ark server is a dead port: {answered}"
    );
    assert!(
        !answered.contains("Approve"),
        "nothing waits any more: {answered}"
    );
    page.screenshot("7c-approved").await;
    // It ran once; the child's retry with its key gets that run's own answer.
    let (_, all) = api(
        "GET",
        "/api/v1/approvals",
        &[("Authorization", &admin)],
        None,
    );
    let all = harness::json_of(&all);
    assert_eq!(all.as_array().map(Vec::len), Some(1), "{all}");
    assert_eq!(all[0]["state"], "executed", "{all}");
    let (status, raw) = pay();
    assert_eq!(
        Some(u64::from(status)),
        all[0]["result"]["status"].as_u64(),
        "{raw}"
    );
}

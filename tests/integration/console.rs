//! The web console over HTTP, through the real binary (`src/console`): an unclaimed box
//! shows its claim page; the claim code signs a browser in with an `HttpOnly; Secure;
//! SameSite=Strict` session cookie; the overview and the devices page; a pairing QR
//! code whose link a phone redeems; revoking and signing out end credentials at once;
//! a form posted from another site changes nothing; the cookie never opens the bearer
//! API; the backups page backs up and downloads, the settings page shows the
//! configuration. `tests/integration/browser.rs` drives the same pages in a real browser.

use crate::common;
use crate::harness;

use std::path::Path;

use harness::{Daemon, json_of, post_form};

const CODE: &str = "console-claim-code-0123456789";

fn provisioned() -> (tempfile::TempDir, std::path::PathBuf) {
    let (tmp, datadir) = harness::new_datadir();
    std::fs::create_dir_all(&datadir).expect("datadir");
    let card = tmp.path().join("berth-claim-code");
    std::fs::write(&card, CODE).expect("card");
    std::fs::write(
        datadir.join("berth.toml"),
        format!("[claim]\ncode_file = \"{}\"\n", card.display()),
    )
    .expect("berth.toml");
    (tmp, datadir)
}

fn origin(daemon: &Daemon) -> String {
    format!("http://127.0.0.1:{}", daemon.port)
}

/// The session cookie a response sets (`name=value`), and the whole header line.
fn set_cookie(raw: &str) -> (String, String) {
    let line = raw
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap_or_else(|| panic!("no Set-Cookie: {raw}"))
        .to_owned();
    let pair = line
        .split_once(':')
        .map(|(_, v)| v.trim())
        .and_then(|v| v.split(';').next())
        .expect("cookie")
        .to_owned();
    (pair, line)
}

fn page(daemon: &Daemon, path: &str, cookie: &str) -> (u16, String) {
    daemon.get(path, &[("Cookie", cookie)])
}

fn pairing_link(html: &str) -> String {
    let start = html
        .find("berth://pair?")
        .expect("a pairing link on the page");
    html[start..]
        .split(['<', '"', ' '])
        .next()
        .expect("link")
        .replace("&#38;", "&")
        .replace("&amp;", "&")
}

#[test]
fn a_browser_claims_the_box_pairs_a_phone_revokes_it_and_signs_out() {
    let (_tmp, datadir) = provisioned();
    let daemon = Daemon::start(&datadir, &["-q"]);
    let port = daemon.port;
    let own = origin(&daemon);

    let (status, raw) = daemon.get("/", &[]);
    assert_eq!(status, 200, "{raw}");
    assert!(
        raw.to_ascii_lowercase().contains("content-type: text/html"),
        "{raw}"
    );
    assert!(
        raw.contains("Claim this box") && raw.contains(r#"action="/console/sign-in""#),
        "{raw}"
    );
    // No other site may frame it, and it loads nothing but its own stylesheet.
    let head = raw.to_ascii_lowercase();
    assert!(head.contains("x-frame-options: deny"), "{raw}");
    assert!(
        head.contains("content-security-policy: default-src 'none'")
            && head.contains("frame-ancestors 'none'"),
        "{raw}"
    );
    let (status, css) = daemon.get("/console/style.css", &[]);
    assert_eq!(status, 200);
    assert!(
        css.to_ascii_lowercase().contains("content-type: text/css"),
        "{css}"
    );

    let form = format!("code={CODE}&name=Laptop");
    // Another site's form, or none at all, signs nobody in.
    for headers in [vec![("Origin", "https://evil.example")], vec![]] {
        let (status, raw) = post_form(port, "/console/sign-in", &headers, &form);
        assert_eq!(status, 403, "{raw}");
    }
    let (status, raw) = post_form(
        port,
        "/console/sign-in",
        &[("Origin", &own)],
        "code=not-the-claim-code-at-all&name=Laptop",
    );
    assert_eq!(status, 401, "{raw}");
    assert!(
        raw.contains("not the claim code") && raw.contains("Claim this box"),
        "{raw}"
    );
    let (status, raw) = post_form(port, "/console/sign-in", &[("Origin", &own)], &form);
    assert_eq!(status, 303, "{raw}");
    assert!(
        raw.contains("location: /") || raw.contains("Location: /"),
        "{raw}"
    );
    let (cookie, line) = set_cookie(&raw);
    for attribute in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
        assert!(line.contains(attribute), "{line}");
    }

    let (status, raw) = page(&daemon, "/", &cookie);
    assert_eq!(status, 200, "{raw}");
    assert!(
        raw.contains("<h1>Overview</h1>") && raw.contains("No wallet yet"),
        "{raw}"
    );
    // The cookie is the console's: the bearer API never takes it.
    let (status, _) = daemon.get("/api/v1/devices", &[("Cookie", &cookie)]);
    assert_eq!(status, 401);
    // The claim is closed: a browser without the cookie is asked to sign in.
    let (_, raw) = daemon.get("/", &[]);
    assert!(raw.contains("This box is claimed"), "{raw}");

    let (status, raw) = page(&daemon, "/console/devices", &cookie);
    assert_eq!(status, 200, "{raw}");
    assert!(raw.contains("Laptop (this browser)"), "{raw}");

    // A pairing QR code for a phone that may only read; the phone redeems its link.
    let (status, raw) = post_form(
        port,
        "/console/pairing",
        &[("Origin", &own), ("Cookie", &cookie)],
        "read=on",
    );
    assert_eq!(status, 200, "{raw}");
    assert!(raw.contains("<svg"), "the QR code is drawn on the page");
    let link = pairing_link(&raw);
    let code = harness::uri_param(&link, "t");
    let (status, raw) = daemon.post(
        "/api/v1/pair",
        &[],
        &serde_json::json!({"code": code, "name": "Phone"}).to_string(),
    );
    assert_eq!(status, 200, "{raw}");
    let paired = json_of(&raw);
    assert_eq!(paired["device"]["scopes"], serde_json::json!(["read"]));
    let phone = harness::bearer(paired["token"].as_str().expect("token"));
    let phone_id = paired["device"]["id"].as_str().expect("id").to_owned();
    let (status, _) = daemon.get("/api/v1/wallet", &[("Authorization", &phone)]);
    assert_eq!(status, 200);

    // Another site's form cannot revoke it; this origin's can, and its token is dead.
    let revoke = format!("/console/devices/{phone_id}/revoke");
    let (status, _) = post_form(
        port,
        &revoke,
        &[("Origin", "https://evil.example"), ("Cookie", &cookie)],
        "",
    );
    assert_eq!(status, 403);
    let (status, _) = daemon.get("/api/v1/wallet", &[("Authorization", &phone)]);
    assert_eq!(status, 200, "still paired after the cross-site attempt");
    let (status, raw) = post_form(port, &revoke, &[("Origin", &own), ("Cookie", &cookie)], "");
    assert_eq!(status, 303, "{raw}");
    let (status, _) = daemon.get("/api/v1/wallet", &[("Authorization", &phone)]);
    assert_eq!(status, 401);

    // Signing out revokes the browser's own device.
    let (status, raw) = post_form(
        port,
        "/console/logout",
        &[("Origin", &own), ("Cookie", &cookie)],
        "",
    );
    assert_eq!(status, 303, "{raw}");
    assert!(set_cookie(&raw).1.contains("Max-Age=0"), "{raw}");
    let (_, raw) = page(&daemon, "/", &cookie);
    assert!(
        !raw.contains("<h1>Overview</h1>"),
        "the old cookie opens nothing: {raw}"
    );
    let (status, raw) = page(&daemon, "/console/devices", &cookie);
    assert_eq!(status, 303, "{raw}");
    assert_devices_gone(&datadir, &daemon);
}

/// No device is left: the browser signed out, the phone was revoked.
fn assert_devices_gone(datadir: &Path, daemon: &Daemon) {
    let admin = harness::bearer(&harness::token(datadir));
    let (status, raw) = daemon.get("/api/v1/devices", &[("Authorization", &admin)]);
    assert_eq!(status, 200, "{raw}");
    assert_eq!(json_of(&raw), serde_json::json!([]), "{raw}");
}

#[test]
fn a_device_without_admin_sees_the_overview_but_cannot_administer() {
    let (_tmp, datadir) = harness::new_datadir();
    let daemon = Daemon::start(&datadir, &["-q"]);
    let own = origin(&daemon);
    // A pairing window opened on the box, redeemed by a browser as its sign-in.
    let cookie = harness::console_session(daemon.port, &datadir, "read", "Display");
    let (status, raw) = page(&daemon, "/", &cookie);
    assert_eq!(status, 200, "{raw}");
    assert!(raw.contains("<h1>Overview</h1>"), "{raw}");
    let (status, _) = page(&daemon, "/console/devices", &cookie);
    assert_eq!(status, 403);
    let (status, _) = post_form(
        daemon.port,
        "/console/pairing",
        &[("Origin", &own), ("Cookie", &cookie)],
        "admin=on",
    );
    assert_eq!(status, 403, "a read-only device cannot mint an admin");
}

#[test]
fn the_backups_page_backs_up_and_downloads_and_the_settings_page_shows_the_configuration() {
    // A wallet (a store fixture whose seed is a known phrase), backing up to a directory.
    let (tmp, datadir) = common::wallet_datadir::fixture_datadir("store-v3.redb");
    let dir = tmp.path().join("usb");
    std::fs::create_dir(&dir).expect("backup dir");
    std::fs::write(
        datadir.join("berth.toml"),
        format!(
            "[backup]\ndirectory = \"{}\"\ndebounce_secs = 3600\n",
            dir.display()
        ),
    )
    .expect("berth.toml");
    let daemon = Daemon::start(&datadir, &["-q"]);
    let own = origin(&daemon);
    let cookie = admin_session(&daemon, &datadir);
    let backups_in = || {
        std::fs::read_dir(&dir)
            .expect("dir")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".berthbackup"))
            .count()
    };
    // The schedule's first backup (there was none) may come at start; count from here.
    harness::wait_until("the first scheduled backup", 30, || backups_in() == 1);

    let (status, raw) = page(&daemon, "/console/backups", &cookie);
    assert_eq!(status, 200, "{raw}");
    assert!(raw.contains(&dir.display().to_string()), "{raw}");
    assert!(
        raw.contains("Back up now") && raw.contains("Download a fresh backup"),
        "{raw}"
    );
    let (status, _) = post_form(
        daemon.port,
        "/console/backups",
        &[("Origin", "https://evil.example"), ("Cookie", &cookie)],
        "",
    );
    assert_eq!(status, 403);
    assert_eq!(backups_in(), 1, "the cross-site post wrote nothing");
    let (status, raw) = post_form(
        daemon.port,
        "/console/backups",
        &[("Origin", &own), ("Cookie", &cookie)],
        "",
    );
    assert_eq!(status, 303, "{raw}");
    assert_eq!(backups_in(), 2);
    let (_, raw) = page(&daemon, "/console/backups", &cookie);
    assert_eq!(
        raw.matches("<td>yes</td>").count(),
        2,
        "both listed as verified: {raw}"
    );

    let (status, raw) = post_form(
        daemon.port,
        "/console/backups/download",
        &[("Origin", &own), ("Cookie", &cookie)],
        "",
    );
    assert_eq!(status, 200, "{raw}");
    let head = raw.to_ascii_lowercase();
    assert!(
        head.contains("content-disposition: attachment; filename=\"berth-"),
        "{head}"
    );
    assert!(raw.contains("BRTHBKUP"), "the body is a backup");

    let (status, raw) = page(&daemon, "/console/settings", &cookie);
    assert_eq!(status, 200, "{raw}");
    assert!(
        raw.contains("[backup]") && raw.contains("debounce_secs = 3600"),
        "{raw}"
    );
    assert!(raw.contains("[seed]"), "defaults are filled in: {raw}");
}

#[test]
fn the_owner_asks_for_the_cards_settings_at_the_next_start_and_nobody_else_can() {
    let (_tmp, datadir) = harness::new_datadir();
    let daemon = Daemon::start(&datadir, &["-q"]);
    let own = origin(&daemon);
    let request = datadir.join("card-setup-request");
    let admin = admin_session(&daemon, &datadir);
    let reader = harness::console_session(daemon.port, &datadir, "read", "Display");
    let post = |headers: &[(&str, &str)], body: &str| {
        post_form(daemon.port, "/console/settings/card", headers, body).0
    };

    let (status, raw) = page(&daemon, "/console/settings", &admin);
    assert_eq!(status, 200, "{raw}");
    assert!(
        raw.contains("Apply the card's settings at the next start"),
        "{raw}"
    );
    // Another site's form, a device without admin, nobody signed in: nothing written.
    assert_eq!(
        post(
            &[("Origin", "https://evil.example"), ("Cookie", &admin)],
            "action=request"
        ),
        403
    );
    assert_eq!(
        post(&[("Origin", &own), ("Cookie", &reader)], "action=request"),
        403
    );
    assert_eq!(
        post(&[("Origin", &own)], "action=request"),
        303,
        "to the sign-in page"
    );
    assert!(!request.exists(), "refused posts wrote nothing");
    assert_eq!(
        post(&[("Origin", &own), ("Cookie", &admin)], "action=reboot"),
        400
    );

    assert_eq!(
        post(&[("Origin", &own), ("Cookie", &admin)], "action=request"),
        303
    );
    // Where apply-setup (run as root before berthd) looks for it, only berthd's to read.
    use std::os::unix::fs::PermissionsExt as _;
    let meta = std::fs::metadata(&request).expect("the request is in the datadir");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let note = std::fs::read_to_string(&request).expect("request");
    assert!(note.contains("web console"), "{note}");
    let (_, raw) = page(&daemon, "/console/settings", &admin);
    assert!(
        raw.contains("Asked for:") && raw.contains("Not after all"),
        "{raw}"
    );

    assert_eq!(
        post(&[("Origin", &own), ("Cookie", &admin)], "action=cancel"),
        303
    );
    assert!(!request.exists(), "taken back");
    let (_, raw) = page(&daemon, "/console/settings", &admin);
    assert!(!raw.contains("Asked for:"), "{raw}");

    // The appliance's script and berthd agree on the name.
    let script = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("board/common/usr/lib/berth/apply-setup"),
    )
    .expect("apply-setup");
    assert!(script.contains("/var/lib/berth/card-setup-request"));
}

/// Every form in the console's route table, posted from another site's page with an
/// admin's session: refused before anything is looked at; and every route for signed-in
/// browsers, asked for without a session: sent to sign in (the script's call: 401).
#[test]
fn every_console_form_refuses_a_cross_site_post_and_every_private_route_a_stranger() {
    use berth::console::routes::{Access, list};
    let (_tmp, datadir) = harness::new_datadir();
    let daemon = Daemon::start(&datadir, &["-q"]);
    let admin = admin_session(&daemon, &datadir);
    let bearer = format!("Bearer {}", harness::token(&datadir));
    let devices = || {
        json_of(
            &daemon
                .get("/api/v1/devices", &[("Authorization", &bearer)])
                .1,
        )
    };
    let devices_before = devices();
    let routes = list();
    let forms: Vec<_> = routes.iter().filter(|r| r.changes_state).collect();
    assert!(forms.len() >= 14, "every form of the console: {forms:?}");
    for route in &forms {
        let path = route.path.replace("{id}", "some-device");
        for origin in ["https://evil.example", "null"] {
            let (status, raw) = post_form(
                daemon.port,
                &path,
                &[("Origin", origin), ("Cookie", &admin)],
                "action=request&kind=onchain&code=x&name=x&read=on",
            );
            assert_eq!(status, 403, "{} {path} from {origin}: {raw}", route.method);
        }
        // Without any Origin at all, as no browser posts a form.
        let (status, _) = post_form(daemon.port, &path, &[("Cookie", &admin)], "");
        assert_eq!(status, 403, "{path} without Origin");
    }
    assert!(
        !datadir.join("card-setup-request").exists(),
        "nothing a refused form asked for was done"
    );
    assert_eq!(devices_before, devices(), "no device was added or revoked");

    let own = origin(&daemon);
    for route in routes.iter().filter(|r| r.access != Access::Public) {
        let path = route.path.replace("{id}", "some-device");
        let status = if route.changes_state {
            post_form(daemon.port, &path, &[("Origin", &own)], "").0
        } else {
            daemon.get(&path, &[]).0
        };
        let want = match route.access {
            Access::Script(_) => 401,
            _ => 303,
        };
        assert_eq!(status, want, "{} {path} signed out", route.method);
    }
}

/// An admin browser session on a new box (a pairing window opened on the box).
fn admin_session(daemon: &Daemon, datadir: &Path) -> String {
    harness::console_session(daemon.port, datadir, "read,receive,send,admin", "Laptop")
}

/// A wallet form whose Ark server and chain source are dead ports, created anyway.
fn offline_wallet_form(extra: &str) -> String {
    let dead = format!("http%3A%2F%2F127.0.0.1%3A{}", harness::free_port());
    format!("network=regtest&ark_server={dead}&chain=esplora&esplora_url={dead}&force=on{extra}")
}

#[test]
fn a_new_wallet_is_created_after_its_phrase_is_shown_once_and_confirmed() {
    let (_tmp, datadir) = harness::new_datadir();
    let daemon = Daemon::start(&datadir, &["-q"]);
    let own = origin(&daemon);
    let cookie = admin_session(&daemon, &datadir);
    let (status, raw) = page(&daemon, "/", &cookie);
    assert_eq!(status, 200);
    assert!(raw.contains(r#"href="/console/wallet""#), "{raw}");
    // The home screen: not set up, and the owner's next step under "Needs you".
    assert!(
        raw.contains(r#"<span class="badge warn">Not set up</span>"#)
            && raw.contains("Needs you")
            && raw.contains("The box has no wallet yet."),
        "{raw}"
    );
    let (status, raw) = page(&daemon, "/console/wallet", &cookie);
    assert_eq!(status, 200, "{raw}");
    assert!(raw.contains("Create the wallet"), "{raw}");

    let form = offline_wallet_form("");
    let (status, _) = post_form(
        daemon.port,
        "/console/wallet/new",
        &[("Origin", "https://evil.example"), ("Cookie", &cookie)],
        &form,
    );
    assert_eq!(status, 403);
    let (status, raw) = post_form(
        daemon.port,
        "/console/wallet/new",
        &[("Origin", &own), ("Cookie", &cookie)],
        &form,
    );
    assert_eq!(status, 200, "{raw}");
    assert!(
        raw.to_ascii_lowercase().contains("cache-control: no-store"),
        "{raw}"
    );
    let words: Vec<String> = raw
        .split("<li>")
        .skip(1)
        .map(|w| w.split("</li>").next().expect("word").to_owned())
        .collect();
    assert_eq!(words.len(), 12, "{raw}");
    let asked = |label: &str| -> usize {
        let at = raw.find(label).expect("asked") + label.len();
        raw[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse::<usize>().ok())
            .expect("position")
            - 1
    };
    let first = asked("<label>Word ");
    let rest = &raw[raw.find("<label>Word ").expect("first") + 12..];
    let second = {
        let at = rest.find("<label>Word ").expect("second") + 12;
        rest[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse::<usize>().ok())
            .expect("position")
            - 1
    };
    assert_ne!(first, second);
    // Wrong words: nothing is created, the phrase stays on offer.
    let (status, raw) = post_form(
        daemon.port,
        "/console/wallet/confirm",
        &[("Origin", &own), ("Cookie", &cookie)],
        "first=wrong&second=words",
    );
    assert_eq!(status, 422, "{raw}");
    assert!(raw.contains("do not match"), "{raw}");
    let admin = harness::bearer(&harness::token(&datadir));
    let (_, raw) = daemon.get("/api/v1/wallet", &[("Authorization", &admin)]);
    assert!(
        json_of(&raw)["fingerprint"].is_null(),
        "no wallet yet: {raw}"
    );

    let (status, raw) = post_form(
        daemon.port,
        "/console/wallet/confirm",
        &[("Origin", &own), ("Cookie", &cookie)],
        &format!("first={}&second={}", words[first], words[second]),
    );
    assert_eq!(status, 303, "{raw}");
    let (status, raw) = daemon.get("/api/v1/wallet", &[("Authorization", &admin)]);
    assert_eq!(status, 200, "{raw}");
    assert!(json_of(&raw)["fingerprint"].is_string(), "{raw}");
    // The wallet's seed is the phrase that was shown (here, with no key source
    // configured, barkd's plaintext file).
    let stored = std::fs::read_to_string(datadir.join("mnemonic")).expect("seed");
    assert_eq!(stored.split_whitespace().collect::<Vec<_>>(), words);
    let (_, raw) = page(&daemon, "/", &cookie);
    assert!(raw.contains("Wallet <code>"), "{raw}");
    // The phrase is used up.
    let (status, raw) = post_form(
        daemon.port,
        "/console/wallet/confirm",
        &[("Origin", &own), ("Cookie", &cookie)],
        &format!("first={}&second={}", words[first], words[second]),
    );
    assert_eq!(status, 422, "{raw}");
}

#[test]
fn a_recovery_phrase_is_imported_from_the_console() {
    let (_tmp, datadir) = harness::new_datadir();
    let daemon = Daemon::start(&datadir, &["-q"]);
    let cookie = admin_session(&daemon, &datadir);
    let phrase = common::wallet_datadir::MNEMONIC.replace(' ', "+");
    let (status, raw) = post_form(
        daemon.port,
        "/console/wallet/import",
        &[("Origin", &origin(&daemon)), ("Cookie", &cookie)],
        &offline_wallet_form(&format!("&phrase={phrase}")),
    );
    assert_eq!(status, 303, "{raw}");
    let admin = harness::bearer(&harness::token(&datadir));
    let (status, raw) = daemon.get("/api/v1/wallet", &[("Authorization", &admin)]);
    assert_eq!(status, 200, "{raw}");
    let expected = berth::engine::backup::BackupKey::from_phrase(common::wallet_datadir::MNEMONIC)
        .expect("phrase");
    assert_eq!(
        json_of(&raw)["fingerprint"],
        expected.fingerprint(),
        "{raw}"
    );
    // Its chain source is a dead port: no address yet, and the page says why.
    let (status, raw) = page(&daemon, "/console/receive", &cookie);
    assert_eq!(status, 200, "{raw}");
    let (status, raw) = post_form(
        daemon.port,
        "/console/receive",
        &[("Origin", &origin(&daemon)), ("Cookie", &cookie)],
        "kind=onchain",
    );
    assert_eq!(status, 503, "{raw}");
    assert!(raw.contains("No address"), "{raw}");
    let (status, _) = post_form(
        daemon.port,
        "/console/receive",
        &[("Origin", "https://evil.example"), ("Cookie", &cookie)],
        "kind=onchain",
    );
    assert_eq!(status, 403);
}

#[test]
#[ignore = "needs BITCOIND_EXEC: run scripts/e2e"]
fn the_overview_of_a_loaded_wallet_shows_its_connections_expiry_exits_movements_and_alerts() {
    let bitcoind = harness::Bitcoind::start(
        "the_overview_of_a_loaded_wallet_shows_its_connections_expiry_exits_movements_and_alerts",
    );
    let (_tmp, datadir) = harness::datadir_with_berth_toml("[watchdog]\ncheck_interval_secs = 1\n");
    let daemon = Daemon::start(&datadir, &["-q"]);
    harness::create_wallet_without_server(&daemon, &datadir, &bitcoind);
    let cookie = admin_session(&daemon, &datadir);
    let mut raw = String::new();
    // The autopilot's probe fails: the overview says so, and lists its alert.
    harness::wait_until("the autopilot to probe the Ark server", 30, || {
        raw = page(&daemon, "/", &cookie).1;
        raw.contains("Ark server: unreachable")
            && raw.contains("ark-server-unreachable")
            && raw.contains("Chain: block ")
    });
    for shown in [
        r#"<span class="amount big">0 <span class="unit">sats</span></span> spendable"#,
        "On-chain, confirmed",
        // The one status, by the /health verdict: the dead Ark server.
        r#"<span class="badge warn">Needs attention</span>"#,
        "<li>the Ark server is unreachable</li>",
        "When the VTXOs expire",
        "No unspent VTXOs",
        "No exits under way",
        "Latest movements",
        "Chain: block ",
    ] {
        assert!(raw.contains(shown), "{shown}: {raw}");
    }

    // Receive: a new on-chain address each time, with its QR code.
    let receive = || {
        post_form(
            daemon.port,
            "/console/receive",
            &[("Origin", &origin(&daemon)), ("Cookie", &cookie)],
            "kind=onchain",
        )
    };
    let address = |raw: &str| -> String {
        let at = raw
            .find("bcrt1")
            .unwrap_or_else(|| panic!("an address: {raw}"));
        raw[at..].split('<').next().expect("address").to_owned()
    };
    let (status, first) = receive();
    assert_eq!(status, 200, "{first}");
    assert!(first.contains("<svg"), "a QR code: {first}");
    let (_, second) = receive();
    assert_ne!(address(&first), address(&second), "a new address each time");
}

#[test]
fn a_wallet_sealed_with_a_passphrase_is_unlocked_from_the_console_after_a_restart() {
    let (_tmp, datadir) = harness::datadir_with_berth_toml(
        "[seed]\nargon2_memory_kib = 19456\nargon2_iterations = 2\n",
    );
    let daemon = Daemon::start(&datadir, &["-q"]);
    let own = origin(&daemon);
    let cookie = admin_session(&daemon, &datadir);
    let phrase = common::wallet_datadir::MNEMONIC.replace(' ', "+");
    let import = |passphrase: &str, again: &str| {
        post_form(
            daemon.port,
            "/console/wallet/import",
            &[("Origin", &own), ("Cookie", &cookie)],
            &offline_wallet_form(&format!(
                "&phrase={phrase}&seed_passphrase={passphrase}&seed_passphrase_again={again}"
            )),
        )
    };
    let (status, raw) = import("correct+horse+battery", "correct+horse+battry");
    assert_eq!(status, 400, "{raw}");
    assert!(raw.contains("The two passphrases differ"), "{raw}");
    let (status, raw) = import("correct+horse+battery", "correct+horse+battery");
    assert_eq!(status, 303, "{raw}");
    assert!(datadir.join("seed.sealed").exists() && !datadir.join("mnemonic").exists());
    let (_, raw) = page(&daemon, "/", &cookie);
    assert!(!raw.contains("locked"), "usable at once: {raw}");
    drop(daemon);

    let daemon = Daemon::start(&datadir, &["-q"]);
    let own = origin(&daemon);
    let (status, raw) = page(&daemon, "/", &cookie);
    assert_eq!(status, 200, "{raw}");
    assert!(raw.contains("<strong>locked</strong>"), "{raw}");
    assert!(raw.contains(r#"href="/console/unlock""#), "{raw}");
    let (status, raw) = page(&daemon, "/console/unlock", &cookie);
    assert_eq!(status, 200, "{raw}");
    assert!(raw.contains("Unlock the wallet"), "{raw}");

    let unlock = |origin: &str, passphrase: &str| {
        post_form(
            daemon.port,
            "/console/unlock",
            &[("Origin", origin), ("Cookie", &cookie)],
            &format!("passphrase={passphrase}"),
        )
    };
    let (status, _) = unlock("https://evil.example", "correct+horse+battery");
    assert_eq!(status, 403, "a cross-site form unlocks nothing");
    let (status, raw) = unlock(&own, "a+wrong+guess");
    assert_eq!(status, 400, "{raw}");
    assert!(raw.contains("does not open the seed"), "{raw}");
    let (_, raw) = page(&daemon, "/", &cookie);
    assert!(raw.contains("<strong>locked</strong>"), "{raw}");
    let (status, raw) = unlock(&own, "correct+horse+battery");
    assert_eq!(status, 303, "{raw}");
    let (_, raw) = page(&daemon, "/", &cookie);
    assert!(!raw.contains("<strong>locked</strong>"), "{raw}");
    let (status, _) = page(&daemon, "/console/unlock", &cookie);
    assert_eq!(status, 303, "nothing left to unlock");
}

#[test]
fn the_overview_script_gets_a_websocket_ticket_for_its_session_only() {
    let (_tmp, datadir) = harness::new_datadir();
    let daemon = Daemon::start(&datadir, &["-q"]);
    let own = origin(&daemon);
    let cookie = admin_session(&daemon, &datadir);
    let (status, raw) = page(&daemon, "/", &cookie);
    assert_eq!(status, 200);
    assert!(
        raw.contains(r#"<script src="/console/live.js" defer></script>"#),
        "{raw}"
    );
    assert!(
        raw.contains("backup-failed"),
        "it listens for every type: {raw}"
    );
    let (status, raw) = daemon.get("/console/live.js", &[]);
    assert_eq!(status, 200);
    assert!(raw.contains("/api/v1/notifications/ws?ticket="), "{raw}");

    let ticket =
        |headers: &[(&str, &str)]| post_form(daemon.port, "/console/live/ticket", headers, "");
    let (status, _) = ticket(&[("Origin", &own)]);
    assert_eq!(status, 401, "no session, no ticket");
    let (status, _) = ticket(&[("Origin", "https://evil.example"), ("Cookie", &cookie)]);
    assert_eq!(status, 403);
    let (status, raw) = ticket(&[("Origin", &own), ("Cookie", &cookie)]);
    assert_eq!(status, 200, "{raw}");
    let body = raw.split("\r\n\r\n").nth(1).expect("body");
    let issued: String = serde_json::from_str(body).expect("a JSON string");
    assert_eq!(issued.len(), 64, "{issued}");
}

/// A console session (issue 39): its cookie is `__Host-` (a sibling host cannot plant
/// one) with the session's longest life; a request carrying two is refused, not
/// resolved; a cookie naming no session counts towards the address's backoff; and a
/// session older than `[console] session_max_days` is over, its device removed, after a
/// restart too.
#[test]
fn console_sessions_are_host_only_single_counted_and_expire() {
    let (_tmp, datadir) = harness::datadir_with_berth_toml("[console]\nsession_max_days = 1\n");
    let mut daemon = Daemon::start(&datadir, &["-q"]);
    let uri = harness::open_window(&datadir, "read");
    let code = harness::uri_param(&uri, "t").to_owned();
    let (status, raw) = post_form(
        daemon.port,
        "/console/sign-in",
        &[("Origin", &origin(&daemon))],
        &format!("code={code}&name=Laptop"),
    );
    assert_eq!(status, 303, "{raw}");
    let (cookie, line) = set_cookie(&raw);
    assert!(cookie.starts_with("__Host-berth_session="), "{line}");
    assert!(line.contains("Max-Age=86400"), "one day: {line}");
    let (status, raw) = page(&daemon, "/", &cookie);
    assert_eq!(status, 200, "{raw}");

    // A second session cookie (planted, or left over): refused, and both cleared.
    let (status, raw) = page(
        &daemon,
        "/",
        &format!("{cookie}; __Host-berth_session=AQplanted"),
    );
    assert_eq!(status, 400, "{raw}");
    assert!(raw.contains("Max-Age=0"), "{raw}");

    // Cookies naming no session: counted, then the address is blocked.
    let mut blocked = false;
    for i in 0..20 {
        let (status, _) = page(&daemon, "/", &format!("__Host-berth_session=AQguess{i}"));
        if status == 429 {
            blocked = true;
            break;
        }
        assert_eq!(status, 200, "served signed out");
    }
    assert!(blocked, "wrong session cookies count towards the backoff");

    // The session began two days ago, as its record says: over, and its device gone.
    let (status, _) = daemon.terminate();
    assert_eq!(status.code(), Some(0));
    harness::with_store(&datadir, async |store| {
        let mut record = store
            .devices()
            .await
            .expect("devices")
            .into_iter()
            .find(|d| d.name == "Laptop")
            .expect("the session's device");
        assert!(record.console_session, "a sign-in makes a console session");
        store.remove_device(&record.id).await.expect("remove");
        record.created_at_us -= 2 * 86_400 * 1_000_000;
        store.add_device(record, 64).await.expect("add");
    });
    daemon = Daemon::start(&datadir, &["-q"]);
    let (status, raw) = page(&daemon, "/", &cookie);
    assert_eq!(status, 200, "{raw}");
    assert!(!raw.contains("<h1>Overview</h1>"), "signed out: {raw}");
    assert!(
        raw.contains("Max-Age=0"),
        "told to forget the cookie: {raw}"
    );
    assert_devices_gone(&datadir, &daemon);
}

/// The apps page: connect an app over Nostr Wallet Connect (its link and QR code shown
/// once), see its budget, revoke it; the API sees the same connections.
#[test]
fn an_app_is_connected_with_a_budget_and_revoked_from_the_console() {
    let (_tmp, datadir) =
        harness::datadir_with_berth_toml("[nwc]\nrelays = [\"wss://relay.example\"]\n");
    let daemon = Daemon::start(&datadir, &["-q"]);
    let admin = admin_session(&daemon, &datadir);
    let own = origin(&daemon);
    let bearer = format!("Bearer {}", harness::token(&datadir));
    let (status, html) = page(&daemon, "/console/apps", &admin);
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("Connect an app"), "{html}");

    let (status, html) = post_form(
        daemon.port,
        "/console/apps",
        &[("Origin", &own), ("Cookie", &admin)],
        "name=Alby+Go&pay=on&max_payment_sat=500&budget_sat=2000&budget_renewal=weekly",
    );
    assert_eq!(status, 200, "{html}");
    assert!(
        html.contains("nostr+walletconnect://"),
        "the link, once: {html}"
    );
    assert!(html.contains("<svg"), "its QR code: {html}");
    assert!(html.contains("2000 of 2000 sat left (weekly)"), "{html}");
    let listed = json_of(
        &daemon
            .get("/api/v1/nwc/connections", &[("Authorization", &bearer)])
            .1,
    );
    assert_eq!(listed[0]["name"], "Alby Go", "{listed}");
    assert_eq!(listed[0]["max_payment_sat"], 500, "{listed}");
    assert_eq!(listed[0]["budget"]["renewal"], "weekly", "{listed}");
    // Shown once: the page again has no link.
    let (_, html) = page(&daemon, "/console/apps", &admin);
    assert!(!html.contains("nostr+walletconnect://"), "{html}");

    // Receive-only, and a mistake in a number is said on the page.
    let (status, _) = post_form(
        daemon.port,
        "/console/apps",
        &[("Origin", &own), ("Cookie", &admin)],
        "name=Tip+jar&max_payment_sat=&budget_sat=&budget_renewal=monthly",
    );
    assert_eq!(status, 200);
    let listed = json_of(
        &daemon
            .get("/api/v1/nwc/connections", &[("Authorization", &bearer)])
            .1,
    );
    assert_eq!(listed[1]["name"], "Tip jar");
    assert!(
        !listed[1]["methods"].to_string().contains("pay_invoice"),
        "{listed}"
    );
    let (status, html) = post_form(
        daemon.port,
        "/console/apps",
        &[("Origin", &own), ("Cookie", &admin)],
        "name=Bad&max_payment_sat=ten&budget_sat=&budget_renewal=monthly",
    );
    assert_eq!(status, 400);
    assert!(html.contains("a whole number of sats"), "{html}");

    let id = listed[0]["id"].as_str().expect("id");
    let (status, _) = post_form(
        daemon.port,
        &format!("/console/apps/{id}/revoke"),
        &[("Origin", &own), ("Cookie", &admin)],
        "",
    );
    assert_eq!(status, 303);
    let listed = json_of(
        &daemon
            .get("/api/v1/nwc/connections", &[("Authorization", &bearer)])
            .1,
    );
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
}

/// The webhooks page adds a webhook (its secret shown once), sends a test event and
/// shows its delivery, gives a new secret, pauses it; a device's push settings are set
/// on its behalf, refused where the egress policy refuses, shown on the devices page,
/// and stopped.
#[test]
fn webhooks_and_a_devices_push_are_set_from_the_console() {
    let receiver = harness::webhooks::Receiver::start();
    let (_tmp, datadir) = harness::new_datadir();
    let daemon = Daemon::start(&datadir, &["-q"]);
    let admin = admin_session(&daemon, &datadir);
    let own = origin(&daemon);
    let form = |path: &str, body: &str| {
        post_form(
            daemon.port,
            path,
            &[("Origin", &own), ("Cookie", &admin)],
            body,
        )
    };
    let (status, html) = page(&daemon, "/console/webhooks", &admin);
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("No webhooks yet"), "{html}");

    let (status, html) = form(
        "/console/webhooks",
        "url=ftp%3A%2F%2Fx%2F&type-device-paired=on",
    );
    assert_eq!(status, 400);
    assert!(html.contains("http:// or https://"), "{html}");
    let (status, html) = form(
        "/console/webhooks",
        &format!(
            "url={}&description=Home+Assistant&type-device-paired=on&type-backup-failed=on",
            receiver.url().replace(':', "%3A").replace('/', "%2F")
        ),
    );
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("whsec_"), "the secret, once: {html}");
    assert!(html.contains("backup-failed, device-paired"), "{html}");
    let bearer = format!("Bearer {}", harness::token(&datadir));
    let listed = json_of(
        &daemon
            .get("/api/v1/webhooks", &[("Authorization", &bearer)])
            .1,
    );
    let id = listed[0]["id"].as_str().expect("id").to_string();
    assert_eq!(listed[0]["description"], "Home Assistant");
    let (_, html) = page(&daemon, "/console/webhooks", &admin);
    assert!(!html.contains("whsec_"), "shown once: {html}");
    assert!(html.contains("Delivering"), "{html}");

    let (status, _) = form(&format!("/console/webhooks/{id}/test"), "");
    assert_eq!(status, 303);
    harness::wait_until("the test delivered and recorded", 10, || {
        receiver.delivered().len() == 1
            && page(&daemon, &format!("/console/webhooks/{id}"), &admin)
                .1
                .contains("Delivered (HTTP 204)")
    });
    let (status, html) = page(&daemon, &format!("/console/webhooks/{id}"), &admin);
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("test #"), "{html}");
    let (status, html) = form(&format!("/console/webhooks/{id}/rotate"), "");
    assert_eq!(status, 200);
    assert!(
        html.contains("New signing secret") && html.contains("whsec_"),
        "{html}"
    );
    let (status, _) = form(&format!("/console/webhooks/{id}/pause"), "");
    assert_eq!(status, 303);
    let (_, html) = page(&daemon, "/console/webhooks", &admin);
    assert!(html.contains("Paused") && html.contains("Resume"), "{html}");

    // A device's push, set on its behalf.
    let (_, phone) = harness::pair_device(&daemon, &datadir, "read");
    let (status, html) = page(&daemon, &format!("/console/devices/{phone}/push"), &admin);
    assert_eq!(status, 200, "{html}");
    let (status, html) = form(
        &format!("/console/devices/{phone}/push"),
        "url=http%3A%2F%2F192.168.1.5%2Ftopic&category-payments=on",
    );
    assert_eq!(status, 400);
    assert!(html.contains("[egress] allow"), "{html}");
    let (status, _) = form(
        &format!("/console/devices/{phone}/push"),
        "url=https%3A%2F%2Fntfy.example%2Fmy-topic&category-payments=on&category-approvals=on",
    );
    assert_eq!(status, 303);
    let (_, html) = page(&daemon, "/console/devices", &admin);
    assert!(
        html.contains("payments, approvals to ntfy.example"),
        "{html}"
    );
    let (status, _) = form(&format!("/console/devices/{phone}/push/stop"), "");
    assert_eq!(status, 303);
    let (_, html) = page(&daemon, "/console/devices", &admin);
    assert!(!html.contains("ntfy.example"), "{html}");
}

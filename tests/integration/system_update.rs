//! Update bundles uploaded through the API (`system_update`, `api::v1::system`) on the
//! real binary, checked by the real RAUC against a keyring of the test's own: a bundle
//! signed by the box's key and for its board is kept (and said to be a downgrade when
//! it was built before the running system), streamed past the request body limit;
//! one signed by another key, for another board, or not a bundle at all is refused and
//! leaves nothing behind; a body over `[update] max_bundle_mib` is refused whether it
//! declares its length or not; a kept bundle is checked again after a restart; only the
//! owner uploads. An install the owner asks for is handed to root's side through the
//! datadir, followed and told (`an_install_is_asked_for_followed_through_the_restart_and_told`),
//! and so is one installed over SSH with the real `berth-update`
//! (`an_update_installed_over_ssh_is_told_as_one_from_the_console`); RAUC writing a
//! slot and the restart are `image/boot-test`'s.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::harness::*;

const STATUS: &str = "/api/v1/system/update";
const BUNDLE: &str = "/api/v1/system/update/bundle";
const RUNNING_BUILD: &str = "20261128T120000Z";

fn run(command: &mut Command) {
    let out = command.output().expect("run");
    assert!(
        out.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed signing key, as `image/update-key` makes one: its certificate's path.
fn signing_key(dir: &Path, name: &str) -> PathBuf {
    run(Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", &format!("/O=Berth/CN={name}")])
        .arg("-keyout")
        .arg(dir.join(format!("{name}.key")))
        .arg("-out")
        .arg(dir.join(format!("{name}.pem"))));
    dir.join(format!("{name}.pem"))
}

/// A verity bundle, as `image/build` makes them, for board `compatible`, built at
/// `build`, signed with the key `signer` names; one image of incompressible bytes.
fn bundle(dir: &Path, signer: &Path, compatible: &str, build: &str) -> PathBuf {
    let name = format!(
        "{compatible}-{build}-{}",
        signer.file_stem().expect("a name").display()
    );
    let content = dir.join(format!("{name}.d"));
    std::fs::create_dir(&content).expect("content");
    std::fs::write(
        content.join("manifest.raucm"),
        format!(
            "[update]\ncompatible={compatible}\nversion=test-{build}\nbuild={build}\n\n\
             [bundle]\nformat=verity\n\n[image.rootfs]\nfilename=root.img\n"
        ),
    )
    .expect("manifest");
    let mut noise = vec![0u8; 200 << 10];
    let mut x: u32 = 0x9e37_79b9 ^ build.len() as u32;
    for b in noise.iter_mut() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    std::fs::write(content.join("root.img"), &noise).expect("image");
    let out = dir.join(format!("{name}.raucb"));
    run(Command::new("rauc")
        .arg(format!("--cert={}", signer.display()))
        .arg(format!("--key={}", signer.with_extension("key").display()))
        .arg("bundle")
        .arg(&content)
        .arg(&out));
    out
}

/// An upload of `body` to the bundle route: with a `Content-Length`, or chunked.
fn upload(port: u16, bearer: &str, body: &[u8], declared: bool) -> (u16, Value) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .expect("timeout");
    let mut head = format!(
        "PUT {BUNDLE} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
         Authorization: {bearer}\r\nContent-Type: application/octet-stream\r\n"
    );
    if declared {
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        stream.write_all(head.as_bytes()).expect("head");
        // A refusal may come (and the connection close) before the whole body is sent.
        let _ = stream.write_all(body);
    } else {
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        stream.write_all(head.as_bytes()).expect("head");
        for chunk in body.chunks(64 << 10) {
            let framed = [
                format!("{:x}\r\n", chunk.len()).as_bytes(),
                chunk,
                b"\r\n".as_slice(),
            ]
            .concat();
            if stream.write_all(&framed).is_err() {
                break;
            }
        }
        let _ = stream.write_all(b"0\r\n\r\n");
    }
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let json = serde_json::from_str(body_of(&raw)).unwrap_or(Value::Null);
    (status_of(&raw), json)
}

fn status(daemon: &Daemon, bearer: &str) -> Value {
    let (code, raw) = request(
        daemon.port,
        "GET",
        STATUS,
        &[("Authorization", bearer)],
        None,
    );
    assert_eq!(code, 200, "{raw}");
    json_of(&raw)
}

/// The files in the datadir's update directory.
fn kept(datadir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(datadir.join("update"))
        .map(|entries| {
            entries
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The tools that make and check bundles (scripts/ensure-deps installs them), or a skip.
fn tools_or_skip(test: &str) -> bool {
    crate::provision::tools_or_skip(test, &["rauc", "mksquashfs", "openssl"])
}

/// A box's update settings under `k`: its signing key (the keyring), RAUC's
/// configuration as the image has it (the keys RAUC needs to load it), the running
/// system's release file (at `k/root/usr/lib/berth/release`, where `rauc-pre-install`
/// reads it under `BERTH_ROOT=k/root`), and root's status directory (`k/run`); the
/// `berth.toml` naming them, with a request body limit far below a bundle's size (the
/// upload is not bound by it) and bundles up to 1 MiB.
fn rauc_box(k: &Path) -> (PathBuf, String) {
    let box_key = signing_key(k, "build");
    let conf = k.join("system.conf");
    std::fs::write(
        &conf,
        format!(
            "[system]\ncompatible=berth-rpi4\nbootloader=custom\ndata-directory={}\n\n\
             [handlers]\nbootloader-custom-backend=/bin/true\n",
            k.join("rauc-data").display()
        ),
    )
    .expect("system.conf");
    let release = k.join("root/usr/lib/berth/release");
    std::fs::create_dir_all(release.parent().expect("dir")).expect("root");
    std::fs::write(&release, format!("build={RUNNING_BUILD}\n")).expect("release");
    let toml = format!(
        "[server]\nmax_body_kib = 64\n\n[update]\nmax_bundle_mib = 1\nsystem_conf = \"{}\"\n\
         keyring = \"{}\"\nrelease = \"{}\"\nstatus_dir = \"{}\"\n",
        conf.display(),
        box_key.display(),
        release.display(),
        k.join("run").display()
    );
    (box_key, toml)
}

#[test]
fn an_uploaded_bundle_is_checked_by_rauc_and_kept_only_if_this_box_takes_it() {
    const TEST: &str = "an_uploaded_bundle_is_checked_by_rauc_and_kept_only_if_this_box_takes_it";
    if !tools_or_skip(TEST) {
        return;
    }
    let keys = tempfile::tempdir().expect("tempdir");
    let k = keys.path();
    let (box_key, toml) = rauc_box(k);
    let stranger = signing_key(k, "stranger");
    let newer = bundle(k, &box_key, "berth-rpi4", "20261129T080000Z");
    let older = bundle(k, &box_key, "berth-rpi4", "20261101T080000Z");
    let foreign = bundle(k, &stranger, "berth-rpi4", "20261129T080000Z");
    let other_board = bundle(k, &box_key, "berth-rpi5", "20261129T080000Z");

    let (_tmp, datadir, daemon, admin) = berthd_with_offline_wallet(&toml, &[]);
    let before = status(&daemon, &admin);
    assert_eq!(before["available"], true, "{before}");
    assert_eq!(before["running_build"], RUNNING_BUILD, "{before}");
    assert_eq!(before["max_bundle_bytes"], 1 << 20, "{before}");
    assert!(before["bundle"].is_null(), "{before}");

    let (phone, _) = pair_device(&daemon, &datadir, "read,receive,send");
    let bytes = std::fs::read(&newer).expect("bundle");
    assert!(bytes.len() > 64 << 10, "larger than the body limit");
    let (code, _) = upload(daemon.port, &phone, &bytes, true);
    assert_eq!(code, 403, "only the owner uploads");
    assert!(kept(&datadir).is_empty(), "{:?}", kept(&datadir));

    let (code, info) = upload(daemon.port, &admin, &bytes, true);
    assert_eq!(code, 201, "{info}");
    assert_eq!(info["compatible"], "berth-rpi4", "{info}");
    assert_eq!(info["version"], "test-20261129T080000Z", "{info}");
    assert_eq!(info["build"], "20261129T080000Z", "{info}");
    assert_eq!(info["size_bytes"], bytes.len() as u64, "{info}");
    assert_eq!(info["downgrade"], false, "{info}");
    assert_eq!(kept(&datadir), ["bundle.raucb"]);
    // RAUC's record directory is root's on the box: berthd's check never has RAUC
    // make it (RAUC as berthd was refused there, image/boot-test).
    assert!(
        !k.join("rauc-data").exists(),
        "berthd's check asked RAUC for its data directory"
    );
    assert_eq!(
        std::fs::read(datadir.join("update/bundle.raucb")).expect("kept"),
        bytes,
        "kept as sent"
    );
    assert_eq!(status(&daemon, &admin)["bundle"], info);

    // Chunked, without a length: the same check.
    let (code, info) = upload(
        daemon.port,
        &admin,
        &std::fs::read(&older).expect("bundle"),
        false,
    );
    assert_eq!(code, 201, "{info}");
    assert_eq!(
        info["downgrade"], true,
        "built before the running system: {info}"
    );

    // Checked again after a restart.
    let _ = daemon.terminate();
    let daemon = Daemon::start(&datadir, &["-q"]);
    let again = status(&daemon, &admin);
    assert_eq!(again["bundle"], info, "{again}");

    // Refused, and nothing kept: the new upload replaced the old bundle either way.
    for (what, path, reason) in [
        ("another key's", &foreign, "signature"),
        ("another board's", &other_board, "berth-rpi5"),
    ] {
        let (code, error) = upload(
            daemon.port,
            &admin,
            &std::fs::read(path).expect("bundle"),
            true,
        );
        assert_eq!(code, 422, "{what}: {error}");
        assert!(
            error["message"].as_str().unwrap_or("").contains(reason),
            "{what}: {error}"
        );
        assert!(kept(&datadir).is_empty(), "{what}: {:?}", kept(&datadir));
    }
    let (code, error) = upload(daemon.port, &admin, &[7u8; 10_000], true);
    assert_eq!(code, 422, "not a bundle: {error}");
    assert!(kept(&datadir).is_empty(), "{:?}", kept(&datadir));

    // A removal: 404 when nothing is kept, 409 while an upload holds the bundle.
    let delete = || {
        request(
            daemon.port,
            "DELETE",
            BUNDLE,
            &[("Authorization", &admin)],
            None,
        )
        .0
    };

    // Cut off half-way (the client gone): nothing left, and the next upload works.
    {
        let mut stream = TcpStream::connect(("127.0.0.1", daemon.port)).expect("connect");
        let head = format!(
            "PUT {BUNDLE} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\
             Authorization: {admin}\r\nContent-Length: {}\r\n\r\n",
            bytes.len()
        );
        stream.write_all(head.as_bytes()).expect("head");
        stream.write_all(&bytes[..bytes.len() / 2]).expect("half");
        wait_until("the upload to be under way", 30, || {
            kept(&datadir) == ["bundle.raucb.part"]
        });
    }
    // Over once a removal is no longer refused as busy (404: nothing kept).
    wait_until("the cut-off upload to end", 30, || delete() == 404);
    assert!(kept(&datadir).is_empty(), "{:?}", kept(&datadir));

    // Over [update] max_bundle_mib, declared or found out while streaming.
    let big = vec![1u8; (1 << 20) + 1];
    for declared in [true, false] {
        let (code, error) = upload(daemon.port, &admin, &big, declared);
        assert_eq!(code, 413, "declared {declared}: {error}");
        assert!(kept(&datadir).is_empty(), "{:?}", kept(&datadir));
    }

    // Removed on request.
    let (code, info) = upload(daemon.port, &admin, &bytes, true);
    assert_eq!(code, 201, "{info}");
    assert_eq!(delete(), 204);
    assert!(kept(&datadir).is_empty(), "{:?}", kept(&datadir));
    assert_eq!(delete(), 404);
    assert!(status(&daemon, &admin)["bundle"].is_null());
}

#[test]
fn a_machine_without_raucs_keyring_takes_no_bundles() {
    let (_tmp, datadir, daemon, admin) = berthd_with_offline_wallet(
        "[update]\nsystem_conf = \"/nonexistent/system.conf\"\nkeyring = \"/nonexistent/keyring.pem\"\n",
        &[],
    );
    let state = status(&daemon, &admin);
    assert_eq!(state["available"], false, "{state}");
    assert!(
        state["unavailable_reason"]
            .as_str()
            .unwrap_or("")
            .contains("/nonexistent/system.conf"),
        "{state}"
    );
    let (code, error) = upload(daemon.port, &admin, b"not read", true);
    assert_eq!(code, 404, "{error}");
    assert!(kept(&datadir).is_empty());
}

#[test]
fn the_owner_uploads_a_bundle_in_the_console_and_sees_it_checked() {
    const TEST: &str = "the_owner_uploads_a_bundle_in_the_console_and_sees_it_checked";
    let Some(chromium) = crate::harness::browser::chromium_binary(TEST) else {
        return;
    };
    if !tools_or_skip(TEST) {
        return;
    }
    let keys = tempfile::tempdir().expect("tempdir");
    let k = keys.path();
    let (box_key, toml) = rauc_box(k);
    let run_dir = k.join("run");
    let stand = StandIns::new(k);
    let older = bundle(k, &box_key, "berth-rpi4", "20261101T080000Z");
    let foreign = bundle(
        k,
        &signing_key(k, "stranger"),
        "berth-rpi4",
        "20261129T080000Z",
    );
    let (_tmp, datadir, daemon, _admin) = berthd_with_offline_wallet(&toml, &[]);
    let cookie = console_session(daemon.port, &datadir, "read,receive,send,admin", "Laptop");
    let base = format!("http://127.0.0.1:{}", daemon.port);
    let browser = crate::harness::browser::Chromium::start(&chromium, "");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        use crate::harness::browser::Page;
        let mut page = Page::signed_in(&browser, &base, &cookie, "system-update").await;
        page.open(&format!("{base}/console/settings")).await;
        page.wait_for("/console/settings", "System update").await;
        choose_bundle(&mut page, &older).await;
        let text = page
            .wait_for("/console/settings", "Uploaded and checked")
            .await;
        assert!(text.contains("test-20261101T080000Z"), "{text}");
        assert!(text.contains("Older than the running system"), "{text}");
        assert!(
            text.contains("berth-update install") && text.contains("--allow-downgrade"),
            "{text}"
        );
        assert_eq!(kept(&datadir), ["bundle.raucb"]);
        crate::browser::assert_accessible(&mut page, "the settings page with a bundle").await;

        // Installed on the owner's word: an older system needs the box ticked first.
        page.eval("document.querySelector('#install-form button').click()")
            .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(
            !datadir.join("update/install-request").exists(),
            "the form is not sent without the confirmation"
        );
        page.eval("document.getElementById('allow-downgrade').click(); document.querySelector('#install-form button').click()")
            .await;
        page.wait_for("/console/settings", "Installation asked for")
            .await;
        assert_eq!(
            std::fs::read_to_string(datadir.join("update/install-request")).expect("request"),
            "build=20261101T080000Z\nallow_downgrade=yes\n"
        );
        crate::browser::assert_accessible(&mut page, "the settings page with an install").await;
        // Root's side takes it and RAUC fails: the page follows it on its own and says so.
        std::fs::write(stand.dir.join("go"), "").expect("go");
        std::fs::write(stand.dir.join("fail"), "").expect("fail");
        let release_root = k.join("root");
        let out = stand
            .command("install-request", &datadir, &run_dir, &release_root)
            .output()
            .expect("install-request");
        assert!(!out.status.success(), "{out:?}");
        let text = page
            .wait_for("/console/settings", "nothing was changed")
            .await;
        assert!(text.contains("the test says no"), "{text}");
        assert!(text.contains("Install and restart"), "the bundle is still there: {text}");

        // Another key's bundle: refused, the reason shown, nothing kept.
        choose_bundle(&mut page, &foreign).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let said = page
                .eval("document.getElementById('bundle-status').textContent")
                .await;
            let said = said.as_str().unwrap_or_default().to_owned();
            if said.contains("signature") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no refusal shown: {said:?}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // No bundle; the failed install's outcome stays shown (as told once the
        // outcome watch has raised its event: within seconds).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while kept(&datadir) != ["last-outcome"] {
            assert!(
                std::time::Instant::now() < deadline,
                "{:?}",
                kept(&datadir)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
}

/// A bundle chosen on the settings page as a person would (into its file input), and
/// sent with the page's "Upload and check".
async fn choose_bundle(page: &mut crate::harness::browser::Page, file: &Path) {
    let document = page.call("DOM.getDocument", serde_json::json!({})).await;
    let input = page
        .call(
            "DOM.querySelector",
            serde_json::json!({"nodeId": document["root"]["nodeId"], "selector": "#bundle-file"}),
        )
        .await;
    page.call(
        "DOM.setFileInputFiles",
        serde_json::json!({"nodeId": input["nodeId"], "files": [file.display().to_string()]}),
    )
    .await;
    page.eval("document.querySelector('#bundle-upload button').click()")
        .await;
}

const BOX_UPDATE_TEST: &str = "a_booted_box_is_updated_from_its_console";

/// The console's update on a booted appliance, one install per run, as `image/boot-test`
/// runs it (`BERTH_BOOT_BROWSER=1 BERTH_BOOT_UPDATE=1`) while it plays the board's
/// firmware through the restarts: headless Chromium, signed in with the console session
/// boot-test made (`BERTH_BROWSER_BOX_COOKIE`), trusting the chain the box served
/// (`BERTH_BROWSER_BOX_CHAIN`) on the forwarded port (`BERTH_BROWSER_BOX_PORT`), opens
/// Settings; uploads `BERTH_BROWSER_BOX_BUNDLE` through the page when given (else one is
/// there already), sees it checked as the build `BERTH_BROWSER_BOX_BUILD`, ticks "I mean
/// to go back" when the page says it is older (it must say so exactly when
/// `BERTH_BROWSER_BOX_DOWNGRADE=1`), asks for the install, and then only watches the same
/// page: RAUC's progress, the box away while it restarts, and — the page reloading
/// itself once the box answers and the trial has ended — the outcome
/// `BERTH_BROWSER_BOX_UPDATE` (`committed` or `rolled-back`) in the owner's words.
/// Screenshots under `target/tmp/browser-screenshots-box-update/`.
#[test]
fn a_booted_box_is_updated_from_its_console() {
    let Some(expected) = std::env::var("BERTH_BROWSER_BOX_UPDATE").ok() else {
        skip(
            BOX_UPDATE_TEST,
            "no booted box (image/boot-test runs it with BERTH_BOOT_BROWSER=1 BERTH_BOOT_UPDATE=1)",
        );
        return;
    };
    let Some(chromium) = crate::harness::browser::chromium_binary(BOX_UPDATE_TEST) else {
        return;
    };
    let env = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name}"));
    let port: u16 = env("BERTH_BROWSER_BOX_PORT").parse().expect("a port");
    let cookie = env("BERTH_BROWSER_BOX_COOKIE");
    let build = env("BERTH_BROWSER_BOX_BUILD");
    let upload = std::env::var_os("BERTH_BROWSER_BOX_BUNDLE")
        .filter(|b| !b.is_empty())
        .map(PathBuf::from);
    let downgrade = std::env::var("BERTH_BROWSER_BOX_DOWNGRADE").is_ok_and(|v| v == "1");
    let (verdict, because) = match expected.as_str() {
        "committed" => ("Last update: updated", "berthd was ready on the new system"),
        "rolled-back" => ("was rolled back", "not ready on the new system"),
        other => panic!("BERTH_BROWSER_BOX_UPDATE is committed or rolled-back, not {other}"),
    };
    let pins = crate::browser::served_chain()
        .iter()
        .map(|c| crate::browser::pem_pin(c))
        .collect::<Vec<_>>()
        .join(",");
    let base = format!("https://localhost:{port}");
    let browser = crate::harness::browser::Chromium::start(&chromium, &pins);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        use crate::harness::browser::Page;
        let shots = format!("browser-screenshots-box-update/{expected}");
        let mut page = Page::signed_in(&browser, &base, &cookie, &shots).await;
        page.open(&format!("{base}/console/settings")).await;
        page.wait_for("/console/settings", "System update").await;
        let started = std::time::Instant::now();
        if let Some(bundle) = &upload {
            choose_bundle(&mut page, bundle).await;
        }
        // A bundle of a few hundred MB, through an emulated network card, then RAUC's
        // check of it under emulation: minutes.
        let text = page_until(&mut page, Duration::from_secs(1800), |p| {
            p.text.contains("Uploaded and checked")
        })
        .await
        .text;
        let uploaded = started.elapsed();
        assert!(text.contains(&build), "the page names the build {build}: {text}");
        assert_eq!(
            text.contains("Older than the running system"),
            downgrade,
            "a downgrade said exactly when it is one: {text}"
        );
        screenshot_update(&mut page, "1-checked").await;
        crate::browser::assert_accessible(&mut page, "the settings page with a bundle on the box").await;
        if downgrade {
            page.eval("document.getElementById('allow-downgrade').click()").await;
        }
        page.eval("document.querySelector('#install-form button').click()").await;
        page_until(&mut page, Duration::from_secs(120), |p| p.installing).await;
        screenshot_update(&mut page, "2-asked").await;

        // From here the page is only watched: update.js follows the install, the box
        // goes away and comes back (boot-test restarts the VM as the firmware would),
        // and the page loads itself again once the outcome is known.
        let mut seen: Vec<&str> = Vec::new();
        let mut top = 0u32;
        let text = page_until(&mut page, Duration::from_secs(3600), |p| {
            for (marker, name) in [
                ("Installing", "installing"),
                ("The box is restarting into the new system", "away"),
                ("Trying the new system", "trial"),
            ] {
                if p.installing && p.text.contains(marker) && !seen.contains(&name) {
                    seen.push(name);
                }
            }
            top = top.max(p.percent);
            // Ended: the page loaded again without an install under way.
            !p.installing
        })
        .await
        .text;
        screenshot_update(&mut page, "3-outcome").await;
        assert!(
            text.contains(verdict) && text.contains(because),
            "the outcome {expected} in the owner's words: {text}"
        );
        assert!(seen.contains(&"installing"), "RAUC's install never shown: {seen:?}");
        assert!(seen.contains(&"away"), "the restart never shown: {seen:?}");
        crate::browser::assert_accessible(&mut page, "the settings page with the outcome").await;
        eprintln!(
            "{expected}: {}uploaded and checked in {:.0} s; the page showed {seen:?}, RAUC's progress up to {top} %, then {verdict:?} after {:.0} s",
            if upload.is_some() { "" } else { "(uploaded before) " },
            uploaded.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
    });
}

/// What the settings page shows at a moment.
struct Shown {
    text: String,
    /// The install under way (`#install`) is on the page.
    installing: bool,
    /// Its progress bar's value (RAUC's percentage).
    percent: u32,
}

/// A screenshot of the settings page's update section (lower down than a window shows).
async fn screenshot_update(page: &mut crate::harness::browser::Page, name: &str) {
    page.eval(
        "[...document.querySelectorAll('h2')].find(h => h.textContent === 'System update')\
         ?.scrollIntoView()",
    )
    .await;
    page.screenshot(name).await;
}

/// The page, read every half second (through reloads and while the box is away) until
/// `done` says so; panics after `within`.
async fn page_until(
    page: &mut crate::harness::browser::Page,
    within: Duration,
    mut done: impl FnMut(&Shown) -> bool,
) -> Shown {
    let deadline = std::time::Instant::now() + within;
    loop {
        // During a reload Chromium may answer that the page went away: not there yet.
        let answer = page
            .call_raw(
                "Runtime.evaluate",
                serde_json::json!({
                    "expression": "(() => { const i = document.getElementById('install-progress'); \
                        return JSON.stringify([document.readyState, document.body ? document.body.innerText : '', \
                        !!document.getElementById('install'), i ? i.value : 0]) })()",
                    "returnByValue": true
                }),
            )
            .await;
        let state: Value = answer["result"]["result"]["value"]
            .as_str()
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or(Value::Null);
        let shown = Shown {
            text: state[1].as_str().unwrap_or_default().to_owned(),
            installing: state[2] == true,
            percent: state[3].as_f64().unwrap_or(0.0) as u32,
        };
        if state[0] == "complete" && !shown.text.is_empty() && done(&shown) {
            return shown;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not seen within {within:?}; the page: {}",
            shown.text
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

const INSTALL: &str = "/api/v1/system/update/install";

/// The parts of the box a host has no A/B card for, standing in for root's tools
/// around the real `install-request` and `trial` scripts: `berth-update` (prints RAUC's
/// progress as its client does, then waits for the test's word, then succeeds or
/// fails), `ab-boot` (the slots the test names), `rauc status` and `systemctl`. Each
/// logs its arguments.
struct StandIns {
    dir: PathBuf,
}

impl StandIns {
    fn new(k: &Path) -> StandIns {
        let dir = k.join("stand-ins");
        std::fs::create_dir_all(dir.join("bin")).expect("dir");
        let log = dir.join("log");
        let script = |name: &str, body: &str| {
            let path = dir.join(name);
            std::fs::write(
                &path,
                format!(
                    "#!/bin/sh\necho \"{name} $*\" >>'{}'\n{body}",
                    log.display()
                ),
            )
            .expect("stand-in");
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("mode");
        };
        let d = dir.display();
        script(
            "berth-update",
            &format!(
                "case $1 in\n install)\n  echo installing\n  echo '  0% Installing'\n  \
                 echo ' 40% Copying image to rootfs.1'\n  \
                 while [ ! -e '{d}/go' ]; do sleep 0.1; done\n  \
                 if [ -e '{d}/fail' ]; then echo 'LastError: Failed to mount bundle: the test says no'; exit 1; fi\n  \
                 echo '100% Installing done.'\n  echo \"Installing \\`$2' succeeded\" ;;\nesac\n"
            ),
        );
        script(
            "ab-boot",
            &format!(
                "case $1 in\n get-primary) echo B ;;\n get-current) cat '{d}/current' ;;\n \
                 committed) cat '{d}/committed' ;;\n partition) echo 3 ;;\nesac\n"
            ),
        );
        // RAUC's own reading of a bundle (`rauc info`, which `rauc-pre-install --check`
        // asks) is the real one's; writing a slot and marking one are the test's.
        let rauc = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join("rauc"))
            .find(|path| path.is_file())
            .unwrap_or_else(|| PathBuf::from("rauc"));
        script(
            "bin/rauc",
            &format!(
                "case $1 in info) exec '{}' \"$@\" ;; esac\n",
                rauc.display()
            ),
        );
        script("bin/systemctl", "");
        StandIns { dir }
    }

    /// The slot booted and the committed one, as `ab-boot` answers.
    fn slots(&self, current: &str, committed: &str) {
        std::fs::write(self.dir.join("current"), current).expect("current");
        std::fs::write(self.dir.join("committed"), committed).expect("committed");
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// The real script from the board's tree, with the stand-ins.
    fn command(
        &self,
        script: &str,
        datadir: &Path,
        run_dir: &Path,
        release_root: &Path,
    ) -> Command {
        self.program(
            &Path::new("usr/lib/berth").join(script),
            datadir,
            run_dir,
            release_root,
        )
    }

    /// The real `trial` script, as at a boot after an update; it must succeed.
    fn trial(&self, datadir: &Path, run_dir: &Path, release_root: &Path) {
        let out = self
            .command("trial", datadir, run_dir, release_root)
            .output()
            .expect("trial");
        assert!(out.status.success(), "{out:?}");
    }

    /// The real `berth-update`, as an SSH user runs it, with the stand-ins (`rauc`,
    /// `systemctl` and `ab-boot`) and the real `rauc-pre-install`.
    fn berth_update(&self, datadir: &Path, run_dir: &Path, release_root: &Path) -> Command {
        let mut command = self.program(
            Path::new("usr/sbin/berth-update"),
            datadir,
            run_dir,
            release_root,
        );
        command.env("PATH", self.path());
        command
    }

    /// PATH with the stand-ins' `bin` first.
    fn path(&self) -> String {
        format!(
            "{}:{}",
            self.dir.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }

    /// `program` of the board's tree (`board/common/<program>`), with the stand-ins.
    fn program(
        &self,
        program: &Path,
        datadir: &Path,
        run_dir: &Path,
        release_root: &Path,
    ) -> Command {
        let script = program.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let mut command = Command::new(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("board/common")
                .join(program),
        );
        command
            .env("BERTH_DATA_DIR", datadir)
            .env("BERTH_RUN_DIR", run_dir)
            .env("BERTH_UPDATE", self.dir.join("berth-update"))
            .env("BERTH_AB_BOOT", self.dir.join("ab-boot"))
            .env(
                "BERTH_PRE_INSTALL",
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("board/common/usr/lib/berth/rauc-pre-install"),
            )
            .env("BERTH_ROOT", release_root)
            .env("BERTH_REBOOT_PAUSE", "0");
        if script == "trial" {
            // rauc and systemctl as the stand-ins: the trial marks and restarts.
            command.env("PATH", self.path());
        }
        command
    }
}

fn ask_install(daemon: &Daemon, bearer: &str, body: &str) -> (u16, Value) {
    let (code, raw) = request(
        daemon.port,
        "POST",
        INSTALL,
        &[
            ("Authorization", bearer),
            ("Content-Type", "application/json"),
        ],
        Some(body),
    );
    (code, json_of(&raw))
}

/// The box's restart into the new system: berthd stopped, /run gone, berthd started
/// again, and showing the install on trial.
fn restart_into_trial(daemon: Daemon, datadir: &Path, run_dir: &Path, admin: &str) -> Daemon {
    let _ = daemon.terminate();
    std::fs::remove_dir_all(run_dir).expect("run");
    let daemon = Daemon::start(datadir, &["-q"]);
    assert_eq!(status(&daemon, admin)["install"]["state"], "trial");
    daemon
}

/// The events of `types` recorded so far.
fn events(daemon: &Daemon, bearer: &str, types: &str) -> Vec<Value> {
    let (_, raw) = daemon.get(
        &format!("/api/v1/notifications/wait?after=0&timeout=0&types={types}"),
        &[("Authorization", bearer)],
    );
    json_of(&raw)["notifications"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Once the `count`th `system-update-failed` event is recorded: the outcome berthd
/// shows, checked to be `result` with `reason` in its words, and no install under way.
fn told_failure(daemon: &Daemon, admin: &str, count: usize, result: &str, reason: &str) -> Value {
    wait_until(&format!("{count} system-update-failed events"), 30, || {
        events(daemon, admin, "system-update-failed").len() == count
    });
    let told = status(daemon, admin);
    let outcome = told["last_outcome"].clone();
    assert_eq!(outcome["result"], result, "{told}");
    assert!(
        outcome["reason"].as_str().unwrap_or("").contains(reason),
        "{told}"
    );
    assert!(told["install"].is_null(), "{told}");
    outcome
}

#[test]
fn an_install_is_asked_for_followed_through_the_restart_and_told() {
    const TEST: &str = "an_install_is_asked_for_followed_through_the_restart_and_told";
    if !tools_or_skip(TEST) {
        return;
    }
    let keys = tempfile::tempdir().expect("tempdir");
    let k = keys.path();
    let (box_key, toml) = rauc_box(k);
    let run_dir = k.join("run");
    let root = k.join("root");
    let newer = bundle(k, &box_key, "berth-rpi4", "20261129T080000Z");
    let older = bundle(k, &box_key, "berth-rpi4", "20261101T080000Z");
    let stand = StandIns::new(k);
    let (_tmp, datadir, daemon, admin) = berthd_with_offline_wallet(&toml, &[]);
    let update = datadir.join("update");
    let progress = |daemon: &Daemon| status(daemon, &admin)["install"].clone();

    let (code, error) = ask_install(&daemon, &admin, "{}");
    assert_eq!(code, 404, "nothing to install: {error}");

    // An older system: only on the owner's word.
    let (code, info) = upload(
        daemon.port,
        &admin,
        &std::fs::read(&older).expect("bundle"),
        true,
    );
    assert_eq!(code, 201, "{info}");
    let (code, error) = ask_install(&daemon, &admin, "{}");
    assert_eq!(code, 422, "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or("")
            .contains("older system"),
        "{error}"
    );
    assert!(!update.join("install-request").exists());
    let (phone, _) = pair_device(&daemon, &datadir, "read,receive,send");
    assert_eq!(
        ask_install(&daemon, &phone, r#"{"allow_downgrade":true}"#).0,
        403
    );
    for malformed in [r#"{"allow_downgrade":"yes"}"#, r#"{"allow":true}"#, "{"] {
        let (code, error) = ask_install(&daemon, &admin, malformed);
        assert_eq!(code, 400, "{malformed}: {error}");
    }
    assert!(!update.join("install-request").exists());
    let (code, asked) = ask_install(&daemon, &admin, r#"{"allow_downgrade":true}"#);
    assert_eq!(code, 202, "{asked}");
    assert_eq!(asked["state"], "requested", "{asked}");
    assert_eq!(
        std::fs::read_to_string(update.join("install-request")).expect("request"),
        "build=20261101T080000Z\nallow_downgrade=yes\n"
    );
    assert_eq!(progress(&daemon)["state"], "requested");
    assert_eq!(
        ask_install(&daemon, &admin, r#"{"allow_downgrade":true}"#).0,
        409
    );
    // The bundle is not replaced while an install waits; removing it cancels the install.
    let bytes = std::fs::read(&newer).expect("bundle");
    assert_eq!(upload(daemon.port, &admin, &bytes, true).0, 409);

    // The bundle changed after the owner was shown it (root's side reads it again).
    std::fs::copy(&newer, update.join("bundle.raucb")).expect("swap");
    let out = stand
        .command("install-request", &datadir, &run_dir, &root)
        .output()
        .expect("install-request");
    assert!(!out.status.success(), "{out:?}");
    told_failure(&daemon, &admin, 1, "failed", "changed since it was shown");
    assert!(
        !stand.log().contains("berth-update install"),
        "nothing installed: {}",
        stand.log()
    );

    // Asked for, taken by root's side, its progress followed.
    let (code, info) = upload(daemon.port, &admin, &bytes, true);
    assert_eq!(code, 201, "{info}");
    let (code, asked) = ask_install(&daemon, &admin, "");
    assert_eq!(code, 202, "an empty body is {{}}: {asked}");
    assert_eq!(asked["build"], "20261129T080000Z", "{asked}");
    let mut root_side = stand
        .command("install-request", &datadir, &run_dir, &root)
        .spawn()
        .expect("install-request");
    wait_until("RAUC's progress to show", 30, || {
        let p = progress(&daemon);
        p["state"] == "installing" && p["percent"] == 40
    });
    let p = progress(&daemon);
    assert_eq!(p["step"], "Copying image to rootfs.1", "{p}");
    assert_eq!(p["build"], "20261129T080000Z", "{p}");
    assert!(!update.join("install-request").exists(), "taken");
    assert_eq!(
        upload(daemon.port, &admin, &bytes, true).0,
        409,
        "not replaced mid-install"
    );
    let delete = |daemon: &Daemon| {
        request(
            daemon.port,
            "DELETE",
            BUNDLE,
            &[("Authorization", &admin)],
            None,
        )
        .0
    };
    assert_eq!(delete(&daemon), 409, "not removed mid-install");
    std::fs::write(stand.dir.join("go"), "").expect("go");
    assert!(root_side.wait().expect("wait").success(), "{}", stand.log());
    let log = stand.log();
    assert!(
        log.contains(&format!(
            "berth-update install {} --no-reboot",
            update.join("bundle.raucb").display()
        )),
        "{log}"
    );
    assert!(log.contains("berth-update reboot"), "{log}");
    assert_eq!(progress(&daemon)["state"], "rebooting");
    assert!(
        !update.join("bundle.raucb").exists(),
        "written into the slot, the bundle gives its space back"
    );
    let pending = std::fs::read_to_string(update.join("install-pending")).expect("pending");
    assert!(
        pending.contains("slot=B\nbuild=20261129T080000Z\n"),
        "{pending}"
    );

    // The restart: /run is gone, berthd starts on the new system, which is on trial
    // until berth-trial keeps it.
    let daemon = restart_into_trial(daemon, &datadir, &run_dir, &admin);
    stand.slots("B", "A");
    stand.trial(&datadir, &run_dir, &root);
    assert!(
        stand.log().contains("rauc status mark-good booted"),
        "{}",
        stand.log()
    );
    wait_until("the update to be told", 30, || {
        !events(&daemon, &admin, "system-updated").is_empty()
    });
    let told = status(&daemon, &admin);
    assert_eq!(told["last_outcome"]["result"], "committed", "{told}");
    assert_eq!(told["last_outcome"]["build"], "20261129T080000Z", "{told}");
    assert_eq!(told["last_outcome"]["slot"], "B", "{told}");
    assert!(told["install"].is_null(), "{told}");
    let updated = events(&daemon, &admin, "system-updated");
    assert_eq!(updated.len(), 1, "{updated:?}");
    assert!(
        updated[0]["message"]
            .as_str()
            .unwrap_or("")
            .contains("was updated (built 20261129T080000Z)"),
        "{updated:?}"
    );
    assert!(!update.join("install-pending").exists());
    assert!(update.join("last-outcome").exists() && !update.join("outcome").exists());
    // Told once: a restart does not tell it again.
    let _ = daemon.terminate();
    let daemon = Daemon::start(&datadir, &["-q"]);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(events(&daemon, &admin, "system-updated").len(), 1);

    // RAUC fails: nothing changes, the owner is told why.
    assert!(status(&daemon, &admin)["bundle"].is_null());
    assert_eq!(upload(daemon.port, &admin, &bytes, true).0, 201);
    std::fs::write(stand.dir.join("fail"), "").expect("fail");
    assert_eq!(ask_install(&daemon, &admin, "{}").0, 202);
    let out = stand
        .command("install-request", &datadir, &run_dir, &root)
        .output()
        .expect("install-request");
    assert!(!out.status.success(), "{out:?}");
    let outcome = told_failure(&daemon, &admin, 2, "failed", "the test says no");
    assert_eq!(
        outcome["reason"], "Failed to mount bundle: the test says no",
        "RAUC's LastError, as it said it: {outcome}"
    );
    assert!(
        !update.join("install-pending").exists(),
        "no restart after a failure"
    );
    assert!(
        update.join("bundle.raucb").exists(),
        "the bundle stays to try again"
    );

    // A new system that never got far enough to be tried: the box is back on the
    // committed slot, and its trial says the update was rolled back.
    std::fs::remove_file(stand.dir.join("fail")).expect("fail");
    assert_eq!(ask_install(&daemon, &admin, "{}").0, 202);
    let out = stand
        .command("install-request", &datadir, &run_dir, &root)
        .output()
        .expect("install-request");
    assert!(out.status.success(), "{out:?}");
    let _ = daemon.terminate();
    std::fs::remove_dir_all(&run_dir).expect("run");
    let daemon = Daemon::start(&datadir, &["-q"]);
    stand.slots("A", "A");
    stand.trial(&datadir, &run_dir, &root);
    let outcome = told_failure(
        &daemon,
        &admin,
        3,
        "rolled-back",
        "did not start far enough",
    );
    assert_eq!(outcome["slot"], "A", "{outcome}");
    // A run cut off (the service stopped or killed mid-install): its stop hook reports
    // it failed rather than leaving it installing.
    std::fs::create_dir_all(&run_dir).expect("run");
    std::fs::write(
        run_dir.join("status"),
        "state=installing\npercent=40\nstep=Copying\nbuild=20261129T080000Z\n",
    )
    .expect("status");
    assert_eq!(progress(&daemon)["state"], "installing");
    let out = stand
        .command("install-request", &datadir, &run_dir, &root)
        .arg("--stopped")
        .output()
        .expect("install-request --stopped");
    assert!(!out.status.success(), "{out:?}");
    told_failure(&daemon, &admin, 4, "failed", "stopped before its end");

    // barkd's clients, which name no types, never see these.
    let (_, raw) = daemon.get(
        "/api/v1/notifications/wait?after=0&timeout=0",
        &[("Authorization", &admin)],
    );
    assert!(!raw.contains("system-update"), "{raw}");
}

/// An update installed over SSH (`berth-update install`, as image/README.md tells an
/// SSH user) is told as one asked for in the console: berth-update leaves the note the
/// trial reads before its reboot, so berthd shows the trial and raises the event of its
/// outcome, committed or rolled back. The real `berth-update`, `rauc-pre-install` and
/// `trial`, with RAUC's slot writes, the slots and the reboot stood in for.
#[test]
fn an_update_installed_over_ssh_is_told_as_one_from_the_console() {
    const TEST: &str = "an_update_installed_over_ssh_is_told_as_one_from_the_console";
    if !tools_or_skip(TEST) {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        skip(TEST, "needs root: berth-update refuses to run otherwise");
        return;
    }
    let keys = tempfile::tempdir().expect("tempdir");
    let k = keys.path();
    let (box_key, toml) = rauc_box(k);
    let run_dir = k.join("run");
    let root = k.join("root");
    let newer = bundle(k, &box_key, "berth-rpi4", "20261129T080000Z");
    let newer = newer.display().to_string();
    let stand = StandIns::new(k);
    stand.slots("A", "A");
    let (_tmp, datadir, daemon, admin) = berthd_with_offline_wallet(&toml, &[]);
    let pending = datadir.join("update/install-pending");
    let berth_update = |args: &[&str]| {
        stand
            .berth_update(&datadir, &run_dir, &root)
            .args(args)
            .output()
            .expect("berth-update")
    };

    // Installed without the reboot: nothing to tell (a plain restart later boots the
    // committed slot, and no update was tried).
    let out = berth_update(&["install", &newer, "--no-reboot"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stand.log().contains(&format!("rauc install {newer}")),
        "{}",
        stand.log()
    );
    assert!(!pending.exists(), "no note without the reboot");

    // Installed and rebooted into: the note, durable before the reboot, names the slot
    // and the build written into it.
    let out = berth_update(&["install", &newer]);
    assert!(out.status.success(), "{out:?}");
    let log = stand.log();
    assert!(
        log.contains("ab-boot arm 3") && log.contains("systemctl reboot --reboot-argument=3"),
        "{log}"
    );
    let note = std::fs::read_to_string(&pending).expect("the note");
    assert!(
        note.starts_with("slot=B\nbuild=20261129T080000Z\nat="),
        "{note}"
    );

    // After the reboot: berthd shows the trial, and its outcome once kept.
    let daemon = restart_into_trial(daemon, &datadir, &run_dir, &admin);
    stand.slots("B", "A");
    stand.trial(&datadir, &run_dir, &root);
    wait_until("the update to be told", 30, || {
        !events(&daemon, &admin, "system-updated").is_empty()
    });
    let told = status(&daemon, &admin);
    assert_eq!(told["last_outcome"]["result"], "committed", "{told}");
    assert_eq!(told["last_outcome"]["build"], "20261129T080000Z", "{told}");
    assert_eq!(told["last_outcome"]["slot"], "B", "{told}");
    assert!(!pending.exists());

    // Installed in one boot, rebooted into from a later one (`berth-update reboot`:
    // the build is no longer known), and the new system never got far enough: told
    // rolled back. (The stand-in's primary is always B, so the box is back on A.)
    stand.slots("A", "A");
    let out = berth_update(&["install", &newer, "--no-reboot"]);
    assert!(out.status.success(), "{out:?}");
    std::fs::remove_dir_all(&run_dir).expect("a later boot");
    let out = berth_update(&["reboot"]);
    assert!(out.status.success(), "{out:?}");
    let note = std::fs::read_to_string(&pending).expect("the note");
    assert!(note.starts_with("slot=B\nbuild=\nat="), "{note}");
    stand.trial(&datadir, &run_dir, &root);
    let outcome = told_failure(
        &daemon,
        &admin,
        1,
        "rolled-back",
        "did not start far enough",
    );
    assert_eq!(outcome["slot"], "A", "{outcome}");
}

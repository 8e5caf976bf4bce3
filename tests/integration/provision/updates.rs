//! What keeps an update bundle from turning the box against its owner: an older system
//! is refused unless the owner confirms it (`rauc-pre-install`, which RAUC runs and
//! `berth-update` asks first), and the signing key is made with a passphrase and a
//! certificate that expires, with a way to hand over to the next key (`image/update-key`).
//! Real `rauc` and `openssl` on real bundles; what cannot run here is the install
//! itself, which `image/boot-test` does on a booted image.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{repo, run, text, tools_or_skip};

/// The running system's build time in these tests.
const RUNNING: &str = "20261128T120000Z";

/// A self-signed signing key without a passphrase: (certificate, key).
fn test_key(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    run(Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", &format!("/O=Berth/CN={name}")])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert));
    (cert, key)
}

/// A RAUC manifest for the appliance, built at `build` (none: no build= line).
fn manifest(build: Option<&str>) -> String {
    let build = build.map(|b| format!("build={b}\n")).unwrap_or_default();
    format!(
        "[update]\ncompatible=berth-rpi4\nversion=test\n{build}\n[bundle]\nformat=plain\n\n\
         [image.rootfs]\nfilename=root.img\n"
    )
}

/// A small plain bundle, built at `build`, signed with `cert` and `key` (RAUC reads an
/// encrypted key's passphrase from RAUC_KEY_PASSPHRASE).
fn bundle(
    dir: &Path,
    name: &str,
    build: Option<&str>,
    (cert, key): (&Path, &Path),
    passphrase: Option<&str>,
) -> Output {
    let content = dir.join(format!("{name}-content"));
    std::fs::create_dir_all(&content).expect("content");
    std::fs::write(content.join("manifest.raucm"), manifest(build)).expect("manifest");
    std::fs::write(content.join("root.img"), vec![7u8; 8192]).expect("image");
    let mut rauc = Command::new("rauc");
    rauc.arg(format!("--cert={}", cert.display()))
        .arg(format!("--key={}", key.display()))
        .arg("bundle")
        .arg(&content)
        .arg(dir.join(format!("{name}.raucb")))
        .env_remove("RAUC_KEY_PASSPHRASE");
    if let Some(passphrase) = passphrase {
        rauc.env("RAUC_KEY_PASSPHRASE", passphrase);
    }
    rauc.output().expect("rauc bundle")
}

fn verifies(bundle: &Path, keyring: &Path) -> bool {
    Command::new("rauc")
        .arg(format!("--keyring={}", keyring.display()))
        .arg("info")
        .arg(bundle)
        .output()
        .expect("rauc info")
        .status
        .success()
}

#[test]
fn an_older_system_is_refused_unless_the_owner_confirms_it() {
    const TEST: &str = "an_older_system_is_refused_unless_the_owner_confirms_it";
    if !tools_or_skip(TEST, &["rauc", "mksquashfs", "openssl"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // The running system, as image/build describes it.
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("usr/lib/berth")).expect("root");
    std::fs::write(
        root.join("usr/lib/berth/release"),
        format!("# image/build\nversion=abc1234\nboard=rpi4\nbuild={RUNNING}\n"),
    )
    .expect("release");
    let run_dir = dir.path().join("run");
    std::fs::create_dir_all(&run_dir).expect("run dir");
    let confirmation = run_dir.join("allow-downgrade");

    // As RAUC runs the handler: the bundle mounted, its manifest in it.
    let mounted = dir.path().join("mounted");
    std::fs::create_dir_all(&mounted).expect("mount point");
    let handler = |build: Option<&str>, root: &Path| {
        std::fs::write(mounted.join("manifest.raucm"), manifest(build)).expect("manifest");
        Command::new(repo("board/common/usr/lib/berth/rauc-pre-install"))
            .env("RAUC_BUNDLE_MOUNT_POINT", &mounted)
            .env("BERTH_ROOT", root)
            .env("BERTH_RUN_DIR", &run_dir)
            .output()
            .expect("rauc-pre-install")
    };
    let older = "20261127T235959Z";
    let refused = handler(Some(older), &root);
    assert!(!refused.status.success(), "{}", text(&refused));
    let said = text(&refused);
    assert!(
        said.contains("<< error an older system (built 20261127T235959Z)")
            && said.contains("--allow-downgrade"),
        "RAUC passes '<< error' lines on: {said}"
    );
    for (what, build) in [
        ("a newer system", Some("20261128T120001Z")),
        ("the running system again", Some(RUNNING)),
    ] {
        let out = handler(build, &root);
        assert!(out.status.success(), "{what}: {}", text(&out));
    }
    let unknown = handler(None, &root);
    assert!(
        !unknown.status.success() && text(&unknown).contains("does not say when it was built"),
        "a bundle without a build time counts as older: {}",
        text(&unknown)
    );

    // The owner's confirmation is for one bundle, once.
    std::fs::write(&confirmation, "20261101T000000Z\n").expect("confirmation");
    assert!(
        !handler(Some(older), &root).status.success(),
        "a confirmation of another bundle"
    );
    std::fs::write(&confirmation, format!("{older}\n")).expect("confirmation");
    let confirmed = handler(Some(older), &root);
    assert!(confirmed.status.success(), "{}", text(&confirmed));
    assert!(!confirmation.exists(), "used up");
    // A bundle berth-update could not read before RAUC mounted it (a plain one on a box
    // without unsquashfs): confirmed as "any", for that install.
    std::fs::write(&confirmation, "any\n").expect("confirmation");
    assert!(handler(Some(older), &root).status.success());
    assert!(!confirmation.exists(), "used up");
    assert!(
        !handler(Some(older), &root).status.success(),
        "refused again"
    );

    // A system from before this check has no build time: nothing to compare with.
    let old_root = dir.path().join("old-root");
    std::fs::create_dir_all(&old_root).expect("old root");
    assert!(handler(Some(older), &old_root).status.success());

    // What berth-update asks first, on real bundles (the manifest as RAUC reads it).
    let (cert, key) = test_key(dir.path(), "build");
    for (name, build) in [("older", older), ("newer", "20261129T000000Z")] {
        let made = bundle(dir.path(), name, Some(build), (&cert, &key), None);
        assert!(made.status.success(), "{}", text(&made));
    }
    let check = |bundle: &str| {
        Command::new(repo("board/common/usr/lib/berth/rauc-pre-install"))
            .arg("--check")
            .arg(dir.path().join(bundle))
            .env("BERTH_ROOT", &root)
            .output()
            .expect("--check")
    };
    let out = check("older.raucb");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{older}\n"));
    let out = check("newer.raucb");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "20261129T000000Z\n");
    std::fs::write(dir.path().join("junk.raucb"), b"not a bundle").expect("junk");
    assert_eq!(check("junk.raucb").status.code(), Some(2));

    // berth-update and RAUC's configuration call it.
    let update =
        std::fs::read_to_string(repo("board/common/usr/sbin/berth-update")).expect("berth-update");
    assert!(update.contains("pre_install=${BERTH_PRE_INSTALL:-/usr/lib/berth/rauc-pre-install}"));
    assert!(update.contains("\"$pre_install\" --check \"$bundle\""));
    assert!(update.contains("--allow-downgrade) downgrade=1"));
    let conf = std::fs::read_to_string(repo("board/common/etc/rauc/system.conf")).expect("conf");
    assert!(
        conf.lines()
            .any(|l| l == "pre-install=/usr/lib/berth/rauc-pre-install")
    );
}

#[test]
fn the_signing_key_has_a_passphrase_expires_and_hands_over_to_the_next() {
    const TEST: &str = "the_signing_key_has_a_passphrase_expires_and_hands_over_to_the_next";
    if !tools_or_skip(TEST, &["rauc", "mksquashfs", "openssl"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let keys = dir.path().join("update-key");
    let passphrase_file = dir.path().join("passphrase");
    std::fs::write(&passphrase_file, "correct horse battery staple\n").expect("passphrase");
    let update_key = |args: &[&str], passphrase: bool| {
        let mut command = Command::new(repo("image/update-key"));
        command
            .args(args)
            .env("BERTH_UPDATE_KEY_DIR", &keys)
            .env_remove("BERTH_UPDATE_KEY_UNPROTECTED")
            .env_remove("BERTH_UPDATE_CERT_DAYS");
        if passphrase {
            command.env("BERTH_UPDATE_KEY_PASSPHRASE_FILE", &passphrase_file);
        } else {
            command.env_remove("BERTH_UPDATE_KEY_PASSPHRASE_FILE");
        }
        command.output().expect("image/update-key")
    };

    // No key without a passphrase (unless a throwaway test build says so).
    let refused = update_key(&["new"], false);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("needs a passphrase"),
        "{}",
        text(&refused)
    );
    assert!(!keys.join("key.pem").exists());

    let made = update_key(&["new"], true);
    assert!(made.status.success(), "{}", text(&made));
    let key = std::fs::read_to_string(keys.join("key.pem")).expect("key");
    assert!(
        key.contains("BEGIN ENCRYPTED PRIVATE KEY"),
        "the key is encrypted"
    );
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&keys), 0o700);
    assert_eq!(mode(&keys.join("key.pem")), 0o600);
    // Three years: valid 1094 days from now, no longer 1096 days from now.
    let valid_in = |cert: &Path, days: u64| {
        Command::new("openssl")
            .args([
                "x509",
                "-noout",
                "-checkend",
                &(days * 86_400).to_string(),
                "-in",
            ])
            .arg(cert)
            .output()
            .expect("openssl")
            .status
            .success()
    };
    assert!(valid_in(&keys.join("cert.pem"), 1094));
    assert!(
        !valid_in(&keys.join("cert.pem"), 1096),
        "the certificate expires"
    );
    assert!(
        !update_key(&["new"], true).status.success(),
        "a second 'new' would orphan every box"
    );

    // Signing: with the passphrase, and not with a wrong one.
    let first = (keys.join("cert.pem"), keys.join("key.pem"));
    let signed = bundle(
        dir.path(),
        "current",
        Some(RUNNING),
        (&first.0, &first.1),
        Some("correct horse battery staple"),
    );
    assert!(signed.status.success(), "{}", text(&signed));
    let wrong = bundle(
        dir.path(),
        "wrong",
        Some(RUNNING),
        (&first.0, &first.1),
        Some("wrong"),
    );
    assert!(!wrong.status.success(), "signed with a wrong passphrase");

    // The hand-over: the next key is made, the keyring trusts both, then it signs.
    let next = update_key(&["next"], true);
    assert!(next.status.success(), "{}", text(&next));
    let next_cert = std::fs::read_to_string(keys.join("next/cert.pem")).expect("next cert");
    let keyring = dir.path().join("keyring.pem");
    std::fs::write(
        &keyring,
        std::fs::read_to_string(keys.join("cert.pem")).expect("cert") + &next_cert,
    )
    .expect("keyring");
    let by_next = bundle(
        dir.path(),
        "by-next",
        Some(RUNNING),
        (&keys.join("next/cert.pem"), &keys.join("next/key.pem")),
        Some("correct horse battery staple"),
    );
    assert!(by_next.status.success(), "{}", text(&by_next));
    let by_next = dir.path().join("by-next.raucb");
    assert!(
        verifies(&by_next, &keyring),
        "a keyring with both trusts the next key"
    );
    assert!(
        !verifies(&by_next, &keys.join("cert.pem")),
        "a box that never got the next certificate does not"
    );
    assert!(verifies(&dir.path().join("current.raucb"), &keyring));
    let shown = update_key(&["show"], false);
    assert!(
        text(&shown).contains("current:")
            && text(&shown).contains("next:")
            && text(&shown).contains("passphrase: yes"),
        "{}",
        text(&shown)
    );

    let promoted = update_key(&["promote"], false);
    assert!(promoted.status.success(), "{}", text(&promoted));
    assert_eq!(
        std::fs::read_to_string(keys.join("cert.pem")).expect("cert"),
        next_cert
    );
    assert!(!keys.join("next").exists());
    let retired: Vec<_> = std::fs::read_dir(keys.join("retired"))
        .expect("retired")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(retired.len(), 1);
    assert!(retired[0].join("key.pem").exists() && retired[0].join("cert.pem").exists());

    // image/build signs with it, its passphrase from the same file, and checks expiry.
    let build = std::fs::read_to_string(repo("image/build")).expect("image/build");
    for needle in [
        "RAUC_KEY_PASSPHRASE=$key_passphrase",
        "-checkend 0",
        "\"$update_key_dir/next/cert.pem\" >>\"$stage/etc/rauc/keyring.pem\"",
        "$repo/image/update-key\" new",
    ] {
        assert!(build.contains(needle), "image/build: {needle}");
    }
}

//! Provisioning a card with its claim code, and first boot's hand-over to berthd
//! (`image/provision`, `board/common/usr/lib/berth/move-claim-code`,
//! `berth-claim-code.service`): on a small GPT disk image with a `berth-root` ext4
//! partition, as a flashed card has. The code lands in the root filesystem, root-only;
//! the first-boot script moves it into the datadir and off the boot files; berthd takes
//! it up and a browser claims the box with it.

mod harness;

use std::path::{Path, PathBuf};
use std::process::Command;

use harness::{Daemon, json_of};

const TEST: &str = "a_provisioned_card_is_claimed_with_its_code_after_first_boot";
const CODE: &str = "label-code_0123456789-XYZ";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn run(command: &mut Command) -> String {
    let out = command.output().expect("run");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{command:?}: {text}");
    text
}

fn installed(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
}

/// A 40 MiB disk image: GPT, one ext4 partition named and labelled berth-root at 1 MiB.
fn card(dir: &Path) -> (PathBuf, String) {
    let image = dir.join("card.img");
    let file = std::fs::File::create(&image).expect("image");
    file.set_len(40 << 20).expect("size");
    drop(file);
    let mut sfdisk = Command::new("sfdisk")
        .args(["-q"])
        .arg(&image)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("sfdisk");
    use std::io::Write as _;
    sfdisk
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"label: gpt\nstart=2048, size=61440, name=berth-root\n")
        .expect("table");
    assert!(sfdisk.wait().expect("sfdisk").success());
    run(Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4", "-L", "berth-root", "-E"])
        .arg(format!("offset={}", 2048 * 512))
        .arg(&image)
        .arg("30M"));
    let fs = format!("{}?offset={}", image.display(), 2048 * 512);
    (image, fs)
}

#[test]
fn a_provisioned_card_is_claimed_with_its_code_after_first_boot() {
    if rustix::process::geteuid().as_raw() != 0 {
        harness::skip(TEST, "image/provision runs as root");
        return;
    }
    for tool in ["sfdisk", "mke2fs", "debugfs", "qrencode", "jq"] {
        if !installed(tool) {
            harness::skip(
                TEST,
                &format!("{tool} is not installed (scripts/ensure-deps)"),
            );
            return;
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (image, fs) = card(dir.path());

    // A bad code is refused and nothing is written.
    let out = Command::new(repo("image/provision"))
        .arg(&image)
        .env("BERTH_CLAIM_CODE", "too short")
        .output()
        .expect("provision");
    assert!(!out.status.success());
    let printed = run(Command::new(repo("image/provision"))
        .arg(&image)
        .env("BERTH_CLAIM_CODE", CODE));
    assert!(
        printed.contains(&format!("Claim code: {CODE}")),
        "{printed}"
    );
    assert!(
        printed.contains(&format!("Link: berth://claim?v=1&t={CODE}")),
        "{printed}"
    );
    let stat = run(Command::new("debugfs")
        .args(["-R", "stat /boot/firmware/berth-claim-code"])
        .arg(&fs));
    assert!(
        stat.contains("Mode:  0600") && stat.contains("User:     0"),
        "{stat}"
    );
    let written = run(Command::new("debugfs")
        .args(["-R", "cat /boot/firmware/berth-claim-code"])
        .arg(&fs));
    assert!(written.contains(CODE), "{written}");
    run(Command::new("e2fsck").arg("-fn").arg(&fs));

    // First boot: the code, copied off the card's root filesystem, is moved into the
    // datadir by the unit's script, and off the boot files.
    let boot = dir.path().join("boot-firmware");
    std::fs::create_dir(&boot).expect("boot dir");
    let code_file = boot.join("berth-claim-code");
    run(Command::new("debugfs")
        .args(["-R"])
        .arg(format!(
            "dump /boot/firmware/berth-claim-code {}",
            code_file.display()
        ))
        .arg(&fs));
    let (_tmp, datadir) = harness::new_datadir();
    std::fs::create_dir_all(&datadir).expect("datadir");
    let owner = format!(
        "{}:{}",
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw()
    );
    run(
        Command::new(repo("board/common/usr/lib/berth/move-claim-code"))
            .env("BERTH_CLAIM_CODE_FILE", &code_file)
            .env("BERTH_DATADIR", &datadir)
            .env("BERTH_OWNER", &owner),
    );
    assert!(!code_file.exists(), "the code is off the boot files");
    let moved = datadir.join("claim-code");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&moved)
        .expect("moved")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // Nothing to move: the script does nothing.
    run(
        Command::new(repo("board/common/usr/lib/berth/move-claim-code"))
            .env("BERTH_CLAIM_CODE_FILE", &code_file)
            .env("BERTH_DATADIR", &datadir)
            .env("BERTH_OWNER", &owner),
    );

    // berthd, configured as the appliance is, takes it up and the box is claimed.
    std::fs::write(
        datadir.join("berth.toml"),
        format!("[claim]\ncode_file = \"{}\"\n", moved.display()),
    )
    .expect("berth.toml");
    let daemon = Daemon::start(&datadir, &["-q"]);
    assert!(!moved.exists(), "berthd keeps only the hash");
    let (status, raw) = daemon.post(
        "/api/v1/claim",
        &[],
        &serde_json::json!({"code": CODE, "name": "owner"}).to_string(),
    );
    assert_eq!(status, 200, "{raw}");
    assert!(json_of(&raw)["token"].is_string());
}

#[test]
fn the_claim_code_unit_verifies_and_runs_only_when_a_code_was_provisioned() {
    let unit_name = "berth-claim-code.service";
    let unit = std::fs::read_to_string(repo(&format!(
        "board/common/usr/lib/systemd/system/{unit_name}"
    )))
    .expect("unit");
    for line in [
        "ConditionPathExists=/boot/firmware/berth-claim-code",
        "Before=berthd.service",
        "WantedBy=berthd.service",
        "ExecStart=/usr/lib/berth/move-claim-code",
    ] {
        assert!(unit.lines().any(|l| l == line), "{unit_name}: {line}");
    }
    let appliance = std::fs::read_to_string(repo(
        "board/common/etc/berth/berth.toml.d/40-appliance.toml",
    ))
    .expect("drop-in");
    assert!(
        appliance.contains("code_file = \"/var/lib/berth/claim-code\""),
        "berthd takes the code up where the unit puts it"
    );
    let build = std::fs::read_to_string(repo("image/build")).expect("image/build");
    assert!(
        build.contains("berth-claim-code.service"),
        "the image enables it"
    );
    if !installed("systemd-analyze") {
        harness::skip(
            "the_claim_code_unit_verifies_and_runs_only_when_a_code_was_provisioned",
            "systemd-analyze is not installed",
        );
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let script = repo("board/common/usr/lib/berth/move-claim-code");
    std::fs::write(
        dir.path().join(unit_name),
        unit.replace("/usr/lib/berth/move-claim-code", &script.to_string_lossy()),
    )
    .expect("write");
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(dir.path().join(unit_name))
        .output()
        .expect("systemd-analyze verify");
    let stderr = String::from_utf8_lossy(&verify.stderr);
    let complaints: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.contains("berthd.service"))
        .collect();
    assert!(verify.status.success() && complaints.is_empty(), "{stderr}");
}

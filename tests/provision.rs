//! Provisioning a card with its owner's settings, and first boot taking them up
//! (`image/provision`, `board/common/usr/lib/berth/apply-setup` with
//! `berth-setup.service`, `move-claim-code` with `berth-claim-code.service`), on a small
//! disk image laid out as `image/build` lays out a card: MBR, a FAT boot partition
//! labelled `BERTH-BOOT`, then root and data. And `image/inspect`, which stands for the
//! Raspberry Pi's boot firmware (QEMU cannot run it), on an image shaped like a Pi
//! card: it passes a good one and fails a broken one.

mod harness;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use harness::{Daemon, json_of};

const CODE: &str = "label-code_0123456789-XYZ";
const KEY_A: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBerthProvisionTestKeyNumberOne000000 owner@laptop";
const KEY_B: &str =
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTY= owner@phone";
/// IEEE 802.11i-2004, annex H.4.3: passphrase "password" on the SSID "IEEE".
const WIFI_SSID: &str = "IEEE";
const WIFI_PASSPHRASE: &str = "password";
const WIFI_PSK: &str = "f42c6fc52df0ebef9ebb4b90b38a5f902e83fe1b135a70e23aed762e9710a12e";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn run(command: &mut Command) -> String {
    let out = command.output().expect("run");
    assert!(out.status.success(), "{command:?}: {}", text(&out));
    text(&out)
}

fn installed(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
}

/// The tools these tests need (scripts/ensure-deps installs them), or a skip.
fn tools_or_skip(test: &str, tools: &[&str]) -> bool {
    for tool in tools {
        if !installed(tool) {
            harness::skip(
                test,
                &format!("{tool} is not installed (scripts/ensure-deps)"),
            );
            return false;
        }
    }
    true
}

const BOOT_START: u64 = 8192; // sectors: 4 MiB, as image/build
const BOOT_MIB: u64 = 64;
const ROOT_MIB: u64 = 16;
const DATA_MIB: u64 = 8;

fn boot_offset() -> u64 {
    BOOT_START * 512
}
fn root_offset() -> u64 {
    boot_offset() + (BOOT_MIB << 20)
}
fn data_offset() -> u64 {
    root_offset() + (ROOT_MIB << 20)
}

/// A card as image/build makes one, small: MBR; p1 FAT32 `BERTH-BOOT` holding
/// `boot_files`; p2 ext4 `berth-root` made from `root_tree`; p3 ext4 `berth-data`.
fn card(dir: &Path, boot_files: &Path, root_tree: &Path) -> PathBuf {
    let image = dir.join("card.img");
    let total = 4 + BOOT_MIB + ROOT_MIB + DATA_MIB;
    std::fs::File::create(&image)
        .expect("image")
        .set_len(total << 20)
        .expect("size");
    let mut sfdisk = Command::new("sfdisk")
        .arg("-q")
        .arg(&image)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("sfdisk");
    let table = format!(
        "label: dos\nstart={BOOT_START}, size={}, type=c, bootable\nstart={}, size={}, type=83\nstart={}, size={}, type=83\n",
        BOOT_MIB * 2048,
        root_offset() / 512,
        ROOT_MIB * 2048,
        data_offset() / 512,
        DATA_MIB * 2048,
    );
    use std::io::Write as _;
    sfdisk
        .stdin
        .take()
        .expect("stdin")
        .write_all(table.as_bytes())
        .expect("table");
    assert!(sfdisk.wait().expect("sfdisk").success());

    let fat = dir.join("boot.vfat");
    let _ = std::fs::remove_file(&fat);
    run(Command::new("mkfs.vfat")
        .args(["-F", "32", "-n", "BERTH-BOOT", "-C"])
        .arg(&fat)
        .arg((BOOT_MIB * 1024).to_string()));
    let entries: Vec<PathBuf> = std::fs::read_dir(boot_files)
        .expect("boot files")
        .map(|e| e.expect("entry").path())
        .collect();
    if !entries.is_empty() {
        run(Command::new("mcopy")
            .env("MTOOLS_SKIP_CHECK", "1")
            .args(["-s", "-i"])
            .arg(&fat)
            .args(&entries)
            .arg("::/"));
    }
    run(Command::new("dd")
        .arg(format!("if={}", fat.display()))
        .arg(format!("of={}", image.display()))
        .args(["bs=1M", "seek=4", "conv=notrunc", "status=none"]));
    for (label, offset, mib, tree) in [
        ("berth-root", root_offset(), ROOT_MIB, Some(root_tree)),
        ("berth-data", data_offset(), DATA_MIB, None),
    ] {
        let mut mke2fs = Command::new("mke2fs");
        mke2fs
            .args(["-q", "-F", "-t", "ext4", "-L", label, "-E"])
            .arg(format!("offset={offset}"));
        if let Some(tree) = tree {
            mke2fs.arg("-d").arg(tree);
        }
        run(mke2fs.arg(&image).arg(format!("{mib}M")));
    }
    image
}

/// The boot partition's files, as first boot sees them under /boot/firmware.
fn boot_files_of(image: &Path, into: &Path) -> Vec<String> {
    std::fs::create_dir_all(into).expect("dir");
    let fat = format!("{}@@{}", image.display(), boot_offset());
    let listing = run(Command::new("mdir")
        .env("MTOOLS_SKIP_CHECK", "1")
        .args(["-b", "-i", &fat, "::/"]));
    let mut names: Vec<String> = listing
        .lines()
        .filter_map(|l| l.strip_prefix("::/"))
        .map(str::to_owned)
        .collect();
    names.sort();
    for name in &names {
        run(Command::new("mcopy")
            .env("MTOOLS_SKIP_CHECK", "1")
            .args(["-n", "-i", &fat])
            .arg(format!("::/{name}"))
            .arg(into.join(name)));
    }
    names
}

fn provision(image: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(repo("image/provision"));
    command.args(args).arg(image).env_remove("BERTH_CLAIM_CODE");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("image/provision")
}

fn berth_files(image: &Path, scratch: &Path) -> Vec<String> {
    let _ = std::fs::remove_dir_all(scratch);
    boot_files_of(image, scratch)
        .into_iter()
        .filter(|n| n.starts_with("berth-") && n != "berth-image.txt")
        .collect()
}

#[test]
fn a_provisioned_card_is_set_up_and_claimed_at_first_boot() {
    const TEST: &str = "a_provisioned_card_is_set_up_and_claimed_at_first_boot";
    if !tools_or_skip(
        TEST,
        &[
            "sfdisk",
            "mke2fs",
            "mkfs.vfat",
            "fsck.vfat",
            "mcopy",
            "blkid",
            "qrencode",
            "jq",
            "wpa_passphrase",
        ],
    ) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("empty");
    let image = card(dir.path(), &empty, &empty);
    let keys = dir.path().join("keys.pub");
    std::fs::write(&keys, format!("# my keys\n{KEY_A}\n\n{KEY_B}\n")).expect("keys");
    let scratch = dir.path().join("fat");

    // Refused, with nothing written: a short claim code, a name that is no DNS label,
    // Wi-Fi without its country, a private key for --ssh-keys, a short passphrase.
    let private = dir.path().join("id_ed25519");
    std::fs::write(
        &private,
        format!("-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_A}\n"),
    )
    .expect("private");
    let private = private.to_string_lossy().into_owned();
    for (args, env, why) in [
        (vec![], vec![("BERTH_CLAIM_CODE", "tooshort")], "16 to 128"),
        (vec!["--hostname", "Kitchen_Box"], vec![], "--hostname"),
        (
            vec!["--wifi", "home"],
            vec![("BERTH_WIFI_PASSPHRASE", "long enough")],
            "go together",
        ),
        (vec!["--ssh-keys", private.as_str()], vec![], "private key"),
        (
            vec!["--wifi", "home", "--wifi-country", "DE"],
            vec![("BERTH_WIFI_PASSPHRASE", "short")],
            "8 to 63",
        ),
        (
            vec!["--wifi", "home", "--wifi-country", "de"],
            vec![("BERTH_WIFI_PASSPHRASE", "long enough")],
            "two capital letters",
        ),
    ] {
        let out = provision(&image, &args, &env);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(text(&out).contains(why), "{args:?}: {}", text(&out));
        assert!(
            berth_files(&image, &scratch).is_empty(),
            "{args:?} wrote something"
        );
    }

    // Everything an owner can give.
    let keys_arg = keys.to_string_lossy().into_owned();
    let out = provision(
        &image,
        &[
            "--hostname",
            "kitchen-box",
            "--ssh-keys",
            &keys_arg,
            "--wifi",
            WIFI_SSID,
            "--wifi-country",
            "DE",
        ],
        &[
            ("BERTH_CLAIM_CODE", CODE),
            ("BERTH_WIFI_PASSPHRASE", WIFI_PASSPHRASE),
        ],
    );
    let printed = text(&out);
    assert!(out.status.success(), "{printed}");
    for line in [
        format!("Claim code: {CODE}"),
        format!("Link: berth://claim?v=1&t={CODE}"),
        "hostname:  kitchen-box".into(),
        "root may log in with the 2 key(s)".into(),
        format!("Wi-Fi:     \"{WIFI_SSID}\" (DE)"),
    ] {
        assert!(printed.contains(&line), "{line}: {printed}");
    }
    assert!(
        !printed.contains(WIFI_PASSPHRASE),
        "the passphrase is not printed"
    );
    assert_eq!(
        berth_files(&image, &scratch),
        [
            "berth-authorized-keys",
            "berth-claim-code",
            "berth-setup.txt"
        ]
    );
    let setup = std::fs::read_to_string(scratch.join("berth-setup.txt")).expect("setup");
    for line in [
        "hostname=kitchen-box",
        "wifi_ssid=IEEE",
        "wifi_passphrase=password",
        "wifi_country=DE",
    ] {
        assert!(setup.lines().any(|l| l == line), "{line}: {setup}");
    }
    assert_eq!(
        std::fs::read_to_string(scratch.join("berth-authorized-keys")).expect("keys"),
        format!("{KEY_A}\n{KEY_B}\n"),
        "only the keys, not comments or blank lines"
    );

    // Provisioning again replaces the whole set: what is left out is gone.
    let again = provision(&image, &["--hostname", "den"], &[]);
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(
        berth_files(&image, &scratch),
        ["berth-claim-code", "berth-setup.txt"]
    );
    let setup = std::fs::read_to_string(scratch.join("berth-setup.txt")).expect("setup");
    assert!(
        setup.contains("hostname=den") && !setup.contains("wifi"),
        "{setup}"
    );
    assert_ne!(
        std::fs::read_to_string(scratch.join("berth-claim-code")).expect("code"),
        format!("{CODE}\n"),
        "a new random code"
    );
    // And the final set, for the first boot below.
    let out = provision(
        &image,
        &[
            "--hostname",
            "kitchen-box",
            "--ssh-keys",
            &keys_arg,
            "--wifi",
            WIFI_SSID,
            "--wifi-country",
            "DE",
        ],
        &[
            ("BERTH_CLAIM_CODE", CODE),
            ("BERTH_WIFI_PASSPHRASE", WIFI_PASSPHRASE),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));

    // First boot, part one (berth-setup.service): the boot partition's files as
    // /boot/firmware, a root tree as the box's /.
    let boot = dir.path().join("boot-firmware");
    boot_files_of(&image, &boot);
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("etc")).expect("etc");
    std::fs::write(root.join("etc/hostname"), "berth\n").expect("hostname");
    std::fs::write(
        root.join("etc/hosts"),
        "127.0.0.1\tlocalhost\n127.0.1.1\tberth\n",
    )
    .expect("hosts");
    std::fs::create_dir_all(root.join("root/.ssh")).expect(".ssh");
    std::fs::write(root.join("root/.ssh/authorized_keys"), format!("{KEY_B}\n"))
        .expect("existing keys");
    let applied = run(Command::new(repo("board/common/usr/lib/berth/apply-setup"))
        .env("BERTH_BOOT_DIR", &boot)
        .env("BERTH_ROOT", &root)
        .env("BERTH_NO_SYSTEMCTL", "1"));
    assert!(
        !applied.contains(WIFI_PASSPHRASE),
        "the passphrase stays out of the journal: {applied}"
    );
    assert!(!boot.join("berth-setup.txt").exists(), "settings deleted");
    assert!(!boot.join("berth-authorized-keys").exists(), "keys deleted");
    assert!(
        boot.join("berth-claim-code").exists(),
        "the code is the next unit's"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("etc/hostname")).expect("hostname"),
        "kitchen-box\n"
    );
    assert!(
        std::fs::read_to_string(root.join("etc/hosts"))
            .expect("hosts")
            .contains("127.0.1.1\tkitchen-box\n")
    );
    assert_eq!(
        std::fs::read_to_string(root.join("root/.ssh/authorized_keys")).expect("keys"),
        format!("{KEY_B}\n{KEY_A}\n"),
        "the new key added, the one already there not twice"
    );
    use std::os::unix::fs::PermissionsExt as _;
    let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
    assert_eq!(mode(&root.join("root/.ssh/authorized_keys")), 0o600);
    let wpa_conf = root.join("etc/wpa_supplicant/wpa_supplicant-wlan0.conf");
    let wpa = std::fs::read_to_string(&wpa_conf).expect("wpa_supplicant conf");
    assert_eq!(mode(&wpa_conf), 0o600);
    assert!(wpa.contains("country=DE\n"), "{wpa}");
    assert!(wpa.contains("\tssid=49454545\n"), "the SSID in hex: {wpa}");
    assert!(
        wpa.contains(&format!("\tpsk={WIFI_PSK}\n")),
        "the key IEEE 802.11i gives for the passphrase: {wpa}"
    );
    assert!(!wpa.contains(WIFI_PASSPHRASE), "not the passphrase: {wpa}");

    // A setting that does not check out is skipped, and still taken off the card.
    std::fs::write(
        boot.join("berth-setup.txt"),
        "hostname=Not_A_Label\r\nwifi_ssid=x\r\n",
    )
    .expect("bad setup");
    let applied = run(Command::new(repo("board/common/usr/lib/berth/apply-setup"))
        .env("BERTH_BOOT_DIR", &boot)
        .env("BERTH_ROOT", &root)
        .env("BERTH_NO_SYSTEMCTL", "1"));
    assert!(
        applied.contains("ignored hostname 'Not_A_Label'"),
        "{applied}"
    );
    assert!(applied.contains("go together"), "{applied}");
    assert!(!boot.join("berth-setup.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("etc/hostname")).expect("hostname"),
        "kitchen-box\n"
    );

    // First boot, part two (berth-claim-code.service): the code moves into the datadir
    // and off the boot partition.
    let code_file = boot.join("berth-claim-code");
    let (_tmp, datadir) = harness::new_datadir();
    std::fs::create_dir_all(&datadir).expect("datadir");
    let owner = format!(
        "{}:{}",
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw()
    );
    let move_code = || {
        run(
            Command::new(repo("board/common/usr/lib/berth/move-claim-code"))
                .env("BERTH_CLAIM_CODE_FILE", &code_file)
                .env("BERTH_DATADIR", &datadir)
                .env("BERTH_OWNER", &owner),
        )
    };
    move_code();
    assert!(!code_file.exists(), "the code is off the boot partition");
    let moved = datadir.join("claim-code");
    assert_eq!(mode(&moved), 0o600);
    // Nothing to move: the script does nothing.
    move_code();

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

/// A Raspberry Pi 4 card's boot files as raspi-firmware's hooks leave them (the
/// kernel a stand-in: an arm64 Image header, gzip-compressed as Debian ships it).
fn pi4_boot_files(dir: &Path, version: &str, cmdline: &str) -> PathBuf {
    let boot = dir.join("boot-files");
    let _ = std::fs::remove_dir_all(&boot);
    std::fs::create_dir_all(&boot).expect("boot");
    let mut image = vec![0u8; 64];
    image[56..60].copy_from_slice(b"ARMd");
    let kernel = boot.join(format!("vmlinuz-{version}"));
    std::fs::write(&kernel, &image).expect("kernel");
    run(Command::new("gzip").arg("-n").arg(&kernel));
    std::fs::rename(boot.join(format!("vmlinuz-{version}.gz")), &kernel).expect("rename");
    std::fs::write(boot.join(format!("initrd.img-{version}")), b"initrd").expect("initrd");
    for f in [
        "start4.elf",
        "fixup4.dat",
        "bcm2711-rpi-4-b.dtb",
        "bcm2711-rpi-400.dtb",
        "bcm2711-rpi-cm4-io.dtb",
        "README.txt",
    ] {
        std::fs::write(boot.join(f), b"x").expect("file");
    }
    std::fs::write(
        boot.join("berth-image.txt"),
        format!("board=rpi4\nkernel={version}\n"),
    )
    .expect("berth-image.txt");
    std::fs::write(
        boot.join("config.txt"),
        format!(
            "# Do not modify this file!\n\narm_64bit=1\n\nenable_uart=1\nupstream_kernel=1\n\n\
             kernel=vmlinuz-{version}\n# For details on the initramfs directive, see\n\
             initramfs initrd.img-{version}\n\n# Inserted by /etc/default/raspi-firmware-custom\n\
             dtparam=i2c_arm=on\ndtparam=i2c_arm_baudrate=100000\n"
        ),
    )
    .expect("config.txt");
    std::fs::write(boot.join("cmdline.txt"), format!("{cmdline}\n")).expect("cmdline.txt");
    boot
}

/// cmdline.txt as raspi-firmware writes it for board/rpi4.
const GOOD_CMDLINE: &str = "console=tty0 console=ttyS1,115200 root=LABEL=berth-root rw fsck.repair=yes net.ifnames=0 rootwait";

/// Spoils a card's boot files in one way.
type BreakCard = fn(&Path);

#[test]
fn image_inspect_passes_a_good_pi_card_and_fails_a_broken_one() {
    const TEST: &str = "image_inspect_passes_a_good_pi_card_and_fails_a_broken_one";
    if !tools_or_skip(
        TEST,
        &[
            "sfdisk",
            "mke2fs",
            "mkfs.vfat",
            "fsck.vfat",
            "mcopy",
            "blkid",
            "debugfs",
            "jq",
            "gzip",
        ],
    ) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root-tree");
    std::fs::create_dir_all(root.join("usr/lib/modules/6.12.0-test-arm64")).expect("modules");
    let inspect = |image: &Path| {
        Command::new(repo("image/inspect"))
            .arg(image)
            .output()
            .expect("image/inspect")
    };

    let boot = pi4_boot_files(dir.path(), "6.12.0-test-arm64", GOOD_CMDLINE);
    let image = card(dir.path(), &boot, &root);
    let out = inspect(&image);
    assert!(out.status.success(), "{}", text(&out));
    let report = text(&out);
    for line in [
        "ok    an MBR (dos) partition table",
        "ok    partition 1: FAT, label BERTH-BOOT",
        "ok    config.txt: kernel=vmlinuz-6.12.0-test-arm64 is there, an arm64 Linux image",
        "ok    the kernel's modules (6.12.0-test-arm64) are in the root filesystem",
        "ok    cmdline.txt: root=LABEL=berth-root, partition 2's label",
        "ok    Pi 4 boot file start4.elf is there",
        "image/inspect: all checks passed",
    ] {
        assert!(report.contains(line), "{line}: {report}");
    }
    assert!(!report.contains("FAIL"), "{report}");

    // Each of these is a card the firmware would not boot (or would boot into a root
    // that is not there), and inspection says which check fails.
    let broken: [(&str, BreakCard, &str); 5] = [
        (
            "a root the card does not have",
            |b: &Path| {
                std::fs::write(
                    b.join("cmdline.txt"),
                    GOOD_CMDLINE.replace("berth-root", "berth-root-b"),
                )
                .expect("cmdline")
            },
            "FAIL  cmdline.txt names partition 2 as root",
        ),
        (
            "a CMA size on a Pi 4's command line",
            |b: &Path| {
                std::fs::write(
                    b.join("cmdline.txt"),
                    GOOD_CMDLINE.replace("rootwait", "cma=64M rootwait"),
                )
                .expect("cmdline")
            },
            "FAIL  cmdline.txt: no cma=",
        ),
        (
            "no GPU firmware",
            |b: &Path| std::fs::remove_file(b.join("start4.elf")).expect("rm"),
            "FAIL  Pi 4 boot file start4.elf is there",
        ),
        (
            "a kernel that is no arm64 image",
            |b: &Path| {
                std::fs::write(b.join("vmlinuz-6.12.0-test-arm64"), vec![0u8; 64]).expect("kernel")
            },
            "FAIL  config.txt: kernel=vmlinuz-6.12.0-test-arm64 is an arm64 Linux image",
        ),
        (
            "a line config.txt cannot have",
            |b: &Path| {
                let config = std::fs::read_to_string(b.join("config.txt")).expect("config");
                std::fs::write(b.join("config.txt"), config + "include berth-config.txt\n")
                    .expect("config")
            },
            "FAIL  config.txt: lines the firmware would not understand: include berth-config.txt",
        ),
    ];
    for (what, breaks, expected) in broken {
        let boot = pi4_boot_files(dir.path(), "6.12.0-test-arm64", GOOD_CMDLINE);
        breaks(&boot);
        let image = card(dir.path(), &boot, &root);
        let out = inspect(&image);
        assert!(!out.status.success(), "{what}: passed: {}", text(&out));
        assert!(text(&out).contains(expected), "{what}: {}", text(&out));
    }

    // The kernel's modules missing from the root: a boot that cannot load a driver.
    let other_root = dir.path().join("other-root");
    std::fs::create_dir_all(other_root.join("usr/lib/modules/6.1.0-old-arm64")).expect("modules");
    let boot = pi4_boot_files(dir.path(), "6.12.0-test-arm64", GOOD_CMDLINE);
    let image = card(dir.path(), &boot, &other_root);
    let out = inspect(&image);
    assert!(!out.status.success());
    assert!(
        text(&out)
            .contains("FAIL  the kernel's modules (6.12.0-test-arm64) are in the root filesystem"),
        "{}",
        text(&out)
    );
}

/// systemd-analyze verify of a unit, with its ExecStart pointed at the script here.
fn verify_unit(test: &str, unit_name: &str, script: &str) {
    let unit = std::fs::read_to_string(repo(&format!(
        "board/common/usr/lib/systemd/system/{unit_name}"
    )))
    .expect("unit");
    if !installed("systemd-analyze") {
        harness::skip(test, "systemd-analyze is not installed");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = repo(&format!("board/common{script}"));
    std::fs::write(
        dir.path().join(unit_name),
        unit.replace(script, &path.to_string_lossy()),
    )
    .expect("write");
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(dir.path().join(unit_name))
        .output()
        .expect("systemd-analyze verify");
    let stderr = String::from_utf8_lossy(&verify.stderr);
    // Units it names but this machine does not have (berthd, ssh, wpa_supplicant...).
    let complaints: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.contains(".service") && !l.contains(".target"))
        .collect();
    assert!(verify.status.success() && complaints.is_empty(), "{stderr}");
}

fn unit_lines(unit_name: &str) -> String {
    std::fs::read_to_string(repo(&format!(
        "board/common/usr/lib/systemd/system/{unit_name}"
    )))
    .expect("unit")
}

#[test]
fn the_first_boot_units_verify_and_run_only_when_something_was_provisioned() {
    const TEST: &str = "the_first_boot_units_verify_and_run_only_when_something_was_provisioned";
    let claim = unit_lines("berth-claim-code.service");
    for line in [
        "ConditionPathExists=/boot/firmware/berth-claim-code",
        "RequiresMountsFor=/boot/firmware /var/lib/berth",
        "Before=berthd.service",
        "WantedBy=berthd.service",
        "ExecStart=/usr/lib/berth/move-claim-code",
    ] {
        assert!(claim.lines().any(|l| l == line), "berth-claim-code: {line}");
    }
    let setup = unit_lines("berth-setup.service");
    for line in [
        "ConditionPathExists=|/boot/firmware/berth-setup.txt",
        "ConditionPathExists=|/boot/firmware/berth-authorized-keys",
        "RequiresMountsFor=/boot/firmware",
        "ExecStart=/usr/lib/berth/apply-setup",
    ] {
        assert!(setup.lines().any(|l| l == line), "berth-setup: {line}");
    }
    let before = setup
        .lines()
        .find_map(|l| l.strip_prefix("Before="))
        .expect("Before=");
    for unit in [
        "network-pre.target",
        "berth-hostname.service",
        "ssh.service",
        "wpa_supplicant@wlan0.service",
        "berthd.service",
    ] {
        assert!(
            before.split(' ').any(|u| u == unit),
            "berth-setup before {unit}"
        );
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
    for enabled in ["berth-claim-code.service", "berth-setup.service"] {
        assert!(build.contains(enabled), "the image enables {enabled}");
    }
    verify_unit(
        TEST,
        "berth-claim-code.service",
        "/usr/lib/berth/move-claim-code",
    );
    verify_unit(TEST, "berth-setup.service", "/usr/lib/berth/apply-setup");
}

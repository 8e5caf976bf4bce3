//! Provisioning a card with its owner's settings, and first boot taking them up
//! (`image/provision`, `board/common/usr/lib/berth/apply-setup` with
//! `berth-setup.service`, `move-claim-code` with `berth-claim-code.service`), on a small
//! disk image laid out as `image/build` lays out a card: MBR, a FAT boot partition
//! labelled `BERTH-BOOT`, then root and data. And `image/inspect`, which stands for the
//! Raspberry Pi's boot firmware (QEMU cannot run it), on an image shaped like a Pi
//! card: it passes a good one and fails a broken one.

use crate::harness;
mod updates;

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

/// The tools these tests need (scripts/ensure-deps installs them), or a skip.
pub(crate) fn tools_or_skip(test: &str, tools: &[&str]) -> bool {
    for tool in tools {
        if !harness::installed(tool) {
            harness::skip(
                test,
                &format!("{tool} is not installed (scripts/ensure-deps)"),
            );
            return false;
        }
    }
    true
}

/// The card's MBR disk identifier in these tests (image/build makes a random one).
const DISK_ID: &str = "5eed0b0e";
// Partitions in MiB, as image/build lays them out (smaller): 1 BERTH-BOOT, 2 and 3 the
// slots' FAT boot partitions, 4 extended, 5 and 6 the slots' roots, 7 data; 4 MiB
// before each logical partition for its table (EBR).
const CONFIG_MIB: u64 = 64;
const SLOT_BOOT_MIB: u64 = 64;
const ROOT_MIB: u64 = 16;
const DATA_MIB: u64 = 8;

/// (start MiB, size MiB, MBR type) of partitions 1 to 7.
fn layout() -> [(u64, u64, &'static str); 7] {
    let p1 = 4;
    let p2 = p1 + CONFIG_MIB;
    let p3 = p2 + SLOT_BOOT_MIB;
    let p4 = p3 + SLOT_BOOT_MIB;
    let p5 = p4 + 4;
    let p6 = p5 + ROOT_MIB + 4;
    let p7 = p6 + ROOT_MIB + 4;
    [
        (p1, CONFIG_MIB, "c, bootable"),
        (p2, SLOT_BOOT_MIB, "c"),
        (p3, SLOT_BOOT_MIB, "c"),
        (p4, p7 + DATA_MIB - p4, "5"),
        (p5, ROOT_MIB, "83"),
        (p6, ROOT_MIB, "83"),
        (p7, DATA_MIB, "83"),
    ]
}

fn boot_offset() -> u64 {
    layout()[0].0 << 20
}

/// A FAT32 filesystem image labelled `label`, holding `files` (a directory's entries).
fn fat(dir: &Path, name: &str, label: &str, mib: u64, files: &Path) -> PathBuf {
    let fat = dir.join(name);
    let _ = std::fs::remove_file(&fat);
    run(Command::new("mkfs.vfat")
        .args(["-F", "32", "-n", label, "-C"])
        .arg(&fat)
        .arg((mib * 1024).to_string()));
    let entries: Vec<PathBuf> = std::fs::read_dir(files)
        .expect("files")
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
    fat
}

/// A card as image/build makes one, small: MBR with disk id `DISK_ID`; p1 FAT32
/// `BERTH-BOOT` holding `config_files`; slot A's boot partition p2 (FAT32 `BERTH-SYS`,
/// holding `slot_files`, if any) and root p5 (ext4 made from `root_tree`); slot B (p3,
/// p6) empty; p7 ext4 `berth-data`.
fn card(dir: &Path, config_files: &Path, slot_files: Option<&Path>, root_tree: &Path) -> PathBuf {
    let image = dir.join("card.img");
    let parts = layout();
    let (last_start, last_size, _) = parts[6];
    std::fs::File::create(&image)
        .expect("image")
        .set_len((last_start + last_size) << 20)
        .expect("size");
    let mut sfdisk = Command::new("sfdisk")
        .arg("-q")
        .arg(&image)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("sfdisk");
    let mut table = format!("label: dos\nlabel-id: 0x{DISK_ID}\n");
    for (start, size, kind) in parts {
        table += &format!(
            "start={}, size={}, type={kind}\n",
            start * 2048,
            size * 2048
        );
    }
    use std::io::Write as _;
    sfdisk
        .stdin
        .take()
        .expect("stdin")
        .write_all(table.as_bytes())
        .expect("table");
    assert!(sfdisk.wait().expect("sfdisk").success());

    let mut fats = vec![(
        fat(dir, "config.vfat", "BERTH-BOOT", CONFIG_MIB, config_files),
        parts[0].0,
    )];
    if let Some(files) = slot_files {
        fats.push((
            fat(dir, "slot.vfat", "BERTH-SYS", SLOT_BOOT_MIB, files),
            parts[1].0,
        ));
    }
    for (fs, start) in fats {
        run(Command::new("dd")
            .arg(format!("if={}", fs.display()))
            .arg(format!("of={}", image.display()))
            .args([
                "bs=1M",
                &format!("seek={start}"),
                "conv=notrunc",
                "status=none",
            ]));
    }
    for (label, (start, mib, _), tree) in [
        ("berth-root", parts[4], Some(root_tree)),
        ("berth-data", parts[6], None),
    ] {
        let mut mke2fs = Command::new("mke2fs");
        mke2fs
            .args(["-q", "-F", "-t", "ext4", "-L", label, "-E"])
            .arg(format!("offset={}", start << 20));
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
    let image = card(dir.path(), &empty, None, &empty);
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
    let provision_everything = || {
        provision(
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
        )
    };
    let out = provision_everything();
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
    let out = provision_everything();
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
    // systemd's first-boot flag, and the console's request (none yet).
    let first_boot_flag = dir.path().join("first-boot");
    std::fs::write(&first_boot_flag, "").expect("first-boot flag");
    let request = dir.path().join("card-setup-request");
    let apply_setup = |first_boot: bool| {
        run(Command::new(repo("board/common/usr/lib/berth/apply-setup"))
            .env("BERTH_BOOT_DIR", &boot)
            .env("BERTH_ROOT", &root)
            .env("BERTH_NO_SYSTEMCTL", "1")
            .env(
                "BERTH_FIRST_BOOT",
                if first_boot {
                    first_boot_flag.clone()
                } else {
                    dir.path().join("not-the-first-boot")
                },
            )
            .env("BERTH_SETUP_REQUEST", &request))
    };
    let applied = apply_setup(true);
    assert!(applied.contains("(the box's first start)"), "{applied}");
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
    let applied = apply_setup(true);
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

    // A later start: whoever had the card for a minute wrote a key and a name onto its
    // FAT partition. Nothing of it is applied, and it is taken off the card.
    const INTRUDER_KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIntruderIntruderIntruderIntruderIntruder0 intruder";
    let plant = || {
        std::fs::write(boot.join("berth-setup.txt"), "hostname=intruder\n").expect("setup");
        std::fs::write(
            boot.join("berth-authorized-keys"),
            format!("{INTRUDER_KEY}\n"),
        )
        .expect("keys");
    };
    let keys_before =
        std::fs::read_to_string(root.join("root/.ssh/authorized_keys")).expect("keys");
    plant();
    let ignored = apply_setup(false);
    assert!(ignored.contains("ignored and deleted"), "{ignored}");
    assert!(!boot.join("berth-setup.txt").exists() && !boot.join("berth-authorized-keys").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("root/.ssh/authorized_keys")).expect("keys"),
        keys_before,
        "no key added after the first start"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("etc/hostname")).expect("hostname"),
        "kitchen-box\n"
    );

    // The owner asked for it in the console: the next start applies them, once.
    std::fs::write(&request, "").expect("request");
    plant();
    let applied = apply_setup(false);
    assert!(
        applied.contains("(the owner's request from the console)"),
        "{applied}"
    );
    assert!(!request.exists(), "a request is good for one start");
    assert_eq!(
        std::fs::read_to_string(root.join("etc/hostname")).expect("hostname"),
        "intruder\n"
    );
    assert!(
        std::fs::read_to_string(root.join("root/.ssh/authorized_keys"))
            .expect("keys")
            .contains(INTRUDER_KEY)
    );
    plant();
    let ignored = apply_setup(false);
    assert!(ignored.contains("ignored and deleted"), "{ignored}");
    // A request with nothing on the card is used up all the same.
    std::fs::write(&request, "").expect("request");
    apply_setup(false);
    assert!(
        !request.exists(),
        "a request is good for one start, files or not"
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

/// A Raspberry Pi 4 slot's boot files as raspi-firmware's hooks and image/build leave
/// them (the kernel a stand-in: an arm64 Image header, gzip-compressed as Debian ships
/// it).
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
    ] {
        std::fs::write(boot.join(f), b"x").expect("file");
    }
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

/// Partition 1 of a Pi 4 card as image/build leaves it: what the card is, the README,
/// and `autoboot.txt` as given.
fn pi4_config_files(dir: &Path, version: &str, autoboot: &str) -> PathBuf {
    let config = dir.join("config-files");
    let _ = std::fs::remove_dir_all(&config);
    std::fs::create_dir_all(&config).expect("config");
    std::fs::write(config.join("README.txt"), b"x").expect("README");
    std::fs::write(
        config.join("berth-image.txt"),
        format!("board=rpi4\nkernel={version}\ndisk_id={DISK_ID}\n"),
    )
    .expect("berth-image.txt");
    std::fs::write(config.join("autoboot.txt"), autoboot).expect("autoboot.txt");
    config
}

/// RAUC's system.conf as image/build writes it for this card.
fn system_conf(board: &str) -> String {
    std::fs::read_to_string(repo("board/common/etc/rauc/system.conf"))
        .expect("system.conf")
        .replace("@COMPATIBLE@", &format!("berth-{board}"))
        .replace("@DISK_ID@", DISK_ID)
        .replace(
            "@BUNDLE_FORMATS@",
            if board == "rpi5" {
                "plain verity"
            } else {
                "-plain"
            },
        )
}

/// A slot's root tree with what image/inspect looks at: the kernel's modules, RAUC's
/// configuration and keyring, the update scripts, the system's build time.
fn root_tree(dir: &Path, name: &str, version: &str) -> PathBuf {
    let root = dir.join(name);
    std::fs::create_dir_all(root.join(format!("usr/lib/modules/{version}"))).expect("modules");
    std::fs::create_dir_all(root.join("etc/rauc")).expect("rauc");
    std::fs::write(root.join("etc/rauc/system.conf"), system_conf("rpi4")).expect("conf");
    std::fs::write(
        root.join("etc/rauc/keyring.pem"),
        "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
    )
    .expect("keyring");
    std::fs::create_dir_all(root.join("usr/lib/berth")).expect("berth");
    std::fs::write(
        root.join("usr/lib/berth/release"),
        "version=test\nboard=rpi4\nbuild=20261128T120000Z\n",
    )
    .expect("release");
    for script in [
        "usr/lib/berth/ab-boot",
        "usr/lib/berth/rauc-pre-install",
        "usr/lib/berth/rauc-post-install",
        "usr/lib/berth/trial",
        "usr/sbin/berth-update",
    ] {
        let to = root.join(script);
        std::fs::create_dir_all(to.parent().expect("parent")).expect("dir");
        std::fs::copy(repo(&format!("board/common/{script}")), &to).expect("script");
    }
    root
}

/// cmdline.txt as raspi-firmware writes it for board/rpi4, pointed at slot A by image/build.
const GOOD_CMDLINE: &str = "console=tty0 console=ttyS1,115200 rw fsck.repair=yes net.ifnames=0 rootwait panic=10 iomem=relaxed root=PARTUUID=5eed0b0e-05 rauc.slot=A";
const AUTOBOOT_A: &str = "[all]\nboot_partition=2\n";

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
    const VERSION: &str = "6.12.0-test-arm64";
    let root = root_tree(dir.path(), "root-tree", VERSION);
    let inspect = |image: &Path| {
        Command::new(repo("image/inspect"))
            .arg(image)
            .output()
            .expect("image/inspect")
    };

    let config = pi4_config_files(dir.path(), VERSION, AUTOBOOT_A);
    let boot = pi4_boot_files(dir.path(), VERSION, GOOD_CMDLINE);
    let image = card(dir.path(), &config, Some(&boot), &root);
    let out = inspect(&image);
    assert!(out.status.success(), "{}", text(&out));
    let report = text(&out);
    for line in [
        "ok    an MBR (dos) partition table",
        "ok    seven partitions",
        "ok    partition 4 is the extended partition (type 5)",
        "ok    partition 1: FAT, label BERTH-BOOT",
        "ok    autoboot.txt: [all] boot_partition=2, slot A is the committed one",
        "ok    partition 2: FAT, label BERTH-SYS (slot A's boot partition)",
        "the other slot (boot partition 3) is empty: no update installed yet",
        "ok    config.txt: kernel=vmlinuz-6.12.0-test-arm64 is there, an arm64 Linux image",
        "ok    the kernel's modules (6.12.0-test-arm64) are in the root filesystem",
        "ok    cmdline.txt: root=PARTUUID=5eed0b0e-05, slot A's root partition",
        "ok    cmdline.txt: rauc.slot=A",
        "ok    cmdline.txt: iomem=relaxed",
        "ok    RAUC: /etc/rauc/system.conf, compatible=berth-rpi4",
        "ok    RAUC: the slots are this card's partitions 5+2 (A) and 6+3 (B)",
        "ok    RAUC: bundle-formats=-plain",
        "ok    RAUC: resize=true on both roots",
        "ok    RAUC: the pre-install handler refuses older bundles",
        "ok    the system says when it was built (/usr/lib/berth/release: 20261128T120000Z)",
        "ok    the update scripts: /usr/lib/berth/rauc-pre-install",
        "ok    the update scripts: /usr/sbin/berth-update",
        "ok    Pi 4 boot file start4.elf is there",
        "image/inspect: all checks passed",
    ] {
        assert!(report.contains(line), "{line}: {report}");
    }
    assert!(!report.contains("FAIL"), "{report}");

    // Each of these is a card the firmware would not boot (or would boot into a root
    // that is not there), and inspection says which check fails.
    let broken: [(&str, BreakCard, &str); 6] = [
        (
            "slot B's root on slot A's command line",
            |b: &Path| {
                std::fs::write(b.join("cmdline.txt"), GOOD_CMDLINE.replace("-05", "-06"))
                    .expect("cmdline")
            },
            "FAIL  cmdline.txt names slot A's root partition",
        ),
        (
            "no panic= (a trial slot's kernel panic would hang the box)",
            |b: &Path| {
                std::fs::write(b.join("cmdline.txt"), GOOD_CMDLINE.replace(" panic=10", ""))
                    .expect("cmdline")
            },
            "FAIL  cmdline.txt: panic=N",
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
        let boot = pi4_boot_files(dir.path(), VERSION, GOOD_CMDLINE);
        breaks(&boot);
        let image = card(dir.path(), &config, Some(&boot), &root);
        let out = inspect(&image);
        assert!(!out.status.success(), "{what}: passed: {}", text(&out));
        assert!(text(&out).contains(expected), "{what}: {}", text(&out));
    }

    // autoboot.txt naming no system slot: the firmware would find nothing to boot.
    let boot = pi4_boot_files(dir.path(), VERSION, GOOD_CMDLINE);
    let odd = pi4_config_files(dir.path(), VERSION, "[all]\nboot_partition=4\n");
    let out = inspect(&card(dir.path(), &odd, Some(&boot), &root));
    assert!(!out.status.success());
    assert!(
        text(&out).contains("FAIL  autoboot.txt names slot A's or B's boot partition"),
        "{}",
        text(&out)
    );

    // The kernel's modules missing from the root: a boot that cannot load a driver.
    let other_root = root_tree(dir.path(), "other-root", "6.1.0-old-arm64");
    let out = inspect(&card(dir.path(), &config, Some(&boot), &other_root));
    assert!(!out.status.success());
    assert!(
        text(&out)
            .contains("FAIL  the kernel's modules (6.12.0-test-arm64) are in the root filesystem"),
        "{}",
        text(&out)
    );

    // A Pi 4's RAUC taking plain bundles, one root slot not grown after it is
    // written (the bundle's root image is shrunk: that slot would stay as small), and
    // older bundles taken: no pre-install handler, no build time to compare with.
    let loose_root = root_tree(dir.path(), "loose-root", VERSION);
    let conf = system_conf("rpi4")
        .replace("bundle-formats=-plain", "bundle-formats=plain verity")
        .replacen("resize=true\n", "", 1)
        .replace("pre-install=/usr/lib/berth/rauc-pre-install\n", "");
    std::fs::write(loose_root.join("etc/rauc/system.conf"), conf).expect("conf");
    std::fs::remove_file(loose_root.join("usr/lib/berth/release")).expect("release");
    let out = inspect(&card(dir.path(), &config, Some(&boot), &loose_root));
    assert!(!out.status.success());
    for line in [
        "FAIL  RAUC: bundle-formats=-plain for rpi4 (it has: plain verity)",
        "FAIL  RAUC: resize=true on both root slots",
        "FAIL  RAUC: pre-install=/usr/lib/berth/rauc-pre-install",
        "FAIL  the system says when it was built",
    ] {
        assert!(text(&out).contains(line), "{line}: {}", text(&out));
    }
}

/// systemd-analyze verify of a unit, with its ExecStart pointed at the script here.
fn verify_unit(test: &str, unit_name: &str, script: &str) {
    verify_units(test, &[unit_name], script);
}

/// systemd-analyze verify of units that go together (a path unit and its service),
/// with `script` pointed at the one here.
fn verify_units(test: &str, unit_names: &[&str], script: &str) {
    if !harness::installed("systemd-analyze") {
        harness::skip(test, "systemd-analyze is not installed");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = repo(&format!("board/common{script}"));
    for unit_name in unit_names {
        std::fs::write(
            dir.path().join(unit_name),
            unit_lines(unit_name).replace(script, &path.to_string_lossy()),
        )
        .expect("write");
    }
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .args(unit_names.iter().map(|u| dir.path().join(u)))
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

/// The unit has each of `lines`, exactly.
fn assert_unit_has(unit_name: &str, lines: &[&str]) {
    let unit = unit_lines(unit_name);
    for line in lines {
        assert!(unit.lines().any(|l| l == *line), "{unit_name}: {line}");
    }
}

#[test]
fn the_first_boot_units_verify_and_run_only_when_something_was_provisioned() {
    const TEST: &str = "the_first_boot_units_verify_and_run_only_when_something_was_provisioned";
    assert_unit_has(
        "berth-claim-code.service",
        &[
            "ConditionPathExists=/boot/firmware/berth-claim-code",
            "RequiresMountsFor=/boot/firmware /var/lib/berth",
            "Before=berthd.service",
            "WantedBy=berthd.service",
            "ExecStart=/usr/lib/berth/move-claim-code",
        ],
    );
    assert_unit_has(
        "berth-setup.service",
        &[
            "ConditionPathExists=|/boot/firmware/berth-setup.txt",
            "ConditionPathExists=|/boot/firmware/berth-authorized-keys",
            "ConditionPathExists=|/var/lib/berth/card-setup-request",
            "RequiresMountsFor=/boot/firmware /var/lib/berth",
            "ExecStart=/usr/lib/berth/apply-setup",
        ],
    );
    let setup = unit_lines("berth-setup.service");
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
    // The data partition grows before it is checked and mounted, never while berthd runs.
    assert_unit_has(
        "berth-grow-data.service",
        &[
            "DefaultDependencies=no",
            "Before=systemd-fsck@dev-disk-by\\x2dlabel-berth\\x2ddata.service var-lib-berth.mount local-fs.target",
            "ExecStart=/usr/lib/berth/grow-data",
        ],
    );
    verify_unit(
        TEST,
        "berth-claim-code.service",
        "/usr/lib/berth/move-claim-code",
    );
    verify_unit(TEST, "berth-setup.service", "/usr/lib/berth/apply-setup");
    verify_unit(TEST, "berth-grow-data.service", "/usr/lib/berth/grow-data");
}

/// A card image attached as a loop device with its partitions, detached (and its
/// mount undone) on drop, also when the test fails.
struct LoopCard {
    device: String,
    mount: Option<PathBuf>,
}

impl Drop for LoopCard {
    fn drop(&mut self) {
        if let Some(mount) = &self.mount {
            let _ = Command::new("umount").arg(mount).status();
        }
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
    }
}

/// Keeps a partition's node current until dropped ([`partition_node`]).
struct NodeKeeper(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for NodeKeeper {
    fn drop(&mut self) {
        self.0.store(false, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A block device node for partition `nr` of `card` in `dir`, named as the kernel names
/// it (`loop3p7`), kept pointing at the kernel's partition while the returned keeper
/// lives: on the box devtmpfs and udev do that under /dev (a partition the kernel removes
/// and adds again to resize it comes back under a new device number), here, where /dev
/// gets no partition nodes (a container, this test's CI), a thread does.
fn partition_node(card: &LoopCard, nr: u32, dir: &Path) -> (PathBuf, NodeKeeper) {
    let name = format!("{}p{nr}", card.device.trim_start_matches("/dev/"));
    let sys = format!("/sys/class/block/{name}/dev");
    // The kernel scans the table as the device is attached (`--partscan`), unless the
    // loop driver was loaded without partition support: then partx adds them.
    if !Path::new(&sys).exists() {
        let _ = Command::new("partx")
            .args(["--add", "--nr", &nr.to_string(), &card.device])
            .status();
    }
    harness::wait_until(&format!("the kernel's partition {name}"), 10, || {
        Path::new(&sys).exists()
    });
    fn make(node: &Path, numbers: &str) {
        let _ = std::fs::remove_file(node);
        let (major, minor) = numbers.trim().split_once(':').expect("major:minor");
        run(Command::new("mknod").arg(node).args(["b", major, minor]));
    }
    let node = dir.join(&name);
    let mut made = std::fs::read_to_string(&sys).expect("the partition's device numbers");
    make(&node, &made);
    let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (keep, kept) = (std::sync::Arc::clone(&up), node.clone());
    std::thread::spawn(move || {
        while keep.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok(now) = std::fs::read_to_string(&sys)
                && now != made
            {
                make(&kept, &now);
                made = now;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    });
    (node, NodeKeeper(up))
}

/// First boot grows the data partition to the end of a card larger than the image
/// (`grow-data`, `berth-grow-data.service`): on a loop device over a card image laid out
/// as image/build does, its data partition holding a file and not mounted (the unit runs
/// before the mount), the extended and the data partition end at the card's end, the
/// ext4 fills it and checks clean, the file is intact; run again, it does nothing.
#[test]
fn the_data_partition_grows_to_the_end_of_the_card() {
    const TEST: &str = "the_data_partition_grows_to_the_end_of_the_card";
    if !tools_or_skip(
        TEST,
        &[
            "sfdisk",
            "partx",
            "losetup",
            "mke2fs",
            "mkfs.vfat",
            "mcopy",
            "resize2fs",
            "dumpe2fs",
            "e2fsck",
            "mknod",
            "mount",
            "resizepart",
            "udevadm",
        ],
    ) {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        harness::skip(TEST, "needs root (a loop device and a mount)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("dir");
    let image = card(dir.path(), &empty, None, &empty);
    let (data_start, data_mib, _) = layout()[6];
    let card_mib = data_start + data_mib + 120;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&image)
        .and_then(|f| f.set_len(card_mib << 20))
        .expect("a larger card");
    let attached = Command::new("losetup")
        .args(["--find", "--show", "--partscan"])
        .arg(&image)
        .output()
        .expect("losetup");
    if !attached.status.success() {
        harness::skip(TEST, &format!("no loop device here: {}", text(&attached)));
        return;
    }
    let mut card = LoopCard {
        device: String::from_utf8_lossy(&attached.stdout).trim().to_string(),
        mount: None,
    };
    let (data, _node_kept) = partition_node(&card, 7, dir.path());
    let mount = dir.path().join("data");
    std::fs::create_dir(&mount).expect("mount point");
    let size = |path: &Path| {
        rustix::fs::statvfs(path)
            .map(|s| s.f_blocks * s.f_frsize)
            .expect("statvfs")
    };
    // A wallet on it, then unmounted, as the partition is when the unit runs at boot.
    run(Command::new("mount").arg(&data).arg(&mount));
    card.mount = Some(mount.clone());
    std::fs::write(mount.join("wallet"), "the wallet's bytes").expect("a file");
    let before = size(&mount);
    run(Command::new("umount").arg(&mount));
    card.mount = None;

    let script = repo("board/common/usr/lib/berth/grow-data");
    // The kernel's events meanwhile: the partition resized in place, never removed and
    // added again (udev, busy at a first boot, took those after systemd had mounted it
    // and systemd unmounted it again: image/boot-test).
    let mut events = Command::new("udevadm")
        .args(["monitor", "--kernel", "--subsystem-match=block"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("udevadm monitor");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let grown = run(Command::new(&script).arg(&data));
    std::thread::sleep(std::time::Duration::from_millis(500));
    let _ = events.kill();
    let events = events.wait_with_output().expect("udevadm monitor's output");
    let events = String::from_utf8_lossy(&events.stdout);
    assert!(
        events.contains("KERNEL"),
        "the monitor listened to the kernel: {events}"
    );
    assert!(
        !events.lines().any(|l| l.contains(" remove ")),
        "a partition was removed while the card grew: {events}"
    );
    assert!(grown.contains("grow-data: growing"), "{grown}");
    let table = run(Command::new("partx").args(["-g", "-o", "NR,END", &card.device]));
    let last_sector = (card_mib << 11) - 1;
    for nr in [4, 7] {
        assert!(
            table.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f == [nr.to_string(), last_sector.to_string()]
            }),
            "partition {nr} ends at the card's last sector: {table}"
        );
    }
    run(Command::new("e2fsck").args(["-f", "-n"]).arg(&data));
    run(Command::new("mount").arg(&data).arg(&mount));
    card.mount = Some(mount.clone());
    let after = size(&mount);
    assert!(
        after > before + (100 << 20),
        "the filesystem grew: {before} -> {after} bytes"
    );
    assert_eq!(
        std::fs::read_to_string(mount.join("wallet")).expect("the file"),
        "the wallet's bytes"
    );
    // Every later boot: nothing to do (here with the partition mounted, as by hand).
    let again = run(Command::new(&script).arg(&data));
    assert!(again.contains("already fills the card"), "{again}");
    assert_eq!(size(&mount), after, "nothing more to grow");
    println!("{grown}");
}

/// RAUC's custom bootloader backend for the card (`board/common/usr/lib/berth/ab-boot`),
/// on a directory standing for partition 1 and a file for /proc/cmdline: a slot RAUC
/// installs is only tried (`reboot N`), autoboot.txt keeps the committed slot until the
/// tried one is marked good while booted, and the committed slot cannot be marked bad
/// while another is on trial.
#[test]
fn the_ab_boot_backend_tries_a_new_slot_once_and_commits_it_only_when_it_is_good() {
    let dir = tempfile::tempdir().expect("tempdir");
    let boot = dir.path().join("firmware");
    std::fs::create_dir(&boot).expect("boot");
    std::fs::write(boot.join("autoboot.txt"), AUTOBOOT_A).expect("autoboot");
    let cmdline = dir.path().join("cmdline");
    let booted = |slot: &str| {
        std::fs::write(
            &cmdline,
            GOOD_CMDLINE.replace("rauc.slot=A", &format!("rauc.slot={slot}")) + "\n",
        )
        .expect("cmdline")
    };
    let ab = |args: &[&str]| {
        Command::new(repo("board/common/usr/lib/berth/ab-boot"))
            .args(args)
            .env("BERTH_BOOT_DIR", &boot)
            .env("BERTH_PROC_CMDLINE", &cmdline)
            .env("BERTH_RUN_DIR", dir.path().join("run"))
            .output()
            .expect("ab-boot")
    };
    let says = |args: &[&str]| {
        let out = ab(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let autoboot = || std::fs::read_to_string(boot.join("autoboot.txt")).expect("autoboot");

    // Booted from slot A, as flashed.
    booted("A");
    assert_eq!(says(&["get-current"]), "A");
    assert_eq!(says(&["committed"]), "A");
    assert_eq!(says(&["get-primary"]), "A");
    assert_eq!(says(&["get-state", "B"]), "good");
    assert_eq!(says(&["partition", "B"]), "3");

    // RAUC installs into B: marks it bad while writing, then makes it primary. B is only
    // the one a `reboot 3` tries; autoboot.txt still boots A.
    says(&["set-state", "B", "bad"]);
    assert_eq!(says(&["get-state", "B"]), "bad");
    says(&["set-primary", "B"]);
    assert_eq!(says(&["get-primary"]), "B");
    assert_eq!(autoboot(), AUTOBOOT_A);

    // Booted from B on trial: A, committed, cannot be marked bad (nothing to return to).
    booted("B");
    let out = ab(&["set-state", "A", "bad"]);
    assert!(!out.status.success(), "marked the committed slot bad");
    assert!(text(&out).contains("refusing"), "{}", text(&out));
    // berthd ready: mark-good commits B.
    says(&["set-state", "B", "good"]);
    assert_eq!(autoboot(), "[all]\nboot_partition=3\n");
    assert_eq!(says(&["committed"]), "B");
    assert_eq!(says(&["get-state", "B"]), "good");
    assert_eq!(says(&["get-primary"]), "B");

    // The next update, into A, fails its trial: marked bad while booted, never committed.
    says(&["set-state", "A", "bad"]);
    says(&["set-primary", "A"]);
    booted("A");
    says(&["set-state", "A", "bad"]);
    assert_eq!(says(&["get-state", "A"]), "bad");
    assert_eq!(says(&["committed"]), "B");
    assert_eq!(autoboot(), "[all]\nboot_partition=3\n");
    // RAUC's mark-active of the booted slot commits it too.
    says(&["set-primary", "A"]);
    assert_eq!(says(&["committed"]), "A");
    assert_eq!(says(&["get-state", "A"]), "good");

    // The partition for the firmware, in PM_RSTS's bits 0, 2, 4, 6, 8, 10.
    assert_eq!(says(&["rsts-bits", "2"]), "0x004");
    assert_eq!(says(&["rsts-bits", "3"]), "0x005");
    assert_eq!(says(&["rsts-bits", "0"]), "0x000");
    assert!(
        !ab(&["rsts-bits", "63"]).status.success(),
        "63 is the firmware's halt"
    );
    // A Pi 4's /proc/iomem: the watchdog device has three regions; PM_RSTS is in the
    // one it is named after ("pm"), not the first listed.
    let iomem = dir.path().join("iomem");
    std::fs::write(
        &iomem,
        "fe00a000-fe00a023 : fe100000.watchdog asb\n\
         fe100000-fe100113 : fe100000.watchdog pm\n\
         fec11000-fec1101f : fe100000.watchdog rpivid_asb\n",
    )
    .expect("iomem");
    let out = Command::new(repo("board/common/usr/lib/berth/ab-boot"))
        .arg("rsts-address")
        .env("BERTH_PROC_IOMEM", &iomem)
        .output()
        .expect("ab-boot rsts-address");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "0xfe100020\n",
        "{}",
        text(&out)
    );
    // Not a Raspberry Pi (no watchdog in /proc/iomem): arming does nothing, and says so.
    std::fs::write(&iomem, "40000000-bfffffff : System RAM\n").expect("iomem");
    let out = Command::new(repo("board/common/usr/lib/berth/ab-boot"))
        .args(["arm", "3"])
        .env("BERTH_PROC_IOMEM", &iomem)
        .output()
        .expect("ab-boot arm");
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("nothing to arm"), "{}", text(&out));

    // Nonsense is refused.
    assert!(!ab(&["get-state", "C"]).status.success());
    assert!(!ab(&["set-state", "A", "maybe"]).status.success());
    std::fs::write(boot.join("autoboot.txt"), "[all]\nboot_partition=4\n").expect("autoboot");
    assert!(!ab(&["committed"]).status.success());
}

/// The update bundle as image/build makes it (format, slot images, compatible), signed
/// with a key made here: RAUC, configured as the appliance is, verifies it against that
/// key's certificate and refuses it against another's.
#[test]
fn an_update_bundle_verifies_against_the_appliance_keyring_and_not_another() {
    const TEST: &str = "an_update_bundle_verifies_against_the_appliance_keyring_and_not_another";
    if !tools_or_skip(
        TEST,
        &["rauc", "mksquashfs", "openssl", "mkfs.vfat", "mke2fs"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let key = |name: &str| {
        run(Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args(["-subj", &format!("/O=Berth/CN={name}")])
            .arg("-keyout")
            .arg(dir.path().join(format!("{name}.key")))
            .arg("-out")
            .arg(dir.path().join(format!("{name}.pem"))));
        dir.path().join(format!("{name}.pem"))
    };
    let signer = key("build");
    let stranger = key("stranger");

    // The manifest image/build writes, with the slot classes the appliance's system.conf
    // has.
    let build = std::fs::read_to_string(repo("image/build")).expect("image/build");
    let conf = system_conf("rpi4");
    for (image, slot) in [
        ("[image.boot]", "[slot.boot.0]"),
        ("[image.rootfs]", "[slot.rootfs.0]"),
    ] {
        assert!(build.contains(image), "image/build's manifest has {image}");
        assert!(conf.contains(slot), "system.conf has {slot}");
    }
    assert!(build.contains("bundle_format=verity") && conf.contains("bundle-formats=-plain"));
    let content = dir.path().join("bundle");
    std::fs::create_dir(&content).expect("content");
    std::fs::write(
        content.join("manifest.raucm"),
        "[update]\ncompatible=berth-rpi4\nversion=test\n\n[bundle]\nformat=verity\n\n\
         [image.boot]\nfilename=boot.vfat\n\n[image.rootfs]\nfilename=root.ext4\n",
    )
    .expect("manifest");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("empty");
    std::fs::rename(
        fat(dir.path(), "boot.vfat", "BERTH-SYS", 34, &empty),
        content.join("boot.vfat"),
    )
    .expect("boot.vfat");
    // A root with something in it that does not compress (a verity bundle's squashfs
    // must be larger than one 4 KiB block).
    let tree = dir.path().join("root-tree");
    std::fs::create_dir(&tree).expect("tree");
    let mut noise = vec![0u8; 64 << 10];
    let mut x: u32 = 0x9e37_79b9;
    for b in noise.iter_mut() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    std::fs::write(tree.join("noise"), &noise).expect("noise");
    run(Command::new("mke2fs")
        .args(["-q", "-F", "-t", "ext4", "-L", "berth-root", "-d"])
        .arg(&tree)
        .arg(content.join("root.ext4"))
        .arg("4M"));
    let bundle = dir.path().join("update.raucb");
    run(Command::new("rauc")
        .arg(format!("--cert={}", signer.display()))
        .arg(format!("--key={}", dir.path().join("build.key").display()))
        .arg("bundle")
        .arg(&content)
        .arg(&bundle));

    let conf_file = dir.path().join("system.conf");
    std::fs::write(&conf_file, &conf).expect("conf");
    let info = |keyring: &Path| {
        Command::new("rauc")
            .arg(format!("--conf={}", conf_file.display()))
            .arg(format!("--keyring={}", keyring.display()))
            .arg("info")
            .arg(&bundle)
            .output()
            .expect("rauc info")
    };
    let good = info(&signer);
    assert!(good.status.success(), "{}", text(&good));
    let report = text(&good);
    assert!(report.contains("'berth-rpi4'"), "{report}");
    assert!(report.contains("verity"), "{report}");
    let bad = info(&stranger);
    assert!(
        !bad.status.success(),
        "verified with another key: {}",
        text(&bad)
    );
}

#[test]
fn the_trial_unit_verifies_and_the_image_enables_it() {
    const TEST: &str = "the_trial_unit_verifies_and_the_image_enables_it";
    assert_unit_has(
        "berth-trial.service",
        &[
            "ExecStart=/usr/lib/berth/trial",
            "RequiresMountsFor=/boot/firmware /var/lib/berth",
            "WantedBy=multi-user.target",
        ],
    );
    let build = std::fs::read_to_string(repo("image/build")).expect("image/build");
    assert!(
        build.contains("berth-trial.service"),
        "the image enables berth-trial.service"
    );
    verify_unit(TEST, "berth-trial.service", "/usr/lib/berth/trial");
}

/// berthd's install request starts root's side: the path unit watches the request on
/// the mounted data partition, the service runs install-request and reports a run cut
/// off; both verify, and the image enables the path unit.
#[test]
fn the_install_request_units_verify_and_the_image_enables_them() {
    const TEST: &str = "the_install_request_units_verify_and_the_image_enables_them";
    assert_unit_has(
        "berth-update-request.path",
        &[
            "PathExists=/var/lib/berth/update/install-request",
            "RequiresMountsFor=/var/lib/berth",
            "WantedBy=multi-user.target",
        ],
    );
    assert_unit_has(
        "berth-update-request.service",
        &[
            "Type=oneshot",
            "ExecStart=/usr/lib/berth/install-request",
            "ExecStopPost=/usr/lib/berth/install-request --stopped",
        ],
    );
    let build = std::fs::read_to_string(repo("image/build")).expect("image/build");
    assert!(
        build.contains("berth-update-request.path"),
        "the image enables berth-update-request.path"
    );
    verify_units(
        TEST,
        &["berth-update-request.path", "berth-update-request.service"],
        "/usr/lib/berth/install-request",
    );
}

/// The journal lives in memory on the box; warnings and worse go to a ring on the card
/// (`keep-warnings`, `berth-warnings.service`): the real script, with `journalctl`
/// stood in for by one that prints the entries a test gives it. The ring never holds
/// more than twice its size, keeps the newest lines, and a restart of the service
/// appends to it. (That journald keeps the journal in memory and the ring takes a real
/// warning is `image/boot-test`'s, on the booted image.)
#[test]
fn warnings_are_kept_in_a_bounded_ring_and_the_journal_in_memory() {
    const TEST: &str = "warnings_are_kept_in_a_bounded_ring_and_the_journal_in_memory";
    let journald = std::fs::read_to_string(repo(
        "board/common/etc/systemd/journald.conf.d/50-berth-volatile.conf",
    ))
    .expect("journald drop-in");
    assert!(
        journald.lines().any(|l| l == "Storage=volatile")
            && journald.lines().any(|l| l.starts_with("RuntimeMaxUse=")),
        "{journald}"
    );
    let build = std::fs::read_to_string(repo("image/build")).expect("image/build");
    assert!(build.contains("berth-warnings.service"), "enabled");
    assert!(
        build.contains("rm -rf \"${stage:?}/var/log/journal\""),
        "no persistent journal"
    );
    assert_unit_has(
        "berth-warnings.service",
        &[
            "ExecStart=/usr/lib/berth/keep-warnings",
            "SupplementaryGroups=systemd-journal",
            "LogsDirectory=berth",
        ],
    );
    verify_unit(
        TEST,
        "berth-warnings.service",
        "/usr/lib/berth/keep-warnings",
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).expect("bin");
    let entries = dir.path().join("entries");
    let asked = dir.path().join("asked");
    std::fs::write(
        bin.join("journalctl"),
        format!(
            "#!/bin/sh\necho \"$*\" >'{}'\ncat '{}'\n",
            asked.display(),
            entries.display()
        ),
    )
    .expect("journalctl");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        bin.join("journalctl"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("mode");
    let ring = dir.path().join("log");
    let keep = |from: usize, to: usize| {
        let lines: String = (from..to)
            .map(|n| format!("2026-11-30T08:00:00+0000 box kernel: warning number {n:05}\n"))
            .collect();
        std::fs::write(&entries, lines).expect("entries");
        let out = Command::new(repo("board/common/usr/lib/berth/keep-warnings"))
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    bin.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("BERTH_WARNINGS_DIR", &ring)
            .env("BERTH_WARNINGS_MAX_KIB", "4")
            .env("BERTH_WARNINGS_CURSOR", dir.path().join("cursor"))
            .output()
            .expect("keep-warnings");
        assert!(out.status.success(), "{out:?}");
    };
    let read = |name: &str| std::fs::read_to_string(ring.join(name)).unwrap_or_default();

    // 59-byte lines: 70 fit in 4 KiB.
    keep(0, 50);
    let asked = std::fs::read_to_string(&asked).expect("asked");
    for arg in ["--boot", "--follow", "--priority=warning", "--cursor-file="] {
        assert!(asked.contains(arg), "{arg}: {asked}");
    }
    assert_eq!(read("warnings.log").lines().count(), 50);
    assert!(!ring.join("warnings.log.1").exists());
    // A restart of the service appends (the cursor says where journalctl goes on).
    keep(50, 60);
    assert_eq!(read("warnings.log").lines().count(), 60);
    // Over and over past the size: two files at most, each at most 4 KiB and a line,
    // the newest line last, the oldest gone.
    keep(60, 1000);
    let (older, newer) = (read("warnings.log.1"), read("warnings.log"));
    let files = std::fs::read_dir(&ring).expect("ring").count();
    assert_eq!(files, 2, "warnings.log and warnings.log.1 only");
    for file in [&older, &newer] {
        assert!(file.len() <= 4096 + 59, "{}", file.len());
    }
    assert!(newer.ends_with("warning number 00999\n"), "{newer}");
    let kept: Vec<&str> = older.lines().chain(newer.lines()).collect();
    assert!(
        !kept.iter().any(|l| l.ends_with("number 00000")),
        "the oldest dropped"
    );
    let numbers: Vec<u32> = kept
        .iter()
        .map(|l| {
            l.rsplit(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .expect("n")
        })
        .collect();
    assert!(
        numbers.windows(2).all(|w| w[1] == w[0] + 1),
        "in order, none lost between the two files"
    );
}

//! A card that can lose its power (`image/power-cut-test`, issue 47): the box's data
//! partition as `image/build` makes it (ext4, label `berth-data`) and mounts it (its
//! fstab options), on a loop device whose every write and flush QEMU's `blklogwrites`
//! driver records, the way filesystem developers test crash consistency with
//! `dm-log-writes`: `qemu-storage-daemon` serves the disk through that driver as a file
//! (its FUSE export), under a loop device. Not with the loop device's direct I/O: with
//! its concurrent requests the record and the disk drifted apart (qemu-storage-daemon
//! 10.0's FUSE export reads every request into one buffer, and a request handled while
//! another waits on its write overwrites that one's data before it is recorded). So
//! every cut first checks the record: the whole of it replayed onto the disk as it was
//! must give what the disk holds.
//!
//! A power cut at a moment is what a card that honours flushes and nothing else could
//! hold afterwards: the disk as it was when the card was last attached, with the writes
//! recorded before that moment replayed up to the last flush, or up to one of the
//! writes after that flush (the card kept those and lost the rest). Killing a process
//! is a weaker fault: the kernel's page cache survives it, and with it every write the
//! process made, flushed or not. After the cut the card is checked as the box's boot
//! checks it (`e2fsck -p`, systemd-fsck's pass for its fstab line), then fully
//! (`e2fsck -fn`), and mounted again (with the journal's recovery) with a new record.
//!
//! The card is ext4, as the image makes it, or f2fs to compare ([`Filesystem`]): then
//! `fsck.f2fs -a` is the boot's pass, `fsck.f2fs -f --dry-run` the full check, and the
//! mount rolls forward what was fsynced since the last checkpoint. f2fs needs a kernel
//! that has it (this machine's does not: `scripts/in-uml` runs the test under
//! User-mode Linux's).
//!
//! Needs root (loop devices, mounts), `/dev/fuse`, `qemu-storage-daemon` and `qemu-img`
//! (Debian's qemu-utils) and e2fsprogs (f2fs-tools); [`LoggedCard::missing`] says what
//! is absent.

use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The data partition's mount options on the box (`image/build`'s fstab line).
pub const BOX_MOUNT_OPTIONS: &str = "noatime,nosuid,nodev,noexec";

/// The card's filesystem: the image's ext4, or f2fs, the flash filesystem, to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filesystem {
    Ext4,
    F2fs,
}

impl Filesystem {
    /// From `var` (`ext4`, the default, or `f2fs`).
    pub fn from_env(var: &str) -> Filesystem {
        match std::env::var(var).as_deref() {
            Err(_) | Ok("") | Ok("ext4") => Filesystem::Ext4,
            Ok("f2fs") => Filesystem::F2fs,
            Ok(other) => panic!("{var}={other}: ext4 or f2fs"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Filesystem::Ext4 => "ext4",
            Filesystem::F2fs => "f2fs",
        }
    }

    /// The tools it takes; and for f2fs the kernel's support, which the host's kernel
    /// lacks.
    fn missing(self) -> Vec<String> {
        let (tools, package): (&[&str], _) = match self {
            Filesystem::Ext4 => (&["mkfs.ext4", "e2fsck"], "e2fsprogs"),
            Filesystem::F2fs => (&["mkfs.f2fs", "fsck.f2fs"], "f2fs-tools"),
        };
        let mut missing: Vec<String> = tools
            .iter()
            .filter(|tool| !crate::harness::installed(tool))
            .map(|tool| format!("{tool} ({package})"))
            .collect();
        let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
        if !filesystems.split_whitespace().any(|fs| fs == self.name()) {
            missing.push(format!(
                "a kernel with {} (scripts/in-uml runs one)",
                self.name()
            ));
        }
        missing
    }

    /// A new filesystem labelled as the box's data partition, filling `image`.
    fn make(self, image: &Path, mib: u64) -> Result<(), String> {
        match self {
            Filesystem::Ext4 => run(Command::new("mkfs.ext4")
                .args(["-q", "-F", "-t", "ext4", "-L", "berth-data"])
                .arg(image)
                .arg(format!("{mib}M"))),
            Filesystem::F2fs => {
                std::fs::File::create(image)
                    .and_then(|f| f.set_len(mib << 20))
                    .map_err(|e| format!("{}: {e}", image.display()))?;
                run(Command::new("mkfs.f2fs")
                    .args(["-q", "-f", "-l", "berth-data"])
                    .arg(image))
            }
        }
        .map(|_| ())
    }

    /// The boot's pass (what systemd-fsck runs for the fstab line: `fsck -a`).
    fn preen(self, image: &Path) -> Command {
        let mut command = match self {
            Filesystem::Ext4 => Command::new("e2fsck"),
            Filesystem::F2fs => Command::new("fsck.f2fs"),
        };
        command.arg(match self {
            Filesystem::Ext4 => "-p",
            Filesystem::F2fs => "-a",
        });
        command.arg(image);
        command
    }

    /// A full check that changes nothing.
    fn full_check(self, image: &Path) -> Command {
        let mut command = match self {
            Filesystem::Ext4 => {
                let mut c = Command::new("e2fsck");
                c.arg("-fn");
                c
            }
            Filesystem::F2fs => {
                let mut c = Command::new("fsck.f2fs");
                c.args(["-f", "--dry-run"]);
                c
            }
        };
        command.arg(image);
        command
    }
}

/// The record's layout (`dm-log-writes`, which `blklogwrites` writes): a super block in
/// the first sector, then per request an entry sector followed by its data sectors
/// (none for a flush or a discard).
const LOG_MAGIC: u64 = 0x006a_7366_7773_6872;
const LOG_FLUSH: u64 = 1;
const LOG_FUA: u64 = 2;
const LOG_DISCARD: u64 = 4;
const LOG_MARK: u64 = 8;
const SECTOR: u64 = 512;

/// One recorded request.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Where its data is in the record (bytes), when it has data.
    data_at: u64,
    /// Where it goes on the disk (sectors) and how many.
    sector: u64,
    sectors: u64,
    flags: u64,
}

/// What a cut kept and what the checks after it said.
#[derive(Debug, Clone)]
pub struct Cut {
    /// Requests recorded before the moment of the cut.
    pub recorded: usize,
    /// Of them, flushes.
    pub flushes: usize,
    /// Writes kept after the last flush (0: the cut fell on a flush point).
    pub kept_after_flush: usize,
    /// Writes recorded before the moment but lost with the power.
    pub lost: usize,
    /// The boot's check's exit status on the cut card (`e2fsck -p`, `fsck.f2fs -a`: 0
    /// clean, 1 repaired; 4 or more: the box's boot would stop there).
    pub preen: i32,
    /// What a check found wrong, if anything.
    pub problems: Vec<String>,
}

/// The data partition on a recording loop device, mounted at [`LoggedCard::mount`].
pub struct LoggedCard {
    dir: PathBuf,
    /// Where the filesystem is mounted.
    pub mount: PathBuf,
    /// The disk as of the last attach (raw; cuts are replayed onto it).
    base: PathBuf,
    filesystem: Filesystem,
    options: String,
    attached: Option<Attached>,
    attaches: u32,
}

struct Attached {
    daemon: Child,
    loop_device: String,
    /// The record of this attach.
    log: PathBuf,
    /// Where the writes of this attach go (a qcow2 over the base), thrown away at a cut.
    overlay: PathBuf,
}

fn run(command: &mut Command) -> Result<String, String> {
    let out = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{command:?}: {}: {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl LoggedCard {
    /// What this machine lacks for a recording card of `filesystem` (empty: nothing).
    pub fn missing(filesystem: Filesystem) -> Vec<String> {
        let mut missing = Vec::new();
        if !rustix::process::geteuid().is_root() {
            missing.push("root (loop devices and mounts)".to_owned());
        }
        if !Path::new("/dev/fuse").exists() {
            missing.push("/dev/fuse".to_owned());
        }
        for tool in ["qemu-storage-daemon", "qemu-img", "losetup"] {
            if !crate::harness::installed(tool) {
                missing.push(tool.to_owned());
            }
        }
        missing.extend(filesystem.missing());
        missing
    }

    /// A new card of `mib` MiB in `dir`, made as `image/build` makes the data
    /// partition (of `filesystem`), mounted at `dir/mnt` with `options`, recording.
    pub fn new(dir: &Path, mib: u64, filesystem: Filesystem, options: &str) -> LoggedCard {
        std::fs::create_dir_all(dir).expect("card dir");
        let base = dir.join("card.raw");
        filesystem
            .make(&base, mib)
            .unwrap_or_else(|e| panic!("make the card's {}: {e}", filesystem.name()));
        let mount = dir.join("mnt");
        std::fs::create_dir_all(&mount).expect("mount point");
        let mut card = LoggedCard {
            dir: dir.to_path_buf(),
            mount,
            base,
            filesystem,
            options: options.to_owned(),
            attached: None,
            attaches: 0,
        };
        card.attach().expect("attach the new card");
        card
    }

    /// Serve the base through a new record and mount it.
    fn attach(&mut self) -> Result<(), String> {
        self.attaches += 1;
        let n = self.attaches;
        let overlay = self.dir.join(format!("writes-{n}.qcow2"));
        let log = self.dir.join(format!("record-{n}.log"));
        let export = self.dir.join("disk");
        run(Command::new("qemu-img")
            .args(["create", "-q", "-f", "qcow2", "-F", "raw", "-b"])
            .arg(&self.base)
            .arg(&overlay))?;
        std::fs::write(&log, b"").map_err(|e| format!("{}: {e}", log.display()))?;
        std::fs::write(&export, b"").map_err(|e| format!("{}: {e}", export.display()))?;
        let size = std::fs::metadata(&self.base)
            .map_err(|e| format!("{}: {e}", self.base.display()))?
            .len();
        let daemon = Command::new("qemu-storage-daemon")
            .arg("--blockdev")
            .arg(format!(
                "driver=file,node-name=overlay-file,filename={}",
                overlay.display()
            ))
            .arg("--blockdev")
            .arg("driver=qcow2,node-name=disk,file=overlay-file")
            .arg("--blockdev")
            .arg(format!(
                "driver=file,node-name=record,filename={}",
                log.display()
            ))
            .arg("--blockdev")
            .arg("driver=blklogwrites,node-name=logged,file=disk,log=record,log-sector-size=512")
            .arg("--export")
            .arg(format!(
                "type=fuse,id=card,node-name=logged,mountpoint={},writable=on",
                export.display()
            ))
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(self.dir.join(format!("qsd-{n}.log")))
                    .map_err(|e| e.to_string())?,
            )
            .spawn()
            .map_err(|e| format!("qemu-storage-daemon: {e}"))?;
        let mut attached = Attached {
            daemon,
            loop_device: String::new(),
            log,
            overlay,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::metadata(&export).map(|m| m.len()).unwrap_or(0) != size {
            if Instant::now() > deadline || attached.daemon.try_wait().ok().flatten().is_some() {
                let _ = attached.daemon.kill();
                let _ = attached.daemon.wait();
                return Err(format!(
                    "qemu-storage-daemon did not export the card: {}",
                    std::fs::read_to_string(self.dir.join(format!("qsd-{n}.log")))
                        .unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        attached.loop_device = run(Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&export))?;
        self.attached = Some(attached);
        run(Command::new("mount")
            .args(["-t", self.filesystem.name(), "-o", &self.options])
            .arg(&self.attached.as_ref().expect("attached").loop_device)
            .arg(&self.mount))
        .map_err(|e| format!("the card does not mount: {e}"))?;
        Ok(())
    }

    /// Everything written to the card so far made durable (`syncfs`), as a box's
    /// setup leaves its files before anything runs on them.
    pub fn sync(&self) {
        run(Command::new("sync").arg("-f").arg(&self.mount)).expect("sync the card");
    }

    /// Where the record of this attach ends now: the moment of a cut, taken before
    /// anything is stopped (what is recorded after it is what the card never got).
    pub fn moment(&self) -> u64 {
        let attached = self.attached.as_ref().expect("attached");
        std::fs::metadata(&attached.log).map_or(0, |m| m.len())
    }

    /// Wait, `within` at most, until a write reaches the record: then [`LoggedCard::moment`]
    /// most likely falls inside a commit, between its writes and its flush, where a
    /// power cut tests the most (a moment taken at random falls almost always after a
    /// flush, the writer idle).
    pub fn await_write(&self, within: std::time::Duration) {
        let start = self.moment();
        let deadline = Instant::now() + within;
        while self.moment() == start && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(500));
        }
    }

    /// Unmount and stop serving; every write made meanwhile is recorded after any
    /// moment taken before.
    fn detach(&mut self) -> Option<Attached> {
        let mut attached = self.attached.take()?;
        if run(Command::new("umount").arg(&self.mount)).is_err() {
            let _ = run(Command::new("umount").arg("-l").arg(&self.mount));
        }
        let _ = run(Command::new("losetup").arg("-d").arg(&attached.loop_device));
        // SIGTERM: the daemon takes its FUSE export down as it goes.
        if let Some(pid) = rustix::process::Pid::from_raw(attached.daemon.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let _ = attached.daemon.wait();
        Some(attached)
    }

    /// Cut the power at `moment` (from [`LoggedCard::moment`]; the processes writing to
    /// the card must be dead by now): the card keeps the writes recorded before it up to
    /// the last flush, and when `pick` is odd a random number of the writes after that
    /// flush. Then the box's boot check, a full check, and the card is mounted again.
    pub fn cut(&mut self, moment: u64, pick: u64) -> Cut {
        let attached = self.detach().expect("a mounted card");
        let faithful = self.faithful(&attached);
        let entries = read_record(&attached.log, moment).expect("read the record");
        let last_flush = entries
            .iter()
            .rposition(|e| e.flags & LOG_FLUSH != 0)
            .map_or(0, |i| i + 1);
        let writes_after = entries[last_flush..]
            .iter()
            .filter(|e| e.sectors > 0)
            .count();
        let keep = if pick.is_multiple_of(2) || last_flush == entries.len() {
            last_flush
        } else {
            last_flush + 1 + (pick / 2) as usize % (entries.len() - last_flush)
        };
        // BERTH_POWER_CUT_KEEP=1: the card before each cut and its record are kept
        // (before-N.raw, record-N.log), to replay a failure by hand.
        let keep_all = std::env::var_os("BERTH_POWER_CUT_KEEP").is_some();
        if keep_all {
            let before = self.dir.join(format!("before-{}.raw", self.attaches));
            run(Command::new("cp")
                .arg("--sparse=always")
                .arg(&self.base)
                .arg(&before))
            .expect("keep the card before the cut");
            eprintln!(
                "card: cut {}: {} entries before the moment {moment}, the last flush ends at entry {last_flush}, kept {keep}",
                self.attaches,
                entries.len()
            );
        }
        replay(&attached.log, &entries[..keep], &self.base).expect("replay the record");
        let kept_after_flush = entries[last_flush..keep]
            .iter()
            .filter(|e| e.sectors > 0)
            .count();
        let _ = std::fs::remove_file(&attached.overlay);
        let mut problems = Vec::new();
        if let Err(e) = faithful {
            problems.push(format!(
                "the record of the card's writes is not faithful: {e}"
            ));
        }
        let mut preen = self.filesystem.preen(&self.base);
        let preened = preen.output().unwrap_or_else(|e| panic!("{preen:?}: {e}"));
        let preen_status = preened.status.code().unwrap_or(-1);
        if !(0..4).contains(&preen_status) {
            problems.push(format!(
                "{preen:?} (the boot's check) exits {preen_status}: the box would stop at boot: {}",
                String::from_utf8_lossy(&preened.stdout)
            ));
        }
        if let Err(e) = run(&mut self.filesystem.full_check(&self.base)) {
            problems.push(format!("the full check finds damage: {e}"));
        }
        if let Err(e) = self.attach() {
            problems.push(e);
        }
        // The record of a cut is kept for a failure's inspection only.
        if problems.is_empty() && !keep_all {
            let _ = std::fs::remove_file(&attached.log);
        }
        Cut {
            recorded: entries.len(),
            flushes: entries.iter().filter(|e| e.flags & LOG_FLUSH != 0).count(),
            kept_after_flush,
            lost: writes_after - kept_after_flush,
            preen: preen_status,
            problems,
        }
    }
}

impl LoggedCard {
    /// The whole record replayed onto the card as it was at the attach gives what the
    /// card holds now: the record is what reached the disk, in an order that ends the
    /// same.
    fn faithful(&self, attached: &Attached) -> Result<(), String> {
        let all = read_record(&attached.log, u64::MAX)?;
        let replayed = self.dir.join("replayed.raw");
        run(Command::new("cp")
            .arg("--sparse=always")
            .arg(&self.base)
            .arg(&replayed))?;
        replay(&attached.log, &all, &replayed)?;
        let same = run(Command::new("qemu-img")
            .args(["compare", "-q", "-f", "qcow2", "-F", "raw"])
            .arg(&attached.overlay)
            .arg(&replayed));
        let _ = std::fs::remove_file(&replayed);
        same.map(|_| ())
            .map_err(|e| format!("replayed whole, it differs from the card: {e}"))
    }
}

impl Drop for LoggedCard {
    fn drop(&mut self) {
        self.detach();
    }
}

/// The complete entries of a record that end at or before `moment` (bytes).
fn read_record(log: &Path, moment: u64) -> Result<Vec<Entry>, String> {
    let mut file = std::fs::File::open(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut sector = [0u8; SECTOR as usize];
    let mut entries = Vec::new();
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    if len < SECTOR {
        return Ok(entries);
    }
    file.read_exact(&mut sector).map_err(|e| e.to_string())?;
    let word = |b: &[u8], i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8"));
    if word(&sector, 0) != LOG_MAGIC {
        return Err(format!("{}: not a write log", log.display()));
    }
    let size = u32::from_le_bytes(sector[24..28].try_into().expect("4")) as u64;
    if size != SECTOR {
        return Err(format!("{}: sectors of {size} bytes", log.display()));
    }
    let mut at = SECTOR;
    while at + SECTOR <= moment.min(len) {
        file.seek(SeekFrom::Start(at)).map_err(|e| e.to_string())?;
        file.read_exact(&mut sector).map_err(|e| e.to_string())?;
        let (disk_sector, sectors, flags) = (word(&sector, 0), word(&sector, 1), word(&sector, 2));
        if flags & !(LOG_FLUSH | LOG_FUA | LOG_DISCARD | LOG_MARK) != 0 {
            return Err(format!(
                "{}: entry at {at}: flags {flags:#x}",
                log.display()
            ));
        }
        let data = if flags & LOG_DISCARD != 0 { 0 } else { sectors };
        let end = at + SECTOR + data * SECTOR;
        if end > moment {
            break;
        }
        entries.push(Entry {
            data_at: at + SECTOR,
            sector: disk_sector,
            sectors: data,
            flags,
        });
        at = end;
    }
    Ok(entries)
}

/// Write `entries`' data onto `disk`, in the record's order (a discard keeps what was
/// there: a card may or may not have erased it).
fn replay(log: &Path, entries: &[Entry], disk: &Path) -> Result<(), String> {
    let source = std::fs::File::open(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut target = std::fs::OpenOptions::new()
        .write(true)
        .open(disk)
        .map_err(|e| format!("{}: {e}", disk.display()))?;
    let mut buffer = Vec::new();
    for entry in entries.iter().filter(|e| e.sectors > 0) {
        buffer.resize((entry.sectors * SECTOR) as usize, 0);
        source
            .read_exact_at(&mut buffer, entry.data_at)
            .map_err(|e| format!("read the record: {e}"))?;
        target
            .write_all_at(&buffer, entry.sector * SECTOR)
            .map_err(|e| format!("write the card: {e}"))?;
    }
    target.flush().map_err(|e| e.to_string())?;
    target.sync_all().map_err(|e| e.to_string())
}

//! The owner's request to take up the settings on the appliance's card again.
//!
//! On the appliance, `image/provision` writes the owner's settings (the box's name, a
//! Wi-Fi network, SSH keys for root) onto the card's FAT boot partition, and
//! `apply-setup` (`board/common/usr/lib/berth/apply-setup`, run by
//! `berth-setup.service` before berthd starts) applies them at the box's first start
//! only: any computer can write a FAT partition, so a minute alone with the card must
//! not be enough to add a root SSH key. To change them later, the owner asks for it in
//! the console (an admin device): berthd leaves [`REQUEST_FILE`] in its datadir, and the
//! next start applies what is on the card and takes the request away, whether or not it
//! found anything. The request is a file because the one who reads it runs as root
//! before berthd, and berthd (unprivileged) can write nothing else that root trusts.
//!
//! Elsewhere (berthd outside the appliance image) nothing reads the file: the console
//! says so.

use std::path::Path;

use crate::fsutil::{self, FsError};

/// The request's name in the datadir; `apply-setup` looks for
/// `/var/lib/berth/card-setup-request`.
pub const REQUEST_FILE: &str = "card-setup-request";

/// Whether a request waits for the next start.
pub fn requested(path: &Path) -> bool {
    path.exists()
}

/// Ask for the card's settings to be applied at the next start. What is written is for
/// whoever looks: when, and by which device.
pub fn request(path: &Path, by_device: &str) -> Result<(), FsError> {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let note = format!("asked for at {now} by device {by_device} (web console)\n");
    fsutil::write_atomically(path, note.as_bytes(), 0o600)
}

/// Take the request back before the next start.
pub fn cancel(path: &Path) -> Result<(), FsError> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(fsutil::io("cannot remove", path)(e)),
    }
    fsutil::sync_dir(path.parent().unwrap_or(Path::new(".")))
}

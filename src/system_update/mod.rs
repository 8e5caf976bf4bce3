//! System updates through the API, first part: the owner uploads a signed RAUC bundle
//! (the file `image/build` makes), berthd streams it into the datadir's `update/`
//! directory on the data partition (never held in memory; capped by
//! `[update] max_bundle_mib` and by the free space, the wallet's reserve kept), then has
//! RAUC check it as the box will install it: the signature against the box's keyring,
//! that it is for this board (`compatible`), and when it was built against the running
//! system (an older build is a downgrade, which only the owner's word installs:
//! `rauc-pre-install`). The install the owner then asks for is root's side's
//! (`install`).
//!
//! Why berthd runs `rauc info` itself: a verity bundle's manifest and signature are
//! read without mounting anything, so the unprivileged daemon can say what it holds
//! before the owner is asked to install it. A plain bundle (the `rpi5` image's) needs
//! `unsquashfs`, which the image lacks: RAUC then refuses to read it here, and the
//! owner is told so.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use axum::body::Bytes;
use futures_util::{Stream, StreamExt as _};
use serde::Serialize;
use tokio::io::AsyncWriteExt as _;

mod install;

pub use install::{
    InstallProgress, InstallState, OutcomeResult, REQUEST as INSTALL_REQUEST, UpdateOutcome,
    spawn_outcome_watch,
};

/// Where RAUC and the running system's facts are (`[update]`); the image's places by
/// default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateSettings {
    /// The `rauc` program.
    pub rauc: PathBuf,
    /// RAUC's `system.conf`: the board's `compatible`.
    pub system_conf: PathBuf,
    /// The certificates a bundle's signature must chain to.
    pub keyring: PathBuf,
    /// The running system's release file (`build=` its UTC build time).
    pub release: PathBuf,
    /// The largest bundle taken.
    pub max_bundle_bytes: u64,
    /// Where root's side of an install keeps its progress (`install`).
    pub status_dir: PathBuf,
}

/// How long `rauc info` may take (a verity bundle's check reads only its end).
const CHECK_TIMEOUT: Duration = Duration::from_secs(120);
/// How long an upload may pause between two chunks before it is abandoned.
const CHUNK_TIMEOUT: Duration = Duration::from_secs(60);
/// The checked bundle's file name in the update directory.
const BUNDLE: &str = "bundle.raucb";
/// The upload under way.
const PARTIAL: &str = "bundle.raucb.part";
/// RAUC's configuration for a check ([`checking_conf`]), there while one runs (checks
/// run one at a time, under the bundle's lock).
const CHECK_CONF: &str = "rauc-check.conf";

/// What an uploaded bundle holds, as RAUC read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct BundleInfo {
    /// The board it is for (`berth-<board>`): this box's.
    pub compatible: String,
    /// The bundle's version string.
    pub version: String,
    /// When its system was built (`YYYYMMDDTHHMMSSZ`, UTC), if the bundle says.
    pub build: Option<String>,
    pub size_bytes: u64,
    /// Built before the running system (or without a build time while the running
    /// system has one): installing it goes back to an older system, which needs the
    /// owner's confirmation.
    pub downgrade: bool,
}

/// Why a bundle was not taken.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    /// This machine takes no bundles (no RAUC keyring or configuration: not the image).
    #[error("system updates are not available here: {0}")]
    Unavailable(String),
    /// Another upload is under way.
    #[error("another bundle is being uploaded")]
    Busy,
    /// No bundle was uploaded to install.
    #[error("no update bundle is kept: upload one first")]
    NoBundle,
    /// An install was asked for and has not ended.
    #[error("a system update is being installed")]
    InstallUnderWay,
    /// The bundle is older than the running system and the owner did not confirm it.
    #[error("{0}")]
    NeedsConfirmation(String),
    #[error("the bundle is larger than the {max} bytes allowed ([update] max_bundle_mib)")]
    TooLarge { max: u64 },
    #[error("not enough free space for the bundle: {0}")]
    NoSpace(String),
    /// RAUC refused it: not a bundle, a signature this box does not trust, another board.
    #[error("{0}")]
    Rejected(String),
    /// The upload stopped before its end.
    #[error("the upload was interrupted: {0}")]
    Interrupted(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// The update directory and the bundle in it.
pub struct SystemUpdate {
    settings: UpdateSettings,
    dir: PathBuf,
    /// The free space an upload must leave on the data partition.
    keep_free: u64,
    /// The checked bundle, once known; `Some(None)`: known to be none. The lock also
    /// makes uploads one at a time.
    bundle: tokio::sync::Mutex<Option<Option<BundleInfo>>>,
}

impl SystemUpdate {
    /// Over the datadir's update directory (`Layout::system_update_dir`); an upload
    /// must leave `keep_free` bytes free there. An upload or a check left unfinished by
    /// a stop is removed.
    pub fn new(settings: UpdateSettings, dir: PathBuf, keep_free: u64) -> SystemUpdate {
        let _ = std::fs::remove_file(dir.join(PARTIAL));
        let _ = std::fs::remove_file(dir.join(CHECK_CONF));
        SystemUpdate {
            settings,
            dir,
            keep_free,
            bundle: tokio::sync::Mutex::new(None),
        }
    }

    /// Where the checked bundle is kept.
    pub fn bundle_path(&self) -> PathBuf {
        self.dir.join(BUNDLE)
    }

    pub fn settings(&self) -> &UpdateSettings {
        &self.settings
    }

    /// Why this machine takes no bundles; `None` when it does.
    pub fn unavailable(&self) -> Option<String> {
        for (what, path) in [
            ("RAUC's configuration", &self.settings.system_conf),
            ("the update keyring", &self.settings.keyring),
        ] {
            if !path.is_file() {
                return Some(format!("{what} ({}) is missing", path.display()));
            }
        }
        None
    }

    /// The running system's build time, from its release file.
    pub fn running_build(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.settings.release).ok()?;
        field(&text, "build").filter(|b| valid_build(b))
    }

    /// The bundle uploaded and checked, if any. One kept from before a restart is
    /// checked again (and removed if it no longer passes).
    pub async fn bundle(&self) -> Result<Option<BundleInfo>, UpdateError> {
        let mut known = self.bundle.lock().await;
        if let Some(info) = &*known {
            return Ok(info.clone());
        }
        let path = self.dir.join(BUNDLE);
        let info = match tokio::fs::metadata(&path).await {
            Ok(_) if self.unavailable().is_none() => match self.check(&path).await {
                Ok(info) => Some(info),
                Err(UpdateError::Rejected(reason)) => {
                    tracing::warn!(%reason, "the kept update bundle no longer passes its check: removed");
                    remove(&path).await?;
                    None
                }
                Err(e) => return Err(e),
            },
            _ => None,
        };
        *known = Some(info.clone());
        Ok(info)
    }

    /// Take a bundle from `body` (of `declared` bytes, if the request says), replacing
    /// the one kept: written to the data partition as it arrives, then checked; kept
    /// only if RAUC reads it, its signature is trusted and it is for this board.
    pub async fn receive<S, E>(
        &self,
        declared: Option<u64>,
        body: S,
    ) -> Result<BundleInfo, UpdateError>
    where
        S: Stream<Item = Result<Bytes, E>>,
        E: std::fmt::Display,
    {
        if let Some(reason) = self.unavailable() {
            return Err(UpdateError::Unavailable(reason));
        }
        let mut known = self.bundle.try_lock().map_err(|_| UpdateError::Busy)?;
        // The bundle being installed is not replaced underneath RAUC.
        if self.progress().is_some() {
            return Err(UpdateError::InstallUnderWay);
        }
        let max = self.settings.max_bundle_bytes;
        if declared.is_some_and(|n| n > max) {
            return Err(UpdateError::TooLarge { max });
        }
        crate::fsutil::ensure_private_dir(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        // The bundle kept so far makes room: it is replaced either way.
        let kept = self.dir.join(BUNDLE);
        remove(&kept).await?;
        *known = Some(None);
        self.check_space(declared.unwrap_or(0))?;

        // Removed however this ends: an error, or the request dropped mid-way (the
        // client gone, the daemon stopping).
        let partial = RemovedOnDrop(self.dir.join(PARTIAL));
        let size = self.write(&partial.0, body).await?;
        let info = self.check(&partial.0).await?;
        tokio::fs::rename(&partial.0, &kept)
            .await
            .with_context(|| format!("cannot rename {}", partial.0.display()))?;
        let info = BundleInfo {
            size_bytes: size,
            ..info
        };
        *known = Some(Some(info.clone()));
        Ok(info)
    }

    /// Remove the kept bundle (and a request to install it that the system has not
    /// taken yet); whether there was one.
    pub async fn discard(&self) -> Result<bool, UpdateError> {
        let mut known = self.bundle.try_lock().map_err(|_| UpdateError::Busy)?;
        if self
            .progress()
            .is_some_and(|p| p.state != InstallState::Requested)
        {
            return Err(UpdateError::InstallUnderWay);
        }
        self.cancel_request().await?;
        let path = self.dir.join(BUNDLE);
        let existed = tokio::fs::try_exists(&path).await.unwrap_or(false);
        remove(&path).await?;
        *known = Some(None);
        Ok(existed)
    }

    fn check_space(&self, needed: u64) -> Result<(), UpdateError> {
        let (free, _) = crate::fsutil::space(&self.dir)
            .with_context(|| format!("cannot read the free space of {}", self.dir.display()))?;
        if free < needed.saturating_add(self.keep_free) {
            return Err(UpdateError::NoSpace(format!(
                "{} MiB free, the bundle and the wallet's reserve need {} MiB",
                free >> 20,
                needed.saturating_add(self.keep_free).div_ceil(1 << 20)
            )));
        }
        Ok(())
    }

    /// Write the body to `path` as it arrives; its size.
    async fn write<S, E>(&self, path: &Path, body: S) -> Result<u64, UpdateError>
    where
        S: Stream<Item = Result<Bytes, E>>,
        E: std::fmt::Display,
    {
        let max = self.settings.max_bundle_bytes;
        let mut file = tokio::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .await
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut body = std::pin::pin!(body);
        let mut size = 0u64;
        let mut since_space_check = 0u64;
        loop {
            let chunk = match tokio::time::timeout(CHUNK_TIMEOUT, body.next()).await {
                Err(_) => {
                    return Err(UpdateError::Interrupted(format!(
                        "nothing arrived for {} s",
                        CHUNK_TIMEOUT.as_secs()
                    )));
                }
                Ok(None) => break,
                Ok(Some(Err(e))) => return Err(UpdateError::Interrupted(e.to_string())),
                Ok(Some(Ok(chunk))) => chunk,
            };
            size += chunk.len() as u64;
            if size > max {
                return Err(UpdateError::TooLarge { max });
            }
            // A body without a length is checked against the free space as it grows.
            since_space_check += chunk.len() as u64;
            if since_space_check >= 16 << 20 {
                since_space_check = 0;
                self.check_space(0)?;
            }
            file.write_all(&chunk)
                .await
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        // Durable before it is offered for install: RAUC reads it from the card.
        file.sync_all()
            .await
            .with_context(|| format!("cannot sync {}", path.display()))?;
        Ok(size)
    }

    /// What RAUC reads in the bundle at `path`, or why it refuses it. The caller holds
    /// the bundle's lock.
    async fn check(&self, path: &Path) -> Result<BundleInfo, UpdateError> {
        let s = &self.settings;
        let conf = tokio::fs::read_to_string(&s.system_conf)
            .await
            .with_context(|| format!("cannot read {}", s.system_conf.display()))?;
        let check_conf = RemovedOnDrop(self.dir.join(CHECK_CONF));
        tokio::fs::write(&check_conf.0, checking_conf(&conf))
            .await
            .with_context(|| format!("cannot write {}", check_conf.0.display()))?;
        let mut command = tokio::process::Command::new(&s.rauc);
        command
            .arg(format!("--conf={}", check_conf.0.display()))
            .arg(format!("--keyring={}", s.keyring.display()))
            .args(["info", "--output-format=json"])
            .arg(path)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let output = tokio::time::timeout(CHECK_TIMEOUT, command.output())
            .await
            .map_err(|_| {
                UpdateError::Rejected(format!(
                    "RAUC did not finish checking the bundle within {} s",
                    CHECK_TIMEOUT.as_secs()
                ))
            })?
            .with_context(|| format!("cannot run {}", s.rauc.display()))?;
        if !output.status.success() {
            return Err(UpdateError::Rejected(refusal(&String::from_utf8_lossy(
                &output.stderr,
            ))));
        }
        let info: RaucInfo = serde_json::from_slice(&output.stdout)
            .context("RAUC's report on the bundle is not the JSON expected")?;
        let ours = field_in(&conf, "[system]", "compatible").unwrap_or_default();
        if info.compatible != ours {
            return Err(UpdateError::Rejected(format!(
                "the bundle is for {}, this box is {ours}",
                info.compatible
            )));
        }
        let size = tokio::fs::metadata(path)
            .await
            .map(|m| m.len())
            .unwrap_or(0);
        let build = info.build.filter(|b| !b.is_empty());
        let downgrade = older(build.as_deref(), self.running_build().as_deref());
        Ok(BundleInfo {
            compatible: info.compatible,
            version: info.version.unwrap_or_default(),
            build,
            size_bytes: size,
            downgrade,
        })
    }
}

/// A file of berthd's removed when dropped: the upload under way (after the rename
/// into place it is gone already, and the removal finds nothing), a check's
/// configuration.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The part of `rauc info --output-format=json` read here.
#[derive(serde::Deserialize)]
struct RaucInfo {
    compatible: String,
    version: Option<String>,
    build: Option<String>,
}

/// RAUC's reason, from its error output: the last line that says something, without
/// its log prefixes (paths of this box are not secrets, but the text is for the owner).
fn refusal(stderr: &str) -> String {
    let line = stderr
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or("RAUC refused the bundle");
    let line = line.rsplit_once("ERROR: ").map_or(line, |(_, r)| r);
    let mut reason: String = line.chars().take(300).collect();
    if reason.is_empty() {
        reason = "RAUC refused the bundle".into();
    }
    format!("not a bundle this box takes: {reason}")
}

async fn remove(path: &Path) -> Result<(), UpdateError> {
    match tokio::fs::remove_file(path).await {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow::Error::new(e)
            .context(format!("cannot remove {}", path.display()))
            .into()),
    }
}

/// `KEY=value` in an INI-like file's top or `[update]` section (a release file, a
/// manifest), as `rauc-pre-install` reads it.
fn field(text: &str, key: &str) -> Option<String> {
    field_in(text, "", key).or_else(|| field_in(text, "[update]", key))
}

/// RAUC's configuration for berthd's check of a bundle: the box's, without
/// `data-directory` (`[system]`). RAUC creates that directory as it starts, and on the
/// box it is root's (RAUC's record of installs, on the root-only partition 1): berthd,
/// unprivileged, was refused there ("Failed to create data directory", found by
/// image/boot-test). `rauc info` reads nothing from it.
fn checking_conf(conf: &str) -> String {
    key_file_lines(conf)
        .filter(|(section, _, entry)| {
            !(*section == "[system]" && entry.is_some_and(|(key, _)| key == "data-directory"))
        })
        .map(|(_, line, _)| format!("{line}\n"))
        .collect()
}

/// `KEY=value` in `section` (`""`: before any section).
fn field_in(text: &str, section: &str, key: &str) -> Option<String> {
    key_file_lines(text).find_map(|(current, _, entry)| match entry {
        Some((name, value)) if current == section && name == key => Some(value.to_owned()),
        _ => None,
    })
}

/// The lines of an INI-like file (RAUC's key files, a release file, a manifest), each
/// with the section it is in (`""`: before any) and, for a `KEY=value` line, its key
/// and value, trimmed (RAUC's key files allow spaces around the `=`).
fn key_file_lines(text: &str) -> impl Iterator<Item = (&str, &str, Option<(&str, &str)>)> {
    let mut section = "";
    text.lines().map(move |line| {
        let bare = line.trim_end_matches('\r');
        if bare.starts_with('[') {
            section = bare.trim();
            return (section, line, None);
        }
        let entry = bare.split_once('=').map(|(k, v)| (k.trim(), v.trim()));
        (section, line, entry)
    })
}

/// A build time as image/build writes it: `YYYYMMDDTHHMMSSZ`.
fn valid_build(build: &str) -> bool {
    let b = build.as_bytes();
    b.len() == 16
        && b[8] == b'T'
        && b[15] == b'Z'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit)
}

/// Whether a bundle built at `bundle` holds an older system than one built at
/// `running`, by `rauc-pre-install`'s rule: nothing to compare with is not older; a
/// bundle without a valid build time is.
fn older(bundle: Option<&str>, running: Option<&str>) -> bool {
    let Some(running) = running.filter(|r| valid_build(r)) else {
        return false;
    };
    match bundle.filter(|b| valid_build(b)) {
        // Fixed-width UTC times order as strings.
        Some(bundle) => bundle < running,
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_follows_the_pre_install_handlers_rule() {
        let running = Some("20261128T120000Z");
        assert!(older(Some("20261127T120000Z"), running));
        assert!(!older(Some("20261128T120000Z"), running), "a reinstall");
        assert!(!older(Some("20261129T000000Z"), running));
        assert!(older(None, running), "no build time is older");
        assert!(older(Some("yesterday"), running));
        assert!(!older(Some("20261127T120000Z"), None), "nothing to compare");
    }

    #[test]
    fn the_check_leaves_raucs_data_directory_out_and_keeps_the_rest() {
        let conf = "[system]\ncompatible=berth-rpi4\ndata-directory = /boot/firmware/rauc\n\
                    bundle-formats=verity\n\n[keyring]\npath=/etc/rauc/keyring.pem\n\
                    [other]\ndata-directory=kept\n";
        let checked = checking_conf(conf);
        assert!(!checked.contains("/boot/firmware/rauc"), "{checked}");
        assert_eq!(
            checked,
            "[system]\ncompatible=berth-rpi4\nbundle-formats=verity\n\n[keyring]\n\
             path=/etc/rauc/keyring.pem\n[other]\ndata-directory=kept\n"
        );
    }

    #[test]
    fn fields_are_read_by_section() {
        let conf = "[system]\ncompatible=berth-rpi4\nbootloader=custom\n\n[keyring]\npath=/etc/rauc/keyring.pem\n";
        assert_eq!(
            field_in(conf, "[system]", "compatible").as_deref(),
            Some("berth-rpi4")
        );
        assert_eq!(field_in(conf, "[keyring]", "compatible"), None);
        assert_eq!(
            field("build=20261128T120000Z\n", "build").as_deref(),
            Some("20261128T120000Z")
        );
        assert_eq!(
            field("[update]\nbuild=20261128T120000Z\n", "build").as_deref(),
            Some("20261128T120000Z")
        );
        assert_eq!(field("buildx=1\n", "build"), None);
        assert_eq!(
            field_in(
                "[system]\ncompatible = berth-rpi5\n",
                "[system]",
                "compatible"
            )
            .as_deref(),
            Some("berth-rpi5")
        );
    }

    #[test]
    fn rauc_refusals_are_cut_to_their_reason() {
        let stderr = "rauc-Message: 10:00:00.000: Reading bundle: /x\nrauc-Message: ERROR: signature verification failed: Verify error:self-signed certificate\n";
        assert_eq!(
            refusal(stderr),
            "not a bundle this box takes: signature verification failed: Verify error:self-signed certificate"
        );
        assert_eq!(
            refusal(""),
            "not a bundle this box takes: RAUC refused the bundle"
        );
    }
}

//! Claiming the box: how its owner gets the first admin device without a terminal.
//!
//! A claim code reaches the owner out of band: written onto the card before first boot
//! (a provisioned code: `[claim] code_file`, which berthd takes up at start, keeping
//! only its hash and removing the file) or made on the box by `berthd claim reset`. The
//! owner exchanges it, once, for a device token with every scope (`POST
//! /api/v1/claim`); the claim is then closed for good, until the next reset.
//!
//! A provisioned code claims an *unclaimed* box only: no wallet and no paired device.
//! Once the box has either, that code is void (someone got in another way, with the
//! admin token on the box). A reset code is made by someone on the box, who may do
//! anything already, so it works whatever the box holds (a lost phone, a new owner).
//!
//! What is kept: `<datadir>/claim`, one line naming how it was opened and the SHA-256
//! of the code (128 random bits or more, so a fast hash is enough: `access::secret`).

use std::path::{Path, PathBuf};

use crate::access::secret::{Secret, hash, random_secret};
use crate::fsutil::FsError;

/// How the open claim came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A code written onto the card before first boot: for an unclaimed box only.
    Provisioned,
    /// `berthd claim reset` on the box.
    Reset,
}

impl Origin {
    fn word(self) -> &'static str {
        match self {
            Origin::Provisioned => "provisioned",
            Origin::Reset => "reset",
        }
    }
}

/// Why the claim file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error(transparent)]
    File(#[from] FsError),
    #[error("{0}")]
    Invalid(String),
}

/// What an attempt to claim meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redeem {
    /// No claim is open (never, or used, or void): the route does not exist.
    Closed,
    /// A claim is open but this is not its code.
    WrongCode,
    /// The code: the caller may now have the device; [`Claim::close`] after.
    Accepted,
}

/// The shortest and longest claim codes taken up from a card.
const CODE_LEN: std::ops::RangeInclusive<usize> = 16..=128;

/// The box's claim, kept in one file of the datadir. Cheap: every call reads the file,
/// so `berthd claim reset` on the box reaches a running daemon without telling it.
#[derive(Debug)]
pub struct Claim {
    file: PathBuf,
    /// One attempt at a time: checking, adding the device and closing are one step.
    attempts: tokio::sync::Mutex<()>,
}

impl Claim {
    pub fn new(file: PathBuf) -> Claim {
        Claim {
            file,
            attempts: tokio::sync::Mutex::new(()),
        }
    }

    /// The open claim: how it came about and the code's hash.
    pub fn read(&self) -> Result<Option<(Origin, [u8; 32])>, ClaimError> {
        let text = match std::fs::read_to_string(&self.file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(crate::fsutil::io("cannot read", &self.file)(e).into()),
        };
        let invalid = || ClaimError::Invalid(format!("{} is not a claim", self.file.display()));
        let (word, hex) = text.trim().split_once(' ').ok_or_else(invalid)?;
        let origin = match word {
            "provisioned" => Origin::Provisioned,
            "reset" => Origin::Reset,
            _ => return Err(invalid()),
        };
        let mut digest = [0u8; 32];
        if hex.len() != 64 {
            return Err(invalid());
        }
        for (i, byte) in digest.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| invalid())?;
        }
        Ok(Some((origin, digest)))
    }

    fn write(&self, origin: Origin, code: &str) -> Result<(), ClaimError> {
        let hex: String = hash(code).iter().map(|b| format!("{b:02x}")).collect();
        let line = format!("{} {hex}\n", origin.word());
        crate::fsutil::write_atomically(&self.file, line.as_bytes(), 0o600)?;
        Ok(())
    }

    /// Open a claim with a new code (`berthd claim reset`); any open one is void.
    pub fn reset(&self) -> Result<Secret, ClaimError> {
        let code = random_secret(None)
            .ok_or_else(|| ClaimError::Invalid("no randomness is available".into()))?;
        self.write(Origin::Reset, code.expose())?;
        Ok(code)
    }

    /// Take up a code written onto the card: keep its hash, remove the file. `Ok(false)`
    /// when there is none. The code is never logged.
    pub fn take_up(&self, code_file: &Path) -> Result<bool, ClaimError> {
        let text = match std::fs::read_to_string(code_file) {
            Ok(text) => zeroize::Zeroizing::new(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(crate::fsutil::io("cannot read", code_file)(e).into()),
        };
        let code = text.trim();
        let printable = code.bytes().all(|b| b.is_ascii_graphic());
        if !CODE_LEN.contains(&code.len()) || !printable {
            return Err(ClaimError::Invalid(format!(
                "{} does not hold a claim code ({} to {} printable characters)",
                code_file.display(),
                CODE_LEN.start(),
                CODE_LEN.end()
            )));
        }
        self.write(Origin::Provisioned, code)?;
        std::fs::remove_file(code_file).map_err(crate::fsutil::io("cannot remove", code_file))?;
        Ok(true)
    }

    /// Serialise attempts: hold the guard while checking, adding the device and closing.
    pub async fn attempt(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.attempts.lock().await
    }

    /// Check `code` against the open claim. `unclaimed`: the box has no wallet and no
    /// paired device; without that a provisioned claim is void (and closed here).
    pub fn check(&self, code: &str, unclaimed: bool) -> Result<Redeem, ClaimError> {
        let Some((origin, digest)) = self.read()? else {
            return Ok(Redeem::Closed);
        };
        if origin == Origin::Provisioned && !unclaimed {
            tracing::warn!(
                "the box has a wallet or a paired device: the provisioned claim code is void"
            );
            self.close()?;
            return Ok(Redeem::Closed);
        }
        use subtle::ConstantTimeEq as _;
        if bool::from(hash(code).ct_eq(&digest)) {
            Ok(Redeem::Accepted)
        } else {
            Ok(Redeem::WrongCode)
        }
    }

    /// Close the claim for good (until the next reset).
    pub fn close(&self) -> Result<(), ClaimError> {
        match std::fs::remove_file(&self.file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(crate::fsutil::io("cannot remove", &self.file)(e).into()),
        }
        if let Some(dir) = self.file.parent() {
            crate::fsutil::sync_dir(dir)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provisioned_code_is_taken_up_as_a_hash_and_claims_only_an_unclaimed_box() {
        let dir = tempfile::tempdir().expect("tempdir");
        let claim = Claim::new(dir.path().join("claim"));
        let card = dir.path().join("berth-claim-code");
        assert!(!claim.take_up(&card).expect("nothing to take up"));
        assert_eq!(
            claim.check("anything", true).expect("check"),
            Redeem::Closed
        );

        let code = "Zq3-label-code_0123456789";
        std::fs::write(&card, format!("{code}\n")).expect("card");
        assert!(claim.take_up(&card).expect("take up"));
        assert!(!card.exists(), "the code is removed from the card");
        let kept = std::fs::read_to_string(dir.path().join("claim")).expect("claim");
        assert!(
            kept.starts_with("provisioned ") && !kept.contains(code),
            "{kept}"
        );
        assert_eq!(
            claim.check("wrong", true).expect("check"),
            Redeem::WrongCode
        );
        assert_eq!(claim.check(code, true).expect("check"), Redeem::Accepted);
        // A box that has a wallet or a device: the provisioned code is void, for good.
        assert_eq!(claim.check(code, false).expect("check"), Redeem::Closed);
        assert_eq!(claim.check(code, true).expect("check"), Redeem::Closed);
    }

    #[test]
    fn a_reset_code_works_on_a_claimed_box_and_replaces_the_open_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let claim = Claim::new(dir.path().join("claim"));
        let first = claim.reset().expect("reset");
        let second = claim.reset().expect("reset");
        assert_eq!(
            claim.check(first.expose(), false).expect("check"),
            Redeem::WrongCode
        );
        assert_eq!(
            claim.check(second.expose(), false).expect("check"),
            Redeem::Accepted
        );
        claim.close().expect("close");
        assert_eq!(
            claim.check(second.expose(), false).expect("check"),
            Redeem::Closed
        );
    }

    #[test]
    fn a_card_file_that_is_no_code_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let claim = Claim::new(dir.path().join("claim"));
        let card = dir.path().join("code");
        for bad in ["short", "has a space in it somewhere", &"x".repeat(129)] {
            std::fs::write(&card, bad).expect("card");
            assert!(claim.take_up(&card).is_err(), "{bad:?}");
            assert!(card.exists());
            assert_eq!(claim.read().expect("read"), None);
        }
        std::fs::write(dir.path().join("claim"), "reset nothex").expect("claim");
        assert!(claim.read().is_err());
    }
}

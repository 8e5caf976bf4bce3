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
//! What is kept: `<datadir>/claim`, one line naming how it was opened, the SHA-256 of
//! the code, and for a reset when it was made (a reset code expires after `[claim]
//! reset_code_hours`, 24 by default: it was shown on a terminal, perhaps to a
//! photograph). A fast hash is enough: berthd's own codes have 128 random bits, and a
//! provisioned code must estimate at least [`MIN_PROVISIONED_BITS`]
//! ([`estimated_bits`]), so a weak code on a vendor's label is refused at start rather
//! than guessed from the LAN while the box waits for its owner.
//!
//! Nothing here serialises attempts: a flood of wrong codes holds no lock the owner's
//! attempt waits for. The one step that must happen once is taking the claim:
//! [`Claim::take`] moves the claim file aside atomically, so of two attempts with the
//! right code exactly one gets the device.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

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

/// The least estimated strength of a provisioned code, in bits ([`estimated_bits`]).
pub const MIN_PROVISIONED_BITS: f64 = 80.0;

/// How long a reset code works when `berth.toml` does not say (`[claim]
/// reset_code_hours`).
pub const DEFAULT_RESET_TTL: Duration = Duration::from_secs(24 * 3600);

/// An estimate of a code's strength, in bits, for codes written by people or vendors
/// (berthd's own have 128 random bits): its length times the bits of the smallest
/// alphabet it fits (hex digits 16; otherwise the classes it uses: digits 10, lowercase
/// 26, uppercase 26, other printable characters 32), the length counted at most twice
/// the number of distinct characters, so `aaaa…` or `abab…` counts for little.
pub fn estimated_bits(code: &str) -> f64 {
    let bytes = code.as_bytes();
    let hex = bytes.iter().all(u8::is_ascii_hexdigit)
        && !(bytes.iter().any(u8::is_ascii_lowercase) && bytes.iter().any(u8::is_ascii_uppercase));
    let alphabet = if hex {
        16
    } else {
        let has = |f: fn(&u8) -> bool| bytes.iter().any(f);
        [
            (has(u8::is_ascii_digit), 10),
            (has(u8::is_ascii_lowercase), 26),
            (has(u8::is_ascii_uppercase), 26),
            (has(|b| b.is_ascii_punctuation()), 32),
        ]
        .iter()
        .filter(|(present, _)| *present)
        .map(|(_, n)| n)
        .sum()
    };
    let mut distinct: Vec<u8> = bytes.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let counted = bytes.len().min(2 * distinct.len());
    counted as f64 * f64::from(alphabet).max(1.0).log2()
}

/// The open claim: how it came about, the code's hash, and when a reset was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    pub origin: Origin,
    pub digest: [u8; 32],
    /// When `berthd claim reset` made it (`None` for a provisioned code).
    pub made_at: Option<SystemTime>,
}

/// The box's claim, kept in one file of the datadir. Cheap: every call reads the file,
/// so `berthd claim reset` on the box reaches a running daemon without telling it.
#[derive(Debug)]
pub struct Claim {
    file: PathBuf,
    /// How long a reset code works.
    reset_ttl: Duration,
}

impl Claim {
    pub fn new(file: PathBuf, reset_ttl: Duration) -> Claim {
        Claim { file, reset_ttl }
    }

    /// The open claim, if any. A reset older than its time to live is not open: its
    /// file is removed.
    pub fn read(&self) -> Result<Option<Open>, ClaimError> {
        let Some(open) = parse(&self.file)? else {
            return Ok(None);
        };
        let expired = open.made_at.is_some_and(|made| {
            SystemTime::now()
                .duration_since(made)
                .is_ok_and(|age| age > self.reset_ttl)
        });
        if expired {
            tracing::info!("the claim code from `berthd claim reset` expired; closing the claim");
            self.close()?;
            return Ok(None);
        }
        Ok(Some(open))
    }

    fn write(&self, origin: Origin, code: &str) -> Result<(), ClaimError> {
        let hex: String = hash(code).iter().map(|b| format!("{b:02x}")).collect();
        let line = match origin {
            Origin::Provisioned => format!("{} {hex}\n", origin.word()),
            Origin::Reset => {
                let now = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                format!("{} {hex} {now}\n", origin.word())
            }
        };
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
        let bits = estimated_bits(code);
        if bits < MIN_PROVISIONED_BITS {
            return Err(ClaimError::Invalid(format!(
                "the claim code in {} is too weak to leave on a LAN: about {bits:.0} bits, at \
                 least {MIN_PROVISIONED_BITS:.0} are needed (e.g. 22 random letters and \
                 digits, or 20 random hex digits); it was not taken up",
                code_file.display()
            )));
        }
        self.write(Origin::Provisioned, code)?;
        std::fs::remove_file(code_file).map_err(crate::fsutil::io("cannot remove", code_file))?;
        Ok(true)
    }

    /// Check `code` against the open claim. `unclaimed`: the box has no wallet and no
    /// paired device; without that a provisioned claim is void (and closed here).
    pub fn check(&self, code: &str, unclaimed: bool) -> Result<Redeem, ClaimError> {
        let Some(Open { origin, digest, .. }) = self.read()? else {
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

    /// Take the claim whose code `code` is: move its file aside, atomically, so that no
    /// other attempt can take it too. `None` when it is gone or another code's (taken
    /// by another attempt, or replaced by a reset, since `code` was checked).
    pub fn take(&self, code: &str) -> Result<Option<Taken>, ClaimError> {
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix)
            .map_err(|e| ClaimError::Invalid(format!("no randomness: {e}")))?;
        let aside = self.file.with_extension(format!(
            "taken-{}",
            suffix
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ));
        match std::fs::rename(&self.file, &aside) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(crate::fsutil::io("cannot take", &self.file)(e).into()),
        }
        let taken = Taken {
            file: self.file.clone(),
            aside,
        };
        use subtle::ConstantTimeEq as _;
        match parse(&taken.aside)? {
            Some(open) if bool::from(hash(code).ct_eq(&open.digest)) => Ok(Some(taken)),
            _ => {
                taken.put_back()?;
                Ok(None)
            }
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

/// A claim moved aside by [`Claim::take`]: used up once the device exists, put back if
/// it could not be added.
#[derive(Debug)]
pub struct Taken {
    file: PathBuf,
    aside: PathBuf,
}

impl Taken {
    /// The device exists: the claim is closed for good.
    pub fn used(self) -> Result<(), ClaimError> {
        std::fs::remove_file(&self.aside)
            .map_err(crate::fsutil::io("cannot remove", &self.aside))?;
        if let Some(dir) = self.file.parent() {
            crate::fsutil::sync_dir(dir)?;
        }
        Ok(())
    }

    /// The device could not be added: the claim is open again (unless a reset made a
    /// new one meanwhile, which wins).
    pub fn put_back(self) -> Result<(), ClaimError> {
        if self.file.exists() {
            return self.used();
        }
        std::fs::rename(&self.aside, &self.file)
            .map_err(|e| crate::fsutil::io("cannot put back", &self.file)(e).into())
    }
}

/// Read a claim file: `<origin> <sha256 hex> [<made at, unix seconds>]`.
fn parse(file: &Path) -> Result<Option<Open>, ClaimError> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(crate::fsutil::io("cannot read", file)(e).into()),
    };
    let invalid = || ClaimError::Invalid(format!("{} is not a claim", file.display()));
    let mut words = text.split_whitespace();
    let (Some(word), Some(hex)) = (words.next(), words.next()) else {
        return Err(invalid());
    };
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
    let made_at = match (origin, words.next()) {
        (Origin::Provisioned, _) => None,
        (Origin::Reset, Some(secs)) => Some(
            SystemTime::UNIX_EPOCH
                + Duration::from_secs(secs.parse::<u64>().map_err(|_| invalid())?),
        ),
        // Written before resets expired: from when the file was.
        (Origin::Reset, None) => Some(
            std::fs::metadata(file)
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH),
        ),
    };
    Ok(Some(Open {
        origin,
        digest,
        made_at,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provisioned_code_is_taken_up_as_a_hash_and_claims_only_an_unclaimed_box() {
        let dir = tempfile::tempdir().expect("tempdir");
        let claim = Claim::new(dir.path().join("claim"), DEFAULT_RESET_TTL);
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
        let claim = Claim::new(dir.path().join("claim"), DEFAULT_RESET_TTL);
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
        let claim = Claim::new(dir.path().join("claim"), DEFAULT_RESET_TTL);
        let card = dir.path().join("code");
        let weak = [
            "aaaaaaaaaaaaaaaaaaaaaaaa",
            "abababababababababababab",
            "0123456789012345",
            "deadbeefdeadbeef",
        ];
        for bad in ["short", "has a space in it somewhere", &"x".repeat(129)]
            .into_iter()
            .chain(weak)
        {
            std::fs::write(&card, bad).expect("card");
            assert!(claim.take_up(&card).is_err(), "{bad:?}");
            assert!(card.exists());
            assert_eq!(claim.read().expect("read"), None);
        }
        std::fs::write(dir.path().join("claim"), "reset nothex").expect("claim");
        assert!(claim.read().is_err());
    }

    #[test]
    fn the_strength_estimate_counts_the_alphabet_and_distinct_characters() {
        // berthd's own codes: 22 base64url characters, 128 random bits.
        assert!(estimated_bits("Xq3_9fK-2bLm8PzQ4rT7vW") > 120.0);
        // 20 hex digits: 80 bits.
        assert!((estimated_bits("9f2c4a7e1b3d5f6a8c0e") - 80.0).abs() < 0.01);
        assert!(estimated_bits("9f2c4a7e1b3d5f6a8c0") < MIN_PROVISIONED_BITS);
        assert!(estimated_bits("label-code_0123456789-XYZ") > MIN_PROVISIONED_BITS);
        assert!(estimated_bits("aaaaaaaaaaaaaaaaaaaaaaaa") < 10.0);
    }

    #[test]
    fn a_reset_code_expires() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("claim");
        let claim = Claim::new(file.clone(), Duration::from_secs(3600));
        let code = claim.reset().expect("reset");
        assert_eq!(
            claim.check(code.expose(), false).expect("check"),
            Redeem::Accepted
        );
        // Made 2 hours ago: expired, and the file is gone.
        let text = std::fs::read_to_string(&file).expect("claim");
        let made: u64 = text
            .split_whitespace()
            .nth(2)
            .expect("made at")
            .parse()
            .expect("seconds");
        let line = text.replace(&made.to_string(), &(made - 7200).to_string());
        std::fs::write(&file, line).expect("claim");
        assert_eq!(
            claim.check(code.expose(), false).expect("check"),
            Redeem::Closed
        );
        assert!(!file.exists());
    }

    #[test]
    fn a_claim_is_taken_once_and_put_back_when_no_device_came_of_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let claim = Claim::new(dir.path().join("claim"), DEFAULT_RESET_TTL);
        let code = claim.reset().expect("reset");
        assert!(claim.take("another code").expect("take").is_none());
        assert!(
            claim.read().expect("read").is_some(),
            "a wrong code took nothing"
        );
        let taken = claim.take(code.expose()).expect("take").expect("taken");
        assert!(
            claim.take(code.expose()).expect("take").is_none(),
            "only once"
        );
        assert_eq!(claim.read().expect("read"), None);
        taken.put_back().expect("put back");
        let taken = claim
            .take(code.expose())
            .expect("take")
            .expect("open again");
        taken.used().expect("used");
        assert_eq!(claim.read().expect("read"), None);
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").collect();
        assert!(left.is_empty(), "nothing left aside: {left:?}");
    }
}

//! The sealed-seed envelope: a small versioned binary file (`seed.sealed`).
//!
//! Version 1, integers big-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `BRTHSEED` |
//! | 1 | version (1) |
//! | 1 | key sources, a bit set ([`Sources`]) |
//! | 1 | binding length *n* (at most [`MAX_BINDING`]) |
//! | *n* | binding id: what the key sources were bound to (the secure element's serial), else empty |
//! | 1 | KDF: 0 none, 1 Argon2id (version 0x13) |
//! | 4, 4, 4 | Argon2id memory (KiB), iterations, parallelism (zeros without a passphrase) |
//! | 16 | salt |
//! | 24 | nonce |
//! | 2 | ciphertext length *L* (at most [`MAX_CIPHERTEXT`]) |
//! | *L* | XChaCha20-Poly1305 ciphertext of the mnemonic phrase (UTF-8), tag included |
//!
//! Everything before the ciphertext is the AEAD's associated data: a changed header
//! byte (a weaker KDF, another binding, other sources) fails authentication like a
//! changed ciphertext byte does. Parsing rejects unknown versions, sources and KDFs
//! before any key is derived.

use super::KeyError;

pub const MAGIC: &[u8; 8] = b"BRTHSEED";
pub const VERSION: u8 = 1;
/// Longer than any binding id we write (a 9-byte chip serial), short enough to bound.
pub const MAX_BINDING: usize = 64;
/// A 24-word phrase is at most 24 × 8 letters + 23 spaces; plus the 16-byte tag.
pub const MAX_CIPHERTEXT: usize = 512;
pub const SALT_LEN: usize = 16;
pub const NONCE_LEN: usize = 24;

/// Which key sources an envelope's key comes from. Several are combined (HKDF over
/// their outputs, in bit order), so every one of them is needed to open it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sources(u8);

impl Sources {
    pub const PASSPHRASE: Sources = Sources(0b001);
    pub const CREDENTIAL: Sources = Sources(0b010);
    pub const SECURE_ELEMENT: Sources = Sources(0b100);
    const ALL: u8 = 0b111;

    pub fn from_bits(bits: u8) -> Result<Sources, KeyError> {
        if bits == 0 || bits & !Self::ALL != 0 {
            return Err(KeyError::Malformed(format!(
                "unknown key sources {bits:#04x}"
            )));
        }
        Ok(Sources(bits))
    }

    pub fn bits(self) -> u8 {
        self.0
    }

    pub fn contains(self, other: Sources) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn union(self, other: Sources) -> Sources {
        Sources(self.0 | other.0)
    }

    /// The names used in `berth.toml` and `berthd seed status`, in bit order.
    pub fn names(self) -> Vec<&'static str> {
        [
            (Self::PASSPHRASE, "passphrase"),
            (Self::CREDENTIAL, "credential"),
            (Self::SECURE_ELEMENT, "secure-element"),
        ]
        .into_iter()
        .filter(|(kind, _)| self.contains(*kind))
        .map(|(_, name)| name)
        .collect()
    }
}

/// Argon2id's cost parameters, stored in the envelope so that a later change of the
/// defaults never locks out an existing seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KdfParams {
    pub memory_kib: u32,
    pub iterations: u32,
    pub parallelism: u32,
}

impl KdfParams {
    /// The field's value without a KDF.
    pub const NONE: KdfParams = KdfParams {
        memory_kib: 0,
        iterations: 0,
        parallelism: 0,
    };

    /// The most memory an envelope may ask for: a modified header must not be able to
    /// make unlocking exhaust the appliance's RAM or run for hours.
    pub const MAX_MEMORY_KIB: u32 = 1024 * 1024;
    pub const MAX_ITERATIONS: u32 = 64;
    pub const MAX_PARALLELISM: u32 = 64;

    /// Argon2id's own rules (8 KiB per lane at least) and our ceilings.
    pub fn within_bounds(&self) -> bool {
        (1..=Self::MAX_PARALLELISM).contains(&self.parallelism)
            && (1..=Self::MAX_ITERATIONS).contains(&self.iterations)
            && (8 * self.parallelism..=Self::MAX_MEMORY_KIB).contains(&self.memory_kib)
    }
}

/// The KDF field: none (no passphrase among the sources) or Argon2id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kdf {
    None,
    Argon2id(KdfParams),
}

/// A parsed envelope. Holds no secret (the ciphertext is what is stored on disk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub version: u8,
    pub sources: Sources,
    pub binding: Vec<u8>,
    pub kdf: Kdf,
    pub salt: [u8; SALT_LEN],
    pub nonce: [u8; NONCE_LEN],
    pub ciphertext: Vec<u8>,
}

impl Envelope {
    /// The bytes the AEAD authenticates: everything before the ciphertext.
    pub fn header(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(80 + self.binding.len());
        out.extend_from_slice(MAGIC);
        out.push(self.version);
        out.push(self.sources.bits());
        // Bounded by `MAX_BINDING` (checked when built and when parsed).
        out.push(self.binding.len() as u8);
        out.extend_from_slice(&self.binding);
        let (kind, params) = match self.kdf {
            Kdf::None => (0, KdfParams::NONE),
            Kdf::Argon2id(params) => (1, params),
        };
        out.push(kind);
        out.extend_from_slice(&params.memory_kib.to_be_bytes());
        out.extend_from_slice(&params.iterations.to_be_bytes());
        out.extend_from_slice(&params.parallelism.to_be_bytes());
        out.extend_from_slice(&self.salt);
        out.extend_from_slice(&self.nonce);
        // Bounded by `MAX_CIPHERTEXT`.
        out.extend_from_slice(&(self.ciphertext.len() as u16).to_be_bytes());
        out
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.header();
        out.extend_from_slice(&self.ciphertext);
        out
    }

    pub fn parse(bytes: &[u8]) -> Result<Envelope, KeyError> {
        let mut r = Reader(bytes);
        if r.take(MAGIC.len())? != MAGIC {
            return Err(KeyError::Malformed("not a Berth seed envelope".into()));
        }
        let version = r.byte()?;
        if version != VERSION {
            return Err(KeyError::Malformed(format!(
                "envelope version {version} is not supported (this berthd reads version {VERSION})"
            )));
        }
        let sources = Sources::from_bits(r.byte()?)?;
        let binding_len = usize::from(r.byte()?);
        if binding_len > MAX_BINDING {
            return Err(KeyError::Malformed("binding id too long".into()));
        }
        let binding = r.take(binding_len)?.to_vec();
        let kind = r.byte()?;
        let params = KdfParams {
            memory_kib: r.u32()?,
            iterations: r.u32()?,
            parallelism: r.u32()?,
        };
        let kdf = match kind {
            // Unused parameters must be zero: every header has one encoding, so the
            // header the AEAD checks is exactly the bytes on disk.
            0 if params == KdfParams::NONE => Kdf::None,
            0 => return Err(KeyError::Malformed("parameters without a KDF".into())),
            1 if params.within_bounds() => Kdf::Argon2id(params),
            1 => {
                return Err(KeyError::Malformed(
                    "Argon2id parameters out of bounds".into(),
                ));
            }
            other => return Err(KeyError::Malformed(format!("unknown KDF {other}"))),
        };
        if sources.contains(Sources::PASSPHRASE) != matches!(kdf, Kdf::Argon2id(_)) {
            return Err(KeyError::Malformed(
                "a passphrase needs Argon2id, and Argon2id a passphrase".into(),
            ));
        }
        let salt = r.array()?;
        let nonce = r.array()?;
        let len = usize::from(u16::from_be_bytes(r.array()?));
        if len > MAX_CIPHERTEXT {
            return Err(KeyError::Malformed("ciphertext too long".into()));
        }
        let ciphertext = r.take(len)?.to_vec();
        if !r.0.is_empty() {
            return Err(KeyError::Malformed(
                "trailing bytes after the ciphertext".into(),
            ));
        }
        let envelope = Envelope {
            version,
            sources,
            binding,
            kdf,
            salt,
            nonce,
            ciphertext,
        };
        // The AEAD authenticates the re-encoded header: it must be the bytes read.
        if envelope.to_bytes() != bytes {
            return Err(KeyError::Malformed("a non-canonical header".into()));
        }
        Ok(envelope)
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], KeyError> {
        if self.0.len() < n {
            return Err(KeyError::Malformed("the envelope is truncated".into()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn byte(&mut self) -> Result<u8, KeyError> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], KeyError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, KeyError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
}

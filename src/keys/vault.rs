//! The seed vault: seals a mnemonic phrase into an envelope file and opens it again.

use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use zeroize::Zeroizing;

use super::KeyError;
use super::envelope::{Envelope, Kdf, MAX_BINDING, MAX_CIPHERTEXT, NONCE_LEN, SALT_LEN, VERSION};
use super::sources::KeySource;

/// One envelope file (and, while it is being replaced, its previous version beside it
/// as `<name>.prev`).
#[derive(Debug, Clone)]
pub struct SeedVault {
    path: PathBuf,
}

impl SeedVault {
    pub fn new(path: PathBuf) -> SeedVault {
        SeedVault { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the envelope being replaced is kept until its successor reads back.
    pub fn previous_path(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".prev");
        self.path.with_file_name(name)
    }

    pub fn exists(&self) -> bool {
        self.path.exists()
    }

    /// The envelope on disk, parsed; no key is needed.
    pub fn envelope(&self) -> Result<Envelope, KeyError> {
        let bytes = std::fs::read(&self.path).map_err(KeyError::io("cannot read", &self.path))?;
        Envelope::parse(&bytes)
    }

    /// Seal `phrase` with `source` into the vault's file: written atomically (a
    /// temporary file, fsync, rename, directory fsync); an envelope already there is
    /// kept as `<name>.prev` until the new one has been read back and opened with a
    /// fresh derivation of the key, and put back if that fails.
    pub fn seal(
        &self,
        phrase: &str,
        source: &mut dyn KeySource,
        kdf: Kdf,
    ) -> Result<Envelope, KeyError> {
        if phrase.len() + 16 > MAX_CIPHERTEXT {
            return Err(KeyError::Source("the phrase is too long to seal".into()));
        }
        let binding = source.binding()?;
        if binding.len() > MAX_BINDING {
            return Err(KeyError::Source(
                "the key source's binding id is too long".into(),
            ));
        }
        let mut salt = [0u8; SALT_LEN];
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut salt)
            .and_then(|()| getrandom::fill(&mut nonce))
            .map_err(|e| KeyError::Source(format!("the OS random source failed: {e}")))?;
        let key = source.key(&salt, &kdf)?;
        let mut envelope = Envelope {
            version: VERSION,
            sources: source.sources(),
            binding,
            kdf,
            salt,
            nonce,
            // Its length is in the header: reserve it before computing the header.
            ciphertext: vec![0; phrase.len() + 16],
        };
        let header = envelope.header();
        envelope.ciphertext = XChaCha20Poly1305::new(chacha20poly1305::Key::from_slice(&key[..]))
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: phrase.as_bytes(),
                    aad: &header,
                },
            )
            .map_err(|_| KeyError::Source("sealing failed".into()))?;

        let previous = self.previous_path();
        let had_previous = match std::fs::read(&self.path) {
            Ok(old) => {
                crate::fsutil::write_atomically(&previous, &old, 0o600)?;
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => return Err(KeyError::io("cannot read", &self.path)(e)),
        };
        crate::fsutil::write_atomically(&self.path, &envelope.to_bytes(), 0o600)?;
        match self.open(source) {
            Ok(read_back) if read_back.as_str() == phrase => {
                if had_previous {
                    std::fs::remove_file(&previous)
                        .map_err(KeyError::io("cannot remove", &previous))?;
                }
                Ok(envelope)
            }
            outcome => {
                let why = match outcome {
                    Err(e) => e.to_string(),
                    Ok(_) => "it holds another phrase".into(),
                };
                let restored = if had_previous {
                    std::fs::rename(&previous, &self.path)
                } else {
                    std::fs::remove_file(&self.path)
                };
                restored.map_err(KeyError::io("cannot restore", &self.path))?;
                Err(KeyError::Source(format!(
                    "the new envelope did not read back ({why}); nothing was changed"
                )))
            }
        }
    }

    /// Open the envelope with `source`: the phrase, in a buffer wiped when dropped.
    pub fn open(&self, source: &mut dyn KeySource) -> Result<Zeroizing<String>, KeyError> {
        let envelope = self.envelope()?;
        if envelope.sources != source.sources() {
            return Err(KeyError::MissingSource {
                sealed_with: envelope.sources.names().join(" + "),
                configured: source.sources().names().join(" + "),
            });
        }
        let found = source.binding()?;
        if found != envelope.binding {
            return Err(KeyError::WrongBinding {
                sealed_to: hex(&envelope.binding),
                found: hex(&found),
            });
        }
        let key = source.key(&envelope.salt, &envelope.kdf)?;
        let plaintext = Zeroizing::new(
            XChaCha20Poly1305::new(chacha20poly1305::Key::from_slice(&key[..]))
                .decrypt(
                    XNonce::from_slice(&envelope.nonce),
                    Payload {
                        msg: &envelope.ciphertext,
                        aad: &envelope.header(),
                    },
                )
                .map_err(|_| KeyError::WrongKey)?,
        );
        let phrase = std::str::from_utf8(&plaintext)
            .map_err(|_| KeyError::Malformed("the sealed phrase is not UTF-8".into()))?;
        Ok(Zeroizing::new(phrase.to_owned()))
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

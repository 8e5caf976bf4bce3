//! The backup file: a clear header, then the payload encrypted in chunks.
//!
//! ```text
//! header (67 bytes, authenticated as every chunk's associated data)
//!   0..8    magic "BRTHBKUP"
//!   8       format version (1)
//!   9       cipher suite (1: HKDF-SHA256 keys, XChaCha20-Poly1305 in STREAM-BE32)
//!   10..12  zero
//!   12..16  chunk size, u32 BE (plaintext bytes per chunk; 4 KiB to 1 MiB)
//!   16..32  salt (random per file)
//!   32..51  STREAM nonce prefix (random per file)
//!   51..67  key check: HKDF of the wallet's backup key and the salt (tells "another
//!           wallet's seed" apart from "damaged")
//! chunks: each chunk-size bytes of plaintext (the last one shorter, maybe empty) as
//!   ciphertext + 16-byte tag. STREAM numbers the chunks and marks the last one, so a
//!   reordered, dropped, truncated or extended file fails authentication.
//! ```
//!
//! The payload is a sequence of records (`docs/storage.md`, "Backups"): tables with
//! their entries, files, and a closing summary. This module knows the bytes; what they
//! mean is `backup::mod`'s.

use std::io::{self, Read, Write};

use chacha20poly1305::XChaCha20Poly1305;
use chacha20poly1305::aead::KeyInit;
use chacha20poly1305::aead::stream::{DecryptorBE32, EncryptorBE32};
use zeroize::Zeroizing;

use super::BackupError;

pub const MAGIC: &[u8; 8] = b"BRTHBKUP";
/// The format this code writes. Readers keep reading every earlier one.
pub const FORMAT_VERSION: u8 = 1;
pub const SUITE_XCHACHA_STREAM: u8 = 1;
pub const HEADER_LEN: usize = 67;
pub const SALT_LEN: usize = 16;
pub const NONCE_PREFIX_LEN: usize = 19;
pub const KEY_CHECK_LEN: usize = 16;
pub const TAG_LEN: usize = 16;
/// Plaintext bytes per chunk written: a bounded buffer, and a tag every 64 KiB.
pub const CHUNK_SIZE: u32 = 64 * 1024;
const MIN_CHUNK: u32 = 4 * 1024;
const MAX_CHUNK: u32 = 1024 * 1024;

/// The clear header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub chunk_size: u32,
    pub salt: [u8; SALT_LEN],
    pub nonce_prefix: [u8; NONCE_PREFIX_LEN],
    pub key_check: [u8; KEY_CHECK_LEN],
}

impl Header {
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..8].copy_from_slice(MAGIC);
        out[8] = self.version;
        out[9] = SUITE_XCHACHA_STREAM;
        out[12..16].copy_from_slice(&self.chunk_size.to_be_bytes());
        out[16..32].copy_from_slice(&self.salt);
        out[32..51].copy_from_slice(&self.nonce_prefix);
        out[51..67].copy_from_slice(&self.key_check);
        out
    }

    /// Parse a header; one encoding per header, so every byte of it matters.
    pub fn parse(bytes: &[u8]) -> Result<Header, BackupError> {
        if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
            return Err(BackupError::NotABackup);
        }
        let version = bytes[8];
        if version == 0 || version > FORMAT_VERSION {
            return Err(BackupError::UnknownFormat(version));
        }
        if bytes[9] != SUITE_XCHACHA_STREAM || bytes[10..12] != [0, 0] {
            return Err(BackupError::Damaged("the header is malformed".into()));
        }
        let chunk_size = u32::from_be_bytes(bytes[12..16].try_into().expect("4 bytes"));
        if !(MIN_CHUNK..=MAX_CHUNK).contains(&chunk_size) {
            return Err(BackupError::Damaged("the header is malformed".into()));
        }
        Ok(Header {
            version,
            chunk_size,
            salt: bytes[16..32].try_into().expect("16 bytes"),
            nonce_prefix: bytes[32..51].try_into().expect("19 bytes"),
            key_check: bytes[51..67].try_into().expect("16 bytes"),
        })
    }
}

/// Encrypts what is written to it, a chunk at a time, into `inner`.
pub struct EncryptingWriter<W: Write> {
    inner: W,
    header: [u8; HEADER_LEN],
    encryptor: Option<EncryptorBE32<XChaCha20Poly1305>>,
    buffer: Vec<u8>,
    chunk_size: usize,
    /// Ciphertext bytes written after the header.
    written: u64,
}

impl<W: Write> EncryptingWriter<W> {
    /// Write `header` to `inner`; later writes are encrypted under `key`.
    pub fn new(mut inner: W, header: &Header, key: &Zeroizing<[u8; 32]>) -> io::Result<Self> {
        let bytes = header.to_bytes();
        inner.write_all(&bytes)?;
        let aead = XChaCha20Poly1305::new(chacha20poly1305::Key::from_slice(&key[..]));
        let encryptor = EncryptorBE32::from_aead(
            aead,
            chacha20poly1305::aead::generic_array::GenericArray::from_slice(&header.nonce_prefix),
        );
        let chunk_size = header.chunk_size as usize;
        Ok(EncryptingWriter {
            inner,
            header: bytes,
            encryptor: Some(encryptor),
            buffer: Vec::with_capacity(chunk_size + TAG_LEN),
            chunk_size,
            written: 0,
        })
    }

    /// Encrypt what is buffered as the last chunk and hand back the inner writer.
    pub fn finish(mut self) -> io::Result<(W, u64)> {
        let encryptor = self.encryptor.take().expect("finish runs once");
        encryptor
            .encrypt_last_in_place(&self.header, &mut self.buffer)
            .map_err(|_| io::Error::other("encrypting the backup failed"))?;
        self.inner.write_all(&self.buffer)?;
        self.written += self.buffer.len() as u64;
        self.inner.flush()?;
        Ok((self.inner, self.written))
    }

    fn seal_full_chunk(&mut self) -> io::Result<()> {
        let encryptor = self.encryptor.as_mut().expect("not finished");
        encryptor
            .encrypt_next_in_place(&self.header, &mut self.buffer)
            .map_err(|_| io::Error::other("the backup is too large to encrypt"))?;
        self.inner.write_all(&self.buffer)?;
        self.written += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }
}

impl<W: Write> Write for EncryptingWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        // A full chunk is sealed only when more data follows, so the last chunk is
        // whatever remains at `finish` (empty when the payload fills whole chunks).
        if self.buffer.len() == self.chunk_size && !data.is_empty() {
            self.seal_full_chunk()?;
        }
        let take = data.len().min(self.chunk_size - self.buffer.len());
        self.buffer.extend_from_slice(&data[..take]);
        Ok(take)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Decrypts a backup's chunks as they are read, refusing any that fail authentication.
pub struct DecryptingReader<R: Read> {
    inner: R,
    header: [u8; HEADER_LEN],
    decryptor: Option<DecryptorBE32<XChaCha20Poly1305>>,
    chunk_len: usize,
    /// The next ciphertext chunk, read ahead to know whether the current one is last.
    ahead: Vec<u8>,
    plain: Vec<u8>,
    pos: usize,
    /// Ciphertext offset of the chunk in `ahead`, for messages.
    offset: u64,
    done: bool,
}

impl<R: Read> DecryptingReader<R> {
    pub fn new(mut inner: R, header: &Header, key: &Zeroizing<[u8; 32]>) -> io::Result<Self> {
        let aead = XChaCha20Poly1305::new(chacha20poly1305::Key::from_slice(&key[..]));
        let decryptor = DecryptorBE32::from_aead(
            aead,
            chacha20poly1305::aead::generic_array::GenericArray::from_slice(&header.nonce_prefix),
        );
        let chunk_len = header.chunk_size as usize + TAG_LEN;
        let ahead = read_up_to(&mut inner, chunk_len)?;
        Ok(DecryptingReader {
            inner,
            header: header.to_bytes(),
            decryptor: Some(decryptor),
            chunk_len,
            ahead,
            plain: Vec::with_capacity(chunk_len),
            pos: 0,
            offset: HEADER_LEN as u64,
            done: false,
        })
    }

    /// Whether every chunk, the last one included, has been read and authenticated.
    pub fn is_done(&self) -> bool {
        self.done && self.pos == self.plain.len()
    }

    fn next_chunk(&mut self) -> io::Result<()> {
        let offset = self.offset;
        let mut chunk = std::mem::take(&mut self.ahead);
        if chunk.len() < TAG_LEN {
            return Err(damaged(BackupError::Truncated));
        }
        self.offset += chunk.len() as u64;
        // A short chunk can only be the last one; a full one is last if nothing follows.
        self.ahead = if chunk.len() < self.chunk_len {
            Vec::new()
        } else {
            read_up_to(&mut self.inner, self.chunk_len)?
        };
        let last = self.ahead.is_empty();
        let result = if last {
            let decryptor = self.decryptor.take().expect("not done");
            decryptor.decrypt_last_in_place(&self.header, &mut chunk)
        } else {
            self.decryptor
                .as_mut()
                .expect("not done")
                .decrypt_next_in_place(&self.header, &mut chunk)
        };
        if result.is_err() {
            return Err(damaged(if last && offset > HEADER_LEN as u64 {
                // The last chunk present was not written as the last: cut short, or
                // it was modified.
                BackupError::Damaged(format!(
                    "the chunk at byte {offset} fails authentication: the file is truncated or modified"
                ))
            } else {
                BackupError::Damaged(format!(
                    "the chunk at byte {offset} fails authentication: the file is damaged or modified"
                ))
            }));
        }
        self.plain = chunk;
        self.pos = 0;
        self.done = last;
        Ok(())
    }
}

impl<R: Read> Read for DecryptingReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.plain.len() {
            if self.done {
                return Ok(0);
            }
            self.next_chunk()?;
        }
        let n = out.len().min(self.plain.len() - self.pos);
        out[..n].copy_from_slice(&self.plain[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// A backup error carried through `io::Error` (the payload parser reads through
/// `Read`), recovered by [`BackupError::from_io`].
fn damaged(error: BackupError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, error)
}

fn read_up_to(inner: &mut impl Read, len: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    inner.take(len as u64).read_to_end(&mut out)?;
    Ok(out)
}

// --- payload records ---------------------------------------------------------------

pub const TAG_TABLE: u8 = b'T';
pub const TAG_ENTRY: u8 = b'E';
pub const TAG_TABLE_END: u8 = b'N';
pub const TAG_FILE: u8 = b'F';
pub const TAG_SUMMARY: u8 = b'Z';
/// Bounds on lengths a reader accepts, so a damaged length cannot ask for gigabytes.
pub const MAX_KEY: usize = 64 * 1024;
pub const MAX_VALUE: usize = 64 * 1024 * 1024;
pub const MAX_FILE: usize = 1024 * 1024;
pub const MAX_SUMMARY: usize = 1024 * 1024;

/// A name (a table's, a file's): its length in one byte, so at most 255 bytes.
pub fn write_name(out: &mut impl Write, tag: u8, name: &str) -> io::Result<()> {
    let len = u8::try_from(name.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a name over 255 bytes"))?;
    out.write_all(&[tag, len])?;
    out.write_all(name.as_bytes())
}

/// Bytes with a u32 length. Larger than a reader accepts (`MAX_*`) is written anyway
/// and refused by the verification that follows every write.
pub fn write_blob(out: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a value over 4 GiB"))?;
    out.write_all(&len.to_be_bytes())?;
    out.write_all(bytes)
}

pub fn read_u8(input: &mut impl Read) -> io::Result<u8> {
    let mut byte = [0u8; 1];
    input.read_exact(&mut byte)?;
    Ok(byte[0])
}

pub fn read_u64(input: &mut impl Read) -> io::Result<u64> {
    let mut bytes = [0u8; 8];
    input.read_exact(&mut bytes)?;
    Ok(u64::from_be_bytes(bytes))
}

pub fn read_name(input: &mut impl Read) -> Result<String, BackupError> {
    let len = read_u8(input).map_err(BackupError::from_io)? as usize;
    let mut bytes = vec![0u8; len];
    input.read_exact(&mut bytes).map_err(BackupError::from_io)?;
    String::from_utf8(bytes).map_err(|_| BackupError::Invalid("a name is not UTF-8".into()))
}

pub fn read_blob(input: &mut impl Read, max: usize, what: &str) -> Result<Vec<u8>, BackupError> {
    let mut len = [0u8; 4];
    input.read_exact(&mut len).map_err(BackupError::from_io)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(BackupError::Invalid(format!(
            "a {what} of {len} bytes (at most {max})"
        )));
    }
    let mut bytes = vec![0u8; len];
    input.read_exact(&mut bytes).map_err(BackupError::from_io)?;
    Ok(bytes)
}

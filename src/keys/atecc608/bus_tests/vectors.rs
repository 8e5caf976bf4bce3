//! Test vectors shared by the driver tests. The CRCs and the digest were
//! computed independently of the crate (Python: reflected CRC-16/ARC then
//! bit-reversed, as the Linux atmel-i2c driver does; hashlib SHA-256 over the
//! datasheet's 88-byte MAC message), see the report.

pub const ADDR: u8 = 0x60;

pub const SERIAL: [u8; 9] = [0x01, 0x23, 0xA1, 0xB2, 0xC3, 0xD4, 0xE5, 0xF6, 0xEE];
pub const SLOT: u8 = 3;

pub fn key() -> [u8; 32] {
    core::array::from_fn(|i| i as u8)
}

pub fn challenge() -> [u8; 32] {
    core::array::from_fn(|i| 0xA0 + i as u8)
}

/// SHA-256 of the mode-0x40 MAC message for SERIAL / key() / challenge() / SLOT.
pub const DIGEST: [u8; 32] = [
    0x10, 0xF0, 0x23, 0x0A, 0xC8, 0xB3, 0x7D, 0x86, 0x1D, 0x8A, 0xFB, 0xB0, 0xD1, 0x1A, 0xDB, 0x74,
    0x32, 0x00, 0x60, 0x99, 0x51, 0x90, 0x2E, 0x98, 0xD0, 0x1F, 0xEB, 0x25, 0x79, 0x68, 0x93, 0x8A,
];

/// Config zone block 0 for SERIAL.
pub const BLOCK0: [u8; 32] = [
    0x01, 0x23, 0xA1, 0xB2, 0x00, 0x00, 0x60, 0x02, 0xC3, 0xD4, 0xE5, 0xF6, 0xEE, 0x01, 0x01, 0x00,
    0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];
pub const BLOCK0_RESPONSE_CRC: [u8; 2] = [0xC9, 0x84];

/// Read config block 0: word address, count, opcode, param1, param2, CRC.
pub const READ_BLOCK0_PACKET: [u8; 8] = [0x03, 0x07, 0x02, 0x80, 0x00, 0x00, 0x09, 0xAD];

pub const MAC_COMMAND_CRC: [u8; 2] = [0x6A, 0xEE];
pub const MAC_RESPONSE_CRC: [u8; 2] = [0x1C, 0x77];

/// MAC command for SLOT / challenge(), byte-exact.
pub fn mac_packet() -> Vec<u8> {
    let mut p = vec![0x03, 0x27, 0x08, 0x40, SLOT, 0x00];
    p.extend_from_slice(&challenge());
    p.extend_from_slice(&MAC_COMMAND_CRC);
    p
}

/// The 88-byte message the chip hashes in MAC mode 0x40 (datasheet table
/// "Diversified MAC Calculation"), built field by field.
pub fn mac_message(key: &[u8; 32], challenge: &[u8; 32], slot: u8, sn: &[u8; 9]) -> Vec<u8> {
    let mut m = Vec::with_capacity(88);
    m.extend_from_slice(key); // 32: data slot
    m.extend_from_slice(challenge); // 32: input challenge
    m.push(0x08); // opcode
    m.push(0x40); // mode
    m.extend_from_slice(&[slot, 0x00]); // KeyID, LE
    m.extend_from_slice(&[0u8; 8]); // OTP[0:7] excluded
    m.extend_from_slice(&[0u8; 3]); // OTP[8:10] excluded
    m.push(sn[8]);
    m.extend_from_slice(&sn[4..8]);
    m.extend_from_slice(&sn[0..2]);
    m.extend_from_slice(&sn[2..4]);
    assert_eq!(m.len(), 88);
    m
}

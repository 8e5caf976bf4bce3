//! Behavioural fake of an ATECC608 on an I²C bus, for testing the driver in
//! [`super`] without hardware.
//!
//! It implements [`embedded_hal::i2c::I2c`] (error type
//! [`embedded_hal::i2c::ErrorKind`]) and models, from the bus side:
//!
//! * power states: asleep → (any transaction to the general-call address
//!   `0x00`, i.e. the wake pulse) → awake, with the wake response
//!   `04 11 33 43` in the output buffer; word address `0x01` → asleep,
//!   `0x02` → idle. While asleep or idle every transaction to the chip is
//!   NACKed, and a wake pulse while awake is ignored, as on the real part;
//! * word address `0x00` (reset the output address counter) and `0x03`
//!   (command); the output buffer is read sequentially across reads, and bytes
//!   past its end read as `0xFF` (floating bus);
//! * command parsing: a count byte inconsistent with the bytes sent, or a bad
//!   CRC, yields status `0xFF`; unknown opcodes yield `0x03`;
//! * `Read` of the configuration zone (32-byte blocks and 4-byte words) with a
//!   configurable serial number; data-zone slots are secret and not readable
//!   (`0x0F`);
//! * `MAC` with the challenge taken from the command (modes `0x00` and `0x40`),
//!   computed with SHA-256 over the same 88-byte message the chip hashes
//!   (slot key, challenge, opcode, mode, param2 LE, 11 zero bytes for the
//!   excluded OTP, SN\[8\], SN\[4..8\] or zeros, SN\[0..2\], SN\[2..4\] or zeros).
//!   Modes that need TempKey or OTP are not emulated and return `0x0F`;
//! * a key-use counter ([`FakeAtecc608::mac_count`]) and an optional limit
//!   after which `MAC` returns execution error `0x0F` (a `LimitedUse` slot
//!   whose monotonic counter is exhausted);
//! * a configurable number of NACKed accesses after each command ("busy"),
//!   and fault injection: corrupt the next response's CRC, NACK the next N
//!   transactions, replace the next command's result by a status code, or
//!   force the chip to sleep (watchdog expiry).
//!
//! Timing is not modelled: one NACKed access stands for "still busy".
//! The CRC here is computed differently from the driver's (reflected
//! CRC-16/ARC, then bit-reversed) so the two implementations check each other.
//!
//! Compiled only into this crate's unit tests and with the `test-util` feature,
//! which the package's dev-dependency on itself turns on for its tests and benches
//! (`benches/seed.rs`); `cargo build` and the release binary leave it out.

use core::fmt;

use embedded_hal::i2c::{ErrorKind, ErrorType, I2c, NoAcknowledgeSource, Operation};
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

const GENERAL_CALL: u8 = 0x00;
const DEFAULT_FAKE_ADDRESS: u8 = 0x60;
const WAKE_RESPONSE: [u8; 4] = [0x04, 0x11, 0x33, 0x43];

const OP_READ: u8 = 0x02;
const OP_MAC: u8 = 0x08;

const STATUS_PARSE: u8 = 0x03;
const STATUS_EXECUTION: u8 = 0x0F;
const STATUS_COMM: u8 = 0xFF;

const CONFIG_ZONE_LEN: usize = 128;
const MIN_GROUP: usize = 7;
const MAX_GROUP: usize = 155;

/// Power state of the fake chip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerState {
    /// Low-power sleep; only a wake pulse is honoured.
    Asleep,
    /// Idle; only a wake pulse is honoured, volatile state kept.
    Idle,
    /// Awake and accepting I/O.
    Awake,
}

/// Behavioural fake ATECC608. See the module documentation.
pub struct FakeAtecc608 {
    address: u8,
    serial: [u8; 9],
    config: [u8; CONFIG_ZONE_LEN],
    slot_keys: [Option<Zeroizing<[u8; 32]>>; 16],
    state: PowerState,
    output: Zeroizing<Vec<u8>>,
    read_pos: usize,
    busy_remaining: u32,
    busy_polls: u32,
    mac_count: u32,
    mac_limit: Option<u32>,
    corrupt_next_crc: bool,
    nack_remaining: u32,
    status_override: Option<u8>,
    wake_count: u32,
    commands_received: u32,
    bad_crc_commands: u32,
}

impl fmt::Debug for FakeAtecc608 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Slot keys and the output buffer (which may hold a digest) are
        // deliberately left out.
        f.debug_struct("FakeAtecc608")
            .field("address", &self.address)
            .field("state", &self.state)
            .field("mac_count", &self.mac_count)
            .field("mac_limit", &self.mac_limit)
            .finish_non_exhaustive()
    }
}

impl FakeAtecc608 {
    /// Creates a sleeping fake at address `0x60` with the given serial number
    /// and secret keys (`(slot, key)` pairs).
    ///
    /// # Panics
    ///
    /// If a slot number is 16 or more.
    pub fn new(serial: [u8; 9], slot_keys: impl IntoIterator<Item = (u8, [u8; 32])>) -> Self {
        let mut keys: [Option<Zeroizing<[u8; 32]>>; 16] = Default::default();
        for (slot, key) in slot_keys {
            assert!(slot < 16, "ATECC608 slots are 0..=15, got {slot}");
            keys[usize::from(slot)] = Some(Zeroizing::new(key));
        }
        let mut fake = Self {
            address: DEFAULT_FAKE_ADDRESS,
            serial,
            config: [0; CONFIG_ZONE_LEN],
            slot_keys: keys,
            state: PowerState::Asleep,
            output: Zeroizing::new(Vec::new()),
            read_pos: 0,
            busy_remaining: 0,
            busy_polls: 0,
            mac_count: 0,
            mac_limit: None,
            corrupt_next_crc: false,
            nack_remaining: 0,
            status_override: None,
            wake_count: 0,
            commands_received: 0,
            bad_crc_commands: 0,
        };
        fake.rebuild_config();
        fake
    }

    /// Moves the fake to another 7-bit address.
    pub fn with_address(mut self, address: u8) -> Self {
        self.address = address;
        self.rebuild_config();
        self
    }

    /// After every command, NACK this many accesses before the response is
    /// ready (models execution time).
    pub fn set_busy_polls(&mut self, polls: u32) {
        self.busy_polls = polls;
    }

    /// Limits the number of MAC computations (`None` = unlimited). Once
    /// [`mac_count`](Self::mac_count) reaches the limit, `MAC` returns
    /// execution error `0x0F`, like an exhausted `LimitedUse` slot.
    pub fn set_mac_limit(&mut self, limit: Option<u32>) {
        self.mac_limit = limit;
    }

    /// Number of MAC computations performed (key uses). Refused commands do
    /// not count, matching a monotonic counter that stops at its limit.
    pub fn mac_count(&self) -> u32 {
        self.mac_count
    }

    /// Flips a bit in the CRC of the next command response.
    pub fn corrupt_next_response_crc(&mut self) {
        self.corrupt_next_crc = true;
    }

    /// NACKs the next `count` transactions addressed to the chip (the wake
    /// pulse, which goes to the general-call address, still works).
    pub fn nack_next(&mut self, count: u32) {
        self.nack_remaining = count;
    }

    /// The next well-formed command is not executed; the chip answers with
    /// this status code instead (e.g. `0xEE`, `0xFF`, `0x0F`).
    pub fn respond_next_with_status(&mut self, status: u8) {
        self.status_override = Some(status);
    }

    /// Puts the chip to sleep as if its watchdog had expired.
    pub fn force_sleep(&mut self) {
        self.enter_low_power(PowerState::Asleep);
    }

    /// Current power state.
    pub fn state(&self) -> PowerState {
        self.state
    }

    /// Number of wake pulses that actually woke the chip.
    pub fn wake_count(&self) -> u32 {
        self.wake_count
    }

    /// Number of command groups received (including malformed ones).
    pub fn commands_received(&self) -> u32 {
        self.commands_received
    }

    /// Number of command groups rejected with status `0xFF`.
    pub fn bad_crc_commands(&self) -> u32 {
        self.bad_crc_commands
    }

    fn rebuild_config(&mut self) {
        let c = &mut self.config;
        c.fill(0);
        c[0..4].copy_from_slice(&self.serial[0..4]);
        // RevNum: any plausible ATECC608 revision.
        c[4..8].copy_from_slice(&[0x00, 0x00, 0x60, 0x02]);
        c[8..13].copy_from_slice(&self.serial[4..9]);
        c[13] = 0x01; // AES_Enable
        c[14] = 0x01; // I2C_Enable
        c[16] = self.address << 1; // I2C_Address (8-bit form)
        c[86] = 0x00; // LockValue: data zone locked
        c[87] = 0x00; // LockConfig: config zone locked
    }

    fn enter_low_power(&mut self, state: PowerState) {
        self.state = state;
        self.output.clear();
        self.read_pos = 0;
        self.busy_remaining = 0;
    }

    fn wake_pulse(&mut self) {
        if self.state != PowerState::Awake {
            self.state = PowerState::Awake;
            self.wake_count += 1;
            self.output.clear();
            self.output.extend_from_slice(&WAKE_RESPONSE);
            self.read_pos = 0;
            self.busy_remaining = 0;
        }
    }

    /// Whether the chip ACKs its address right now; consumes one busy poll.
    fn accepts_access(&mut self) -> bool {
        if self.nack_remaining > 0 {
            self.nack_remaining -= 1;
            return false;
        }
        if self.state != PowerState::Awake {
            return false;
        }
        if self.busy_remaining > 0 {
            self.busy_remaining -= 1;
            return false;
        }
        true
    }

    fn handle_write(&mut self, bytes: &[u8]) -> Result<(), ErrorKind> {
        let Some((&word_address, rest)) = bytes.split_first() else {
            // Address-only write: ACKed, no effect.
            return Ok(());
        };
        match word_address {
            0x00 => self.read_pos = 0,
            0x01 => self.enter_low_power(PowerState::Asleep),
            0x02 => self.enter_low_power(PowerState::Idle),
            0x03 => self.handle_command(rest),
            _ => return Err(ErrorKind::NoAcknowledge(NoAcknowledgeSource::Data)),
        }
        Ok(())
    }

    fn handle_read(&mut self, buf: &mut [u8]) -> Result<(), ErrorKind> {
        if self.output.is_empty() {
            // Nothing to send (e.g. no command received yet).
            return Err(ErrorKind::NoAcknowledge(NoAcknowledgeSource::Address));
        }
        for byte in buf.iter_mut() {
            *byte = self.output.get(self.read_pos).copied().unwrap_or(0xFF);
            self.read_pos = self.read_pos.saturating_add(1);
        }
        Ok(())
    }

    fn handle_command(&mut self, group: &[u8]) {
        self.commands_received += 1;
        let mut response = self.execute(group);
        if self.corrupt_next_crc {
            self.corrupt_next_crc = false;
            if let Some(last) = response.last_mut() {
                *last ^= 0x01;
            }
        }
        *self.output = response;
        self.read_pos = 0;
        self.busy_remaining = self.busy_polls;
    }

    fn execute(&mut self, group: &[u8]) -> Vec<u8> {
        let len = group.len();
        if !(MIN_GROUP..=MAX_GROUP).contains(&len) || usize::from(group[0]) != len {
            self.bad_crc_commands += 1;
            return status_group(STATUS_COMM);
        }
        let (body, crc) = group.split_at(len - 2);
        if reference_crc(body).to_le_bytes() != [crc[0], crc[1]] {
            self.bad_crc_commands += 1;
            return status_group(STATUS_COMM);
        }
        if let Some(status) = self.status_override.take() {
            return status_group(status);
        }
        let opcode = body[1];
        let param1 = body[2];
        let param2 = u16::from_le_bytes([body[3], body[4]]);
        let data = &body[5..];
        match opcode {
            OP_READ => self.read_command(param1, param2, data),
            OP_MAC => self.mac_command(param1, param2, data),
            _ => status_group(STATUS_PARSE),
        }
    }

    fn read_command(&self, param1: u8, param2: u16, data: &[u8]) -> Vec<u8> {
        // Zone bits 2..=6 must be zero; Read takes no data.
        if param1 & 0x7C != 0 || !data.is_empty() {
            return status_group(STATUS_PARSE);
        }
        let whole_block = param1 & 0x80 != 0;
        match param1 & 0x03 {
            0x00 => {
                // Config zone address: block << 3 | word offset.
                let block = usize::from(param2 >> 3);
                let word = usize::from(param2 & 0x07);
                if whole_block {
                    if block > 3 || word != 0 {
                        return status_group(STATUS_EXECUTION);
                    }
                    data_group(&self.config[block * 32..block * 32 + 32])
                } else {
                    let start = block * 32 + word * 4;
                    if start + 4 > CONFIG_ZONE_LEN {
                        return status_group(STATUS_EXECUTION);
                    }
                    data_group(&self.config[start..start + 4])
                }
            }
            // Data-zone slots hold secret, non-readable keys; the OTP zone is
            // not emulated.
            0x01 | 0x02 => status_group(STATUS_EXECUTION),
            _ => status_group(STATUS_PARSE),
        }
    }

    fn mac_command(&mut self, mode: u8, param2: u16, challenge: &[u8]) -> Vec<u8> {
        // Mode bits 3 and 7 must be zero; only slots 0..=15 exist.
        if mode & 0x88 != 0 || param2 > 0x000F {
            return status_group(STATUS_PARSE);
        }
        // Bits 0/1 select TempKey, bits 4/5 include OTP: not emulated (no
        // Nonce support, so TempKey would be invalid anyway).
        if mode & 0x33 != 0 {
            return status_group(STATUS_EXECUTION);
        }
        if challenge.len() != 32 {
            return status_group(STATUS_PARSE);
        }
        let Some(key) = self.slot_keys[usize::from(param2)].as_ref() else {
            // Slot not configured as a MAC key.
            return status_group(STATUS_EXECUTION);
        };
        if self.mac_limit.is_some_and(|limit| self.mac_count >= limit) {
            return status_group(STATUS_EXECUTION);
        }
        self.mac_count += 1;

        let include_sn = mode & 0x40 != 0;
        let sn = &self.serial;
        let mut hasher = Sha256::new();
        hasher.update(&key[..]);
        hasher.update(challenge);
        hasher.update([OP_MAC, mode]);
        hasher.update(param2.to_le_bytes());
        hasher.update([0u8; 11]);
        hasher.update([sn[8]]);
        hasher.update(if include_sn {
            [sn[4], sn[5], sn[6], sn[7]]
        } else {
            [0; 4]
        });
        hasher.update([sn[0], sn[1]]);
        hasher.update(if include_sn { [sn[2], sn[3]] } else { [0; 2] });
        let digest = Zeroizing::new(<[u8; 32]>::from(hasher.finalize()));
        data_group(&digest[..])
    }
}

/// Response group `count, data, CRC`.
fn data_group(data: &[u8]) -> Vec<u8> {
    let mut group = Vec::with_capacity(data.len() + 3);
    // Responses here are at most 35 bytes, so the count fits in a byte.
    group.push((data.len() + 3) as u8);
    group.extend_from_slice(data);
    let crc = reference_crc(&group).to_le_bytes();
    group.extend_from_slice(&crc);
    group
}

/// 4-byte status group.
fn status_group(status: u8) -> Vec<u8> {
    data_group(&[status])
}

/// The chip's CRC computed the "other way round" from the driver: run the
/// reflected form of polynomial 0x8005 (0xA001, i.e. CRC-16/ARC) and
/// bit-reverse the result.
fn reference_crc(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xA001
            } else {
                crc >> 1
            };
        }
    }
    crc.reverse_bits()
}

impl ErrorType for FakeAtecc608 {
    type Error = ErrorKind;
}

impl I2c for FakeAtecc608 {
    fn transaction(
        &mut self,
        address: u8,
        operations: &mut [Operation<'_>],
    ) -> Result<(), Self::Error> {
        if address == GENERAL_CALL {
            // The all-zero address byte is the wake pulse; the chip never
            // ACKs the general call.
            self.wake_pulse();
            return Err(ErrorKind::NoAcknowledge(NoAcknowledgeSource::Address));
        }
        if address != self.address || !self.accepts_access() {
            return Err(ErrorKind::NoAcknowledge(NoAcknowledgeSource::Address));
        }
        // Adjacent writes form one write on the wire; a read after a write
        // is a repeated start, which re-addresses the chip.
        let mut pending_write: Vec<u8> = Vec::new();
        let mut writing = false;
        for op in operations.iter_mut() {
            match op {
                Operation::Write(bytes) => {
                    writing = true;
                    pending_write.extend_from_slice(bytes);
                }
                Operation::Read(buf) => {
                    if writing {
                        writing = false;
                        self.handle_write(&core::mem::take(&mut pending_write))?;
                        if !self.accepts_access() {
                            return Err(ErrorKind::NoAcknowledge(NoAcknowledgeSource::Address));
                        }
                    }
                    self.handle_read(buf)?;
                }
            }
        }
        if writing {
            self.handle_write(&pending_write)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(body: &[u8]) -> Vec<u8> {
        let mut group = vec![0x03, (body.len() + 3) as u8];
        group.extend_from_slice(body);
        let crc = reference_crc(&group[1..]).to_le_bytes();
        group.extend_from_slice(&crc);
        group
    }

    #[test]
    fn reference_crc_matches_wake_response() {
        assert_eq!(reference_crc(&[0x04, 0x11]).to_le_bytes(), [0x33, 0x43]);
    }

    #[test]
    fn asleep_chip_nacks_until_woken() {
        let mut fake = FakeAtecc608::new([0; 9], []);
        let mut buf = [0u8; 4];
        assert!(fake.read(0x60, &mut buf).is_err());
        assert!(fake.write(0x00, &[]).is_err());
        assert_eq!(fake.state(), PowerState::Awake);
        fake.read(0x60, &mut buf).expect("awake chip answers");
        assert_eq!(buf, WAKE_RESPONSE);
        fake.write(0x60, &[0x02]).expect("idle accepted");
        assert!(fake.read(0x60, &mut buf).is_err());
    }

    #[test]
    fn bad_command_crc_gives_status_ff() {
        let mut fake = FakeAtecc608::new([0; 9], []);
        let _ = fake.write(0x00, &[]);
        let mut packet = command(&[OP_READ, 0x80, 0x00, 0x00]);
        let last = packet.len() - 1;
        packet[last] ^= 0x55;
        fake.write(0x60, &packet).expect("command accepted");
        let mut buf = [0u8; 4];
        fake.read(0x60, &mut buf).expect("response ready");
        assert_eq!(buf, [0x04, 0xFF, 0x01, 0x42]);
        assert_eq!(fake.bad_crc_commands(), 1);
    }

    #[test]
    fn unknown_opcode_gives_parse_error() {
        let mut fake = FakeAtecc608::new([0; 9], []);
        let _ = fake.write(0x00, &[]);
        fake.write(0x60, &command(&[0x7E, 0x00, 0x00, 0x00]))
            .expect("command accepted");
        let mut buf = [0u8; 4];
        fake.read(0x60, &mut buf).expect("response ready");
        assert_eq!(buf[..2], [0x04, STATUS_PARSE]);
    }
}

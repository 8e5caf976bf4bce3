//! The driver against scripted I2C transactions (embedded-hal-mock), with
//! byte-exact command packets including CRCs.

use super::vectors::*;
use crate::keys::atecc608::{Atecc608, Error, MAX_ATTEMPTS, Status};
use embedded_hal::i2c::{ErrorKind, NoAcknowledgeSource};
use embedded_hal_mock::eh1::delay::NoopDelay;
use embedded_hal_mock::eh1::i2c::{Mock, Transaction as T};

const NACK: ErrorKind = ErrorKind::NoAcknowledge(NoAcknowledgeSource::Address);
const WAKE_RESPONSE: [u8; 4] = [0x04, 0x11, 0x33, 0x43];

/// Wake pulse (write to the general-call address, NACKed) + wake response.
fn wake() -> Vec<T> {
    vec![
        T::write(0x00, vec![]).with_error(NACK),
        T::read(ADDR, WAKE_RESPONSE.to_vec()),
    ]
}

/// Poll: "reset address counter" write, ACKed once the chip is done.
fn ready() -> T {
    T::write(ADDR, vec![0x00])
}

/// Poll while the chip is busy: NACKed.
fn busy() -> T {
    T::write(ADDR, vec![0x00]).with_error(NACK)
}

/// Response read: count byte, then the rest of the group.
fn response(group: &[u8]) -> Vec<T> {
    vec![
        T::read(ADDR, vec![group[0]]),
        T::read(ADDR, group[1..].to_vec()),
    ]
}

fn idle() -> T {
    T::write(ADDR, vec![0x02])
}

fn block0_response() -> Vec<u8> {
    let mut g = vec![0x23];
    g.extend_from_slice(&BLOCK0);
    g.extend_from_slice(&BLOCK0_RESPONSE_CRC);
    g
}

fn mac_response() -> Vec<u8> {
    let mut g = vec![0x23];
    g.extend_from_slice(&DIGEST);
    g.extend_from_slice(&MAC_RESPONSE_CRC);
    g
}

/// One complete wake/command/poll/response/idle sequence.
fn attempt(packet: &[u8], group: &[u8]) -> Vec<T> {
    let mut s = wake();
    s.push(T::write(ADDR, packet.to_vec()));
    s.push(ready());
    s.extend(response(group));
    s.push(idle());
    s
}

fn run<R>(script: &[T], f: impl FnOnce(&mut Atecc608<Mock, NoopDelay>) -> R) -> R {
    let mut dev = Atecc608::new(Mock::new(script), NoopDelay::new(), ADDR);
    let result = f(&mut dev);
    let (mut mock, _delay) = dev.release();
    mock.done();
    result
}

#[test]
fn serial_number_reads_config_block_0() {
    let script = attempt(&READ_BLOCK0_PACKET, &block0_response());
    let serial = run(&script, |d| d.serial_number()).expect("serial");
    assert_eq!(serial, SERIAL);
}

#[test]
fn mac_sends_exact_packet_and_returns_digest() {
    let script = attempt(&mac_packet(), &mac_response());
    let digest = run(&script, |d| d.mac(SLOT, &challenge())).expect("mac");
    assert_eq!(*digest, DIGEST);
}

#[test]
fn wake_pulse_ack_is_also_accepted() {
    // Some other device on the bus may ACK the general call; that is harmless.
    let mut script = attempt(&READ_BLOCK0_PACKET, &block0_response());
    script[0] = T::write(0x00, vec![]);
    let serial = run(&script, |d| d.serial_number()).expect("serial");
    assert_eq!(serial, SERIAL);
}

#[test]
fn wake_response_is_polled_while_chip_still_waking() {
    let mut script = vec![
        T::write(0x00, vec![]).with_error(NACK),
        T::read(ADDR, vec![0; 4]).with_error(NACK),
        T::read(ADDR, vec![0; 4]).with_error(NACK),
        T::read(ADDR, WAKE_RESPONSE.to_vec()),
    ];
    script.push(T::write(ADDR, READ_BLOCK0_PACKET.to_vec()));
    script.push(ready());
    script.extend(response(&block0_response()));
    script.push(idle());
    let serial = run(&script, |d| d.serial_number()).expect("serial");
    assert_eq!(serial, SERIAL);
}

#[test]
fn invalid_wake_response_is_retried_then_reported() {
    let mut script = Vec::new();
    for _ in 0..MAX_ATTEMPTS {
        script.push(T::write(0x00, vec![]).with_error(NACK));
        // E.g. a chip left awake with a stale response in its buffer.
        script.push(T::read(ADDR, vec![0x23, 0x00, 0x11, 0x22]));
        script.push(idle());
    }
    let err = run(&script, |d| d.serial_number()).expect_err("fails");
    assert_eq!(err, Error::NoWakeResponse);
}

#[test]
fn self_test_failure_at_wake_is_reported_without_retry() {
    let script = vec![
        T::write(0x00, vec![]).with_error(NACK),
        T::read(ADDR, vec![0x04, 0x07, 0x40, 0xC2]),
        idle(),
    ];
    let err = run(&script, |d| d.serial_number()).expect_err("fails");
    assert_eq!(err, Error::Status(Status::SelfTestError));
}

#[test]
fn busy_nacks_are_polled_until_response_ready() {
    let mut script = wake();
    script.push(T::write(ADDR, mac_packet()));
    script.extend([busy(), busy(), busy(), busy()]);
    // The address-counter reset may be ACKed while the count read is still
    // NACKed; that also counts as busy.
    script.push(ready());
    script.push(T::read(ADDR, vec![0]).with_error(NACK));
    script.push(ready());
    script.extend(response(&mac_response()));
    script.push(idle());
    let digest = run(&script, |d| d.mac(SLOT, &challenge())).expect("mac");
    assert_eq!(*digest, DIGEST);
}

#[test]
fn busy_beyond_max_execution_time_is_a_timeout() {
    let mut script = wake();
    script.push(T::write(ADDR, READ_BLOCK0_PACKET.to_vec()));
    // Read: 5 ms maximum execution time, one poll per ms plus the first.
    script.extend((0..=5).map(|_| busy()));
    script.push(idle());
    let err = run(&script, |d| d.serial_number()).expect_err("fails");
    assert_eq!(err, Error::Timeout);
}

#[test]
fn short_read_is_retried() {
    // A well-formed 7-byte group (valid CRC) where 35 bytes are expected.
    let short = [0x07, 0xDE, 0xAD, 0xBE, 0xEF, 0xA4, 0x74];
    let mut script = attempt(&READ_BLOCK0_PACKET, &short);
    script.extend(attempt(&READ_BLOCK0_PACKET, &block0_response()));
    let serial = run(&script, |d| d.serial_number()).expect("serial");
    assert_eq!(serial, SERIAL);
}

#[test]
fn short_read_every_attempt_is_reported() {
    let mut script = Vec::new();
    for _ in 0..MAX_ATTEMPTS {
        script.extend(wake());
        script.push(T::write(ADDR, READ_BLOCK0_PACKET.to_vec()));
        script.push(ready());
        // Count byte below the 4-byte minimum: nothing more is read.
        script.push(T::read(ADDR, vec![0x02]));
        script.push(idle());
    }
    let err = run(&script, |d| d.serial_number()).expect_err("fails");
    assert_eq!(
        err,
        Error::ShortResponse {
            expected: 35,
            got: 2
        }
    );
}

#[test]
fn oversized_count_is_rejected_without_reading_on() {
    let mut script = wake();
    script.push(T::write(ADDR, READ_BLOCK0_PACKET.to_vec()));
    script.push(ready());
    script.push(T::read(ADDR, vec![0x50]));
    script.push(idle());
    script.extend(attempt(&READ_BLOCK0_PACKET, &block0_response()));
    let serial = run(&script, |d| d.serial_number()).expect("serial");
    assert_eq!(serial, SERIAL);
}

#[test]
fn bad_crc_then_successful_retry() {
    let mut corrupted = mac_response();
    *corrupted.last_mut().expect("non-empty") ^= 0x01;
    let mut script = attempt(&mac_packet(), &corrupted);
    script.extend(attempt(&mac_packet(), &mac_response()));
    let digest = run(&script, |d| d.mac(SLOT, &challenge())).expect("mac");
    assert_eq!(*digest, DIGEST);
}

#[test]
fn bad_crc_on_every_attempt_gives_bad_crc() {
    let mut corrupted = block0_response();
    corrupted[5] ^= 0x80; // payload bit flip
    let mut script = Vec::new();
    for _ in 0..MAX_ATTEMPTS {
        script.extend(attempt(&READ_BLOCK0_PACKET, &corrupted));
    }
    let err = run(&script, |d| d.serial_number()).expect_err("fails");
    assert_eq!(err, Error::BadCrc);
}

#[test]
fn execution_error_status_is_mapped_and_not_retried() {
    let script = attempt(&mac_packet(), &[0x04, 0x0F, 0x23, 0x42]);
    let err = run(&script, |d| d.mac(SLOT, &challenge())).expect_err("fails");
    assert_eq!(err, Error::Status(Status::ExecutionError));
    assert_eq!(
        err.to_string(),
        "ATECC608 returned status 0x0F (execution error)"
    );
}

#[test]
fn parse_error_status_is_mapped() {
    let script = attempt(&READ_BLOCK0_PACKET, &[0x04, 0x03, 0x83, 0x42]);
    let err = run(&script, |d| d.serial_number()).expect_err("fails");
    assert_eq!(err, Error::Status(Status::ParseError));
}

#[test]
fn command_crc_rejected_by_chip_is_retried() {
    // Status 0xFF: the chip saw a corrupted command and did not execute it.
    let mut script = attempt(&mac_packet(), &[0x04, 0xFF, 0x01, 0x42]);
    script.extend(attempt(&mac_packet(), &mac_response()));
    let digest = run(&script, |d| d.mac(SLOT, &challenge())).expect("mac");
    assert_eq!(*digest, DIGEST);
}

#[test]
fn watchdog_about_to_expire_is_retried() {
    let mut script = attempt(&READ_BLOCK0_PACKET, &[0x04, 0xEE, 0x31, 0x41]);
    script.extend(attempt(&READ_BLOCK0_PACKET, &block0_response()));
    let serial = run(&script, |d| d.serial_number()).expect("serial");
    assert_eq!(serial, SERIAL);
}

#[test]
fn bus_error_on_command_write_is_retried() {
    let mut script = wake();
    script.push(T::write(ADDR, READ_BLOCK0_PACKET.to_vec()).with_error(ErrorKind::ArbitrationLoss));
    script.push(idle());
    script.extend(attempt(&READ_BLOCK0_PACKET, &block0_response()));
    let serial = run(&script, |d| d.serial_number()).expect("serial");
    assert_eq!(serial, SERIAL);
}

#[test]
fn persistent_bus_error_is_reported_as_bus() {
    let mut script = Vec::new();
    for _ in 0..MAX_ATTEMPTS {
        script.extend(wake());
        script.push(T::write(ADDR, READ_BLOCK0_PACKET.to_vec()).with_error(ErrorKind::Bus));
        script.push(idle().with_error(ErrorKind::Bus));
    }
    let err = run(&script, |d| d.serial_number()).expect_err("fails");
    assert_eq!(err, Error::Bus(ErrorKind::Bus));
}

#[test]
fn invalid_slot_touches_no_bus() {
    let err = run(&[], |d| d.mac(16, &challenge())).expect_err("fails");
    assert_eq!(err, Error::InvalidSlot(16));
}

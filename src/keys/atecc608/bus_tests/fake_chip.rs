//! The driver against the behavioural fake chip.

use super::vectors::*;
use crate::keys::atecc608::fake::{FakeAtecc608, PowerState};
use crate::keys::atecc608::{Atecc608, DEFAULT_ADDRESS, Error, Status};
use embedded_hal::i2c::{ErrorKind, NoAcknowledgeSource};
use embedded_hal_mock::eh1::delay::NoopDelay;

fn fake() -> FakeAtecc608 {
    FakeAtecc608::new(SERIAL, [(SLOT, key()), (7, [0x77; 32])])
}

fn driver(chip: &mut FakeAtecc608) -> Atecc608<&mut FakeAtecc608, NoopDelay> {
    Atecc608::new(chip, NoopDelay::new(), DEFAULT_ADDRESS)
}

#[test]
fn serial_round_trips() {
    let mut chip = fake();
    assert_eq!(driver(&mut chip).serial_number(), Ok(SERIAL));
    // Every operation wakes the chip and leaves it idle.
    assert_eq!(chip.state(), PowerState::Idle);
    assert_eq!(chip.wake_count(), 1);
}

#[test]
fn fake_can_be_moved_into_the_driver() {
    let mut dev = Atecc608::new(fake(), NoopDelay::new(), DEFAULT_ADDRESS);
    assert_eq!(dev.serial_number(), Ok(SERIAL));
    let (chip, _delay) = dev.release();
    assert_eq!(chip.commands_received(), 1);
}

#[test]
fn other_address_is_supported() {
    let mut chip = fake().with_address(0x35);
    let mut dev = Atecc608::new(&mut chip, NoopDelay::new(), 0x35);
    assert_eq!(dev.serial_number(), Ok(SERIAL));
}

#[test]
fn mac_matches_known_answer_through_the_fake() {
    let mut chip = fake();
    let digest = driver(&mut chip).mac(SLOT, &challenge()).expect("mac");
    assert_eq!(*digest, DIGEST);
    assert_eq!(chip.mac_count(), 1);
}

#[test]
fn mac_is_deterministic_per_key_challenge_and_serial() {
    let mut chip = fake();
    let mut dev = driver(&mut chip);
    let a = dev.mac(SLOT, &challenge()).expect("mac");
    let b = dev.mac(SLOT, &challenge()).expect("mac");
    assert_eq!(*a, *b);

    let mut other_challenge = challenge();
    other_challenge[31] ^= 1;
    let c = dev.mac(SLOT, &other_challenge).expect("mac");
    assert_ne!(*a, *c);

    let d = dev.mac(7, &challenge()).expect("mac with another slot key");
    assert_ne!(*a, *d);

    // Same key and challenge on a chip with another serial number.
    let mut other_serial = SERIAL;
    other_serial[5] ^= 0x10;
    let mut chip2 = FakeAtecc608::new(other_serial, [(SLOT, key())]);
    let e = driver(&mut chip2).mac(SLOT, &challenge()).expect("mac");
    assert_ne!(*a, *e);

    // Same serial and challenge, different key in the same slot.
    let mut other_key = key();
    other_key[0] ^= 0xFF;
    let mut chip3 = FakeAtecc608::new(SERIAL, [(SLOT, other_key)]);
    let f = driver(&mut chip3).mac(SLOT, &challenge()).expect("mac");
    assert_ne!(*a, *f);
}

#[test]
fn slot_without_key_gives_execution_error() {
    let mut chip = fake();
    let err = driver(&mut chip).mac(0, &challenge()).expect_err("fails");
    assert_eq!(err, Error::Status(Status::ExecutionError));
    assert_eq!(chip.mac_count(), 0);
}

#[test]
fn attempt_limit_is_enforced() {
    let mut chip = fake();
    chip.set_mac_limit(Some(3));
    {
        let mut dev = driver(&mut chip);
        for _ in 0..3 {
            dev.mac(SLOT, &challenge()).expect("within limit");
        }
        for _ in 0..2 {
            let err = dev.mac(SLOT, &challenge()).expect_err("fails");
            assert_eq!(err, Error::Status(Status::ExecutionError));
        }
    }
    assert_eq!(chip.mac_count(), 3);
}

#[test]
fn busy_polling_within_execution_time() {
    let mut chip = fake();
    chip.set_busy_polls(40); // < 55 ms MAC budget
    assert_eq!(
        *driver(&mut chip).mac(SLOT, &challenge()).expect("mac"),
        DIGEST
    );
    assert_eq!(chip.mac_count(), 1);
}

#[test]
fn busy_longer_than_execution_time_times_out() {
    let mut chip = fake();
    chip.set_busy_polls(4);
    // Read allows 6 polls (5 ms + first).
    assert_eq!(driver(&mut chip).serial_number(), Ok(SERIAL));
    chip.set_busy_polls(60);
    assert_eq!(
        driver(&mut chip)
            .mac(SLOT, &challenge())
            .expect_err("fails"),
        Error::Timeout
    );
    // Timeouts are not retried: the chip executed the command once.
    assert_eq!(chip.mac_count(), 1);
}

#[test]
fn injected_bad_response_crc_is_recovered_by_retry() {
    let mut chip = fake();
    chip.corrupt_next_response_crc();
    assert_eq!(
        *driver(&mut chip).mac(SLOT, &challenge()).expect("mac"),
        DIGEST
    );
    // The lost first response still consumed a key use.
    assert_eq!(chip.mac_count(), 2);
    assert_eq!(chip.wake_count(), 2);
}

#[test]
fn injected_bad_crc_recovered_for_read_too() {
    let mut chip = fake();
    chip.corrupt_next_response_crc();
    assert_eq!(driver(&mut chip).serial_number(), Ok(SERIAL));
    assert_eq!(chip.commands_received(), 2);
}

#[test]
fn chip_side_crc_error_status_is_retried() {
    let mut chip = fake();
    chip.respond_next_with_status(0xFF);
    assert_eq!(
        *driver(&mut chip).mac(SLOT, &challenge()).expect("mac"),
        DIGEST
    );
    assert_eq!(chip.mac_count(), 1);
}

#[test]
fn injected_status_is_mapped() {
    let mut chip = fake();
    chip.respond_next_with_status(0x05);
    assert_eq!(
        driver(&mut chip)
            .mac(SLOT, &challenge())
            .expect_err("fails"),
        Error::Status(Status::EccFault)
    );
}

#[test]
fn injected_nacks_are_recovered() {
    let mut chip = fake();
    // The first wake-response reads are NACKed; the driver keeps polling.
    chip.nack_next(3);
    assert_eq!(driver(&mut chip).serial_number(), Ok(SERIAL));
}

#[test]
fn persistent_nacks_fail_without_hanging() {
    let mut chip = fake();
    chip.nack_next(u32::MAX);
    let err = driver(&mut chip).serial_number().expect_err("fails");
    assert_eq!(err, Error::NoWakeResponse);
}

#[test]
fn nacks_spanning_a_whole_attempt_are_recovered_by_retry() {
    let mut chip = fake();
    // Attempt 1: all 21 wake-response polls and the idle are NACKed (22
    // accesses). Attempt 2: three more NACKed polls, then success.
    chip.nack_next(25);
    assert_eq!(driver(&mut chip).serial_number(), Ok(SERIAL));
    // The chip woke on the first pulse and ignored the second one.
    assert_eq!(chip.wake_count(), 1);
    assert_eq!(chip.commands_received(), 1);
}

#[test]
fn recovers_after_watchdog_sleep_and_stale_awake_state() {
    let mut chip = fake();
    assert_eq!(driver(&mut chip).serial_number(), Ok(SERIAL));
    chip.force_sleep();
    assert_eq!(driver(&mut chip).serial_number(), Ok(SERIAL));

    // Leave the chip awake with a previous response in its buffer: the wake
    // pulse is ignored, the driver sees a stale group instead of 04 11 33 43,
    // idles the chip and succeeds on the retry.
    let mut dev = driver(&mut chip);
    assert_eq!(dev.serial_number(), Ok(SERIAL));
    let (chip_ref, _) = dev.release();
    embedded_hal::i2c::I2c::write(&mut *chip_ref, 0x00, &[]).expect_err("fails");
    assert_eq!(chip_ref.state(), PowerState::Awake);
    embedded_hal::i2c::I2c::write(&mut *chip_ref, DEFAULT_ADDRESS, &READ_BLOCK0_PACKET)
        .expect("command accepted");
    let before = chip_ref.wake_count();
    assert_eq!(driver(chip_ref).serial_number(), Ok(SERIAL));
    assert_eq!(chip.wake_count(), before + 1);
}

#[test]
fn wrong_address_is_a_wake_failure() {
    let mut chip = fake();
    let mut dev = Atecc608::new(&mut chip, NoopDelay::new(), 0x61);
    assert_eq!(dev.serial_number(), Err(Error::NoWakeResponse));
}

#[test]
fn fake_reports_nack_kinds() {
    let mut chip = fake();
    let mut buf = [0u8; 4];
    assert_eq!(
        embedded_hal::i2c::I2c::read(&mut chip, DEFAULT_ADDRESS, &mut buf),
        Err(ErrorKind::NoAcknowledge(NoAcknowledgeSource::Address))
    );
}

//! The ATECC608 driver against scripted bus transactions (`embedded-hal-mock`) and
//! against the behavioural fake chip, with known answers computed independently.

mod driver_mock;
mod fake_chip;
mod known_answers;
mod vectors;

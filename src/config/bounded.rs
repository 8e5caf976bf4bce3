//! Whole numbers that `berth.toml` may set only within a range, checked as the file is
//! parsed: a value out of range is a parse error that points at its line, and every use
//! of a setting gets a number its range guarantees, with no cast "because validated".

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A whole number in `MIN..=MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bounded<const MIN: u64, const MAX: u64>(u64);

impl<const MIN: u64, const MAX: u64> Bounded<MIN, MAX> {
    /// `value`, or why not (the message `berth.toml`'s error carries).
    pub fn new(value: u64) -> Result<Self, String> {
        if (MIN..=MAX).contains(&value) {
            Ok(Bounded(value))
        } else {
            Err(format!("must be {MIN} to {MAX}, got {value}"))
        }
    }

    /// A value known when compiling (the defaults): out of range does not compile.
    pub const fn of<const VALUE: u64>() -> Self {
        const { assert!(MIN <= VALUE && VALUE <= MAX, "out of range") };
        Bounded(VALUE)
    }

    pub const fn get(self) -> u64 {
        self.0
    }

    /// As a `usize`: every range here ends well below `u32::MAX`, so on the 32-bit
    /// boards too (a range that did not would not compile).
    pub const fn to_usize(self) -> usize {
        const { assert!(MAX <= u32::MAX as u64, "the range must fit a 32-bit usize") };
        self.0 as usize
    }

    /// As a `u32` (a range that does not fit would not compile).
    pub const fn to_u32(self) -> u32 {
        const { assert!(MAX <= u32::MAX as u64, "the range must fit a u32") };
        self.0 as u32
    }
}

impl<'de, const MIN: u64, const MAX: u64> Deserialize<'de> for Bounded<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Bounded::new(u64::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

impl<const MIN: u64, const MAX: u64> Serialize for Bounded<MIN, MAX> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Section {
        value: Bounded<16, 64>,
    }

    /// The range's ends are in, one past either is refused with the range and the value,
    /// and the error points at the line.
    #[test]
    fn a_value_out_of_range_is_refused_where_it_is_written() {
        for ok in [16, 40, 64] {
            let parsed: Section = toml::from_str(&format!("value = {ok}")).expect("in range");
            assert_eq!(parsed.value.get(), ok);
        }
        for bad in [0, 15, 65] {
            let error = toml::from_str::<Section>(&format!("\n\nvalue = {bad}"))
                .expect_err("out of range")
                .to_string();
            assert!(
                error.contains(&format!("must be 16 to 64, got {bad}")),
                "{error}"
            );
            assert!(error.contains("line 3"), "{error}");
        }
        assert!(toml::from_str::<Section>("value = -1").is_err());
        assert_eq!(
            Bounded::<1, 10>::new(11),
            Err("must be 1 to 10, got 11".into())
        );
        assert_eq!(Bounded::<1, 10>::of::<3>().to_usize(), 3);
    }
}

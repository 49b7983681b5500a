//! Sizes and durations: `RUCX_SEG_SIZE=64k`, `RUCX_KEEPALIVE_INTERVAL=20s`.

use super::ConfigValue;
use std::time::{Duration, Instant};

/// A size in bytes, or `auto` (the component decides) or `inf` (no limit).
///
/// Text: a decimal number with an optional binary suffix `b`, `k`/`kb`,
/// `m`/`mb`, `g`/`gb`, `t`/`tb` (case-insensitive, powers of 1024), or
/// `inf`, or `auto`. A size that does not fit 64 bits is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemUnits {
    /// Chosen by the component (e.g. from its performance model).
    Auto,
    /// Unlimited.
    Inf,
    /// This many bytes.
    Bytes(u64),
}

impl MemUnits {
    /// The size in bytes, with `auto` replaced by `auto` and `inf` by
    /// `u64::MAX`.
    pub fn bytes_or(self, auto: u64) -> u64 {
        match self {
            MemUnits::Auto => auto,
            MemUnits::Inf => u64::MAX,
            MemUnits::Bytes(n) => n,
        }
    }

    /// Like [`MemUnits::bytes_or`] for `usize`, saturating at `usize::MAX`.
    pub fn usize_or(self, auto: usize) -> usize {
        match self {
            MemUnits::Auto => auto,
            MemUnits::Inf => usize::MAX,
            MemUnits::Bytes(n) => usize::try_from(n).unwrap_or(usize::MAX),
        }
    }

    /// The number of bytes if one was given.
    pub fn bytes(self) -> Option<u64> {
        match self {
            MemUnits::Bytes(n) => Some(n),
            _ => None,
        }
    }

    /// Whether the value is `auto`.
    pub fn is_auto(self) -> bool {
        self == MemUnits::Auto
    }

    /// Whether the value is `inf`.
    pub fn is_inf(self) -> bool {
        self == MemUnits::Inf
    }
}

const SIZE_SUFFIXES: [(&str, u32); 10] = [
    ("", 0),
    ("b", 0),
    ("k", 10),
    ("kb", 10),
    ("m", 20),
    ("mb", 20),
    ("g", 30),
    ("gb", 30),
    ("t", 40),
    ("tb", 40),
];

impl ConfigValue for MemUnits {
    const KIND: &'static str = "memunits";
    const SYNTAX: &'static str =
        "memory units: <number>[b|kb|mb|gb|tb] (powers of 1024), \"inf\", or \"auto\"";

    fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim().to_ascii_lowercase();
        match t.as_str() {
            "auto" => return Ok(MemUnits::Auto),
            "inf" => return Ok(MemUnits::Inf),
            _ => {}
        }
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (digits, suffix) = t.split_at(split);
        if digits.is_empty() {
            return Err("expected <number>[b|kb|mb|gb|tb], \"inf\" or \"auto\"".to_string());
        }
        let shift = match SIZE_SUFFIXES.iter().find(|(s, _)| *s == suffix) {
            Some(&(_, shift)) => shift,
            None => return Err(format!("unknown size unit {suffix:?}")),
        };
        let number: u64 = digits
            .parse()
            .map_err(|_| "size does not fit 64 bits".to_string())?;
        number
            .checked_mul(1u64 << shift)
            .map(MemUnits::Bytes)
            .ok_or_else(|| "size does not fit 64 bits".to_string())
    }

    fn to_text(&self) -> String {
        match *self {
            MemUnits::Auto => "auto".to_string(),
            MemUnits::Inf => "inf".to_string(),
            MemUnits::Bytes(0) => "0".to_string(),
            MemUnits::Bytes(n) => {
                for (unit, shift) in [("T", 40), ("G", 30), ("M", 20), ("K", 10)] {
                    if n % (1u64 << shift) == 0 {
                        return format!("{}{unit}", n >> shift);
                    }
                }
                n.to_string()
            }
        }
    }
}

/// A duration, or `inf` (never).
///
/// Text: a decimal number (fraction allowed) with a unit `s`, `ms`, `us`,
/// `ns` or `m` (minutes); a bare number is seconds, like UCX. `inf` is
/// [`Time::INF`], stored as [`Duration::MAX`]: add it to an [`Instant`] with
/// [`Time::deadline_after`], never with `+`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(pub Duration);

impl Time {
    /// Never.
    pub const INF: Time = Time(Duration::MAX);

    /// Whether this is [`Time::INF`].
    pub fn is_inf(self) -> bool {
        self == Time::INF
    }

    /// The duration; `Duration::MAX` for `inf`.
    pub fn as_duration(self) -> Duration {
        self.0
    }

    /// The duration, or `None` for `inf`.
    pub fn finite(self) -> Option<Duration> {
        (!self.is_inf()).then_some(self.0)
    }

    /// `now + self`, or `None` for `inf` or when the sum overflows.
    pub fn deadline_after(self, now: Instant) -> Option<Instant> {
        now.checked_add(self.finite()?)
    }
}

impl From<Duration> for Time {
    fn from(d: Duration) -> Time {
        Time(d)
    }
}

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Units and their length in nanoseconds; longest names first so that "ms"
/// is not read as "m".
const TIME_UNITS: [(&str, u128); 5] = [
    ("ms", 1_000_000),
    ("us", 1_000),
    ("ns", 1),
    ("s", NANOS_PER_SEC),
    ("m", 60 * NANOS_PER_SEC),
];

impl ConfigValue for Time {
    const KIND: &'static str = "time";
    const SYNTAX: &'static str =
        "time: <number>[s|ms|us|ns|m] (seconds without a unit), or \"inf\"";

    fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim().to_ascii_lowercase();
        if t == "inf" {
            return Ok(Time::INF);
        }
        let split = t
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let nanos_per_unit = if unit.is_empty() {
            NANOS_PER_SEC
        } else {
            match TIME_UNITS.iter().find(|(u, _)| *u == unit) {
                Some(&(_, n)) => n,
                None => return Err(format!("unknown time unit {unit:?}")),
            }
        };
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        if int_part.is_empty() && frac_part.is_empty() || frac_part.contains('.') {
            return Err("expected <number>[s|ms|us|ns|m] or \"inf\"".to_string());
        }
        let too_long = || "duration too long".to_string();
        let int: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| too_long())?
        };
        let mut nanos = int.checked_mul(nanos_per_unit).ok_or_else(too_long)?;
        // The fraction, exactly, to the nanosecond (digits beyond that are
        // truncated: no unit is longer than 10^11 ns, so 20 digits suffice).
        let mut scale = nanos_per_unit;
        for d in frac_part.bytes().take(20) {
            nanos = nanos.saturating_add(u128::from(d - b'0') * scale / 10);
            scale /= 10;
            if scale == 0 {
                break;
            }
        }
        let secs = u64::try_from(nanos / NANOS_PER_SEC).map_err(|_| too_long())?;
        let sub = (nanos % NANOS_PER_SEC) as u32;
        Ok(Time(Duration::new(secs, sub)))
    }

    fn to_text(&self) -> String {
        if self.is_inf() {
            return "inf".to_string();
        }
        let nanos = self.0.as_nanos();
        if nanos == 0 {
            return "0s".to_string();
        }
        for (unit, per) in [("s", NANOS_PER_SEC), ("ms", 1_000_000), ("us", 1_000)] {
            if nanos % per == 0 {
                return format!("{}{unit}", nanos / per);
            }
        }
        format!("{nanos}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memunits_parse() {
        let b = MemUnits::Bytes;
        assert_eq!(MemUnits::parse("0"), Ok(b(0)));
        assert_eq!(MemUnits::parse("100"), Ok(b(100)));
        assert_eq!(MemUnits::parse("100b"), Ok(b(100)));
        assert_eq!(MemUnits::parse("8k"), Ok(b(8192)));
        assert_eq!(MemUnits::parse("8K"), Ok(b(8192)));
        assert_eq!(MemUnits::parse("8kb"), Ok(b(8192)));
        assert_eq!(MemUnits::parse("8KB"), Ok(b(8192)));
        assert_eq!(MemUnits::parse("1m"), Ok(b(1 << 20)));
        assert_eq!(MemUnits::parse("1MB"), Ok(b(1 << 20)));
        assert_eq!(MemUnits::parse("2g"), Ok(b(2 << 30)));
        assert_eq!(MemUnits::parse("3tb"), Ok(b(3 << 40)));
        assert_eq!(MemUnits::parse(" 64k "), Ok(b(65536)));
        assert_eq!(MemUnits::parse("inf"), Ok(MemUnits::Inf));
        assert_eq!(MemUnits::parse("INF"), Ok(MemUnits::Inf));
        assert_eq!(MemUnits::parse("auto"), Ok(MemUnits::Auto));
        assert_eq!(MemUnits::parse("18446744073709551615"), Ok(b(u64::MAX)));
    }

    #[test]
    fn memunits_errors() {
        for t in [
            "",
            "k",
            "-1",
            "1.5k",
            "8x",
            "8kk",
            "8 k",
            "infinity",
            "0x10",
            "1e3",
            "18446744073709551616",
            "16777216t",
            "99999999999999999999999",
        ] {
            assert!(MemUnits::parse(t).is_err(), "{t:?}");
        }
        assert!(MemUnits::parse("16777216t")
            .unwrap_err()
            .contains("64 bits"));
    }

    #[test]
    fn memunits_text_round_trips() {
        for v in [0, 1, 1000, 1024, 65536, 3 << 20, 5 << 30, 7 << 40, u64::MAX] {
            let m = MemUnits::Bytes(v);
            assert_eq!(MemUnits::parse(&m.to_text()), Ok(m), "{v}");
        }
        assert_eq!(MemUnits::Bytes(65536).to_text(), "64K");
        assert_eq!(MemUnits::Bytes(1000).to_text(), "1000");
        assert_eq!(MemUnits::Inf.to_text(), "inf");
        assert_eq!(MemUnits::Auto.to_text(), "auto");
    }

    #[test]
    fn memunits_helpers() {
        assert_eq!(MemUnits::Auto.bytes_or(7), 7);
        assert_eq!(MemUnits::Inf.bytes_or(7), u64::MAX);
        assert_eq!(MemUnits::Bytes(3).bytes_or(7), 3);
        assert_eq!(MemUnits::Inf.usize_or(1), usize::MAX);
        assert_eq!(MemUnits::Bytes(9).usize_or(1), 9);
        assert_eq!(MemUnits::Bytes(9).bytes(), Some(9));
        assert_eq!(MemUnits::Auto.bytes(), None);
        assert!(MemUnits::Auto.is_auto() && !MemUnits::Inf.is_auto());
        assert!(MemUnits::Inf.is_inf() && !MemUnits::Bytes(0).is_inf());
    }

    fn d(s: u64, n: u32) -> Time {
        Time(Duration::new(s, n))
    }

    #[test]
    fn time_parse() {
        assert_eq!(Time::parse("10s"), Ok(d(10, 0)));
        assert_eq!(Time::parse("10"), Ok(d(10, 0)));
        assert_eq!(Time::parse("1ms"), Ok(d(0, 1_000_000)));
        assert_eq!(Time::parse("20us"), Ok(d(0, 20_000)));
        assert_eq!(Time::parse("500ns"), Ok(d(0, 500)));
        assert_eq!(Time::parse("1.5s"), Ok(d(1, 500_000_000)));
        assert_eq!(Time::parse("0.1s"), Ok(d(0, 100_000_000)));
        assert_eq!(Time::parse(".25ms"), Ok(d(0, 250_000)));
        assert_eq!(Time::parse("2."), Ok(d(2, 0)));
        assert_eq!(Time::parse("1.0000000019s"), Ok(d(1, 1)));
        assert_eq!(Time::parse("2m"), Ok(d(120, 0)));
        assert_eq!(Time::parse(" 3MS "), Ok(d(0, 3_000_000)));
        assert_eq!(Time::parse("0"), Ok(d(0, 0)));
        assert_eq!(Time::parse("inf"), Ok(Time::INF));
        assert_eq!(Time::parse("Inf"), Ok(Time::INF));
    }

    #[test]
    fn time_errors() {
        for t in [
            "",
            "s",
            ".",
            ".s",
            "1..2s",
            "1.2.3s",
            "-1s",
            "1h",
            "10 s",
            "1sec",
            "1e3s",
            "99999999999999999999999999999999999999999999s",
            "18446744073709551616s",
        ] {
            assert!(Time::parse(t).is_err(), "{t:?}");
        }
    }

    #[test]
    fn time_text_round_trips() {
        for t in [
            d(0, 0),
            d(5, 0),
            d(0, 3_000_000),
            d(0, 7_000),
            d(1, 1),
            d(u64::MAX, 0),
        ] {
            assert_eq!(Time::parse(&t.to_text()), Ok(t), "{t:?}");
        }
        assert_eq!(Time::INF.to_text(), "inf");
        assert_eq!(d(0, 1_500_000).to_text(), "1500us");
        assert_eq!(d(0, 0).to_text(), "0s");
    }

    #[test]
    fn time_deadline() {
        let now = Instant::now();
        assert_eq!(Time::INF.deadline_after(now), None);
        assert_eq!(
            d(1, 0).deadline_after(now),
            Some(now + Duration::from_secs(1))
        );
        assert_eq!(d(u64::MAX, 0).deadline_after(now), None);
        assert_eq!(Time::INF.finite(), None);
        assert!(Time::INF.is_inf());
    }
}

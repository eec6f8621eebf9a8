//! The configuration grammar that the `#[robust]` attribute (at compile time) and
//! `retry_runtime` (at run time) share, so that both read every value the same way.
//!
//! Durations are written three ways (reference design, sections 2 and 11):
//! - a string in humantime's grammar: `"2s"`, `"150ms"`, `"1m 30s"`, or a number of seconds
//!   as a string (`"0.5"`), read by [`parse_duration`];
//! - a bare number of seconds: `2`, `0.5`, read by [`from_secs`];
//! - a number with a unit suffix: `150ms`, `2s`, `1m`, `1h`, `500us`, `10ns`, read by
//!   [`from_number`]. [`SUFFIXES`] lists the units.
//!
//! Nothing here panics, whatever the input: values too large for a [`Duration`] (or beyond
//! [`MAX_SECS`]) are errors.

#![warn(missing_docs)]

mod text;

use std::fmt;
use std::time::Duration;

/// The largest duration any setting accepts, in seconds (about 31.7 billion years). Larger
/// values are rejected before they reach humantime, which would overflow on some of them.
pub const MAX_SECS: f64 = 1e18;

/// [`MAX_SECS`] as a [`Duration`]: what an integer or a humantime string is compared with,
/// exactly (a number with a fraction or an exponent is compared as the nearest `f64`).
pub(crate) const MAX: Duration = Duration::from_secs(1_000_000_000_000_000_000);

/// The unit suffixes a number may carry, with the nanoseconds in one unit.
pub const SUFFIXES: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// The default backoff's first delay (`exponential(base = "100ms", max = "20s", m = 2)`, with
/// full jitter): the attribute's checks and the runtime's `Exponential::DEFAULT` read it here.
pub const DEFAULT_BASE: Duration = Duration::from_millis(100);

/// The default backoff's longest delay: see [`DEFAULT_BASE`].
pub const DEFAULT_MAX: Duration = Duration::from_secs(20);

/// How late tokio's timer may fire: it rounds a wait up to its next millisecond tick, and its
/// driver, which counts the time to that tick from the last whole millisecond, may sleep up
/// to one more. An async call makes no retry whose backoff would end closer than this to its
/// deadline: the runtime's `DefaultEnv::async_resolution` and the attribute's check of an
/// async fn's backoff read it here.
pub const TOKIO_TIMER_LATENESS: Duration = Duration::from_millis(2);

/// The suffixes as the attribute's messages list them: "`ns`, `us`, `ms`, `s`, `m`, `h`".
pub const SUFFIX_LIST: &str = "`ns`, `us`, `ms`, `s`, `m`, `h`";

/// Why a duration could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurationError {
    /// Negative (where a negative value is not taken to mean "infinite").
    Negative,
    /// NaN or infinite.
    NotFinite,
    /// Larger than [`MAX_SECS`] or than a [`Duration`] can hold.
    TooLarge,
    /// A suffix that is not one of [`SUFFIXES`].
    UnknownSuffix,
    /// Not a humantime string nor a number.
    Syntax,
    /// The unit `M` in a string: humantime reads it as months (30.44 days), where `10M` is
    /// more often meant as minutes (`m`), and the attribute refuses `10M` written as a number.
    AmbiguousMonth,
    /// Above zero but below half a nanosecond: it would round to 0, which means something else
    /// (no wait, no retry) than the tiny value written.
    BelowNanosecond,
}

impl DurationError {
    /// The rule broken, as a phrase that follows "invalid `timeout`: ".
    pub const fn rule(self) -> &'static str {
        match self {
            DurationError::Negative => "must not be negative",
            DurationError::NotFinite => "must be a finite number of seconds",
            DurationError::TooLarge => "is too large (at most 10^18 seconds)",
            DurationError::UnknownSuffix => {
                "the unit must be one of `ns`, `us`, `ms`, `s`, `m`, `h`"
            }
            DurationError::Syntax => {
                "must be a humantime string like \"2s\", \"150ms\" or \"1m 30s\", or a number of seconds"
            }
            DurationError::AmbiguousMonth => {
                "uses the unit `M`, which humantime reads as months (30.44 days): write `m` for minutes, or `months`"
            }
            DurationError::BelowNanosecond => {
                "is above 0 but below half a nanosecond, so it would round to 0: write at least `1ns`, or 0 itself"
            }
        }
    }
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rule())
    }
}

impl std::error::Error for DurationError {}

/// A duration of `secs` seconds, rounded to the nearest nanosecond. Errors: NaN, infinite,
/// negative, above [`MAX_SECS`], or above 0 but rounding to 0. `-0.0` is zero: the sign is the
/// value's.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(retry_grammar::from_secs(0.25), Ok(Duration::from_millis(250)));
/// assert_eq!(retry_grammar::from_secs(-0.0), Ok(Duration::ZERO));
/// assert!(retry_grammar::from_secs(-1.0).is_err());
/// assert!(retry_grammar::from_secs(1e-10).is_err());
/// ```
pub fn from_secs(secs: f64) -> Result<Duration, DurationError> {
    if !secs.is_finite() {
        return Err(DurationError::NotFinite);
    }
    if secs < 0.0 {
        return Err(DurationError::Negative);
    }
    if secs > MAX_SECS {
        return Err(DurationError::TooLarge);
    }
    // Round to the nearest nanosecond, so that 0.15 s is 150 ms and not 149.999999 ms.
    let whole = secs.trunc();
    let nanos = ((secs - whole) * 1e9).round();
    let (whole, nanos) = if nanos >= 1e9 {
        (whole + 1.0, 0.0)
    } else {
        (whole, nanos)
    };
    // A value above zero that rounds to none is not the value written.
    if secs > 0.0 && whole == 0.0 && nanos == 0.0 {
        return Err(DurationError::BelowNanosecond);
    }
    // Both are in range: whole <= MAX_SECS < u64::MAX, 0 <= nanos < 1e9.
    Ok(Duration::new(whole as u64, nanos as u32))
}

/// A duration written as a number with a unit suffix, as the attribute reads `150ms` or
/// `1.5s`: `digits` are the literal's decimal digits without the sign (`"150"`, `"1.5"`,
/// `"1e3"`), `suffix` one of [`SUFFIXES`] (empty means seconds).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(retry_grammar::from_number("150", "ms"), Ok(Duration::from_millis(150)));
/// assert_eq!(retry_grammar::from_number("1.5", "s"), Ok(Duration::from_millis(1500)));
/// assert_eq!(retry_grammar::from_number("2", ""), Ok(Duration::from_secs(2)));
/// assert!(retry_grammar::from_number("2", "min").is_err());
/// ```
pub fn from_number(digits: &str, suffix: &str) -> Result<Duration, DurationError> {
    let unit = if suffix.is_empty() {
        1_000_000_000
    } else {
        SUFFIXES
            .iter()
            .find(|(s, _)| *s == suffix)
            .map(|(_, n)| *n)
            .ok_or(DurationError::UnknownSuffix)?
    };
    // Integers are read exactly.
    if let Ok(n) = digits.parse::<u128>() {
        let nanos = n
            .checked_mul(u128::from(unit))
            .ok_or(DurationError::TooLarge)?;
        if nanos > MAX.as_nanos() {
            return Err(DurationError::TooLarge);
        }
        let secs = nanos / 1_000_000_000;
        return Ok(Duration::new(secs as u64, (nanos % 1_000_000_000) as u32));
    }
    let v: f64 = digits.parse().map_err(|_| DurationError::Syntax)?;
    // (`-1e-9999` is negative, though it reads as `-0.0`.)
    if v.is_sign_negative() && (v != 0.0 || written_above_zero(digits)) {
        return Err(DurationError::Negative);
    }
    let secs = v * (unit as f64 / 1e9);
    // A value written above 0 that is 0 as a float (`1e-9999`, below its range) rounds to
    // no nanosecond either.
    if secs == 0.0 && written_above_zero(digits) {
        return Err(DurationError::BelowNanosecond);
    }
    from_secs(secs)
}

/// Whether a number written in decimal (`"1.5"`, `"-2e-9999"`) has a digit other than 0
/// before its exponent: it is not 0, even where it reads as 0 as a float.
///
/// ```
/// assert!(retry_grammar::written_above_zero("1e-9999"));
/// assert!(!retry_grammar::written_above_zero("0.0e5"));
/// ```
pub fn written_above_zero(digits: &str) -> bool {
    digits
        .split(['e', 'E'])
        .next()
        .is_some_and(|m| m.bytes().any(|b| matches!(b, b'1'..=b'9')))
}

/// Parses a duration written as a string: a humantime string (`"2s"`, `"150ms"`,
/// `"1m 30s"`) or a number of seconds (`"1"`, `"0.5"`). Surrounding spaces are ignored; the
/// sign is the value's (`"-0"` and `"-0s"` are zero); negative, NaN, infinite and too large
/// values are errors. No input panics: sums humantime would overflow on are rejected before
/// it sees them.
///
/// ```
/// use std::time::Duration;
/// use retry_grammar::{parse_duration, DurationError};
/// assert_eq!(parse_duration("1m 30s"), Ok(Duration::from_secs(90)));
/// assert_eq!(parse_duration("0.25"), Ok(Duration::from_millis(250)));
/// assert_eq!(parse_duration("-1"), Err(DurationError::Negative));
/// assert_eq!(parse_duration("18446744073709551615s 1000000000ns"), Err(DurationError::TooLarge));
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    text::parse(s)
}

/// A duration as the messages write it: `"1s 500ms"`.
pub fn format(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn strings() {
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("150ms"), Ok(Duration::from_millis(150)));
        assert_eq!(parse_duration(" 3 "), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("1e-3"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_duration("-0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0.15"), Ok(Duration::from_millis(150)));
        for s in [
            "NaN",
            "inf",
            "-inf",
            "1e300",
            "-0.5",
            "",
            "2 parsecs",
            "-1s",
        ] {
            assert!(parse_duration(s).is_err(), "{s:?} accepted");
        }
    }

    #[test]
    fn overflowing_strings_are_errors_not_panics() {
        for s in [
            "18446744073709551615s 1000000000ns",
            "18446744073709551615s 999999999ns 1ns",
            "99999999999999999999999999999y",
            "584942417355y",
            "1000000000000000000000000000000000000000000000000000000000000000000ns",
        ] {
            assert_eq!(parse_duration(s), Err(DurationError::TooLarge), "{s}");
        }
    }

    /// The bound is exact for integers and humantime strings, which an `f64` would round to
    /// it (10^18 + 1 is 10^18 as an `f64`).
    #[test]
    fn just_above_the_largest_value_is_an_error() {
        let max = Duration::from_secs(1_000_000_000_000_000_000);
        for (digits, suffix) in [
            ("1000000000000000001", "s"),
            ("1000000000000000001", ""),
            ("1000000000000000000000000001", "ns"),
        ] {
            assert_eq!(
                from_number(digits, suffix),
                Err(DurationError::TooLarge),
                "{digits}{suffix}"
            );
        }
        assert_eq!(from_number("1000000000000000000", "s"), Ok(max));
        assert_eq!(from_number("1000000000000000000000000000", "ns"), Ok(max));
        for s in [
            "1000000000000000001",
            "1000000000000000001s",
            "1000000000000000065s",
            "1000000000000000000s 1ns",
        ] {
            assert_eq!(parse_duration(s), Err(DurationError::TooLarge), "{s}");
        }
        assert_eq!(parse_duration("1000000000000000000"), Ok(max));
        assert_eq!(parse_duration("1000000000000000000s"), Ok(max));
    }

    #[test]
    fn numbers_with_units() {
        assert_eq!(from_number("150", "ms"), Ok(Duration::from_millis(150)));
        assert_eq!(from_number("500", "us"), Ok(Duration::from_micros(500)));
        assert_eq!(from_number("10", "ns"), Ok(Duration::from_nanos(10)));
        assert_eq!(from_number("1", "m"), Ok(Duration::from_secs(60)));
        assert_eq!(from_number("1", "h"), Ok(Duration::from_secs(3600)));
        assert_eq!(from_number("0.15", ""), Ok(Duration::from_millis(150)));
        assert_eq!(from_number("1e3", "ms"), Ok(Duration::from_secs(1)));
        assert_eq!(from_number("1.5", "h"), Ok(Duration::from_secs(5400)));
        assert_eq!(from_number("2", "min"), Err(DurationError::UnknownSuffix));
        assert_eq!(from_number("2", "f32"), Err(DurationError::UnknownSuffix));
        assert_eq!(
            from_number("340282366920938463463374607431768211455", "h"),
            Err(DurationError::TooLarge)
        );
        assert_eq!(from_number("1e309", "s"), Err(DurationError::NotFinite));
    }

    /// A value above zero that rounds to no nanosecond is an error, not 0 (which means no
    /// wait, or no retry); half a nanosecond and up rounds to one.
    #[test]
    fn a_value_that_rounds_to_zero_is_refused() {
        for d in [
            from_secs(1e-10),
            from_secs(4e-10),
            from_secs(f64::MIN_POSITIVE),
            from_number("0.1", "ns"),
            from_number("0.0004", "us"),
            from_number("1e-320", ""),
            from_number("1e-9999", ""),
            from_number("1e-310", "ns"),
            parse_duration("1e-12"),
            parse_duration("1e-9999"),
        ] {
            assert_eq!(d, Err(DurationError::BelowNanosecond));
        }
        assert_eq!(from_secs(6e-10), Ok(Duration::from_nanos(1)));
        assert_eq!(from_number("0.6", "ns"), Ok(Duration::from_nanos(1)));
        assert_eq!(from_number("0.0", "s"), Ok(Duration::ZERO));
        assert_eq!(from_secs(0.0), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(from_number("0e-9999", ""), Ok(Duration::ZERO));
        assert_eq!(parse_duration("-0e5"), Ok(Duration::ZERO));
        // A negative number, however small, is negative.
        assert_eq!(parse_duration("-1e-9999"), Err(DurationError::Negative));
        assert_eq!(from_number("-1e-9999", ""), Err(DurationError::Negative));
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in ".{0,40}") {
            let _ = parse_duration(&s);
        }

        #[test]
        fn number_unit_pairs_never_panic(pairs in proptest::collection::vec(
            (any::<u64>(), prop::sample::select(vec![
                "ns", "us", "µs", "ms", "s", "sec", "m", "min", "h", "d", "w", "M", "y", "parsec",
            ])),
            1..4,
        )) {
            let s: Vec<String> = pairs.iter().map(|(n, u)| format!("{n}{u}")).collect();
            let _ = parse_duration(&s.join(" "));
        }

        #[test]
        fn from_number_never_panics(digits in "[0-9]{1,40}(\\.[0-9]{0,5})?(e[0-9]{1,3})?",
                                     suffix in prop::sample::select(vec!["", "ns", "us", "ms", "s", "m", "h", "x"])) {
            let _ = from_number(&digits, suffix);
        }

        #[test]
        fn integers_with_units_are_exact(n in 0u64..1_000_000_000, i in 0usize..6) {
            let (suffix, unit) = SUFFIXES[i];
            let d = from_number(&n.to_string(), suffix).unwrap();
            prop_assert_eq!(d.as_nanos(), u128::from(n) * u128::from(unit));
        }
    }
}

//! Durations written as text: the grammar behind [`parse_duration`](crate::parse_duration),
//! which the attribute reads at compile time and the runtime at run time.
//!
//! The grammar: surrounding whitespace is ignored; a number is a number of seconds (`"2"`,
//! `"0.5"`, `"1e-3"`); anything else is a humantime string (`"2s"`, `"150ms"`, `"1m 30s"`).
//! A leading `-` is the value's sign: `"-0"` and `"-0s"` are zero, any other negative value is
//! an error. Values above 10^18 seconds are errors, checked *before* humantime sees the text,
//! since humantime panics on some sums that overflow (`"18446744073709551615s 1000000000ns"`).
//! No input panics.

use std::time::Duration;

use crate::{DurationError, MAX_SECS};

/// The rule broken by a negative value.
pub(crate) const NEGATIVE: DurationError = DurationError::Negative;
/// The rule broken by a value above [`MAX_SECS`].
pub(crate) const TOO_LARGE: DurationError = DurationError::TooLarge;
/// The rule broken by `NaN` or an infinite number.
pub(crate) const NOT_FINITE: DurationError = DurationError::NotFinite;
/// The rule broken by text that is neither a number nor a humantime string.
pub(crate) const MALFORMED: DurationError = DurationError::Syntax;

/// Parses a duration written as text (see the module documentation for the grammar). Never
/// panics.
pub(crate) fn parse(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    // An integer is read exactly: as an `f64`, 10^18 + 1 would be 10^18.
    if let Ok(whole) = t.parse::<u128>() {
        return match u64::try_from(whole) {
            Ok(secs) if secs <= crate::MAX.as_secs() => Ok(Duration::from_secs(secs)),
            _ => Err(TOO_LARGE),
        };
    }
    if let Ok(secs) = t.parse::<f64>() {
        return if secs.is_nan() || secs.is_infinite() {
            Err(NOT_FINITE)
        } else if secs == 0.0 && crate::written_above_zero(t) {
            // Written above or below 0, and 0 as a float (`1e-9999`, below its range).
            if t.starts_with('-') {
                Err(NEGATIVE)
            } else {
                Err(DurationError::BelowNanosecond)
            }
        } else if secs == 0.0 {
            // `-0` included: the sign is the value's, and zero has none.
            Ok(Duration::ZERO)
        } else if secs < 0.0 {
            Err(NEGATIVE)
        } else if secs > MAX_SECS {
            Err(TOO_LARGE)
        } else {
            crate::from_secs(secs)
        };
    }
    // A humantime string with a sign: only zero may be negative.
    let (negative, unsigned) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t),
    };
    if estimate_secs(unsigned) > MAX_SECS {
        return Err(TOO_LARGE);
    }
    // `M` alone is humantime's month; `"10M"` is more often a typo for minutes.
    if unsigned
        .split(|c: char| !(c.is_ascii_alphabetic() || c == 'µ'))
        .any(|unit| unit == "M")
    {
        return Err(DurationError::AmbiguousMonth);
    }
    match humantime::parse_duration(unsigned) {
        Ok(d) if negative && !d.is_zero() => Err(NEGATIVE),
        // (The estimate above is an `f64`: it lets through sums just above the bound.)
        Ok(d) if d > crate::MAX => Err(TOO_LARGE),
        Ok(d) => Ok(d),
        Err(_) => Err(MALFORMED),
    }
}

/// An upper bound of the seconds humantime adds up in `text`, found by scanning its
/// number-and-unit pairs the way humantime reads them: digits (whitespace between digits is
/// skipped), an optional `.` and fraction, then a unit made of letters. A missing or unknown
/// unit counts with the largest multiplier (a year), so the bound never falls short; a number
/// with too many digits for an `f64` makes it infinite. Scanning stops at the first character
/// humantime would reject (humantime then reports the error itself).
pub(crate) fn estimate_secs(text: &str) -> f64 {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut total = 0.0_f64;
    let skip_space = |i: &mut usize| {
        while let Some(c) = text[*i..].chars().next().filter(|c| c.is_whitespace()) {
            *i += c.len_utf8();
        }
    };
    loop {
        skip_space(&mut i);
        if !bytes.get(i).is_some_and(u8::is_ascii_digit) {
            return total;
        }
        let mut value = 0.0_f64;
        // The integer part; humantime skips whitespace inside a number ("1 000s").
        loop {
            match bytes.get(i) {
                Some(b) if b.is_ascii_digit() => {
                    value = value * 10.0 + f64::from(b - b'0');
                    i += 1;
                }
                _ => {
                    let before = i;
                    skip_space(&mut i);
                    if i == before || !bytes.get(i).is_some_and(u8::is_ascii_digit) {
                        break;
                    }
                }
            }
        }
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            let mut scale = 0.1;
            while let Some(b) = bytes.get(i).filter(|b| b.is_ascii_digit()) {
                value += f64::from(b - b'0') * scale;
                scale /= 10.0;
                i += 1;
            }
        }
        let start = i;
        while let Some(c) = text[i..]
            .chars()
            .next()
            .filter(|c| c.is_ascii_alphabetic() || *c == 'µ')
        {
            i += c.len_utf8();
        }
        total += value * unit_secs(&text[start..i]);
    }
}

/// Seconds per unit, as humantime defines its units; the largest for an unknown one.
fn unit_secs(unit: &str) -> f64 {
    const YEAR: f64 = 31_557_600.0;
    match unit {
        "nanos" | "nsec" | "ns" => 1e-9,
        "usec" | "us" | "µs" => 1e-6,
        "millis" | "msec" | "ms" => 1e-3,
        "seconds" | "second" | "secs" | "sec" | "s" => 1.0,
        "minutes" | "minute" | "min" | "mins" | "m" => 60.0,
        "hours" | "hour" | "hr" | "hrs" | "h" => 3600.0,
        "days" | "day" | "d" => 86_400.0,
        "weeks" | "week" | "wk" | "wks" | "w" => 604_800.0,
        "months" | "month" | "M" => 2_630_016.0,
        _ => YEAR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn numbers_and_humantime_strings() {
        assert_eq!(parse("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse(" 1m 30s "), Ok(Duration::from_secs(90)));
        assert_eq!(parse("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1 000ms"), Ok(Duration::from_secs(1)));
        assert_eq!(parse("1.5h"), Ok(Duration::from_secs(5400)));
        for unit in [
            "ns", "us", "µs", "ms", "s", "m", "h", "d", "w", "months", "y",
        ] {
            assert!(parse(&format!("7{unit}")).is_ok(), "{unit}");
        }
        // `M` alone (humantime's month) is refused: it is more often meant as minutes.
        for text in ["10M", "1h 10M", " 2 M", "-0M"] {
            assert_eq!(parse(text), Err(DurationError::AmbiguousMonth), "{text}");
        }
        assert_eq!(parse("1month"), Ok(Duration::from_secs(2_630_016)));
    }

    #[test]
    fn the_sign_is_the_values() {
        for zero in ["-0", "-0.0", "-0s", "-0ms", "0", "0s"] {
            assert_eq!(parse(zero), Ok(Duration::ZERO), "{zero:?}");
        }
        for negative in ["-1", "-0.5", "-1s", "-1m 30s", "-1e-9"] {
            assert_eq!(parse(negative), Err(NEGATIVE), "{negative:?}");
        }
        assert_eq!(parse("--0s"), Err(MALFORMED));
    }

    #[test]
    fn overflowing_sums_are_rejected_before_humantime() {
        // humantime panics on this one ("overflow in Duration::new").
        assert_eq!(parse("18446744073709551615s 1000000000ns"), Err(TOO_LARGE));
        assert_eq!(parse("18446744073709551615s"), Err(TOO_LARGE));
        assert_eq!(parse("1000000001000000000s"), Err(TOO_LARGE));
        assert_eq!(parse("99999999999y"), Err(TOO_LARGE));
        assert_eq!(parse(&format!("{}s", "9".repeat(400))), Err(TOO_LARGE));
        assert_eq!(parse("1e19"), Err(TOO_LARGE));
        assert_eq!(
            parse("1000000000000000000s"),
            Ok(Duration::from_secs(1_000_000_000_000_000_000))
        );
        // An unknown unit counts as the largest: still an error, but humantime's.
        assert_eq!(parse("5 parsecs"), Err(MALFORMED));
        assert_eq!(parse("NaN"), Err(NOT_FINITE));
        assert_eq!(parse("-inf"), Err(NOT_FINITE));
        assert_eq!(parse(""), Err(MALFORMED));
    }

    #[test]
    fn the_estimate_bounds_what_humantime_finds() {
        for text in ["1h 30m", "2 days 4.5h", "1 2s", "3ms4us", "10µs", "1.25M"] {
            let d = humantime::parse_duration(text).unwrap();
            assert!(
                estimate_secs(text) >= d.as_secs_f64() * (1.0 - 1e-12),
                "{text}"
            );
        }
    }

    const UNITS: &[&str] = &[
        "nsec", "ns", "usec", "us", "µs", "msec", "ms", "seconds", "second", "sec", "s", "minutes",
        "minute", "min", "m", "hours", "hour", "hr", "h", "days", "day", "d", "weeks", "week", "w",
        "months", "month", "M", "years", "year", "y", "", "x", "nanos", "millis",
    ];

    proptest! {
        #[test]
        fn no_string_panics(text in any::<String>()) {
            let _ = crate::parse_duration(&text);
        }

        #[test]
        fn no_duration_like_string_panics(text in "[-0-9 .µa-zA-Z]{0,40}") {
            let _ = crate::parse_duration(&text);
        }

        #[test]
        fn no_pairs_panic(
            pairs in prop::collection::vec(
                (any::<u64>(), prop::sample::select(UNITS), prop::sample::select(&[" ", "", "  "][..])),
                1..5,
            ),
            fraction in prop::option::of(0u32..1000),
            sign in prop::bool::ANY,
        ) {
            let mut text = String::from(if sign { "-" } else { "" });
            for (i, (n, unit, sep)) in pairs.iter().enumerate() {
                text.push_str(&n.to_string());
                if let (0, Some(f)) = (i, fraction) {
                    text.push_str(&format!(".{f}"));
                }
                text.push_str(unit);
                text.push_str(sep);
            }
            match parse(&text) {
                Ok(d) => prop_assert!(d.as_secs_f64() <= MAX_SECS * (1.0 + 1e-9)),
                Err(rule) => prop_assert!(
                    [NEGATIVE, TOO_LARGE, MALFORMED, DurationError::AmbiguousMonth].contains(&rule)
                ),
            }
        }

        #[test]
        fn small_pairs_agree_with_humantime(
            pairs in prop::collection::vec((0u64..1_000_000, prop::sample::select(UNITS)), 1..4),
        ) {
            let text: String = pairs.iter().map(|(n, u)| format!("{n}{u} ")).collect();
            // A bare number is a number of seconds here, an error for humantime.
            prop_assume!(text.trim().parse::<f64>().is_err());
            let theirs = humantime::parse_duration(text.trim()).ok();
            match parse(&text) {
                // Numbers run together across spaces ("5 100000y") can pass the bound, and a
                // number without a unit counts as years: then both are errors, or humantime's
                // value is about the bound.
                Err(TOO_LARGE) => {
                    prop_assert!(theirs.is_none_or(|d| d.as_secs_f64() > 0.99 * MAX_SECS));
                }
                // The unit `M` (humantime's month) is refused on purpose.
                Err(DurationError::AmbiguousMonth) => {
                    prop_assert!(pairs.iter().any(|(_, u)| *u == "M"));
                }
                ours => prop_assert_eq!(ours.ok(), theirs),
            }
        }
    }
}

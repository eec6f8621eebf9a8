//! Durations as the reference design writes them: humantime strings or numbers of seconds,
//! with "negative means infinite" where a setting allows it.

use std::time::Duration;

use crate::ConfigError;

/// Parses a duration written as a humantime string (`"2s"`, `"150ms"`, `"1m 30s"`) or a
/// number of seconds (`"1"`, `"0.5"`). Negative values (other than `-0`, which is zero: the
/// sign is the value's), NaN, infinite values and values above 10^18 seconds are rejected, and
/// so is humantime's unit `M` (a month: `"10M"` is more often meant as minutes; write `m`, or
/// `months`). No input panics.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::parse_duration;
/// assert_eq!(parse_duration("1m 30s")?, Duration::from_secs(90));
/// assert_eq!(parse_duration("0.25")?, Duration::from_millis(250));
/// assert_eq!(parse_duration("-0")?, Duration::ZERO);
/// assert!(parse_duration("-1").is_err());
/// assert!(parse_duration("soon").is_err());
/// assert!(parse_duration("10M").is_err()); // minutes are `m`
/// assert!(parse_duration("18446744073709551615s 1000000000ns").is_err()); // too large
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, ConfigError> {
    retry_grammar::parse_duration(s).map_err(|e| ConfigError::new("duration", e.rule()))
}

/// A duration of `secs` seconds for `parameter`. Errors: negative (`-0.0` is zero), NaN,
/// infinite, or too large for a [`Duration`].
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::duration_from_secs;
/// assert_eq!(duration_from_secs("base", 1.5)?, Duration::from_millis(1500));
/// assert_eq!(duration_from_secs("base", -1.0).unwrap_err().parameter(), "base");
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
pub fn duration_from_secs(parameter: &'static str, secs: f64) -> Result<Duration, ConfigError> {
    retry_grammar::from_secs(secs).map_err(|e| ConfigError::new(parameter, e.rule()))
}

/// A limit of `secs` seconds where a negative number means "infinite" (`None`), as `timeout` and
/// `max_delay` read it; `-0.0` is zero, not negative (the sign is the value's). Errors: NaN,
/// infinite, or too large.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::limit_from_secs;
/// assert_eq!(limit_from_secs("max_delay", -1.0)?, None);
/// assert_eq!(limit_from_secs("max_delay", 2.0)?, Some(Duration::from_secs(2)));
/// assert_eq!(limit_from_secs("max_delay", -0.0)?, Some(Duration::ZERO));
/// assert!(limit_from_secs("max_delay", f64::NAN).is_err());
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
pub fn limit_from_secs(
    parameter: &'static str,
    secs: f64,
) -> Result<Option<Duration>, ConfigError> {
    if secs < 0.0 && secs.is_finite() {
        return Ok(None);
    }
    duration_from_secs(parameter, secs).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms() {
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("150ms").unwrap(), Duration::from_millis(150));
        assert_eq!(parse_duration(" 3 ").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("1e-3").unwrap(), Duration::from_millis(1));
    }

    #[test]
    fn rejects_non_finite_and_huge() {
        for s in ["NaN", "inf", "-inf", "1e300", "-0.5", "", "2 parsecs"] {
            assert!(parse_duration(s).is_err(), "{s:?} accepted");
        }
        assert!(limit_from_secs("t", f64::NEG_INFINITY).is_err());
        assert!(limit_from_secs("t", f64::INFINITY).is_err());
    }

    /// A value above 0 that rounds to no nanosecond would mean no wait or no retry: an error.
    #[test]
    fn rejects_values_that_round_to_zero() {
        assert!(parse_duration("1e-12").is_err());
        assert!(limit_from_secs("max_delay", 1e-10).is_err());
        assert!(duration_from_secs("base", 4e-10).is_err());
        let e = crate::Policy::builder()
            .timeout_secs(1e-10)
            .build()
            .unwrap_err();
        assert_eq!(e.parameter(), "timeout");
        assert_eq!(
            duration_from_secs("base", 6e-10).unwrap(),
            Duration::from_nanos(1)
        );
    }

    #[test]
    fn minus_zero_is_zero() {
        assert_eq!(parse_duration("-0").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("-0s").unwrap(), Duration::ZERO);
        assert_eq!(limit_from_secs("t", -0.0).unwrap(), Some(Duration::ZERO));
        assert_eq!(duration_from_secs("t", -0.0).unwrap(), Duration::ZERO);
        assert_eq!(limit_from_secs("t", -1.0).unwrap(), None);
    }

    #[test]
    fn overflowing_strings_are_errors_not_panics() {
        let e = parse_duration("18446744073709551615s 1000000000ns").unwrap_err();
        assert_eq!(e.parameter(), "duration");
        assert!(e.rule().contains("too large"), "{e}");
    }
}

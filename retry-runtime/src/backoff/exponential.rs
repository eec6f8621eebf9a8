use std::time::Duration;

use rand::Rng;

use super::{Backoff, check_range, from_nanos_f64};
use crate::{ConfigError, duration_from_secs};

/// Exponential backoff: `v_x = min(max, base * m^x)`.
///
/// The default (also the attribute's default) is `base = 100 ms`, `max = 20 s`, `m = 2`.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::{Backoff, Exponential};
/// # use rand::SeedableRng;
/// let b = Exponential::new(Duration::from_secs(1), Duration::from_secs(60), 2.0)?;
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
/// let v: Vec<u64> = (0..8).map(|x| b.delay(x, &mut rng).as_secs()).collect();
/// assert_eq!(v, [1, 2, 4, 8, 16, 32, 60, 60]);
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exponential {
    base: Duration,
    max: Duration,
    m: f64,
}

impl Default for Exponential {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl Exponential {
    /// The default growth factor: `m = 2`.
    pub const DEFAULT_M: f64 = 2.0;

    /// `base = 100 ms`, `max = 20 s`, `m = 2`: the default strategy of a policy and of
    /// `#[robust]`.
    pub const DEFAULT: Self = Self {
        base: retry_grammar::DEFAULT_BASE,
        max: retry_grammar::DEFAULT_MAX,
        m: Self::DEFAULT_M,
    };

    /// A new exponential backoff. Errors: `base > max`; `base` zero (every delay would be
    /// 0: `0 × m^x`; [`NoBackoff`](crate::NoBackoff) says "no wait"); `m` below 1, NaN or
    /// infinite; an `m` other than 2 beside `base == max` (every delay is `base`:
    /// [`Constant`](crate::Constant) says so).
    pub fn new(base: Duration, max: Duration, m: f64) -> Result<Self, ConfigError> {
        check_range(base, max)?;
        // (The growth multiplies `base`: none of its own to check beside a `base` of 0.)
        super::check_waits(base, max, ("base", Duration::MAX))?;
        if base.is_zero() {
            return Err(ConfigError::new(
                "base",
                "must be above 0: an exponential strategy multiplies `base`, so from 0 it would wait 0 before every retry; use `NoBackoff` for no wait",
            ));
        }
        if !(m.is_finite() && m >= 1.0) {
            return Err(ConfigError::new("m", "must be a finite number >= 1"));
        }
        // (The default `m`, 2, says nothing beside equal bounds.)
        if m != 2.0 {
            super::check_room(base, max, "m")?;
        }
        Ok(Self { base, max, m })
    }

    /// The same from numbers of seconds, as the attribute writes them. Errors: a negative,
    /// NaN or infinite duration, or one above 0 that rounds to 0 ns; and every error of
    /// [`new`](Self::new).
    ///
    /// ```
    /// use retry_runtime::Exponential;
    /// assert!(Exponential::from_secs(0.1, 20.0, 2.0).is_ok());
    /// assert_eq!(Exponential::from_secs(-1.0, 20.0, 2.0).unwrap_err().parameter(), "base");
    /// ```
    pub fn from_secs(base: f64, max: f64, m: f64) -> Result<Self, ConfigError> {
        Self::new(
            duration_from_secs("base", base)?,
            duration_from_secs("max", max)?,
            m,
        )
    }

    /// No validation: for parameters already checked (by the attribute, at compile time).
    #[doc(hidden)]
    pub const fn new_unchecked(base: Duration, max: Duration, m: f64) -> Self {
        Self { base, max, m }
    }

    /// The multiplier `m`.
    pub const fn multiplier(&self) -> f64 {
        self.m
    }
}

impl Backoff for Exponential {
    #[inline]
    fn delay(&self, x: u32, _rng: &mut dyn Rng) -> Duration {
        if self.base.is_zero() {
            return Duration::ZERO;
        }
        // base > 0 and m >= 1: the product is >= base, possibly +inf, never NaN.
        // `powi` is several times faster than `powf`; both are exact for the usual integer m.
        let factor = match i32::try_from(x) {
            Ok(x) => self.m.powi(x),
            Err(_) => self.m.powf(f64::from(x)),
        };
        // Float rounding of very large bases (> 2^53 ns) must not fall below `base`.
        from_nanos_f64(self.base.as_nanos() as f64 * factor, self.max).max(self.base)
    }
    #[inline]
    fn base(&self) -> Duration {
        self.base
    }
    #[inline]
    fn max(&self) -> Duration {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::*;
    use super::*;

    #[test]
    fn hand_computed_sequence() {
        let b = Exponential::new(Duration::from_secs(1), Duration::from_secs(60), 2.0).unwrap();
        assert_eq!(
            seq(&b, 8),
            secs(&[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0])
        );
    }

    #[test]
    fn default_sequence_in_millis() {
        let v: Vec<u128> = seq(&Exponential::default(), 10)
            .iter()
            .map(|d| d.as_millis())
            .collect();
        assert_eq!(
            v,
            [100, 200, 400, 800, 1600, 3200, 6400, 12800, 20000, 20000]
        );
    }

    /// A `base` of 0 is refused with a message that says what is allowed, and a `max` of 0
    /// for its own reason.
    #[test]
    fn a_base_of_zero_is_refused_for_what_it_is() {
        let e = Exponential::new(Duration::ZERO, Duration::from_secs(1), 2.0).unwrap_err();
        assert_eq!(e.parameter(), "base");
        assert!(e.to_string().contains("multiplies `base`"), "{e}");
        let e = Exponential::new(Duration::ZERO, Duration::ZERO, 2.0).unwrap_err();
        assert_eq!(e.parameter(), "max");
    }

    #[test]
    fn fractional_multiplier() {
        let b = Exponential::new(Duration::from_secs(1), Duration::from_secs(10), 1.5).unwrap();
        assert_eq!(seq(&b, 4), secs(&[1.0, 1.5, 2.25, 3.375]));
    }

    #[test]
    fn saturates_at_extreme_exponents() {
        let b = Exponential::new(Duration::from_nanos(1), Duration::MAX, 2.0).unwrap();
        assert_eq!(b.delay(u32::MAX, &mut rng()), Duration::MAX);
        let z = Exponential::new_unchecked(Duration::ZERO, Duration::MAX, 2.0);
        assert_eq!(z.delay(u32::MAX, &mut rng()), Duration::ZERO);
    }

    #[test]
    fn rejects_bad_parameters() {
        let s = Duration::from_secs(1);
        assert_eq!(Exponential::new(s, s, 0.99).unwrap_err().parameter(), "m");
        assert_eq!(
            Exponential::new(s, s, f64::NAN).unwrap_err().parameter(),
            "m"
        );
        assert_eq!(
            Exponential::new(s, s, f64::INFINITY)
                .unwrap_err()
                .parameter(),
            "m"
        );
        assert_eq!(
            Exponential::new(s * 2, s, 2.0).unwrap_err().parameter(),
            "base"
        );
    }
}

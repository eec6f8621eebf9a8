use std::time::Duration;

use rand::Rng;

use super::{Backoff, check_range, from_nanos, from_nanos_f64};
use crate::{ConfigError, duration_from_secs};

/// Polynomial backoff: `v_x = min(max, base + (x^p1 + ... + x^pN) * unit)`, every `p > 1`,
/// `unit = 1 s` by default. The exponents are stored inline (`N` is a const generic), so a
/// strategy never allocates.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::{Backoff, Polynomial};
/// # use rand::SeedableRng;
/// let b = Polynomial::new(Duration::from_secs(1), Duration::from_secs(60), [2.0])?;
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
/// let v: Vec<u64> = (0..9).map(|x| b.delay(x, &mut rng).as_secs()).collect();
/// assert_eq!(v, [1, 2, 5, 10, 17, 26, 37, 50, 60]);
/// # Ok::<(), retry_runtime::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Polynomial<const N: usize = 1> {
    base: Duration,
    max: Duration,
    p: [f64; N],
    unit: Duration,
}

impl Polynomial<1> {
    /// The default exponents: `p = [2]`, a quadratic curve.
    pub const DEFAULT_P: [f64; 1] = [2.0];
}

impl<const N: usize> Polynomial<N> {
    /// `unit = 1 s`. Errors: `base > max`; `max` zero (every delay would be 0); no exponent;
    /// an exponent `<= 1`, NaN or infinite.
    ///
    /// Exponents other than [`DEFAULT_P`](Polynomial::DEFAULT_P) beside a `base` equal to the
    /// `max` are an error: every delay is `base`.
    pub fn new(base: Duration, max: Duration, p: [f64; N]) -> Result<Self, ConfigError> {
        Self::with_unit(base, max, p, super::DEFAULT_UNIT)
    }

    /// The same from numbers of seconds. Errors as for [`Polynomial::new`], and a negative,
    /// NaN or infinite duration.
    pub fn from_secs(base: f64, max: f64, p: [f64; N], unit: f64) -> Result<Self, ConfigError> {
        Self::with_unit(
            duration_from_secs("base", base)?,
            duration_from_secs("max", max)?,
            p,
            duration_from_secs("unit", unit)?,
        )
    }

    /// No validation: for parameters already checked (by the attribute, at compile time).
    #[doc(hidden)]
    pub const fn new_unchecked(base: Duration, max: Duration, p: [f64; N], unit: Duration) -> Self {
        Self { base, max, p, unit }
    }

    /// Polynomial backoff counting in `unit`s. Errors as for [`Polynomial::new`], and a unit
    /// other than 1 s beside a `base` equal to the `max` (every delay is `base`).
    pub fn with_unit(
        base: Duration,
        max: Duration,
        p: [f64; N],
        unit: Duration,
    ) -> Result<Self, ConfigError> {
        check_range(base, max)?;
        super::check_waits(base, max, ("unit", unit))?;
        if N == 0 {
            return Err(ConfigError::new("p", "must list at least one exponent"));
        }
        if p.iter().any(|p| !(p.is_finite() && *p > 1.0)) {
            return Err(ConfigError::new(
                "p",
                "every exponent must be a finite number > 1",
            ));
        }
        // Exponents or a unit other than the defaults beside a `base` equal to the `max`:
        // every delay is `base`, so they would have no effect.
        if p.as_slice() != Polynomial::DEFAULT_P.as_slice() {
            super::check_room(base, max, "p")?;
        }
        if unit != super::DEFAULT_UNIT {
            super::check_room(base, max, "unit")?;
        }
        Ok(Self { base, max, p, unit })
    }
}

impl<const N: usize> Backoff for Polynomial<N> {
    #[inline]
    fn delay(&self, x: u32, _rng: &mut dyn Rng) -> Duration {
        let x = f64::from(x);
        // Each term is finite or +inf (x >= 0, p > 1): the sum is never NaN.
        let sum: f64 = self
            .p
            .iter()
            .map(|p| {
                // Integer exponents (the usual `p = [2]`) take the much faster `powi`.
                if p.fract() == 0.0 && *p <= f64::from(i32::MAX) {
                    x.powi(*p as i32)
                } else {
                    x.powf(*p)
                }
            })
            .sum();
        let term = from_nanos_f64(sum * self.unit.as_nanos() as f64, self.max);
        from_nanos(self.base.as_nanos().saturating_add(term.as_nanos())).min(self.max)
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
    fn square_sequence() {
        let b = Polynomial::new(Duration::from_secs(1), Duration::from_secs(60), [2.0]).unwrap();
        assert_eq!(
            seq(&b, 10),
            secs(&[1.0, 2.0, 5.0, 10.0, 17.0, 26.0, 37.0, 50.0, 60.0, 60.0])
        );
    }

    #[test]
    fn several_exponents_add_up() {
        let b = Polynomial::with_unit(
            Duration::ZERO,
            Duration::from_secs(1000),
            [2.0, 3.0],
            Duration::from_millis(1),
        )
        .unwrap();
        // x^2 + x^3 ms: 0, 2, 12, 36
        let ms: Vec<u128> = seq(&b, 4).iter().map(|d| d.as_millis()).collect();
        assert_eq!(ms, [0, 2, 12, 36]);
    }

    #[test]
    fn saturates() {
        let b = Polynomial::new(Duration::ZERO, Duration::MAX, [9.0]).unwrap();
        assert_eq!(b.delay(u32::MAX, &mut rng()), Duration::MAX);
    }

    #[test]
    fn rejects_bad_exponents() {
        let s = Duration::from_secs(1);
        assert_eq!(Polynomial::new(s, s, [1.0]).unwrap_err().parameter(), "p");
        assert_eq!(
            Polynomial::new(s, s, [2.0, 0.5]).unwrap_err().parameter(),
            "p"
        );
        assert_eq!(
            Polynomial::new(s, s, [f64::NAN]).unwrap_err().parameter(),
            "p"
        );
        assert_eq!(Polynomial::new(s, s, []).unwrap_err().parameter(), "p");
    }
}

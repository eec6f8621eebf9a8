//! Jitter algorithms: how a backoff value is randomised before it is slept.
//!
//! A jitter algorithm receives the strategy and the per-call [`JitterState`] (the backoff
//! exponent and the previous delay), so that algorithms like [`Decorrelated`] can move the
//! exponent and [`AwsDecorrelated`] can read the previous delay.

use std::time::Duration;

use rand::{Rng, RngExt};

use crate::backoff::{Backoff, from_nanos};

/// Per-call state that jitter algorithms read and change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JitterState {
    /// The backoff exponent: starts at 0, grows by one after every retry; only
    /// [`Decorrelated`] resets it. It is distinct from the retry count, which never resets.
    pub exponent: u32,
    /// The previous jittered delay of this call (before scaling), `None` before the first retry.
    pub previous: Option<Duration>,
}

/// A jitter algorithm.
///
/// Implement it for custom jitter (`jitter = custom(EXPR)` in the attribute).
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::{Backoff, Constant, Jitter, JitterState};
/// # use rand::SeedableRng;
/// /// Adds a fixed 5 ms to every delay.
/// struct Pad;
/// impl Jitter for Pad {
///     fn jitter(&self, b: &dyn Backoff, s: &mut JitterState, rng: &mut dyn rand::Rng) -> Duration {
///         b.delay(s.exponent, rng).saturating_add(Duration::from_millis(5))
///     }
/// }
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(0);
/// let d = Pad.jitter(&Constant::new(Duration::from_millis(10)), &mut JitterState::default(), &mut rng);
/// assert_eq!(d, Duration::from_millis(15));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a jitter algorithm",
    label = "expected a value implementing `retry_runtime::Jitter`",
    note = "built-in algorithms: `NoJitter`, `FullJitter`, `EqualJitter`, `Decorrelated`, `AwsDecorrelated`"
)]
pub trait Jitter {
    /// The jittered delay for `state.exponent` under `backoff`.
    fn jitter(&self, backoff: &dyn Backoff, state: &mut JitterState, rng: &mut dyn Rng)
    -> Duration;

    /// A delay no jittered delay under `backoff` is ever shorter than, if the algorithm knows
    /// one (from the strategy's [`base`](Backoff::base), its smallest delay); `None` (the
    /// default) if it does not. [`PolicyBuilder::build`](crate::PolicyBuilder::build) reads it
    /// to refuse a backoff that could never end before the call's deadline.
    #[inline]
    fn shortest(&self, backoff: &dyn Backoff) -> Option<Duration> {
        let _ = backoff;
        None
    }
}

impl<J: Jitter + ?Sized> Jitter for &J {
    #[inline]
    fn jitter(&self, b: &dyn Backoff, s: &mut JitterState, rng: &mut dyn Rng) -> Duration {
        (**self).jitter(b, s, rng)
    }

    #[inline]
    fn shortest(&self, b: &dyn Backoff) -> Option<Duration> {
        (**self).shortest(b)
    }
}

impl<J: Jitter + ?Sized> Jitter for Box<J> {
    #[inline]
    fn jitter(&self, b: &dyn Backoff, s: &mut JitterState, rng: &mut dyn Rng) -> Duration {
        (**self).jitter(b, s, rng)
    }

    #[inline]
    fn shortest(&self, b: &dyn Backoff) -> Option<Duration> {
        (**self).shortest(b)
    }
}

impl<J: Jitter + ?Sized> Jitter for std::sync::Arc<J> {
    #[inline]
    fn jitter(&self, b: &dyn Backoff, s: &mut JitterState, rng: &mut dyn Rng) -> Duration {
        (**self).jitter(b, s, rng)
    }

    #[inline]
    fn shortest(&self, b: &dyn Backoff) -> Option<Duration> {
        (**self).shortest(b)
    }
}

/// The strategy's smallest delay (its `base`, never above its `max`).
fn least(b: &dyn Backoff) -> Duration {
    b.base().min(b.max())
}

/// No jitter: the backoff value `v_x` unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NoJitter;

impl Jitter for NoJitter {
    #[inline]
    fn jitter(&self, b: &dyn Backoff, s: &mut JitterState, rng: &mut dyn Rng) -> Duration {
        b.delay(s.exponent, rng)
    }

    #[inline]
    fn shortest(&self, b: &dyn Backoff) -> Option<Duration> {
        Some(least(b))
    }
}

/// Full jitter (the default): uniform in `[0, v_x]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FullJitter;

impl Jitter for FullJitter {
    #[inline]
    fn jitter(&self, b: &dyn Backoff, s: &mut JitterState, rng: &mut dyn Rng) -> Duration {
        let v = b.delay(s.exponent, rng).as_nanos();
        if v == 0 {
            return Duration::ZERO;
        }
        from_nanos(rng.random_range(0..=v))
    }

    #[inline]
    fn shortest(&self, _: &dyn Backoff) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

/// Equal jitter: `v_x / 2 + uniform in [0, v_x / 2]`, so always within `[v_x / 2, v_x]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EqualJitter;

impl Jitter for EqualJitter {
    #[inline]
    fn jitter(&self, b: &dyn Backoff, s: &mut JitterState, rng: &mut dyn Rng) -> Duration {
        let v = b.delay(s.exponent, rng).as_nanos();
        if v == 0 {
            return Duration::ZERO;
        }
        let half = v / 2;
        from_nanos(half + rng.random_range(0..=v - half))
    }

    #[inline]
    fn shortest(&self, b: &dyn Backoff) -> Option<Duration> {
        Some(from_nanos(least(b).as_nanos() / 2))
    }
}

/// Decorrelated jitter, as the reference design defines it: with probability 1/2 the backoff
/// exponent is reset to 0; then `v` of that exponent is returned unchanged.
///
/// It resets only the exponent, never the retry count that `retries` limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Decorrelated;

impl Jitter for Decorrelated {
    #[inline]
    fn jitter(&self, b: &dyn Backoff, s: &mut JitterState, rng: &mut dyn Rng) -> Duration {
        if rng.random_bool(0.5) {
            s.exponent = 0;
        }
        b.delay(s.exponent, rng)
    }

    #[inline]
    fn shortest(&self, b: &dyn Backoff) -> Option<Duration> {
        Some(least(b))
    }
}

/// AWS "decorrelated jitter": `min(max, uniform in [base, 3 * previous])`, the previous delay
/// starting at `base`. It reads only the strategy's `base` and `max`, not `v_x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AwsDecorrelated;

impl Jitter for AwsDecorrelated {
    #[inline]
    fn jitter(&self, b: &dyn Backoff, s: &mut JitterState, rng: &mut dyn Rng) -> Duration {
        let base = b.base().as_nanos();
        let previous = s.previous.map_or(base, |d| d.as_nanos());
        let high = previous.saturating_mul(3).max(base);
        from_nanos(rng.random_range(base..=high)).min(b.max())
    }

    #[inline]
    fn shortest(&self, b: &dyn Backoff) -> Option<Duration> {
        Some(least(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::test_util::rng;
    use crate::{Constant, Exponential};

    fn exp() -> Exponential {
        Exponential::new(Duration::from_secs(1), Duration::from_secs(60), 2.0).unwrap()
    }

    #[test]
    fn none_is_identity() {
        let mut s = JitterState {
            exponent: 3,
            previous: None,
        };
        assert_eq!(
            NoJitter.jitter(&exp(), &mut s, &mut rng()),
            Duration::from_secs(8)
        );
    }

    #[test]
    fn full_and_equal_bounds_on_zero() {
        let z = Constant::new(Duration::ZERO);
        let mut s = JitterState::default();
        assert_eq!(FullJitter.jitter(&z, &mut s, &mut rng()), Duration::ZERO);
        assert_eq!(EqualJitter.jitter(&z, &mut s, &mut rng()), Duration::ZERO);
    }

    #[test]
    fn decorrelated_only_moves_the_exponent_to_zero() {
        let mut r = rng();
        let mut resets = 0;
        for _ in 0..1000 {
            let mut s = JitterState {
                exponent: 4,
                previous: None,
            };
            let d = Decorrelated.jitter(&exp(), &mut s, &mut r);
            match s.exponent {
                0 => {
                    resets += 1;
                    assert_eq!(d, Duration::from_secs(1));
                }
                4 => assert_eq!(d, Duration::from_secs(16)),
                other => panic!("exponent moved to {other}"),
            }
        }
        assert!((400..600).contains(&resets), "{resets} resets out of 1000");
    }

    #[test]
    fn aws_decorrelated_grows_from_base_and_caps() {
        let b = exp();
        let mut r = rng();
        let mut s = JitterState::default();
        let first = AwsDecorrelated.jitter(&b, &mut s, &mut r);
        assert!(first >= Duration::from_secs(1) && first <= Duration::from_secs(3));
        // After 50 s the draw is uniform in [1 s, 150 s], capped at 60 s: 90 of every 149
        // draws are the cap (60.4 of 100, standard deviation 4.9) and 147 of 149 are above
        // 3 s (the range it would draw from without growing).
        s.previous = Some(Duration::from_secs(50));
        let (mut capped, mut grown) = (0, 0);
        for _ in 0..100 {
            let d = AwsDecorrelated.jitter(&b, &mut s, &mut r);
            assert!(d >= Duration::from_secs(1) && d <= Duration::from_secs(60));
            capped += usize::from(d == Duration::from_secs(60));
            grown += usize::from(d > Duration::from_secs(3));
        }
        assert!((45..=75).contains(&capped), "{capped} of 100 at the cap");
        assert!(grown >= 90, "{grown} of 100 above 3 s");
    }

    /// On a constant 1 s, full jitter draws uniformly in [0, 1 s] and equal jitter in
    /// [0.5 s, 1 s]: 1,000 seeded draws each, their means within 0.05 s of 0.5 s and 0.75 s
    /// (more than 5 standard deviations of a mean of 1,000 draws).
    #[test]
    fn full_and_equal_draw_over_their_ranges() {
        let one = Constant::new(Duration::from_secs(1));
        let mut r = rng();
        let mut s = JitterState::default();
        let mean = |j: &dyn Jitter, r: &mut rand::rngs::SmallRng, s: &mut JitterState| {
            let mut sum = 0.0;
            for _ in 0..1000 {
                let d = j.jitter(&one, s, r);
                assert!(d <= Duration::from_secs(1), "{d:?}");
                sum += d.as_secs_f64();
            }
            sum / 1000.0
        };
        let full = mean(&FullJitter, &mut r, &mut s);
        assert!((full - 0.5).abs() < 0.05, "full jitter's mean {full}");
        let equal = mean(&EqualJitter, &mut r, &mut s);
        assert!((equal - 0.75).abs() < 0.05, "equal jitter's mean {equal}");
        for _ in 0..1000 {
            assert!(EqualJitter.jitter(&one, &mut s, &mut r) >= Duration::from_millis(500));
        }
    }
}

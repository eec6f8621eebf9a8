//! The retry settings one rule applies: `retries`, `max_delay`, backoff, jitter and scale.

use std::time::Duration;

use rand::Rng;

use crate::backoff::{Backoff, Exponential, from_nanos_f64};
use crate::jitter::{FullJitter, Jitter, JitterState};
use crate::{ConfigError, limit_from_secs};

/// How many retries a rule allows: the SPEC's `retries` (0 = never, negative = forever).
///
/// Every integer converts: negative numbers mean [`Retries::Forever`], counts above
/// `u32::MAX` saturate.
///
/// ```
/// use retry_runtime::Retries;
/// assert_eq!(Retries::from(-1), Retries::Forever);
/// assert_eq!(Retries::from(5), Retries::Limited(5));
/// assert_eq!(Retries::from(-1_isize), Retries::Forever);
/// assert_eq!(Retries::from(u64::MAX), Retries::Limited(u32::MAX));
/// assert!(Retries::Limited(2).allows(1) && !Retries::Limited(2).allows(2));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Retries {
    /// At most this many retries (so one more attempt); 0 never retries.
    Limited(u32),
    /// Retry without limit (other limits, like `max_delay`, still apply).
    Forever,
}

impl Retries {
    /// Whether another retry is allowed after `made` retries.
    #[inline]
    pub const fn allows(self, made: u32) -> bool {
        match self {
            Retries::Limited(n) => made < n,
            Retries::Forever => true,
        }
    }

    /// The SPEC convention: negative = forever, otherwise a count (saturating at `u32::MAX`).
    pub const fn from_count(n: i64) -> Self {
        if n < 0 {
            Retries::Forever
        } else if n > u32::MAX as i64 {
            Retries::Limited(u32::MAX)
        } else {
            Retries::Limited(n as u32)
        }
    }
}

impl From<u32> for Retries {
    fn from(n: u32) -> Self {
        Retries::Limited(n)
    }
}
impl From<i32> for Retries {
    fn from(n: i32) -> Self {
        Retries::from_count(i64::from(n))
    }
}
impl From<i64> for Retries {
    fn from(n: i64) -> Self {
        Retries::from_count(n)
    }
}
impl From<u64> for Retries {
    fn from(n: u64) -> Self {
        Retries::Limited(u32::try_from(n).unwrap_or(u32::MAX))
    }
}
impl From<usize> for Retries {
    fn from(n: usize) -> Self {
        Retries::Limited(u32::try_from(n).unwrap_or(u32::MAX))
    }
}
impl From<isize> for Retries {
    fn from(n: isize) -> Self {
        // (`isize` is at most 64 bits wide on every target Rust supports.)
        Retries::from_count(i64::try_from(n).unwrap_or(i64::MAX))
    }
}
impl From<i8> for Retries {
    fn from(n: i8) -> Self {
        Retries::from_count(i64::from(n))
    }
}
impl From<i16> for Retries {
    fn from(n: i16) -> Self {
        Retries::from_count(i64::from(n))
    }
}
impl From<u8> for Retries {
    fn from(n: u8) -> Self {
        Retries::Limited(u32::from(n))
    }
}
impl From<u16> for Retries {
    fn from(n: u16) -> Self {
        Retries::Limited(u32::from(n))
    }
}

/// The validated settings of one rule, as a [`Policy`](crate::Policy) holds them: retry limit,
/// `max_delay` budget, backoff, jitter and scale. Build them with [`Settings`].
#[derive(Debug, Clone, Copy)]
pub struct RuleSettings<B = Exponential, J = FullJitter> {
    pub(crate) retries: Retries,
    pub(crate) max_delay: Option<Duration>,
    pub(crate) backoff: B,
    pub(crate) jitter: J,
    pub(crate) scale: f64,
}

impl RuleSettings {
    /// The defaults of every rule (SPEC section 2), the one place they are written: 3 retries,
    /// no `max_delay`, `exponential(base = 100ms, max = 20s, m = 2)`, full jitter, scale 1.
    /// The builder starts from them and `#[robust]` names them for what it leaves unset.
    pub const DEFAULT: Self = RuleSettings {
        retries: Retries::Limited(3),
        max_delay: None,
        backoff: Exponential::DEFAULT,
        jitter: FullJitter,
        scale: 1.0,
    };
}

impl<B: Backoff, J: Jitter> RuleSettings<B, J> {
    /// A delay (with jitter and scale) this rule never waits less than before a retry, if its
    /// jitter knows one ([`Jitter::shortest`]); `None` also for a rule that never retries
    /// (`retries = 0`, or a `max_delay` of zero).
    pub(crate) fn shortest_delay(&self) -> Option<Duration> {
        if self.retries == Retries::Limited(0) || self.max_delay == Some(Duration::ZERO) {
            return None;
        }
        let least = self.jitter.shortest(&self.backoff)?;
        Some(scale(least, self.scale))
    }
}

impl<B, J> RuleSettings<B, J> {
    /// The retry limit.
    pub const fn retries(&self) -> Retries {
        self.retries
    }
    /// The `max_delay` budget, `None` for infinite.
    pub const fn max_delay(&self) -> Option<Duration> {
        self.max_delay
    }
    /// The backoff strategy.
    pub const fn backoff(&self) -> &B {
        &self.backoff
    }
    /// The jitter algorithm.
    pub const fn jitter(&self) -> &J {
        &self.jitter
    }
    /// The scale factor.
    pub const fn scale(&self) -> f64 {
        self.scale
    }
}

/// The settings one rule applies, while they are being written. The defaults are the SPEC's:
/// 3 retries, no `max_delay`, `exponential(base = 100 ms, max = 20 s, m = 2)`, full jitter,
/// scale 1.
///
/// Setters never panic: an invalid value is remembered and reported by
/// [`PolicyBuilder::build`](crate::PolicyBuilder::build).
#[derive(Debug, Clone, Copy)]
pub struct Settings<B = Exponential, J = FullJitter> {
    pub(crate) rule: RuleSettings<B, J>,
    pub(crate) error: Option<ConfigError>,
    /// The settings written (by a setter) since these settings were made or last cleared:
    /// what [`PolicyBuilder::build`](crate::PolicyBuilder::build) may find to have no effect.
    pub(crate) written: Written,
    /// Whether these settings were handed to a `when` rule's closure to start from (not made
    /// anew by [`Settings::new`]): returned with nothing written, the rule sets nothing of its
    /// own.
    pub(crate) inherited: bool,
}

/// Which of a rule's settings a setter wrote (see [`Settings`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Written {
    pub(crate) retries: bool,
    pub(crate) max_delay: bool,
    pub(crate) backoff: bool,
    pub(crate) jitter: bool,
    pub(crate) scale: bool,
}

impl Written {
    /// Whether any setting was written.
    pub(crate) const fn any(self) -> bool {
        self.retries || self.max_delay || self.backoff || self.jitter || self.scale
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self::new()
    }
}

impl Settings {
    /// The SPEC defaults.
    pub const fn new() -> Self {
        Settings {
            rule: RuleSettings::DEFAULT,
            error: None,
            written: Written {
                retries: false,
                max_delay: false,
                backoff: false,
                jitter: false,
                scale: false,
            },
            inherited: false,
        }
    }
}

impl<B, J> Settings<B, J> {
    /// Whether a rule given these settings says something of its own: a setting written (one
    /// written with an invalid value is reported as such), or settings made anew
    /// (`|_| Settings::new()`, which replace the `on` rule's).
    pub(crate) fn says_something(&self) -> bool {
        self.written.any() || self.error.is_some() || !self.inherited
    }
}

impl<B: Clone, J: Clone> Settings<B, J> {
    /// A copy for a rule that starts from these settings, with nothing written yet.
    pub(crate) fn inherited(&self) -> Self {
        Settings {
            written: Written::default(),
            inherited: true,
            ..self.clone()
        }
    }
}

impl<B, J> Settings<B, J> {
    fn fail(mut self, e: ConfigError) -> Self {
        self.error.get_or_insert(e);
        self
    }

    /// At most `n` retries; negative = forever (see [`Retries`]).
    pub fn retries(mut self, n: impl Into<Retries>) -> Self {
        self.rule.retries = n.into();
        self.written.retries = true;
        self
    }

    /// A budget of total time since the first attempt: a retry is made only if it can start
    /// before the budget is spent. `Duration::ZERO` never retries.
    pub fn max_delay(mut self, budget: Duration) -> Self {
        self.rule.max_delay = Some(budget);
        self.written.max_delay = true;
        self
    }

    /// `max_delay` in seconds, negative = infinite (the SPEC convention). NaN or infinite is
    /// an error.
    pub fn max_delay_secs(mut self, secs: f64) -> Self {
        match limit_from_secs("max_delay", secs) {
            Ok(limit) => {
                self.rule.max_delay = limit;
                self.written.max_delay = true;
                self
            }
            Err(e) => self.fail(e),
        }
    }

    /// Removes the `max_delay` budget (the default).
    pub fn no_max_delay(mut self) -> Self {
        self.rule.max_delay = None;
        self.written.max_delay = true;
        self
    }

    /// Multiplies every delay by `factor`, applied last. It must be finite and > 0.
    pub fn scale(mut self, factor: f64) -> Self {
        if factor.is_finite() && factor > 0.0 {
            self.rule.scale = factor;
            self.written.scale = true;
            self
        } else {
            self.fail(ConfigError::new("scale", "must be a finite number > 0"))
        }
    }

    /// The backoff strategy.
    pub fn backoff<B2>(self, backoff: B2) -> Settings<B2, J> {
        let r = self.rule;
        Settings {
            rule: RuleSettings {
                retries: r.retries,
                max_delay: r.max_delay,
                backoff,
                jitter: r.jitter,
                scale: r.scale,
            },
            error: self.error,
            written: Written {
                backoff: true,
                ..self.written
            },
            inherited: self.inherited,
        }
    }

    /// The jitter algorithm.
    pub fn jitter<J2>(self, jitter: J2) -> Settings<B, J2> {
        let r = self.rule;
        Settings {
            rule: RuleSettings {
                retries: r.retries,
                max_delay: r.max_delay,
                backoff: r.backoff,
                jitter,
                scale: r.scale,
            },
            error: self.error,
            written: Written {
                jitter: true,
                ..self.written
            },
            inherited: self.inherited,
        }
    }

    /// The first invalid value given to a setter, if any.
    pub const fn error(&self) -> Option<ConfigError> {
        self.error
    }

    /// The validated settings, or the first invalid value given to a setter.
    pub fn build(self) -> Result<RuleSettings<B, J>, ConfigError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.rule),
        }
    }
}

/// What the retry loop asks of the rule that matched an error. Object-safe, so rules of
/// different strategy types can be chosen at run time.
pub trait Plan {
    /// The rule's retry limit.
    fn retry_limit(&self) -> Retries;
    /// The rule's `max_delay` budget, `None` for infinite.
    fn budget(&self) -> Option<Duration>;
    /// The next delay: strategy, then jitter, then scale. Records the jittered value as the
    /// state's `previous` delay.
    fn next_delay(&self, state: &mut JitterState, rng: &mut dyn Rng) -> Duration;
}

impl<B: Backoff, J: Jitter> Plan for RuleSettings<B, J> {
    #[inline]
    fn retry_limit(&self) -> Retries {
        self.retries
    }

    #[inline]
    fn budget(&self) -> Option<Duration> {
        self.max_delay
    }

    #[inline]
    fn next_delay(&self, state: &mut JitterState, rng: &mut dyn Rng) -> Duration {
        let jittered = self.jitter.jitter(&self.backoff, state, rng);
        state.previous = Some(jittered);
        scale(jittered, self.scale)
    }
}

impl<B: Backoff, J: Jitter> Plan for Settings<B, J> {
    #[inline]
    fn retry_limit(&self) -> Retries {
        self.rule.retry_limit()
    }

    #[inline]
    fn budget(&self) -> Option<Duration> {
        self.rule.budget()
    }

    #[inline]
    fn next_delay(&self, state: &mut JitterState, rng: &mut dyn Rng) -> Duration {
        self.rule.next_delay(state, rng)
    }
}

impl<P: Plan + ?Sized> Plan for &P {
    #[inline]
    fn retry_limit(&self) -> Retries {
        (**self).retry_limit()
    }

    #[inline]
    fn budget(&self) -> Option<Duration> {
        (**self).budget()
    }

    #[inline]
    fn next_delay(&self, state: &mut JitterState, rng: &mut dyn Rng) -> Duration {
        (**self).next_delay(state, rng)
    }
}

/// `d * factor`, saturating at [`Duration::MAX`].
#[inline]
pub(crate) fn scale(d: Duration, factor: f64) -> Duration {
    if factor == 1.0 {
        d
    } else {
        from_nanos_f64(d.as_nanos() as f64 * factor, Duration::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::test_util::rng;
    use crate::jitter::NoJitter;

    #[test]
    fn retries_conventions() {
        assert_eq!(Retries::from(0), Retries::Limited(0));
        assert!(!Retries::Limited(0).allows(0));
        assert_eq!(Retries::from(-7i64), Retries::Forever);
        assert_eq!(Retries::from(i64::MAX), Retries::Limited(u32::MAX));
        assert!(Retries::Forever.allows(u32::MAX));
    }

    #[test]
    fn scale_is_applied_last_and_saturates() {
        let s = Settings::new().jitter(NoJitter).scale(0.5);
        let mut st = JitterState {
            exponent: 2,
            previous: None,
        };
        assert_eq!(
            s.next_delay(&mut st, &mut rng()),
            Duration::from_millis(200)
        );
        assert_eq!(st.previous, Some(Duration::from_millis(400)));
        assert_eq!(scale(Duration::MAX, 1e300), Duration::MAX);
    }

    #[test]
    fn invalid_values_are_remembered() {
        for f in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert_eq!(
                Settings::new().scale(f).error().unwrap().parameter(),
                "scale"
            );
        }
        let e = Settings::new().max_delay_secs(f64::NAN).error().unwrap();
        assert_eq!(e.parameter(), "max_delay");
        assert_eq!(Settings::new().max_delay_secs(-1.0).rule.max_delay, None);
        // The first error wins.
        let e = Settings::new().scale(-1.0).max_delay_secs(f64::NAN).error();
        assert_eq!(e.unwrap().parameter(), "scale");
    }
}

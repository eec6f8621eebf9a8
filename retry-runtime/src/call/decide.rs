//! The retry decision after a failed attempt: the clock read at most once, the rule's limits
//! and budget, and the call's randomness.

use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;

use super::Times;
use crate::callbacks::RuleId;
use crate::jitter::JitterState;
use crate::policy::rules::PlanVisitor;
use crate::policy::settings::Plan;
use crate::time::Clock;

/// The moment an attempt's outcome is settled, read from the clock at most once, and only if
/// something (breaker, deadline, budget, `on_retry`) asks for it.
pub(crate) struct LazyNow<'a> {
    pub(crate) clock: &'a dyn Clock,
    pub(crate) blocking: bool,
    pub(crate) at: Option<Instant>,
}

impl LazyNow<'_> {
    #[inline]
    pub(crate) fn get(&mut self) -> Instant {
        let (clock, blocking) = (self.clock, self.blocking);
        *self.at.get_or_insert_with(|| {
            if blocking {
                clock.now_blocking()
            } else {
                clock.now()
            }
        })
    }
}

/// The retry decision for the rule that matched (SPEC section 6, step 2 and 3).
pub(crate) struct Decide<'a, 'n, Tm, H> {
    pub(crate) retries: u32,
    pub(crate) jitter: &'a mut JitterState,
    pub(crate) seed: &'a mut CallSeed,
    pub(crate) times: &'a mut Tm,
    pub(crate) env: &'a dyn Clock,
    pub(crate) now: &'a mut LazyNow<'n>,
    /// The delay the error asks for (the policy's hint), which replaces the backoff: called
    /// only once a rule that matched has a retry left (a failure that is not retried is not
    /// read); a matched value's own hint is given to `visit`.
    pub(crate) error_hint: H,
}

/// A visit that only tells that a rule matched.
#[allow(dead_code)]
pub(crate) struct Matched;

#[allow(dead_code)]
impl PlanVisitor for Matched {
    type Out = ();
    #[inline(always)]
    fn visit<P: Plan>(self, _: &P, _: RuleId, _: Option<Duration>) {}
}

/// Why a call stops retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GiveUp {
    /// No rule matches the error: it is not retried at all.
    NotRetryable,
    /// The matching rule's `retries` are used up.
    RetryLimit,
    /// The next retry could not start within `max_delay`.
    MaxDelay,
    /// The retry budget is empty.
    Budget,
    /// The call's deadline has passed, or the next backoff would end at or after it.
    Deadline,
    /// The circuit breaker would not admit the retry of a matched value.
    Breaker,
    /// The client-side throttle rejected the retry.
    Throttle,
}

impl<Tm: Times, H: FnOnce() -> Option<Duration>> PlanVisitor for Decide<'_, '_, Tm, H> {
    /// The delay, the rule, whether a hint (the value's or the error's) gave the delay, and
    /// the rule's `max_delay`.
    type Out = Result<(Duration, RuleId, bool, Option<Duration>), GiveUp>;

    #[inline]
    fn visit<P: Plan>(self, plan: &P, rule: RuleId, value_hint: Option<Duration>) -> Self::Out {
        if !plan.retry_limit().allows(self.retries) {
            return Err(GiveUp::RetryLimit);
        }
        let budget = plan.budget();
        if budget.is_some_and(|b| b.is_zero()) {
            return Err(GiveUp::MaxDelay);
        }
        let mut rng = RetryRng {
            seed: self.seed,
            env: self.env,
            stream: u64::from(self.retries),
            rng: None,
        };
        let hint = value_hint.or_else(self.error_hint);
        let delay = match hint {
            Some(hint) => hint,
            None => plan.next_delay(self.jitter, &mut rng),
        };
        if let Some(budget) = budget {
            let now = self.now.get();
            let elapsed = now.saturating_duration_since(self.times.first_or(now));
            if elapsed.saturating_add(delay) >= budget {
                return Err(GiveUp::MaxDelay);
            }
        }
        Ok((delay, rule, hint.is_some(), budget))
    }
}

/// The call's randomness: one seed, drawn (or taken from the policy) the first time a retry
/// needs a random number. Each retry's delay draws from a generator seeded with the call's
/// seed and the retry count, so the call keeps one word, whatever the generator's size, and a
/// call that never draws seeds nothing.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CallSeed(pub(crate) Option<std::num::NonZeroU64>);

impl CallSeed {
    /// One word: seed 0 is kept as `u64::MAX` (so those two seeds share a stream).
    pub(crate) fn new(seed: u64) -> Self {
        CallSeed(Some(
            std::num::NonZeroU64::new(seed).unwrap_or(std::num::NonZeroU64::MAX),
        ))
    }
}

/// A uniform draw in [0, 1) for the throttle's decision before attempt `retries`: from the
/// call's seed, on a stream of its own (distinct from the jitter's), which is also that of the
/// thread's draw count: with a seed fixed for every call (`PolicyBuilder::seed`,
/// `VirtualTime::seeded`) each call's decision would otherwise draw the same number, and the
/// throttle would reject every call or none instead of each with its probability. Calls on
/// one thread stay reproducible: the count goes on in the order they draw.
pub(crate) fn throttle_draw(seed: &mut CallSeed, env: &dyn Clock, retries: u32) -> f64 {
    thread_local! {
        static DRAWS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    let drawn = DRAWS.with(|d| {
        let n = d.get();
        d.set(n.wrapping_add(1));
        n
    });
    let mut rng = RetryRng {
        seed,
        env,
        stream: u64::from(retries ^ 0x8000_0000) | u64::from(drawn) << 32,
        rng: None,
    };
    rand::RngExt::random::<f64>(&mut rng)
}

/// The generator of one retry, made on its first draw.
pub(crate) struct RetryRng<'a> {
    seed: &'a mut CallSeed,
    env: &'a dyn Clock,
    /// The retry count (jitter) or the throttle's stream.
    stream: u64,
    rng: Option<SmallRng>,
}

impl RetryRng<'_> {
    fn get(&mut self) -> &mut SmallRng {
        let (seed, env, stream) = (&mut *self.seed, self.env, self.stream);
        self.rng.get_or_insert_with(|| {
            let call = match seed.0 {
                Some(s) => s.get(),
                None => {
                    let drawn = env
                        .seed()
                        .unwrap_or_else(|| rand::Rng::next_u64(&mut rand::rng()));
                    *seed = CallSeed::new(drawn);
                    seed.0.map_or(drawn, std::num::NonZeroU64::get)
                }
            };
            // `seed_from_u64` scrambles its input: consecutive retries get unrelated streams.
            let mixed = call.wrapping_add(stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            SmallRng::seed_from_u64(mixed)
        })
    }
}

impl rand::TryRng for RetryRng<'_> {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(rand::Rng::next_u32(self.get()))
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(rand::Rng::next_u64(self.get()))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        rand::Rng::fill_bytes(self.get(), dst);
        Ok(())
    }
}

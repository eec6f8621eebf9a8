//! Property tests: bounds, monotonicity and absence of panics for any accepted parameters and
//! any retry count.

use std::time::Duration;

use std::fmt::Debug;
use std::sync::Arc;

use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use retry_runtime::policy::settings::Plan;
use retry_runtime::{
    AwsDecorrelated, Backoff, Constant, Decorrelated, EqualJitter, Exponential, Fibonacci,
    FullJitter, Jitter, JitterState, Linear, NoBackoff, NoJitter, Polynomial, Random, Settings,
};

trait DBackoff: Backoff + Debug {}
impl<T: Backoff + Debug> DBackoff for T {}
trait DJitter: Jitter + Debug {}
impl<T: Jitter + Debug> DJitter for T {}

/// Durations from 0 up to ~3 years in nanoseconds, plus the extremes.
fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        8 => (0u64..100_000_000_000_000_000).prop_map(Duration::from_nanos),
        1 => Just(Duration::ZERO),
        1 => Just(Duration::MAX),
    ]
}

/// `(base, max)` with `base <= max`.
fn range() -> impl Strategy<Value = (Duration, Duration)> {
    (duration(), duration()).prop_map(|(a, b)| if a <= b { (a, b) } else { (b, a) })
}

fn exponent() -> impl Strategy<Value = u32> {
    prop_oneof![4 => 0u32..200, 1 => any::<u32>(), 1 => Just(u32::MAX)]
}

/// Every deterministic strategy, built from parameters in range (`base <= max`). Those the
/// constructors refuse because every delay would be 0 (a `max` of 0, a `base` of 0 that
/// nothing grows) are built unchecked: they must not panic either.
fn deterministic() -> impl Strategy<Value = Arc<dyn DBackoff>> {
    prop_oneof![
        (range(), 1.0f64..1e6).prop_map(|((b, m), f)| Arc::new(
            Exponential::new(b, m, f).unwrap_or(Exponential::new_unchecked(b, m, f))
        ) as Arc<dyn DBackoff>),
        (range(), duration()).prop_map(|((b, m), i)| Arc::new(
            Linear::with_interval(b, m, i).unwrap_or(Linear::new_unchecked(b, m, i))
        ) as Arc<dyn DBackoff>),
        (range(), duration()).prop_map(|((b, m), u)| Arc::new(
            Fibonacci::with_unit(b, m, u).unwrap_or(Fibonacci::new_unchecked(b, m, u))
        ) as Arc<dyn DBackoff>),
        (range(), 1.0001f64..50.0, 1.0001f64..50.0, duration()).prop_map(|((b, m), p1, p2, u)| {
            Arc::new(
                Polynomial::with_unit(b, m, [p1, p2], u).unwrap_or(Polynomial::new_unchecked(
                    b,
                    m,
                    [p1, p2],
                    u,
                )),
            ) as Arc<dyn DBackoff>
        }),
        duration().prop_map(|b| Arc::new(Constant::new(b)) as Arc<dyn DBackoff>),
        Just(Arc::new(NoBackoff) as Arc<dyn DBackoff>),
    ]
}

fn any_strategy() -> impl Strategy<Value = Arc<dyn DBackoff>> {
    prop_oneof![
        4 => deterministic(),
        // (`new_unchecked`: a `max` of 0, which `new` refuses, must not panic either.)
        1 => range().prop_map(|(b, m)| Arc::new(Random::new_unchecked(b, m)) as Arc<dyn DBackoff>),
    ]
}

fn jitter() -> impl Strategy<Value = Arc<dyn DJitter>> {
    prop_oneof![
        Just(Arc::new(NoJitter) as Arc<dyn DJitter>),
        Just(Arc::new(FullJitter) as Arc<dyn DJitter>),
        Just(Arc::new(EqualJitter) as Arc<dyn DJitter>),
        Just(Arc::new(Decorrelated) as Arc<dyn DJitter>),
        Just(Arc::new(AwsDecorrelated) as Arc<dyn DJitter>),
    ]
}

/// 2000 cases per property; `PROPTEST_CASES` overrides it for longer searches.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_strategy_stays_within_base_and_max(b in any_strategy(), x in exponent(), seed: u64) {
        let mut rng = SmallRng::seed_from_u64(seed);
        let v = b.delay(x, &mut rng);
        prop_assert!(v >= b.base().min(b.max()), "{v:?} below base {:?}", b.base());
        prop_assert!(v <= b.max(), "{v:?} above max {:?}", b.max());
    }

    #[test]
    fn deterministic_strategies_never_decrease(b in deterministic(), x in exponent(), step in 1u32..1000) {
        let mut rng = SmallRng::seed_from_u64(0);
        let y = x.saturating_add(step);
        prop_assert!(b.delay(x, &mut rng) <= b.delay(y, &mut rng));
        prop_assert!(b.delay(x, &mut rng) <= b.delay(x.saturating_add(1), &mut rng));
    }

    #[test]
    fn jitter_stays_within_its_bounds(
        b in any_strategy(), x in exponent(), seed: u64, prev in proptest::option::of(duration()),
    ) {
        let mut rng = SmallRng::seed_from_u64(seed);
        // The un-jittered value, from an identical generator so Random draws the same v.
        let v = b.delay(x, &mut SmallRng::seed_from_u64(seed));
        let state = JitterState { exponent: x, previous: prev };

        let mut s = state;
        prop_assert_eq!(NoJitter.jitter(&b, &mut s, &mut SmallRng::seed_from_u64(seed)), v);

        let mut s = state;
        let full = FullJitter.jitter(&b, &mut s, &mut SmallRng::seed_from_u64(seed));
        prop_assert!(full <= v);

        let mut s = state;
        let equal = EqualJitter.jitter(&b, &mut s, &mut SmallRng::seed_from_u64(seed));
        prop_assert!(equal >= v / 2 && equal <= v);

        let mut s = state;
        let d = Decorrelated.jitter(&b, &mut s, &mut rng);
        prop_assert!(s.exponent == x || s.exponent == 0);
        prop_assert!(d <= b.max());

        let mut s = state;
        let aws = AwsDecorrelated.jitter(&b, &mut s, &mut rng);
        prop_assert!(aws >= b.base().min(b.max()) && aws <= b.max());
    }

    #[test]
    fn a_whole_plan_never_panics(
        b in any_strategy(), j in jitter(), x in exponent(), seed: u64,
        scale in prop_oneof![1e-12f64..1e12, Just(f64::MIN_POSITIVE), Just(f64::MAX)],
        prev in proptest::option::of(duration()),
    ) {
        let settings = Settings::new().backoff(b).jitter(j).scale(scale);
        prop_assert!(settings.error().is_none());
        let mut state = JitterState { exponent: x, previous: prev };
        let mut rng = SmallRng::seed_from_u64(seed);
        for _ in 0..4 {
            let _ = settings.next_delay(&mut state, &mut rng);
        }
    }
}

//! Every strategy and jitter written in the attribute: the delays slept, exactly for the
//! deterministic ones, and for the random ones equal to the runtime's own computation with the
//! same seed (and within their bounds).

use std::io::{self, ErrorKind};
use std::time::Duration;

mod common;
use common::*;

use retry_runtime::time::VirtualTime;
use retry_runtime::{
    AwsDecorrelated, Backoff, Decorrelated, EqualJitter, Exponential, FullJitter, Jitter, NoJitter,
    Policy, Random, robust,
};

macro_rules! failing {
    ($name:ident, $($attr:tt)*) => {
        #[robust($($attr)*)]
        fn $name() -> io::Result<()> {
            Err(ErrorKind::Other.into())
        }
    };
}

failing!(
    exponential,
    retries = 8,
    jitter = none,
    backoff = exponential(base = 1, max = 60, m = 2)
);
failing!(
    exponential_m,
    retries = 4,
    jitter = none,
    backoff = exponential(base = "100ms", max = "1s", m = 1.5)
);
failing!(
    linear,
    retries = 5,
    jitter = none,
    backoff = linear(base = 1, max = 60)
);
failing!(
    linear_interval,
    retries = 5,
    jitter = none,
    backoff = linear(base = 1, max = 8, interval = 2)
);
failing!(
    fibonacci,
    retries = 7,
    jitter = none,
    backoff = fibonacci(base = 1, max = 60)
);
failing!(
    fibonacci_unit,
    retries = 5,
    jitter = none,
    backoff = fibonacci(base = "100ms", max = "1s", unit = "10ms")
);
failing!(
    polynomial,
    retries = 9,
    jitter = none,
    backoff = polynomial(base = 1, max = 60, p = 2)
);
failing!(
    polynomial_list,
    retries = 4,
    jitter = none,
    backoff = polynomial(base = 0, max = "1h", p = [2, 3], unit = "1ms")
);
failing!(
    constant,
    retries = 3,
    jitter = none,
    backoff = constant(base = "250ms")
);
failing!(no_backoff, retries = 3, backoff = none);
failing!(
    scaled,
    retries = 4,
    jitter = none,
    scale = 0.5,
    backoff = exponential(base = 1, max = 60)
);

#[test]
fn deterministic_strategies_sleep_their_formulas() {
    let s = |v: &[u64]| {
        v.iter()
            .map(|x| Duration::from_secs(*x))
            .collect::<Vec<_>>()
    };
    assert_eq!(sleeps(0, exponential), s(&[1, 2, 4, 8, 16, 32, 60, 60]));
    assert_eq!(
        sleeps(0, exponential_m),
        [100.0, 150.0, 225.0, 337.5]
            .map(|m| Duration::from_secs_f64(m / 1000.0))
            .to_vec()
    );
    assert_eq!(sleeps(0, linear), s(&[1, 2, 3, 4, 5]));
    assert_eq!(sleeps(0, linear_interval), s(&[1, 3, 5, 7, 8]));
    assert_eq!(sleeps(0, fibonacci), s(&[1, 2, 2, 3, 4, 6, 9]));
    assert_eq!(
        sleeps(0, fibonacci_unit),
        ms_each(&[100, 110, 110, 120, 130])
    );
    assert_eq!(sleeps(0, polynomial), s(&[1, 2, 5, 10, 17, 26, 37, 50, 60]));
    // x^2 + x^3 ms
    assert_eq!(sleeps(0, polynomial_list), ms_each(&[0, 2, 12, 36]));
    assert_eq!(sleeps(0, constant), ms_each(&[250, 250, 250]));
    assert_eq!(sleeps(0, no_backoff), ms_each(&[0, 0, 0]));
    assert_eq!(sleeps(0, scaled), ms_each(&[500, 1000, 2000, 4000]));
}

failing!(
    random,
    retries = 6,
    jitter = none,
    backoff = random(base = 1, max = 5)
);
failing!(
    full,
    retries = 6,
    jitter = full,
    backoff = exponential(base = 1, max = 60)
);
failing!(
    equal,
    retries = 6,
    jitter = equal,
    backoff = exponential(base = 1, max = 60)
);
failing!(
    decorrelated,
    retries = 6,
    jitter = decorrelated,
    backoff = exponential(base = 1, max = 60)
);
failing!(
    aws,
    retries = 6,
    jitter = aws_decorrelated,
    backoff = exponential(base = 1, max = 60)
);

/// The same delays computed by a builder policy with the same seed.
fn reference<B: Backoff, J: Jitter>(seed: u64, backoff: B, jitter: J) -> Vec<Duration> {
    let time = VirtualTime::new();
    let p = Policy::builder()
        .retries(6)
        .backoff(backoff)
        .jitter(jitter)
        .seed(seed)
        .env(time.clone())
        .build()
        .unwrap();
    let _: io::Result<()> = p.call(|_| Err(ErrorKind::Other.into()));
    time.sleeps()
}

#[test]
fn random_strategy_and_jitters_match_the_runtime_with_the_same_seed() {
    let secs = Duration::from_secs;
    let exp = Exponential::new(secs(1), secs(60), 2.0).unwrap();
    for seed in [1, 2, 3] {
        let r = sleeps(seed, random);
        assert_eq!(
            r,
            reference(seed, Random::new(secs(1), secs(5)).unwrap(), NoJitter)
        );
        assert!(r.iter().all(|d| *d >= secs(1) && *d <= secs(5)));

        let f = sleeps(seed, full);
        assert_eq!(f, reference(seed, exp, FullJitter));
        for (x, d) in f.iter().enumerate() {
            assert!(*d <= secs(1 << x));
        }

        let e = sleeps(seed, equal);
        assert_eq!(e, reference(seed, exp, EqualJitter));
        for (x, d) in e.iter().enumerate() {
            assert!(*d >= secs(1 << x) / 2 && *d <= secs(1 << x));
        }

        let d = sleeps(seed, decorrelated);
        assert_eq!(d, reference(seed, exp, Decorrelated));
        // Every value is v of some exponent: a power of two seconds.
        assert!(
            d.iter()
                .all(|v| v.subsec_nanos() == 0 && v.as_secs().is_power_of_two())
        );

        let a = sleeps(seed, aws);
        assert_eq!(a, reference(seed, exp, AwsDecorrelated));
        assert!(a.iter().all(|v| *v >= secs(1) && *v <= secs(60)));
    }
    // Different seeds give different jitter.
    assert_ne!(sleeps(1, full), sleeps(2, full));
}

/// A custom strategy and a custom jitter given as expressions.
#[derive(Clone, Copy)]
struct Steps(Duration);
impl Backoff for Steps {
    fn delay(&self, x: u32, _: &mut dyn rand::Rng) -> Duration {
        self.0.saturating_mul(x + 1)
    }
}
struct PlusOne;
impl Jitter for PlusOne {
    fn jitter(
        &self,
        b: &dyn Backoff,
        s: &mut retry_runtime::JitterState,
        rng: &mut dyn rand::Rng,
    ) -> Duration {
        b.delay(s.exponent, rng) + Duration::from_millis(1)
    }
}

failing!(
    custom,
    retries = 3,
    backoff = custom(Steps(Duration::from_millis(10))),
    jitter = custom(PlusOne)
);

#[test]
fn custom_strategy_and_jitter() {
    assert_eq!(sleeps(0, custom), ms_each(&[11, 21, 31]));
}

/// Runs `f` (which must fail) on a virtual clock with `seed`; returns the delays slept.
fn sleeps(seed: u64, f: impl FnOnce() -> io::Result<()>) -> Vec<Duration> {
    let (r, slept) = on_virtual_time(Some(seed), f);
    assert!(r.is_err());
    slept
}

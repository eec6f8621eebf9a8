//! What an attribute says is what it does (SPEC sections 11 and 18): durations with a unit
//! suffix, the sign of zero, bare names in kind lists, parameters under `#[cfg]` and
//! wildcards. The compile errors for the mistakes beside these are in `tests/ui/fail`.

use std::io::{self, ErrorKind};
use std::time::Duration;

mod common;
use common::*;

use retry_runtime::time::VirtualTime;
use retry_runtime::{parse_duration, robust};

// ---------------------------------------------------------------------------------------------
// Unit suffixes: `150ms` is 150 milliseconds, not 150 seconds.

#[robust(retries = 2, jitter = none, backoff = constant(base = 150ms))]
fn constant_150ms() -> io::Result<()> {
    Err(ErrorKind::Other.into())
}

#[robust(retries = 3, jitter = none, backoff = exponential(base = 100ms, max = 1s, m = 2))]
fn exponential_ms() -> io::Result<()> {
    Err(ErrorKind::Other.into())
}

#[robust(retries = 3, jitter = none, backoff = linear(base = 500us, max = 1h, interval = 1.5ms))]
fn linear_us() -> io::Result<()> {
    Err(ErrorKind::Other.into())
}

#[robust(retries = 1, jitter = none, backoff = constant(base = 2m))]
fn constant_minutes() -> io::Result<()> {
    Err(ErrorKind::Other.into())
}

#[test]
fn unit_suffixes_are_read_with_their_unit() {
    assert_eq!(sleeps(constant_150ms), ms_each(&[150, 150]));
    assert_eq!(sleeps(exponential_ms), ms_each(&[100, 200, 400]));
    assert_eq!(
        sleeps(linear_us),
        [500, 2000, 3500].map(Duration::from_micros).to_vec()
    );
    assert_eq!(sleeps(constant_minutes), [Duration::from_secs(120)]);
}

#[robust(timeout = 150ms, retries = 0)]
async fn slow_attempt() -> io::Result<()> {
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn an_async_timeout_with_a_unit_cuts_the_attempt_at_that_time() {
    let start = tokio::time::Instant::now();
    let err = slow_attempt().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::TimedOut);
    assert_eq!(start.elapsed(), Duration::from_millis(150));
}

// ---------------------------------------------------------------------------------------------
// Both crates read every duration the same way: the attribute's value (compile time) equals
// `parse_duration` of the same text (run time).

macro_rules! timeout_of {
    ($name:ident, $value:tt) => {
        #[robust(timeout = $value, retries = 0, attempt = ctx)]
        fn $name() -> io::Result<Option<Duration>> {
            Ok(ctx.timeout())
        }
    };
}

/// A fn returning the timeout its attempt context reads.
type TimeoutOf = fn() -> io::Result<Option<Duration>>;

timeout_of!(t_humantime, "1m 30s");
timeout_of!(t_fraction_string, "0.15");
timeout_of!(t_exponent_string, "1e-3");
timeout_of!(t_nanos_string, "1s 1ns");
timeout_of!(t_days_string, "2days 3h");

#[test]
fn the_attribute_and_the_runtime_read_strings_alike() {
    let cases: [(TimeoutOf, &str); 5] = [
        (t_humantime, "1m 30s"),
        (t_fraction_string, "0.15"),
        (t_exponent_string, "1e-3"),
        (t_nanos_string, "1s 1ns"),
        (t_days_string, "2days 3h"),
    ];
    for (f, text) in cases {
        assert_eq!(f().unwrap(), Some(parse_duration(text).unwrap()), "{text}");
    }
}

timeout_of!(t_seconds, 2);
timeout_of!(t_float_seconds, 0.15);
timeout_of!(t_ms, 150ms);
timeout_of!(t_float_ms, 0.5ms);
timeout_of!(t_us, 250us);
timeout_of!(t_ns, 10ns);
timeout_of!(t_h, 1.5h);

#[test]
fn numbers_with_units_mean_what_their_string_means() {
    let cases: [(TimeoutOf, &str); 7] = [
        (t_seconds, "2"),
        (t_float_seconds, "0.15"),
        (t_ms, "150ms"),
        (t_float_ms, "500us"),
        (t_us, "250us"),
        (t_ns, "10ns"),
        (t_h, "90m"),
    ];
    for (f, text) in cases {
        assert_eq!(f().unwrap(), Some(parse_duration(text).unwrap()), "{text}");
    }
}

// ---------------------------------------------------------------------------------------------
// The sign is the value's: `max_delay = -0` is zero ("never retry", whatever the default
// `retries` allows), not "infinite".

#[robust(max_delay = -0)]
fn minus_zero_max_delay(calls: &std::cell::Cell<u32>) -> io::Result<()> {
    calls.set(calls.get() + 1);
    Err(ErrorKind::Other.into())
}

#[robust(max_delay = -1, retries = 5, backoff = none)]
fn minus_one_max_delay(calls: &std::cell::Cell<u32>) -> io::Result<()> {
    calls.set(calls.get() + 1);
    Err(ErrorKind::Other.into())
}

/// A negative string means what a negative number does: no bound. (A 10 s backoff would
/// pass a `max_delay` of 1 s, and `"-1s"` read as 1 s would make no retry.)
#[robust(max_delay = "-1s", retries = 3, backoff = constant(base = 10s), jitter = none)]
fn minus_one_second_string_max_delay(calls: &std::cell::Cell<u32>) -> io::Result<()> {
    calls.set(calls.get() + 1);
    Err(ErrorKind::Other.into())
}

#[test]
fn minus_zero_is_zero() {
    let calls = std::cell::Cell::new(0);
    let _ = minus_zero_max_delay(&calls);
    assert_eq!(calls.get(), 1, "max_delay = -0 never retries");
    calls.set(0);
    let _ = minus_one_max_delay(&calls);
    assert_eq!(calls.get(), 6, "max_delay = -1 is infinite");
    calls.set(0);
    let time = retry_runtime::time::VirtualTime::new();
    let _guard = time.install();
    let _ = minus_one_second_string_max_delay(&calls);
    assert_eq!(calls.get(), 4, "max_delay = \"-1s\" is infinite");
    assert_eq!(time.sleeps(), [Duration::from_secs(10); 3]);
}

// ---------------------------------------------------------------------------------------------
// Bare names in kind lists name values of the error type; they never bind every error.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Busy,
    Locked,
    Gone,
}

const LOCKED: Status = Status::Locked;
use Status::Busy;

#[robust(on = [Busy, LOCKED], retries = 2, backoff = none)]
fn status(calls: &std::cell::Cell<u32>, answer: Status) -> Result<(), Status> {
    calls.set(calls.get() + 1);
    Err(answer)
}

#[test]
fn constants_and_unit_variants_match_only_themselves() {
    let calls = std::cell::Cell::new(0);
    for (answer, attempts) in [(Status::Busy, 3), (Status::Locked, 3), (Status::Gone, 1)] {
        calls.set(0);
        assert_eq!(status(&calls, answer), Err(answer));
        assert_eq!(calls.get(), attempts, "{answer:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Valid Rust that compiles without the attribute compiles with it, and runs the same.

struct NoClone;

#[robust(retries = 2, backoff = none)]
fn cfg_params(
    #[cfg(any())] gone: String,
    #[cfg(not(any()))] kept: String,
    _: NoClone,
    calls: &std::cell::Cell<u32>,
) -> io::Result<usize> {
    calls.set(calls.get() + 1);
    if calls.get() < 3 {
        return Err(ErrorKind::Other.into());
    }
    Ok(kept.len())
}

#[test]
fn cfg_parameters_and_wildcards_are_kept_as_written() {
    let calls = std::cell::Cell::new(0);
    assert_eq!(cfg_params("abc".into(), NoClone, &calls).unwrap(), 3);
    assert_eq!(calls.get(), 3);
}

#[robust(retries = 1, backoff = none)]
fn shared_borrow<'a>(data: &'a [u8], scratch: &mut Vec<u8>) -> io::Result<&'a [u8]> {
    scratch.push(1);
    if scratch.len() < 2 {
        return Err(ErrorKind::Other.into());
    }
    Ok(&data[1..])
}

#[test]
fn a_borrow_of_a_shared_argument_is_returned_beside_a_mut_one() {
    let mut scratch = Vec::new();
    assert_eq!(shared_borrow(&[1, 2, 3], &mut scratch).unwrap(), &[2, 3]);
    assert_eq!(scratch.len(), 2);
}

// ---------------------------------------------------------------------------------------------
// The attribute's defaults are the runtime's (`RuleSettings::DEFAULT`, named by the expansion,
// never copied): an attribute with nothing set sleeps exactly as a policy built with nothing
// set, with the same seed.

#[robust]
fn all_defaults(calls: &std::cell::Cell<u32>) -> io::Result<()> {
    calls.set(calls.get() + 1);
    Err(ErrorKind::Other.into())
}

#[robust(backoff = polynomial(base = 0, max = 60), when(Io(NotFound), backoff = fibonacci(base = 0, max = 60), jitter = none))]
fn default_params(kind: ErrorKind) -> io::Result<()> {
    Err(kind.into())
}

#[test]
fn unset_settings_are_the_runtimes_defaults() {
    use retry_runtime::{Fibonacci, NoJitter, Policy, Polynomial};
    let seeded = |f: &mut dyn FnMut()| {
        let time = VirtualTime::seeded(42);
        let _g = time.install();
        f();
        time.sleeps()
    };
    let calls = std::cell::Cell::new(0);
    let attribute = seeded(&mut || drop(all_defaults(&calls)));
    let policy = Policy::builder().build().unwrap();
    let builder = seeded(&mut || drop(policy.call(|_| Err::<(), _>(io::Error::other("x")))));
    assert_eq!(attribute, builder);
    assert_eq!(calls.get(), 4, "3 retries by default");

    // Strategy parameters left out (`p`, `unit`) are the runtime's too.
    let poly = Policy::builder()
        .backoff(
            Polynomial::new(
                Duration::ZERO,
                Duration::from_secs(60),
                Polynomial::DEFAULT_P,
            )
            .unwrap(),
        )
        .build()
        .unwrap();
    assert_eq!(
        seeded(&mut || drop(default_params(ErrorKind::Other))),
        seeded(&mut || drop(poly.call(|_| Err::<(), _>(io::Error::other("x")))))
    );
    let fib = Policy::builder()
        .backoff(Fibonacci::new(Duration::ZERO, Duration::from_secs(60)).unwrap())
        .jitter(NoJitter)
        .build()
        .unwrap();
    assert_eq!(
        seeded(&mut || drop(default_params(ErrorKind::NotFound))),
        seeded(&mut || drop(fib.call(|_| Err::<(), _>(io::Error::other("x")))))
    );
}

/// Runs `f` on a virtual clock; returns the delays slept.
fn sleeps<T>(f: impl FnOnce() -> io::Result<T>) -> Vec<Duration> {
    on_virtual_time(None, f).1
}

// ---------------------------------------------------------------------------------------------
// Every attempt starts from the arguments passed in: a `mut` reference parameter reassigned by
// one attempt is the caller's again in the next.

#[robust(retries = 2, backoff = none)]
fn reassigns(mut r: &'static str, seen: &std::cell::RefCell<Vec<&'static str>>) -> io::Result<()> {
    seen.borrow_mut().push(r);
    r = "changed";
    let _ = r;
    Err(ErrorKind::Other.into())
}

#[test]
fn a_mut_reference_parameter_is_rebound_for_every_attempt() {
    let seen = std::cell::RefCell::new(Vec::new());
    let _ = reassigns("original", &seen);
    assert_eq!(*seen.borrow(), ["original"; 3]);
}

// Constants written as paths match the error by value.
#[robust(on = [self::LOCKED], retries = 2, backoff = none)]
fn status_by_path(calls: &std::cell::Cell<u32>, answer: Status) -> Result<(), Status> {
    calls.set(calls.get() + 1);
    Err(answer)
}

#[test]
fn constants_written_as_paths_match_only_themselves() {
    let calls = std::cell::Cell::new(0);
    assert_eq!(status_by_path(&calls, Status::Locked), Err(Status::Locked));
    assert_eq!(calls.get(), 3);
    calls.set(0);
    assert_eq!(status_by_path(&calls, Status::Busy), Err(Status::Busy));
    assert_eq!(calls.get(), 1);
}

/// The builder refuses a `when` rule that its kinds' types show can never apply: one added
/// after `when(AnyError, ..)`, an I/O kind after `when(Io::ANY, ..)`, a second
/// `when(Timeout, ..)`, or `when(NoError, ..)`, the kinds written by reference too (before, a
/// `when` after `when(&AnyError, ..)` was accepted and never applied). Kinds whose values
/// decide (`Io::of`, closures) are not compared.
#[test]
fn the_builder_refuses_a_when_that_never_applies() {
    use retry_runtime::Policy;
    use retry_runtime::kind::{AnyError, ClassifyExt, Io, NoError, Predicate, Timeout};
    let refused = [
        Policy::builder()
            .when(AnyError, |s| s.retries(1))
            .when(Timeout, |s| s.retries(10))
            .build()
            .err(),
        Policy::builder()
            .when(Io::ANY, |s| s.retries(1))
            .when(Io::of([ErrorKind::ConnectionReset]), |s| s.retries(10))
            .build()
            .err(),
        Policy::builder()
            .when(Timeout, |s| s.retries(1))
            .when(Timeout, |s| s.retries(10))
            .build()
            .err(),
        Policy::builder()
            .when(NoError, |s| s.retries(1))
            .build()
            .err(),
        // The same kinds by reference (a kind is one through a reference too).
        Policy::builder()
            .when(&AnyError, |s| s.retries(1))
            .when(Timeout, |s| s.retries(10))
            .build()
            .err(),
        Policy::builder()
            .when(&Io::ANY, |s| s.retries(1))
            .when(&Io::of([ErrorKind::ConnectionReset]), |s| s.retries(10))
            .build()
            .err(),
        Policy::builder()
            .when(&Timeout, |s| s.retries(1))
            .when(&&Timeout, |s| s.retries(10))
            .build()
            .err(),
        Policy::builder()
            .when(&NoError, |s| s.retries(1))
            .build()
            .err(),
        // A catch-all inside an `or` (before, these were accepted: the second rule never
        // applied).
        Policy::builder()
            .when(Timeout.or(Io::ANY), |s| s.retries(5))
            .when(Io::of([ErrorKind::ConnectionRefused]), |s| s.retries(0))
            .build()
            .err(),
        // (`AnyError.or(Timeout)` is refused itself: `Timeout` adds nothing beside it.)
        Policy::builder()
            .when(AnyError.or(NoError), |s| s.retries(5))
            .when(Predicate(|e: &io::Error| e.raw_os_error().is_some()), |s| {
                s.retries(1)
            })
            .build()
            .err(),
        Policy::builder()
            .when(Predicate(|_: &io::Error| true).or(Timeout), |s| {
                s.retries(5)
            })
            .when(&Timeout, |s| s.retries(1))
            .build()
            .err(),
        // A part of an `or` that never applies, the rest of it applying.
        Policy::builder()
            .when(Io::ANY, |s| s.retries(5))
            .when(Timeout.or(Io::of([ErrorKind::ConnectionReset])), |s| {
                s.retries(1)
            })
            .build()
            .err(),
        Policy::builder()
            .when(NoError.or(NoError), |s| s.retries(1))
            .build()
            .err(),
    ];
    for e in refused_for(refused.into_iter().map(|e| (e, "when"))) {
        assert!(e.to_string().contains("never applies"), "{e}");
    }
    let accepted = [
        // The narrower kind first, as the docs say.
        Policy::builder()
            .when(Timeout, |s| s.retries(10))
            .when(Io::of([ErrorKind::ConnectionReset]), |s| s.retries(5))
            .when(Io::ANY, |s| s.retries(1))
            .when(AnyError, |s| s.retries(2))
            .build()
            .err(),
        // Values decide: not compared.
        Policy::builder()
            .when(Io::of([ErrorKind::ConnectionReset]), |s| s.retries(1))
            .when(Io::of([ErrorKind::BrokenPipe]), |s| s.retries(2))
            .when(Predicate(|e: &io::Error| e.raw_os_error().is_some()), |s| {
                s.retries(3)
            })
            .build()
            .err(),
        // Kinds combined with `or`, none of them taken first.
        Policy::builder()
            .when(Timeout.or(Io::of([ErrorKind::ConnectionReset])), |s| {
                s.retries(3)
            })
            .when(Io::ANY, |s| s.retries(1))
            .build()
            .err(),
        // `NoError` beside other kinds adds nothing, as generic code may write it.
        Policy::builder()
            .when(Timeout.or(NoError), |s| s.retries(1))
            .build()
            .err(),
    ];
    all_accepted(accepted);
}

/// The builder refuses an `on` kind that a `when` rule takes first (the `when` rules are tried
/// before `on`, whatever the order they were written in): every kind after a
/// `when(AnyError, ..)`, an I/O kind after a `when(Io::ANY, ..)`, through `or` and references
/// too. An `on` kind that is a `when`'s own (`on(Timeout)` beside `when(Timeout, ..)`: the
/// `when` gives its settings) and the default `on` (every error, not written) are accepted.
#[test]
fn the_builder_refuses_an_on_kind_a_when_takes_first() {
    use retry_runtime::Policy;
    use retry_runtime::kind::{AnyError, ClassifyExt, Io, NoError, OkIf, Timeout};
    let refused = [
        Policy::builder()
            .on(Io::ANY)
            .when(Timeout, |s| s.retries(10))
            .when(AnyError, |s| s.retries(0))
            .build()
            .err(),
        Policy::builder()
            .on(Io::of([ErrorKind::ConnectionReset]))
            .when(Io::ANY, |s| s.retries(1))
            .build()
            .err(),
        Policy::builder()
            .on(Timeout.or(Io::ANY))
            .when(&AnyError, |s| s.retries(1))
            .build()
            .err(),
        // `on` written after the `when`s: the same.
        Policy::builder()
            .when(Io::ANY.or(Timeout), |s| s.retries(1))
            .on(Io::of([ErrorKind::BrokenPipe]))
            .build()
            .err(),
    ];
    for e in refused_for(refused.into_iter().map(|e| (e, "on"))) {
        assert!(e.to_string().contains("never applies"), "{e}");
    }
    let accepted = [
        Policy::builder()
            .on(Timeout.or(Io::ANY))
            .when(Timeout, |s| s.retries(10))
            .build()
            .err(),
        Policy::builder()
            .on(Io::ANY)
            .when(Io::ANY, |s| s.retries(1))
            .build()
            .err(),
        Policy::builder()
            .on(AnyError)
            .when(AnyError, |s| s.retries(1))
            .build()
            .err(),
        Policy::builder()
            .when(AnyError, |s| s.retries(1))
            .build()
            .err(),
        Policy::builder()
            .on(Timeout)
            .when(Io::ANY, |s| s.retries(1))
            .build()
            .err(),
        Policy::builder()
            .on(NoError)
            .on_ok(OkIf(|v: &u32| *v == 0))
            .when(AnyError, |s| s.retries(1))
            .build()
            .err(),
    ];
    all_accepted(accepted);
}

/// The builder refuses a `hint` in a policy that retries only values (`on(NoError)` beside an
/// `on_ok` kind or a `when_ok` rule, no `when` on errors that retries): the hint reads errors,
/// and none is retried (the attribute refuses the same). With an error retried, accepted.
#[test]
fn the_builder_refuses_a_hint_with_only_values_retried() {
    use retry_runtime::Policy;
    use retry_runtime::kind::{NoError, OkIf, Timeout};
    let hint = |_: &io::Error| Some(Duration::from_secs(1));
    let refused = [
        Policy::builder()
            .on(NoError)
            .on_ok(OkIf(|v: &u32| *v == 0))
            .hint(hint)
            .build()
            .err(),
        Policy::builder()
            .on(NoError)
            .when_ok(OkIf(|v: &u32| *v == 0), |s| s.retries(2))
            .hint(hint)
            .build()
            .err(),
    ];
    for e in refused_for(refused.into_iter().map(|e| (e, "hint"))) {
        assert!(e.to_string().contains("only values are retried"), "{e}");
    }
    let accepted = [
        Policy::builder()
            .on(NoError)
            .on_ok(OkIf(|v: &u32| *v == 0))
            .when(Timeout, |s| s.retries(2))
            .hint(hint)
            .build()
            .err(),
        Policy::builder()
            .on_ok(OkIf(|v: &u32| *v == 0))
            .hint(hint)
            .build()
            .err(),
    ];
    all_accepted(accepted);
}

/// The builder refuses a jitter its rule's strategy gives nothing to do, as the attribute
/// does: `AwsDecorrelated` beside a strategy whose `base` is 0 (every delay 0) or beside
/// `Constant` (always `base`), `Decorrelated` beside a strategy whose delay does not depend on
/// the exponent it moves, in a policy of one rule. Other pairs, and a `when` rule with a
/// strategy of its own that reads the `on` rule's jitter, are accepted.
#[test]
fn the_builder_refuses_a_jitter_the_strategy_gives_nothing_to_do() {
    use retry_runtime::kind::Io;
    use retry_runtime::{
        AwsDecorrelated, Constant, Decorrelated, Exponential, Fibonacci, Linear, NoBackoff,
        NoJitter, Policy, Polynomial, Random,
    };
    /// A jitter of the user's that reads the backoff exponent.
    struct ByExponent;
    impl retry_runtime::Jitter for ByExponent {
        fn jitter(
            &self,
            backoff: &dyn retry_runtime::Backoff,
            state: &mut retry_runtime::JitterState,
            _: &mut dyn rand::Rng,
        ) -> Duration {
            backoff.base() * (state.exponent.min(10) + 1)
        }
    }
    let s = Duration::from_secs;
    let refused = [
        Policy::builder()
            .backoff(Constant::new(s(1)))
            .jitter(AwsDecorrelated)
            .build()
            .err(),
        Policy::builder()
            .backoff(Fibonacci::new(Duration::ZERO, s(30)).unwrap())
            .jitter(AwsDecorrelated)
            .build()
            .err(),
        Policy::builder()
            .backoff(Constant::new(s(1)))
            .jitter(Decorrelated)
            .build()
            .err(),
        Policy::builder()
            .backoff(Random::new(s(1), s(2)).unwrap())
            .jitter(&Decorrelated)
            .build()
            .err(),
        Policy::builder()
            .backoff(Exponential::new(s(1), s(1), 2.0).unwrap())
            .jitter(AwsDecorrelated)
            .build()
            .err(),
        Policy::builder()
            .backoff(NoBackoff)
            .jitter(AwsDecorrelated)
            .build()
            .err(),
        Policy::builder()
            .backoff(NoBackoff)
            .jitter(Decorrelated)
            .build()
            .err(),
        // The AWS jitter never reads a strategy's growth, only its `base` and `max`.
        Policy::builder()
            .backoff(Linear::new(s(1), s(30)).unwrap())
            .jitter(AwsDecorrelated)
            .build()
            .err(),
        Policy::builder()
            .backoff(Fibonacci::new(s(1), s(30)).unwrap())
            .jitter(AwsDecorrelated)
            .when(Io::ANY, |r| r.retries(2))
            .build()
            .err(),
        Policy::builder()
            .backoff(Polynomial::new(s(1), s(30), [2.0, 3.0]).unwrap())
            .jitter(AwsDecorrelated)
            .build()
            .err(),
        // A strategy whose delay does not grow, seen by its delays: `m` = 1, an interval of 0.
        Policy::builder()
            .backoff(Exponential::new(s(1), s(30), 1.0).unwrap())
            .jitter(Decorrelated)
            .build()
            .err(),
        Policy::builder()
            .backoff(Linear::with_interval(s(1), s(30), Duration::ZERO).unwrap())
            .jitter(Decorrelated)
            .build()
            .err(),
        // A `when` rule that inherits the pair reads it as the `on` rule does.
        Policy::builder()
            .backoff(Constant::new(s(1)))
            .jitter(AwsDecorrelated)
            .when(Io::ANY, |r| r.retries(2))
            .build()
            .err(),
        // In a `when` rule too (AWS decorrelated: whatever the other rules).
        Policy::builder()
            .when(Io::ANY, |r| {
                r.backoff(Constant::new(s(1))).jitter(AwsDecorrelated)
            })
            .build()
            .err(),
        // A `when` rule's AWS jitter over the `NoBackoff` it inherits: its `max` of 0 caps
        // every draw, whatever the other rules wait.
        Policy::builder()
            .backoff(NoBackoff)
            .when(Io::of([std::io::ErrorKind::ConnectionRefused]), |r| {
                r.backoff(Exponential::new(s(1), s(30), 2.0).unwrap())
            })
            .when(Io::ANY, |r| r.jitter(AwsDecorrelated))
            .build()
            .err(),
        // An `Exponential`'s multiplier other than 2, which the AWS jitter never reads.
        Policy::builder()
            .backoff(Exponential::new(s(1), s(30), 4.0).unwrap())
            .jitter(AwsDecorrelated)
            .build()
            .err(),
        // The `on` rule never retries; the `when` rule that inherits the pair reads it.
        Policy::builder()
            .retries(0)
            .backoff(Constant::new(s(1)))
            .jitter(AwsDecorrelated)
            .when(Io::ANY, |r| r.retries(2))
            .build()
            .err(),
        // One rule that retries (the `when` rule never does): the decorrelated jitter moves
        // only the `on` rule's exponent, which a `Constant` does not read; and the AWS one
        // starts every draw from a `base` of 0.
        Policy::builder()
            .backoff(Constant::new(Duration::from_millis(200)))
            .jitter(Decorrelated)
            .when(Io::of([std::io::ErrorKind::ConnectionRefused]), |r| {
                r.retries(0)
            })
            .build()
            .err(),
        Policy::builder()
            .backoff(Random::new(Duration::ZERO, s(10)).unwrap())
            .jitter(AwsDecorrelated)
            .when(Io::ANY, |r| r.retries(0))
            .build()
            .err(),
        // The one rule that retries is a `when` rule, with its own pair: judged as the `on`
        // rule's would be in a policy of one rule (`on(NoError)` takes no error either).
        Policy::builder()
            .retries(0)
            .when(retry_runtime::kind::Timeout, |r| {
                r.retries(3)
                    .backoff(Random::new(Duration::ZERO, s(10)).unwrap())
                    .jitter(AwsDecorrelated)
            })
            .build()
            .err(),
        Policy::builder()
            .retries(0)
            .when(retry_runtime::kind::Timeout, |r| {
                r.retries(3)
                    .backoff(Constant::new(s(1)))
                    .jitter(Decorrelated)
            })
            .build()
            .err(),
        Policy::builder()
            .on(retry_runtime::kind::NoError)
            .when(retry_runtime::kind::AnyError, |r| {
                r.retries(3)
                    .backoff(Constant::new(s(1)))
                    .jitter(Decorrelated)
            })
            .build()
            .err(),
        // Several rules that retry, reading one constant: the decorrelated jitter moves the
        // exponent they share, which neither reads.
        Policy::builder()
            .backoff(Constant::new(s(1)))
            .jitter(Decorrelated)
            .when(Io::ANY, |r| r.retries(2))
            .build()
            .err(),
        // Several rules that retry, each with a delay the exponent does not move (one reads
        // the `on` rule's constant, one has a constant and a jitter of its own): the
        // decorrelated jitter's reset changes no delay.
        Policy::builder()
            .backoff(Constant::new(s(1)))
            .jitter(Decorrelated)
            .on(Io::of([std::io::ErrorKind::ConnectionReset]))
            .when(Io::of([std::io::ErrorKind::BrokenPipe]), |r| r.retries(5))
            .when(retry_runtime::kind::Timeout, |r| {
                r.retries(2).backoff(Constant::new(s(2))).jitter(NoJitter)
            })
            .build()
            .err(),
        // The `on` rule never retries; the `when` rule that inherits an `Exponential` with
        // `m` = 4 and the AWS jitter reads the pair, and its `m` not at all.
        Policy::builder()
            .retries(0)
            .backoff(Exponential::new(s(1), s(30), 4.0).unwrap())
            .jitter(AwsDecorrelated)
            .when(Io::ANY, |r| r.retries(2))
            .build()
            .err(),
    ];
    for e in refused_for(refused.into_iter().map(|e| (e, "jitter"))) {
        assert!(
            e.to_string().contains("AwsDecorrelated") || e.to_string().contains("Decorrelated"),
            "{e}"
        );
    }
    let accepted = [
        Policy::builder()
            .backoff(Exponential::new(s(1), s(30), 2.0).unwrap())
            .jitter(AwsDecorrelated)
            .build()
            .err(),
        // A `Linear` or a `Fibonacci` with no growth (an interval or unit of 0): none unread.
        Policy::builder()
            .backoff(
                Linear::with_interval(Duration::from_millis(100), s(10), Duration::ZERO).unwrap(),
            )
            .jitter(AwsDecorrelated)
            .build()
            .err(),
        Policy::builder()
            .backoff(
                Fibonacci::with_unit(Duration::from_millis(100), s(10), Duration::ZERO).unwrap(),
            )
            .jitter(AwsDecorrelated)
            .build()
            .err(),
        // The strategy's growth is read by a `when` rule with a jitter of its own.
        Policy::builder()
            .backoff(Exponential::new(s(1), s(30), 4.0).unwrap())
            .jitter(AwsDecorrelated)
            .when(Io::ANY, |r| r.jitter(retry_runtime::FullJitter))
            .build()
            .err(),
        Policy::builder()
            .backoff(Linear::new(s(1), s(30)).unwrap())
            .jitter(AwsDecorrelated)
            .when(Io::ANY, |r| r.jitter(NoJitter))
            .build()
            .err(),
        // A multiplier that makes no difference: every delay after the first is the `max`.
        Policy::builder()
            .backoff(Exponential::new(s(1), Duration::from_millis(1500), 4.0).unwrap())
            .jitter(AwsDecorrelated)
            .build()
            .err(),
        Policy::builder()
            .backoff(Exponential::new(s(1), s(30), 2.0).unwrap())
            .jitter(Decorrelated)
            .build()
            .err(),
        // The decorrelated jitter's reset moves the exponent a `when` rule's own growing
        // strategy reads (the rule sets its own jitter: it reads the `on` rule's reset).
        Policy::builder()
            .backoff(Constant::new(s(1)))
            .jitter(Decorrelated)
            .on(Io::of([std::io::ErrorKind::ConnectionReset]))
            .when(retry_runtime::kind::Timeout, |r| {
                r.retries(2)
                    .backoff(Exponential::new(s(1), s(30), 2.0).unwrap())
                    .jitter(retry_runtime::FullJitter)
            })
            .build()
            .err(),
        // A `when` rule's jitter of the user's may read the exponent the decorrelated jitter
        // resets (`JitterState::exponent`), beside rules that all wait a constant.
        Policy::builder()
            .backoff(Constant::new(s(1)))
            .jitter(Decorrelated)
            .on(Io::of([std::io::ErrorKind::ConnectionReset]))
            .when(retry_runtime::kind::Timeout, |r| {
                r.retries(2).backoff(Constant::new(s(2))).jitter(ByExponent)
            })
            .build()
            .err(),
        // A `when` rule with a strategy that grows reads the `on` rule's jitter.
        Policy::builder()
            .backoff(Constant::new(s(1)))
            .jitter(AwsDecorrelated)
            .when(Io::ANY, |r| {
                r.backoff(Exponential::new(s(1), s(30), 2.0).unwrap())
            })
            .build()
            .err(),
        // With several rules, the AWS jitter may start from another rule's delay.
        Policy::builder()
            .backoff(Random::new(Duration::ZERO, s(30)).unwrap())
            .jitter(AwsDecorrelated)
            .when(Io::ANY, |r| r.backoff(Constant::new(s(1))).jitter(NoJitter))
            .build()
            .err(),
        // A `when` rule's AWS jitter over the growing strategy it inherits: the `on` rule
        // reads its growth (as the attribute accepts).
        Policy::builder()
            .backoff(Linear::new(s(1), s(30)).unwrap())
            .when(Io::ANY, |r| r.jitter(AwsDecorrelated))
            .build()
            .err(),
    ];
    all_accepted(accepted);
}

/// The builder refuses a setting of the `on` rule that every `when` replaces: the `when`s take
/// every error the `on` rule would retry (they are tried first), the `on` rule takes no value,
/// and each `when` sets its own value (the attribute refuses the same). A setting one rule
/// inherits, or an `on` rule that still takes some errors or values, is accepted.
#[test]
fn the_builder_refuses_top_level_settings_every_when_replaces() {
    use retry_runtime::kind::{AnyError, ClassifyExt, Io, OkIf, Timeout};
    use retry_runtime::{Constant, Policy};
    let s = Duration::from_secs;
    let refused = [
        (
            Policy::builder()
                .retries(5)
                .backoff(Constant::new(s(1)))
                .when(AnyError, |r| r.retries(2).backoff(Constant::new(s(2))))
                .build()
                .err(),
            "retries",
        ),
        (
            Policy::builder()
                .on(Timeout)
                .retries(5)
                .when(Timeout, |r| r.retries(1))
                .build()
                .err(),
            "retries",
        ),
        (
            Policy::builder()
                .on(Io::ANY)
                .max_delay(s(10))
                .when(Io::ANY, |r| r.max_delay(s(1)))
                .build()
                .err(),
            "max_delay",
        ),
        (
            Policy::builder()
                .retries(3)
                .backoff(Constant::new(s(1)))
                .when(Timeout, |r| r.backoff(Constant::new(s(2))))
                .when(AnyError, |r| r.backoff(Constant::new(s(3))))
                .build()
                .err(),
            "backoff",
        ),
    ];
    for e in refused_for(refused) {
        assert!(e.to_string().contains("each sets its own"), "{e}");
    }
    let accepted = [
        // The `when` inherits the retries.
        Policy::builder()
            .retries(5)
            .when(AnyError, |r| r.backoff(Constant::new(s(1))))
            .build()
            .err(),
        // One of two `when`s inherits the strategy.
        Policy::builder()
            .retries(3)
            .backoff(Constant::new(s(1)))
            .when(Timeout, |r| r.backoff(Constant::new(s(2))))
            .when(AnyError, |r| r.retries(1))
            .build()
            .err(),
        // The `on` rule takes values too.
        Policy::builder()
            .retries(5)
            .on_ok(OkIf(|v: &u32| *v == 503))
            .when(AnyError, |r| r.retries(2))
            .build()
            .err(),
        // The `on` rule still takes the I/O errors.
        Policy::builder()
            .on(Timeout.or(Io::ANY))
            .retries(5)
            .when(Timeout, |r| r.retries(1))
            .build()
            .err(),
        // Nothing written at the top level.
        Policy::builder()
            .when(AnyError, |r| r.retries(1))
            .build()
            .err(),
        // The decorrelated jitter is read by the rule beside `NoBackoff` too: it moves the
        // state the other rule's strategy reads.
        Policy::builder()
            .jitter(retry_runtime::jitter::Decorrelated)
            .when(Io::of([ErrorKind::ConnectionRefused]), |r| {
                r.backoff(retry_runtime::NoBackoff).retries(5)
            })
            .when(AnyError, |r| r.jitter(retry_runtime::NoJitter))
            .build()
            .err(),
    ];
    all_accepted(accepted);
}

/// A `when` or `when_ok` rule that sets nothing of its own (SPEC section 8: "`when` without
/// overrides"), and a setting of an `on` rule that never retries which each rule that retries
/// sets for itself, are refused by the builder as by the attribute
/// (`tests/ui/fail/when_without_overrides.rs`, `tests/ui/fail/keys_without_retries.rs`).
#[test]
fn the_builder_refuses_rules_and_settings_that_add_nothing() {
    use retry_runtime::kind::{Io, OkIf, Timeout};
    use retry_runtime::{Constant, Exponential, FullJitter, NoJitter, Policy};
    let s = Duration::from_secs;
    let ms = Duration::from_millis;
    let busy = || OkIf(|v: &u16| *v == 503);
    let refused = [
        (Policy::builder().when(Timeout, |r| r).build().err(), "when"),
        (
            Policy::builder()
                .on(Io::ANY)
                .when(Timeout, |r| r)
                .build()
                .err(),
            "when",
        ),
        (
            Policy::builder().when_ok(busy(), |r| r).build().err(),
            "when_ok",
        ),
        // "Retry only timeouts": the `on` rule's backoff and jitter are read by no rule.
        (
            Policy::builder()
                .retries(0)
                .backoff(Constant::new(s(1)))
                .jitter(NoJitter)
                .when(Timeout, |r| {
                    r.retries(3)
                        .backoff(Exponential::new(ms(100), s(5), 2.0).unwrap())
                        .jitter(FullJitter)
                })
                .timeout(s(1))
                .build()
                .err(),
            "backoff",
        ),
        (
            Policy::builder()
                .retries(0)
                .jitter(NoJitter)
                .when(Timeout, |r| r.retries(3).jitter(FullJitter))
                .timeout(s(1))
                .build()
                .err(),
            "jitter",
        ),
        (
            Policy::builder()
                .retries(0)
                .scale(2.0)
                .when(Timeout, |r| r.retries(3).scale(0.5))
                .build()
                .err(),
            "scale",
        ),
        // A `max_delay` of zero is the reason; the `retries` are the `when` rule's own.
        (
            Policy::builder()
                .max_delay(Duration::ZERO)
                .retries(4)
                .when(Timeout, |r| r.retries(2).max_delay(s(10)))
                .build()
                .err(),
            "retries",
        ),
        (
            Policy::builder()
                .retries(0)
                .max_delay(s(5))
                .when(Timeout, |r| r.retries(2).no_max_delay())
                .build()
                .err(),
            "max_delay",
        ),
    ];
    for e in refused_for(refused) {
        assert!(
            e.to_string().contains("needs a setting of its own")
                || e.to_string().contains("sets its own"),
            "{e}"
        );
    }
    all_accepted([
        // A setting one rule that retries reads.
        Policy::builder()
            .retries(0)
            .backoff(Constant::new(ms(10)))
            .when(Io::ANY, |r| r.retries(2))
            .when(Timeout, |r| r.retries(1).backoff(Constant::new(ms(50))))
            .build()
            .err(),
        Policy::builder()
            .max_delay(Duration::ZERO)
            .retries(4)
            .when(Timeout, |r| r.max_delay(s(10)))
            .build()
            .err(),
        Policy::builder()
            .retries(0)
            .max_delay(s(5))
            .when(Timeout, |r| r.retries(2))
            .build()
            .err(),
        // The reason itself is read: `retries(0)`.
        Policy::builder()
            .retries(0)
            .when(Timeout, |r| r.retries(2))
            .build()
            .err(),
        // A value rule whose kind reads the delay from the value says something of its own.
        Policy::builder()
            .when_ok(busy().hint(|_: &u16| Some(ms(10))), |r| r)
            .build()
            .err(),
        // A `when` rule with one setting of its own, even one equal to the `on` rule's.
        Policy::builder()
            .when(Timeout, |r| r.retries(3))
            .build()
            .err(),
        // Settings made anew replace the `on` rule's.
        Policy::builder()
            .retries(5)
            .when(Timeout, |_| retry_runtime::Settings::new())
            .build()
            .err(),
    ]);
}

/// A kind combined with `or` whose part adds nothing is refused by the builder, in `on` and in
/// a `when`, as the attribute refuses it in a list (`tests/ui/fail/duplicate_on.rs`,
/// `tests/ui/fail/kinds_that_add_nothing.rs`).
#[test]
fn the_builder_refuses_a_kind_part_that_adds_nothing() {
    use retry_runtime::Policy;
    use retry_runtime::kind::{AnyError, ClassifyExt, Io, NoError, Timeout};
    let refused = [
        (
            Policy::builder().on(Timeout.or(Timeout)).build().err(),
            "on",
        ),
        (
            Policy::builder().on(AnyError.or(Timeout)).build().err(),
            "on",
        ),
        (
            Policy::builder()
                .on(Io::ANY.or(Io::of([ErrorKind::ConnectionReset])))
                .build()
                .err(),
            "on",
        ),
        (
            Policy::builder()
                .when(Timeout.or(Timeout), |r| r.retries(1))
                .build()
                .err(),
            "when",
        ),
        (
            Policy::builder()
                .when(Timeout.or(&AnyError), |r| r.retries(1))
                .build()
                .err(),
            "when",
        ),
    ];
    for e in refused_for(refused) {
        assert!(
            e.to_string().contains("adds nothing") || e.to_string().contains("twice"),
            "{e}"
        );
    }
    all_accepted([
        Policy::builder().on(Timeout.or(Io::ANY)).build().err(),
        Policy::builder()
            .on(Io::of([ErrorKind::ConnectionReset]).or(Timeout))
            .build()
            .err(),
        // `NoError` beside a kind says "nothing more", as generic code may write it.
        Policy::builder().on(AnyError.or(NoError)).build().err(),
        Policy::builder()
            .when(Timeout.or(NoError), |r| r.retries(1))
            .build()
            .err(),
    ]);
}

/// The `on` rule never retries and the only `when` rule that does waits nothing: the `on`
/// rule's jitter, which that rule inherits, has no delay to act on.
#[test]
fn an_inherited_jitter_beside_no_backoff_is_read_by_no_rule() {
    use retry_runtime::kind::Timeout;
    use retry_runtime::{FullJitter, NoBackoff, Policy};
    let e = Policy::builder()
        .retries(0)
        .jitter(FullJitter)
        .when(Timeout, |r| r.retries(2).backoff(NoBackoff))
        .build()
        .unwrap_err();
    assert_eq!(e.parameter(), "jitter");
    assert!(e.to_string().contains("no delay for it to act on"), "{e}");
}

/// A growth given beside a `base` equal to the `max` is read by nothing (every delay is
/// `base`), as the attribute refuses it (`growth_without_room.rs`): an error naming it. The
/// same bounds without a growth of one's own (the default `m`, interval, unit or exponents)
/// are accepted.
#[test]
fn a_growth_beside_equal_bounds_is_refused() {
    use retry_runtime::{Exponential, Fibonacci, Linear, Polynomial};
    let s = Duration::from_secs;
    let refused = [
        (Exponential::new(s(1), s(1), 5.0).err(), "m"),
        (Linear::with_interval(s(1), s(1), s(2)).err(), "interval"),
        (Fibonacci::with_unit(s(1), s(1), s(2)).err(), "unit"),
        (Polynomial::new(s(1), s(1), [3.0]).err(), "p"),
        (Polynomial::with_unit(s(1), s(1), [2.0], s(2)).err(), "unit"),
        (Linear::from_secs(1.0, 1.0, 0.5).err(), "interval"),
    ];
    for (e, parameter) in refused {
        let e = e.unwrap_or_else(|| panic!("{parameter} accepted"));
        assert_eq!(e.parameter(), parameter, "{e}");
        assert!(e.to_string().contains("`base` equals `max`"), "{e}");
    }
    // The defaults given by name (`from_secs` takes every parameter) are accepted too.
    assert!(Linear::from_secs(1.0, 1.0, 1.0).is_ok());
    assert!(Fibonacci::from_secs(1.0, 1.0, 1.0).is_ok());
    assert!(Polynomial::from_secs(1.0, 1.0, [2.0], 1.0).is_ok());
    assert!(Exponential::from_secs(1.0, 1.0, 2.0).is_ok());
    // An exponent that is wrong in itself is reported as such, first.
    let e = Polynomial::new(s(1), s(1), [0.5]).unwrap_err();
    assert!(!e.to_string().contains("`base` equals `max`"), "{e}");
    assert!(Exponential::new(s(1), s(1), 2.0).is_ok());
    assert!(Linear::new(s(1), s(1)).is_ok());
    assert!(Fibonacci::new(s(1), s(1)).is_ok());
    assert!(Polynomial::new(s(1), s(1), Polynomial::DEFAULT_P).is_ok());
    assert!(Exponential::new(s(1), s(2), 5.0).is_ok());
}

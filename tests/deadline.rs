//! A deadline for the whole call (SPEC section 12), set with `PolicyBuilder::deadline`: the
//! exact instant a call returns when the deadline falls during an attempt, during a backoff,
//! and after the retries are used up; async on tokio's paused clock, blocking on `VirtualTime`.

use std::cell::Cell;
use std::io::{self, ErrorKind};
use std::time::Duration;

use retry_runtime::latency::Latencies;
use retry_runtime::time::VirtualTime;
use retry_runtime::timeout::Adaptive;
use retry_runtime::{Constant, NoBackoff, NoJitter, Policy};
use tokio::time::Instant;

mod common;
use common::*;

/// Runs `policy` on an async body that fails with `ConnectionReset` at once: the result, the
/// attempts made and the time the call took.
async fn resets<P: retry_runtime::AsyncRetryPolicy<(), io::Error>>(
    policy: &P,
) -> (io::Result<()>, u32, Duration) {
    let start = Instant::now();
    let attempts = Cell::new(0);
    let r = policy
        .call_async(|_| async {
            attempts.set(attempts.get() + 1);
            Err(ErrorKind::ConnectionReset.into())
        })
        .await;
    (r, attempts.get(), start.elapsed())
}

#[tokio::test(start_paused = true)]
async fn a_deadline_during_an_attempt_cancels_it_and_returns_at_once() {
    let errors = Cell::new(Vec::new());
    let policy = Policy::builder()
        .retries(10)
        .backoff(NoBackoff)
        .deadline(ms(250))
        .on_error(|e: &io::Error, _| {
            let mut v = errors.take();
            v.push(e.kind());
            errors.set(v);
        })
        .build()
        .unwrap();
    let start = Instant::now();
    let attempts = Cell::new(0);
    let r: io::Result<()> = policy
        .call_async(|_| async {
            attempts.set(attempts.get() + 1);
            tokio::time::sleep(secs(10)).await;
            Ok(())
        })
        .await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(start.elapsed(), ms(250));
    assert_eq!(attempts.get(), 1);
    assert_eq!(
        errors.take(),
        [ErrorKind::TimedOut],
        "on_error sees the cut attempt"
    );
}

#[tokio::test(start_paused = true)]
async fn no_retry_is_made_whose_backoff_would_end_past_the_deadline() {
    let policy = Policy::builder()
        .retries(10)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .deadline(ms(250))
        .build()
        .unwrap();
    let (r, attempts, took) = resets(&policy).await;
    // Attempts at 0, 100 and 200 ms; a backoff to 300 ms would pass the deadline: the last
    // failure is returned unchanged, at 200 ms.
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(attempts, 3);
    assert_eq!(took, ms(200));
}

/// A blocking retry whose backoff ends at or after the deadline is not made, whatever made it
/// late (here an `on_error` that takes 200 ms, run after the clock was read at 0 ms for the
/// decision, which allows a 100 ms backoff): the failure it follows is returned.
#[test]
fn a_blocking_retry_due_after_the_deadline_is_not_made() {
    let time = VirtualTime::new();
    let _guard = time.install();
    let clock = time.clone();
    let policy = Policy::builder()
        .retries(10)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .deadline(ms(250))
        .on_error(move |_: &io::Error, _| clock.advance(ms(200)))
        .build()
        .unwrap();
    let attempts = Cell::new(0);
    let r: io::Result<()> = policy.call(|_| {
        attempts.set(attempts.get() + 1);
        Err(ErrorKind::ConnectionReset.into())
    });
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(attempts.get(), 1);
    assert_eq!(time.slept(), ms(100));
}

/// An async retry whose backoff would end less than tokio's timer resolution (2 ms) before the
/// deadline is not made: its timer may fire that late (a 249.5 ms backoff before a 250 ms
/// deadline wakes at 250 ms, with no time left for the attempt), so the failure it follows is
/// returned unchanged, at once, as for a backoff that ends past the deadline. One that ends
/// 2 ms before it is made.
#[tokio::test(start_paused = true)]
async fn an_async_retry_whose_timer_could_fire_at_the_deadline_is_not_made() {
    let backoff = |d| {
        Policy::builder()
            .retries(1)
            .backoff(Constant::new(d))
            .jitter(NoJitter)
            .deadline(ms(250))
            .build()
            .unwrap()
    };
    let (r, attempts, took) = resets(&backoff(Duration::from_micros(249_500))).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(attempts, 1);
    assert_eq!(took, ms(0));
    let (r, attempts, took) = resets(&backoff(Duration::from_micros(248_500))).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(attempts, 1);
    assert_eq!(took, ms(0));
    let (r, attempts, took) = resets(&backoff(ms(248))).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(attempts, 2);
    assert_eq!(took, ms(248));
}

/// A hedged round decides as the loop does: a failure whose hint would end its backoff within
/// the timer's resolution of the deadline asks for no retry the loop would make, so the round
/// goes on and sends its hedge at once, which answers. (Before, the round stopped hedging to keep the
/// failure for a retry the loop then refused: the call returned the failure.)
#[tokio::test(start_paused = true)]
async fn a_hedged_round_sends_its_hedge_when_a_hint_ends_too_close_to_the_deadline() {
    let run = |hint: Duration| async move {
        let policy = Policy::builder()
            .retries(3)
            .backoff(Constant::new(ms(1)))
            .jitter(NoJitter)
            .hint(move |_: &io::Error| Some(hint))
            .hedge(retry_runtime::hedge::Hedge::after(ms(50), 1).unwrap())
            .deadline(ms(250))
            .build()
            .unwrap();
        let start = Instant::now();
        let attempts = Cell::new(0);
        let r: io::Result<u32> = policy
            .call_async(|_| {
                attempts.set(attempts.get() + 1);
                let first = attempts.get() == 1;
                async move {
                    if first {
                        Err(ErrorKind::ConnectionReset.into())
                    } else {
                        Ok(7)
                    }
                }
            })
            .await;
        (r.map_err(|e| e.kind()), attempts.get(), start.elapsed())
    };
    // Within 2 ms of the deadline: a retryable failure that asks for no delay starts the
    // round's hedge at once (SPEC 15), and it answers.
    assert_eq!(run(Duration::from_micros(249_000)).await, (Ok(7), 2, ms(0)));
    // Well before it: the round keeps the failure, and its retry answers after the hint.
    assert_eq!(run(ms(200)).await, (Ok(7), 2, ms(200)));
}

/// A retry with no backoff makes no timer, so it is made as long as time is left, however
/// little: here half a millisecond, after a first attempt that took 249.5 ms.
#[tokio::test(start_paused = true)]
async fn a_retry_without_backoff_is_made_within_a_millisecond_of_the_deadline() {
    let policy = Policy::builder()
        .retries(2)
        .backoff(NoBackoff)
        .deadline(ms(250))
        .build()
        .unwrap();
    let start = Instant::now();
    let attempts = Cell::new(0);
    let r: io::Result<()> = policy
        .call_async(|_| async {
            attempts.set(attempts.get() + 1);
            if attempts.get() == 1 {
                tokio::time::advance(Duration::from_micros(249_500)).await;
            }
            Err(ErrorKind::ConnectionReset.into())
        })
        .await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(attempts.get(), 3);
    assert_eq!(start.elapsed(), Duration::from_micros(249_500));
}

/// The same with the default backoff and full jitter, over many seeds: a call whose attempts
/// all fail at once ends with its last failure, never with `Elapsed` (before the timer's
/// resolution was counted, about 3% of such calls ended with `Elapsed`: those whose last
/// backoff was drawn to end in the deadline's last millisecond).
#[tokio::test(start_paused = true)]
async fn a_jittered_async_call_ends_with_its_last_failure_not_elapsed() {
    let mut retried = 0;
    for seed in 0..500 {
        let policy = Policy::builder()
            .retries(10)
            .deadline(ms(300))
            .seed(seed)
            .build()
            .unwrap();
        let (r, attempts, took) = resets(&policy).await;
        assert_eq!(
            r.unwrap_err().kind(),
            ErrorKind::ConnectionReset,
            "seed {seed}"
        );
        assert!(took < ms(300), "seed {seed}: {took:?}");
        retried += attempts - 1;
    }
    // The deadline leaves room for retries (the first backoff is drawn in [0, 100 ms]).
    assert!(retried >= 500, "{retried} retries in 500 calls");
}

#[tokio::test(start_paused = true)]
async fn each_attempt_runs_under_the_smaller_of_its_timeout_and_the_time_left() {
    let policy = Policy::builder()
        .retries(10)
        .backoff(NoBackoff)
        .timeout(ms(100))
        .deadline(ms(250))
        .build()
        .unwrap();
    let start = Instant::now();
    let limits = Cell::new(Vec::new());
    let r: io::Result<()> = policy
        .call_async(|attempt| {
            let mut v = limits.take();
            v.push(attempt.limit());
            limits.set(v);
            async {
                tokio::time::sleep(secs(10)).await;
                Ok(())
            }
        })
        .await;
    // 0-100 and 100-200 ms cut by the timeout, 200-250 ms by the deadline: no fourth attempt.
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(start.elapsed(), ms(250));
    assert_eq!(limits.take(), [Some(ms(100)), Some(ms(100)), Some(ms(50))]);
}

#[tokio::test(start_paused = true)]
async fn retries_used_up_before_the_deadline_end_the_call_as_before() {
    let policy = Policy::builder()
        .retries(2)
        .backoff(Constant::new(ms(10)))
        .jitter(NoJitter)
        .deadline(secs(10))
        .build()
        .unwrap();
    let (r, attempts, took) = resets(&policy).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(attempts, 3);
    assert_eq!(took, ms(20));
}

#[test]
fn a_blocking_call_sees_the_deadline_in_its_attempt_context() {
    let time = VirtualTime::new();
    let policy = Policy::builder()
        .retries(10)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .timeout(ms(200))
        .deadline(ms(250))
        .env(time.clone())
        .build()
        .unwrap();
    let mut remaining = Vec::new();
    let r: Result<(), &str> = policy.call(|attempt| {
        remaining.push(attempt.remaining());
        Err("busy")
    });
    assert_eq!(r, Err("busy"));
    // The smaller of the attempt's 200 ms and the call's time left: the timeout first, then
    // the deadline.
    assert_eq!(remaining, [Some(ms(200)), Some(ms(150)), Some(ms(50))]);
    assert_eq!(time.slept(), ms(200));
}

#[test]
fn an_error_returned_after_the_deadline_is_not_retried() {
    let time = VirtualTime::new();
    let policy = Policy::builder()
        .retries(10)
        .backoff(NoBackoff)
        .deadline(ms(250))
        .env(time.clone())
        .build()
        .unwrap();
    let mut attempts = 0;
    let r: Result<(), &str> = policy.call(|_| {
        attempts += 1;
        time.advance(ms(300)); // a slow blocking attempt
        Err("late")
    });
    assert_eq!((r, attempts), (Err("late"), 1));
}

#[test]
fn a_zero_deadline_is_an_error_and_a_negative_one_is_none() {
    let e = Policy::builder()
        .deadline(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(e.parameter(), "deadline");
    assert!(Policy::builder().deadline_secs(f64::NAN).build().is_err());

    let time = VirtualTime::new();
    let policy = Policy::builder()
        .retries(3)
        .backoff(Constant::new(secs(3600)))
        .jitter(NoJitter)
        .deadline_secs(-1.0)
        .env(time.clone())
        .build()
        .unwrap();
    let mut attempts = 0;
    let _: Result<(), &str> = policy.call(|_| {
        attempts += 1;
        Err("busy")
    });
    assert_eq!(attempts, 4, "no deadline: every retry is made");
    // It is no deadline at all (it was one of `Duration::MAX`, which the checks against the
    // deadline then measured a `max_delay` of `Duration::MAX` by, and which made a success
    // read the clock).
    use retry_runtime::timeout::AttemptTimeout;
    assert_eq!(policy.timeout().deadline(), None);
    let b = Policy::builder()
        .max_delay(Duration::MAX)
        .deadline_secs(-1.0);
    assert!(b.build().is_ok());
}

#[test]
fn a_timeout_set_after_the_deadline_keeps_it() {
    let time = VirtualTime::new();
    let policy = Policy::builder()
        .retries(10)
        .backoff(Constant::new(ms(100)))
        .jitter(NoJitter)
        .deadline(ms(250))
        .timeout(ms(200))
        .env(time.clone())
        .build()
        .unwrap();
    let mut attempts = 0;
    let _: Result<(), &str> = policy.call(|_| {
        attempts += 1;
        Err("busy")
    });
    assert_eq!(attempts, 3);
}

/// A timeout (an adaptive timeout's `min`) or a `max_delay` no shorter than the deadline
/// would never apply: the deadline always decides first. The builder refuses them, in any order.
#[test]
fn the_builder_refuses_bounds_the_deadline_makes_dead() {
    static L: Latencies = Latencies::new();
    let adaptive = |min| Adaptive::new(&L, 99.0, 2.0, min, secs(5)).unwrap();
    let refused = [
        (
            Policy::builder()
                .timeout(secs(1))
                .deadline(secs(1))
                .build()
                .err(),
            "timeout",
        ),
        (
            Policy::builder()
                .deadline(secs(1))
                .timeout(secs(2))
                .build()
                .err(),
            "timeout",
        ),
        (
            Policy::builder()
                .adaptive_timeout(adaptive(secs(1)))
                .deadline(secs(1))
                .build()
                .err(),
            "timeout",
        ),
        (
            Policy::builder()
                .max_delay(secs(5))
                .deadline(secs(1))
                .build()
                .err(),
            "max_delay",
        ),
        // The `on` rule's, where it retries only values whose delay a hint chooses: no retry
        // starts after the deadline, a hinted one included.
        (
            Policy::builder()
                .max_delay(secs(10))
                .on(retry_runtime::kind::NoError)
                .on_ok(retry_runtime::kind::OkIf(|v: &u32| *v == 1).hint(|_: &u32| Some(ms(1))))
                .deadline(secs(5))
                .build()
                .err(),
            "max_delay",
        ),
        // A `when` rule's own, above a top level's that is below the deadline.
        (
            Policy::builder()
                .max_delay(ms(500))
                .when(retry_runtime::kind::Io::ANY, |s| s.max_delay(secs(1)))
                .deadline(secs(1))
                .build()
                .err(),
            "max_delay",
        ),
    ];
    refused_for(refused);
    // Below the deadline: accepted (an adaptive timeout's `max` may be above it).
    let b = || Policy::builder().deadline(secs(1));
    assert!(b().timeout(ms(999)).max_delay(ms(999)).build().is_ok());
    assert!(b().adaptive_timeout(adaptive(ms(10))).build().is_ok());
    // A rule bounded by the deadline alone, or by its own `max_delay` below it.
    let io = retry_runtime::kind::Io::ANY;
    let top = || b().max_delay(ms(500));
    assert!(top().when(io, |s| s.no_max_delay()).build().is_ok());
    assert!(top().when(io, |s| s.max_delay(ms(999))).build().is_ok());
}

/// A backoff whose shortest delay (with its jitter and scale) is not below the deadline would
/// never let a retry be made: the builder refuses it, for the `on` rule and for a `when` rule,
/// unless the jitter can draw less, the rule never retries, or a hint may choose the delay.
#[test]
fn the_builder_refuses_a_backoff_the_deadline_leaves_no_retry_for() {
    use retry_runtime::kind::Io;
    use retry_runtime::{Decorrelated, EqualJitter, Fibonacci, FullJitter, Polynomial};
    let fib = |base| Fibonacci::new(base, secs(10)).unwrap();
    let refused = [
        Policy::builder()
            .backoff(Constant::new(ms(500)))
            .jitter(NoJitter)
            .deadline(ms(500))
            .build()
            .err(),
        // Equal jitter halves at most: 2 s gives at least 1 s.
        Policy::builder()
            .deadline(secs(1))
            .backoff(Constant::new(secs(2)))
            .jitter(EqualJitter)
            .build()
            .err(),
        Policy::builder()
            .backoff(fib(secs(1)))
            .jitter(Decorrelated)
            .deadline(secs(1))
            .build()
            .err(),
        Policy::builder()
            .backoff(Polynomial::new(secs(1), secs(10), [2.0]).unwrap())
            .jitter(NoJitter)
            .scale(1.5)
            .deadline(ms(1400))
            .build()
            .err(),
        // A `when` rule's own, the `on` rule's being fine.
        Policy::builder()
            .backoff(Constant::new(ms(10)))
            .jitter(NoJitter)
            .when(Io::ANY, |s| s.backoff(Constant::new(secs(2))))
            .deadline(secs(1))
            .build()
            .err(),
    ];
    refused_for(refused.into_iter().map(|e| (e, "backoff")));
    let accepted = [
        // Just below the deadline.
        Policy::builder()
            .backoff(Constant::new(ms(499)))
            .jitter(NoJitter)
            .deadline(ms(500))
            .build()
            .err(),
        // Full jitter can draw less.
        Policy::builder()
            .backoff(Constant::new(secs(2)))
            .jitter(FullJitter)
            .deadline(secs(1))
            .build()
            .err(),
        // A hint may choose the delay.
        Policy::builder()
            .backoff(Constant::new(secs(2)))
            .jitter(NoJitter)
            .hint(|_: &std::io::Error| Some(ms(10)))
            .deadline(secs(1))
            .build()
            .err(),
        // A custom strategy that does not say its smallest delay.
        Policy::builder()
            .backoff(Twice)
            .jitter(NoJitter)
            .deadline(secs(1))
            .build()
            .err(),
    ];
    all_accepted(accepted);
}

/// The same with `max_delay`: a retry is made only if it can start before the rule's
/// `max_delay` is spent, so a backoff whose shortest delay is not below it would never retry.
#[test]
fn the_builder_refuses_a_backoff_its_max_delay_leaves_no_retry_for() {
    use retry_runtime::kind::Io;
    let refused = [
        Policy::builder()
            .max_delay(secs(1))
            .backoff(Constant::new(secs(2)))
            .jitter(NoJitter)
            .build()
            .err(),
        // A `when` rule's own `max_delay`, below the backoff it inherits.
        Policy::builder()
            .backoff(Constant::new(secs(1)))
            .jitter(NoJitter)
            .when(Io::ANY, |s| s.max_delay(ms(500)))
            .build()
            .err(),
    ];
    refused_for(refused.into_iter().map(|e| (e, "max_delay")));
    all_accepted([
        Policy::builder()
            .max_delay(secs(1))
            .backoff(Constant::new(ms(999)))
            .jitter(NoJitter)
            .build()
            .err(),
        Policy::builder()
            .max_delay(secs(1))
            .backoff(Constant::new(secs(2)))
            .hint(|_: &std::io::Error| Some(ms(10)))
            .jitter(NoJitter)
            .build()
            .err(),
    ]);
}

/// A rule that never retries (`retries(0)`, a `max_delay` of zero) reads none of its backoff,
/// jitter and scale: written, they are refused as having no effect (not as a backoff the
/// deadline or `max_delay` leaves no retry for), as are `hint` and `on_retry` where no rule
/// retries; so is a jitter (but `NoJitter`) or a scale beside `NoBackoff`, unless a `when`
/// rule with a strategy that waits reads the `on` rule's.
#[test]
fn the_builder_refuses_settings_no_rule_reads() {
    use retry_runtime::kind::{Io, NoError};
    let refused = [
        (
            Policy::builder()
                .retries(0)
                .backoff(Constant::new(secs(2)))
                .deadline(secs(1))
                .build()
                .err(),
            "backoff",
        ),
        (
            Policy::builder()
                .max_delay(Duration::ZERO)
                .jitter(NoJitter)
                .build()
                .err(),
            "jitter",
        ),
        (
            Policy::builder().retries(0).scale(2.0).build().err(),
            "scale",
        ),
        (
            Policy::builder()
                .retries(0)
                .max_delay(secs(5))
                .build()
                .err(),
            "max_delay",
        ),
        (
            Policy::builder()
                .max_delay(Duration::ZERO)
                .retries(5)
                .build()
                .err(),
            "retries",
        ),
        (
            Policy::builder()
                .retries(0)
                .hint(|_: &io::Error| Some(ms(10)))
                .build()
                .err(),
            "hint",
        ),
        (
            Policy::builder()
                .retries(0)
                .on_retry(|_: &io::Result<()>, _| {})
                .build()
                .err(),
            "on_retry",
        ),
        // `on(NoError)` with no `on_ok` takes nothing, whatever its `retries`.
        (
            Policy::builder().retries(5).on(NoError).build().err(),
            "retries",
        ),
        // A `when` rule that never retries, by its own `retries(0)` or the `on` rule's.
        (
            Policy::builder()
                .when(Io::ANY, |s| s.retries(0).backoff(Constant::new(secs(2))))
                .build()
                .err(),
            "backoff",
        ),
        (
            Policy::builder()
                .retries(0)
                .when(Io::ANY, |s| s.jitter(NoJitter))
                .build()
                .err(),
            "jitter",
        ),
        // Beside `NoBackoff`, a built-in jitter or a scale has no delay to act on, by value or
        // by reference.
        (
            Policy::builder()
                .backoff(NoBackoff)
                .jitter(retry_runtime::FullJitter)
                .build()
                .err(),
            "jitter",
        ),
        (
            Policy::builder()
                .backoff(&NoBackoff)
                .jitter(&retry_runtime::EqualJitter)
                .build()
                .err(),
            "jitter",
        ),
        (
            Policy::builder()
                .backoff(NoBackoff)
                .scale(3.0)
                .build()
                .err(),
            "scale",
        ),
        (
            Policy::builder()
                .when(Io::ANY, |s| s.backoff(NoBackoff).scale(3.0))
                .build()
                .err(),
            "scale",
        ),
        // Through a `Box` or an `Arc` too (the strategy and the jitter are implemented
        // through them).
        (
            Policy::builder()
                .backoff(Box::new(NoBackoff))
                .scale(2.0)
                .build()
                .err(),
            "scale",
        ),
        (
            Policy::builder()
                .backoff(std::sync::Arc::new(Constant::new(ms(10))))
                .jitter(std::sync::Arc::new(retry_runtime::AwsDecorrelated))
                .build()
                .err(),
            "jitter",
        ),
        // A `Constant` of 0 waits nothing either, as the attribute's `constant(base = 0)`.
        (
            Policy::builder()
                .backoff(Constant::new(Duration::ZERO))
                .jitter(retry_runtime::EqualJitter)
                .build()
                .err(),
            "jitter",
        ),
        (
            Policy::builder()
                .when(Io::ANY, |s| {
                    s.backoff(Constant::new(Duration::ZERO)).scale(2.0)
                })
                .build()
                .err(),
            "scale",
        ),
        // A decorrelated jitter in a policy of one rule: it moves only that rule's exponent,
        // which `NoBackoff` does not read.
        (
            Policy::builder()
                .backoff(NoBackoff)
                .jitter(retry_runtime::Decorrelated)
                .build()
                .err(),
            "jitter",
        ),
    ];
    for e in refused_for(refused) {
        assert!(e.to_string().contains("no effect"), "{e}");
    }
    let accepted = [
        // A `Constant` that waits.
        Policy::builder()
            .backoff(Constant::new(Duration::from_nanos(1)))
            .jitter(retry_runtime::EqualJitter)
            .scale(2.0)
            .build()
            .err(),
        // A `when` rule that retries reads the `on` rule's backoff it inherits.
        Policy::builder()
            .retries(0)
            .backoff(Constant::new(ms(10)))
            .when(Io::ANY, |s| s.retries(2))
            .build()
            .err(),
        // The `when` rule waits, with the `on` rule's jitter.
        Policy::builder()
            .backoff(NoBackoff)
            .jitter(NoJitter)
            .when(Io::ANY, |s| s.backoff(Constant::new(ms(10))))
            .build()
            .err(),
        // A decorrelated jitter moves the jitter state every rule of the call shares (here
        // the `when` rule's, which waits).
        Policy::builder()
            .backoff(NoBackoff)
            .jitter(retry_runtime::Decorrelated)
            .when(Io::ANY, |s| s.backoff(Constant::new(ms(10))))
            .build()
            .err(),
        // `NoJitter` beside `NoBackoff` says what it does (as `jitter = none` beside
        // `backoff = none` does in the attribute): a sweep over strategies and jitters may
        // write it.
        Policy::builder()
            .backoff(NoBackoff)
            .jitter(NoJitter)
            .build()
            .err(),
        // `retries(0)` alone, the defaults left as they are.
        Policy::builder().retries(0).build().err(),
        Policy::builder().backoff(NoBackoff).build().err(),
    ];
    all_accepted(accepted);
}

/// A `when_ok` rule whose kind asks for no delay of its own (an `OkIf` without a hint) is
/// checked like an error rule; an `on(NoError)` rule, which takes no error, is not checked.
#[test]
fn the_builder_checks_the_value_rules_and_not_an_on_rule_that_takes_no_error() {
    use retry_runtime::kind::{NoError, OkIf};
    let busy = || OkIf(|v: &u16| *v == 503);
    let hinted = || OkIf(|v: &u16| *v == 429).hint(|_: &u16| Some(ms(10)));
    // An `on` rule that takes no error, with a backoff of 2 s.
    let values_only = || {
        Policy::builder()
            .backoff(Constant::new(secs(2)))
            .jitter(NoJitter)
            .on(NoError)
    };
    let refused = [
        (
            values_only()
                .when_ok(busy(), |s| s.retries(2))
                .deadline(secs(1))
                .build()
                .err(),
            "backoff",
        ),
        (
            Policy::builder()
                .backoff(Constant::new(ms(10)))
                .jitter(NoJitter)
                .when_ok(busy(), |s| {
                    s.backoff(Constant::new(secs(2))).max_delay(secs(1))
                })
                .build()
                .err(),
            "max_delay",
        ),
        // The `on` rule takes no error, but the values of its `on_ok` kind wait its backoff.
        (
            values_only().on_ok(busy()).deadline(secs(1)).build().err(),
            "backoff",
        ),
        // A reference to such a kind, and an `Or` of them, ask for no delay either.
        (
            values_only()
                .when_ok(&busy(), |s| s.retries(2))
                .deadline(secs(1))
                .build()
                .err(),
            "backoff",
        ),
        (
            values_only()
                .on_ok(retry_runtime::kind::Or(busy(), OkIf(|v: &u16| *v == 502)))
                .deadline(secs(1))
                .build()
                .err(),
            "backoff",
        ),
    ];
    refused_for(refused);
    all_accepted([
        // The value asks for its own delay.
        values_only()
            .when_ok(hinted(), |s| s)
            .deadline(secs(1))
            .build()
            .err(),
        values_only()
            .on_ok(hinted())
            .deadline(secs(1))
            .build()
            .err(),
        // One of the kinds may ask for its own delay.
        values_only()
            .when_ok(retry_runtime::kind::Or(busy(), hinted()), |s| s)
            .deadline(secs(1))
            .build()
            .err(),
    ]);
    // The `on` rule takes no error and the value rule has a backoff of its own: the `on`
    // rule's 2 s are not checked against the deadline or the `max_delay`, and no rule reads
    // them, which `build` refuses as a setting every rule replaces.
    let refused = [
        (
            Policy::builder()
                .backoff(Constant::new(secs(2)))
                .jitter(NoJitter)
                .max_delay(secs(1))
                .on(NoError)
                .when_ok(busy(), |s| s.backoff(Constant::new(ms(10))))
                .build()
                .err(),
            "backoff",
        ),
        (
            values_only()
                .when_ok(busy(), |s| s.backoff(Constant::new(ms(10))))
                .deadline(secs(1))
                .build()
                .err(),
            "backoff",
        ),
    ];
    for e in refused_for(refused) {
        assert!(e.to_string().contains("sets its own"), "{e}");
    }
}

/// Two seconds, always; its smallest delay left at the trait's default (zero).
struct Twice;
impl retry_runtime::Backoff for Twice {
    fn delay(&self, _: u32, _: &mut dyn rand::Rng) -> Duration {
        secs(2)
    }
}

#[test]
fn a_dyn_policy_keeps_the_deadline() {
    let time = VirtualTime::new();
    let policy = retry_runtime::DynPolicy::new(
        Policy::builder()
            .retries(10)
            .backoff(Constant::new(ms(100)))
            .jitter(NoJitter)
            .deadline(ms(250))
            .env(time.clone())
            .build()
            .unwrap(),
    );
    let mut attempts = 0;
    let r: Result<(), io::Error> = policy.call(|_| {
        attempts += 1;
        Err(io::Error::other("busy"))
    });
    assert!(r.is_err());
    assert_eq!(attempts, 3);
    assert_eq!(time.slept(), ms(200));
}

// ---------------------------------------------------------------------------------------------
// The same through the attribute: `deadline = DURATION`.

mod attribute {
    use super::*;
    use retry_runtime::robust;

    #[robust(deadline = 250ms, retries = 10, backoff = none)]
    async fn hangs(attempts: &Cell<u32>) -> io::Result<()> {
        attempts.set(attempts.get() + 1);
        tokio::time::sleep(secs(10)).await;
        Ok(())
    }

    #[robust(deadline = 250ms, retries = 10, backoff = constant(base = 100ms), jitter = none)]
    async fn fails(attempts: &Cell<u32>) -> io::Result<()> {
        attempts.set(attempts.get() + 1);
        Err(ErrorKind::ConnectionReset.into())
    }

    // (A backoff written so would be a compile error: the hint chooses the delay.)
    #[robust(deadline = 1s, retries = 3,
             hint = |_e: &io::Error| Some(Duration::from_micros(999_500)))]
    async fn fails_late(attempts: &Cell<u32>) -> io::Result<()> {
        attempts.set(attempts.get() + 1);
        Err(ErrorKind::ConnectionReset.into())
    }

    #[robust(timeout = 100ms, deadline = 250ms, retries = 10, backoff = none, on = [Timeout])]
    async fn times_out(attempts: &Cell<u32>) -> io::Result<()> {
        attempts.set(attempts.get() + 1);
        tokio::time::sleep(secs(10)).await;
        Ok(())
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_is_cut_when_the_deadline_passes() {
        let start = Instant::now();
        let attempts = Cell::new(0);
        assert_eq!(
            hangs(&attempts).await.unwrap_err().kind(),
            ErrorKind::TimedOut
        );
        assert_eq!((start.elapsed(), attempts.get()), (ms(250), 1));
    }

    #[tokio::test(start_paused = true)]
    async fn no_backoff_ends_past_the_deadline() {
        let start = Instant::now();
        let attempts = Cell::new(0);
        assert_eq!(
            fails(&attempts).await.unwrap_err().kind(),
            ErrorKind::ConnectionReset
        );
        assert_eq!((start.elapsed(), attempts.get()), (ms(200), 3));
    }

    /// A wait that ends half a millisecond before the deadline, which tokio's timer would
    /// end at it: no retry, the failure is returned at once (SPEC 12), not `Elapsed` at 1 s.
    #[tokio::test(start_paused = true)]
    async fn no_backoff_ends_within_the_timers_resolution_of_the_deadline() {
        let start = Instant::now();
        let attempts = Cell::new(0);
        assert_eq!(
            fails_late(&attempts).await.unwrap_err().kind(),
            ErrorKind::ConnectionReset
        );
        assert_eq!((start.elapsed(), attempts.get()), (ms(0), 1));
    }

    #[tokio::test(start_paused = true)]
    async fn the_last_attempt_gets_only_the_time_left() {
        let start = Instant::now();
        let attempts = Cell::new(0);
        assert_eq!(
            times_out(&attempts).await.unwrap_err().kind(),
            ErrorKind::TimedOut
        );
        assert_eq!((start.elapsed(), attempts.get()), (ms(250), 3));
    }

    #[robust(deadline = 250ms, retries = 10, backoff = constant(base = 100ms), jitter = none, attempt = ctx)]
    fn blocking(remaining: &std::cell::RefCell<Vec<Option<Duration>>>) -> Result<(), String> {
        remaining.borrow_mut().push(ctx.remaining());
        Err("busy".into())
    }

    thread_local! {
        /// The clock a slow `on_error` moves forward.
        static SLOW: std::cell::RefCell<Option<VirtualTime>> = const { std::cell::RefCell::new(None) };
    }

    // `on_error` takes 200 ms, after the clock was read at 0 ms for the decision: the backoff
    // decided then (100 ms, ending before the 250 ms deadline) ends at 300 ms, past it.
    #[robust(deadline = 250ms, retries = 10, backoff = constant(base = 100ms), jitter = none,
             on_error = |_: &String, _| SLOW.with(|t| t.borrow().as_ref().unwrap().advance(ms(200))))]
    fn slow_callback(attempts: &Cell<u32>) -> Result<(), String> {
        attempts.set(attempts.get() + 1);
        Err(format!("busy {}", attempts.get()))
    }

    /// A blocking retry whose backoff ends at or after the deadline (after slow callbacks, or a
    /// late wake-up) is not made: the failure it follows is returned. (Before, it ran with no
    /// time left.)
    #[test]
    fn a_blocking_retry_due_after_the_deadline_is_not_made() {
        let time = VirtualTime::new();
        let _guard = time.install();
        SLOW.with(|t| *t.borrow_mut() = Some(time.clone()));
        let attempts = Cell::new(0);
        assert_eq!(slow_callback(&attempts).unwrap_err(), "busy 1");
        assert_eq!(attempts.get(), 1);
        assert_eq!(time.slept(), ms(100));
    }

    #[test]
    fn a_blocking_fn_reads_the_deadline_in_its_context() {
        let time = VirtualTime::new();
        let _guard = time.install();
        let remaining = std::cell::RefCell::new(Vec::new());
        assert!(blocking(&remaining).is_err());
        assert_eq!(
            *remaining.borrow(),
            [Some(ms(250)), Some(ms(150)), Some(ms(50))]
        );
        assert_eq!(time.slept(), ms(200));
    }
}

/// With no rule that retries and no hedge, the only attempt runs under the smaller of its
/// timeout and the deadline: a deadline after the timeout (or after an adaptive timeout's
/// `max`) does nothing, and `build()` refuses it. A rule that retries (an error rule, a value
/// rule, the `on` rule's values), a hedge, or no timeout at all gives it something to bound.
#[test]
fn the_builder_refuses_a_deadline_the_only_attempts_timeout_always_beats() {
    use retry_runtime::hedge::Hedge;
    use retry_runtime::kind::{NoError, OkIf};
    static L: Latencies = Latencies::new();
    let adaptive = || Adaptive::new(&L, 99.0, 2.0, ms(10), secs(2)).unwrap();
    let base = || Policy::builder().retries(0);
    let refused = [
        base().timeout(secs(1)).deadline(secs(5)).build().err(),
        base()
            .adaptive_timeout(adaptive())
            .deadline(secs(5))
            .build()
            .err(),
        Policy::builder()
            .max_delay(Duration::ZERO)
            .timeout(secs(1))
            .deadline(secs(5))
            .build()
            .err(),
        // `on(NoError)` without `on_ok` takes nothing.
        Policy::builder()
            .on(NoError)
            .timeout(secs(1))
            .deadline(secs(5))
            .build()
            .err(),
    ];
    refused_for(refused.into_iter().map(|e| (e, "deadline")));
    let accepted = [
        base().deadline(secs(5)).build().err(),
        Policy::builder()
            .retries(1)
            .backoff(NoBackoff)
            .timeout(secs(1))
            .deadline(secs(5))
            .build()
            .err(),
        base()
            .when(retry_runtime::kind::Io::ANY, |s| s.retries(1))
            .timeout(secs(1))
            .deadline(secs(5))
            .build()
            .err(),
        base()
            .when_ok(OkIf(|v: &u16| *v == 503), |s| s.retries(1))
            .timeout(secs(1))
            .deadline(secs(5))
            .build()
            .err(),
        Policy::builder()
            .retries(3)
            .backoff(NoBackoff)
            .on(NoError)
            .on_ok(OkIf(|v: &u16| *v == 503))
            .timeout(secs(1))
            .deadline(secs(5))
            .build()
            .err(),
        base()
            .timeout(secs(1))
            .hedge(Hedge::after(ms(100), 1).unwrap())
            .deadline(secs(5))
            .build()
            .err(),
    ];
    all_accepted(accepted);
}

/// A scale so small that the longest delay the strategy gives rounds to no nanosecond makes
/// every delay 0: the builder refuses it, for the `on` rule and a `when` rule. One that leaves
/// the longest delay a nanosecond or more is accepted.
#[test]
fn the_builder_refuses_a_scale_that_rounds_every_delay_to_zero() {
    let refused = [
        Policy::builder().retries(4).scale(1e-12).build().err(),
        Policy::builder()
            .backoff(Constant::new(ms(100)))
            .scale(1e-9)
            .build()
            .err(),
        Policy::builder()
            .when(retry_runtime::kind::Io::ANY, |s| s.scale(5e-324))
            .build()
            .err(),
    ];
    for e in refused_for(refused.into_iter().map(|e| (e, "scale"))) {
        assert!(e.to_string().contains("rounds to 0"), "{e}");
    }
    // 20 s (the default `max`) x 1e-10: 2 ns.
    assert!(Policy::builder().scale(1e-10).build().is_ok());
    assert!(
        Policy::builder()
            .backoff(Constant::new(ms(100)))
            .scale(1e-8)
            .build()
            .is_ok()
    );
}

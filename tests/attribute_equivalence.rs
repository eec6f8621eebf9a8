//! An async fn under `#[robust(...)]` retries as `call_async` does with the policy the builder
//! makes of the same settings: generated scripts (each attempt answers after a delay with a
//! success, a reset or a refusal) run on tokio's paused clock through both give the same
//! result, the same number of attempts and the same elapsed time, for each of a few fixed
//! configurations (the attribute's expansion takes different paths for them: the success path
//! that reads no clock, the lazily armed timer, the deadline, a breaker given by a parameter,
//! a hedge). `call_async`'s loop is the reference. (A hedged fn and `call_async` run the same
//! rounds: that configuration checks what the expansion adds around them, not the rounds
//! themselves, which `tests/hedging.rs` does.) Blocking fns the same, against
//! `Policy::call`, on a `VirtualTime` (installed for the attribute's fn, the policy's
//! environment for the builder's): plain, with `max_delay`, with a deadline read through the
//! attempt, with a breaker.

use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use retry_runtime::hedge::Hedge;
use retry_runtime::kind::{ClassifyExt, Io, Timeout};
use retry_runtime::time::{Clock, Sleep, VirtualTime};
use retry_runtime::{AsyncRetryPolicy, CircuitBreaker, Constant, NoJitter, Policy, robust};

#[path = "common/scripts.rs"]
mod scripts;
use scripts::{Outcome, Step, answer, paused, step_at};

// The scripts' answers come at multiples of 10 ms and the timeouts and deadlines end in 5 ms,
// so that an answer does not come at the instant its own timeout cuts it; one can still come at
// the instant the deadline, counted from the call's start, cuts it, which both loops settle
// alike on the paused clock: the attempt is polled first, and an error then is a timeout.

/// The steps of a call's attempts (the last one repeats) and the attempts made.
struct Script {
    steps: Vec<Step>,
    calls: AtomicU32,
}

impl Script {
    fn new(steps: &[Step]) -> Self {
        Script {
            steps: steps.to_vec(),
            calls: AtomicU32::new(0),
        }
    }

    /// The next attempt's answer.
    async fn attempt(&self) -> io::Result<u32> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        answer(&self.steps, n, n).await
    }

    /// The next attempt's answer, for a blocking fn: its delay slept on `time`.
    fn attempt_blocking(&self, time: &VirtualTime) -> io::Result<u32> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let step = step_at(&self.steps, n);
        Sleep::sleep(time, Duration::from_millis(step.after_ms));
        step.answer.result(n).map_err(io::Error::from)
    }
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    scripts::steps(7, [1, 1, 1])
}

// The configurations, each as an attribute fn and as the builder's policy.

#[robust(retries = 3, backoff = constant(base = 20ms), jitter = none)]
async fn plain(s: &Script) -> io::Result<u32> {
    s.attempt().await
}

fn plain_policy() -> impl AsyncRetryPolicy<u32, io::Error> {
    Policy::builder()
        .retries(3)
        .backoff(Constant::new(Duration::from_millis(20)))
        .jitter(NoJitter)
        .build()
        .unwrap()
}

#[robust(timeout = 35ms, retries = 3, backoff = constant(base = 20ms), jitter = none,
         on = [Timeout, Io(ConnectionReset)])]
async fn timed(s: &Script) -> io::Result<u32> {
    s.attempt().await
}

fn timed_policy() -> impl AsyncRetryPolicy<u32, io::Error> {
    Policy::builder()
        .timeout(Duration::from_millis(35))
        .retries(3)
        .backoff(Constant::new(Duration::from_millis(20)))
        .jitter(NoJitter)
        .on(Timeout.or(Io::of([ErrorKind::ConnectionReset])))
        .build()
        .unwrap()
}

#[robust(timeout = 35ms, deadline = 95ms, retries = 5, backoff = constant(base = 10ms),
         jitter = none)]
async fn deadlined(s: &Script) -> io::Result<u32> {
    s.attempt().await
}

fn deadlined_policy() -> impl AsyncRetryPolicy<u32, io::Error> {
    Policy::builder()
        .timeout(Duration::from_millis(35))
        .deadline(Duration::from_millis(95))
        .retries(5)
        .backoff(Constant::new(Duration::from_millis(10)))
        .jitter(NoJitter)
        .build()
        .unwrap()
}

/// A breaker of the caller's: over the last 4 attempts (at least 2), open at half of them
/// failed, for 30 ms, then one probe.
fn new_breaker() -> CircuitBreaker {
    CircuitBreaker::new(4, 2, 0.5, Duration::from_millis(30), 1).expect("a valid breaker")
}

#[robust(retries = 4, backoff = constant(base = 10ms), jitter = none, breaker = b)]
async fn guarded(s: &Script, b: &CircuitBreaker) -> io::Result<u32> {
    s.attempt().await
}

fn guarded_policy(b: &CircuitBreaker) -> impl AsyncRetryPolicy<u32, io::Error> + '_ {
    Policy::builder()
        .retries(4)
        .backoff(Constant::new(Duration::from_millis(10)))
        .jitter(NoJitter)
        .breaker(b)
        .build()
        .unwrap()
}

#[robust(hedge(after = 25ms, max = 1), retries = 2, backoff = constant(base = 10ms),
         jitter = none)]
async fn hedged(s: &Script) -> io::Result<u32> {
    s.attempt().await
}

fn hedged_policy() -> impl AsyncRetryPolicy<u32, io::Error> {
    Policy::builder()
        .hedge(Hedge::after(Duration::from_millis(25), 1).unwrap())
        .retries(2)
        .backoff(Constant::new(Duration::from_millis(10)))
        .jitter(NoJitter)
        .build()
        .unwrap()
}

// Blocking fns.

#[robust(retries = 3, backoff = constant(base = 20ms), jitter = none)]
fn blocking_plain(s: &Script, time: &VirtualTime) -> io::Result<u32> {
    s.attempt_blocking(time)
}

#[robust(retries = 5, max_delay = 75ms, backoff = constant(base = 20ms), jitter = none)]
fn blocking_max_delay(s: &Script, time: &VirtualTime) -> io::Result<u32> {
    s.attempt_blocking(time)
}

#[robust(deadline = 95ms, retries = 5, backoff = constant(base = 10ms), jitter = none,
         attempt = ctx)]
fn blocking_deadline(s: &Script, time: &VirtualTime) -> io::Result<u32> {
    // A cooperative body reads the time left (the loop starts no attempt once the deadline
    // passed, so it never finds none).
    if ctx.remaining() == Some(Duration::ZERO) {
        return Err(ErrorKind::TimedOut.into());
    }
    s.attempt_blocking(time)
}

#[robust(retries = 4, backoff = constant(base = 10ms), jitter = none, breaker = b)]
fn blocking_guarded(s: &Script, time: &VirtualTime, b: &CircuitBreaker) -> io::Result<u32> {
    s.attempt_blocking(time)
}

/// A blocking call's outcome on a fresh script and a fresh virtual clock (given to `call`).
fn blocking_outcome(
    steps: &[Step],
    call: impl FnOnce(&Script, &VirtualTime) -> io::Result<u32>,
) -> Outcome {
    let time = VirtualTime::new();
    let script = Script::new(steps);
    let start = time.now();
    let result = call(&script, &time).map_err(|e| e.kind());
    Outcome {
        result,
        attempts: script.calls.load(Ordering::SeqCst),
        elapsed: time.now() - start,
    }
}

/// The outcomes of the blocking configurations on `steps`, each as (attribute, builder).
fn blocking_pairs(steps: &[Step]) -> [(&'static str, Outcome, Outcome); 4] {
    let constant = |ms| Constant::new(Duration::from_millis(ms));
    [
        (
            "blocking plain",
            blocking_outcome(steps, |s, t| {
                let _installed = t.install();
                blocking_plain(s, t)
            }),
            blocking_outcome(steps, |s, t| {
                let policy = Policy::builder()
                    .retries(3)
                    .backoff(constant(20))
                    .jitter(NoJitter)
                    .env(t.clone())
                    .build()
                    .unwrap();
                policy.call(|_| s.attempt_blocking(t))
            }),
        ),
        (
            "blocking max_delay",
            blocking_outcome(steps, |s, t| {
                let _installed = t.install();
                blocking_max_delay(s, t)
            }),
            blocking_outcome(steps, |s, t| {
                let policy = Policy::builder()
                    .retries(5)
                    .max_delay(Duration::from_millis(75))
                    .backoff(constant(20))
                    .jitter(NoJitter)
                    .env(t.clone())
                    .build()
                    .unwrap();
                policy.call(|_| s.attempt_blocking(t))
            }),
        ),
        (
            "blocking deadline",
            blocking_outcome(steps, |s, t| {
                let _installed = t.install();
                blocking_deadline(s, t)
            }),
            blocking_outcome(steps, |s, t| {
                let policy = Policy::builder()
                    .deadline(Duration::from_millis(95))
                    .retries(5)
                    .backoff(constant(10))
                    .jitter(NoJitter)
                    .env(t.clone())
                    .build()
                    .unwrap();
                policy.call(|a| {
                    if a.remaining() == Some(Duration::ZERO) {
                        return Err(ErrorKind::TimedOut.into());
                    }
                    s.attempt_blocking(t)
                })
            }),
        ),
        (
            "blocking guarded",
            blocking_outcome(steps, |s, t| {
                let _installed = t.install();
                blocking_guarded(s, t, &new_breaker())
            }),
            blocking_outcome(steps, |s, t| {
                let b = new_breaker();
                let policy = Policy::builder()
                    .retries(4)
                    .backoff(constant(10))
                    .jitter(NoJitter)
                    .breaker(&b)
                    .env(t.clone())
                    .build()
                    .unwrap();
                policy.call(|_| s.attempt_blocking(t))
            }),
        ),
    ]
}

/// `call` on a fresh script of `steps`, on a paused clock.
fn outcome(steps: &[Step], call: impl AsyncFnOnce(&Script) -> io::Result<u32>) -> Outcome {
    let script = Script::new(steps);
    paused(async {
        let start = tokio::time::Instant::now();
        let result = call(&script).await.map_err(|e| e.kind());
        Outcome {
            result,
            attempts: script.calls.load(Ordering::SeqCst),
            elapsed: start.elapsed(),
        }
    })
}

/// The outcomes of the five configurations on `steps`, each as (attribute, builder).
fn pairs(steps: &[Step]) -> [(&'static str, Outcome, Outcome); 5] {
    [
        (
            "plain",
            outcome(steps, async |s| plain(s).await),
            outcome(steps, async |s| {
                plain_policy().call_async(|_| s.attempt()).await
            }),
        ),
        (
            "timed",
            outcome(steps, async |s| timed(s).await),
            outcome(steps, async |s| {
                timed_policy().call_async(|_| s.attempt()).await
            }),
        ),
        (
            "deadlined",
            outcome(steps, async |s| deadlined(s).await),
            outcome(steps, async |s| {
                deadlined_policy().call_async(|_| s.attempt()).await
            }),
        ),
        (
            "guarded",
            outcome(steps, async |s| guarded(s, &new_breaker()).await),
            outcome(steps, async |s| {
                let b = new_breaker();
                guarded_policy(&b).call_async(|_| s.attempt()).await
            }),
        ),
        (
            "hedged",
            outcome(steps, async |s| hedged(s).await),
            outcome(steps, async |s| {
                hedged_policy().call_async(|_| s.attempt()).await
            }),
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_attribute_retries_as_call_async_does(steps in steps()) {
        for (name, attribute, builder) in pairs(&steps) {
            prop_assert_eq!(attribute, builder, "{}", name);
        }
        for (name, attribute, builder) in blocking_pairs(&steps) {
            prop_assert_eq!(attribute, builder, "{}", name);
        }
    }
}

/// The generator reaches every path the property is about, in every configuration: successes
/// after failures, errors given up, timeouts (where there is one), open-breaker rejections.
#[test]
fn the_scripts_cover_retries_give_ups_timeouts_and_rejections() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut seen = std::collections::BTreeMap::<(&str, &str), u32>::new();
    for _ in 0..300 {
        let steps = steps().new_tree(&mut runner).unwrap().current();
        for (name, attribute, _) in pairs(&steps).into_iter().chain(blocking_pairs(&steps)) {
            let what = match attribute.result {
                Ok(_) if attribute.attempts > 1 => "succeeded after more than one attempt",
                Err(ErrorKind::TimedOut) => "timed out",
                // `E::from(Open)` for an `io::Error`: kind `Other` (the scripts make none).
                Err(ErrorKind::Other) => "rejected",
                Err(_) if attribute.attempts > 1 => "given up",
                _ => continue,
            };
            *seen.entry((name, what)).or_default() += 1;
        }
    }
    let expected = [
        ("plain", "succeeded after more than one attempt"),
        ("plain", "given up"),
        ("timed", "succeeded after more than one attempt"),
        ("timed", "given up"),
        ("timed", "timed out"),
        ("deadlined", "succeeded after more than one attempt"),
        ("deadlined", "timed out"),
        ("guarded", "succeeded after more than one attempt"),
        ("guarded", "rejected"),
        ("hedged", "succeeded after more than one attempt"),
        ("hedged", "given up"),
        ("blocking plain", "succeeded after more than one attempt"),
        ("blocking plain", "given up"),
        (
            "blocking max_delay",
            "succeeded after more than one attempt",
        ),
        ("blocking max_delay", "given up"),
        ("blocking deadline", "succeeded after more than one attempt"),
        ("blocking deadline", "given up"),
        ("blocking guarded", "succeeded after more than one attempt"),
        ("blocking guarded", "rejected"),
    ];
    for key in expected {
        let n = seen.get(&key).copied().unwrap_or(0);
        assert!(n >= 5, "{key:?}: {n} cases (all: {seen:?})");
    }
}

//! The async retry loop (`call_async`, the reference the attribute and the tower layer are
//! checked against in `tests/attribute_equivalence.rs` and `tests/tower_equivalence.rs`)
//! against a model of SPEC sections 4, 6 and 12 written by hand: on generated scripts (each
//! attempt answers after a delay with a success, a reset or a refusal), generated policies
//! (retries, a constant backoff, a timeout, a deadline, every error retried or only resets)
//! give, on tokio's paused clock, the model's result, attempts and elapsed time:
//!
//! - attempts are made until one succeeds, fails with an error no rule retries, or the
//!   retries are used up (its error is then returned);
//! - each attempt runs under its timeout and the time left before the deadline (counted from
//!   the first attempt's start), whichever is shorter; cut by its timeout it fails with
//!   `TimedOut` (retried where every error is); cut by the deadline, the call ends with
//!   `TimedOut`;
//! - a retry waits its backoff first, and none is made whose wait would end past the deadline
//!   (the last failure is returned at once).
//!
//! The answers and timeouts fall at multiples of 5 ms and the deadlines end in 7 ms, so no
//! two events fall at the same instant.

use std::io::{self, ErrorKind};
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use retry_runtime::kind::{AnyError, Io};
use retry_runtime::{AsyncRetryPolicy, Constant, NoJitter, Policy};

#[path = "common/scripts.rs"]
mod scripts;
use scripts::{Outcome, Step, paused, step_at, steps, through_call_async};

#[derive(Debug, Clone)]
struct Case {
    steps: Vec<Step>,
    retries: u32,
    backoff_ms: u64,
    timeout_ms: Option<u64>,
    deadline_ms: Option<u64>,
    reset_only: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        steps(8, [2, 3, 1]),
        // (At least one: a backoff beside `retries(0)` is a configuration error.)
        1u32..6,
        0u64..5,
        prop::option::of(prop_oneof![Just(15u64), Just(35), Just(55)]),
        // (Above every timeout: a timeout at or past the deadline is a configuration error.)
        prop::option::of(prop_oneof![Just(67u64), Just(97), Just(147)]),
        any::<bool>(),
    )
        .prop_map(
            |(steps, retries, backoff, timeout_ms, deadline_ms, reset_only)| Case {
                steps,
                retries,
                backoff_ms: backoff * 10,
                timeout_ms,
                deadline_ms,
                reset_only,
            },
        )
}

/// The model.
fn model(case: &Case) -> Outcome {
    let done = |result, attempts, at| Outcome {
        result,
        attempts,
        elapsed: Duration::from_millis(at),
    };
    let retried = |result: Result<u32, ErrorKind>| match result {
        Ok(_) => false,
        Err(kind) => !case.reset_only || kind == ErrorKind::ConnectionReset,
    };
    let mut start = 0u64;
    let mut attempts = 0u32;
    loop {
        let step = step_at(&case.steps, attempts);
        let n = attempts;
        attempts += 1;
        let left = case.deadline_ms.map(|d| d - start);
        // Cut by the deadline first: the call ends.
        if let Some(left) = left
            && left < step.after_ms
            && case.timeout_ms.is_none_or(|t| left < t)
        {
            return done(Err(ErrorKind::TimedOut), attempts, start + left);
        }
        let (result, end) = match case.timeout_ms {
            Some(t) if t < step.after_ms => (Err(ErrorKind::TimedOut), start + t),
            _ => (step.answer.result(n), start + step.after_ms),
        };
        if !retried(result) || attempts > case.retries {
            return done(result, attempts, end);
        }
        let next = end + case.backoff_ms;
        if case.deadline_ms.is_some_and(|d| next > d) {
            return done(result, attempts, end);
        }
        start = next;
    }
}

/// `case` through `call_async` with `policy`.
fn through<P: AsyncRetryPolicy<u32, io::Error>>(case: &Case, policy: P) -> Outcome {
    paused(through_call_async(&policy, &case.steps, 0))
}

fn run(case: &Case) -> Outcome {
    let builder = Policy::builder()
        .retries(case.retries)
        .backoff(Constant::new(Duration::from_millis(case.backoff_ms)))
        .jitter(NoJitter);
    let ms = Duration::from_millis;
    // (A deadline of an hour stands for none: the policy's type is then one per timeout.)
    let deadline = ms(case.deadline_ms.unwrap_or(3_600_000));
    match (case.timeout_ms, case.reset_only) {
        (None, false) => through(
            case,
            builder.deadline(deadline).on(AnyError).build().unwrap(),
        ),
        (None, true) => through(
            case,
            builder
                .deadline(deadline)
                .on(Io::of([ErrorKind::ConnectionReset]))
                .build()
                .unwrap(),
        ),
        (Some(t), false) => through(
            case,
            builder
                .timeout(ms(t))
                .deadline(deadline)
                .on(AnyError)
                .build()
                .unwrap(),
        ),
        (Some(t), true) => through(
            case,
            builder
                .timeout(ms(t))
                .deadline(deadline)
                .on(Io::of([ErrorKind::ConnectionReset]))
                .build()
                .unwrap(),
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn call_async_follows_the_model(case in case()) {
        prop_assert_eq!(run(&case), model(&case));
    }
}

/// The generator reaches the model's branches: successes after retries, errors no rule
/// retries, retries used up, attempts cut by their timeout and by the deadline, retries not
/// made because their wait would end past the deadline.
#[test]
fn the_cases_reach_every_branch_of_the_model() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut seen = std::collections::BTreeMap::<&str, u32>::new();
    for _ in 0..500 {
        let case = case().new_tree(&mut runner).unwrap().current();
        let o = model(&case);
        let cut_by_deadline = case.deadline_ms.map(Duration::from_millis) == Some(o.elapsed);
        let what = match o.result {
            Ok(_) if o.attempts > 1 => "success after a retry",
            Ok(_) => "success at once",
            Err(ErrorKind::TimedOut) if cut_by_deadline => "cut by the deadline",
            Err(ErrorKind::TimedOut) => "cut by its timeout",
            Err(_) if o.attempts > case.retries => "retries used up",
            Err(ErrorKind::ConnectionRefused) if case.reset_only => "not retried",
            Err(_) => "no retry before the deadline",
        };
        *seen.entry(what).or_default() += 1;
    }
    for what in [
        "success after a retry",
        "success at once",
        "cut by the deadline",
        "cut by its timeout",
        "retries used up",
        "not retried",
        "no retry before the deadline",
    ] {
        let n = seen.get(what).copied().unwrap_or(0);
        assert!(n >= 10, "{what}: {n} cases (all: {seen:?})");
    }
}

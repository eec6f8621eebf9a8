//! Hedging (SPEC section 15) against a model of the SPEC's words: generated scripts (each
//! attempt answers after a delay with a success, a reset or a refusal) run through
//! `call_async` with a hedged policy, through `RobustLayer::hedged` and through an async fn
//! under `#[robust(hedge(..))]`, on tokio's paused clock, give the result, the number of
//! attempts and the elapsed time that the model below computes by hand:
//!
//! - a round starts one attempt; `after` later, if the round is not decided, a hedge starts,
//!   and another `after` after that one, up to `max` hedges per round (1 or 2 here);
//! - the first success wins (the others are dropped), and so does an error no rule
//!   retries;
//! - a retryable failure starts the next hedge at once, if one is left, whatever else still
//!   runs (the one after it is due `after` later);
//! - when every attempt of a round failed retryably, the round is one failed attempt of the
//!   retry loop: its last failure decides, and the loop backs off as usual (after `retries`
//!   failed rounds, that failure is returned);
//! - each attempt has its own timeout, which ends it with a `TimedOut` error.
//!
//! The hedges are due 7 ms apart and the answers come at multiples of 10 ms from their
//! attempt's start (timeouts end in 5 ms), so that two events of a round seldom fall at the
//! same instant; the model returns `None` for a case where they do (it would have to know
//! which one the loops see first), and the case is skipped.

use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use retry_runtime::hedge::Hedge;
use retry_runtime::kind::{AnyError, Io};
use retry_runtime::policy::PolicyCore;
use retry_runtime::tower::{Hedges, RobustLayer};
use retry_runtime::{AsyncRetryPolicy, Constant, NoJitter, Policy, robust};
use tower::Layer;
use tower::util::BoxCloneSyncService;

#[path = "common/scripts.rs"]
mod scripts;
use scripts::{Outcome, Step, answer, paused, step_at, through_call_async, through_layer};

const AFTER_MS: u64 = 7;

#[derive(Debug, Clone)]
struct Case {
    steps: Vec<Step>,
    retries: u32,
    backoff_ms: u64,
    timeout_ms: Option<u64>,
    /// Only resets are retried (a refusal and a timeout end the call); otherwise every error.
    reset_only: bool,
    /// Hedges per round (`max`): 1 or 2.
    hedges: u32,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    scripts::steps(8, [2, 2, 1])
}

fn case() -> impl Strategy<Value = Case> {
    (
        steps(),
        // (At least one: a backoff beside `retries(0)` is a configuration error.)
        1u32..4,
        0u64..4,
        prop::option::of(prop_oneof![Just(15u64), Just(35), Just(55)]),
        any::<bool>(),
        1u32..=2,
    )
        .prop_map(
            |(steps, retries, backoff, timeout_ms, reset_only, hedges)| Case {
                steps,
                retries,
                backoff_ms: backoff * 10,
                timeout_ms,
                reset_only,
                hedges,
            },
        )
}

// --- the model ----------------------------------------------------------------------------------

/// An attempt of the model: when it ends (ms from the call's start) and what it gives.
#[derive(Debug, Clone, Copy)]
struct Ended {
    at: u64,
    result: Result<u32, ErrorKind>,
    /// Why it started.
    by: Start,
}

/// Why an attempt of the model started.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Start {
    /// It is its round's first attempt.
    Round,
    /// A hedge, due while the round's attempts ran.
    Due,
    /// A hedge, started at once by a retryable failure.
    Failure,
}

/// What the model went through for a case (for the coverage test).
#[derive(Debug, Default)]
struct Path {
    rounds: u32,
    failure_hedges: u32,
    /// Why the attempt that decided the call started (`None`: the last round failed).
    winner: Option<Start>,
}

/// Attempt number `n` (from 0), started at `start` (`by`: why).
fn attempt(case: &Case, n: u32, start: u64, by: Start) -> Ended {
    let step = step_at(&case.steps, n);
    match case.timeout_ms {
        Some(t) if t < step.after_ms => Ended {
            at: start + t,
            result: Err(ErrorKind::TimedOut),
            by,
        },
        _ => Ended {
            at: start + step.after_ms,
            result: step.answer.result(n),
            by,
        },
    }
}

/// Whether an attempt's result ends the call: a success, or an error no rule retries.
fn decides(case: &Case, result: Result<u32, ErrorKind>) -> bool {
    match result {
        Ok(_) => true,
        Err(kind) => case.reset_only && kind != ErrorKind::ConnectionReset,
    }
}

/// The model's outcome, or `None` when two events of a round fall at the same instant (the
/// model would have to know which one the loops see first; such cases are skipped).
fn model(case: &Case) -> Option<Outcome> {
    model_path(case).map(|(outcome, _)| outcome)
}

/// [`model`], and the path it took.
fn model_path(case: &Case) -> Option<(Outcome, Path)> {
    let mut path = Path::default();
    let mut attempts = 0u32;
    let mut start = 0u64;
    let mut round = 0u32;
    loop {
        path.rounds += 1;
        let mut live = vec![attempt(case, attempts, start, Start::Round)];
        attempts += 1;
        let (mut sent, mut next) = (0u32, start + AFTER_MS);
        let mut last = None;
        // The round: the attempt that decided the call, or `None` when all failed retryably.
        let decided = loop {
            let soonest = (0..live.len()).min_by_key(|&i| live[i].at);
            let ends: Vec<u64> = live.iter().map(|e| e.at).collect();
            let due = sent < case.hedges;
            if ends
                .iter()
                .enumerate()
                .any(|(i, a)| ends[i + 1..].contains(a))
                || (due && ends.contains(&next))
            {
                return None;
            }
            match soonest {
                Some(i) if !due || live[i].at < next => {
                    let ended = live.remove(i);
                    if decides(case, ended.result) {
                        break Some(ended);
                    }
                    last = Some(ended);
                    // A retryable failure starts the next hedge at once, if one is left.
                    if sent < case.hedges {
                        live.push(attempt(case, attempts, ended.at, Start::Failure));
                        path.failure_hedges += 1;
                        attempts += 1;
                        sent += 1;
                        next = ended.at + AFTER_MS;
                    }
                    if live.is_empty() {
                        break None;
                    }
                }
                _ => {
                    // A hedge is due while the attempts run.
                    live.push(attempt(case, attempts, next, Start::Due));
                    attempts += 1;
                    sent += 1;
                    next += AFTER_MS;
                }
            }
        };
        let ended = match decided {
            Some(ended) => ended,
            None => last.expect("a failed round has a last failure"),
        };
        if decided.is_some() || round == case.retries {
            path.winner = decided.map(|d| d.by);
            let outcome = Outcome {
                result: ended.result,
                attempts,
                elapsed: Duration::from_millis(ended.at),
            };
            return Some((outcome, path));
        }
        round += 1;
        start = ended.at + case.backoff_ms;
    }
}

// --- the runs -----------------------------------------------------------------------------------

/// `case` through `call_async` and through `RobustLayer::hedged`, with `policy`.
fn runs<P>(case: &Case, make: impl Fn() -> P) -> [Outcome; 2]
where
    P: AsyncRetryPolicy<u32, io::Error> + PolicyCore<Timeout: Hedges> + Send + Sync + 'static,
    retry_runtime::tower::HedgedLayer<P>: Layer<BoxCloneSyncService<u32, u32, io::Error>>,
    <retry_runtime::tower::HedgedLayer<P> as Layer<BoxCloneSyncService<u32, u32, io::Error>>>::Service:
        tower::Service<u32, Response = u32, Error = io::Error>,
{
    let direct = paused(through_call_async(&make(), &case.steps, 0));
    let layer = paused(through_layer(RobustLayer::hedged(make()), &case.steps, 0));
    [direct, layer]
}

fn run(case: &Case) -> [Outcome; 2] {
    let builder = || {
        Policy::builder()
            .hedge(
                Hedge::after(Duration::from_millis(AFTER_MS), case.hedges).expect("a valid hedge"),
            )
            .retries(case.retries)
            .backoff(Constant::new(Duration::from_millis(case.backoff_ms)))
            .jitter(NoJitter)
    };
    let timeout = |t| Duration::from_millis(t);
    match (case.timeout_ms, case.reset_only) {
        (None, false) => runs(case, || builder().on(AnyError).build().unwrap()),
        (None, true) => runs(case, || {
            builder()
                .on(Io::of([ErrorKind::ConnectionReset]))
                .build()
                .unwrap()
        }),
        (Some(t), false) => runs(case, || {
            builder().timeout(timeout(t)).on(AnyError).build().unwrap()
        }),
        (Some(t), true) => runs(case, || {
            builder()
                .timeout(timeout(t))
                .on(Io::of([ErrorKind::ConnectionReset]))
                .build()
                .unwrap()
        }),
    }
}

// Two attribute fns: every error retried without a timeout, and only resets with a 35 ms one.

/// The script of the attribute fns' calls, and their count.
struct Script {
    case: Case,
    calls: AtomicU32,
}

impl Script {
    async fn attempt(&self) -> io::Result<u32> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        answer(&self.case.steps, n, n).await
    }
}

#[robust(hedge(after = 7ms, max = 1), retries = 2, backoff = constant(base = 10ms), jitter = none)]
async fn hedged_any(s: &Script) -> io::Result<u32> {
    s.attempt().await
}

#[robust(hedge(after = 7ms, max = 1), timeout = 35ms, retries = 2,
         backoff = constant(base = 10ms), jitter = none, on = [Io(ConnectionReset)])]
async fn hedged_resets(s: &Script) -> io::Result<u32> {
    s.attempt().await
}

/// The attribute fn of `case`'s settings, if it is one of the two.
fn through_attribute(case: &Case) -> Option<Outcome> {
    let which = match (
        case.retries,
        case.backoff_ms,
        case.timeout_ms,
        case.reset_only,
    ) {
        (2, 10, None, false) => false,
        (2, 10, Some(35), true) => true,
        _ => return None,
    };
    let script = Script {
        case: case.clone(),
        calls: AtomicU32::new(0),
    };
    Some(paused(async {
        let start = tokio::time::Instant::now();
        let result = if which {
            hedged_resets(&script).await
        } else {
            hedged_any(&script).await
        };
        Outcome {
            result: result.map_err(|e| e.kind()),
            attempts: script.calls.load(Ordering::SeqCst),
            elapsed: start.elapsed(),
        }
    }))
}

fn attribute_case() -> impl Strategy<Value = Case> {
    (steps(), any::<bool>()).prop_map(|(steps, resets)| Case {
        steps,
        retries: 2,
        backoff_ms: 10,
        timeout_ms: resets.then_some(35),
        reset_only: resets,
        hedges: 1,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn hedged_calls_follow_the_model(case in case()) {
        let expected = model(&case);
        prop_assume!(expected.is_some(), "two events at one instant");
        let expected = expected.unwrap();
        let [direct, layer] = run(&case);
        prop_assert_eq!(&direct, &expected, "call_async");
        prop_assert_eq!(&layer, &expected, "RobustLayer::hedged");
    }

    #[test]
    fn hedged_fns_follow_the_model(case in attribute_case()) {
        let expected = model(&case);
        prop_assume!(expected.is_some(), "two events at one instant");
        let expected = expected.unwrap();
        let through = through_attribute(&case).expect("one of the attribute's settings");
        prop_assert_eq!(&through, &expected, "#[robust(hedge(..))]");
    }
}

/// The generator reaches the model's branches: a first attempt that decides before its
/// hedge, a hedge started at once by a failure, a hedge due beside a slower attempt that wins,
/// a round failed in full and followed by another, timeouts.
#[test]
fn the_cases_reach_every_branch_of_the_model() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut alone, mut due_won, mut after_failure, mut several_rounds, mut timed_out) =
        (0, 0, 0, 0, 0);
    for _ in 0..400 {
        let case = case().new_tree(&mut runner).unwrap().current();
        let Some((o, path)) = model_path(&case) else {
            continue;
        };
        alone += usize::from(o.attempts == 1);
        due_won += usize::from(path.winner == Some(Start::Due));
        after_failure += usize::from(path.failure_hedges > 0);
        several_rounds += usize::from(path.rounds > 1);
        timed_out += usize::from(o.result == Err(ErrorKind::TimedOut));
    }
    for (what, n) in [
        ("decided by the first attempt alone", alone),
        ("won by a hedge sent when it was due", due_won),
        ("a hedge started at once by a failure", after_failure),
        ("more than one round", several_rounds),
        ("ended by a timeout", timed_out),
    ] {
        assert!(n >= 20, "{what}: {n} cases");
    }
}

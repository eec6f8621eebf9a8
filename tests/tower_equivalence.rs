//! `RobustLayer` retries a service as `call_async` retries the same calls: generated scripts
//! (each attempt answers after a delay with a success, an error every rule retries, or one only
//! `AnyError` retries) under generated policies (retries, a constant backoff, a timeout or none,
//! `on = [AnyError]` or a reset only, a circuit breaker or none, a deadline or none), run on
//! tokio's paused clock through `RobustLayer::new`, `RobustLayer::from_static` and `call_async`,
//! give the same result, the same number of calls and the same elapsed time. The layer's paths
//! differ by the policy (the first attempt sent from `call` and a success looked at first by
//! `poll` without a guard or timeout, the loop with its timer kept in the future with one, the
//! breaker's admission and permits); the loop of `call_async` is the reference. Each of the
//! three runs has its own breaker. A policy with a breaker, a deadline or a value rule (an
//! `Ok` answer retried) runs as a
//! `DynPolicy` (one type for the combinations), which takes the loop's path; one with a hedge
//! (and neither) runs through `RobustLayer::hedged`. (The hedged layer and `call_async` run the
//! same rounds: those cases check what the layer adds around them, its copies of the request,
//! its services made ready, its budget credit, not the rounds themselves, which
//! `tests/hedging.rs` does.)

use std::io::{self, ErrorKind};
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use retry_runtime::hedge::Hedge;
use retry_runtime::kind::{AnyError, ClassifyExt, Io, OkIf, Timeout};
use retry_runtime::policy::PolicyCore;
use retry_runtime::tower::{Guards, PerKey, RobustLayer, Unhedged};
use retry_runtime::{AsyncRetryPolicy, CircuitBreaker, Constant, DynPolicy, NoJitter, Policy};

#[path = "common/scripts.rs"]
mod scripts;
use scripts::{Answer, Outcome, Step, paused, step_at, steps, through_call_async, through_layer};

// The scripts' answers come at multiples of 10 ms and the timeouts end in 5 ms, so that an
// answer does not come at the instant its own timeout cuts it; one can still come at the
// instant the deadline, counted from the call's start, cuts it, which both loops settle alike
// on the paused clock: the attempt is polled first, and an error then is a timeout. A reset is
// retried by both `on` lists, a refusal by `on = [AnyError]` only.

/// A generated case.
#[derive(Debug, Clone)]
struct Case {
    script: Vec<Step>,
    retries: u32,
    backoff_ms: u64,
    timeout_ms: Option<u64>,
    reset_only: bool,
    /// A breaker over the last 4 attempts (at least 2) that opens at half of them failed,
    /// for 50 ms, then lets one probe through.
    breaker: bool,
    deadline_ms: Option<u64>,
    /// A value rule: an odd answer is retried (as a `DynPolicy`).
    values: bool,
    /// (Without a breaker, deadline or value rule.) A hedge 7 ms into each round, through
    /// `RobustLayer::hedged` (7 ms: its events never fall at the instant of the first
    /// attempt's, which end in 0 or 5 ms from the round's start).
    hedge: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        steps(6, [1, 1, 1]),
        // (At least one: a backoff beside `retries(0)` is a configuration error.)
        1u32..4,
        0u64..4,
        prop::option::of(prop_oneof![Just(15u64), Just(35), Just(55)]),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        // (Above every timeout: a timeout at or past the deadline is a configuration error.)
        prop::option::of(prop_oneof![Just(65u64), Just(95)]),
    )
        .prop_map(
            |(
                script,
                retries,
                backoff,
                timeout_ms,
                reset_only,
                breaker,
                hedge,
                values,
                deadline_ms,
            )| {
                Case {
                    script,
                    retries,
                    backoff_ms: backoff * 10,
                    timeout_ms,
                    reset_only,
                    breaker,
                    deadline_ms,
                    values,
                    hedge,
                }
            },
        )
}

/// The three outcomes on `script` of the policies `make` makes (one for each run, so that
/// each has its own breaker): `call_async`, `RobustLayer::new`, `RobustLayer::from_static`.
fn outcomes<P>(make: impl Fn() -> P, script: &[Step]) -> [Option<Outcome>; 3]
where
    P: AsyncRetryPolicy<u32, io::Error> + PolicyCore<Timeout: Unhedged> + 'static,
    PerKey: Guards<u32, P, u32, io::Error>,
{
    paused(async {
        let direct = through_call_async(&make(), script, 7).await;
        let shared = through_layer(RobustLayer::new(make()), script, 7).await;
        let leaked: &'static P = Box::leak(Box::new(make()));
        let by_static = through_layer(RobustLayer::from_static(leaked), script, 7).await;
        [Some(direct), Some(shared), Some(by_static)]
    })
}

/// A breaker of its own for one run (leaked: a policy borrows its breaker).
fn breaker() -> &'static CircuitBreaker {
    Box::leak(Box::new(
        CircuitBreaker::new(4, 2, 0.5, Duration::from_millis(50), 1).expect("a valid breaker"),
    ))
}

/// The outcomes of `call_async`, `RobustLayer::new` (or `hedged`) and
/// `RobustLayer::from_static` (`None` for a hedged policy, which has no such constructor).
fn run(case: &Case) -> [Option<Outcome>; 3] {
    let builder = || {
        Policy::builder()
            .retries(case.retries)
            .backoff(Constant::new(Duration::from_millis(case.backoff_ms)))
            .jitter(NoJitter)
    };
    let timeout = |t: u64| Duration::from_millis(t);
    if case.breaker || case.deadline_ms.is_some() || case.values {
        // The combinations, as one type (the value rule is always there, matching nothing
        // without `values`).
        let values = case.values;
        let builder = || builder().on_ok(OkIf(move |v: &u32| values && v % 2 == 1));
        let make = || -> DynPolicy<u32, io::Error> {
            let deadline = Duration::from_millis(case.deadline_ms.unwrap_or(3_600_000));
            match (case.timeout_ms, case.reset_only, case.breaker) {
                (None, false, false) => {
                    DynPolicy::new(builder().on(AnyError).deadline(deadline).build().unwrap())
                }
                (None, false, true) => DynPolicy::new(
                    builder()
                        .on(AnyError)
                        .deadline(deadline)
                        .breaker(breaker())
                        .build()
                        .unwrap(),
                ),
                (None, true, false) => DynPolicy::new(
                    builder()
                        .on(Timeout.or(Io::of([ErrorKind::ConnectionReset])))
                        .deadline(deadline)
                        .build()
                        .unwrap(),
                ),
                (None, true, true) => DynPolicy::new(
                    builder()
                        .on(Timeout.or(Io::of([ErrorKind::ConnectionReset])))
                        .deadline(deadline)
                        .breaker(breaker())
                        .build()
                        .unwrap(),
                ),
                (Some(t), false, false) => DynPolicy::new(
                    builder()
                        .timeout(timeout(t))
                        .on(AnyError)
                        .deadline(deadline)
                        .build()
                        .unwrap(),
                ),
                (Some(t), false, true) => DynPolicy::new(
                    builder()
                        .timeout(timeout(t))
                        .on(AnyError)
                        .deadline(deadline)
                        .breaker(breaker())
                        .build()
                        .unwrap(),
                ),
                (Some(t), true, false) => DynPolicy::new(
                    builder()
                        .timeout(timeout(t))
                        .on(Timeout.or(Io::of([ErrorKind::ConnectionReset])))
                        .deadline(deadline)
                        .build()
                        .unwrap(),
                ),
                (Some(t), true, true) => DynPolicy::new(
                    builder()
                        .timeout(timeout(t))
                        .on(Timeout.or(Io::of([ErrorKind::ConnectionReset])))
                        .deadline(deadline)
                        .breaker(breaker())
                        .build()
                        .unwrap(),
                ),
            }
        };
        return outcomes(make, &case.script);
    }
    if case.hedge {
        // `RobustLayer::hedged` (its layer has one handle, an `Arc`: no `from_static`).
        macro_rules! hedged {
            ($make:expr) => {{
                let make = $make;
                paused(async {
                    let direct = through_call_async(&make(), &case.script, 7).await;
                    let layer = through_layer(RobustLayer::hedged(make()), &case.script, 7).await;
                    [Some(direct), Some(layer), None]
                })
            }};
        }
        let hedge = || Hedge::after(Duration::from_millis(7), 1).expect("a valid hedge");
        return match (case.timeout_ms, case.reset_only) {
            (None, false) => hedged!(|| builder().hedge(hedge()).on(AnyError).build().unwrap()),
            (None, true) => hedged!(|| {
                builder()
                    .hedge(hedge())
                    .on(Io::of([ErrorKind::ConnectionReset]))
                    .build()
                    .unwrap()
            }),
            (Some(t), false) => hedged!(|| {
                builder()
                    .timeout(timeout(t))
                    .hedge(hedge())
                    .on(AnyError)
                    .build()
                    .unwrap()
            }),
            (Some(t), true) => hedged!(|| {
                builder()
                    .timeout(timeout(t))
                    .hedge(hedge())
                    .on(Timeout.or(Io::of([ErrorKind::ConnectionReset])))
                    .build()
                    .unwrap()
            }),
        };
    }
    // Without a guard or deadline: four shapes of policy, four types (the layer's fast paths).
    match (case.timeout_ms, case.reset_only) {
        (None, false) => outcomes(|| builder().on(AnyError).build().unwrap(), &case.script),
        (None, true) => outcomes(
            || {
                builder()
                    .on(Io::of([ErrorKind::ConnectionReset]))
                    .build()
                    .unwrap()
            },
            &case.script,
        ),
        (Some(t), false) => outcomes(
            || builder().timeout(timeout(t)).on(AnyError).build().unwrap(),
            &case.script,
        ),
        (Some(t), true) => outcomes(
            || {
                builder()
                    .timeout(timeout(t))
                    .on(Timeout.or(Io::of([ErrorKind::ConnectionReset])))
                    .build()
                    .unwrap()
            },
            &case.script,
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_layer_retries_as_call_async_does(case in case()) {
        let [direct, shared, by_static] = run(&case);
        prop_assert_eq!(&shared, &direct, "RobustLayer::new (or hedged) against call_async");
        if by_static.is_some() {
            prop_assert_eq!(&by_static, &direct, "RobustLayer::from_static against call_async");
        }
    }
}

/// The generator reaches every path the property is about: successes after failures, errors
/// given up, timeouts, and both policies' shapes (so that the property cannot hold by
/// comparing the same trivial outcome).
#[test]
fn the_cases_cover_retries_give_ups_and_timeouts() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut retried_to_success, mut given_up, mut timed_out, mut rejected) = (0, 0, 0, 0);
    // Hedged cases whose first attempt still ran when its hedge was due (7 ms): a hedge was
    // sent beside it.
    let mut hedged_twice = 0;
    // Value-rule cases without a timeout (whose `Ok` steps are all answers) whose first `Ok`
    // answer matched the rule and was retried.
    let mut value_retried = 0;
    for _ in 0..300 {
        let case = case().new_tree(&mut runner).unwrap().current();
        let [Some(direct), ..] = run(&case) else {
            unreachable!("call_async always runs")
        };
        // (Attempt i answers `7 + i` when its step is `Ok`; the last step repeats.)
        let ok_at = |i: usize| step_at(&case.script, i as u32).answer == Answer::Ok;
        let first_ok = (0..direct.attempts as usize).find(|&i| ok_at(i));
        if case.values
            && case.timeout_ms.is_none()
            && first_ok.is_some_and(|i| (7 + i) % 2 == 1 && direct.attempts as usize > i + 1)
        {
            value_retried += 1;
        }
        let hedged = case.hedge && !case.breaker && case.deadline_ms.is_none() && !case.values;
        if hedged && case.script[0].after_ms >= 10 {
            assert!(direct.attempts >= 2, "no hedge sent: {case:?}");
            hedged_twice += 1;
        }
        match direct.result {
            // (`E::from(Open)` for an `io::Error`: kind `Other`; the script has none.)
            Err(ErrorKind::Other) => rejected += 1,
            Ok(_) if direct.attempts > 1 => retried_to_success += 1,
            Err(ErrorKind::TimedOut) => timed_out += 1,
            Err(_) if direct.attempts > 1 => given_up += 1,
            _ => {}
        }
    }
    assert!(
        retried_to_success >= 20,
        "{retried_to_success} successes after more than one call (a retry or a hedge)"
    );
    assert!(given_up >= 20, "{given_up} errors after retries");
    assert!(timed_out >= 10, "{timed_out} calls ended by a timeout");
    assert!(rejected >= 10, "{rejected} calls ended by the open breaker");
    assert!(
        hedged_twice >= 10,
        "{hedged_twice} calls hedged beside a running attempt"
    );
    assert!(
        value_retried >= 5,
        "{value_retried} calls that retried a matched answer"
    );
}

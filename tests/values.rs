//! Retrying on values: `Ok(PATTERN | CLOSURE)` kinds (SPEC section 13), in the attribute and
//! the builder, blocking and async. A matched value is a failed attempt for every rule, limit
//! and guard; when its rule gives up, the last value is returned as `Ok`.

use std::cell::{Cell, RefCell};
use std::io::{self, ErrorKind};
use std::time::Duration;

use retry_runtime::kind::{NoError, OkIf};
use retry_runtime::time::VirtualTime;
use retry_runtime::{
    CircuitBreaker, Constant, DynPolicy, NoBackoff, NoJitter, Policy, RetryBudget, RetryInfo,
    RuleId, robust,
};
use tokio::time::Instant;

mod common;
use common::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reply {
    Busy,
    Throttled { after: u64 },
    Done(u32),
}

/// What a fn returns on each of its attempts: the script's next step (the last one repeats).
struct Script {
    steps: Vec<io::Result<Reply>>,
    calls: Cell<usize>,
}

impl Script {
    fn new(steps: Vec<io::Result<Reply>>) -> Self {
        Script {
            steps,
            calls: Cell::new(0),
        }
    }
    fn next(&self) -> io::Result<Reply> {
        let i = self.calls.get().min(self.steps.len() - 1);
        self.calls.set(self.calls.get() + 1);
        match &self.steps[i] {
            Ok(r) => Ok(*r),
            Err(e) => Err(e.kind().into()),
        }
    }
    fn calls(&self) -> usize {
        self.calls.get()
    }
}

fn refused() -> io::Result<Reply> {
    Err(ErrorKind::ConnectionRefused.into())
}

thread_local! {
    static EVENTS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}
fn log(s: String) {
    EVENTS.with(|e| e.borrow_mut().push(s));
}
fn events() -> Vec<String> {
    EVENTS.with(|e| e.take())
}

#[robust(retries = 3, backoff = constant(base = 1s), jitter = none,
         on = [Ok(Reply::Busy)],
         on_success = || log("success".into()),
         on_error = |e: &io::Error, n| log(format!("error {n} {}", e.kind())),
         on_retry = |r: &io::Result<Reply>, i: &RetryInfo| log(format!("retry {} {:?} {:?}", i.retry, r.as_ref().ok(), i.rule)))]
fn busy_until(s: &Script) -> io::Result<Reply> {
    s.next()
}

#[test]
fn a_matched_value_is_retried_until_it_no_longer_matches() {
    let s = Script::new(vec![Ok(Reply::Busy), Ok(Reply::Busy), Ok(Reply::Done(7))]);
    let (r, sleeps) = on_virtual_time(None, || busy_until(&s));
    assert_eq!(r.unwrap(), Reply::Done(7));
    assert_eq!(s.calls(), 3);
    assert_eq!(sleeps, [secs(1), secs(1)]);
    // on_retry reports value retries with the value; on_error is for errors only, and
    // on_success is called once, for the value no kind matches.
    assert_eq!(
        events(),
        ["retry 1 Some(Busy) On", "retry 2 Some(Busy) On", "success"]
    );
}

#[test]
fn when_the_retries_are_used_up_the_last_value_is_returned_as_ok() {
    let s = Script::new(vec![Ok(Reply::Busy)]);
    let (r, sleeps) = on_virtual_time(None, || busy_until(&s));
    assert_eq!(r.unwrap(), Reply::Busy);
    assert_eq!(s.calls(), 4, "3 retries");
    assert_eq!(sleeps, [secs(1); 3]);
    let ev = events();
    assert_eq!(ev.len(), 3, "three retries reported, no success: {ev:?}");
    assert!(!ev.contains(&"success".to_owned()));
}

#[test]
fn an_on_list_of_ok_kinds_retries_no_error() {
    let s = Script::new(vec![refused(), Ok(Reply::Done(1))]);
    let (r, sleeps) = on_virtual_time(None, || busy_until(&s));
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionRefused);
    assert_eq!(s.calls(), 1);
    assert!(sleeps.is_empty());
    assert_eq!(events(), ["error 0 connection refused"]);
}

// Errors and values share one retry count.
#[robust(retries = 3, backoff = constant(base = 1s), jitter = none,
         on = [Io, Ok(|r: &Reply| *r == Reply::Busy)])]
fn mixed(s: &Script) -> io::Result<Reply> {
    s.next()
}

#[test]
fn errors_and_values_share_the_retry_count() {
    let s = Script::new(vec![
        refused(),
        Ok(Reply::Busy),
        refused(),
        Ok(Reply::Done(4)),
    ]);
    let (r, _) = on_virtual_time(None, || mixed(&s));
    assert_eq!(r.unwrap(), Reply::Done(4));
    assert_eq!(s.calls(), 4);

    let s = Script::new(vec![refused(), Ok(Reply::Busy), refused(), Ok(Reply::Busy)]);
    let (r, _) = on_virtual_time(None, || mixed(&s));
    assert_eq!(r.unwrap(), Reply::Busy, "the 4th outcome, after 3 retries");
    assert_eq!(s.calls(), 4);
}

// A `when(Ok(..))` rule with its own retries and a hint read from the value, before `on`.
#[robust(retries = 5, backoff = constant(base = 1s), jitter = none,
         max_delay = 60s,
         on = [Ok(Reply::Busy)],
         when(Ok(Reply::Throttled { .. }), retries = 3,
              hint = |r: &Reply| match r { Reply::Throttled { after } => Some(secs(*after)), _ => None }),
         on_retry = |_r: &io::Result<Reply>, i: &RetryInfo| log(format!("{:?} hinted={}", i.rule, i.hinted)))]
fn throttled(s: &Script) -> io::Result<Reply> {
    s.next()
}

#[test]
fn a_when_ok_rule_reads_its_delay_from_the_value() {
    let s = Script::new(vec![
        Ok(Reply::Throttled { after: 7 }),
        Ok(Reply::Busy),
        Ok(Reply::Throttled { after: 3 }),
        Ok(Reply::Done(1)),
    ]);
    let (r, sleeps) = on_virtual_time(None, || throttled(&s));
    assert_eq!(r.unwrap(), Reply::Done(1));
    assert_eq!(sleeps, [secs(7), secs(1), secs(3)]);
    assert_eq!(
        events(),
        [
            "When(0) hinted=true",
            "On hinted=false",
            "When(0) hinted=true"
        ]
    );
}

#[test]
fn a_when_ok_rule_gives_up_at_its_own_limit_and_a_hint_stays_within_max_delay() {
    // retries = 3 for Throttled (5 for `on`): the fourth Throttled gives up.
    let s = Script::new(vec![Ok(Reply::Throttled { after: 1 })]);
    let (r, sleeps) = on_virtual_time(None, || throttled(&s));
    assert_eq!(r.unwrap(), Reply::Throttled { after: 1 });
    assert_eq!(s.calls(), 4);
    assert_eq!(sleeps, [secs(1); 3]);
    events();

    // The count is shared: after 3 retries for Busy, a Throttled value is not retried.
    let s = Script::new(vec![
        Ok(Reply::Busy),
        Ok(Reply::Busy),
        Ok(Reply::Busy),
        Ok(Reply::Throttled { after: 1 }),
    ]);
    let (r, _) = on_virtual_time(None, || throttled(&s));
    assert_eq!(r.unwrap(), Reply::Throttled { after: 1 });
    assert_eq!(s.calls(), 4);
    events();

    // A hint that would end past `max_delay` (60 s) is not followed: the value is returned.
    let s = Script::new(vec![Ok(Reply::Throttled { after: 61 })]);
    let (r, sleeps) = on_virtual_time(None, || throttled(&s));
    assert_eq!(r.unwrap(), Reply::Throttled { after: 61 });
    assert_eq!(s.calls(), 1);
    assert!(sleeps.is_empty());
    events();
}

static ONE_TOKEN: RetryBudget = match RetryBudget::new(1.0, 0.0, 1.0) {
    Ok(b) => b,
    Err(_) => panic!("invalid budget"),
};

#[robust(retries = 5, backoff = none, on = [Ok(Reply::Busy)], budget = ONE_TOKEN)]
fn budgeted(s: &Script) -> io::Result<Reply> {
    s.next()
}

#[test]
fn value_retries_spend_the_budget() {
    let s = Script::new(vec![Ok(Reply::Busy)]);
    let (r, _) = on_virtual_time(None, || budgeted(&s));
    assert_eq!(r.unwrap(), Reply::Busy);
    assert_eq!(
        s.calls(),
        2,
        "one token: one retry, then the value is returned"
    );
}

static BREAKER: std::sync::LazyLock<CircuitBreaker> = std::sync::LazyLock::new(|| {
    CircuitBreaker::new(4, 4, 0.5, Duration::from_secs(30), 1).expect("valid breaker")
});

#[robust(retries = 1, backoff = none, on = [Ok(Reply::Busy)], breaker = BREAKER)]
fn guarded(s: &Script) -> io::Result<Reply> {
    s.next()
}

#[test]
fn matched_values_count_as_failures_for_the_breaker() {
    let _t = VirtualTime::new().install();
    let s = Script::new(vec![Ok(Reply::Busy)]);
    // Two calls of two attempts each: four failures recorded, and the breaker opens.
    assert_eq!(guarded(&s).unwrap(), Reply::Busy);
    assert_eq!(guarded(&s).unwrap(), Reply::Busy);
    assert_eq!(s.calls(), 4);
    let r = guarded(&s);
    assert_eq!(
        r.unwrap_err().kind(),
        ErrorKind::Other,
        "rejected: E::from(Open)"
    );
    assert_eq!(s.calls(), 4, "the open breaker ran no attempt");
}

#[robust(retries = 10, backoff = constant(base = 1s), jitter = none, deadline = 2500ms,
         on = [Ok(Reply::Busy)])]
async fn busy_async(s: &Script) -> io::Result<Reply> {
    tokio::time::sleep(ms(100)).await;
    s.next()
}

#[tokio::test(start_paused = true)]
async fn an_async_value_retry_stops_at_the_deadline_and_returns_the_value() {
    let s = Script::new(vec![Ok(Reply::Busy)]);
    let start = Instant::now();
    assert_eq!(busy_async(&s).await.unwrap(), Reply::Busy);
    // Attempts end at 0.1, 1.2 and 2.3 s; a retry after the third would end at 3.3 s > 2.5 s.
    assert_eq!(s.calls(), 3);
    assert_eq!(start.elapsed(), ms(2300));
}

#[test]
fn the_builder_retries_values_with_on_ok_and_when_ok() {
    let time = VirtualTime::new();
    let retried = RefCell::new(Vec::new());
    let policy = Policy::builder()
        .retries(4)
        .backoff(Constant::new(secs(1)))
        .jitter(NoJitter)
        .on(NoError)
        .on_ok(OkIf(|r: &Reply| *r == Reply::Busy))
        .when_ok(
            OkIf(|r: &Reply| matches!(r, Reply::Throttled { .. })).hint(|r: &Reply| match r {
                Reply::Throttled { after } => Some(secs(*after)),
                _ => None,
            }),
            |s| s.retries(2),
        )
        .on_retry(|r: &io::Result<Reply>, i: &RetryInfo| {
            retried.borrow_mut().push((*r.as_ref().unwrap(), i.rule))
        })
        .env(time.clone())
        .build()
        .unwrap();
    let s = Script::new(vec![
        Ok(Reply::Busy),
        Ok(Reply::Throttled { after: 5 }),
        Ok(Reply::Done(3)),
    ]);
    assert_eq!(policy.call(|_| s.next()).unwrap(), Reply::Done(3));
    assert_eq!(time.sleeps(), [secs(1), secs(5)]);
    assert_eq!(
        retried.take(),
        [
            (Reply::Busy, RuleId::On),
            (Reply::Throttled { after: 5 }, RuleId::When(0))
        ]
    );
    // NoError: errors are not retried.
    let s = Script::new(vec![refused(), Ok(Reply::Done(1))]);
    assert!(policy.call(|_| s.next()).is_err());
    assert_eq!(s.calls(), 1);

    // The same decisions through a DynPolicy.
    let time = VirtualTime::new();
    let dynamic = DynPolicy::new(
        Policy::builder()
            .retries(2)
            .backoff(NoBackoff)
            .on_ok(OkIf(|r: &Reply| *r == Reply::Busy))
            .env(time.clone())
            .build()
            .unwrap(),
    );
    let s = Script::new(vec![Ok(Reply::Busy)]);
    assert_eq!(dynamic.call(|_| s.next()).unwrap(), Reply::Busy);
    assert_eq!(s.calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn the_builder_retries_values_in_async_calls() {
    let policy = Policy::builder()
        .retries(3)
        .backoff(Constant::new(secs(2)))
        .jitter(NoJitter)
        .timeout(secs(1))
        .on_ok(OkIf(|r: &Reply| *r == Reply::Busy))
        .build()
        .unwrap();
    let s = Script::new(vec![Ok(Reply::Busy), Ok(Reply::Busy), Ok(Reply::Done(9))]);
    let start = Instant::now();
    let r = policy.call_async(|_| async { s.next() }).await;
    assert_eq!(r.unwrap(), Reply::Done(9));
    assert_eq!(start.elapsed(), secs(4));
}

static TIGHT: std::sync::LazyLock<CircuitBreaker> = std::sync::LazyLock::new(|| {
    CircuitBreaker::new(2, 2, 0.5, Duration::from_secs(30), 1).expect("valid breaker")
});

#[robust(retries = 3, backoff = none, on = [Ok(0)], breaker = TIGHT, fallback = |e: io::Error| Err(e))]
fn zero(n: &Cell<u32>) -> io::Result<u32> {
    n.set(n.get() + 1);
    Ok(0)
}

#[test]
fn a_breaker_that_opens_on_matched_values_returns_the_last_value() {
    let _t = VirtualTime::new().install();
    let n = Cell::new(0);
    // The second matched value opens the breaker: its retry is not admitted, and the call
    // returns the value (not `E::from(Open)`), without calling the fallback.
    assert_eq!(zero(&n).unwrap(), 0);
    assert_eq!(n.get(), 2);
    // The next call is rejected before any attempt: there is no value to return.
    assert_eq!(zero(&n).unwrap_err().kind(), ErrorKind::Other);
    assert_eq!(n.get(), 2);
}

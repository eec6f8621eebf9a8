//! `fallback = EXPR` (SPEC section 14): called once with the error the call would return,
//! whatever the reason it gives up, and never on success or for a value an `Ok(..)` kind
//! matched; sync and async fallbacks; the builder's `fallback`.

use std::cell::{Cell, RefCell};
use std::io::{self, ErrorKind};
use std::time::Duration;

use retry_runtime::time::VirtualTime;
use retry_runtime::{CircuitBreaker, DynPolicy, NoBackoff, Policy, RetryBudget, robust};
use tokio::time::Instant;

mod common;
use common::*;

thread_local! {
    static SEEN: RefCell<Vec<ErrorKind>> = const { RefCell::new(Vec::new()) };
}
/// The fallback of these tests: records the error's kind, answers 0 for a refused connection
/// and returns any other error.
fn recover(e: io::Error) -> io::Result<u32> {
    SEEN.with(|s| s.borrow_mut().push(e.kind()));
    if e.kind() == ErrorKind::ConnectionRefused {
        Ok(0)
    } else {
        Err(e)
    }
}
fn seen() -> Vec<ErrorKind> {
    SEEN.with(|s| s.take())
}

#[robust(retries = 2, backoff = none, on = [Io(ConnectionRefused)], fallback = recover)]
fn refused_then(n: &Cell<u32>, fail: u32, kind: ErrorKind) -> io::Result<u32> {
    n.set(n.get() + 1);
    if n.get() <= fail {
        Err(kind.into())
    } else {
        Ok(n.get())
    }
}

#[test]
fn the_fallback_answers_once_the_retries_are_used_up() {
    let n = Cell::new(0);
    assert_eq!(
        refused_then(&n, 10, ErrorKind::ConnectionRefused).unwrap(),
        0
    );
    assert_eq!(n.get(), 3, "the retries were made first");
    assert_eq!(seen(), [ErrorKind::ConnectionRefused], "called once");
}

#[test]
fn the_fallback_is_not_called_on_success() {
    let n = Cell::new(0);
    assert_eq!(
        refused_then(&n, 1, ErrorKind::ConnectionRefused).unwrap(),
        2
    );
    assert!(seen().is_empty());
}

#[test]
fn an_error_no_rule_retries_goes_to_the_fallback_at_once() {
    let n = Cell::new(0);
    let e = refused_then(&n, 10, ErrorKind::NotFound).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "the fallback returned it");
    assert_eq!(n.get(), 1);
    assert_eq!(seen(), [ErrorKind::NotFound]);
}

#[robust(retries = 3, backoff = none, on = [Ok(|v: &u32| *v == 0)], fallback = recover)]
fn zero(n: &Cell<u32>) -> io::Result<u32> {
    n.set(n.get() + 1);
    Ok(0)
}

#[test]
fn a_matched_value_returned_after_the_retries_does_not_call_the_fallback() {
    let n = Cell::new(0);
    assert_eq!(zero(&n).unwrap(), 0);
    assert_eq!(n.get(), 4);
    assert!(seen().is_empty());
}

#[robust(retries = -1, backoff = constant(base = 1s), jitter = none, max_delay = 2500ms,
         fallback = recover)]
fn until_max_delay(n: &Cell<u32>) -> io::Result<u32> {
    n.set(n.get() + 1);
    Err(ErrorKind::ConnectionRefused.into())
}

#[test]
fn max_delay_spent_calls_the_fallback() {
    let n = Cell::new(0);
    let (r, sleeps) = on_virtual_time(None, || until_max_delay(&n));
    assert_eq!(r.unwrap(), 0);
    assert_eq!(sleeps, [secs(1), secs(1)]);
    assert_eq!(seen(), [ErrorKind::ConnectionRefused]);
}

static EMPTY: RetryBudget = match RetryBudget::new(1.0, 0.0, 1.0) {
    Ok(b) => b,
    Err(_) => panic!("invalid budget"),
};

#[robust(retries = 5, backoff = none, budget = EMPTY, fallback = recover)]
fn budgeted(n: &Cell<u32>) -> io::Result<u32> {
    n.set(n.get() + 1);
    Err(ErrorKind::ConnectionRefused.into())
}

#[test]
fn an_empty_budget_calls_the_fallback() {
    let n = Cell::new(0);
    assert_eq!(budgeted(&n).unwrap(), 0);
    assert_eq!(n.get(), 2, "one token: one retry");
    assert_eq!(seen(), [ErrorKind::ConnectionRefused]);
}

static BREAKER: std::sync::LazyLock<CircuitBreaker> = std::sync::LazyLock::new(|| {
    CircuitBreaker::new(2, 2, 0.5, Duration::from_secs(30), 1).expect("valid breaker")
});

#[robust(retries = 1, backoff = none, breaker = BREAKER, fallback = recover)]
fn guarded(n: &Cell<u32>) -> io::Result<u32> {
    n.set(n.get() + 1);
    Err(ErrorKind::ConnectionReset.into())
}

#[test]
fn an_open_breaker_calls_the_fallback_without_an_attempt() {
    let _t = VirtualTime::new().install();
    let n = Cell::new(0);
    assert_eq!(guarded(&n).unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(n.get(), 2);
    // Open: rejected with E::from(Open), which the fallback receives.
    assert_eq!(guarded(&n).unwrap_err().kind(), ErrorKind::Other);
    assert_eq!(n.get(), 2);
    assert_eq!(seen(), [ErrorKind::ConnectionReset, ErrorKind::Other]);
}

#[robust(deadline = 250ms, retries = 5, backoff = none,
         fallback = |e: io::Error| async move {
             tokio::time::sleep(Duration::from_millis(50)).await;
             SEEN.with(|s| s.borrow_mut().push(e.kind()));
             Ok(42)
         })]
async fn slow() -> io::Result<u32> {
    tokio::time::sleep(secs(60)).await;
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn an_async_fallback_is_awaited_after_the_deadline() {
    let start = Instant::now();
    assert_eq!(slow().await.unwrap(), 42);
    // Cut at the deadline (250 ms), then the fallback's own 50 ms.
    assert_eq!(start.elapsed(), ms(300));
    assert_eq!(seen(), [ErrorKind::TimedOut]);
}

#[robust(retries = 1, backoff = none, fallback = recover)]
async fn refused_async(n: &Cell<u32>) -> io::Result<u32> {
    n.set(n.get() + 1);
    Err(ErrorKind::ConnectionRefused.into())
}

#[tokio::test(start_paused = true)]
async fn a_sync_fallback_works_on_an_async_fn() {
    let n = Cell::new(0);
    assert_eq!(refused_async(&n).await.unwrap(), 0);
    assert_eq!(n.get(), 2);
    assert_eq!(seen(), [ErrorKind::ConnectionRefused]);
}

#[test]
fn the_builder_applies_its_fallback_in_blocking_and_dyn_calls() {
    let calls = Cell::new(0);
    let policy = Policy::builder()
        .retries(2)
        .backoff(NoBackoff)
        .fallback(|e: io::Error| {
            calls.set(calls.get() + 1);
            if e.kind() == ErrorKind::ConnectionRefused {
                Ok("cached")
            } else {
                Err(e)
            }
        })
        .build()
        .unwrap();
    let attempts = Cell::new(0);
    let r = policy.call(|_| {
        attempts.set(attempts.get() + 1);
        Err(ErrorKind::ConnectionRefused.into())
    });
    assert_eq!((r.unwrap(), attempts.get(), calls.get()), ("cached", 3, 1));
    assert_eq!(policy.call(|_| Ok("fresh")).unwrap(), "fresh");
    assert_eq!(calls.get(), 1, "not called on success");

    let dynamic = DynPolicy::new(
        Policy::builder()
            .retries(0)
            .fallback(|_: io::Error| Ok(7u32))
            .build()
            .unwrap(),
    );
    assert_eq!(dynamic.call(|_| Err(ErrorKind::Other.into())).unwrap(), 7);
}

#[tokio::test(start_paused = true)]
async fn the_builder_applies_its_fallback_in_async_calls() {
    let policy = Policy::builder()
        .retries(1)
        .backoff(NoBackoff)
        .timeout(ms(100))
        .fallback(|e: io::Error| {
            assert_eq!(e.kind(), ErrorKind::TimedOut);
            Ok(5u32)
        })
        .build()
        .unwrap();
    let start = Instant::now();
    let r = policy
        .call_async(|_| async {
            tokio::time::sleep(secs(1)).await;
            Ok(1)
        })
        .await;
    assert_eq!(r.unwrap(), 5);
    assert_eq!(start.elapsed(), ms(200));
}

struct Cache {
    last: u32,
    misses: u32,
}

impl Cache {
    #[robust(retries = 1, backoff = none, fallback = |_e: io::Error| Ok(self.last))]
    fn get(&mut self) -> io::Result<u32> {
        self.misses += 1;
        Err(ErrorKind::ConnectionRefused.into())
    }

    #[robust(retries = 1, backoff = none, fallback = |e| async move {
        drop(e);
        Ok(99)
    })]
    async fn get_async(&mut self, buf: &mut Vec<u8>) -> io::Result<u32> {
        buf.push(1);
        self.misses += 1;
        Err(ErrorKind::ConnectionRefused.into())
    }
}

#[test]
fn a_fallback_may_read_mut_self_and_infer_its_argument() {
    let mut c = Cache { last: 9, misses: 0 };
    assert_eq!(c.get().unwrap(), 9);
    assert_eq!(c.misses, 2);
}

/// A fallback is called once (`FnOnce`): it may change `&mut self` or a `&mut` argument, and
/// move an owned argument, into its closure or into its future.
struct Stale {
    served: u32,
    misses: u32,
}

impl Stale {
    fn serve(&mut self) -> io::Result<u32> {
        self.served += 1;
        Ok(self.served)
    }

    #[robust(retries = 1, backoff = none, fallback = |_e: io::Error| self.serve())]
    fn get(&mut self) -> io::Result<u32> {
        self.misses += 1;
        Err(ErrorKind::ConnectionRefused.into())
    }

    #[robust(retries = 1, backoff = none, fallback = |_e| async { self.serve() })]
    async fn get_async(&mut self) -> io::Result<u32> {
        tokio::task::yield_now().await;
        self.misses += 1;
        Err(ErrorKind::ConnectionRefused.into())
    }
}

#[robust(retries = 1, backoff = none, fallback = move |_| Ok(name.len()))]
fn moved(name: String, n: &Cell<u32>) -> io::Result<usize> {
    n.set(n.get() + 1);
    Err(ErrorKind::ConnectionRefused.into())
}

#[robust(retries = 1, backoff = none, fallback = |_| async move { Ok(name.len()) })]
async fn moved_into_its_future(name: String, n: &Cell<u32>) -> io::Result<usize> {
    tokio::task::yield_now().await;
    n.set(n.get() + 1);
    Err(ErrorKind::ConnectionRefused.into())
}

#[tokio::test(start_paused = true)]
async fn a_fallback_is_called_once_and_may_change_mut_self_or_move_an_argument() {
    let mut s = Stale {
        served: 0,
        misses: 0,
    };
    assert_eq!(s.get().unwrap(), 1);
    assert_eq!(s.get_async().await.unwrap(), 2);
    assert_eq!((s.served, s.misses), (2, 4));
    let n = Cell::new(0);
    assert_eq!(moved("abc".to_owned(), &n).unwrap(), 3);
    assert_eq!(n.get(), 2);
    assert_eq!(
        moved_into_its_future("abcd".to_owned(), &n).await.unwrap(),
        4
    );
    assert_eq!(n.get(), 4);
}

#[tokio::test(start_paused = true)]
async fn an_async_fallback_with_mut_borrows_and_a_future_that_is_send_but_not_sync() {
    let mut c = Cache { last: 0, misses: 0 };
    let mut buf = Vec::new();
    assert_eq!(
        c.get_async(&mut buf).await.unwrap(),
        99,
        "the fallback answers"
    );
    assert_eq!((c.misses, buf.len()), (2, 2));

    // A fallback whose future holds a `Cell` across an await: the fn's future is still
    // `Send` (spawnable), as it would be written by hand.
    #[robust(retries = 0, fallback = |e: io::Error| async move {
        let c = Cell::new(1u32);
        tokio::task::yield_now().await;
        c.set(2);
        if c.get() == 2 { Ok(c.get()) } else { Err(e) }
    })]
    async fn plain() -> io::Result<u32> {
        Err(ErrorKind::Other.into())
    }
    assert_eq!(tokio::spawn(plain()).await.unwrap().unwrap(), 2);
}

#[robust(retries = 2, backoff = none, on = [Ok(|v| *v == 0)],
         when(Ok(|v| *v == 1), retries = 1, hint = |v| Some(Duration::from_millis(u64::from(*v)))),
         fallback = |e| if e.kind() == ErrorKind::NotFound { Ok(7) } else { Err(e) })]
fn inferred(n: &Cell<u32>) -> io::Result<u32> {
    n.set(n.get() + 1);
    if n.get() > 3 {
        Err(ErrorKind::NotFound.into())
    } else {
        Ok(n.get() % 2)
    }
}

#[test]
fn closures_without_annotations_infer_their_types() {
    let n = Cell::new(0);
    let (r, sleeps) = on_virtual_time(None, || inferred(&n));
    // 1 (when, hinted 1 ms), 0 (on), 1: the when rule's limit (1) is used up: returned.
    assert_eq!(r.unwrap(), 1);
    assert_eq!(n.get(), 3);
    assert_eq!(sleeps, [ms(1), Duration::ZERO]);
}

/// A fallback made by a fn whose future borrows what it was given.
fn answer_len<'a>(
    s: &'a str,
) -> impl Fn(io::Error) -> std::pin::Pin<Box<dyn Future<Output = io::Result<usize>> + Send + 'a>> + 'a
{
    move |_e| {
        Box::pin(async move {
            tokio::task::yield_now().await;
            Ok(s.len())
        })
    }
}

// The temporary `String` lives until the fallback's future is done, as it would in
// `answer_len(&String::from("four"))(e).await` written by hand.
#[robust(retries = 0, fallback = answer_len(&String::from("four")))]
async fn borrows_a_temporary() -> io::Result<usize> {
    Err(ErrorKind::Other.into())
}

#[tokio::test(start_paused = true)]
async fn an_async_fallback_may_borrow_a_temporary_of_its_expression() {
    assert_eq!(
        tokio::spawn(borrows_a_temporary()).await.unwrap().unwrap(),
        4
    );
}

static LAST_GOOD: std::sync::Mutex<usize> = std::sync::Mutex::new(3);

// A value read under a lock in a block: the guard is dropped there, before the fallback's
// `.await`, so the fn's future stays `Send` (spawned below).
#[robust(retries = 0, fallback = {
    let v = *LAST_GOOD.lock().unwrap();
    move |_e: io::Error| async move {
        tokio::task::yield_now().await;
        Ok(v)
    }
})]
async fn reads_under_a_lock() -> io::Result<usize> {
    Err(ErrorKind::Other.into())
}

#[tokio::test(start_paused = true)]
async fn a_value_read_under_a_lock_in_a_block_keeps_the_future_send() {
    assert_eq!(
        tokio::spawn(reads_under_a_lock()).await.unwrap().unwrap(),
        3
    );
}

// A unique borrow the body never names: each callback reads it, and the fallback, made once the
// call and its policy (which hold the callbacks) are gone, writes through it.
#[robust(retries = 2, backoff = none,
         on_error = |_e: &io::Error, _| SEEN_LENS.with(|s| s.borrow_mut().push(log.len())),
         fallback = move |e: io::Error| { log.push(e.to_string()); Ok(log.len()) })]
fn callback_and_fallback_share(log: &mut Vec<String>, calls: &Cell<u32>) -> io::Result<usize> {
    calls.set(calls.get() + 1);
    Err(io::Error::other("down"))
}

#[robust(retries = 2, backoff = constant(base = 10ms), timeout = 1s,
         on_retry = |_, _| SEEN_LENS.with(|s| s.borrow_mut().push(log.as_deref().map_or(0, Vec::len))),
         fallback = |e: io::Error| { if let Some(l) = log { l.push(e.to_string()); } Ok(7) })]
async fn callback_and_fallback_share_async(
    log: Option<&mut Vec<String>>,
    calls: &Cell<u32>,
) -> io::Result<usize> {
    calls.set(calls.get() + 1);
    tokio::task::yield_now().await;
    Err(io::Error::other("down"))
}

thread_local! {
    static SEEN_LENS: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

#[tokio::test(start_paused = true)]
async fn callbacks_may_read_what_the_fallback_writes() {
    let (mut log, calls) = (vec!["a".to_owned()], Cell::new(0));
    assert_eq!(callback_and_fallback_share(&mut log, &calls).unwrap(), 2);
    assert_eq!(log, ["a", "down"]);
    assert_eq!(calls.get(), 3);
    assert_eq!(
        SEEN_LENS.with(|s| s.take()),
        [1, 1, 1],
        "on_error saw the vector before the fallback"
    );
    let mut log = Vec::new();
    let r = callback_and_fallback_share_async(Some(&mut log), &calls).await;
    assert_eq!(r.unwrap(), 7);
    assert_eq!(log, ["down"]);
    assert_eq!(calls.get(), 6);
    assert_eq!(
        SEEN_LENS.with(|s| s.take()),
        [0, 0],
        "on_retry ran before each retry"
    );
}

//! `#[robust]` on async functions, on tokio's paused clock: virtual time, no real waiting.
// A body that ends in a `return` (it diverges) leaves nothing unreachable after it.
#![deny(unreachable_code)]

use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;
use common::*;

use retry_runtime::{Elapsed, robust};
use tokio::time::Instant;

/// A scripted server: each call takes the next step (a delay, then an outcome).
#[derive(Default)]
struct Script {
    steps: Mutex<Vec<(Duration, Result<&'static str, ErrorKind>)>>,
    calls: AtomicU32,
    starts: Mutex<Vec<Duration>>,
}

impl Script {
    fn new(mut steps: Vec<(Duration, Result<&'static str, ErrorKind>)>) -> Self {
        steps.reverse();
        Script {
            steps: Mutex::new(steps),
            ..Default::default()
        }
    }

    async fn serve(&self, epoch: Instant) -> io::Result<String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.starts.lock().unwrap().push(epoch.elapsed());
        let step = self.steps.lock().unwrap().pop();
        let (delay, outcome) = step.unwrap_or((Duration::ZERO, Ok("late")));
        tokio::time::sleep(delay).await;
        outcome.map(str::to_owned).map_err(io::Error::from)
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    fn starts(&self) -> Vec<Duration> {
        self.starts.lock().unwrap().clone()
    }
}

/// The example of the issue, with jitter left out where delays are checked exactly.
#[robust(timeout = "2s", backoff = exponential(base = 1, max = 60, m = 2),
         jitter = full, retries = 5, on = [Timeout, Io],
         when(Io(ConnectionRefused), retries = 0),
         when(Timeout, retries = 10, backoff = constant(base = "200ms"), jitter = none))]
async fn fetch(server: &Script, epoch: Instant) -> io::Result<String> {
    server.serve(epoch).await
}

#[tokio::test(start_paused = true)]
async fn example_timeouts_use_their_own_rule() {
    // Eleven attempts time out (10 retries of 200 ms), the twelfth is not made.
    let server = Script::new(vec![(Duration::from_secs(3), Ok("slow")); 20]);
    let epoch = Instant::now();
    let e = fetch(&server, epoch).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    assert!(e.get_ref().is_some_and(|i| i.is::<Elapsed>()));
    assert_eq!(server.calls(), 11);
    let expected: Vec<Duration> = (0..11).map(|i| ms(2200 * i)).collect();
    assert_eq!(server.starts(), expected);
}

#[tokio::test(start_paused = true)]
async fn example_connection_refused_is_not_retried() {
    let server = Script::new(vec![(ms(5), Err(ErrorKind::ConnectionRefused))]);
    let e = fetch(&server, Instant::now()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
    assert_eq!(server.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn example_other_io_errors_use_the_top_level_settings() {
    let server = Script::new(vec![(ms(0), Err(ErrorKind::ConnectionReset)); 10]);
    let epoch = Instant::now();
    assert!(fetch(&server, epoch).await.is_err());
    assert_eq!(server.calls(), 6, "retries = 5");
    // Full jitter on 1, 2, 4, 8, 16 s: each gap is at most the un-jittered value.
    let starts = server.starts();
    for (x, w) in starts.windows(2).enumerate() {
        assert!(
            w[1] - w[0] <= Duration::from_secs(1 << x),
            "gap {x}: {:?}",
            w[1] - w[0]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn example_recovers_and_non_io_errors_are_not_in_the_on_list() {
    let server = Script::new(vec![
        (Duration::from_secs(5), Ok("slow")),
        (ms(1), Err(ErrorKind::ConnectionReset)),
        (ms(1), Ok("hello")),
    ]);
    assert_eq!(fetch(&server, Instant::now()).await.unwrap(), "hello");
    assert_eq!(server.calls(), 3);
}

struct Guard(Arc<AtomicBool>);
impl Drop for Guard {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[robust(timeout = "100ms", retries = 1, backoff = none, attempt = ctx)]
async fn cancellable(dropped: Arc<AtomicBool>, finished: Arc<AtomicBool>) -> io::Result<u32> {
    let _guard = Guard(dropped.clone());
    if ctx.retries() == 0 {
        tokio::time::sleep(Duration::from_secs(10)).await;
        finished.store(true, Ordering::SeqCst);
        return Ok(0);
    }
    assert!(ctx.remaining().unwrap() <= ms(100));
    Ok(ctx.number())
}

#[tokio::test(start_paused = true)]
async fn timed_out_attempts_are_cancelled() {
    let dropped = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    assert_eq!(
        cancellable(dropped.clone(), finished.clone())
            .await
            .unwrap(),
        2
    );
    assert!(dropped.load(Ordering::SeqCst));
    assert!(
        !finished.load(Ordering::SeqCst),
        "the first attempt ran to completion"
    );
    assert_eq!(start.elapsed(), ms(100));
}

#[robust(timeout = "1s", retries = 3, backoff = constant(base = "10ms"), jitter = none)]
async fn spawned(id: u32, calls: Arc<AtomicU32>) -> io::Result<u32> {
    let n = calls.fetch_add(1, Ordering::SeqCst);
    tokio::task::yield_now().await;
    if n.is_multiple_of(2) {
        Err(ErrorKind::Other.into())
    } else {
        Ok(id)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_future_is_send_and_runs_on_a_multi_thread_runtime() {
    let mut handles = Vec::new();
    for id in 0..8 {
        let calls = Arc::new(AtomicU32::new(0));
        handles.push((calls.clone(), tokio::spawn(spawned(id, calls))));
    }
    for (id, (calls, h)) in handles.into_iter().enumerate() {
        assert_eq!(h.await.unwrap().unwrap(), id as u32);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}

/// Owned arguments that are `Send` but not `Sync` (a `RefCell`, a `Cell`, a pattern over
/// one): each attempt gets its own clone, and no attempt holds a reference to the original,
/// so the fn's future is `Send` as it is without the attribute (with and without a timeout,
/// which run the attempt differently).
#[robust(retries = 2, backoff = none)]
async fn not_sync_args(
    log: std::cell::RefCell<Vec<u32>>,
    (seen, _tag): (std::cell::Cell<u32>, u8),
    calls: Arc<AtomicU32>,
) -> io::Result<usize> {
    let n = calls.fetch_add(1, Ordering::SeqCst);
    log.borrow_mut().push(n);
    seen.set(seen.get() + 1);
    tokio::task::yield_now().await;
    if n == 0 {
        return Err(ErrorKind::Other.into());
    }
    // Each attempt starts from the value passed in, not from what an earlier one left.
    Ok(log.borrow().len() + seen.get() as usize)
}

#[robust(timeout = "1s", retries = 2, backoff = none,
         fallback = |e: io::Error| if log.borrow().is_empty() { Err(e) } else { Ok(0) })]
async fn not_sync_args_timed(
    log: std::cell::RefCell<Vec<u32>>,
    calls: Arc<AtomicU32>,
) -> io::Result<usize> {
    let n = calls.fetch_add(1, Ordering::SeqCst);
    log.borrow_mut().push(n);
    tokio::task::yield_now().await;
    if n == 0 {
        return Err(ErrorKind::Other.into());
    }
    Ok(log.borrow().len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owned_arguments_that_are_not_sync_keep_the_future_send() {
    let calls = Arc::new(AtomicU32::new(0));
    let args = (
        std::cell::RefCell::new(vec![7]),
        (std::cell::Cell::new(0), 1),
        Arc::clone(&calls),
    );
    let h = tokio::spawn(not_sync_args(args.0, args.1, args.2));
    assert_eq!(h.await.unwrap().unwrap(), 2 + 1);
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    let calls = Arc::new(AtomicU32::new(0));
    let h = tokio::spawn(not_sync_args_timed(
        std::cell::RefCell::new(Vec::new()),
        Arc::clone(&calls),
    ));
    assert_eq!(h.await.unwrap().unwrap(), 1);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[robust(retries = 2, backoff = none)]
async fn question_mark(inputs: &[&str], n: &AtomicU32) -> Result<u32, std::num::ParseIntError> {
    let i = n.fetch_add(1, Ordering::SeqCst) as usize;
    let v: u32 = inputs[i].parse()?;
    Ok(v)
}

#[tokio::test(start_paused = true)]
async fn question_mark_ends_the_attempt_in_async_fns() {
    let n = AtomicU32::new(0);
    assert_eq!(question_mark(&["x", "y", "3"], &n).await.unwrap(), 3);
    let n = AtomicU32::new(0);
    assert!(question_mark(&["x", "y", "z", "4"], &n).await.is_err());
    assert_eq!(n.load(Ordering::SeqCst), 3);
}

#[robust(timeout = "1s", retries = 2, backoff = none, on = [Timeout])]
async fn boxed_timeout(n: &AtomicU32) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    n.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(())
}

#[robust(timeout = "1s", retries = 2, backoff = none, on = [Timeout])]
async fn anyhow_timeout(n: &AtomicU32) -> anyhow::Result<()> {
    n.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn boxed_and_anyhow_errors_carry_elapsed() {
    let n = AtomicU32::new(0);
    assert!(boxed_timeout(&n).await.unwrap_err().is::<Elapsed>());
    assert_eq!(n.load(Ordering::SeqCst), 3);
    let n = AtomicU32::new(0);
    assert!(anyhow_timeout(&n).await.unwrap_err().is::<Elapsed>());
    assert_eq!(n.load(Ordering::SeqCst), 3);
}

#[robust(retries = -1, backoff = constant(base = "1s"), jitter = none, max_delay = "10s")]
async fn budget(n: &AtomicU32) -> io::Result<()> {
    n.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(ms(1500)).await;
    Err(ErrorKind::Other.into())
}

#[tokio::test(start_paused = true)]
async fn max_delay_counts_virtual_time_in_async_fns() {
    let n = AtomicU32::new(0);
    let start = Instant::now();
    assert!(budget(&n).await.is_err());
    // Attempts end at 1.5, 4, 6.5, 9 s; retries start 1 s later while that is before 10 s.
    assert_eq!(n.load(Ordering::SeqCst), 4);
    assert_eq!(start.elapsed(), ms(4 * 1500 + 3 * 1000));
}

/// An error an attempt returns at its deadline is a timeout, on every path: here the fn's
/// (its attempts' starts are never read) and `call_async`'s (which keeps each attempt's
/// deadline). The body's own 1 s sleep ends in the same tick as the attempt's 1 s timer, and
/// the attempt is polled first: before, the fn's path took the error as no timeout, and
/// `on = [Timeout]` did not retry it.
#[robust(timeout = 1s, on = [Timeout], retries = 2, backoff = none)]
async fn errs_at_its_deadline(calls: &std::sync::atomic::AtomicU32) -> io::Result<()> {
    calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    Err(io::ErrorKind::Other.into())
}

#[tokio::test(start_paused = true)]
async fn an_error_at_the_attempts_deadline_is_a_timeout_on_every_path() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let calls = AtomicU32::new(0);
    let e = errs_at_its_deadline(&calls).await.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::Other);
    assert_eq!(calls.load(Ordering::SeqCst), 3, "retried as timeouts");
    let policy = retry_runtime::Policy::builder()
        .retries(2)
        .backoff(retry_runtime::NoBackoff)
        .timeout(std::time::Duration::from_secs(1))
        .on(retry_runtime::kind::Timeout)
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let r: io::Result<()> = policy
        .call_async(|_| async {
            calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            Err(io::ErrorKind::Other.into())
        })
        .await;
    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::Other);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// A value to be coerced into the return type: a `&String` into a `&str`, an array into a
/// slice, a `Box<Mem>` or an `Arc<Mem>` into one of `dyn Store`, a `Box<io::Error>` into a
/// `Box<dyn Error>`. Without the attribute, an async fn coerces its returns and its tail into
/// its return type; an attempt under it does too, in the plain, timed and hedged loops, so
/// each fn below fails once and returns on its second attempt.
trait Store: Send + Sync {
    fn size(&self) -> usize;
}

struct Mem(usize);

impl Store for Mem {
    fn size(&self) -> usize {
        self.0
    }
}

struct Named {
    name: String,
    bytes: [u8; 3],
    calls: AtomicU32,
}

impl Named {
    /// Whether this is the first attempt (which fails).
    fn first(&self) -> bool {
        self.calls.fetch_add(1, Ordering::SeqCst) == 0
    }

    #[robust(retries = 1, backoff = none)]
    async fn name(&self, early: bool) -> io::Result<&str> {
        tokio::task::yield_now().await;
        if self.first() {
            return Err(ErrorKind::ConnectionReset.into());
        }
        if early {
            return Ok(&self.name);
        }
        Ok(&self.name)
    }

    #[robust(retries = 1, backoff = none, timeout = "1s")]
    async fn bytes(&self) -> io::Result<&[u8]> {
        tokio::task::yield_now().await;
        if self.first() {
            return Err(ErrorKind::ConnectionReset.into());
        }
        Ok(&self.bytes)
    }

    #[robust(retries = 1, backoff = none, hedge(after = "1s", max = 1))]
    async fn hedged(&self) -> io::Result<&str> {
        tokio::task::yield_now().await;
        // (A closure's `return` is its own.)
        let len = |s: &String| -> usize {
            if s.is_empty() {
                return 0;
            }
            s.len()
        };
        if self.first() || len(&self.name) == 0 {
            return Err(ErrorKind::ConnectionReset.into());
        }
        Ok(&self.name)
    }
}

#[robust(retries = 1, backoff = none, timeout = "1s")]
async fn store(calls: &AtomicU32, boxed: bool) -> io::Result<Box<dyn Store>> {
    tokio::task::yield_now().await;
    if calls.fetch_add(1, Ordering::SeqCst) == 0 {
        return Err(ErrorKind::ConnectionReset.into());
    }
    if boxed {
        return Ok(Box::new(Mem(1)));
    }
    Ok(Box::new(Mem(2)))
}

/// Returns the value through a macro's `return` (the coercion holds there too).
macro_rules! give {
    ($v:expr) => {
        return Ok($v)
    };
}

#[robust(retries = 1, backoff = none)]
async fn shared(calls: &AtomicU32) -> io::Result<Arc<dyn Store>> {
    tokio::task::yield_now().await;
    if calls.fetch_add(1, Ordering::SeqCst) == 0 {
        return Err(ErrorKind::ConnectionReset.into());
    }
    // An item of the body's own named as a type of the return type's: the return type is
    // still `io::Result<Arc<dyn Store>>`.
    #[allow(dead_code)]
    struct Arc;
    give!(std::sync::Arc::new(Mem(3)));
}

#[robust(retries = 1, backoff = none, timeout = "1s")]
async fn boxed_error(calls: &AtomicU32) -> Result<u32, Box<dyn std::error::Error + Send + Sync>> {
    tokio::task::yield_now().await;
    if calls.fetch_add(1, Ordering::SeqCst) < 2 {
        return Err(Box::new(io::Error::from(ErrorKind::ConnectionReset)));
    }
    Ok(4)
}

#[tokio::test(start_paused = true)]
async fn returns_and_tails_coerce_into_the_return_type() {
    let named = || Named {
        name: "robust".into(),
        bytes: [1, 2, 3],
        calls: AtomicU32::new(0),
    };
    for early in [true, false] {
        let n = named();
        assert_eq!(n.name(early).await.unwrap(), "robust");
        assert_eq!(n.calls.load(Ordering::SeqCst), 2);
    }
    let n = named();
    assert_eq!(n.bytes().await.unwrap(), &[1, 2, 3][..]);
    assert_eq!(n.calls.load(Ordering::SeqCst), 2);
    let n = named();
    assert_eq!(n.hedged().await.unwrap(), "robust");
    assert_eq!(n.calls.load(Ordering::SeqCst), 2);
    for (boxed, size) in [(true, 1), (false, 2)] {
        let calls = AtomicU32::new(0);
        assert_eq!(store(&calls, boxed).await.unwrap().size(), size);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
    let calls = AtomicU32::new(0);
    assert_eq!(shared(&calls).await.unwrap().size(), 3);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // Two failures, one retry: the boxed error of the second attempt is returned.
    let calls = AtomicU32::new(0);
    let e = boxed_error(&calls).await.unwrap_err();
    assert_eq!(
        e.downcast_ref::<io::Error>().map(io::Error::kind),
        Some(ErrorKind::ConnectionReset)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// An error (and a value) that is not `Send`: the fn's future is `Send` as it is without the
/// attribute, since neither is held across an `.await` (a backoff's sleep, a fallback's
/// future, a hedge's round), whatever the keys.
mod not_send_results {
    use std::cell::Cell;
    use std::rc::Rc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use retry_runtime::{CircuitBreaker, ConcurrencyLimit, robust};

    type NotSend = Box<dyn std::error::Error>;

    static BREAKER: CircuitBreaker =
        match CircuitBreaker::new(10, 10, 0.5, Duration::from_secs(30), 1) {
            Ok(b) => b,
            Err(_) => panic!(),
        };
    static LIMIT: ConcurrencyLimit = match ConcurrencyLimit::new(4, 4) {
        Ok(l) => l,
        Err(_) => panic!(),
    };

    /// Fails the first `fails` calls, each after a yield.
    async fn attempt(calls: &AtomicU32, fails: u32) -> Result<Rc<u32>, NotSend> {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        tokio::task::yield_now().await;
        if n < fails {
            return Err(format!("failure {n}").into());
        }
        Ok(Rc::new(n))
    }

    fn send<F: Future + Send>(f: F) -> F {
        f
    }

    #[robust(retries = 2, backoff = constant(base = 10ms))]
    async fn plain(calls: &AtomicU32) -> Result<Rc<u32>, NotSend> {
        attempt(calls, 1).await
    }

    #[robust(retries = 2, backoff = constant(base = 10ms), timeout = 1s, max_delay = 1s,
             on_retry = |e, _| assert!(e.is_err()))]
    async fn timed(calls: &AtomicU32) -> Result<Rc<u32>, NotSend> {
        attempt(calls, 1).await
    }

    // (An adaptive timeout measures each attempt's result.)
    #[robust(retries = 2, backoff = constant(base = 10ms),
             timeout = adaptive(p = 99, factor = 2, min = 20ms, max = 2s))]
    async fn measured(calls: &AtomicU32) -> Result<Rc<u32>, NotSend> {
        attempt(calls, 1).await
    }

    #[robust(retries = 2, backoff = constant(base = 10ms), breaker = BREAKER, limit = LIMIT)]
    async fn guarded(calls: &AtomicU32) -> Result<Rc<u32>, NotSend> {
        attempt(calls, 1).await
    }

    // A fallback that returns a `Result`, and one that returns a future (which does not
    // capture the error: one that does is not `Send`).
    #[robust(retries = 1, backoff = constant(base = 10ms),
             fallback = |e| Err(format!("gave up: {e}").into()))]
    async fn fallen_back(calls: &AtomicU32) -> Result<Rc<u32>, NotSend> {
        attempt(calls, 5).await
    }

    #[robust(retries = 1, backoff = constant(base = 10ms),
             fallback = |e| {
                 let text = format!("gave up later: {e}");
                 async move { Err(text.into()) }
             })]
    async fn fallen_back_later(calls: &AtomicU32) -> Result<Rc<u32>, NotSend> {
        attempt(calls, 5).await
    }

    #[robust(retries = 2, backoff = constant(base = 10ms), on = [Ok(|v: &Rc<u32>| **v == 0)])]
    async fn on_values(calls: &AtomicU32) -> Result<Rc<u32>, NotSend> {
        attempt(calls, 0).await
    }

    // A deadline, a limit beside a `max_delay`: the async loop keeps no failure across a wait.
    #[robust(retries = 2, backoff = constant(base = 10ms), deadline = 1s, limit = LIMIT,
             max_delay = 500ms)]
    async fn deadline_and_limit(calls: &AtomicU32) -> Result<Rc<u32>, NotSend> {
        attempt(calls, 1).await
    }

    // Hedging keeps a round's failures while its other attempts run: its future is `Send`
    // only for a `T` and an `E` that are (as documented). Run here without the `Send` check.

    #[robust(retries = 2, backoff = constant(base = 10ms), hedge(after = 5ms, max = 1))]
    async fn hedged(calls: &AtomicU32) -> Result<Rc<u32>, NotSend> {
        attempt(calls, 2).await
    }

    /// `Send` but not `Sync`: a `&mut self` method's attempts borrow it uniquely.
    struct Counter {
        calls: Cell<u32>,
    }

    impl Counter {
        #[robust(retries = 2, backoff = constant(base = 10ms))]
        async fn next(&mut self) -> std::io::Result<u32> {
            let n = self.calls.get();
            self.calls.set(n + 1);
            tokio::task::yield_now().await;
            if n == 0 {
                return Err(std::io::ErrorKind::Other.into());
            }
            Ok(n)
        }

        // The receiver written as a typed `self`.
        #[allow(clippy::needless_arbitrary_self_type, reason = "the form under test")]
        #[robust(retries = 2, backoff = constant(base = 10ms))]
        async fn next_typed(self: &mut Self) -> std::io::Result<u32> {
            self.next_once().await
        }

        async fn next_once(&mut self) -> std::io::Result<u32> {
            let n = self.calls.get();
            self.calls.set(n + 1);
            tokio::task::yield_now().await;
            if n == 0 {
                return Err(std::io::ErrorKind::Other.into());
            }
            Ok(n)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn errors_and_values_that_are_not_send_keep_the_future_send() {
        let calls = AtomicU32::new(0);
        assert_eq!(*send(plain(&calls)).await.unwrap(), 1);
        let calls = AtomicU32::new(0);
        assert_eq!(*send(timed(&calls)).await.unwrap(), 1);
        let calls = AtomicU32::new(0);
        assert_eq!(*send(measured(&calls)).await.unwrap(), 1);
        let calls = AtomicU32::new(0);
        assert_eq!(*send(guarded(&calls)).await.unwrap(), 1);
        let calls = AtomicU32::new(0);
        let e = send(fallen_back(&calls)).await.unwrap_err();
        assert_eq!(e.to_string(), "gave up: failure 1");
        let calls = AtomicU32::new(0);
        let e = send(fallen_back_later(&calls)).await.unwrap_err();
        assert_eq!(e.to_string(), "gave up later: failure 1");
        let calls = AtomicU32::new(0);
        // The first value, 0, is retried.
        assert_eq!(*send(on_values(&calls)).await.unwrap(), 1);

        let calls = AtomicU32::new(0);
        assert_eq!(*send(deadline_and_limit(&calls)).await.unwrap(), 1);
        let calls = AtomicU32::new(0);
        assert_eq!(*hedged(&calls).await.unwrap(), 2);

        let mut counter = Counter {
            calls: Cell::new(0),
        };
        let h = tokio::spawn(async move { counter.next().await.map(|n| (n, counter.calls.get())) });
        assert_eq!(h.await.unwrap().unwrap(), (1, 2));
        let mut counter = Counter {
            calls: Cell::new(0),
        };
        let h = tokio::spawn(async move { counter.next_typed().await });
        assert_eq!(h.await.unwrap().unwrap(), 1);
    }
}

/// A unique borrow in an `Option` or a `Pin` is reborrowed by each attempt (it cannot be
/// cloned), and the fn's future is `Send` as it is without the attribute.
#[robust(retries = 3, backoff = constant(base = 10ms), timeout = 1s)]
async fn fills(out: Option<&mut Vec<u32>>, mut seen: std::pin::Pin<&mut u32>) -> io::Result<usize> {
    *seen += 1;
    tokio::task::yield_now().await;
    let Some(v) = out else {
        return Err(ErrorKind::NotFound.into());
    };
    v.push(*seen);
    if v.len() < 3 {
        return Err(ErrorKind::Other.into());
    }
    Ok(v.len())
}

#[tokio::test(start_paused = true)]
async fn mutable_references_in_an_option_or_a_pin_are_reborrowed_per_attempt() {
    fn send<F: Future + Send>(f: F) -> F {
        f
    }
    let (mut v, mut seen) = (Vec::new(), 0);
    let n = send(fills(Some(&mut v), std::pin::Pin::new(&mut seen))).await;
    assert_eq!(n.unwrap(), 3);
    assert_eq!(v, [1, 2, 3], "each attempt pushed into the caller's vector");
    assert_eq!(seen, 3);
    let mut seen = 0;
    let e = fills(None, std::pin::Pin::new(&mut seen))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert_eq!(seen, 4, "`None` was given to all four attempts");
}

/// About thirty years, tokio's "never": the longest any wait lasts.
const THIRTY_YEARS: Duration = Duration::from_secs(86400 * 365 * 30);

#[robust(retries = 1, backoff = constant(base = 100000000000000s), jitter = none)]
async fn backs_off_for_ages(calls: &AtomicU32) -> io::Result<u32> {
    tokio::task::yield_now().await;
    Err(io::Error::other(
        calls.fetch_add(1, Ordering::SeqCst).to_string(),
    ))
}

#[robust(retries = 1, backoff = constant(base = 1s), jitter = none,
         hint = |_e: &io::Error| Some(Duration::from_secs(100_000_000_000_000)))]
async fn hinted_for_ages(calls: &AtomicU32) -> io::Result<u32> {
    tokio::task::yield_now().await;
    Err(io::Error::other(
        calls.fetch_add(1, Ordering::SeqCst).to_string(),
    ))
}

#[robust(retries = 1, backoff = constant(base = 1s), jitter = none,
         timeout = 999999999999999999s, deadline = 1000000000000000000s)]
async fn hangs_once(calls: &AtomicU32) -> io::Result<u32> {
    if calls.fetch_add(1, Ordering::SeqCst) == 0 {
        std::future::pending::<()>().await;
    }
    Ok(7)
}

// A wait of 10^14 s (or a timeout near the 10^18 s the attribute accepts) lasts thirty years,
// as tokio's `sleep` makes it: on the paused clock it passes at once (it took seconds of CPU
// time, and a timeout of 10^18 s minutes, while the clock crossed it in steps of two years).
#[tokio::test(start_paused = true)]
async fn the_longest_waits_last_thirty_years() {
    type Call<'a> = std::pin::Pin<Box<dyn Future<Output = io::Result<u32>> + 'a>>;
    let (backoff, hint) = (AtomicU32::new(0), AtomicU32::new(0));
    let waits: [(&AtomicU32, Call<'_>); 2] = [
        (&backoff, Box::pin(backs_off_for_ages(&backoff))),
        (&hint, Box::pin(hinted_for_ages(&hint))),
    ];
    for (calls, call) in waits {
        let start = Instant::now();
        let e = call.await.unwrap_err();
        assert_eq!(
            (e.to_string().as_str(), calls.load(Ordering::SeqCst)),
            ("1", 2)
        );
        assert_eq!(start.elapsed(), THIRTY_YEARS);
    }

    let calls = AtomicU32::new(0);
    let start = Instant::now();
    assert_eq!(hangs_once(&calls).await.unwrap(), 7);
    assert_eq!(start.elapsed(), THIRTY_YEARS + Duration::from_secs(1));
}

// A `move` callback that names an owned parameter the body uses too gets a clone of it (the
// attempts still clone the parameter): each callback counts into the same shared counter.
#[robust(retries = 3, backoff = none,
         on_error = move |_e, _n| { seen.fetch_add(1, Ordering::SeqCst); },
         on_success = move || { seen.fetch_add(100, Ordering::SeqCst); },
         on_retry = move |_r, _i| { seen.fetch_add(10, Ordering::SeqCst); })]
async fn counted_by_move_callbacks(seen: Arc<AtomicU32>, failures: u32) -> io::Result<u32> {
    tokio::task::yield_now().await;
    if seen.load(Ordering::SeqCst) % 10 < failures {
        Err(io::Error::other("not yet"))
    } else {
        Ok(seen.load(Ordering::SeqCst))
    }
}

#[tokio::test(start_paused = true)]
async fn move_callbacks_get_a_clone_of_the_parameters_they_name() {
    let seen = Arc::new(AtomicU32::new(0));
    // Two failures (each counted by `on_error` and retried, counted by `on_retry`), then a
    // success, which `on_success` counts.
    let r = counted_by_move_callbacks(Arc::clone(&seen), 2).await;
    assert_eq!(r.unwrap(), 22);
    assert_eq!(seen.load(Ordering::SeqCst), 122);
    // The clones are dropped with the call: only the test's share is left.
    assert_eq!(Arc::strong_count(&seen), 1);
}

//! Hedging (SPEC section 15) on tokio's paused clock: which attempts start when, which are
//! cancelled, what is returned; with guards; after a percentile of measured latencies.

use std::io::{self, ErrorKind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use retry_runtime::hedge::Hedge;
use retry_runtime::latency::Latencies;
use retry_runtime::timeout::Adaptive;
use retry_runtime::{AsyncRetryPolicy, CircuitBreaker, Policy, RetryBudget, robust};
use tokio::time::Instant;

mod common;
use common::*;

/// What a test's attempts did: when each started (ms since the test began), and how each
/// ended ("ok", "err", or "dropped" when cancelled).
#[derive(Default)]
struct Log {
    events: Mutex<Vec<(u32, u64, &'static str)>>,
    next: AtomicU32,
}

impl Log {
    const fn new() -> Self {
        Log {
            events: Mutex::new(Vec::new()),
            next: AtomicU32::new(0),
        }
    }

    fn start(&'static self, t0: Instant) -> Probe {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let at = t0.elapsed().as_millis() as u64;
        self.events.lock().unwrap().push((n, at, "start"));
        Probe {
            log: self,
            n,
            t0,
            done: false,
        }
    }
    fn take(&self) -> Vec<(u32, u64, &'static str)> {
        self.next.store(0, Ordering::SeqCst);
        std::mem::take(&mut *self.events.lock().unwrap())
    }
}

/// Logs how an attempt ended; dropped unfinished, it logs "dropped".
struct Probe {
    log: &'static Log,
    n: u32,
    t0: Instant,
    done: bool,
}

impl Probe {
    fn end(mut self, what: &'static str) -> u32 {
        self.done = true;
        let at = self.t0.elapsed().as_millis() as u64;
        self.log.events.lock().unwrap().push((self.n, at, what));
        self.n
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if !self.done {
            let at = self.t0.elapsed().as_millis() as u64;
            self.log
                .events
                .lock()
                .unwrap()
                .push((self.n, at, "dropped"));
        }
    }
}

/// The attempts' latencies, by attempt number (the last one repeats), and whether each fails.
async fn attempt(log: &'static Log, t0: Instant, plan: &[(u64, bool)]) -> io::Result<u32> {
    let probe = log.start(t0);
    let (wait, fail) = plan[(probe.n as usize).min(plan.len() - 1)];
    tokio::time::sleep(ms(wait)).await;
    if fail {
        probe.end("err");
        Err(ErrorKind::ConnectionReset.into())
    } else {
        Ok(probe.end("ok"))
    }
}

static FIXED: Log = Log::new();

#[robust(hedge(after = 50ms, max = 2), retries = 0)]
async fn fixed(t0: Instant, plan: &[(u64, bool)]) -> io::Result<u32> {
    attempt(&FIXED, t0, plan).await
}

#[tokio::test(start_paused = true)]
async fn a_slow_attempt_is_hedged_and_the_first_success_wins() {
    let t0 = Instant::now();
    // The first attempt takes a second; the hedge started at 50 ms answers at 60 ms.
    let r = fixed(t0, &[(1000, false), (10, false)]).await;
    assert_eq!(r.unwrap(), 1);
    assert_eq!(t0.elapsed(), ms(60));
    assert_eq!(
        FIXED.take(),
        vec![
            (0, 0, "start"),
            (1, 50, "start"),
            (1, 60, "ok"),
            (0, 60, "dropped")
        ]
    );

    // Every attempt slow: hedges at 50 and 100 ms (max = 2), the first to finish wins.
    let t0 = Instant::now();
    let r = fixed(t0, &[(1000, false), (1000, false), (300, false)]).await;
    assert_eq!(r.unwrap(), 2);
    assert_eq!(t0.elapsed(), ms(400));
    let events = FIXED.take();
    assert_eq!(
        &events[..4],
        &[
            (0, 0, "start"),
            (1, 50, "start"),
            (2, 100, "start"),
            (2, 400, "ok")
        ]
    );
    assert_eq!(events.len(), 6, "the two others dropped: {events:?}");

    // A fast attempt: no hedge at all.
    let t0 = Instant::now();
    assert_eq!(fixed(t0, &[(20, false)]).await.unwrap(), 0);
    assert_eq!(FIXED.take(), vec![(0, 0, "start"), (0, 20, "ok")]);
}

static AT_ONCE: Log = Log::new();

// (A rule that retries: a failure its rule never retries, `retries = 0`, wins instead.)
#[robust(hedge(after = 50ms, max = 2), retries = 1)]
async fn at_once(t0: Instant, plan: &[(u64, bool)]) -> io::Result<u32> {
    attempt(&AT_ONCE, t0, plan).await
}

#[tokio::test(start_paused = true)]
async fn a_retryable_failure_starts_the_next_hedge_at_once() {
    let t0 = Instant::now();
    // The first attempt fails at 10 ms: the hedge starts then, not at 50 ms.
    let r = at_once(t0, &[(10, true), (30, false)]).await;
    assert_eq!(r.unwrap(), 1);
    assert_eq!(
        AT_ONCE.take(),
        vec![
            (0, 0, "start"),
            (0, 10, "err"),
            (1, 10, "start"),
            (1, 40, "ok")
        ]
    );
    assert_eq!(t0.elapsed(), ms(40));
}

static BESIDE: Log = Log::new();

#[robust(hedge(after = 50ms, max = 2), retries = 1)]
async fn beside(t0: Instant, plan: &[(u64, bool)]) -> io::Result<u32> {
    attempt(&BESIDE, t0, plan).await
}

/// A retryable failure starts the next hedge at once while other attempts still run too.
#[tokio::test(start_paused = true)]
async fn a_retryable_failure_starts_the_next_hedge_at_once_beside_a_running_attempt() {
    let t0 = Instant::now();
    // The first attempt is slow; the hedge sent at 50 ms fails at 60 ms: the second hedge
    // starts then (it waited for 100 ms before), and answers at 70 ms.
    let r = beside(t0, &[(1000, false), (10, true), (10, false)]).await;
    assert_eq!(r.unwrap(), 2);
    assert_eq!(
        BESIDE.take(),
        vec![
            (0, 0, "start"),
            (1, 50, "start"),
            (1, 60, "err"),
            (2, 60, "start"),
            (2, 70, "ok"),
            (0, 70, "dropped")
        ]
    );
}

/// When each attempt `log` recorded started, in ms, in order (the log is emptied).
fn starts(log: &Log) -> Vec<u64> {
    log.take()
        .into_iter()
        .filter(|e| e.2 == "start")
        .map(|e| e.1)
        .collect()
}

/// The attempts' latencies and outcomes, by attempt number (the last one repeats): `None`
/// succeeds, `Some(kind)` fails with an error of that kind.
async fn attempt_of(
    log: &'static Log,
    t0: Instant,
    plan: &[(u64, Option<ErrorKind>)],
) -> io::Result<u32> {
    let probe = log.start(t0);
    let (wait, fail) = plan[(probe.n as usize).min(plan.len() - 1)];
    tokio::time::sleep(ms(wait)).await;
    match fail {
        Some(kind) => {
            probe.end("err");
            Err(kind.into())
        }
        None => Ok(probe.end("ok")),
    }
}

static ASKED: Log = Log::new();

/// A refused connection asks for a second (as a `Retry-After` would); other errors do not.
#[robust(hedge(after = 50ms, max = 2), retries = 1, backoff = constant(base = 10ms), jitter = none,
         hint = |e: &io::Error| (e.kind() == ErrorKind::ConnectionRefused).then(|| ms(1000)))]
async fn asks_for_a_delay(t0: Instant, plan: &[(u64, Option<ErrorKind>)]) -> io::Result<u32> {
    attempt_of(&ASKED, t0, plan).await
}

/// A failure that asks for its own delay (a hint: the server's `Retry-After`) sends no hedge:
/// not at once, nor when the next one is due; the round waits for what still runs, and that
/// failure decides its backoff, over a later failure that asks for nothing. (Before, the next
/// hedge went out at once, and the round's last failure chose the backoff.)
#[tokio::test(start_paused = true)]
async fn a_failure_that_asks_for_a_delay_stops_the_rounds_hedges() {
    use ErrorKind::{ConnectionRefused, ConnectionReset};
    // Alone: it fails at 10 ms; no hedge at 10 or 50 ms; the retry's round starts at 1010.
    let t0 = Instant::now();
    let r = asks_for_a_delay(t0, &[(10, Some(ConnectionRefused)), (10, None)]).await;
    assert_eq!(r.unwrap(), 1);
    assert_eq!(starts(&ASKED), vec![0, 1010]);
    assert_eq!(t0.elapsed(), ms(1020));

    // Beside a slow attempt: the hedge sent at 50 ms is refused at 60 (no second hedge); the
    // first attempt fails at 200 ms without asking; the refusal's second decides: 1200 ms.
    let t0 = Instant::now();
    let plan = [
        (200, Some(ConnectionReset)),
        (10, Some(ConnectionRefused)),
        (10, None),
    ];
    let r = asks_for_a_delay(t0, &plan).await;
    assert_eq!(r.unwrap(), 2);
    assert_eq!(starts(&ASKED), vec![0, 50, 1200]);
    assert_eq!(t0.elapsed(), ms(1210));

    // A failure that asks for nothing still starts the next hedge at once.
    let t0 = Instant::now();
    let r = asks_for_a_delay(t0, &[(10, Some(ConnectionReset)), (10, None)]).await;
    assert_eq!(r.unwrap(), 1);
    assert_eq!(starts(&ASKED), vec![0, 10]);
}

static SPENT: Log = Log::new();

/// A refused connection asks for a second; its rule has one retry. In the second round it has
/// no retry left: it cannot decide a backoff, so it is one more failure of the round.
#[robust(hedge(after = 50ms, max = 2), retries = 3, backoff = constant(base = 10ms), jitter = none,
         when(Io(ConnectionRefused), retries = 1),
         hint = |e: &io::Error| (e.kind() == ErrorKind::ConnectionRefused).then(|| ms(1000)))]
async fn asks_with_no_retry_left(
    t0: Instant,
    plan: &[(u64, Option<ErrorKind>)],
) -> io::Result<u32> {
    attempt_of(&SPENT, t0, plan).await
}

static PAST_MAX_DELAY: Log = Log::new();

/// The same with a delay its rule's `max_delay` leaves no time for.
#[robust(hedge(after = 50ms, max = 2), retries = 3, backoff = constant(base = 10ms), jitter = none,
         when(Io(ConnectionRefused), max_delay = 500ms),
         hint = |e: &io::Error| (e.kind() == ErrorKind::ConnectionRefused).then(|| ms(1000)))]
async fn asks_past_max_delay(t0: Instant, plan: &[(u64, Option<ErrorKind>)]) -> io::Result<u32> {
    attempt_of(&PAST_MAX_DELAY, t0, plan).await
}

/// A failure that asks for a delay the loop would not wait (its rule has no retry left, or the
/// delay would pass its `max_delay`) does not stop the round's hedges: the next goes out at
/// once and answers. (Before, it stopped them, and decided the round: the call ended with it
/// at 10 ms.)
#[tokio::test(start_paused = true)]
async fn a_failure_that_asks_for_a_delay_it_cannot_wait_does_not_stop_the_hedges() {
    let refused = (10, Some(ErrorKind::ConnectionRefused));
    let t0 = Instant::now();
    let r = asks_past_max_delay(t0, &[refused, (10, None)]).await;
    assert_eq!(r.unwrap(), 1);
    assert_eq!(starts(&PAST_MAX_DELAY), vec![0, 10]);
    assert_eq!(t0.elapsed(), ms(20));

    // The first refusal's delay is waited (its rule has a retry left: the round ends, and the
    // next starts 1 s later); the second's is not, and the next hedge goes out at once.
    let t0 = Instant::now();
    let r = asks_with_no_retry_left(t0, &[refused, refused, (10, None)]).await;
    assert_eq!(r.unwrap(), 2);
    assert_eq!(starts(&SPENT), vec![0, 1010, 1020]);
    assert_eq!(t0.elapsed(), ms(1030));
}

/// Breakers that show how many failures a round records: `KEPT_EXACT` opens at three failures
/// of three or more calls (not at two failures and a success), `KEPT_TWO` at two failures.
static KEPT_EXACT: CircuitBreaker =
    match CircuitBreaker::new(10, 3, 0.7, Duration::from_secs(30), 1) {
        Ok(b) => b,
        Err(_) => panic!(),
    };
static KEPT_TWO: CircuitBreaker = match CircuitBreaker::new(10, 2, 0.5, Duration::from_secs(30), 1)
{
    Ok(b) => b,
    Err(_) => panic!(),
};
static KEPT_EXACT_LOG: Log = Log::new();
static KEPT_TWO_LOG: Log = Log::new();

#[robust(hedge(after = 50ms, max = 2), retries = 1, backoff = constant(base = 10ms), jitter = none,
         breaker = KEPT_EXACT,
         hint = |e: &io::Error| (e.kind() == ErrorKind::ConnectionRefused).then(|| ms(1000)))]
async fn kept_exact(t0: Instant, plan: &[(u64, Option<ErrorKind>)]) -> io::Result<u32> {
    attempt_of(&KEPT_EXACT_LOG, t0, plan).await
}

#[robust(hedge(after = 50ms, max = 2), retries = 1, backoff = constant(base = 10ms), jitter = none,
         breaker = KEPT_TWO,
         hint = |e: &io::Error| (e.kind() == ErrorKind::ConnectionRefused).then(|| ms(1000)))]
async fn kept_two(t0: Instant, plan: &[(u64, Option<ErrorKind>)]) -> io::Result<u32> {
    attempt_of(&KEPT_TWO_LOG, t0, plan).await
}

/// A round that keeps a failure asking for a delay over a later one that does not records
/// each once with the breaker: the later one when it comes, the kept one when the round is
/// settled. The hedge sent at 50 ms is refused at 60 ms (asking for a second); the first
/// attempt fails at 200 ms without asking; the retry, at 1200 ms, succeeds.
#[tokio::test(start_paused = true)]
async fn a_round_that_keeps_a_hinted_failure_records_each_failure_once() {
    use ErrorKind::{ConnectionRefused, ConnectionReset};
    let plan = [
        (200, Some(ConnectionReset)),
        (10, Some(ConnectionRefused)),
        (10, None),
    ];
    // Two failures and a success: recorded more than once, a failure would open it.
    let t0 = Instant::now();
    assert_eq!(kept_exact(t0, &plan).await.unwrap(), 2);
    assert_eq!(t0.elapsed(), ms(1210));
    assert_eq!(KEPT_EXACT.state(), retry_runtime::BreakerState::Closed);
    // Two failures open this one before the retry, which it rejects when it starts
    // (`E::from(Open)`). With either failure not recorded, it would have stayed closed, and
    // the retry would have succeeded.
    let t0 = Instant::now();
    let r = kept_two(t0, &plan).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::Other);
    assert_eq!(KEPT_TWO.state(), retry_runtime::BreakerState::Open);
    assert_eq!(
        starts(&KEPT_TWO_LOG).len(),
        2,
        "the first attempt and the hedge; no retry"
    );
}

static CUT: Log = Log::new();

#[robust(hedge(after = 200ms, max = 3), deadline = 500ms, retries = 0)]
async fn under_a_deadline(t0: Instant, plan: &[(u64, bool)]) -> io::Result<u32> {
    attempt(&CUT, t0, plan).await
}

/// No hedge is sent once the call's deadline has passed: the attempts started at 0, 200 and
/// 400 ms are cut at 500 ms, and the call ends with `Elapsed` then. (Before, the third hedge
/// was sent at 500 ms, with no time at all, to be cut at once.)
#[tokio::test(start_paused = true)]
async fn no_hedge_is_sent_after_the_deadline() {
    let t0 = Instant::now();
    let r = under_a_deadline(t0, &[(1000, false)]).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    assert_eq!(t0.elapsed(), ms(500));
    let starts = starts(&CUT);
    assert_eq!(starts, vec![0, 200, 400]);
}

static ROUNDS: Log = Log::new();
static ROUND_RETRIES: AtomicU32 = AtomicU32::new(0);

#[robust(hedge(after = 50ms, max = 1), retries = 1, backoff = constant(base = 1s), jitter = none,
         on_retry = |_, _| { ROUND_RETRIES.fetch_add(1, Ordering::SeqCst); })]
async fn rounds(t0: Instant, plan: &[(u64, bool)]) -> io::Result<u32> {
    attempt(&ROUNDS, t0, plan).await
}

#[tokio::test(start_paused = true)]
async fn a_round_of_failures_is_one_failed_attempt() {
    let t0 = Instant::now();
    // Both attempts of each round fail; one retry (one round more) after a one-second backoff.
    let r = rounds(t0, &[(100, true)]).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionReset);
    let starts = starts(&ROUNDS);
    // Round 1: 0 and 50 ms (the hedge); the first fails at 100, the hedge at 150: the round
    // is over at 150, backs off a second. Round 2: 1150 and 1200.
    assert_eq!(starts, vec![0, 50, 1150, 1200]);
    assert_eq!(t0.elapsed(), ms(1300));
    assert_eq!(
        ROUND_RETRIES.load(Ordering::SeqCst),
        1,
        "on_retry once per round"
    );
}

static FATAL: Log = Log::new();

#[robust(hedge(after = 20ms), on = [Io(ConnectionReset)], retries = 3)]
async fn fatal(t0: Instant) -> io::Result<u32> {
    let probe = FATAL.start(t0);
    let n = probe.n;
    tokio::time::sleep(ms(if n == 0 { 1000 } else { 10 })).await;
    probe.end("err");
    // The hedge fails with an error no rule retries: it wins, the first attempt is dropped.
    Err(ErrorKind::PermissionDenied.into())
}

#[tokio::test(start_paused = true)]
async fn an_error_no_rule_retries_wins_too() {
    let t0 = Instant::now();
    let r = fatal(t0).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::PermissionDenied);
    assert_eq!(t0.elapsed(), ms(30));
    assert_eq!(
        FATAL.take(),
        vec![
            (0, 0, "start"),
            (1, 20, "start"),
            (1, 30, "err"),
            (0, 30, "dropped")
        ]
    );
}

static TIMED: Log = Log::new();

// (Two rounds: a timeout its rule never retries, `retries = 0`, would win the first.)
#[robust(hedge(after = 50ms, max = 1), timeout = 80ms, retries = 1, backoff = none)]
async fn timed(t0: Instant) -> io::Result<u32> {
    let probe = TIMED.start(t0);
    tokio::time::sleep(secs(10)).await;
    Ok(probe.end("ok"))
}

#[tokio::test(start_paused = true)]
async fn each_attempt_has_its_own_timeout() {
    let t0 = Instant::now();
    let r = timed(t0).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut);
    // The first attempt is cut at 80 ms, the hedge (started at 50 ms) at 130 ms; the second
    // round, at once, alike (its rule has no retry left: its failures do not end it).
    assert_eq!(t0.elapsed(), ms(260));
    assert_eq!(
        TIMED.take(),
        vec![
            (0, 0, "start"),
            (1, 50, "start"),
            (0, 80, "dropped"),
            (1, 130, "dropped"),
            (2, 130, "start"),
            (3, 180, "start"),
            (2, 210, "dropped"),
            (3, 260, "dropped")
        ]
    );
}

static EMPTY: RetryBudget = match RetryBudget::new(1.0, 0.0, 1.0) {
    Ok(b) => b,
    Err(_) => panic!(),
};
static BUDGETED: Log = Log::new();

#[robust(hedge(after = 50ms, max = 3), budget = EMPTY, retries = 0)]
async fn budgeted(t0: Instant) -> io::Result<u32> {
    attempt(&BUDGETED, t0, &[(500, false)]).await
}

#[tokio::test(start_paused = true)]
async fn hedges_spend_the_retry_budget() {
    // One token: one hedge, then none.
    let t0 = Instant::now();
    assert!(budgeted(t0).await.is_ok());
    let starts = BUDGETED.take().iter().filter(|e| e.2 == "start").count();
    assert_eq!(starts, 2, "the first attempt and one hedge");
    assert!(EMPTY.tokens() < 0.001);
    // The budget is empty: no hedge at all now.
    let t0 = Instant::now();
    assert!(budgeted(t0).await.is_ok());
    assert_eq!(BUDGETED.take().iter().filter(|e| e.2 == "start").count(), 1);
    assert_eq!(t0.elapsed(), ms(500));
}

static BREAKER: CircuitBreaker = match CircuitBreaker::new(4, 4, 0.5, Duration::from_secs(30), 1) {
    Ok(b) => b,
    Err(_) => panic!(),
};

// (A rule that retries: with `retries = 0`, the first failure would win, and the three
// hedges still running would be dropped, their permits given back unrecorded.)
#[robust(hedge(after = 10ms, max = 3), breaker = BREAKER, retries = 1)]
async fn broken() -> io::Result<u32> {
    tokio::time::sleep(ms(100)).await;
    Err(ErrorKind::ConnectionReset.into())
}

#[tokio::test(start_paused = true)]
async fn the_breaker_records_every_attempt_of_a_round() {
    // One round: four attempts (the first and three hedges), four failures: the breaker's
    // window of four is full of failures and it opens (the second round is refused).
    assert!(broken().await.is_err());
    assert_eq!(BREAKER.state(), retry_runtime::BreakerState::Open);
}

static LATENCIES_LOG: Log = Log::new();

#[robust(hedge(after = p90, max = 1), retries = 0)]
async fn by_percentile(t0: Instant, wait: u64) -> io::Result<u32> {
    let probe = LATENCIES_LOG.start(t0);
    let n = probe.n;
    // The first attempt of a call waits `wait`, a hedge 5 ms.
    tokio::time::sleep(ms(if n == 0 { wait } else { 5 })).await;
    Ok(probe.end("ok"))
}

#[tokio::test(start_paused = true)]
async fn after_a_percentile_no_hedge_until_enough_samples() {
    // p90 needs 50 samples, and the cached percentile is recomputed every 64: the first 64
    // calls (1 s each) are never hedged.
    for _ in 0..64 {
        let t0 = Instant::now();
        assert_eq!(by_percentile(t0, 1000).await.unwrap(), 0);
        assert_eq!(t0.elapsed(), secs(1));
        assert_eq!(LATENCIES_LOG.take().len(), 2, "one attempt, not hedged");
    }
    // Now p90 is 1 s (within its bucket, 6.25%): a call that would take 5 s is hedged then.
    let t0 = Instant::now();
    let r = by_percentile(t0, 5000).await.unwrap();
    assert_eq!(r, 1, "the hedge answered");
    let events = LATENCIES_LOG.take();
    let hedge_at = events
        .iter()
        .find(|e| e.0 == 1 && e.2 == "start")
        .unwrap()
        .1;
    assert!((1000..=1063).contains(&hedge_at), "hedged at {hedge_at} ms");
    assert_eq!(t0.elapsed(), ms(hedge_at + 5));
}

#[tokio::test(start_paused = true)]
async fn the_hedge_delay_follows_the_measured_percentile() {
    // 200 latencies of 1..=100 ms: p95 is 95 ms.
    let t0 = Instant::now();
    static L: Latencies = Latencies::new();
    for i in 0..200u64 {
        L.record(ms(1 + (i * 37) % 100));
    }
    let policy = Policy::builder()
        .retries(0)
        .hedge(Hedge::percentile(&L, 95.0, 1).unwrap())
        .build()
        .unwrap();
    let started = Mutex::new(Vec::new());
    let r: io::Result<u64> = policy
        .call_async(|_| async {
            let at = t0.elapsed().as_millis() as u64;
            started.lock().unwrap().push(at);
            let first = started.lock().unwrap().len() == 1;
            tokio::time::sleep(if first { secs(10) } else { ms(1) }).await;
            Ok(at)
        })
        .await;
    let hedge_at = r.unwrap();
    // p95 of 1..=100 ms is 95 ms, reported within its bucket (6.25% above).
    assert!((95..=101).contains(&hedge_at), "hedged at {hedge_at} ms");
}

struct Client {
    calls: AtomicU32,
}

impl Client {
    #[robust(hedge(after = 50ms), retries = 0)]
    async fn get(&self, path: String, tag: &str) -> io::Result<String> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(ms(if n == 0 { 1000 } else { 1 })).await;
        Ok(format!("{path}{tag}{n}"))
    }
}

#[tokio::test(start_paused = true)]
async fn methods_and_owned_arguments_are_hedged() {
    let c = Client {
        calls: AtomicU32::new(0),
    };
    // Each attempt gets its own clone of `path`.
    let r = c.get("/a".to_owned(), "#").await.unwrap();
    assert_eq!(r, "/a#1");
    assert_eq!(c.calls.load(Ordering::SeqCst), 2);
}

#[robust(hedge(after = 50ms), retries = 1, backoff = none, timeout = 500ms, attempt = ctx)]
async fn sees_its_attempt(log: &Mutex<Vec<(u32, Duration)>>) -> io::Result<()> {
    log.lock()
        .unwrap()
        .push((ctx.retries(), ctx.timeout().unwrap_or_default()));
    tokio::time::sleep(ms(100)).await;
    if ctx.retries() == 0 {
        return Err(ErrorKind::ConnectionReset.into());
    }
    Ok(())
}

/// Every attempt of a round sees the round's retry count and its own timeout: the first round
/// (an attempt and its hedge at 50 ms) fails, and both attempts of the second see 1.
#[tokio::test(start_paused = true)]
async fn hedges_share_the_rounds_retry_count() {
    let log = Mutex::new(Vec::new());
    sees_its_attempt(&log).await.unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        vec![(0, ms(500)), (0, ms(500)), (1, ms(500)), (1, ms(500))]
    );
}

#[tokio::test(start_paused = true)]
async fn the_builder_hedges_call_async() {
    let policy = Policy::builder()
        .retries(0)
        .hedge(Hedge::after(ms(30), 2).unwrap())
        .build()
        .unwrap();
    let calls = AtomicU32::new(0);
    let t0 = Instant::now();
    let r: io::Result<u32> = policy
        .call_async(|_| async {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(ms(if n < 2 { 1000 } else { 5 })).await;
            Ok(n)
        })
        .await;
    assert_eq!(r.unwrap(), 2);
    assert_eq!(t0.elapsed(), ms(65));
}

/// The builder's order does not matter: a timeout set after a hedge and a deadline (which
/// once replaced the hedge with the timeout) still hedges, and each order cuts attempts alike.
#[tokio::test(start_paused = true)]
async fn the_builder_keeps_the_hedge_whatever_the_order_of_timeout_and_deadline() {
    let hedge = || Hedge::after(ms(30), 1).unwrap();
    // (A rule that retries, once at once: a timeout its rule never retries would win its round,
    // and drop the hedge before its own timeout cuts it.)
    let b = || {
        Policy::builder()
            .retries(1)
            .backoff(retry_runtime::NoBackoff)
    };
    let p = b().hedge(hedge()).deadline(ms(900)).timeout(ms(400));
    hedges_and_times_out("hedge, deadline, timeout", p.build().unwrap()).await;
    let p = b().deadline(ms(900)).hedge(hedge()).timeout(ms(400));
    hedges_and_times_out("deadline, hedge, timeout", p.build().unwrap()).await;
    let p = b().timeout(ms(400)).deadline(ms(900)).hedge(hedge());
    hedges_and_times_out("timeout, deadline, hedge", p.build().unwrap()).await;
}

/// A hedge due no sooner than the attempt is cut would never run beside it: the builder
/// refuses it, in any order, against a timeout, an adaptive timeout's `max` and a deadline.
#[test]
fn the_builder_refuses_a_hedge_due_after_the_attempt_is_cut() {
    static LATENCIES: Latencies = Latencies::new();
    let hedge = |ms_: u64| Hedge::after(ms(ms_), 1).unwrap();
    let adaptive = || Adaptive::new(&LATENCIES, 99.0, 2.0, ms(10), ms(300)).unwrap();
    let refused = [
        Policy::builder()
            .hedge(hedge(400))
            .timeout(ms(400))
            .build()
            .err(),
        Policy::builder()
            .timeout(ms(400))
            .hedge(hedge(500))
            .build()
            .err(),
        Policy::builder()
            .hedge(hedge(300))
            .adaptive_timeout(adaptive())
            .build()
            .err(),
        Policy::builder()
            .hedge(hedge(250))
            .deadline(ms(200))
            .build()
            .err(),
        Policy::builder()
            .deadline(ms(200))
            .timeout(ms(900))
            .hedge(hedge(250))
            .build()
            .err(),
    ];
    refused_for(refused.into_iter().map(|e| (e, "hedge")));
    // Due before every cut: accepted.
    assert!(
        Policy::builder()
            .hedge(hedge(399))
            .timeout(ms(400))
            .deadline(ms(900))
            .build()
            .is_ok()
    );
    assert!(
        Policy::builder()
            .hedge(hedge(299))
            .adaptive_timeout(adaptive())
            .build()
            .is_ok()
    );
    let by_percentile = Hedge::percentile(&LATENCIES, 95.0, 1).unwrap();
    assert!(
        Policy::builder()
            .hedge(by_percentile)
            .timeout(ms(1))
            .build()
            .is_ok()
    );
}

async fn hedges_and_times_out<P: AsyncRetryPolicy<u32, io::Error>>(order: &str, policy: P) {
    // The first attempt hangs; the hedge at 30 ms answers after 5 ms.
    let calls = AtomicU32::new(0);
    let t0 = Instant::now();
    let r = policy
        .call_async(|_| async {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(ms(if n == 0 { 10_000 } else { 5 })).await;
            Ok(n)
        })
        .await;
    assert_eq!((order, r.unwrap(), t0.elapsed()), (order, 1, ms(35)));
    // Every attempt hangs: each is cut by its own timeout, before the deadline: at 400 and
    // 430 ms, then, in the second round (at once), at 830 and 860 ms.
    let t0 = Instant::now();
    let r = policy
        .call_async(|_| async {
            tokio::time::sleep(ms(10_000)).await;
            Ok(0)
        })
        .await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::TimedOut, "{order}");
    assert_eq!((order, t0.elapsed()), (order, ms(860)));
}

/// Many concurrent hedged calls on a multi-threaded runtime (real time: tokio's clock cannot
/// be paused there): each call's first attempt hangs, its hedge, 1 ms later, answers at once
/// with the call's own value, and the hung attempt is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_tasks_hedge_at_once() {
    #[robust(hedge(after = 1ms, max = 2), retries = 0)]
    async fn echo(i: u32, attempts: &AtomicU32) -> io::Result<u32> {
        if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
            tokio::time::sleep(secs(60)).await;
        }
        tokio::task::yield_now().await;
        Ok(i)
    }
    let start = std::time::Instant::now();
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            tokio::spawn(async move {
                let attempts = AtomicU32::new(0);
                let r = echo(i, &attempts).await;
                (r, attempts.load(Ordering::SeqCst))
            })
        })
        .collect();
    for (i, t) in tasks.into_iter().enumerate() {
        let (r, attempts) = t.await.unwrap();
        assert_eq!((r.unwrap(), attempts), (i as u32, 2));
    }
    assert!(
        start.elapsed() < secs(30),
        "no call waited for its hung attempt"
    );
}

/// A hedge needs a free slot of the concurrency limit (it does not queue for one), and none is
/// sent while the adaptive throttle's rejection probability is above zero.
#[tokio::test(start_paused = true)]
async fn a_hedge_needs_a_free_slot_and_a_throttle_that_rejects_nothing() {
    use retry_runtime::{AdaptiveThrottle, ConcurrencyLimit};
    /// One call whose attempts each take 100 ms: how many attempts ran.
    async fn attempts_of<P: retry_runtime::AsyncRetryPolicy<u32, io::Error>>(policy: &P) -> u32 {
        let n = AtomicU32::new(0);
        let t0 = Instant::now();
        let r = policy
            .call_async(|_| async {
                n.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(ms(100)).await;
                Ok(7)
            })
            .await;
        assert_eq!((r.unwrap(), t0.elapsed()), (7, ms(100)));
        n.load(Ordering::SeqCst)
    }
    let hedged = || {
        Policy::builder()
            .retries(0)
            .hedge(Hedge::after(ms(10), 1).unwrap())
            .seed(7)
    };
    // Two slots, one held by another caller: the attempt takes the other, and its hedge
    // finds none. (A limit of one slot beside a hedge is refused by `build`.)
    let two = ConcurrencyLimit::new(2, 4).unwrap();
    let other = two.try_acquire().expect("a free slot");
    assert_eq!(attempts_of(&hedged().limit(&two).build().unwrap()).await, 1);
    drop(other);
    assert_eq!(attempts_of(&hedged().limit(&two).build().unwrap()).await, 2);
    let one = ConcurrencyLimit::new(1, 4).unwrap();
    let e = hedged().limit(&one).build().unwrap_err();
    assert_eq!(e.parameter(), "hedge", "{e}");
    // Set in the other order, the same.
    let e = Policy::builder()
        .limit(&one)
        .retries(0)
        .hedge(Hedge::after(ms(10), 1).unwrap())
        .build()
        .unwrap_err();
    assert_eq!(e.parameter(), "hedge", "{e}");

    let quiet = AdaptiveThrottle::new(2.0, secs(60)).unwrap();
    let wary = AdaptiveThrottle::new(2.0, secs(60)).unwrap();
    // 21 requests, 10 accepted: (21 - 2·10) / 22, about 4.5%, which this seed's draw admits.
    let now = Instant::now().into_std();
    for i in 0..21 {
        wary.record(now, i < 10);
    }
    assert!(wary.reject_probability(now) > 0.0);
    assert_eq!(
        attempts_of(&hedged().throttle(&quiet).build().unwrap()).await,
        2
    );
    assert_eq!(
        attempts_of(&hedged().throttle(&wary).build().unwrap()).await,
        1
    );
}

static UNKNOWN: Log = Log::new();

#[robust(hedge(after = p99, max = 2), retries = 1, backoff = none)]
async fn unknown_percentile(t0: Instant) -> io::Result<u32> {
    attempt(&UNKNOWN, t0, &[(10, true)]).await
}

#[tokio::test(start_paused = true)]
async fn no_hedge_at_all_until_the_percentile_is_known_even_after_a_failure() {
    // Every attempt fails (nothing is recorded): each round is its attempt alone.
    let t0 = Instant::now();
    assert!(unknown_percentile(t0).await.is_err());
    let starts = starts(&UNKNOWN);
    assert_eq!(starts, vec![0, 10]);
}

/// A hedge the budget refuses gives back the breaker's permit it took: half-open with two
/// probes, the round's first attempt is one, the refused hedge's probe goes to the next call.
#[tokio::test(start_paused = true)]
async fn a_hedge_the_budget_refuses_gives_back_its_probe() {
    use retry_runtime::BreakerState;

    let breaker = CircuitBreaker::new(2, 1, 0.5, Duration::from_secs(10), 2).unwrap();
    let budget = RetryBudget::new(1.0, 0.0, 1.0).unwrap();
    assert!(budget.try_withdraw(), "emptied: no hedge is paid for");
    breaker.record(tokio::time::Instant::now().into_std(), false);
    assert_eq!(breaker.state(), BreakerState::Open);
    tokio::time::advance(Duration::from_secs(11)).await;
    let policy = Policy::builder()
        .retries(0)
        .breaker(&breaker)
        .budget(&budget)
        .hedge(Hedge::after(ms(10), 1).unwrap())
        .build()
        .unwrap();
    let slow_ok = || async {
        tokio::time::sleep(ms(50)).await;
        Ok::<u32, io::Error>(1)
    };
    // One probe answers; the hedge at 10 ms took the second, then found the budget empty.
    assert_eq!(policy.call_async(|_| slow_ok()).await.unwrap(), 1);
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    // The second probe is free again: admitted, and its success closes the breaker.
    assert_eq!(policy.call_async(|_| slow_ok()).await.unwrap(), 1);
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// A round dropped while a failure is kept (its first attempt failed at 20 ms while its hedge,
/// sent at 10 ms, still ran) records that failure with the breaker: a breaker that opens on one
/// failure is open after the call is dropped at 30 ms. (The failure's permit was given back
/// instead, as if the attempt had never ended: the breaker stayed closed.)
#[tokio::test(start_paused = true)]
async fn a_dropped_round_records_the_failure_it_kept() {
    use retry_runtime::BreakerState;

    let breaker = CircuitBreaker::new(1, 1, 1.0, Duration::from_secs(10), 1).unwrap();
    // (A rule that retries: with `retries(0)` the failure would win at 20 ms.)
    let policy = Policy::builder()
        .retries(1)
        .breaker(&breaker)
        .hedge(Hedge::after(ms(10), 1).unwrap())
        .build()
        .unwrap();
    let sent = AtomicU32::new(0);
    let call = policy.call_async(|_| async {
        if sent.fetch_add(1, Ordering::SeqCst) == 0 {
            tokio::time::sleep(ms(20)).await;
            Err::<u32, io::Error>(ErrorKind::ConnectionReset.into())
        } else {
            tokio::time::sleep(secs(10)).await;
            Ok(1)
        }
    });
    assert!(tokio::time::timeout(ms(30), call).await.is_err(), "dropped");
    assert_eq!(sent.load(Ordering::SeqCst), 2, "the hedge was sent");
    assert_eq!(breaker.state(), BreakerState::Open);
}

/// A half-open breaker with two probes: a call's first attempt and its hedge each take one.
/// The first attempt wins and the hedge is cancelled: its probe goes back, so the next call
/// probes (and closes the breaker) instead of being rejected until the probes go stale.
#[tokio::test(start_paused = true)]
async fn a_cancelled_hedge_gives_back_its_probe() {
    use retry_runtime::BreakerState;

    let breaker = CircuitBreaker::new(2, 1, 0.5, Duration::from_secs(10), 2).unwrap();
    let budget = RetryBudget::new(10.0, 0.0, 1.0).unwrap();
    breaker.record(tokio::time::Instant::now().into_std(), false);
    assert_eq!(breaker.state(), BreakerState::Open);
    tokio::time::advance(Duration::from_secs(11)).await;
    let policy = Policy::builder()
        .retries(0)
        .breaker(&breaker)
        .budget(&budget)
        .hedge(Hedge::after(ms(10), 1).unwrap())
        .build()
        .unwrap();
    let sent = AtomicU32::new(0);
    let slow_ok = || async {
        sent.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(ms(50)).await;
        Ok::<u32, io::Error>(1)
    };
    // The first attempt answers at 50 ms; the hedge, sent at 10 ms, is cancelled then.
    assert_eq!(policy.call_async(|_| slow_ok()).await.unwrap(), 1);
    assert_eq!(sent.load(Ordering::SeqCst), 2, "the hedge was sent");
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    // The hedge's probe is free again: the next call is admitted and closes the breaker.
    let r = policy
        .call_async(|_| async { Ok::<u32, io::Error>(2) })
        .await;
    assert_eq!(r.unwrap(), 2);
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// A hedge that fails frees its slot of the concurrency limit before the next hedge asks for
/// one: with one slot free (of two, another caller holding the other), a first attempt and
/// two hedges that each fail after 10 ms run one after the other (at 0, 10 and 20 ms), and
/// the round ends at 30 ms after three attempts; the second round (its rule's one retry, with
/// no backoff) alike. (The failed hedge kept its slot until after the next was refused it:
/// two attempts.) A hedge cut by its timeout frees it too: attempts of 60 ms under a 15 ms
/// timeout, hedged after 12 ms (the hedge due at 12 ms finds no slot; each cut starts the
/// next) run at 0, 15 and 30 ms, and the second round's at 45, 60 and 75 ms.
#[tokio::test(start_paused = true)]
async fn a_failed_hedge_frees_its_slot_for_the_next() {
    use retry_runtime::ConcurrencyLimit;
    for (runs, timeout, after) in [(ms(10), None, ms(50)), (ms(60), Some(ms(15)), ms(12))] {
        let two = ConcurrencyLimit::new(2, 4).unwrap();
        let other = two.try_acquire().expect("a free slot");
        let builder = Policy::builder()
            .retries(1)
            .backoff(retry_runtime::NoBackoff)
            .hedge(Hedge::after(after, 2).unwrap())
            .limit(&two);
        let starts = Mutex::new(Vec::new());
        let t0 = Instant::now();
        let attempt = |_| async {
            starts.lock().unwrap().push(t0.elapsed());
            tokio::time::sleep(runs).await;
            Err::<u32, _>(io::Error::from(ErrorKind::ConnectionReset))
        };
        let r = match timeout {
            None => builder.build().unwrap().call_async(attempt).await,
            Some(t) => {
                builder
                    .timeout(t)
                    .build()
                    .unwrap()
                    .call_async(attempt)
                    .await
            }
        };
        let step = timeout.unwrap_or(runs);
        assert!(r.is_err());
        let expected: Vec<Duration> = (0..6).map(|i| step * i).collect();
        assert_eq!(*starts.lock().unwrap(), expected, "timeout {timeout:?}");
        assert_eq!(t0.elapsed(), step * 6, "timeout {timeout:?}");
        assert_eq!(two.in_flight(), 1, "the other caller's slot only");
        drop(other);
    }
}

/// A rule of the user's that panics while a hedged round classifies an outcome gives that
/// attempt's breaker probe back as the call unwinds: the next call probes and closes the
/// breaker. (The permit was a local of the round then, and stayed taken until it went stale.)
#[tokio::test(start_paused = true)]
async fn a_panicking_rule_in_a_hedged_round_gives_its_probe_back() {
    use retry_runtime::BreakerState;
    use retry_runtime::kind::OkIf;
    use std::sync::atomic::AtomicBool;

    static PANIC: AtomicBool = AtomicBool::new(false);
    let breaker: &'static CircuitBreaker = Box::leak(Box::new(
        CircuitBreaker::new(10, 1, 0.5, secs(10), 1).unwrap(),
    ));
    breaker.record(Instant::now().into_std(), false);
    tokio::time::advance(secs(11)).await;
    let policy: &'static _ = Box::leak(Box::new(
        Policy::builder()
            .retries(0)
            .hedge(Hedge::after(ms(50), 1).unwrap())
            .breaker(breaker)
            .on_ok(OkIf(|v: &u32| {
                if PANIC.swap(false, Ordering::SeqCst) {
                    panic!("the rule panics");
                }
                *v == 0
            }))
            .build()
            .unwrap(),
    ));
    let answer = || async {
        tokio::time::sleep(ms(5)).await;
        Ok::<u32, io::Error>(1)
    };
    PANIC.store(true, Ordering::SeqCst);
    let panicked = tokio::spawn(policy.call_async(move |_| answer())).await;
    assert!(panicked.unwrap_err().is_panic());
    assert_eq!(breaker.state(), BreakerState::HalfOpen);
    assert_eq!(policy.call_async(move |_| answer()).await.unwrap(), 1);
    assert_eq!(breaker.state(), BreakerState::Closed);
}

/// A failure that asked for its own delay decides its round even when the round ends after
/// that attempt's timeout (a hedge sent beside it ran on and was cut later): it ended before
/// its timeout, so it is not a timeout. Before, it was judged at the round's end, past its
/// attempt's deadline, and `when(Timeout, retries = 1)` retried it at once, without the
/// delay it asked for. (The hedge's own timeout is a failure of the round that rule
/// retries: with `retries = 0` it would win, and end the call.)
#[tokio::test(start_paused = true)]
async fn a_kept_failure_is_not_a_timeout_because_its_round_ended_late() {
    let policy = Policy::builder()
        .retries(3)
        .backoff(retry_runtime::NoBackoff)
        .timeout(secs(1))
        .hedge(Hedge::after(ms(50), 1).unwrap())
        .hint(|e: &io::Error| (e.kind() == ErrorKind::ConnectionReset).then(|| secs(2)))
        .when(retry_runtime::kind::Timeout, |s| s.retries(1))
        .build()
        .unwrap();
    let start = Instant::now();
    let attempts = AtomicU32::new(0);
    let r: io::Result<u32> = policy
        .call_async(|_| {
            let n = attempts.fetch_add(1, Ordering::SeqCst);
            async move {
                match n {
                    // The first attempt fails at 100 ms and asks for 2 s.
                    0 => {
                        tokio::time::sleep(ms(100)).await;
                        Err(ErrorKind::ConnectionReset.into())
                    }
                    // Its hedge, sent at 50 ms, hangs until its timeout cuts it at 1.05 s.
                    1 => {
                        tokio::time::sleep(secs(10)).await;
                        Ok(0)
                    }
                    // The retry, 2 s after the round, answers.
                    _ => Ok(7),
                }
            }
        })
        .await;
    assert_eq!(r.unwrap(), 7);
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), ms(3050));
}

/// A hedged fn's owned arguments that are `Send` but not `Sync`: the attempts' maker owns them
/// (moved in, or cloned when an expression of the attribute reads one, as the fallback reads
/// `name` here) and each attempt its own clone, so the fn's future is `Send`, as without the
/// attribute. Each attempt starts from the value passed in.
#[robust(hedge(after = 50ms, max = 2), retries = 0,
         fallback = |e: io::Error| Ok(format!("{}: {e}", name.borrow())))]
async fn hedged_not_sync(
    name: std::cell::RefCell<String>,
    (seen, _): (std::cell::Cell<u32>, u8),
    calls: std::sync::Arc<AtomicU32>,
    fail: bool,
) -> io::Result<String> {
    let n = calls.fetch_add(1, Ordering::SeqCst);
    seen.set(seen.get() + 1);
    name.borrow_mut().push('!');
    // The first attempt is slow: a hedge goes at 50 ms and answers first.
    tokio::time::sleep(ms(if n == 0 { 1000 } else { 10 })).await;
    if fail {
        return Err(io::Error::other(format!("attempt {n}")));
    }
    Ok(format!("{} {} {n}", name.borrow(), seen.get()))
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedged_fn_with_owned_arguments_that_are_not_sync_is_send() {
    let calls = std::sync::Arc::new(AtomicU32::new(0));
    let t0 = Instant::now();
    let call = hedged_not_sync(
        std::cell::RefCell::new("a".into()),
        (std::cell::Cell::new(0), 0),
        std::sync::Arc::clone(&calls),
        false,
    );
    let r = tokio::spawn(call).await.unwrap();
    assert_eq!(r.unwrap(), "a! 1 1");
    assert_eq!(t0.elapsed(), ms(60));
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // Every attempt fails: the fallback reads the argument as it was passed. (The hedge's
    // failure, at 60 ms, ends the call: its rule never retries; the slow first attempt is
    // dropped.)
    let calls = std::sync::Arc::new(AtomicU32::new(0));
    let call = hedged_not_sync(
        std::cell::RefCell::new("b".into()),
        (std::cell::Cell::new(0), 0),
        std::sync::Arc::clone(&calls),
        true,
    );
    let r = tokio::spawn(call).await.unwrap();
    assert_eq!(r.unwrap(), "b: attempt 1");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// A raw identifier read by the fallback is cloned for the attempts' maker, not moved into it.
#[robust(hedge(after = 50ms, max = 1), retries = 0,
         fallback = |_e: io::Error| Ok(r#type.clone()))]
async fn hedged_raw_name(r#type: String) -> io::Result<String> {
    tokio::time::sleep(ms(10)).await;
    Err(io::Error::other(r#type))
}

#[tokio::test(start_paused = true)]
async fn a_raw_identifier_read_by_the_fallback_stays_with_the_fn() {
    assert_eq!(hedged_raw_name("kind".into()).await.unwrap(), "kind");
}

/// A failure whose rule never retries (`retries = 0`, at the top level or in a `when`) is not
/// retryable: it wins its round, as an error no rule matches does (SPEC 15), and sends no
/// hedge; the attempts still running are dropped. (Before, it started the next hedge at once:
/// a policy that said "never retry" sent three attempts in 3 ms against a failing server.)
#[tokio::test(start_paused = true)]
async fn a_failure_its_rule_never_retries_wins_and_sends_no_hedge() {
    let failing = |sent: &AtomicU32| {
        let n = sent.fetch_add(1, Ordering::SeqCst);
        async move {
            tokio::time::sleep(ms(1)).await;
            Err::<u32, _>(io::Error::new(
                ErrorKind::ConnectionRefused,
                format!("e{n}"),
            ))
        }
    };
    let hedge = || Hedge::after(ms(50), 2).unwrap();
    let top = Policy::builder().retries(0).hedge(hedge()).build().unwrap();
    let carved = Policy::builder()
        .retries(3)
        .on(retry_runtime::kind::Io::ANY)
        .when(
            retry_runtime::kind::Io::of([ErrorKind::ConnectionRefused]),
            |s| s.retries(0),
        )
        .hedge(hedge())
        .build()
        .unwrap();
    for (name, r, sent) in [
        {
            let sent = AtomicU32::new(0);
            let r = top.call_async(|_| failing(&sent)).await;
            ("retries(0)", r, sent)
        },
        {
            let sent = AtomicU32::new(0);
            let r = carved.call_async(|_| failing(&sent)).await;
            ("when(.., retries(0))", r, sent)
        },
    ] {
        assert_eq!(r.unwrap_err().to_string(), "e0", "{name}");
        assert_eq!(sent.load(Ordering::SeqCst), 1, "{name}");
    }
}

static CARVED: Log = Log::new();

/// The README's carve-out under a hedge: a refused connection is never retried, even while a
/// hedge of the round still runs (dropped); a reset is, and starts the next hedge at once.
#[robust(hedge(after = 20ms, max = 2), retries = 3, on = [Io],
         when(Io(ConnectionRefused), retries = 0))]
async fn carved(t0: Instant, plan: &[(u64, Option<ErrorKind>)]) -> io::Result<u32> {
    attempt_of(&CARVED, t0, plan).await
}

#[tokio::test(start_paused = true)]
async fn a_refusal_its_when_never_retries_ends_a_hedged_call() {
    let t0 = Instant::now();
    // The first attempt hangs; the hedge at 20 ms is refused at 30 ms: the call ends.
    let plan = [
        (1000, None),
        (10, Some(ErrorKind::ConnectionRefused)),
        (10, None),
    ];
    let r = carved(t0, &plan).await;
    assert_eq!(r.unwrap_err().kind(), ErrorKind::ConnectionRefused);
    assert_eq!(t0.elapsed(), ms(30));
    assert_eq!(
        CARVED.take(),
        vec![
            (0, 0, "start"),
            (1, 20, "start"),
            (1, 30, "err"),
            (0, 30, "dropped")
        ]
    );
    // A reset instead: the next hedge goes out at once and answers.
    let t0 = Instant::now();
    let plan = [
        (1000, None),
        (10, Some(ErrorKind::ConnectionReset)),
        (10, None),
    ];
    assert_eq!(carved(t0, &plan).await.unwrap(), 2);
    assert_eq!(starts(&CARVED), vec![0, 20, 30]);
    assert_eq!(t0.elapsed(), ms(40));
}

/// A value a rule matches is no success latency, in a hedged round too, where a rule that
/// never retries makes it the round's winner: the percentile's histogram does not take it
/// (`Call::record_latency` skips such values alike). A value no rule matches is taken.
#[tokio::test(start_paused = true)]
async fn a_matched_value_that_wins_its_round_is_no_latency_sample() {
    use retry_runtime::kind::OkIf;
    static SAMPLES: Latencies = Latencies::new();
    let policy = Policy::builder()
        .retries(2)
        .when_ok(OkIf(|v: &u32| *v == 0), |s| s.retries(0))
        .hedge(Hedge::percentile(&SAMPLES, 95.0, 1).unwrap())
        .build()
        .unwrap();
    let answer = |v: u32| async move {
        tokio::time::sleep(ms(5)).await;
        Ok::<u32, io::Error>(v)
    };
    assert_eq!(policy.call_async(|_| answer(0)).await.unwrap(), 0);
    assert_eq!(SAMPLES.samples(), 0, "the matched value is not a sample");
    assert_eq!(policy.call_async(|_| answer(1)).await.unwrap(), 1);
    assert_eq!(SAMPLES.samples(), 1);
}

/// Unique borrows no attempt touches: hedged attempts borrow none of them, so `hedge` takes
/// them (the body never names `_spare`; only the fallback writes through `out`).
#[robust(retries = 1, backoff = none, hedge(after = 10ms, max = 1),
         fallback = move |_| { out.push(7); Ok(out.len() as u32) })]
async fn hedged_beside_borrows(
    out: &mut Vec<u32>,
    _spare: Option<&mut u32>,
    calls: &AtomicU32,
) -> io::Result<u32> {
    calls.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(25)).await;
    Err(ErrorKind::Other.into())
}

#[tokio::test(start_paused = true)]
async fn unique_borrows_the_attempts_leave_alone_may_stand_beside_hedge() {
    let (mut out, mut spare, calls) = (vec![1], 5, AtomicU32::new(0));
    let r = hedged_beside_borrows(&mut out, Some(&mut spare), &calls).await;
    assert_eq!(
        r.unwrap(),
        2,
        "the fallback pushed through the caller's vector"
    );
    assert_eq!(out, [1, 7]);
    assert_eq!(spare, 5);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "two attempts, a hedge beside each"
    );
}

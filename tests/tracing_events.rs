//! The `tracing` feature: a WARN event per retry, an ERROR per give-up, a WARN per breaker
//! rejection, captured by a test subscriber. Each names the function and writes the error;
//! retries are numbered from 1, as `on_retry` and the attempt context number them.

use std::cell::RefCell;
use std::io::{self, ErrorKind};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use retry_runtime::time::VirtualTime;
use retry_runtime::{CircuitBreaker, Constant, NoJitter, Policy, RetryInfo, robust};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One captured event: level and fields (the message under "message").
#[derive(Debug, Clone)]
struct Captured {
    level: Level,
    fields: Vec<(String, String)>,
}

impl Captured {
    fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Captured>>>);

struct Fields<'a>(&'a mut Vec<(String, String)>);
impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Captured {
            level: *event.metadata().level(),
            fields,
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn capture(f: impl FnOnce()) -> Vec<Captured> {
    let c = Capture::default();
    tracing::subscriber::with_default(c.clone(), f);
    c.0.lock().unwrap().clone()
}

#[test]
fn a_warn_per_retry_and_an_error_when_giving_up() {
    let time = VirtualTime::new();
    let p = Policy::builder()
        .name("fetch")
        .retries(2)
        .backoff(Constant::new(Duration::from_millis(250)))
        .jitter(NoJitter)
        .env(time.clone())
        .build()
        .unwrap();
    let events = capture(|| {
        let r: io::Result<()> = p.call(|_| Err(ErrorKind::Other.into()));
        assert!(r.is_err());
    });
    assert_eq!(events.len(), 3, "{events:#?}");
    for (i, e) in events[..2].iter().enumerate() {
        assert_eq!(e.level, Level::WARN);
        assert_eq!(e.get("message"), Some("attempt failed, retrying"));
        assert_eq!(e.get("function"), Some("fetch"));
        assert_eq!(e.get("retry"), Some((i + 1).to_string().as_str()));
        assert_eq!(e.get("delay_ms"), Some("250"));
        assert_eq!(e.get("rule"), Some("On"));
        // The builder cannot see whether `E` has `Display`: it writes the type's name.
        assert_eq!(e.get("error"), Some("std::io::error::Error"));
        assert_eq!(e.get("error_type"), Some("std::io::error::Error"));
    }
    assert_eq!(events[1].get("elapsed_ms"), Some("250"));
    let last = &events[2];
    assert_eq!(last.level, Level::ERROR);
    assert_eq!(
        last.get("message"),
        Some("giving up: returning the last error")
    );
    assert_eq!(last.get("reason"), Some("RetryLimit"));
    assert_eq!(last.get("function"), Some("fetch"));
    assert_eq!(last.get("retries"), Some("2"));
    assert_eq!(last.get("elapsed_ms"), Some("500"));
}

/// A hint too long to count in milliseconds (a server's `Retry-After` parsed without a bound,
/// say) is written as `u64::MAX`, not wrapped to a small number (it read 384 ms for
/// 18,446,744,073,709,552 s).
#[test]
fn a_delay_past_u64_milliseconds_is_written_as_the_maximum() {
    let time = VirtualTime::new();
    let p = Policy::builder()
        .name("fetch")
        .retries(1)
        .hint(|_: &io::Error| Some(Duration::from_secs(18_446_744_073_709_552)))
        .env(time.clone())
        .build()
        .unwrap();
    let mut attempts = 0;
    let events = capture(|| {
        let r: io::Result<()> = p.call(|_| {
            attempts += 1;
            if attempts == 1 {
                Err(ErrorKind::Other.into())
            } else {
                Ok(())
            }
        });
        assert!(r.is_ok());
    });
    assert_eq!(
        events[0].get("delay_ms"),
        Some(u64::MAX.to_string().as_str())
    );
    assert_eq!(time.sleeps(), [Duration::from_secs(18_446_744_073_709_552)]);
}

#[test]
fn an_unnamed_policy_has_no_function_field() {
    let p = Policy::builder()
        .retries(1)
        .env(VirtualTime::new())
        .build()
        .unwrap();
    let events = capture(|| {
        let r: io::Result<()> = p.call(|_| Err(ErrorKind::Other.into()));
        assert!(r.is_err());
    });
    assert_eq!(events.len(), 2, "{events:#?}");
    assert!(events.iter().all(|e| e.get("function").is_none()));
}

thread_local! {
    static ON_RETRY: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
}

#[robust(
    retries = 2,
    backoff = constant(base = "250ms"),
    jitter = none,
    attempt = ctx,
    on_retry = |_r: &io::Result<u32>, info: &RetryInfo| ON_RETRY.with(|r| r.borrow_mut().push(info.retry)),
)]
fn flaky(seen: &RefCell<Vec<u32>>) -> io::Result<u32> {
    seen.borrow_mut().push(ctx.retries());
    if ctx.retries() < 2 {
        Err(io::Error::other("backend down"))
    } else {
        Ok(7)
    }
}

#[test]
fn events_name_the_fn_write_the_error_and_number_retries_like_on_retry_and_the_attempt() {
    let time = VirtualTime::new();
    let _guard = time.install();
    ON_RETRY.with(|r| r.borrow_mut().clear());
    let seen = RefCell::new(Vec::new());
    let events = capture(|| assert_eq!(flaky(&seen).unwrap(), 7));
    assert_eq!(events.len(), 2, "{events:#?}");
    for e in &events {
        assert_eq!(e.level, Level::WARN);
        assert_eq!(e.get("function"), Some("flaky"));
        assert_eq!(
            e.get("error"),
            Some("backend down"),
            "the error's Display text"
        );
        assert_eq!(e.get("error_type"), Some("std::io::error::Error"));
    }
    let event_numbers: Vec<&str> = events.iter().filter_map(|e| e.get("retry")).collect();
    let on_retry = ON_RETRY.with(|r| r.borrow().clone());
    let attempts = seen.into_inner();
    // The first retry is retry 1 for on_retry, for its event and for the attempt it starts.
    assert_eq!(on_retry, [1, 2]);
    assert_eq!(event_numbers, ["1", "2"]);
    assert_eq!(attempts, [0, 1, 2], "the attempt context's retries()");
    assert_eq!(on_retry[0], attempts[1]);
}

/// An error type without `Display`.
#[derive(Debug)]
struct Opaque;

#[robust(retries = 1, backoff = none)]
fn opaque() -> Result<(), Opaque> {
    Err(Opaque)
}

struct Client;

impl Client {
    #[robust(retries = 1, backoff = none)]
    fn get(&self) -> Result<(), String> {
        Err("503 from upstream".to_owned())
    }
}

#[test]
fn errors_without_display_are_named_by_type_and_methods_by_name() {
    let events = capture(|| assert!(opaque().is_err()));
    assert_eq!(events.len(), 2, "{events:#?}");
    for e in &events {
        assert_eq!(e.get("function"), Some("opaque"));
        assert_eq!(e.get("error"), Some("tracing_events::Opaque"));
    }
    let events = capture(|| assert!(Client.get().is_err()));
    assert_eq!(events.len(), 2, "{events:#?}");
    let last = &events[1];
    assert_eq!(last.level, Level::ERROR);
    assert_eq!(last.get("function"), Some("get"));
    assert_eq!(last.get("error"), Some("503 from upstream"));
    assert_eq!(last.get("retries"), Some("1"));
}

#[test]
fn errors_that_are_not_retried_are_debug_and_rejections_warn() {
    let time = VirtualTime::new();
    let breaker = CircuitBreaker::new(2, 1, 1.0, Duration::from_secs(60), 1).unwrap();
    let p = Policy::builder()
        .name("probe")
        .on(retry_runtime::kind::Io::of([ErrorKind::TimedOut]))
        .breaker(&breaker)
        .env(time.clone())
        .build()
        .unwrap();
    let events = capture(|| {
        let r: io::Result<()> = p.call(|_| Err(ErrorKind::NotFound.into()));
        assert!(r.is_err());
        let r: io::Result<()> = p.call(|_| Ok(()));
        assert!(r.is_err(), "the breaker opened on the first failure");
    });
    let levels: Vec<Level> = events.iter().map(|e| e.level).collect();
    assert_eq!(levels, [Level::DEBUG, Level::WARN], "{events:#?}");
    assert_eq!(
        events[0].get("message"),
        Some("error not retried: no rule matches it")
    );
    assert!(events.iter().all(|e| e.get("function") == Some("probe")));
    assert!(
        events[1]
            .get("message")
            .unwrap()
            .starts_with("circuit breaker open")
    );
}

#[robust(retries = 2, backoff = constant(base = 100ms), jitter = none, on = [Ok(|v: &u32| *v == 503)])]
fn status() -> io::Result<u32> {
    Ok(503)
}

#[test]
fn value_retries_and_a_value_returned_at_the_limit_are_events_too() {
    let _t = VirtualTime::new().install();
    let events = capture(|| assert_eq!(status().unwrap(), 503));
    assert_eq!(events.len(), 3, "{events:#?}");
    for (i, e) in events[..2].iter().enumerate() {
        assert_eq!(e.level, Level::WARN);
        assert_eq!(
            e.get("message"),
            Some("attempt returned a value an Ok(..) kind matches, retrying")
        );
        assert_eq!(e.get("function"), Some("status"));
        assert_eq!(e.get("retry"), Some((i + 1).to_string().as_str()));
        assert_eq!(e.get("value_type"), Some("u32"));
        assert_eq!(e.get("error"), None);
    }
    let last = &events[2];
    assert_eq!(last.level, Level::ERROR);
    assert_eq!(
        last.get("message"),
        Some("giving up: returning the last value")
    );
    assert_eq!(last.get("reason"), Some("RetryLimit"));
    assert_eq!(last.get("value_type"), Some("u32"));
}

static FULL: retry_runtime::ConcurrencyLimit = match retry_runtime::ConcurrencyLimit::new(1, 0) {
    Ok(l) => l,
    Err(_) => panic!("invalid limit"),
};
static CLOSED: retry_runtime::AdaptiveThrottle =
    match retry_runtime::AdaptiveThrottle::new(1.0, Duration::from_secs(60)) {
        Ok(t) => t,
        Err(_) => panic!("invalid throttle"),
    };

#[robust(retries = 0, limit = FULL)]
fn limited() -> io::Result<()> {
    Ok(())
}

#[robust(retries = 0, throttle = CLOSED)]
fn throttled() -> io::Result<()> {
    Ok(())
}

#[test]
fn limit_and_throttle_rejections_are_warnings() {
    let _t = VirtualTime::seeded(1).install();
    // The only slot is held and nothing may wait: the call is rejected.
    let held = FULL.try_acquire().expect("a free slot");
    let events = capture(|| assert!(limited().is_err()));
    drop(held);
    let e = events
        .iter()
        .find(|e| {
            e.get("message")
                .is_some_and(|m| m.starts_with("concurrency limit"))
        })
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(e.level, Level::WARN);
    assert_eq!(e.get("function"), Some("limited"));

    // A throttle whose every request failed rejects almost surely.
    let now = std::time::Instant::now();
    for _ in 0..10_000 {
        CLOSED.record(now, false);
    }
    let events = capture(|| assert!(throttled().is_err()));
    let e = events
        .iter()
        .find(|e| e.get("message").is_some_and(|m| m.starts_with("throttled")))
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(e.level, Level::WARN);
    assert_eq!(e.get("function"), Some("throttled"));
}

#[robust(hedge(after = 20ms), retries = 0)]
async fn hedged_lookup(slow: &std::sync::atomic::AtomicBool) -> io::Result<u32> {
    // The first attempt is slow, the hedge is not.
    let first = slow.swap(false, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(if first { 500 } else { 5 })).await;
    Ok(u32::from(first))
}

#[test]
fn a_hedge_is_a_debug_event() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let slow = std::sync::atomic::AtomicBool::new(true);
    let events = capture(|| assert_eq!(rt.block_on(hedged_lookup(&slow)).unwrap(), 0));
    let e = events
        .iter()
        .find(|e| e.get("message").is_some_and(|m| m.starts_with("hedging")))
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(e.level, Level::DEBUG);
    assert_eq!(e.get("function"), Some("hedged_lookup"));
    assert_eq!(e.get("hedge"), Some("1"));
    assert_eq!(e.get("retries"), Some("0"));
}

static ONE_SLOT: retry_runtime::ConcurrencyLimit = match retry_runtime::ConcurrencyLimit::new(1, 4)
{
    Ok(l) => l,
    Err(_) => panic!("invalid limit"),
};

/// Fails its first attempt, succeeds after.
#[robust(retries = 1, backoff = constant(base = 100ms), jitter = none, limit = ONE_SLOT)]
async fn waits_for_its_slot(failed: &std::cell::Cell<bool>) -> io::Result<()> {
    if failed.replace(true) {
        Ok(())
    } else {
        Err(ErrorKind::Other.into())
    }
}

/// An event's elapsed time counts from the first attempt's start, after the call's wait for a
/// slot of its concurrency limit (before, in a fn that reads no attempt's start, it counted
/// from the call's start: the retry below was reported at 500 ms, the wait included).
#[test]
fn elapsed_times_count_from_the_first_attempt_after_its_wait_for_a_slot() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let events = capture(|| {
        rt.block_on(async {
            // The only slot is held for 500 ms: the call waits for it.
            let held = ONE_SLOT.try_acquire().expect("a free slot");
            let start = tokio::time::Instant::now();
            let failed = std::cell::Cell::new(false);
            let (r, ()) = tokio::join!(waits_for_its_slot(&failed), async move {
                tokio::time::sleep(Duration::from_millis(500)).await;
                drop(held);
            });
            assert!(r.is_ok());
            // 500 ms for the slot, 100 ms of backoff.
            assert_eq!(start.elapsed(), Duration::from_millis(600));
        })
    });
    let retry = events
        .iter()
        .find(|e| e.get("message") == Some("attempt failed, retrying"))
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(retry.get("function"), Some("waits_for_its_slot"));
    assert_eq!(retry.get("elapsed_ms"), Some("0"));
}

static ONE_BLOCKING_SLOT: retry_runtime::ConcurrencyLimit =
    match retry_runtime::ConcurrencyLimit::new(1, 4) {
        Ok(l) => l,
        Err(_) => panic!("invalid limit"),
    };

/// Fails its first attempt, succeeds after.
#[robust(retries = 1, backoff = constant(base = 100ms), jitter = none, limit = ONE_BLOCKING_SLOT)]
fn blocks_for_its_slot(failed: &std::cell::Cell<bool>) -> io::Result<()> {
    if failed.replace(true) {
        Ok(())
    } else {
        Err(ErrorKind::Other.into())
    }
}

/// The same for a blocking fn, on a virtual clock that the slot's holder moves 500 ms on before
/// giving the slot back (once the call waits in the queue).
#[test]
fn a_blocking_fn_s_elapsed_times_count_from_its_first_attempt_after_its_wait() {
    let time = VirtualTime::new();
    let _installed = time.install();
    let start = retry_runtime::time::Clock::now(&time);
    let held = ONE_BLOCKING_SLOT.try_acquire().expect("a free slot");
    let events = std::thread::scope(|scope| {
        let holder = scope.spawn(|| {
            // (Bounded: the call queues at once.)
            for _ in 0..10_000 {
                if ONE_BLOCKING_SLOT.queued() == 1 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(ONE_BLOCKING_SLOT.queued(), 1, "the call waits for the slot");
            time.advance(Duration::from_millis(500));
            drop(held);
        });
        let failed = std::cell::Cell::new(false);
        let events = capture(|| assert!(blocks_for_its_slot(&failed).is_ok()));
        holder.join().unwrap();
        events
    });
    assert_eq!(
        retry_runtime::time::Clock::now(&time) - start,
        Duration::from_millis(600)
    );
    let retry = events
        .iter()
        .find(|e| e.get("message") == Some("attempt failed, retrying"))
        .unwrap_or_else(|| panic!("{events:#?}"));
    assert_eq!(retry.get("elapsed_ms"), Some("0"));
}

/// A tower service whose first attempt fails and which then fails to become ready.
#[derive(Clone, Default)]
struct NotReady {
    calls: Arc<std::sync::atomic::AtomicU32>,
}

impl tower::Service<http::Request<String>> for NotReady {
    type Response = http::Response<String>;
    type Error = io::Error;
    type Future = std::future::Ready<io::Result<http::Response<String>>>;
    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>> {
        if self.calls.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            std::task::Poll::Ready(Ok(()))
        } else {
            std::task::Poll::Ready(Err(ErrorKind::BrokenPipe.into()))
        }
    }
    fn call(&mut self, _: http::Request<String>) -> Self::Future {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        std::future::ready(Err(ErrorKind::ConnectionReset.into()))
    }
}

/// A call a service ends by failing to become ready (for the retry) is a WARN, under both
/// tower layers: the call ends there, with that error, and nothing else would say so.
#[tokio::test(start_paused = true)]
async fn a_readiness_error_that_ends_a_tower_call_is_a_warning() {
    use retry_runtime::tower::RobustLayer;
    use tower::{Layer, ServiceExt};
    for hedged in [false, true] {
        let c = Capture::default();
        let _guard = tracing::subscriber::set_default(c.clone());
        let builder = Policy::builder()
            .name("upstream")
            .retries(3)
            .backoff(retry_runtime::NoBackoff);
        let svc = NotReady::default();
        let r = if hedged {
            let policy = builder
                .hedge(retry_runtime::hedge::Hedge::after(Duration::from_millis(50), 1).unwrap())
                .build()
                .unwrap();
            RobustLayer::hedged(policy)
                .layer(svc.clone())
                .oneshot(http::Request::new(String::new()))
                .await
        } else {
            RobustLayer::new(builder.build().unwrap())
                .layer(svc.clone())
                .oneshot(http::Request::new(String::new()))
                .await
        };
        assert_eq!(r.unwrap_err().kind(), ErrorKind::BrokenPipe);
        let events = c.0.lock().unwrap().clone();
        let warning = events
            .iter()
            .find(|e| {
                e.get("message")
                    .is_some_and(|m| m.contains("failed to become ready"))
            })
            .unwrap_or_else(|| panic!("hedged: {hedged}: no event: {events:?}"));
        assert_eq!(warning.level, Level::WARN);
        assert_eq!(warning.get("function"), Some("upstream"));
        // (A builder's policy names the error by its type: see above.)
        assert_eq!(warning.get("error_type"), Some("std::io::error::Error"));
        assert_eq!(svc.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}

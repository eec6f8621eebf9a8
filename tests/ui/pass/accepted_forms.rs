//! Every accepted form of the attribute compiles.

use std::io;

use retry_runtime::robust;

#[derive(Debug)]
enum MyError {
    Busy { code: u32 },
    Locked,
}

// `Timeout` (without a timeout) and `Io` look inside the error through this impl.
impl std::fmt::Display for MyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}
impl std::error::Error for MyError {}

#[robust]
fn defaults() -> Result<(), String> { Ok(()) }

#[robust(timeout = "1m 30s", retries = 1, max_delay = 2.5, scale = 2, jitter = none, attempt = ctx)]
fn durations() -> io::Result<()> { let _ = ctx.remaining(); Ok(()) }

#[robust(timeout = -1, max_delay = -1, retries = -1, backoff = none)]
fn infinite() -> io::Result<()> { Ok(()) }

#[robust(timeout = none, max_delay = none)]
fn none_words() -> io::Result<()> { Ok(()) }

#[robust(backoff = exponential(base = "100ms", max = "20s"), jitter = full)]
fn exp_default_m() -> io::Result<()> { Ok(()) }

#[robust(backoff = exponential(max = 60, m = 1.5, base = 0.5), jitter = equal)]
fn exp_any_order() -> io::Result<()> { Ok(()) }

#[robust(backoff = linear(base = 1, max = 10), jitter = decorrelated)]
fn linear_default() -> io::Result<()> { Ok(()) }

#[robust(backoff = fibonacci(base = 0, max = "1h", unit = "250ms"))]
fn fibonacci() -> io::Result<()> { Ok(()) }

#[robust(backoff = polynomial(base = 1, max = 60, p = 2))]
fn polynomial_single() -> io::Result<()> { Ok(()) }

#[robust(backoff = polynomial(base = 1, max = 60, p = [1.5, 3], unit = "10ms"))]
fn polynomial_list() -> io::Result<()> { Ok(()) }

#[robust(backoff = random(base = 1, max = 1))]
fn random_degenerate() -> io::Result<()> { Ok(()) }

#[robust(on = [Timeout, Io(ConnectionRefused, ConnectionReset), MyError::Busy { .. } | MyError::Locked])]
fn kinds_patterns() -> Result<(), MyError> { Ok(()) }

#[robust(on = [|e: &MyError| matches!(e, MyError::Busy { code } if *code > 3)])]
fn kinds_closure() -> Result<(), MyError> { Ok(()) }

#[robust(
    on = [Io],
    when(Io(ConnectionRefused), retries = 0),
    when(Timeout, retries = 10, max_delay = "1m", backoff = constant(base = "200ms"), jitter = none, scale = 0.5),
)]
fn whens() -> io::Result<()> { Ok(()) }

fn log_success() {}

#[robust(on_success = log_success, on_error = |e: &io::Error, n| eprintln!("{n}: {e}"), attempt = ctx)]
fn callbacks_and_context() -> io::Result<u32> { Ok(ctx.number()) }

#[robust(crate = "::retry_runtime", retries = 1)]
async fn async_with_crate() -> io::Result<()> { Ok(()) }

// A parameter's attributes go on its own statements only: the body's first statement (an
// assignment, on which an attribute is experimental) gets none of them. Owned, owned with a
// pattern, blocking and async.
#[robust(retries = 2)]
fn attributed_param(#[allow(unused_mut)] mut y: u32) -> io::Result<u32> {
    y += 1;
    Ok(y)
}

#[robust(retries = 2)]
fn attributed_pattern(#[allow(unused_mut)] (mut a, b): (u32, u32)) -> io::Result<u32> {
    a += b;
    Ok(a)
}

#[robust(retries = 2)]
async fn attributed_param_async(#[allow(clippy::needless_pass_by_value)] name: String, #[allow(unused_mut)] mut n: usize) -> io::Result<usize> {
    n += name.len();
    Ok(n)
}

fn main() {}

// Durations with a unit suffix, and `-0` read as zero.
#[robust(timeout = 150ms, max_delay = 1m, backoff = exponential(base = 100ms, max = 1.5s, m = 2), on = [Timeout, Io])]
fn unit_suffixes() -> io::Result<()> { Ok(()) }

#[robust(backoff = linear(base = 500us, max = 1h, interval = 10ns))]
fn more_units() -> io::Result<()> { Ok(()) }

// `-0` is zero (no retry can start), not infinite.
#[robust(max_delay = -0)]
fn minus_zero() -> io::Result<()> { Ok(()) }

// A bare name in a kind list that names a constant or a unit variant of the error type.
const LOCKED: Unit = Unit::Locked;
#[derive(Debug, PartialEq, Eq)]
enum Unit {
    Busy,
    Locked,
}
use Unit::Busy;

// (An `on` kind that is also a `when`'s, whatever path or `name @` names it: retried, with
// the `when`'s settings.)
#[robust(on = [Busy, LOCKED], when(self::Busy, retries = 1))]
fn unit_kinds() -> Result<(), Unit> { Ok(()) }

// Constants written as paths, and a binding restricted by its subpattern.
#[robust(on = [self::LOCKED | Unit::Busy], when(e @ Unit::Busy, retries = 1))]
fn path_kinds() -> Result<(), Unit> { Ok(()) }

// An `on` kind that is also a `when`'s (or an alternative of one that is): retried, with the
// `when`'s settings.
#[robust(on = [Unit::Busy | self::LOCKED], when(Unit::Busy, retries = 1))]
fn on_and_when_alike() -> Result<(), Unit> { Ok(()) }

// A more specific pattern before a wider one: both apply.
#[robust(when(Unit::Busy, retries = 1), when(_, retries = 3))]
fn narrower_first() -> Result<(), Unit> { Ok(()) }

// `Timeout` with a timeout matches whatever the error type (a blocking fn's late error).
#[robust(timeout = 1, on = [Timeout])]
fn timeout_on_string() -> Result<(), String> { Ok(()) }

// A parameter under `#[cfg]`, a wildcard that is not `Clone`, a borrow of a `&` argument
// returned beside a `&mut` one.
struct NoClone;

#[robust]
fn cfg_and_wildcard(#[cfg(any())] _gone: u32, #[cfg(all())] kept: u32, _: NoClone) -> io::Result<u32> {
    Ok(kept)
}

#[robust]
fn borrow_of_shared<'a>(data: &'a [u8], scratch: &mut Vec<u8>) -> io::Result<&'a [u8]> {
    scratch.push(1);
    Ok(data)
}

// A lifetime shared by a `&mut` and a `&` argument: the borrow may come from the `&` one.
#[robust]
fn shared_lifetime<'a>(buf: &'a mut Vec<u8>, y: &'a u8) -> Result<&'a u8, String> {
    buf.clear();
    Ok(y)
}

struct Holder(Vec<u8>);

impl Holder {
    #[robust]
    fn read(&self, scratch: &mut Vec<u8>) -> io::Result<&[u8]> {
        scratch.clear();
        Ok(&self.0)
    }
}

// A deadline for the whole call: a duration, or none.
#[robust(deadline = "1m 30s", timeout = 2s, attempt = ctx)]
fn deadline_sync() -> io::Result<()> { let _ = ctx.is_expired(); Ok(()) }

// No retry, but the context reads the deadline (no timeout ends the attempt first).
#[robust(retries = 0, deadline = 5s, attempt = ctx)]
fn deadline_read_without_retries() -> io::Result<()> { let _ = ctx.is_expired(); Ok(()) }

// The context named by a raw identifier is the same name (`r#ctx` is `ctx`).
#[robust(timeout = 2s, attempt = r#ctx)]
fn raw_context_name() -> io::Result<()> { let _ = ctx.is_expired(); Ok(()) }

#[robust(deadline = none)]
async fn deadline_none() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

#[robust(deadline = -1, on = [Timeout])]
fn deadline_negative() -> io::Result<()> { Ok(()) }

// `Ok(..)` kinds: patterns (paths, alternatives, constants, bindings restricted by a
// subpattern), closures, in `on` with error kinds or alone, and in `when` with a hint.
#[derive(Debug, PartialEq)]
enum Reply {
    Busy,
    Ready(u32),
    Throttled { after: u64 },
}
const UNAVAILABLE: u16 = 503;

#[robust(on = [Io, Ok(Reply::Busy)])]
fn ok_pattern() -> io::Result<Reply> { Ok(Reply::Ready(1)) }

#[robust(on = [Ok(Reply::Ready(0) | Reply::Busy), Ok(Reply::Throttled { .. })])]
fn ok_alternatives() -> io::Result<Reply> { Ok(Reply::Ready(1)) }

#[robust(on = [Ok(|s: &u16| *s >= 500), Ok(UNAVAILABLE), Ok(429..=429)])]
fn ok_closure_constant_range() -> io::Result<u16> { Ok(200) }

#[robust(on = [Ok(r @ Reply::Ready(0))])]
fn ok_bound_subpattern() -> io::Result<Reply> { Ok(Reply::Busy) }

#[robust(on = [Timeout], timeout = 1s,
         when(Ok(|r: &Reply| matches!(r, Reply::Throttled { .. })), retries = 5,
              hint = |r: &Reply| match r { Reply::Throttled { after } => Some(std::time::Duration::from_secs(*after)), _ => None }))]
async fn ok_when_hint() -> io::Result<Reply> { tokio::task::yield_now().await; Ok(Reply::Busy) }

#[robust(when(Ok(Reply::Busy), retries = 2), on = [Ok(|r: &Reply| *r == Reply::Ready(0))])]
fn ok_when_and_on() -> Result<Reply, String> { Ok(Reply::Busy) }

// A fallback: a closure, a fn, an async closure on an async fn, with every other key.
fn recover(e: io::Error) -> io::Result<u32> {
    if e.kind() == io::ErrorKind::NotFound { Ok(0) } else { Err(e) }
}

#[robust(fallback = recover)]
fn fallback_fn() -> io::Result<u32> { Ok(1) }

#[robust(fallback = |_e: io::Error| Ok(0), on = [Ok(|v: &u32| *v == 0)], on_retry = |_r: &io::Result<u32>, _i: &retry_runtime::RetryInfo| ())]
fn fallback_closure() -> io::Result<u32> { Ok(1) }

#[robust(timeout = 1s, deadline = 5s, fallback = |e: io::Error| async move { Err(e) })]
async fn fallback_async() -> io::Result<u32> { tokio::task::yield_now().await; Ok(1) }

#[robust(fallback = recover)]
async fn fallback_sync_in_async() -> io::Result<u32> { Ok(1) }

// Client-side throttling, a `static` (or any expression that derefs to one).
static THROTTLE: retry_runtime::AdaptiveThrottle =
    match retry_runtime::AdaptiveThrottle::new(2.0, std::time::Duration::from_secs(60)) {
        Ok(t) => t,
        Err(_) => panic!("invalid throttle"),
    };

#[robust(throttle = THROTTLE, retries = 2)]
fn throttled() -> io::Result<()> { Ok(()) }

#[robust(throttle = &THROTTLE, timeout = 1s)]
async fn throttled_async() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// A concurrency limit, a `static`.
static LIMIT: retry_runtime::ConcurrencyLimit = match retry_runtime::ConcurrencyLimit::new(8, 100) {
    Ok(l) => l,
    Err(_) => panic!("invalid limit"),
};

#[robust(limit = LIMIT, throttle = THROTTLE)]
fn limited() -> io::Result<()> { Ok(()) }

#[robust(limit = LIMIT, timeout = 1s, deadline = 3s)]
async fn limited_async() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// Hedging (async fns): a fixed delay or a percentile, with every other key.
#[robust(hedge(after = "50ms"))]
async fn hedged() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

#[robust(hedge(after = p99.9, max = 3), timeout = 1s, deadline = 3s, limit = LIMIT,
         throttle = THROTTLE, fallback = |e: io::Error| async move { Err(e) }, attempt = ctx)]
async fn hedged_everything(owned: String, (a, b): (u32, u32), r: &str, _: u8) -> io::Result<usize> {
    tokio::task::yield_now().await;
    Ok(owned.len() + (a + b) as usize + r.len() + ctx.retries() as usize)
}

#[robust(hedge(after = p95), timeout = adaptive(p = 99, factor = 2, min = 50ms, max = 5s))]
async fn hedged_adaptive(mut n: u32) -> io::Result<u32> { tokio::task::yield_now().await; n += 1; Ok(n) }

// Timeouts from measured latency, blocking and async.
#[robust(timeout = adaptive(p = 99.9, factor = 2, min = "50ms", max = "5s"), retries = 2, when(Timeout, retries = 1))]
fn adaptive_sync() -> io::Result<()> { Ok(()) }

#[robust(timeout = adaptive(p = 90, min = 1ms, max = 1s), deadline = 2s, on = [Timeout])]
async fn adaptive_async() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

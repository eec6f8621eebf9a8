use retry_runtime::robust;

#[robust(deadline = 0)]
fn zero() -> std::io::Result<()> { Ok(()) }

#[robust(deadline = "soon", deadlin = 1)]
fn misread() -> std::io::Result<()> { Ok(()) }

#[robust(deadline = 1s, deadline = 2s)]
fn twice() -> std::io::Result<()> { Ok(()) }

#[robust(when(Io, deadline = 1s))]
fn per_kind() -> std::io::Result<()> { Ok(()) }

#[robust(deadline = -1min)]
fn unit() -> std::io::Result<()> { Ok(()) }

// Bounds the deadline makes dead: a timeout (or an adaptive timeout's `min`) or a `max_delay`
// no shorter than the deadline never applies.
#[robust(deadline = 2s, timeout = 5s)]
async fn timeout_past_the_deadline() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(deadline = 2s, timeout = adaptive(p = 99, min = 2s, max = 5s))]
async fn adaptive_min_at_the_deadline() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(deadline = 2s, max_delay = 10s, when(Io, max_delay = 2s))]
async fn max_delay_past_the_deadline() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// A backoff whose shortest delay is not below the deadline: no retry can ever be made (a
// retry whose backoff would end at or after the deadline is not).
#[robust(deadline = 200ms, retries = 5, backoff = constant(base = 500ms), jitter = none)]
async fn backoff_past_the_deadline() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(deadline = 1s, backoff = exponential(base = 3s, max = 10s), jitter = equal)]
async fn equal_jitter_past_the_deadline() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(deadline = 1s, when(Io, backoff = constant(base = 600ms), jitter = none, scale = 2))]
async fn scaled_past_the_deadline_in_a_when() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(deadline = 1s, backoff = fibonacci(base = 1s, max = 10s), jitter = decorrelated)]
async fn fibonacci_past_the_deadline() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(deadline = 1s, backoff = polynomial(base = 2s, max = 10s, p = 2), jitter = none)]
async fn polynomial_past_the_deadline() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
// The default backoff (exponential from 100 ms) with no jitter.
#[robust(deadline = 80ms, jitter = none)]
async fn default_backoff_past_the_deadline() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
// (Reported once, at the top level, though a `when` inherits it.)
#[robust(deadline = 80ms, jitter = none, when(Io, retries = 2))]
async fn inherited_by_a_when() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
// An async fn's timer (tokio's) may fire up to 2 ms late: a backoff that ends less than 2 ms
// before the deadline could wake at it, and is not made either. A blocking fn keeps its
// failure if its sleep ends late, and makes it.
#[robust(deadline = 1s, backoff = constant(base = 999500us), jitter = none)]
async fn within_a_millisecond_of_the_deadline() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(deadline = 1s, backoff = constant(base = 999500us), jitter = none)]
fn fine_blocking_within_a_millisecond() -> std::io::Result<()> { Ok(()) }
#[robust(deadline = 1s, backoff = constant(base = 998500us), jitter = none)]
async fn within_two_milliseconds_of_the_deadline() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(deadline = 1s, backoff = constant(base = 998ms), jitter = none)]
async fn fine_two_milliseconds_before_the_deadline() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(deadline = 500us, backoff = none)]
async fn fine_no_backoff_makes_no_timer() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
// (Fine: a full jitter can draw less, and a hint may choose the delay.)
#[robust(deadline = 200ms, backoff = constant(base = 500ms), jitter = full)]
async fn fine_full_jitter() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(deadline = 1s, backoff = fibonacci(base = 900ms, max = 10s), jitter = none)]
async fn fine_fibonacci_below() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(deadline = 150ms, jitter = none)]
async fn fine_default_backoff_below() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(deadline = 200ms, backoff = constant(base = 500ms), jitter = none, max_delay = -1,
         hint = |_e: &std::io::Error| Some(std::time::Duration::from_millis(10)))]
async fn fine_hinted() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

fn main() {}

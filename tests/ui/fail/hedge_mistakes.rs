use retry_runtime::robust;

// A blocking fn runs one attempt at a time.
#[robust(hedge(after = "50ms", max = 1))]
fn blocking() -> std::io::Result<()> { Ok(()) }

// Attempts at the same time cannot share a `&mut`.
struct Client;
impl Client {
    #[robust(hedge(after = 50ms))]
    async fn get(&mut self, buf: &mut Vec<u8>) -> std::io::Result<()> { let _ = buf; tokio::task::yield_now().await; Ok(()) }
}

// Nor a `&mut` in an `Option` or a `Pin`.
#[robust(hedge(after = 50ms))]
async fn wrapped(buf: Option<&mut Vec<u8>>, n: std::pin::Pin<&mut u32>) -> std::io::Result<()> { let _ = (buf, n); tokio::task::yield_now().await; Ok(()) }

// No hedge at all, a hedge at once, a negative or unitless-but-wrong delay.
#[robust(hedge(after = 50ms, max = 0))]
async fn zero_max() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = 0, max = 1))]
async fn zero_after() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = -50ms))]
async fn negative_after() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = 50mss))]
async fn bad_unit() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// Percentiles from p50 to p99.9; a word that is no percentile.
#[robust(hedge(after = p10))]
async fn low_percentile() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = p99.99))]
async fn high_percentile() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = fast))]
async fn a_word() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = "p95"))]
async fn a_quoted_percentile() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// Missing `after`, an unknown parameter, too many hedges, a value instead of the call.
#[robust(hedge(max = 2))]
async fn no_after() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = 50ms, delay = 10ms))]
async fn unknown_param() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = 50ms, max = 11))]
async fn too_many() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge = "50ms")]
async fn as_a_value() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// A hedge due no sooner than the attempt is cut never runs beside it: after the timeout, the
// adaptive timeout's `max` or the deadline. (A percentile is not compared: an adaptive
// timeout's `min` may keep it above the hedge.)
#[robust(hedge(after = 2s), timeout = 1s)]
async fn after_the_timeout() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = 1s), timeout = 1s)]
async fn at_the_timeout() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = 6s), timeout = adaptive(p = 99, factor = 2, min = 50ms, max = 5s))]
async fn after_the_adaptive_max() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = 500ms), deadline = 300ms)]
async fn after_the_deadline() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
// A bare number is seconds, but some are read too easily as a percentile (95, 0.95) or as
// milliseconds (100): a unit (or `p`) says which.
#[robust(hedge(after = 95))]
async fn after_a_bare_number() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = "99.9"))]
async fn after_a_bare_number_in_quotes() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = 0.95))]
async fn after_a_fraction() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = 100))]
async fn after_milliseconds_without_a_unit() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = "250"))]
async fn after_milliseconds_in_quotes_without_a_unit() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
// (Otherwise a bare number is seconds, as everywhere: fine.)
#[robust(hedge(after = 0.05))]
async fn fine_after_seconds() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = 0.5))]
async fn fine_after_half_a_second() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(hedge(after = "2"))]
async fn fine_after_seconds_in_quotes() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

#[robust(hedge(after = p99), timeout = adaptive(p = 95, factor = 1, min = 1s, max = 5s))]
async fn fine_a_percentile_under_an_adaptive_min() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

fn main() {}

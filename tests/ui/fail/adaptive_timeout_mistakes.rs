use retry_runtime::robust;

// `p` from 50 to below 100 (a percentile, not a fraction), `factor` >= 1, `min` > 0 and at
// most `max` (a number without a unit is seconds).
#[robust(timeout = adaptive(p = 100, factor = 2, min = 50ms, max = 5s))]
async fn p_100() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(timeout = adaptive(p = 0, min = 50ms, max = 5s))]
async fn p_0() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(timeout = adaptive(p = 99.9, factor = 0.5, min = 50ms, max = 5s))]
async fn small_factor() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(timeout = adaptive(p = 99.9, factor = 2, min = 0, max = 5s))]
async fn zero_min() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(timeout = adaptive(p = 99.9, factor = 2, min = 10s, max = 5s))]
async fn min_above_max() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(timeout = adaptive(p = 0.99, min = 50ms, max = 5s))]
async fn p_as_a_fraction() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(timeout = adaptive(p = 10, min = 50ms, max = 5s))]
async fn p_below_the_median() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(timeout = adaptive(p = 99, min = 50, max = 5s))]
async fn min_without_a_unit() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// A percentile with a unit, a missing bound, a misspelled call, and two timeouts.
#[robust(timeout = adaptive(p = 99ms, min = 50ms, max = 5s))]
async fn p_with_unit() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(timeout = adaptive(p = 99, min = 50ms))]
async fn no_max() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(timeout = adaptiv(p = 99, min = 50ms, max = 5s))]
async fn misspelled() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(timeout = 2s, timeout = adaptive(p = 99, min = 50ms, max = 5s))]
async fn twice() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// A range of one value is a fixed timeout; a percentile above what the window can tell.
#[robust(timeout = adaptive(p = 99, factor = 2, min = 1s, max = 1000ms))]
async fn min_equals_max() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(timeout = adaptive(p = 99.95, min = 50ms, max = 5s))]
async fn p_above_the_window() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// An error type without `From<Elapsed>`.
#[robust(timeout = adaptive(p = 99, min = 50ms, max = 5s))]
async fn no_conversion() -> Result<(), String> { tokio::task::yield_now().await; Ok(()) }

fn main() {}

// A `scale` so small that the longest delay the strategy gives rounds to no nanosecond makes
// every delay 0.
use retry_runtime::robust;

// The default strategy's longest delay is 20 s: 20 s x 1e-12 is 0.02 ns.
#[robust(retries = 4, scale = 1e-12)]
fn default_strategy() -> std::io::Result<()> { Ok(()) }

#[robust(backoff = constant(base = 100ms), scale = 1e-9)]
fn constant() -> std::io::Result<()> { Ok(()) }

#[robust(when(Io(ConnectionReset), retries = 2, backoff = exponential(base = 1ms, max = 1s), scale = 1e-10))]
fn a_when() -> std::io::Result<()> { Ok(()) }

// Or so large that the shortest delay (the strategy's `base`) passes the 10^18 s no written
// duration may exceed.
#[robust(retries = 2, scale = 1e20)]
fn default_strategy_scaled_past_the_largest_duration() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = constant(base = 1e12), scale = 1e7)]
fn constant_scaled_past_the_largest_duration() -> std::io::Result<()> { Ok(()) }

// (A strategy refused for its own value is not judged against the default one's 20 s.)
#[robust(backoff = constant(base = 1e300), scale = 1e-300)]
fn refused_strategy() -> std::io::Result<()> { Ok(()) }

// (Fine: 20 s x 1e-10 is 2 ns; 100 ms x 1e18 is 10^17 s; a `max` the retries never reach.)
#[robust(scale = 1e18)]
fn large_but_in_range() -> std::io::Result<()> { Ok(()) }
#[robust(retries = 2, backoff = exponential(base = 1s, max = 1e17), scale = 100)]
fn max_never_reached() -> std::io::Result<()> { Ok(()) }
#[robust(scale = 1e-10)]
fn small_but_not_zero() -> std::io::Result<()> { Ok(()) }

fn main() {}

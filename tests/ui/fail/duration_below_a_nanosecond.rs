// A duration above 0 but below half a nanosecond would round to 0, which means something
// else than the tiny value written: no retry for a `max_delay`, no wait for a strategy.
use retry_runtime::robust;

#[robust(max_delay = 0.1ns)]
fn max_delay() -> std::io::Result<()> { Ok(()) }

#[robust(backoff = constant(base = 1e-320))]
fn constant_base() -> std::io::Result<()> { Ok(()) }

#[robust(max_delay = "0.0000000001")]
fn as_a_string() -> std::io::Result<()> { Ok(()) }

// Below a float's range: read as 0, though written above it.
#[robust(max_delay = 1e-9999)]
fn below_a_floats_range() -> std::io::Result<()> { Ok(()) }

#[robust(timeout = "1e-9999")]
async fn below_a_floats_range_as_a_string() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// (Fine: half a nanosecond and up rounds to one; a negative value, however small, is no
// limit.)
#[robust(max_delay = 0.6ns, backoff = none)]
fn rounds_to_one() -> std::io::Result<()> { Ok(()) }
#[robust(max_delay = -0.1ns)]
fn no_limit() -> std::io::Result<()> { Ok(()) }
#[robust(max_delay = -1e-9999)]
fn no_limit_below_a_floats_range() -> std::io::Result<()> { Ok(()) }
#[robust(timeout = -1e-10)]
async fn no_timeout() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

fn main() {}

// With `base` equal to `max` every delay is `base`: a growth written beside them (`m`,
// `interval`, `unit`, `p`) is read by nothing.
use retry_runtime::robust;

#[robust(backoff = exponential(base = 1s, max = 1s, m = 3))]
fn exponential() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = linear(base = 1s, max = 1s, interval = 2s))]
fn linear() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = fibonacci(base = 1s, max = 1s, unit = 2s))]
fn fibonacci() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = polynomial(base = 1s, max = 1s, p = [3]))]
fn polynomial() -> std::io::Result<()> { Ok(()) }

// (Fine: room to grow; equal bounds with nothing else written.)
#[robust(backoff = exponential(base = 1s, max = 2s, m = 3))]
fn grows() -> std::io::Result<()> { Ok(()) }
#[robust(backoff = exponential(base = 1s, max = 1s))]
fn equal_bounds() -> std::io::Result<()> { Ok(()) }

fn main() {}

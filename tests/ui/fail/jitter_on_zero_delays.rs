// `backoff = constant(base = 0)` waits zero before every retry, as `backoff = none` does: a
// jitter or a scale beside it changes nothing.
use retry_runtime::robust;

#[robust(backoff = constant(base = 0), jitter = equal)]
fn equal_jitter() -> std::io::Result<()> { Ok(()) }

#[robust(backoff = constant(base = 0), scale = 2)]
fn scaled() -> std::io::Result<()> { Ok(()) }

#[robust(backoff = constant(base = 0ms), when(Io(ConnectionReset), retries = 2, jitter = full))]
fn a_whens_jitter() -> std::io::Result<()> { Ok(()) }

// (Fine: a constant that waits.)
#[robust(backoff = constant(base = 1ms), jitter = equal)]
fn waits() -> std::io::Result<()> { Ok(()) }

fn main() {}

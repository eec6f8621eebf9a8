// `#[track_caller]` would stop at the fn: the body runs in a closure the retry loop calls,
// and a panic in it would report the body's line, not the caller's.
use retry_runtime::robust;

#[robust(retries = 2)]
#[track_caller]
fn located() -> Result<u32, String> { Ok(1) }

fn main() {}

use retry_runtime::robust;

#[robust(retries = 1.5, timeout = 0, jitter = partial, backoff = exponential(base = 3, max = 1, m = 0.1))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

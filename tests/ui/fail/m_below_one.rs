use retry_runtime::robust;

#[robust(backoff = exponential(base = 1, max = 60, m = 0.5))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

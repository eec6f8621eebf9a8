use retry_runtime::robust;

#[robust(backoff = exponential(base = 1, base = 2, max = 3))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

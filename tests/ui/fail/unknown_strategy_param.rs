use retry_runtime::robust;

#[robust(backoff = exponential(base = 1, max = 2, factor = 3))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

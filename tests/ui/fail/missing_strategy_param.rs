use retry_runtime::robust;

#[robust(backoff = exponential(base = 1))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

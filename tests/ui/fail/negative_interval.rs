use retry_runtime::robust;

#[robust(backoff = linear(base = 1, max = 5, interval = -1))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

use retry_runtime::robust;

#[robust(backoff = quadratic(base = 1, max = 2))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

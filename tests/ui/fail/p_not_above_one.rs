use retry_runtime::robust;

#[robust(backoff = polynomial(base = 1, max = 5, p = [2, 1]))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

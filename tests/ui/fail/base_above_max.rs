use retry_runtime::robust;

#[robust(backoff = random(base = "2s", max = "1s"))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

use retry_runtime::robust;

#[robust(backoff = constant(base = "-0.5"))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

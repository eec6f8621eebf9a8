use retry_runtime::robust;

#[robust(jitter = custom("full"))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

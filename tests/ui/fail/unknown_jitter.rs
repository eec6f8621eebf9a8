use retry_runtime::robust;

#[robust(jitter = partial)]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

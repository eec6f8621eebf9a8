use retry_runtime::robust;

#[robust(backoff = custom(42u32))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

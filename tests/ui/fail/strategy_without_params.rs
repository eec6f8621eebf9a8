use retry_runtime::robust;

#[robust(backoff = linear)]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

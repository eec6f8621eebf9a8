use retry_runtime::robust;

#[robust(jitter = full(), backoff = none())]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

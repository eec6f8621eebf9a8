use retry_runtime::robust;

#[robust(backoff = custom(), jitter = custom())]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

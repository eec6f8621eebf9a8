use retry_runtime::robust;

#[robust(when(Timeout, retries = 2, timeout = "1s"))]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

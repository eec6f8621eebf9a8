use retry_runtime::robust;

#[robust(timeout = 2min, backoff = exponential(base = 100msec, max = 20s))]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

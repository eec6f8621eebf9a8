use retry_runtime::robust;

#[robust(scale = 1e309, backoff = exponential(base = 1, max = 60, m = 1e400))]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

use retry_runtime::robust;

#[robust(timout = 1, backoff = exponentail(base = 1, max = 2, mm = 2), jitter = equl)]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

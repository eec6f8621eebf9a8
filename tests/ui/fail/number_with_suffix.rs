use retry_runtime::robust;

#[robust(retries = 3f32, scale = 2u8, backoff = exponential(base = 1, max = 60, m = 2f64))]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

use retry_runtime::robust;

#[robust(scale = -0.5, backoff = constant(base = -2ms))]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

use retry_runtime::robust;

#[robust(retries = 4294967296)]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

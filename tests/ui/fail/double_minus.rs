use retry_runtime::robust;

#[robust(retries = --3)]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

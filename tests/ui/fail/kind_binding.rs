use retry_runtime::robust;

#[robust(on = [ref e], when(mut busy, retries = 1))]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

use retry_runtime::robust;

#[robust(when(Timeout))]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

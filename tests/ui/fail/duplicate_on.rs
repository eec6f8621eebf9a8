use retry_runtime::robust;

#[robust(on = [Timeout, Io, Timeout])]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

use retry_runtime::robust;

#[robust(when(Io(ConnectionReset), retries = 1), when(Io(ConnectionReset), scale = 2))]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

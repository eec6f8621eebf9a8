use retry_runtime::robust;

#[robust(on = [Io(ConnectionRefused, ConnectionRefsed)])]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

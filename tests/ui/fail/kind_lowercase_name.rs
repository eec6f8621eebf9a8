use retry_runtime::robust;

#[robust(on = [timeout])]
fn f() -> std::io::Result<()> { Ok(()) }

#[robust(when(io, retries = 0))]
fn g() -> std::io::Result<()> { Ok(()) }

#[robust(on = [Tiemout, IO])]
fn h() -> std::io::Result<()> { Ok(()) }

fn main() {}

use retry_runtime::robust;

#[robust(when(Timeout, retriez = 2))]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

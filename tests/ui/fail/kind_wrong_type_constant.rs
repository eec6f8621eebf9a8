use retry_runtime::robust;

const BUSY: u32 = 503;

#[robust(on = [BUSY])]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

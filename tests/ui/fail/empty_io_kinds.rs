use retry_runtime::robust;

#[robust(on = [Io()])]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

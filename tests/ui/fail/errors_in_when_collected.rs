use retry_runtime::robust;

#[robust(when(Io(), retries = 1), retrys = 1, when(Timeout, retriez = 2, scale = 0))]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

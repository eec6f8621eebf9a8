use retry_runtime::robust;

#[robust(on_error = |e: &String, _n: u32| eprintln!("{e}"))]
fn f() -> std::io::Result<()> { Ok(()) }

#[robust(on_retry = |e: &String, _i: &retry_runtime::RetryInfo| eprintln!("{e}"))]
fn g() -> std::io::Result<()> { Ok(()) }

fn main() {}

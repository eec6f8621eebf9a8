use retry_runtime::robust;

#[robust(on_error = |e: &std::io::Error| eprintln!("{e}"))]
fn f() -> Result<(), String> { Ok(()) }

fn main() {}

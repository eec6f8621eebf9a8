use retry_runtime::robust;

#[robust(attempt = url)]
fn f(url: &str) -> std::io::Result<()> { let _ = url; Ok(()) }

fn main() {}

use retry_runtime::robust;

#[robust(budget = , retries = 1)]
fn f() -> std::io::Result<()> { Ok(()) }

#[robust(on_error = )]
fn g() -> std::io::Result<()> { Ok(()) }

fn main() {}

use retry_runtime::robust;

// `Timeout` and `Io` are kinds, not patterns: inside `|` or parentheses they would be read as
// names. A binding with `_` matches every error.
#[robust(on = [Timeout | Io])]
fn f() -> std::io::Result<()> { Ok(()) }

#[robust(on = [(Io)], when(e @ _, retries = 1))]
fn g() -> std::io::Result<()> { Ok(()) }

fn main() {}

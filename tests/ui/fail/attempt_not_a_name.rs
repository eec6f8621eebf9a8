use retry_runtime::robust;

#[robust(attempt = 3)]
fn f() -> Result<(), String> { Ok(()) }

// `_` binds nothing (a blocking fn's `timeout` would then go unread, silently).
#[robust(timeout = "2s", attempt = _)]
fn g() -> std::io::Result<()> { Err(std::io::ErrorKind::Other.into()) }

fn main() {}

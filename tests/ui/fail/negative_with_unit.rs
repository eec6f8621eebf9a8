use retry_runtime::robust;

// The sign does not hide the unit or the magnitude: these are errors, not "infinite".
#[robust(max_delay = -1min, timeout = -1e400)]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

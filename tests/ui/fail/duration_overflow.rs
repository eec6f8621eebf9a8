use retry_runtime::robust;

#[robust(timeout = "18446744073709551615s 1000000000ns", max_delay = 18446744073709551615h)]
fn f() -> std::io::Result<()> { Ok(()) }

fn main() {}

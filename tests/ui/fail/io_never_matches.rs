use retry_runtime::robust;

#[robust(on = [Io])]
fn f() -> Result<(), String> { Err("no".into()) }

#[robust(when(Io(ConnectionReset), retries = 1))]
fn g() -> Result<(), String> { Err("no".into()) }

fn main() {}

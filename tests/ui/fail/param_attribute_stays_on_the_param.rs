// A parameter's attributes apply to that parameter alone: an `allow` on it must not silence a
// lint on the body's statements (here an unused local, denied).
#![deny(unused_variables)]
use std::io;

use retry_runtime::robust;

#[robust(retries = 2)]
fn leak(#[allow(unused_variables)] name: String) -> io::Result<usize> {
    let forgotten = 1;
    Ok(name.len())
}

#[robust(retries = 2)]
async fn leak_async(#[allow(unused_variables)] name: String) -> io::Result<usize> {
    let forgotten = 1;
    Ok(name.len())
}

fn main() {
    let _ = leak(String::new());
    let _ = leak_async(String::new());
}

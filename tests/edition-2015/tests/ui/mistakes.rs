extern crate retry_runtime;

use retry_runtime::robust;
use std::io;

#[robust(retries = 2, timeout = 5)]
fn blocking_timeout() -> io::Result<u32> { Ok(1) }

#[robust(backof = none)]
fn misspelled_key() -> io::Result<u32> { Ok(1) }

fn main() {}

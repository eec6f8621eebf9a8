//! Lints forbidden by the crate stay forbidden under the attribute: what it writes allows none
//! of them (an `allow` under `forbid` is an error). The mark a retrying expansion leaves for a
//! second `#[robust]` is an unnamed `const` (never dead code); the attempt's clone of an owned
//! parameter only the fallback reads is borrowed once (not an unused variable); an async body
//! that ends in a `return` leaves nothing unreachable after it.
#![forbid(dead_code, unused_variables, unused_mut, unreachable_code)]

use retry_runtime::robust;

#[robust(retries = 2, backoff = none, fallback = move |_| Ok(name.len()))]
pub fn fallback_reads_it(name: String) -> std::io::Result<usize> {
    Err(std::io::ErrorKind::Other.into())
}

#[robust(retries = 2, backoff = none)]
pub async fn ends_in_a_return(name: &str) -> std::io::Result<&str> {
    tokio::task::yield_now().await;
    return Ok(name);
}

fn main() {
    let _ = fallback_reads_it(String::new());
    let _ = ends_in_a_return("");
}

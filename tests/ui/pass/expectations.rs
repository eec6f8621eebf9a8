//! `#[expect(..)]` on the fn or a parameter becomes `#[allow(..)]` under the attribute: the
//! code it writes reads each parameter it rebinds (its clone for an attempt), so the lint an
//! expectation names may fire elsewhere or not at all, and an unfulfilled expectation would be
//! a warning of the attribute's making. (Denied here: each would be an error.) Each parameter
//! below is one the body does not read but an expression of the attribute does (the fallback),
//! or one whose `mut` the attempt's binding takes over.
#![deny(unfulfilled_lint_expectations)]

use std::io;

use retry_runtime::robust;

#[robust(retries = 2, backoff = none, fallback = move |_| Ok(name.len()))]
pub fn on_a_parameter(#[expect(unused_variables)] name: String) -> io::Result<usize> {
    Err(io::ErrorKind::Other.into())
}

#[robust(retries = 2, backoff = none, fallback = move |_| Ok(name.len()))]
pub fn under_cfg_attr(
    #[cfg_attr(all(), expect(unused_variables))] name: String,
) -> io::Result<usize> {
    Err(io::ErrorKind::Other.into())
}

#[robust(retries = 2, backoff = none)]
pub fn on_a_mut_parameter(#[expect(unused_mut)] mut kept: String) -> io::Result<usize> {
    Ok(kept.len())
}

#[robust(retries = 2, backoff = none, fallback = move |_| Ok(name.len()))]
#[expect(unused_variables, reason = "only the fallback reads it")]
pub async fn on_the_fn(name: String) -> io::Result<usize> {
    tokio::task::yield_now().await;
    Err(io::ErrorKind::Other.into())
}

fn main() {
    let _ = on_a_parameter(String::new());
    let _ = under_cfg_attr(String::new());
    let _ = on_a_mut_parameter(String::new());
    let _ = on_the_fn(String::new());
}

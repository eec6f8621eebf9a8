// A `fallback` that can never be called: every error is retried for ever (negative `retries`,
// no `on` list, no finite `max_delay` or `deadline`, no guard), so the call returns only a
// success. An error at the fallback.
use std::io;

use retry_runtime::robust;

#[robust(retries = -1, fallback = |_e: io::Error| Ok(0))]
fn forever() -> io::Result<u32> { Ok(1) }

// A `when` that retries for ever too, and an infinite `max_delay` written out.
#[robust(retries = -1, max_delay = none, when(Io(ConnectionRefused), retries = -1),
         fallback = |_e: io::Error| Ok(0))]
fn forever_with_a_when() -> io::Result<u32> { Ok(1) }

#[robust(retries = -1, timeout = 1s, fallback = |e: io::Error| async move { Err(e) })]
async fn forever_async() -> io::Result<u32> { tokio::task::yield_now().await; Ok(1) }

// (Fine: something ends the retries.)
static BUDGET: retry_runtime::RetryBudget = match retry_runtime::RetryBudget::new(10.0, 0.1, 1.0) {
    Ok(b) => b,
    Err(_) => panic!(),
};
#[robust(retries = -1, max_delay = 10s, fallback = |_e: io::Error| Ok(0))]
fn bounded_by_max_delay() -> io::Result<u32> { Ok(1) }
#[robust(retries = -1, on = [Io(ConnectionRefused)], fallback = |_e: io::Error| Ok(0))]
fn other_errors_not_retried() -> io::Result<u32> { Ok(1) }
#[robust(retries = -1, deadline = 10s, fallback = |e: io::Error| async move { Err(e) })]
async fn bounded_by_a_deadline() -> io::Result<u32> { tokio::task::yield_now().await; Ok(1) }
#[robust(retries = -1, when(Io(ConnectionRefused), retries = 2), fallback = |_e: io::Error| Ok(0))]
fn a_when_gives_up() -> io::Result<u32> { Ok(1) }
#[robust(retries = -1, budget = BUDGET, fallback = |_e: io::Error| Ok(0))]
fn a_budget_runs_dry() -> io::Result<u32> { Ok(1) }

fn main() {}

// Where no retry is ever made (`retries = 0`, at the top level with no `when` that retries, or
// in a `when`), the keys that shape retries have no effect: each is an error.
use std::io;

use retry_runtime::robust;

#[robust(retries = 0, backoff = constant(base = 1s), jitter = none, scale = 2, max_delay = 10s)]
fn top_level() -> io::Result<()> { Ok(()) }

#[robust(retries = 0, hint = |_e: &io::Error| Some(std::time::Duration::from_secs(1)), on_retry = |_o, _i| {})]
fn callbacks() -> io::Result<()> { Ok(()) }

#[robust(when(Io, retries = 0, backoff = constant(base = 1s)))]
fn in_a_when() -> io::Result<()> { Ok(()) }

// `max_delay = 0` never retries either, whatever `retries` says.
#[robust(max_delay = 0, retries = 5, backoff = constant(base = 1s))]
fn no_delay() -> io::Result<()> { Ok(()) }

// The top-level `hint` reads errors: where only values are retried (`on` lists only `Ok(..)`
// kinds, and no `when` on an error retries), it is never called.
#[robust(on = [Ok(|v: &u16| *v == 503)], hint = |_e: &io::Error| Some(std::time::Duration::from_secs(1)))]
fn hint_where_only_values_retry() -> io::Result<u16> { Ok(200) }
#[robust(retries = 0, when(Ok(|v: &u16| *v == 503), retries = 3),
         hint = |_e: &io::Error| Some(std::time::Duration::from_secs(1)))]
fn hint_where_only_a_value_when_retries() -> io::Result<u16> { Ok(200) }
// (Fine: an error rule retries too.)
#[robust(on = [Ok(|v: &u16| *v == 503), Io], hint = |_e: &io::Error| Some(std::time::Duration::from_secs(1)))]
fn fine_hint_beside_an_error_kind() -> io::Result<u16> { Ok(200) }
#[robust(on = [Ok(|v: &u16| *v == 503)], when(Io, retries = 2),
         hint = |_e: &io::Error| Some(std::time::Duration::from_secs(1)))]
fn fine_hint_with_an_error_when() -> io::Result<u16> { Ok(200) }

static BUDGET: retry_runtime::RetryBudget = match retry_runtime::RetryBudget::new(5.0, 0.1, 1.0) {
    Ok(b) => b,
    Err(_) => panic!(),
};

// The top level's rule never retries and the one `when` that does sets its own backoff and
// jitter: the top level's are read by no rule.
#[robust(retries = 0, backoff = constant(base = 1s), jitter = none,
         when(Timeout, retries = 3, backoff = exponential(base = 100ms, max = 5s), jitter = full),
         timeout = 1s)]
async fn every_retrying_when_sets_its_own() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// With `max_delay = 0` the reason, the top level's `retries` is one of them.
#[robust(max_delay = 0, retries = 4, when(Timeout, retries = 2, max_delay = 10s), timeout = 1s)]
async fn retries_every_when_sets() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// Fine: a `when` that retries takes the top level's backoff; `retries = 0` alone; a timeout;
// a budget that hedges spend; a budget that a fn which never retries pays into (each call
// deposits, for the fns sharing it that retry).
#[robust(retries = 0, backoff = constant(base = 1s), when(Timeout, retries = 3), timeout = 1s)]
async fn a_when_retries() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(retries = 0, timeout = 1s)]
async fn no_retries() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(retries = 0, hedge(after = 50ms), budget = BUDGET)]
async fn hedges_spend_it() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(retries = 0, budget = BUDGET)]
fn pays_in() -> io::Result<()> { Ok(()) }

fn main() {}

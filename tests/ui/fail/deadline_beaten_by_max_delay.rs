// A blocking fn's deadline stops retries (a running attempt cannot be cut), and where every
// rule that retries has a `max_delay` shorter than the deadline, that stops them first: with
// nothing reading the attempt's context, the deadline does nothing.
use retry_runtime::robust;

#[robust(deadline = 1s, max_delay = 500ms, retries = 10, backoff = constant(base = 10ms), jitter = none)]
fn max_delay_first() -> std::io::Result<()> { Ok(()) }

#[robust(deadline = 2s, max_delay = 1s, when(Io(ConnectionReset), retries = 2, max_delay = 300ms))]
fn every_rule_first() -> std::io::Result<()> { Ok(()) }

// (Fine: a rule without a `max_delay` of its own reaches the deadline; the body reads it; a
// rule on `Timeout` sees errors returned after it; an async fn's deadline cuts its attempt.)
#[robust(deadline = 2s, max_delay = 1s, when(Io(ConnectionReset), retries = 2, max_delay = -1))]
fn a_rule_reaches_it() -> std::io::Result<()> { Ok(()) }
#[robust(deadline = 1s, max_delay = 500ms, attempt = ctx)]
fn read() -> std::io::Result<()> { let _ = ctx.is_expired(); Ok(()) }
#[robust(deadline = 1s, max_delay = 500ms, on = [Timeout, Io])]
fn timeout_rule() -> std::io::Result<()> { Ok(()) }
#[robust(deadline = 1s, max_delay = 500ms)]
async fn cut() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

fn main() {}

// A blocking fn's timeout is cooperative: with no attempt context to read it and no rule on
// `Timeout` (which an error returned after it matches), it does nothing.
use retry_runtime::robust;

#[robust(timeout = 2s)]
fn fixed() -> std::io::Result<()> { Ok(()) }

#[robust(timeout = adaptive(p = 99, min = 10ms, max = 1s), retries = 2)]
fn adaptive() -> std::io::Result<()> { Ok(()) }

// With no retry made, a deadline stops nothing, and a rule on `Timeout` changes nothing.
#[robust(retries = 0, deadline = 2s)]
fn deadline_without_retries() -> std::io::Result<()> { Ok(()) }

#[robust(timeout = 1s, on = [Timeout], retries = 0)]
fn timeout_rule_without_retries() -> std::io::Result<()> { Ok(()) }

// (`max_delay = 0`: no retry can start either.)
#[robust(max_delay = 0, deadline = 2s)]
fn deadline_without_time_to_retry() -> std::io::Result<()> { Ok(()) }

// Naming the attempt's context is not reading it: a name the body never mentions.
#[robust(timeout = 2s, attempt = ctx)]
fn named_and_not_read() -> std::io::Result<()> { Ok(()) }

#[robust(timeout = 2s, attempt = _ctx)]
fn named_not_to_be_read() -> std::io::Result<()> { Ok(()) }

// A field of the same name is not the context.
struct Conn { ctx: u32 }
#[robust(timeout = 2s, attempt = ctx)]
fn a_field_of_that_name(c: &Conn) -> std::io::Result<u32> { Ok(c.ctx) }

// An async fn whose body never awaits runs each attempt to its end at its first poll: its
// timeout is cooperative too.
#[robust(timeout = 2s)]
async fn async_without_an_await() -> std::io::Result<u64> { Ok(std::fs::metadata("x")?.len()) }
// (A negation after a keyword is no macro that could hide an await.)
#[robust(timeout = 2s)]
async fn async_with_a_negation(ready: bool) -> std::io::Result<()> {
    if !(ready) { return Err(std::io::ErrorKind::WouldBlock.into()); }
    Ok(())
}

// Asking the context for the attempt's number or start reads no limit.
#[robust(timeout = 2s, attempt = ctx)]
fn only_the_number() -> std::io::Result<u32> { Ok(ctx.number() + ctx.retries()) }
#[robust(timeout = 2s, attempt = ctx)]
fn only_the_start() -> std::io::Result<std::time::Duration> { let _ = ctx.started(); Ok(ctx.elapsed()) }

// What is fine: the attempt's context read by the body (under a `cfg` too), or passed on (a
// helper may read its limit), a rule on `Timeout`, an async fn
// (whose attempts the timeout cancels).
#[robust(timeout = 2s, attempt = ctx)]
fn read(deadline_seen: &mut bool) -> std::io::Result<()> {
    *deadline_seen = ctx.deadline().is_some();
    Ok(())
}

#[robust(timeout = 2s, attempt = ctx)]
fn read_in_a_format_string() -> std::io::Result<String> {
    Ok(format!("{ctx:p}"))
}

#[robust(timeout = 2s, attempt = _ctx)]
fn read_under_a_cfg() -> std::io::Result<()> {
    #[cfg(any())]
    let _ = _ctx.is_expired();
    Ok(())
}

fn stop_when_expired(ctx: &retry_runtime::Attempt<'_>) -> bool { ctx.is_expired() }
#[robust(timeout = 2s, attempt = ctx)]
fn passed_on() -> std::io::Result<u32> { let _ = stop_when_expired(ctx); Ok(ctx.number()) }

#[robust(timeout = 2s, on = [Timeout])]
fn timeout_rule() -> std::io::Result<()> { Ok(()) }

#[robust(timeout = 2s, on = [Timeout])]
async fn async_without_an_await_and_a_timeout_rule() -> std::io::Result<u64> { Ok(std::fs::metadata("x")?.len()) }

// (A hedge beside a body that never awaits is refused for itself: `hedge_never_awaits.rs`.)

#[robust(timeout = 2s, when(Timeout, retries = 1))]
fn timeout_when() -> std::io::Result<()> { Ok(()) }

#[robust(retries = 0, deadline = 2s, attempt = ctx)]
fn deadline_read() -> std::io::Result<()> { let _ = ctx.remaining(); Ok(()) }

#[robust(retries = 1, deadline = 2s)]
fn deadline_stops_retries() -> std::io::Result<()> { Ok(()) }

#[robust(timeout = 2s)]
async fn cancelled() -> std::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

fn main() {}

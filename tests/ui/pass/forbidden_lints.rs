//! Lints forbidden by the crate stay forbidden under the attribute: what it writes allows none
//! of them (an `allow` under `forbid` is an error, and a future-compatibility warning under a
//! forbidden group such as `warnings`). The mark a retrying expansion leaves for a second
//! `#[robust]` is an unnamed `const` (never dead code); the attempt's clone of an owned
//! parameter only the fallback reads is borrowed once (not an unused variable), and a unique
//! borrow only the fallback reads is not reborrowed by the attempts; an async body
//! that ends in a `return` leaves nothing unreachable after it; the probes' traits come in by
//! one glob import each, used whichever trait answers; the rules' patterns are checked against
//! a non-exhaustive value (its last arm is never unreachable); the names a parameter's pattern
//! binds for the attribute's expressions are each used once; a body on its braces' line, whose
//! attempt binds a clone or the context, is not a block of needless braces (`unused_braces`).
#![forbid(
    dead_code,
    unused_variables,
    unused_mut,
    unreachable_code,
    unused_imports,
    unused_parens,
    unreachable_patterns
)]
// Every other warning too (a shorthand field pattern written in full, unnecessary braces).
#![deny(warnings)]

use std::io;
use std::sync::LazyLock;

use retry_runtime::{CircuitBreaker, robust};

#[robust(retries = 2, backoff = none, fallback = move |_| Ok(name.len()))]
pub fn fallback_reads_it(name: String) -> io::Result<usize> {
    Err(io::ErrorKind::Other.into())
}

// Unique borrows only the fallback reads: no attempt reborrows them (no unused variable).
#[robust(retries = 2, backoff = none, fallback = move |_| {
    out.push(1);
    if let Some(n) = more { *n += 1; }
    let _ = pinned;
    Ok(out.len())
})]
pub fn fallback_reads_borrows(
    out: &mut Vec<u8>,
    more: Option<&mut u32>,
    pinned: std::pin::Pin<&mut u32>,
) -> io::Result<usize> {
    Err(io::ErrorKind::Other.into())
}

#[robust(retries = 2, backoff = none)]
pub async fn ends_in_a_return(name: &str) -> io::Result<&str> {
    tokio::task::yield_now().await;
    return Ok(name);
}

#[derive(Debug, PartialEq)]
pub enum Load {
    Busy,
    Fine,
    Other,
}

// Error and value patterns, in `on` and in `when`s, one taken by a `when` too; a timeout (the
// inspector's probe) and an async fallback (the fallback's probe).
#[robust(
    retries = 2,
    backoff = none,
    timeout = "1s",
    on = [Io(ConnectionReset), Timeout, Ok(Load::Busy)],
    when(Ok(Load::Busy), retries = 1),
    fallback = |_| async { Ok(Load::Other) }
)]
pub async fn patterns(fine: bool) -> io::Result<Load> {
    tokio::task::yield_now().await;
    Ok(if fine { Load::Fine } else { Load::Busy })
}

// Error patterns that together take every error: the check's last arm is still reachable.
#[robust(retries = 2, backoff = none, on = [true, false])]
pub fn every_error() -> Result<u32, bool> {
    Ok(1)
}

static BREAKER: LazyLock<CircuitBreaker> = LazyLock::new(|| {
    CircuitBreaker::new(10, 3, 0.5, std::time::Duration::from_secs(1), 1).expect("valid")
});

// A guard checked by value (the guard's probe); a pattern parameter whose names the fallback
// reads, one of them `mut`, one not at all; the events' error writer.
#[robust(
    retries = 2,
    backoff = none,
    breaker = &*BREAKER,
    on = [Io],
    on_retry = |e, _| eprintln!("{e:?}"),
    fallback = move |_| {
        bytes.push(1);
        Ok(bytes.len() + n)
    }
)]
pub fn pattern_parameter((mut bytes, n, _unused): (Vec<u8>, usize, u8)) -> io::Result<usize> {
    bytes.push(0);
    Ok(bytes.len() + n)
}

// A struct's field shorthand: the view binds `x`, which the callback reads, and not `y`.
#[derive(Clone)]
pub struct Point {
    pub x: u32,
    pub y: u32,
}

#[robust(retries = 2, backoff = none, on_retry = |_, _| eprintln!("{x}"))]
pub fn shorthand(Point { x, y }: Point) -> io::Result<u32> {
    Ok(x + y)
}

// The type probe of a fallback beside `on = [Io]` for an error that is not `io::Error`.
#[derive(Debug)]
pub struct Wrapped(io::Error);
impl std::fmt::Display for Wrapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
impl std::error::Error for Wrapped {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}
pub type WrappedResult<T> = Result<T, Wrapped>;

#[robust(retries = -1, on = [Io], fallback = |_e| Ok(0))]
pub fn another_error() -> WrappedResult<u32> {
    Ok(1)
}

// A `move` callback gets a clone of each owned parameter it names, borrowed once: none is
// an unused variable, not even one the closure binds again, nor one its own parameter
// shadows (that one is not cloned).
#[robust(retries = 2, backoff = none, on_error = move |e, _n| { let name = "x"; eprintln!("{name}: {e}"); })]
pub fn callback_rebinds_it(name: String) -> io::Result<usize> {
    Ok(name.len())
}

#[robust(retries = 2, backoff = none, on_error = move |id, _n| eprintln!("{id}"))]
pub fn callback_parameter_shadows_it(id: u32) -> io::Result<u32> {
    Ok(id)
}

async fn answer(id: u32) -> io::Result<u32> {
    Ok(id)
}

#[robust(retries = 2, backoff = none)]
pub async fn one_line(name: String) -> io::Result<u32> { answer(name.len() as u32).await }

#[robust(retries = 2, backoff = none, timeout = "1s", attempt = ctx)]
pub async fn one_line_ctx(id: u32) -> io::Result<u32> { answer(id + ctx.retries()).await }

#[robust(retries = 2, backoff = none, hedge(after = "10ms"))]
pub async fn one_line_hedged(name: String) -> io::Result<u32> { answer(name.len() as u32).await }

fn main() {
    let _ = one_line(String::new());
    let _ = one_line_ctx(1);
    let _ = one_line_hedged(String::new());
    let _ = callback_rebinds_it(String::new());
    let _ = callback_parameter_shadows_it(1);
    let _ = fallback_reads_it(String::new());
    let _ = ends_in_a_return("");
    let _ = patterns(true);
    let _ = every_error();
    let _ = pattern_parameter((Vec::new(), 1, 2));
    let _ = another_error();
    let _ = shorthand(Point { x: 1, y: 2 });
}

//! Each line marked `// lint: NAME` must get clippy's `NAME` when the crate is built with
//! `--cfg lint_probe` (`.ci/run`, "lints under the attribute"): the lints that read a fn's
//! tail expression find it under `#[robust]` as they do without it. Without the cfg the crate
//! is empty, so the workspace's own `cargo clippy -- -D warnings` does not see these.
#![cfg(lint_probe)]
#![warn(clippy::needless_question_mark, clippy::implicit_return)]
#![allow(clippy::needless_return)]

use std::io;

use retry_runtime::robust;

fn parse(s: &str) -> io::Result<u16> {
    return s.parse().map_err(io::Error::other);
}

/// Without the attribute, for reference.
pub fn plain(s: String) -> io::Result<u16> {
    Ok(parse(&s)?) // lint: needless_question_mark implicit_return
}

/// An owned parameter: each attempt binds a clone before the body's block.
#[robust(retries = 2, backoff = none)]
pub fn owned(s: String) -> io::Result<u16> {
    Ok(parse(&s)?) // lint: needless_question_mark implicit_return
}

/// A `&mut` parameter (reborrowed by each attempt) and the attempt's context.
#[robust(retries = 2, backoff = none, attempt = ctx)]
pub fn reborrowed(s: &mut String, n: &u16) -> io::Result<u16> {
    s.push_str(if ctx.retries() == 0 { "1" } else { "" });
    Ok(parse(s)? + n) // lint: implicit_return
}

/// No binding of the attribute's own.
#[robust(retries = 2, backoff = none)]
pub fn borrowed(s: &str) -> io::Result<u16> {
    Ok(parse(s)?) // lint: needless_question_mark implicit_return
}

/// Async, without bindings of the attribute's own.
#[robust(retries = 2, backoff = none)]
pub async fn borrowed_async(s: &str) -> io::Result<u16> {
    tokio::task::yield_now().await;
    Ok(parse(s)?) // lint: needless_question_mark
}

/// Async with an owned parameter, whose clone each attempt moves into its block.
#[robust(retries = 2, backoff = none, timeout = 1s)]
pub async fn owned_async(s: String) -> io::Result<u16> {
    tokio::task::yield_now().await;
    Ok(parse(&s)?) // lint: needless_question_mark
}

/// Hedged, with an owned parameter.
#[robust(retries = 2, backoff = none, hedge(after = 10ms))]
pub async fn hedged(s: String) -> io::Result<u16> {
    tokio::task::yield_now().await;
    Ok(parse(&s)?) // lint: needless_question_mark
}

// A body on the braces' own line, whose attempt binds something: rustc's `unused_braces`
// must not read the body's braces as a block's needless ones (written on one line, so that
// rustfmt keeps them there).

async fn parse_async(s: &str) -> io::Result<u16> {
    tokio::task::yield_now().await;
    return parse(s);
}

/// Async, with an owned parameter.
#[rustfmt::skip]
#[robust(retries = 2, backoff = none)]
pub async fn one_line_owned(s: String) -> io::Result<u16> { parse_async(&s).await }

/// Async, with the attempt's context.
#[rustfmt::skip]
#[robust(retries = 2, backoff = none, timeout = 1s, attempt = ctx)]
pub async fn one_line_ctx(s: &str) -> io::Result<u16> { parse_async(if ctx.retries() == 0 { s } else { "1" }).await }

/// Hedged, with an owned parameter.
#[rustfmt::skip]
#[robust(retries = 2, backoff = none, hedge(after = 10ms))]
pub async fn one_line_hedged(s: String) -> io::Result<u16> { parse_async(&s).await }

/// Blocking, with an owned parameter.
#[rustfmt::skip]
#[robust(retries = 2, backoff = none)]
pub fn one_line_blocking(s: String) -> io::Result<u16> { parse(&s) } // lint: implicit_return

/// A `return` at the tail, in a body that shares names with the attribute (`Ok`, `Some`) that
/// are not parameters: the attempt keeps the user's spans, and clippy reads the return. (And
/// the check that `None` is a value of the `Ok` type raises no `implicit_return` of its own.)
#[warn(clippy::needless_return)]
#[robust(retries = 2, backoff = none, on = [Io, Ok(Some(0))], when(Ok(None), retries = 1))]
pub fn tail_return(s: &str) -> io::Result<Option<u16>> {
    let v = parse(s)?;
    return Ok(Some(v)); // lint: needless_return
}

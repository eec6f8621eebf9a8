// Kinds and settings that can never act: a `when` behind one that takes every error, a kind of
// `on` that another kind of the list already covers, the same `Io` kinds in another order,
// closures that answer the same whatever they are given, and top-level retry settings that
// every `when` replaces.
use std::io;

use retry_runtime::robust;

// `_` takes every error first: the `Timeout` rule never applies.
#[robust(timeout = 1s, when(_, retries = 1), when(Timeout, retries = 10))]
async fn behind_a_wildcard() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// A closure that always says yes does the same.
#[robust(when(|_e: &io::Error| true, retries = 1), when(Io, retries = 2))]
fn behind_a_closure() -> io::Result<()> { Ok(()) }

// `Io` already takes every error `Io(ConnectionReset)` would.
#[robust(on = [Io, Io(ConnectionReset)])]
fn wider_kind_in_on() -> io::Result<()> { Ok(()) }

// `Io(A, B)` takes every error `Io(A)` would.
#[robust(on = [Io(ConnectionReset), Io(BrokenPipe, ConnectionReset)])]
fn narrower_io_list_in_on() -> io::Result<()> { Ok(()) }

// The same set of `Io` kinds, written in another order.
#[robust(on = [Io(BrokenPipe, ConnectionReset), Io(ConnectionReset, BrokenPipe)])]
fn same_io_kinds_in_on() -> io::Result<()> { Ok(()) }

#[robust(when(Io(BrokenPipe, ConnectionReset), retries = 1),
         when(Io(ConnectionReset, BrokenPipe), retries = 2))]
fn same_io_kinds_in_whens() -> io::Result<()> { Ok(()) }

// A value closure that always says yes retries every success.
#[robust(on = [Ok(|_v: &u16| true)])]
fn every_value() -> io::Result<u16> { Ok(1) }

// A closure that always says no never matches.
#[robust(on = [Io, |_e: &io::Error| false])]
fn never_an_error() -> io::Result<()> { Ok(()) }

#[robust(on = [Ok(|_v: &u16| { false })])]
fn never_a_value() -> io::Result<u16> { Ok(1) }

// Every kind of `on` is taken by a `when` that sets its own `retries` and `backoff`: the top
// level's are read by no rule.
#[robust(retries = 7, backoff = constant(base = 1s), on = [Io],
         when(Io, retries = 2, backoff = none))]
fn top_settings_no_rule_reads() -> io::Result<()> { Ok(()) }

// Without `on` (every error), `_` takes every error first.
#[robust(max_delay = 10s, when(_, retries = 2, max_delay = 5s))]
fn top_max_delay_behind_a_wildcard() -> io::Result<()> { Ok(()) }

// No retry is made and the only attempt is always cut first by its timeout.
#[robust(retries = 0, timeout = 1s, deadline = 5s)]
async fn deadline_after_the_only_timeout() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

#[robust(retries = 0, timeout = adaptive(p = 99, factor = 2, min = 10ms, max = 2s), deadline = 5s)]
async fn deadline_after_the_adaptive_max() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// The attempt's context reads the earlier of the two ends, always the timeout's: the deadline
// is not seen there either, async or blocking.
#[robust(retries = 0, timeout = 1s, deadline = 5s, attempt = ctx)]
async fn deadline_after_the_only_timeout_read() -> io::Result<()> { let _ = ctx.remaining(); tokio::task::yield_now().await; Ok(()) }

#[robust(retries = 0, timeout = 1s, deadline = 5s, attempt = ctx)]
fn blocking_deadline_after_the_only_timeout_read() -> io::Result<()> { let _ = ctx.is_expired(); Ok(()) }

fn main() {}

// A rejected kind leaves the other checks silent (its `when` retries; the deadline is not
// judged without it).
#[robust(retries = 0, timeout = 1s, deadline = 5s, when(Io(ConectionReset), retries = 3))]
async fn typo_in_a_when() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

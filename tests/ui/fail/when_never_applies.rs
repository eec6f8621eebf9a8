// Rules are tried in the order written (`on` last): a `when` (or a kind of `on`) an earlier
// `when` always takes first never applies. With an `io::Error` and a timeout, a timed-out attempt is an `Io` error of kind
// `TimedOut`, so `when(Timeout, ..)` goes before `when(Io, ..)`.
use std::io;

use retry_runtime::robust;

#[robust(when(Io, retries = 1), when(Io(ConnectionReset), retries = 5))]
fn any_io_first() -> io::Result<()> { Ok(()) }

#[robust(when(Io(ConnectionReset, TimedOut), retries = 1), when(Io(TimedOut), retries = 5))]
fn wider_io_first() -> io::Result<()> { Ok(()) }

#[robust(timeout = 1s, when(Io, retries = 2), when(Timeout, retries = 10))]
async fn io_before_timeout() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

#[robust(deadline = 5s, when(Io(TimedOut), retries = 2), when(Timeout, retries = 10))]
async fn timed_out_kind_before_timeout() -> Result<(), std::io::Error> { tokio::task::yield_now().await; Ok(()) }

// Every `io::Error` is an `Io` one, timeouts from the body included; and `on` comes last.
#[robust(when(Io, retries = 2), when(Timeout, retries = 10))]
async fn io_before_timeout_without_a_timeout() -> io::Result<()> { Ok(()) }
#[robust(when(Io(ConnectionReset, BrokenPipe), retries = 2), on = [Timeout, Io(ConnectionReset)])]
fn on_after_a_when() -> io::Result<()> { Ok(()) }

// `Io(TimedOut)` after `Timeout`, which takes every error of kind `TimedOut`.
#[robust(timeout = 1s, when(Timeout, retries = 10), when(Io(TimedOut), retries = 1))]
async fn timed_out_kind_after_timeout() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// Fine: the narrower first; `Timeout` after `Io(TimedOut)` in a blocking fn with a timeout
// (an error it returns late counts as a timeout); another error type.
#[robust(timeout = 1s, when(Timeout, retries = 10), when(Io(ConnectionReset), retries = 5), when(Io, retries = 1))]
async fn narrow_first() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }
#[robust(timeout = 1s, when(Io(TimedOut), retries = 1), when(Timeout, retries = 5))]
fn blocking_late_errors() -> io::Result<()> { Ok(()) }
#[robust(timeout = 1s, when(Io, retries = 1), when(Timeout, retries = 5))]
async fn boxed() -> Result<(), Box<dyn std::error::Error + Send + Sync>> { tokio::task::yield_now().await; Ok(()) }
// tokio's `io::Result` is std's.
#[robust(timeout = 1s, when(Io, retries = 2), when(Timeout, retries = 10))]
async fn tokio_io() -> tokio::io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// (A crate's own `io::Result`, through its path: it may name another error type.)
mod mine {
    pub mod io {
        #[derive(Debug)]
        pub struct Gone;
        impl std::fmt::Display for Gone {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("gone") }
        }
        impl std::error::Error for Gone {}
        impl From<retry_runtime::Elapsed> for Gone {
            fn from(_: retry_runtime::Elapsed) -> Self { Gone }
        }
        pub type Result<T> = std::result::Result<T, Gone>;
    }
}
#[robust(timeout = 1s, when(Io, retries = 1), when(Timeout, retries = 5))]
async fn own_alias() -> crate::mine::io::Result<()> { tokio::task::yield_now().await; Ok(()) }
// Fine: a kind both in `on` and in a `when` is retried, with the `when`'s settings.
#[robust(timeout = 1s, on = [Timeout, Io], when(Timeout, retries = 10), when(Io(ConnectionReset), retries = 2), on_success = || {})]
async fn listed_and_tuned() -> io::Result<()> { tokio::task::yield_now().await; Ok(()) }

// For an `io::Error`, a bare `Io` takes every error: a closure's rule after it never applies.
#[robust(when(Io, retries = 2), when(|e: &std::io::Error| e.raw_os_error() == Some(11), retries = 10))]
fn closure_after_io() -> std::io::Result<()> { Ok(()) }

fn main() {}

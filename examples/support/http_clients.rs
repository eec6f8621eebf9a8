//! Two HTTP clients with the same retry rules, shared by `examples/http.rs` and
//! `tests/http.rs` (`#[path = ...] mod http_clients;` in each):
//!
//! - [`get`]: a `reqwest` call in an `async fn` under `#[robust]`;
//! - [`hyper_client`]: a `hyper-util` client wrapped in [`RobustLayer`].
//!
//! The rules, for an idempotent GET:
//!
//! - each attempt has 500 ms (connect and response head); one that takes longer is cancelled
//!   and retried;
//! - a transport failure (connection refused, connection closed before the answer) is
//!   retried, except that a refused connection is retried only once: nobody is listening, and
//!   hammering the port will not change that;
//! - a 503 or 429 response is retried after the delay its `retry-after-ms` (milliseconds) or
//!   `Retry-After` (seconds, or an HTTP date) header asks for, or after the backoff when it asks for none; when
//!   the retries are used up, the last response is returned as it is (`Ok(503)`);
//! - at most 3 retries, exponential backoff from 50 ms (capped at 1 s) with full jitter.

use std::error::Error as _;
use std::io::ErrorKind;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use retry_runtime::kind::{ClassifyExt, Io, OkIf, Predicate, Timeout};
use retry_runtime::tower::RobustLayer;
use retry_runtime::{ConfigError, Exponential, FullJitter, Policy, robust};
use tower::{Service, ServiceBuilder};

/// The time each attempt has, in both clients.
pub const TIMEOUT: Duration = Duration::from_millis(500);

/// Whether a response asks to be retried later.
pub fn retry_later(status: StatusCode) -> bool {
    status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS
}

/// The delay a response asks for: `retry-after-ms` (milliseconds, as some APIs send next to
/// the standard header) or `Retry-After`, in seconds or as an HTTP date (the time until then,
/// zero for a date already past); `None` for neither, or a value neither form reads: the
/// backoff decides then.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let text = |name: &str| Some(headers.get(name)?.to_str().ok()?.trim());
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<u64>().ok()) {
        return Some(Duration::from_millis(ms));
    }
    let value = text("retry-after")?;
    match value.parse::<u64>() {
        Ok(seconds) => Some(Duration::from_secs(seconds)),
        Err(_) => {
            let at = httpdate::parse_http_date(value).ok()?;
            Some(
                at.duration_since(std::time::SystemTime::now())
                    .unwrap_or_default(),
            )
        }
    }
}

/// Why [`get`] failed.
///
/// `reqwest::Error` cannot be the error type of a fn with a `timeout`: an attempt cut by the
/// timeout fails with `E::from(retry_runtime::Elapsed)`, and reqwest's error has no such
/// conversion. So the fn returns its own error, with a variant for each.
///
/// (reqwest's own per-request timeout would avoid that, but its timeout error carries no
/// `std::io::Error` of kind `TimedOut`, so the `Timeout` kind would not see it: the rule would
/// have to be a closure calling `e.is_timeout()`. One timeout, in the attribute, is simpler.)
///
/// `#[error("...: {0}")]` rather than `#[error(transparent)]`: the message of its own makes
/// `source()` the `reqwest::Error`, so the `Io` kind can walk on to the `io::Error` inside.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The request could not be sent or its answer not read.
    #[error("request failed: {0}")]
    Http(#[from] reqwest::Error),
    /// The attempt ran out of its time.
    #[error("attempt timed out: {0}")]
    TimedOut(#[from] retry_runtime::Elapsed),
}

/// A client for [`get`]: no proxy, whatever the environment says (loopback only).
pub fn reqwest_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder().no_proxy().build()
}

/// GETs `url`; `attempts` counts the attempts made.
///
/// `Io(ConnectionRefused)` finds the `io::Error` deep in reqwest's `source()` chain
/// (`FetchError` -> `reqwest::Error` -> hyper-util's error -> its connect error -> the
/// `io::Error`). A connection the server closes before answering is hyper's
/// `IncompleteMessage`, with no `io::Error` in the chain, so `Io` cannot see it (one it resets
/// has an `io::Error` of kind `ConnectionReset`): reqwest files every transport failure under
/// `is_request()`, which the closure retries.
#[robust(
    timeout = 500ms,
    retries = 3,
    backoff = exponential(base = 50ms, max = 1s),
    jitter = full,
    max_delay = 10s, // a server's `Retry-After` replaces the backoff: no retry waits past 10 s
    on = [Timeout, |e: &FetchError| matches!(e, FetchError::Http(e) if e.is_request())],
    when(Io(ConnectionRefused), retries = 1),
    when(Ok(|r: &reqwest::Response| retry_later(r.status())),
         hint = |r: &reqwest::Response| retry_after(r.headers())),
)]
pub async fn get(
    client: &reqwest::Client,
    url: &str,
    attempts: &AtomicU32,
) -> Result<reqwest::Response, FetchError> {
    attempts.fetch_add(1, Ordering::Relaxed);
    Ok(client.get(url).send().await?)
}

/// The error of [`hyper_client`]. hyper-util's error cannot be built from
/// `retry_runtime::Elapsed`, which the policy's timeout needs, so the service maps it into a
/// boxed error (which can, and which the `Io` and `Timeout` kinds can look inside).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A transport failure of hyper-util's client: it could not connect, or the connection closed
/// before the answer (hyper's `IncompleteMessage`, which carries no `io::Error`).
fn transport_failure(e: &BoxError) -> bool {
    let Some(e) = e.downcast_ref::<hyper_util::client::legacy::Error>() else {
        return false;
    };
    e.is_connect()
        || e.source()
            .and_then(|s| s.downcast_ref::<hyper::Error>())
            .is_some_and(hyper::Error::is_incomplete_message)
}

/// A hyper-util client under the same rules as [`get`]; `attempts` counts the requests sent
/// (a layer below the retries sees each attempt).
pub fn hyper_client(
    attempts: Arc<AtomicU32>,
) -> Result<
    impl Service<Request<Full<Bytes>>, Response = Response<Incoming>, Error = BoxError, Future: Send>
    + Clone
    + Send
    + 'static,
    ConfigError,
> {
    let policy = Policy::builder()
        .name("hyper_client")
        .timeout(TIMEOUT)
        .retries(3)
        .backoff(Exponential::new(
            Duration::from_millis(50),
            Duration::from_secs(1),
            2.0,
        )?)
        .jitter(FullJitter)
        .max_delay(Duration::from_secs(10)) // bounds a server's `Retry-After` too
        .on(Timeout
            .or(Io::of([ErrorKind::ConnectionReset]))
            .or(Predicate(transport_failure)))
        .when(Io::of([ErrorKind::ConnectionRefused]), |s| s.retries(1))
        .when_ok(
            OkIf(|r: &Response<Incoming>| retry_later(r.status()))
                .hint(|r: &Response<Incoming>| retry_after(r.headers())),
            |s| s,
        )
        .build()?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    Ok(ServiceBuilder::new()
        .layer(RobustLayer::new(policy))
        .map_request(move |req: Request<Full<Bytes>>| {
            attempts.fetch_add(1, Ordering::Relaxed);
            req
        })
        .map_err(BoxError::from)
        .service(client))
}

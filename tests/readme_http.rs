//! The README's "With tower and reqwest" code, compiled and run against the fault server of
//! `examples/http.rs` on 127.0.0.1. Each module's body between its `README` markers is one of
//! the section's code blocks, indented by four spaces here (checked by
//! `the_readme_shows_this_code`).

#[path = "../examples/support/http_server.rs"]
#[allow(dead_code)]
mod http_server;

mod with_reqwest {
    // README: from here
    use std::time::Duration;

    use retry_runtime::robust;

    #[derive(Debug, thiserror::Error)]
    pub enum FetchError {
        #[error("request failed: {0}")]
        Http(#[from] reqwest::Error),
        #[error("attempt timed out: {0}")]
        TimedOut(#[from] retry_runtime::Elapsed),
    }

    /// The delay a `Retry-After: <seconds>` header asks for.
    fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
        let seconds = headers
            .get("retry-after")?
            .to_str()
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Some(Duration::from_secs(seconds))
    }

    // `max_delay`: a server's `Retry-After` replaces the backoff; no retry waits past 10 s.
    #[robust(timeout = 500ms, retries = 3, backoff = exponential(base = 50ms, max = 1s), max_delay = 10s,
             on = [Timeout, |e: &FetchError| matches!(e, FetchError::Http(e) if e.is_request())],
             when(Ok(|r: &reqwest::Response| r.status() == 503 || r.status() == 429),
                  hint = |r: &reqwest::Response| retry_after(r.headers())))]
    pub async fn get(client: &reqwest::Client, url: &str) -> Result<reqwest::Response, FetchError> {
        Ok(client.get(url).send().await?)
    }
    // README: to here
}

mod with_tower {
    // README: from here
    use std::error::Error;
    use std::io::ErrorKind;
    use std::time::Duration;

    use bytes::Bytes;
    use http::{HeaderMap, Request, Response, StatusCode};
    use http_body_util::Full;
    use hyper::body::Incoming;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use retry_runtime::kind::{ClassifyExt, Io, OkIf, Predicate, Timeout};
    use retry_runtime::tower::RobustLayer;
    use retry_runtime::{ConfigError, Policy};
    use tower::{Service, ServiceBuilder};

    pub type BoxError = Box<dyn Error + Send + Sync>;

    /// Could not connect, or the connection closed before the answer (hyper's
    /// `IncompleteMessage`, which has no `io::Error` for `Io` to see).
    fn transport_failure(e: &BoxError) -> bool {
        let Some(e) = e.downcast_ref::<hyper_util::client::legacy::Error>() else {
            return false;
        };
        e.is_connect()
            || e.source()
                .and_then(|s| s.downcast_ref::<hyper::Error>())
                .is_some_and(hyper::Error::is_incomplete_message)
    }

    /// The delay a `Retry-After: <seconds>` header asks for.
    fn retry_after(headers: &HeaderMap) -> Option<Duration> {
        let seconds = headers
            .get("retry-after")?
            .to_str()
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Some(Duration::from_secs(seconds))
    }

    pub fn client() -> Result<
        impl Service<
            Request<Full<Bytes>>,
            Response = Response<Incoming>,
            Error = BoxError,
            Future: Send,
        > + Clone
        + Send
        + 'static,
        ConfigError,
    > {
        let policy = Policy::builder()
            .timeout(Duration::from_millis(500))
            .retries(3)
            .max_delay(Duration::from_secs(10)) // a longer `Retry-After` ends the retries
            .on(Timeout
                .or(Io::of([ErrorKind::ConnectionReset]))
                .or(Predicate(transport_failure)))
            .when_ok(
                OkIf(|r: &Response<Incoming>| r.status() == StatusCode::SERVICE_UNAVAILABLE)
                    .hint(|r: &Response<Incoming>| retry_after(r.headers())),
                |s| s,
            )
            .build()?;
        let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
        Ok(ServiceBuilder::new()
            .layer(RobustLayer::new(policy))
            .map_err(BoxError::from) // the error needs `From<Elapsed>` with a timeout
            .service(client))
    }
    // README: to here
}

use http::{Request, StatusCode};
use http_body_util::Full;
use http_server::FaultServer;
use tower::ServiceExt;

#[tokio::test]
async fn both_retry_what_they_say() {
    let server = FaultServer::start().await.expect("a loopback server");
    let url = |path: &str, id: &str| server.url(&format!("{path}id={id}"));

    // A 429, then a 200 after the backoff; a reset connection, retried.
    let client_reqwest = || reqwest::Client::builder().no_proxy().build().unwrap();
    let client = client_reqwest();
    let r = with_reqwest::get(&client, &url("/throttled?", "reqwest-429")).await;
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!(server.hits("reqwest-429"), 2);
    let r = with_reqwest::get(&client, &url("/reset?", "reqwest-reset")).await;
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!(server.hits("reqwest-reset"), 2);

    // A 503 asking for no wait, then a 200; a connection closed without an answer, retried;
    // one reset, retried.
    let client = with_tower::client().unwrap();
    for (path, id) in [
        ("/unavailable?retry_after=0&", "tower-503"),
        ("/close?", "tower-close"),
        ("/reset?", "tower-reset"),
    ] {
        let request = Request::get(url(path, id)).body(Full::default()).unwrap();
        let r = client.clone().oneshot(request).await;
        assert_eq!(r.unwrap().status(), StatusCode::OK, "{id}");
        assert_eq!(server.hits(id), 2, "{id}");
    }
    // The client's type promises `Send` futures: a request runs in a task spawned from an
    // `async move` block (an axum handler's future is checked the same way).
    let c = client.clone();
    let request = Request::get(url("/unavailable?retry_after=0&", "tower-spawned"))
        .body(Full::default())
        .unwrap();
    let r = tokio::spawn(async move { c.oneshot(request).await })
        .await
        .unwrap();
    assert_eq!(r.unwrap().status(), StatusCode::OK);
    assert_eq!(server.hits("tower-spawned"), 2);
    // This block's rules name only the 503: a 429 is the answer, not retried (the example's
    // hyper client, whose row the README's table shows, retries it too).
    let request = Request::get(url("/throttled?", "tower-429"))
        .body(Full::default())
        .unwrap();
    let r = client.clone().oneshot(request).await;
    assert_eq!(r.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(server.hits("tower-429"), 1);

    // A `Retry-After` of an hour is past `max_delay`: no retry, the 503 is the answer, at once
    // (bounded: a regression that honoured the hour fails here instead of sleeping).
    let start = std::time::Instant::now();
    let bound = std::time::Duration::from_secs(5);
    let r = tokio::time::timeout(
        bound,
        with_reqwest::get(
            &client_reqwest(),
            &url("/unavailable?retry_after=3600&", "reqwest-hour"),
        ),
    )
    .await
    .expect("answered at once");
    assert_eq!(r.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    let request = Request::get(url("/unavailable?retry_after=3600&", "tower-hour"))
        .body(Full::default())
        .unwrap();
    let r = tokio::time::timeout(bound, client.clone().oneshot(request))
        .await
        .expect("answered at once");
    assert_eq!(r.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        (server.hits("reqwest-hour"), server.hits("tower-hour")),
        (1, 1)
    );
    assert!(start.elapsed() < bound, "{:?}", start.elapsed());
    server.shutdown().await;
}

/// The code blocks of the README's section, in order, are the modules' bodies above.
#[test]
fn the_readme_shows_this_code() {
    let readme = include_str!("../README.md");
    let section = readme
        .split("\n## With tower and reqwest\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the README's section");
    let blocks: Vec<&str> = section
        .split("```rust\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap_or(b))
        .collect();
    let here = include_str!("readme_http.rs");
    let bodies: Vec<String> = here
        .split("    // README: from here\n")
        .skip(1)
        .map(|b| {
            b.split("    // README: to here")
                .next()
                .unwrap_or(b)
                .lines()
                .map(|l| l.strip_prefix("    ").unwrap_or(l))
                .map(|l| format!("{l}\n"))
                .collect()
        })
        .collect();
    assert_eq!(bodies.len(), 2);
    assert_eq!(blocks.len(), bodies.len(), "one README block per module");
    for (block, body) in blocks.iter().zip(&bodies) {
        assert_eq!(*block, body.as_str());
    }
}

//! The size of an annotated async fn's future: at most 128 bytes more than the body's own
//! future without a timeout, and than `tokio::time::timeout` around the body with one.
//! (Sizes, not times: they do not depend on the machine.) With the `tracing` feature, which
//! this workspace's tests enable, a call keeps the first-attempt instant and deadline for its
//! events: 32 bytes more, allowed for below.

use std::hint::black_box;
use std::io;
use std::time::Duration;

use retry_runtime::robust;

async fn body(x: u64) -> io::Result<u64> {
    Ok(black_box(x).wrapping_mul(3))
}

#[robust(retries = 3, backoff = exponential(base = "100ms", max = "20s"), jitter = full)]
async fn plain(x: u64) -> io::Result<u64> {
    body(x).await
}

#[robust(timeout = "2s", retries = 3, backoff = exponential(base = "100ms", max = "20s"), jitter = full)]
async fn timed(x: u64) -> io::Result<u64> {
    body(x).await
}

async fn hand_timeout(x: u64) -> io::Result<u64> {
    tokio::time::timeout(Duration::from_secs(2), body(x)).await?
}

#[test]
fn the_wrapper_adds_at_most_128_bytes() {
    let body = size_of_val(&body(1));
    let plain = size_of_val(&plain(1));
    let timed = size_of_val(&timed(1));
    let hand = size_of_val(&hand_timeout(1));
    let allowed = 128
        + if retry_runtime::__private::TRACING {
            32
        } else {
            0
        };
    assert!(
        plain <= body + allowed,
        "without a timeout: {plain} bytes, body {body}"
    );
    assert!(
        timed <= hand + allowed,
        "with a timeout: {timed} bytes, hand-written {hand}"
    );
}

use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use retry_runtime::robust;
use retry_runtime::time::VirtualTime;

static CALLS: AtomicU32 = AtomicU32::new(0);

#[robust(retries = 3, backoff = constant(base = "1s"), jitter = none)]
fn flaky(fail: u32) -> io::Result<u32> {
    let n = CALLS.fetch_add(1, Ordering::SeqCst) + 1;
    if n <= fail {
        return Err(ErrorKind::Other.into());
    }
    Ok(n)
}

#[test]
fn basic() {
    let time = VirtualTime::new();
    let _g = time.install();
    assert_eq!(flaky(2).unwrap(), 3);
    assert_eq!(time.sleeps(), vec![Duration::from_secs(1); 2]);
}

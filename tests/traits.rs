//! `#[robust]` on trait impl methods, `async fn` in traits included.

use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicU32, Ordering};

use retry_runtime::robust;
use retry_runtime::time::VirtualTime;

trait Store {
    fn load(&self, key: &str) -> io::Result<String>;
    async fn load_async(&self, key: &str) -> io::Result<String>;
}

struct Flaky {
    failures: u32,
    calls: AtomicU32,
}

impl Flaky {
    fn hit(&self) -> io::Result<u32> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n <= self.failures {
            Err(ErrorKind::TimedOut.into())
        } else {
            Ok(n)
        }
    }
}

impl Store for Flaky {
    #[robust(retries = 2, backoff = none, on = [Timeout])]
    fn load(&self, key: &str) -> io::Result<String> {
        let n = self.hit()?;
        Ok(format!("{key}@{n}"))
    }

    #[robust(retries = 2, timeout = "1s", backoff = none, on = [Timeout])]
    async fn load_async(&self, key: &str) -> io::Result<String> {
        tokio::task::yield_now().await;
        let n = self.hit()?;
        Ok(format!("{key}@{n}"))
    }
}

#[test]
fn sync_trait_method() {
    let time = VirtualTime::new();
    let _g = time.install();
    let s = Flaky {
        failures: 2,
        calls: AtomicU32::new(0),
    };
    assert_eq!(s.load("a").unwrap(), "a@3");
    let s = Flaky {
        failures: 3,
        calls: AtomicU32::new(0),
    };
    assert_eq!(s.load("a").unwrap_err().kind(), ErrorKind::TimedOut);
}

#[tokio::test(start_paused = true)]
async fn async_fn_in_trait() {
    let s = Flaky {
        failures: 2,
        calls: AtomicU32::new(0),
    };
    assert_eq!(s.load_async("b").await.unwrap(), "b@3");
}

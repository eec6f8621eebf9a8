//! `retry_runtime` is a dependency of this crate only under the name `rr`, so `::retry_runtime`
//! does not resolve here: the attribute works only if it uses the `crate = "..."` path.

use std::io::{self, ErrorKind};
use std::sync::atomic::{AtomicU32, Ordering};

/// A re-export, as a facade crate would have it.
pub mod facade {
    pub use rr as runtime;
}

/// Fails twice, then succeeds.
#[rr::robust(crate = "::rr", retries = 3, backoff = none, attempt = ctx)]
pub fn renamed(calls: &AtomicU32) -> io::Result<u32> {
    calls.fetch_add(1, Ordering::SeqCst);
    if ctx.retries() < 2 {
        Err(ErrorKind::Other.into())
    } else {
        Ok(ctx.number())
    }
}

/// The same through a re-exported path.
#[facade::runtime::robust(crate = "crate::facade::runtime", retries = 1, backoff = none)]
pub fn through_facade(calls: &AtomicU32) -> io::Result<u32> {
    let n = calls.fetch_add(1, Ordering::SeqCst);
    if n == 0 {
        Err(ErrorKind::Other.into())
    } else {
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crate_path_is_used() {
        let calls = AtomicU32::new(0);
        assert_eq!(renamed(&calls).unwrap(), 3);
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        let calls = AtomicU32::new(0);
        assert_eq!(through_facade(&calls).unwrap(), 1);
    }
}

/// Hedged and with an adaptive timeout, through the renamed crate.
#[rr::robust(crate = "::rr", hedge(after = p95), timeout = adaptive(p = 99, min = 1ms, max = 1s), attempt = ctx)]
pub async fn hedged(n: u32) -> io::Result<u32> {
    // (An attempt that awaits, as one under a timeout must for the timeout to cut it.)
    std::future::ready(()).await;
    Ok(n + ctx.retries())
}

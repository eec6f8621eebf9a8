//! Helpers shared by the root test files (`mod common;` in each that uses them).
#![allow(dead_code)]

use std::io::{self, ErrorKind};
use std::time::Duration;

use retry_runtime::time::VirtualTime;

/// `s` seconds.
pub fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// `m` milliseconds.
pub fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

/// Each of `v`, in milliseconds.
pub fn ms_each(v: &[u64]) -> Vec<Duration> {
    v.iter().map(|m| ms(*m)).collect()
}

/// Runs `f` with a virtual clock installed on this thread (seeded with `seed`, if any, which
/// fixes the jitter); returns what `f` returned and every delay slept.
pub fn on_virtual_time<T>(seed: Option<u64>, f: impl FnOnce() -> T) -> (T, Vec<Duration>) {
    let time = seed.map_or_else(VirtualTime::new, VirtualTime::seeded);
    let _guard = time.install();
    let out = f();
    (out, time.sleeps())
}

/// A body that fails `fail` times with `kind`, then succeeds with the number of attempts.
pub fn failing(fail: u32, kind: ErrorKind) -> impl FnMut() -> io::Result<u32> {
    let mut n = 0;
    move || {
        n += 1;
        if n <= fail { Err(kind.into()) } else { Ok(n) }
    }
}

/// Checks that each case (what a `build()` refused, if anything) was refused for the parameter
/// it names; the errors, in order.
pub fn refused_for(
    cases: impl IntoIterator<Item = (Option<retry_runtime::ConfigError>, &'static str)>,
) -> Vec<retry_runtime::ConfigError> {
    cases
        .into_iter()
        .enumerate()
        .map(|(i, (e, parameter))| {
            let e = e.unwrap_or_else(|| panic!("case {i} was accepted"));
            assert_eq!((i, e.parameter()), (i, parameter));
            e
        })
        .collect()
}

/// Checks that no case (what a `build()` refused, if anything) was refused.
pub fn all_accepted(cases: impl IntoIterator<Item = Option<retry_runtime::ConfigError>>) {
    for (i, e) in cases.into_iter().enumerate() {
        assert!(e.is_none(), "case {i} was refused: {e:?}");
    }
}

//! `#[robust]` on methods taking `&self` and `&mut self`, sync and async.

use std::cell::Cell;
use std::io::{self, ErrorKind};
use std::time::Duration;

use retry_runtime::robust;
use retry_runtime::time::VirtualTime;

struct Client {
    fail_first: u32,
    calls: Cell<u32>,
    log: Vec<u32>,
}

impl Client {
    fn new(fail_first: u32) -> Self {
        Client {
            fail_first,
            calls: Cell::new(0),
            log: Vec::new(),
        }
    }

    #[robust(retries = 3, backoff = constant(base = "1s"), jitter = none)]
    pub fn get(&self, key: &str) -> io::Result<String> {
        self.calls.set(self.calls.get() + 1);
        if self.calls.get() <= self.fail_first {
            return Err(ErrorKind::ConnectionReset.into());
        }
        Ok(format!("{key}={}", self.calls.get()))
    }

    #[robust(retries = 3, backoff = none)]
    fn record(&mut self, value: u32) -> Result<usize, String> {
        self.log.push(value);
        if self.log.len() <= self.fail_first as usize {
            Err(format!("only {}", self.log.len()))
        } else {
            Ok(self.log.len())
        }
    }

    #[robust(retries = 3, timeout = "1s", backoff = constant(base = "1s"), jitter = none)]
    async fn get_async(&self, key: &str) -> io::Result<String> {
        self.calls.set(self.calls.get() + 1);
        if self.calls.get() <= self.fail_first {
            tokio::time::sleep(Duration::from_secs(5)).await; // times out
        }
        Ok(format!("{key}={}", self.calls.get()))
    }

    #[robust(retries = 3, backoff = none)]
    async fn record_async(&mut self, value: u32) -> Result<usize, String> {
        tokio::task::yield_now().await;
        self.log.push(value);
        if self.log.len() <= self.fail_first as usize {
            Err("again".into())
        } else {
            Ok(self.log.len())
        }
    }
}

#[test]
fn shared_self() {
    let time = VirtualTime::new();
    let _g = time.install();
    let c = Client::new(2);
    assert_eq!(c.get("k").unwrap(), "k=3");
    assert_eq!(time.sleeps(), vec![Duration::from_secs(1); 2]);
    let c = Client::new(9);
    assert_eq!(c.get("k").unwrap_err().kind(), ErrorKind::ConnectionReset);
    assert_eq!(c.calls.get(), 4);
}

#[test]
fn mutable_self() {
    let time = VirtualTime::new();
    let _g = time.install();
    let mut c = Client::new(2);
    assert_eq!(c.record(7), Ok(3));
    assert_eq!(c.log, [7, 7, 7]);
}

#[tokio::test(start_paused = true)]
async fn async_shared_self() {
    let c = Client::new(1);
    let start = tokio::time::Instant::now();
    assert_eq!(c.get_async("a").await.unwrap(), "a=2");
    assert_eq!(start.elapsed(), Duration::from_secs(2)); // 1 s timeout + 1 s backoff
}

#[tokio::test(start_paused = true)]
async fn async_mutable_self() {
    let mut c = Client::new(3);
    assert_eq!(c.record_async(1).await, Ok(4));
    assert_eq!(c.log.len(), 4);
}

struct Typed {
    calls: Cell<u32>,
}

// The typed form is what this test is about.
#[allow(clippy::needless_arbitrary_self_type)]
impl Typed {
    #[robust(retries = 2, backoff = none)]
    fn typed_shared(self: &Self) -> Result<u32, String> {
        self.calls.set(self.calls.get() + 1);
        if self.calls.get() < 2 {
            Err("again".into())
        } else {
            Ok(self.calls.get())
        }
    }

    #[robust(retries = 2, backoff = none)]
    fn typed_mut(self: &mut Self) -> Result<u32, String> {
        *self.calls.get_mut() += 1;
        if self.calls.get() < 4 {
            Err("again".into())
        } else {
            Ok(self.calls.get())
        }
    }
}

#[test]
fn typed_receivers_are_references_too() {
    let mut t = Typed {
        calls: Cell::new(0),
    };
    assert_eq!(t.typed_shared(), Ok(2));
    assert_eq!(t.typed_mut(), Ok(4));
}

/// A fn written by a `macro_rules!` macro: its parameter types arrive as invisible groups.
macro_rules! pusher {
    ($name:ident, $t:ty) => {
        #[robust(retries = 2, backoff = none)]
        fn $name(out: $t) -> Result<usize, String> {
            out.push(1);
            if out.len() < 3 {
                Err("again".into())
            } else {
                Ok(out.len())
            }
        }
    };
}

pusher!(push_through_macro, &mut Vec<u8>);

#[test]
fn reference_types_from_macro_rules_are_reborrowed_not_cloned() {
    let mut v = Vec::new();
    assert_eq!(push_through_macro(&mut v), Ok(3));
    assert_eq!(v, [1, 1, 1]);
}

/// A fn body that starts with inner attributes: they apply to the fn (here, under a module
/// that denies unused variables, the body's `#![allow(unused_variables)]` must still reach
/// its `unused`; left in the body, it did not compile).
#[deny(unused_variables)]
mod inner_attributes {
    use super::*;

    #[robust(retries = 2, backoff = none)]
    pub fn counted(n: &Cell<u32>) -> Result<u32, String> {
        #![allow(unused_variables)]
        let unused = 1;
        super::third_time(n)
    }
}

/// Counts a call in `n`; fails the first two.
fn third_time(n: &Cell<u32>) -> Result<u32, String> {
    n.set(n.get() + 1);
    if n.get() < 3 {
        Err("again".into())
    } else {
        Ok(n.get())
    }
}

#[test]
fn a_body_s_inner_attributes_apply_to_the_fn() {
    let n = Cell::new(0);
    assert_eq!(inner_attributes::counted(&n), Ok(3));
}

/// A fn whose body a `macro_rules!` macro passes as `$body:block` (it arrives in an invisible
/// group: the attribute said the fn had no body).
macro_rules! with_body {
    ($name:ident, $n:ident, $body:block) => {
        #[robust(retries = 2, backoff = none)]
        fn $name($n: &Cell<u32>) -> Result<u32, String> $body
    };
}

with_body!(body_through_macro, n, { third_time(n) });

#[test]
fn a_body_from_macro_rules_is_retried() {
    let n = Cell::new(0);
    assert_eq!(body_through_macro(&n), Ok(3));
}

/// A method on `&mut self` returning a closure or fn pointer type whose parameters are
/// references: those lifetimes are the closure type's own, not borrows of `self` (the
/// attribute refused it, saying it returned a borrow of `self`).
struct Rules {
    calls: u32,
}

fn first_word(s: &str) -> &str {
    s.split(' ').next().unwrap_or("")
}

impl Rules {
    // (The type written out: the attribute reads its tokens.)
    #[allow(clippy::type_complexity)]
    #[robust(retries = 2, backoff = none)]
    fn rule(&mut self) -> Result<Box<dyn Fn(&u32) -> bool>, String> {
        self.calls += 1;
        if self.calls < 3 {
            Err("again".into())
        } else {
            Ok(Box::new(|v: &u32| *v > 1))
        }
    }

    #[robust(retries = 1, backoff = none)]
    fn splitter(&mut self) -> Result<fn(&str) -> &str, String> {
        self.calls += 1;
        if self.calls.is_multiple_of(2) {
            Err("again".into())
        } else {
            Ok(first_word)
        }
    }
}

#[test]
fn a_returned_fn_type_s_own_lifetimes_are_not_borrows() {
    let mut r = Rules { calls: 0 };
    let rule = r.rule().unwrap();
    assert!(rule(&2) && !rule(&1));
    assert_eq!(r.calls, 3);
    let split = r.splitter().unwrap();
    assert_eq!(split("a b"), "a");
    assert_eq!(r.calls, 5);
}

//! `#[robust]` in a crate of edition 2015. There, a path that starts with `::` names an item of
//! the crate's root: `::core` is not the `core` crate (the root holds `std` only), and
//! `::retry_runtime` resolves through the root's `extern crate retry_runtime;`, which a crate
//! of this edition declares to use the attribute at all. The attribute writes some of its paths
//! at the user's tokens (so that an error points there), and those resolve in the user's
//! edition: each form below once failed here with "cannot find `core` in the crate root".
//!
//! The attempt of a blocking fn is a closure, and closures of this edition capture whole
//! variables: one the attribute writes is of its own edition, so that a method can write a
//! field of `self` while a guard is read from another (`Client`).
//!
//! Blocking fns only: edition 2015 has no `async fn`. Warnings are errors, so the code the
//! attribute writes raises none in this edition either. `tests/ui.rs` checks that a mistake in
//! the attribute is reported with its own message in this edition too.
#![deny(warnings)]

extern crate retry_runtime;

use std::cell::Cell;
use std::fmt;
use std::io;
use std::pin::Pin;

use retry_runtime::robust;

/// An error with variants, for kinds written as patterns.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// Worth retrying.
    Busy { code: u32 },
    /// Not.
    Denied,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{:?}", self)
    }
}

impl std::error::Error for Failure {}

/// An answer, for rules on `Ok` values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reply {
    /// Ask again.
    Busy,
    /// Done.
    Ready(u32),
}

fn count(calls: &Cell<u32>) -> u32 {
    calls.set(calls.get() + 1);
    calls.get()
}

fn other() -> io::Error {
    io::Error::other("other")
}

/// A kind written as a pattern, and a rule of its own.
#[robust(retries = 5, backoff = none, on = [Failure::Busy { .. }], when(Failure::Busy { code: 7 }, retries = 1))]
pub fn patterns(calls: &Cell<u32>, code: u32) -> Result<u32, Failure> {
    count(calls);
    Err(Failure::Busy { code })
}

/// A rule on `Ok` values: `Reply::Busy` is retried.
#[robust(retries = 3, backoff = none, on = [Io, Ok(Reply::Busy)])]
pub fn values(calls: &Cell<u32>) -> io::Result<Reply> {
    match count(calls) {
        1 | 2 => Ok(Reply::Busy),
        n => Ok(Reply::Ready(n)),
    }
}

/// `io::ErrorKind`s, a rule that takes none of them (the attribute then checks, where the fn
/// is built, that the error type is `io::Error`), and an owned argument cloned per attempt.
#[robust(retries = 4, backoff = none, on = [Io(ConnectionReset, TimedOut)], when(Io(NotFound), retries = 0))]
pub fn kinds(calls: &Cell<u32>, label: String, kind: io::ErrorKind) -> io::Result<usize> {
    if count(calls) < 3 {
        Err(io::Error::new(kind, label))
    } else {
        Ok(label.len())
    }
}

/// Unique borrows of trait objects, reborrowed for each attempt.
#[robust(retries = 2, backoff = none)]
pub fn reborrows(
    out: Option<&mut dyn io::Write>,
    mut numbers: Pin<&mut (dyn Iterator<Item = u32> + Unpin)>,
    calls: &Cell<u32>,
) -> io::Result<u32> {
    if let Some(out) = out {
        out.write_all(b"attempt ")?;
    }
    let n = numbers.as_mut().get_mut().next().unwrap_or(0);
    if count(calls) < 2 {
        Err(other())
    } else {
        Ok(n)
    }
}

/// A concurrency limit, a deadline and a fallback.
static LIMIT: retry_runtime::ConcurrencyLimit = match retry_runtime::ConcurrencyLimit::new(2, 10) {
    Ok(l) => l,
    Err(_) => panic!("invalid limit"),
};

/// With a limit, a deadline (the failure a retry follows is kept) and a fallback.
#[robust(retries = 2, backoff = none, limit = LIMIT, deadline = "10s", fallback = |_e| Ok(0))]
pub fn guarded(calls: &Cell<u32>) -> io::Result<u32> {
    count(calls);
    Err(other())
}

/// A custom backoff and jitter, and the attempt's context.
#[robust(retries = 2, backoff = custom(retry_runtime::Constant::new(std::time::Duration::from_millis(0))), jitter = none, attempt = ctx)]
pub fn custom(calls: &Cell<u32>) -> io::Result<u32> {
    count(calls);
    if ctx.retries() < 2 {
        Err(other())
    } else {
        Ok(ctx.number())
    }
}

/// A client whose guards are its own fields.
#[derive(Debug)]
pub struct Client {
    limit: retry_runtime::ConcurrencyLimit,
    budget: retry_runtime::RetryBudget,
    sent: u32,
}

impl Client {
    /// A client with room for one call and one retry.
    pub fn with_one_slot() -> Client {
        Client {
            limit: retry_runtime::ConcurrencyLimit::new(1, 0).unwrap(),
            budget: retry_runtime::RetryBudget::new(1.0, 0.0, 1.0).unwrap(),
            sent: 0,
        }
    }

    /// A method whose attempts write a field while a guard is read from another: the attempt
    /// is a closure, which must capture the field it writes, not the whole `self` (closures
    /// of this edition capture whole variables).
    #[robust(retries = 2, backoff = none, limit = self.limit)]
    pub fn limited(&mut self) -> io::Result<u32> {
        self.sent += 1;
        if self.sent < 2 {
            Err(other())
        } else {
            Ok(self.sent)
        }
    }

    /// The same with a budget (one retry in it).
    #[robust(retries = 5, backoff = none, budget = self.budget)]
    pub fn budgeted(&mut self) -> io::Result<u32> {
        self.sent += 1;
        Err(other())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_kind_and_its_rule_retry_as_written() {
        let calls = Cell::new(0);
        assert_eq!(patterns(&calls, 3), Err(Failure::Busy { code: 3 }));
        assert_eq!(calls.get(), 6, "1 attempt and 5 retries");
        calls.set(0);
        assert_eq!(patterns(&calls, 7), Err(Failure::Busy { code: 7 }));
        assert_eq!(calls.get(), 2, "the `when` rule's 1 retry");
    }

    #[test]
    fn a_busy_reply_is_retried() {
        let calls = Cell::new(0);
        assert_eq!(values(&calls).unwrap(), Reply::Ready(3));
        assert_eq!(calls.get(), 3);
    }

    #[test]
    fn io_kinds_retry_those_kinds_only() {
        let calls = Cell::new(0);
        let n = kinds(&calls, "label".to_string(), io::ErrorKind::TimedOut);
        assert_eq!(n.unwrap(), 5);
        assert_eq!(calls.get(), 3);
        calls.set(0);
        let e = kinds(&calls, "label".to_string(), io::ErrorKind::NotFound);
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(calls.get(), 1, "`when(Io(NotFound), retries = 0)`");
    }

    #[test]
    fn unique_borrows_are_reborrowed_for_each_attempt() {
        let calls = Cell::new(0);
        let mut out = Vec::new();
        let mut numbers = 10..;
        let n = reborrows(Some(&mut out), Pin::new(&mut numbers), &calls).unwrap();
        assert_eq!(n, 11, "the second attempt reads the second number");
        assert_eq!(out, b"attempt attempt ".to_vec());
    }

    #[test]
    fn the_fallback_answers_after_the_retries() {
        let calls = Cell::new(0);
        assert_eq!(guarded(&calls).unwrap(), 0);
        assert_eq!(calls.get(), 3);
        assert_eq!(LIMIT.in_flight(), 0, "every slot given back");
    }

    #[test]
    fn a_method_reads_its_guards_from_its_own_fields() {
        let mut client = Client::with_one_slot();
        assert_eq!(client.limited().unwrap(), 2);
        assert_eq!(client.limit.in_flight(), 0, "the slot given back");
        client.sent = 0;
        assert!(client.budgeted().is_err());
        assert_eq!(client.sent, 2, "the budget paid for one retry");
    }

    #[test]
    fn a_custom_backoff_retries_and_the_context_counts() {
        let calls = Cell::new(0);
        assert_eq!(custom(&calls).unwrap(), 3);
        assert_eq!(calls.get(), 3);
    }
}

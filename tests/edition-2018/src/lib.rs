//! `#[robust]` on async methods in a crate of edition 2018. Closures and async blocks of this
//! edition capture whole variables, where those of 2021 and later capture the fields they use.
//! A method's attempt is an async block that writes a field of `self` while the call holds a
//! borrow of another field, its guard (`limit = self.limit`, `budget = self.budget`): written
//! at the user's tokens, the block was of this edition, took the whole of `self`, and rustc
//! refused it (E0500, "closure requires unique access to `self` but it is already
//! borrowed"), where the same method compiles in edition 2021. The attribute writes that
//! block, and a blocking fn's closure, in its own edition (`tests/edition-2015` has the
//! blocking forms).
#![deny(warnings)]

use std::io;

use retry_runtime::{robust, ConcurrencyLimit, RetryBudget};

/// A client whose guards are its own fields.
#[derive(Debug)]
pub struct Client {
    limit: ConcurrencyLimit,
    budget: RetryBudget,
    sent: u32,
    name: String,
}

impl Client {
    /// A client with room for one call at a time and one retry.
    #[must_use]
    pub fn new(name: &str) -> Self {
        Self {
            limit: ConcurrencyLimit::new(1, 0).unwrap(),
            budget: RetryBudget::new(1.0, 0.0, 1.0).unwrap(),
            sent: 0,
            name: name.to_string(),
        }
    }

    /// Fails once, then answers how many attempts were sent.
    #[robust(retries = 2, backoff = none, limit = self.limit, timeout = "1s")]
    pub async fn limited(&mut self) -> io::Result<u32> {
        tokio::task::yield_now().await;
        self.sent += 1;
        if self.sent < 2 {
            Err(io::Error::other("first"))
        } else {
            Ok(self.sent)
        }
    }

    /// Always fails: the budget pays for one retry.
    #[robust(retries = 5, backoff = none, budget = self.budget, on_error = |_e: &io::Error, _n| ())]
    pub async fn budgeted(&mut self, extra: String) -> io::Result<usize> {
        tokio::task::yield_now().await;
        self.sent += 1;
        Err(io::Error::other(format!("{}{}", self.name, extra)))
    }

    /// Hedged, with a limit from a field: the attempts share `&self`.
    #[robust(retries = 1, backoff = none, hedge(after = "10ms"), limit = self.limit)]
    pub async fn hedged(&self, extra: String) -> io::Result<usize> {
        tokio::task::yield_now().await;
        Ok(self.name.len() + extra.len())
    }
}

/// The same through a `&mut` parameter: the attempts use it as a method uses `self`.
#[robust(retries = 2, backoff = none, limit = client.limit, timeout = "1s")]
pub async fn through(client: &mut Client) -> io::Result<u32> {
    tokio::task::yield_now().await;
    client.sent += 1;
    if client.sent < 2 {
        Err(io::Error::other("first"))
    } else {
        Ok(client.sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap()
    }

    #[test]
    fn a_method_writes_a_field_while_its_guard_is_borrowed() {
        let rt = runtime();
        let mut client = Client::new("host");
        assert_eq!(rt.block_on(client.limited()).unwrap(), 2);
        assert_eq!(client.limit.in_flight(), 0, "the slot given back");
        client.sent = 0;
        let e = rt.block_on(client.budgeted("!".to_string())).unwrap_err();
        assert_eq!(e.to_string(), "host!");
        assert_eq!(client.sent, 2, "the budget paid for one retry");
        assert_eq!(rt.block_on(client.hedged("12".to_string())).unwrap(), 6);
        client.sent = 0;
        assert_eq!(rt.block_on(through(&mut client)).unwrap(), 2);
    }
}

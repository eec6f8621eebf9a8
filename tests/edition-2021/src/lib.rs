//! `#[robust]` in a crate of edition 2021: the body's block keeps the crate's edition, whose
//! rules decide when the temporaries of its tail expression drop (after the block's locals
//! before edition 2024, before them since). The attribute's own crate is of edition 2024; a
//! block it wrote around the body used to give the body that edition's order.
//!
//! The crate also holds clippy's pedantic and nursery lints (warnings, which the workspace's
//! `cargo clippy -- -D warnings` makes errors) over expansions with several keys: the code the
//! attribute writes must raise none of them.
#![warn(clippy::pedantic, clippy::nursery)]
// (Lints on the crate's own items, not on what the attribute writes.)
#![allow(clippy::missing_errors_doc, clippy::must_use_candidate)]

use std::cell::RefCell;
use std::io;

use retry_runtime::robust;

thread_local! {
    static DROPS: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
}

/// Logs its name when dropped.
#[derive(Debug)]
pub struct Noisy(pub &'static str);

impl Noisy {
    /// The name's length.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.0.len()
    }
    /// Never empty.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Drop for Noisy {
    fn drop(&mut self) {
        DROPS.with(|d| d.borrow_mut().push(self.0));
    }
}

/// The drops logged so far (the log is emptied).
pub fn drops() -> Vec<&'static str> {
    DROPS.with(|d| std::mem::take(&mut *d.borrow_mut()))
}

/// Without the attribute.
pub fn plain() -> io::Result<usize> {
    let _local = Noisy("local");
    Ok(Noisy("temporary").len())
}

/// The same body, blocking, under the attribute.
#[robust(retries = 2, backoff = none)]
pub fn blocking() -> io::Result<usize> {
    let _local = Noisy("local");
    Ok(Noisy("temporary").len())
}

/// The same body, async, under the attribute.
#[robust(retries = 2, backoff = none)]
pub async fn asynchronous() -> io::Result<usize> {
    let _local = Noisy("local");
    Ok(Noisy("temporary").len())
}

/// A body that declares an item, with an owned parameter (which each attempt binds from a
/// clone before the body): the item stays ahead of the body's statements (clippy's
/// `items_after_statements`), and the temporaries drop as in `plain`.
#[robust(retries = 2, backoff = none)]
pub fn blocking_with_items(label: String) -> io::Result<usize> {
    const TEMPORARY: &str = "temporary";
    let _local = Noisy("local");
    Ok(Noisy(TEMPORARY).len() + label.into_bytes().len())
}

/// The same, async.
#[robust(retries = 2, backoff = none)]
pub async fn asynchronous_with_items(label: String) -> io::Result<usize> {
    const TEMPORARY: &str = "temporary";
    let _local = Noisy("local");
    Ok(Noisy(TEMPORARY).len() + label.into_bytes().len())
}

/// An owned parameter, which logs its name when dropped.
#[derive(Debug, Clone)]
pub struct Param(pub &'static str);

impl Param {
    /// A loan of the parameter, which logs `lent` when dropped.
    #[must_use]
    pub const fn lend(&self) -> Lent<'_> {
        Lent(self)
    }
}

impl Drop for Param {
    fn drop(&mut self) {
        DROPS.with(|d| d.borrow_mut().push(self.0));
    }
}

/// A loan of a [`Param`]; its `Drop` uses the borrow.
#[derive(Debug)]
pub struct Lent<'a>(&'a Param);

impl Lent<'_> {
    /// The length of the parameter's name.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.0 .0.len()
    }
    /// Never empty.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.0 .0.is_empty()
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        DROPS.with(|d| d.borrow_mut().push("lent"));
    }
}

/// A tail whose temporary borrows an owned parameter, without the attribute.
///
/// The temporary drops after the locals and before the parameter. (Owned, as the attribute's
/// fns take it: the parameter's drop is what is compared.)
#[allow(clippy::needless_pass_by_value)]
pub fn plain_lending(param: Param) -> io::Result<usize> {
    let _local = Noisy("local");
    Ok(param.lend().len())
}

/// The same body, blocking, under the attribute: the temporary borrows the attempt's clone,
/// which must outlive it (this failed to compile with E0597 before the body became a match
/// arm's body).
#[robust(retries = 2, backoff = none)]
pub fn blocking_lending(param: Param) -> io::Result<usize> {
    let _local = Noisy("local");
    Ok(param.lend().len())
}

/// The same, async.
#[robust(retries = 2, backoff = none)]
pub async fn asynchronous_lending(param: Param) -> io::Result<usize> {
    let _local = Noisy("local");
    Ok(param.lend().len())
}

/// A body that reads one `Copy` field of an owned parameter, across an await, without the
/// attribute: the parameter drops when the fn returns.
#[allow(clippy::needless_pass_by_value)]
pub async fn plain_field(param: Param) -> io::Result<usize> {
    let _local = Noisy("local");
    tokio::task::yield_now().await;
    Ok(param.0.len())
}

/// The same under the attribute: the attempt's block owns the whole clone (a block that
/// captured only the field read would leave the rest of it, dropped before the body ran).
#[robust(retries = 2, backoff = none)]
pub async fn asynchronous_field(param: Param) -> io::Result<usize> {
    let _local = Noisy("local");
    tokio::task::yield_now().await;
    Ok(param.0.len())
}

/// The same, hedged: each hedge's block owns its whole clone.
#[robust(retries = 2, backoff = none, hedge(after = 10s))]
pub async fn hedged_field(param: Param) -> io::Result<usize> {
    let _local = Noisy("local");
    tokio::task::yield_now().await;
    Ok(param.0.len())
}

/// A pattern whose guard the body never reads, without the attribute.
#[allow(clippy::needless_pass_by_value)]
pub async fn plain_guarded((name, _guard): (&'static str, Param)) -> io::Result<usize> {
    let _local = Noisy("local");
    tokio::task::yield_now().await;
    Ok(name.len())
}

/// The same under the attribute: the guard's clone lives until the attempt ends.
#[robust(retries = 2, backoff = none)]
pub async fn asynchronous_guarded((name, _guard): (&'static str, Param)) -> io::Result<usize> {
    let _local = Noisy("local");
    tokio::task::yield_now().await;
    Ok(name.len())
}

/// The case as first reported: a `RefCell` parameter and its `Ref`.
#[robust(retries = 2, backoff = none)]
pub fn ref_cell_lending(cells: RefCell<Vec<u8>>) -> io::Result<usize> {
    Ok(cells.borrow().len())
}

/// Keys whose expansions import the probes' traits (a timeout's `Timeout` kind, the error
/// writer of events, an async fallback) and check patterns.
#[robust(retries = 2, backoff = constant(base = 10ms), timeout = 1s, on = [Timeout, Io(ConnectionReset)],
         when(Ok(None), retries = 1), fallback = |_e| async { Ok(Some(0)) })]
pub async fn keyed(name: String, (a, _b): (u32, u8)) -> io::Result<Option<usize>> {
    tokio::task::yield_now().await;
    Ok(Some(name.len() + a as usize))
}

/// A blocking fn with a hint and a callback that read a parameter.
#[robust(retries = 2, backoff = none, on = [Io], hint = |_e: &io::Error| None,
         on_retry = |_r, _i| eprintln!("{label}"))]
pub fn blocking_keyed(label: &str) -> io::Result<usize> {
    Ok(label.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_temporaries_drop_after_the_locals_as_in_edition_2021() {
        assert_eq!(plain().unwrap(), 9);
        let order = drops();
        assert_eq!(order, ["local", "temporary"], "edition 2021's order");
        assert_eq!(blocking().unwrap(), 9);
        assert_eq!(drops(), order);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert_eq!(runtime.block_on(asynchronous()).unwrap(), 9);
        assert_eq!(drops(), order);
        // A body with an item of its own, in a block of its own.
        assert_eq!(blocking_with_items(String::new()).unwrap(), 9);
        assert_eq!(drops(), order);
        let with_items = runtime.block_on(asynchronous_with_items(String::new()));
        assert_eq!(with_items.unwrap(), 9);
        assert_eq!(drops(), order);
    }

    #[test]
    fn a_tail_temporary_borrowing_an_owned_parameter_drops_before_it() {
        assert_eq!(plain_lending(Param("param")).unwrap(), 5);
        let order = drops();
        assert_eq!(order, ["local", "lent", "param"], "edition 2021's order");
        // The attempt's clone drops as the parameter does without the attribute; the
        // parameter itself when the fn returns.
        let mut expected = order.clone();
        expected.push("param");
        assert_eq!(blocking_lending(Param("param")).unwrap(), 5);
        assert_eq!(drops(), expected);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert_eq!(
            runtime
                .block_on(asynchronous_lending(Param("param")))
                .unwrap(),
            5
        );
        assert_eq!(drops(), expected);
        assert_eq!(ref_cell_lending(RefCell::new(vec![1, 2])).unwrap(), 2);
    }

    #[test]
    fn an_attempt_keeps_the_whole_clone_it_reads_a_field_of() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        assert_eq!(runtime.block_on(plain_field(Param("param"))).unwrap(), 5);
        let order = drops();
        assert_eq!(order, ["local", "param"]);
        let mut expected = order.clone();
        expected.push("param");
        let r = runtime.block_on(asynchronous_field(Param("param")));
        assert_eq!(r.unwrap(), 5);
        assert_eq!(drops(), expected, "the clone drops after the body's local");
        let r = runtime.block_on(hedged_field(Param("param")));
        assert_eq!(r.unwrap(), 5);
        assert_eq!(
            drops(),
            expected,
            "a hedge's clone drops after the body's local"
        );
        let r = runtime.block_on(plain_guarded(("name", Param("guard"))));
        assert_eq!(r.unwrap(), 4);
        let order = drops();
        assert_eq!(order, ["local", "guard"]);
        let mut expected = order.clone();
        expected.push("guard");
        let r = runtime.block_on(asynchronous_guarded(("name", Param("guard"))));
        assert_eq!(r.unwrap(), 4);
        assert_eq!(
            drops(),
            expected,
            "the guard's clone drops after the body's local"
        );
    }

    #[test]
    fn the_keyed_fns_answer() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let r = runtime.block_on(keyed("ab".to_owned(), (1, 0)));
        assert_eq!(r.unwrap(), Some(3));
        assert_eq!(blocking_keyed("abc").unwrap(), 3);
    }
}

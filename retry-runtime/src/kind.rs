//! Error kinds: which failures a rule applies to.
//!
//! A kind implements [`Classify`]. The built-in kinds are [`AnyError`], [`Timeout`], [`Io`]
//! (optionally restricted to some [`std::io::ErrorKind`]s) and [`Predicate`] (a closure over
//! `&E`); [`ClassifyExt::or`] combines them.
//!
//! `Timeout` and `Io` look for a [`std::io::Error`] in the error and its `source()` chain, which
//! needs the error type to implement [`Inspect`]: it is implemented for `std::io::Error`,
//! [`Elapsed`], `Box<dyn Error [+ Send [+ Sync]]>` and, with the `anyhow` feature,
//! `anyhow::Error`; [`inspect_error!`](crate::inspect_error) implements it for your own error
//! types. (The `#[robust]` attribute finds the chain of any `E: Error` by itself.)
//!
//! # Transparent wrappers
//!
//! `Io` (and `Timeout`'s search for an `io::Error` of kind `TimedOut`) never matches an
//! `io::Error` wrapped in a thiserror variant marked `#[error(transparent)]`: such a wrapper
//! forwards `source()` to the wrapped error's *own* source, so the chain goes from the wrapper
//! straight past the `io::Error` without showing it. Two forms work:
//!
//! - a pattern naming the variant, `on = [MyError::Io(_)]` in the attribute
//!   ([`Predicate`] in the builder: `Predicate(|e: &MyError| matches!(e, MyError::Io(_)))`);
//! - a variant with a message of its own, `#[error("io: {0}")] Io(#[from] std::io::Error)`,
//!   whose `source()` is the `io::Error`.

use std::error::Error;
use std::io;

use crate::Elapsed;

/// The failure of one attempt, as rules see it.
#[derive(Debug, Clone, Copy)]
pub struct Failure<'a, E> {
    error: &'a E,
    timed_out: bool,
}

impl<'a, E> Failure<'a, E> {
    /// A failure with `error`; `timed_out` is true when the attempt ran out of its timeout.
    pub const fn new(error: &'a E, timed_out: bool) -> Self {
        Self { error, timed_out }
    }
    /// The error the attempt returned.
    pub const fn error(&self) -> &'a E {
        self.error
    }
    /// Whether the attempt ran out of its timeout.
    pub const fn timed_out(&self) -> bool {
        self.timed_out
    }
}

/// Gives access to an error as `&dyn Error`, so that [`Timeout`] and [`Io`] can walk its
/// `source()` chain.
#[diagnostic::on_unimplemented(
    message = "the `Io` and `Timeout` kinds cannot look inside `{Self}`",
    label = "`{Self}` does not implement `retry_runtime::Inspect`",
    note = "if `{Self}` implements `std::error::Error`, add `retry_runtime::inspect_error!({Self});`"
)]
pub trait Inspect {
    /// The error as a trait object, or `None` if it has no `std::error::Error` view.
    fn as_error(&self) -> Option<&(dyn Error + 'static)>;
}

/// Implements [`Inspect`] for error types that implement [`std::error::Error`].
///
/// ```
/// #[derive(Debug)]
/// struct MyError(std::io::Error);
/// impl std::fmt::Display for MyError {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("my error") }
/// }
/// impl std::error::Error for MyError {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> { Some(&self.0) }
/// }
/// retry_runtime::inspect_error!(MyError);
///
/// use retry_runtime::kind::{Classify, Failure, Io};
/// let e = MyError(std::io::ErrorKind::ConnectionRefused.into());
/// assert!(Io::ANY.matches(&Failure::new(&e, false)));
/// ```
#[macro_export]
macro_rules! inspect_error {
    ($($t:ty),+ $(,)?) => {$(
        impl $crate::Inspect for $t {
            fn as_error(&self) -> ::core::option::Option<&(dyn ::std::error::Error + 'static)> {
                ::core::option::Option::Some(self)
            }
        }
    )+};
}

inspect_error!(io::Error, Elapsed, crate::ConfigError);

impl Inspect for Box<dyn Error> {
    fn as_error(&self) -> Option<&(dyn Error + 'static)> {
        Some(&**self)
    }
}
impl Inspect for Box<dyn Error + Send> {
    fn as_error(&self) -> Option<&(dyn Error + 'static)> {
        Some(&**self)
    }
}
impl Inspect for Box<dyn Error + Send + Sync> {
    fn as_error(&self) -> Option<&(dyn Error + 'static)> {
        Some(&**self)
    }
}
#[cfg(feature = "anyhow")]
impl Inspect for anyhow::Error {
    fn as_error(&self) -> Option<&(dyn Error + 'static)> {
        let e: &(dyn Error + Send + Sync + 'static) = self.as_ref();
        Some(e)
    }
}

/// The longest `source()` chain walked: a cyclic chain must not hang the loop.
const MAX_CHAIN: usize = 64;

/// The error and its `source()` chain, at most 64 links.
pub fn chain<'a>(
    root: Option<&'a (dyn Error + 'static)>,
) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(root, |e: &&'a (dyn Error + 'static)| (*e).source()).take(MAX_CHAIN)
}

/// `e` as a `T`, also when it is a `T` in an `Arc` or a `Box` (an error shared between
/// callers, `Arc<io::Error>`): those forward `source()` to the `T`'s own source, so the chain
/// would otherwise never show the `T` itself.
fn peeled<'a, T: Error + 'static>(e: &'a (dyn Error + 'static)) -> Option<&'a T> {
    e.downcast_ref::<T>()
        .or_else(|| e.downcast_ref::<std::sync::Arc<T>>().map(|a| &**a))
        .or_else(|| e.downcast_ref::<Box<T>>().map(|b| &**b))
}

/// Whether the chain holds an `std::io::Error` whose kind is in `kinds` (any kind if empty).
pub fn chain_has_io(root: Option<&(dyn Error + 'static)>, kinds: &[io::ErrorKind]) -> bool {
    chain(root)
        .filter_map(peeled::<io::Error>)
        .any(|io| kinds.is_empty() || kinds.contains(&io.kind()))
}

/// Whether the chain holds an [`Elapsed`], an `std::io::Error` of kind `TimedOut`, or (with
/// the `tower` feature) tower's own `tower::timeout::error::Elapsed`, which its `timeout`
/// layer under a `retry_runtime::tower::RobustLayer` fails an attempt with.
pub fn chain_has_timeout(root: Option<&(dyn Error + 'static)>) -> bool {
    chain(root).any(|e| {
        peeled::<Elapsed>(e).is_some()
            || peeled::<io::Error>(e).is_some_and(|io| io.kind() == io::ErrorKind::TimedOut)
            || tower_elapsed(e)
    })
}

/// Whether `e` is tower's `timeout::error::Elapsed`.
#[cfg(feature = "tower")]
fn tower_elapsed(e: &(dyn Error + 'static)) -> bool {
    peeled::<::tower::timeout::error::Elapsed>(e).is_some()
}

#[cfg(not(feature = "tower"))]
fn tower_elapsed(_: &(dyn Error + 'static)) -> bool {
    false
}

/// Decides whether a rule applies to a failure.
pub trait Classify<E> {
    /// True if the rule applies to `failure`.
    fn matches(&self, failure: &Failure<'_, E>) -> bool;
}

impl<E, K: Classify<E> + ?Sized> Classify<E> for &K {
    fn matches(&self, f: &Failure<'_, E>) -> bool {
        (**self).matches(f)
    }
}

/// Combinators for kinds.
pub trait ClassifyExt: Sized {
    /// A kind that matches when `self` or `other` does.
    fn or<K>(self, other: K) -> Or<Self, K> {
        Or(self, other)
    }
}
impl<K> ClassifyExt for K {}

/// Every error (the default `on` list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AnyError;

impl<E> Classify<E> for AnyError {
    fn matches(&self, _: &Failure<'_, E>) -> bool {
        true
    }
}

/// No error: the `on` kind of a policy that retries only values (an `on` list in the
/// attribute that holds only `Ok(..)` kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NoError;

impl<E> Classify<E> for NoError {
    fn matches(&self, _: &Failure<'_, E>) -> bool {
        false
    }
}

/// The attempt ran out of its timeout, or an `std::io::Error` of kind `TimedOut` (or an
/// [`Elapsed`], or with the `tower` feature tower's `tower::timeout::error::Elapsed`) is in the
/// error's `source()` chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timeout;

impl<E: Inspect> Classify<E> for Timeout {
    #[inline]
    fn matches(&self, f: &Failure<'_, E>) -> bool {
        self.matches_view(f.error.as_error(), f.timed_out)
    }
}

impl ClassifyView for Timeout {
    #[inline]
    fn matches_view(&self, error: Option<&(dyn Error + 'static)>, timed_out: bool) -> bool {
        timed_out || chain_has_timeout(error)
    }
}

/// An `std::io::Error` is in the error's `source()` chain; [`Io::of`] restricts it to some
/// kinds. `N` is the number of kinds (0 = any kind).
///
/// An `io::Error` inside a thiserror `#[error(transparent)]` variant is not in that chain (see
/// [Transparent wrappers](self#transparent-wrappers)): match the variant with a pattern, or
/// give it a message of its own (`#[error("io: {0}")]`).
///
/// ```
/// use std::io::ErrorKind::{ConnectionRefused, ConnectionReset};
/// use retry_runtime::kind::{Classify, Failure, Io};
/// let refused = std::io::Error::from(ConnectionRefused);
/// assert!(Io::of([ConnectionRefused, ConnectionReset]).matches(&Failure::new(&refused, false)));
/// assert!(!Io::of([ConnectionReset]).matches(&Failure::new(&refused, false)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Io<const N: usize = 0> {
    kinds: [io::ErrorKind; N],
}

impl Io {
    /// Any `std::io::Error`.
    pub const ANY: Io<0> = Io { kinds: [] };
}

impl<const N: usize> Io<N> {
    /// An `std::io::Error` of one of `kinds`. An empty list is a build error: it would match
    /// every I/O error, which [`Io::ANY`] says.
    ///
    /// ```compile_fail
    /// let every = retry_runtime::kind::Io::of([]); // write `Io::ANY`
    /// ```
    pub const fn of(kinds: [io::ErrorKind; N]) -> Self {
        const {
            assert!(
                N > 0,
                "`Io::of([])` would match every I/O error: list the kinds to retry, or write `Io::ANY`"
            )
        };
        Self { kinds }
    }

    /// `kinds`, empty for any (what the attribute's `Io` and `Io(..)` make).
    pub(crate) const fn any_or(kinds: [io::ErrorKind; N]) -> Self {
        Self { kinds }
    }
    /// The kinds this matches (empty = any).
    pub const fn kinds(&self) -> &[io::ErrorKind] {
        &self.kinds
    }
}

impl<E: Inspect, const N: usize> Classify<E> for Io<N> {
    #[inline]
    fn matches(&self, f: &Failure<'_, E>) -> bool {
        self.matches_view(f.error.as_error(), f.timed_out)
    }
}

impl<const N: usize> ClassifyView for Io<N> {
    #[inline]
    fn matches_view(&self, error: Option<&(dyn Error + 'static)>, _: bool) -> bool {
        chain_has_io(error, &self.kinds)
    }
}

/// A kind that decides from an `&dyn Error` view of the error and the timeout flag:
/// [`Timeout`] and [`Io`]. With `E: Inspect` they are [`Classify`] directly; [`Viewed`] pairs
/// them with any other way to see an `E` as `&dyn Error`.
pub trait ClassifyView {
    /// Whether a failure whose error is seen as `error` (`None`: no view) matches.
    fn matches_view(&self, error: Option<&(dyn Error + 'static)>, timed_out: bool) -> bool;
}

/// A way to see an `E` as `&dyn Error`, if it has one.
pub type ErrorView<E> = for<'a> fn(&'a E) -> Option<&'a (dyn Error + 'static)>;

/// [`Timeout`] or [`Io`] with the view of `E` to look through: what `#[robust]` uses, since it
/// finds a view for any `E: std::error::Error` without `Inspect`.
///
/// ```
/// use retry_runtime::kind::{Classify, Failure, Io, Viewed};
/// #[derive(Debug)]
/// struct Mine(std::io::Error);
/// let kind = Viewed::new(Io::ANY, |e: &Mine| Some(&e.0 as &(dyn std::error::Error + 'static)));
/// let e = Mine(std::io::ErrorKind::ConnectionReset.into());
/// assert!(kind.matches(&Failure::new(&e, false)));
/// ```
pub struct Viewed<K, E> {
    kind: K,
    view: ErrorView<E>,
}

impl<K, E> Viewed<K, E> {
    /// `kind`, looking through `view`.
    pub const fn new(kind: K, view: ErrorView<E>) -> Self {
        Self { kind, view }
    }
}

impl<K: Clone, E> Clone for Viewed<K, E> {
    fn clone(&self) -> Self {
        Self {
            kind: self.kind.clone(),
            view: self.view,
        }
    }
}

impl<K: Copy, E> Copy for Viewed<K, E> {}

impl<K: std::fmt::Debug, E> std::fmt::Debug for Viewed<K, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.kind.fmt(f)
    }
}

impl<K: ClassifyView, E> Classify<E> for Viewed<K, E> {
    #[inline]
    fn matches(&self, f: &Failure<'_, E>) -> bool {
        self.kind.matches_view((self.view)(f.error), f.timed_out)
    }
}

/// A closure over `&E`: `Predicate(|e: &MyError| e.is_transient())`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Predicate<F>(pub F);

impl<E, F: Fn(&E) -> bool> Classify<E> for Predicate<F> {
    fn matches(&self, f: &Failure<'_, E>) -> bool {
        (self.0)(f.error)
    }
}

/// Matches when either kind does (see [`ClassifyExt::or`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Or<A, B>(pub A, pub B);

impl<E, A: Classify<E>, B: Classify<E>> Classify<E> for Or<A, B> {
    fn matches(&self, f: &Failure<'_, E>) -> bool {
        self.0.matches(f) || self.1.matches(f)
    }
}

/// Decides whether a rule applies to a successful value: the `Ok(..)` kinds of SPEC section 13.
/// A matched value counts as a failed attempt (same rules, retry count, backoff, `max_delay`,
/// deadline, budget and breaker); when its rule gives up, the last value is returned as
/// `Ok(value)`.
///
/// `()` matches no value; [`OkIf`] is a closure over `&T`; [`OkIf::hint`] adds a delay read
/// from the value (a `Retry-After` header); [`Or`] combines value kinds.
///
/// ```
/// use retry_runtime::kind::{ClassifyValue, OkIf};
/// let busy = OkIf(|status: &u16| *status == 503);
/// assert!(busy.matches_value(&503));
/// assert!(!busy.matches_value(&200));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an `Ok(..)` kind for values of type `{T}`",
    label = "expected a closure `Fn(&{T}) -> bool` (wrap it in `retry_runtime::kind::OkIf`)"
)]
pub trait ClassifyValue<T> {
    /// Whether this kind can match anything (`()` cannot): the loop skips values otherwise.
    const ACTIVE: bool = true;
    /// True if the rule applies to `value`.
    fn matches_value(&self, value: &T) -> bool;
    /// The delay a matched value asks for, which replaces the backoff (still bounded by
    /// `max_delay` and the deadline).
    fn hint_value(&self, value: &T) -> Option<std::time::Duration> {
        let _ = value;
        None
    }
}

impl<T> ClassifyValue<T> for () {
    const ACTIVE: bool = false;
    #[inline(always)]
    fn matches_value(&self, _: &T) -> bool {
        false
    }
}

impl<T, K: ClassifyValue<T> + ?Sized> ClassifyValue<T> for &K {
    const ACTIVE: bool = K::ACTIVE;
    #[inline]
    fn matches_value(&self, value: &T) -> bool {
        (**self).matches_value(value)
    }
    #[inline]
    fn hint_value(&self, value: &T) -> Option<std::time::Duration> {
        (**self).hint_value(value)
    }
}

/// An `Ok(..)` kind: a closure over the successful value, `OkIf(|r: &Response| r.status() ==
/// 503)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OkIf<F>(pub F);

impl<F> OkIf<F> {
    /// This kind, with a delay read from the matched value: when `hint` returns one, it
    /// replaces the backoff (a `Retry-After` header, say).
    ///
    /// ```
    /// use std::time::Duration;
    /// use retry_runtime::kind::{ClassifyValue, OkIf};
    /// let busy = OkIf(|s: &(u16, u64)| s.0 == 429).hint(|s: &(u16, u64)| Some(Duration::from_secs(s.1)));
    /// assert_eq!(busy.hint_value(&(429, 3)), Some(Duration::from_secs(3)));
    /// ```
    pub fn hint<H>(self, hint: H) -> OkHinted<F, H> {
        OkHinted { kind: self.0, hint }
    }
}

impl<T, F: Fn(&T) -> bool> ClassifyValue<T> for OkIf<F> {
    #[inline]
    fn matches_value(&self, value: &T) -> bool {
        (self.0)(value)
    }
}

/// An [`OkIf`] kind with a hint read from the value (see [`OkIf::hint`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OkHinted<F, H> {
    kind: F,
    hint: H,
}

impl<T, F: Fn(&T) -> bool, H: Fn(&T) -> Option<std::time::Duration>> ClassifyValue<T>
    for OkHinted<F, H>
{
    #[inline]
    fn matches_value(&self, value: &T) -> bool {
        (self.kind)(value)
    }
    #[inline]
    fn hint_value(&self, value: &T) -> Option<std::time::Duration> {
        (self.hint)(value)
    }
}

impl<T, A: ClassifyValue<T>, B: ClassifyValue<T>> ClassifyValue<T> for Or<A, B> {
    const ACTIVE: bool = A::ACTIVE || B::ACTIVE;
    fn matches_value(&self, value: &T) -> bool {
        self.0.matches_value(value) || self.1.matches_value(value)
    }
    fn hint_value(&self, value: &T) -> Option<std::time::Duration> {
        if self.0.matches_value(value) {
            self.0.hint_value(value)
        } else {
            self.1.hint_value(value)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

    #[derive(Debug)]
    struct Wrap(Option<Box<dyn Error + Send + Sync>>);
    impl fmt::Display for Wrap {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("wrap")
        }
    }
    impl Error for Wrap {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.0.as_deref().map(|e| e as &(dyn Error + 'static))
        }
    }
    inspect_error!(Wrap);

    fn failure<E>(e: &E) -> Failure<'_, E> {
        Failure::new(e, false)
    }

    #[test]
    fn io_found_deep_in_the_chain() {
        let e = Wrap(Some(Box::new(Wrap(Some(Box::new(io::Error::from(
            io::ErrorKind::ConnectionReset,
        )))))));
        assert!(Io::ANY.matches(&failure(&e)));
        assert!(Io::of([io::ErrorKind::ConnectionReset]).matches(&failure(&e)));
        assert!(!Io::of([io::ErrorKind::NotFound]).matches(&failure(&e)));
        assert!(!Timeout.matches(&failure(&e)));
        assert!(!Io::ANY.matches(&failure(&Wrap(None))));
    }

    #[test]
    fn timeout_from_flag_kind_or_elapsed() {
        let plain = Wrap(None);
        assert!(Timeout.matches(&Failure::new(&plain, true)));
        let timed = io::Error::from(io::ErrorKind::TimedOut);
        assert!(Timeout.matches(&failure(&timed)));
        let boxed: Box<dyn Error + Send + Sync> = Box::new(Elapsed::new());
        assert!(Timeout.matches(&failure(&boxed)));
        let via_io: io::Error = Elapsed::new().into();
        assert!(Timeout.matches(&failure(&via_io)));
        let other: Box<dyn Error> = "nope".into();
        assert!(!Timeout.matches(&failure(&other)));
    }

    #[test]
    fn value_kinds_match_and_hint() {
        use std::time::Duration;
        let k = OkIf(|v: &u16| *v == 503)
            .or(OkIf(|v: &u16| *v == 429).hint(|_: &u16| Some(Duration::from_secs(2))));
        assert!(k.matches_value(&503) && k.matches_value(&429) && !k.matches_value(&200));
        assert_eq!(k.hint_value(&503), None);
        assert_eq!(k.hint_value(&429), Some(Duration::from_secs(2)));
        assert!(!().matches_value(&503));
        const { assert!(!<() as ClassifyValue<u16>>::ACTIVE) };
    }

    #[test]
    fn predicates_and_or() {
        let k = Predicate(|e: &i32| *e > 3).or(Predicate(|e: &i32| *e < 0));
        assert!(k.matches(&failure(&5)));
        assert!(k.matches(&failure(&-1)));
        assert!(!k.matches(&failure(&2)));
        assert!(AnyError.matches(&failure(&2)));
    }

    #[cfg(feature = "anyhow")]
    #[test]
    fn anyhow_chain() {
        let e = anyhow::Error::new(io::Error::from(io::ErrorKind::TimedOut)).context("fetching");
        assert!(Timeout.matches(&failure(&e)));
        assert!(Io::ANY.matches(&failure(&e)));
    }
}

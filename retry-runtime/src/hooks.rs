//! Callbacks: `on_success()` after a successful attempt, `on_error(&E, retries)` after every
//! failed one.

/// No callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Noop;

/// Called once when an attempt succeeds. Implemented for every `Fn()`.
#[diagnostic::on_unimplemented(
    message = "`on_success` must be a `Fn()` callback",
    label = "expected a closure or fn taking no arguments"
)]
pub trait OnSuccess {
    /// The callback.
    fn on_success(&self);
}

impl OnSuccess for Noop {
    #[inline]
    fn on_success(&self) {}
}

impl<F: Fn()> OnSuccess for F {
    #[inline]
    fn on_success(&self) {
        self()
    }
}

/// Called after every failed attempt, the last one too, with the error and the number of
/// retries made so far: the failed attempt's [`Attempt::retries`](crate::Attempt::retries),
/// 0 for the first attempt, 1 for the attempt retry 1 started, and so on. Implemented for
/// every `Fn(&E, u32)`.
#[diagnostic::on_unimplemented(
    message = "`on_error` must be a `Fn(&{E}, u32)` callback",
    label = "expected a closure or fn taking the error and the retry count"
)]
pub trait OnError<E> {
    /// The callback.
    fn on_error(&self, error: &E, retries: u32);
}

impl<E> OnError<E> for Noop {
    #[inline]
    fn on_error(&self, _: &E, _: u32) {}
}

impl<E, F: Fn(&E, u32)> OnError<E> for F {
    #[inline]
    fn on_error(&self, error: &E, retries: u32) {
        self(error, retries)
    }
}

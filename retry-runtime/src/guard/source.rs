//! What the `budget =` / `breaker =` keys and [`PolicyBuilder::budget`] /
//! [`PolicyBuilder::breaker`] accept: a local guard ([`RetryBudget`], [`CircuitBreaker`]), a
//! guard shared by a fleet (`SharedBudget`, `SharedBreaker`, feature `redis`), or one of them
//! behind a reference, a `Box`, an `Rc`, an `Arc` or a `LazyLock`. The policy borrows it
//! (`.breaker(&guard)`): the guard outlives the policy.
//!
//! [`PolicyBuilder::budget`]: crate::PolicyBuilder::budget
//! [`PolicyBuilder::breaker`]: crate::PolicyBuilder::breaker

use std::rc::Rc;
use std::sync::{Arc, LazyLock};

use super::{Breaker, Budget, CircuitBreaker, RetryBudget};

/// A retry budget the policy can borrow: [`RetryBudget`] or a fleet's shared budget, itself or
/// behind a reference, `Box`, `Rc`, `Arc` or `LazyLock`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a retry budget",
    label = "`budget` takes a `RetryBudget` or a fleet's `SharedBudget`",
    note = "either itself or behind a reference, `Box`, `Rc`, `Arc` or `LazyLock` (a `static`)"
)]
pub trait AsBudget {
    /// The borrowed budget the retry loop uses.
    type Ref<'a>: Budget + Copy + std::fmt::Debug
    where
        Self: 'a;
    /// Borrows the budget.
    fn as_budget(&self) -> Self::Ref<'_>;
}

/// A circuit breaker the policy can borrow: [`CircuitBreaker`] or a fleet's shared breaker,
/// itself or behind a reference, `Box`, `Rc`, `Arc` or `LazyLock`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a circuit breaker",
    label = "`breaker` takes a `CircuitBreaker` or a fleet's `SharedBreaker`",
    note = "either itself or behind a reference, `Box`, `Rc`, `Arc` or `LazyLock` (a `static`)"
)]
pub trait AsBreaker {
    /// The borrowed breaker the retry loop uses.
    type Ref<'a>: Breaker + Copy + std::fmt::Debug
    where
        Self: 'a;
    /// Borrows the breaker.
    fn as_breaker(&self) -> Self::Ref<'_>;
}

impl AsBudget for RetryBudget {
    type Ref<'a> = &'a RetryBudget;
    #[inline(always)]
    fn as_budget(&self) -> &RetryBudget {
        self
    }
}

impl AsBreaker for CircuitBreaker {
    type Ref<'a> = &'a CircuitBreaker;
    #[inline(always)]
    fn as_breaker(&self) -> &CircuitBreaker {
        self
    }
}

/// The pointers a guard is kept in: references, `Box`, `Rc`, `Arc` and `LazyLock` (a
/// `static`), each by the guard's own borrow.
macro_rules! through {
    ($({$($params:tt)*} $ty:ty;)*) => {$(
        impl<$($params)*> AsBudget for $ty
        where
            T: AsBudget,
        {
            type Ref<'a>
                = T::Ref<'a>
            where
                Self: 'a;
            #[inline(always)]
            fn as_budget(&self) -> T::Ref<'_> {
                T::as_budget(self)
            }
        }
        impl<$($params)*> AsBreaker for $ty
        where
            T: AsBreaker,
        {
            type Ref<'a>
                = T::Ref<'a>
            where
                Self: 'a;
            #[inline(always)]
            fn as_breaker(&self) -> T::Ref<'_> {
                T::as_breaker(self)
            }
        }
    )*};
}

through! {
    {T: ?Sized} &T;
    {T: ?Sized} Box<T>;
    {T: ?Sized} Rc<T>;
    {T: ?Sized} Arc<T>;
    {T, F: FnOnce() -> T} LazyLock<T, F>;
}

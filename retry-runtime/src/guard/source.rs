//! What the `budget =` / `breaker =` keys and [`PolicyBuilder::budget`] /
//! [`PolicyBuilder::breaker`] accept: a local guard ([`RetryBudget`], [`CircuitBreaker`]), a
//! guard shared by a fleet (`SharedBudget`, `SharedBreaker`, feature `redis`), or anything that
//! dereferences to one (an `Arc`, a `LazyLock`, a `Box`, a reference).
//!
//! [`PolicyBuilder::budget`]: crate::PolicyBuilder::budget
//! [`PolicyBuilder::breaker`]: crate::PolicyBuilder::breaker

use std::ops::Deref;

use super::{Breaker, Budget, CircuitBreaker, RetryBudget};

/// A retry budget the policy can borrow: [`RetryBudget`], a fleet's shared budget, or anything
/// that dereferences to one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a retry budget",
    label = "`budget` takes a `RetryBudget` (or a shared one), or anything that dereferences to one",
    note = "a budget is usually a `static RetryBudget`, a `static LazyLock<...>` or an `Arc<RetryBudget>`"
)]
pub trait AsBudget {
    /// The borrowed budget the retry loop uses.
    type Ref<'a>: Budget + Copy + std::fmt::Debug
    where
        Self: 'a;
    /// Borrows the budget.
    fn as_budget(&self) -> Self::Ref<'_>;
}

/// A circuit breaker the policy can borrow: [`CircuitBreaker`], a fleet's shared breaker, or
/// anything that dereferences to one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a circuit breaker",
    label = "`breaker` takes a `CircuitBreaker` (or a shared one), or anything that dereferences to one",
    note = "a breaker is usually a `static LazyLock<CircuitBreaker>` or an `Arc<CircuitBreaker>`"
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

impl<T: Deref<Target: AsBudget> + ?Sized> AsBudget for T {
    type Ref<'a>
        = <T::Target as AsBudget>::Ref<'a>
    where
        Self: 'a;
    #[inline(always)]
    fn as_budget(&self) -> Self::Ref<'_> {
        (**self).as_budget()
    }
}

impl<T: Deref<Target: AsBreaker> + ?Sized> AsBreaker for T {
    type Ref<'a>
        = <T::Target as AsBreaker>::Ref<'a>
    where
        Self: 'a;
    #[inline(always)]
    fn as_breaker(&self) -> Self::Ref<'_> {
        (**self).as_breaker()
    }
}

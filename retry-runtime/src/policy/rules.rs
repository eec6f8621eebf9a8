//! Per-kind rules (`when` clauses) and the order in which they are tried.
//!
//! Error rules ([`Rule`]) and value rules ([`OkRule`], the `Ok(..)` kinds) share one list, in
//! the order written: an error is tried against the error rules, a successful value against
//! the value rules, and each rule's [`RuleId`] is its position among all of them.

use std::time::Duration;

use crate::RuleId;
use crate::kind::{Classify, ClassifyValue, Failure};
use crate::policy::settings::Plan;

/// One `when(KIND, ...)` rule for errors: a kind and the settings it applies.
#[derive(Debug, Clone, Copy)]
pub struct Rule<K, P> {
    pub(crate) kind: K,
    pub(crate) settings: P,
}

impl<K, P> Rule<K, P> {
    /// A rule applying `settings` to failures matched by `kind`.
    pub const fn new(kind: K, settings: P) -> Self {
        Self { kind, settings }
    }
}

/// One `when(Ok(..), ...)` rule for successful values: a value kind
/// ([`ClassifyValue`]) and the settings it applies.
#[derive(Debug, Clone, Copy)]
pub struct OkRule<K, P> {
    pub(crate) kind: K,
    pub(crate) settings: P,
}

impl<K, P> OkRule<K, P> {
    /// A rule applying `settings` to values matched by `kind`.
    pub const fn new(kind: K, settings: P) -> Self {
        Self { kind, settings }
    }
}

/// Receives the settings of the rule that matched, with their concrete type (so the retry
/// loop's work on them is statically dispatched and inlined).
pub trait PlanVisitor {
    /// What the visit returns.
    type Out;
    /// Called with the matching rule's settings, which rule it is, and the delay the matched
    /// value asked for (value rules only; an error's hint is the policy's).
    fn visit<P: Plan>(self, plan: &P, rule: RuleId, hint: Option<Duration>) -> Self::Out;
}

/// An ordered list of rules: `()` is empty, `(Rest, Rule)` and `(Rest, OkRule)` append a rule
/// after `Rest`.
pub trait Rules<E> {
    /// The number of rules, error and value rules alike.
    const LEN: usize;
    /// Whether a rule (error or value rule) has a `max_delay`: the call must then know when
    /// its first attempt started.
    fn any_max_delay(&self) -> bool;
    /// Visits the settings of the first error rule that matches `failure`, in the order
    /// written; gives the visitor back when none does.
    fn select<V: PlanVisitor>(&self, failure: &Failure<'_, E>, visitor: V) -> Result<V::Out, V>;
}

/// The value side of a rule list: the [`OkRule`]s, tried against a successful value.
pub trait ValueRules<T> {
    /// Whether the list has a value rule (the loop looks at values only then).
    const ACTIVE: bool;
    /// The number of rules, error and value rules alike.
    const LEN: usize;
    /// Visits the settings of the first value rule that matches `value`, in the order
    /// written; gives the visitor back when none does.
    fn select_value<V: PlanVisitor>(&self, value: &T, visitor: V) -> Result<V::Out, V>;
}

impl<E> Rules<E> for () {
    const LEN: usize = 0;
    #[inline(always)]
    fn any_max_delay(&self) -> bool {
        false
    }
    #[inline]
    fn select<V: PlanVisitor>(&self, _: &Failure<'_, E>, visitor: V) -> Result<V::Out, V> {
        Err(visitor)
    }
}

impl<T> ValueRules<T> for () {
    const ACTIVE: bool = false;
    const LEN: usize = 0;
    #[inline(always)]
    fn select_value<V: PlanVisitor>(&self, _: &T, visitor: V) -> Result<V::Out, V> {
        Err(visitor)
    }
}

impl<E, Rest, K, P> Rules<E> for (Rest, Rule<K, P>)
where
    Rest: Rules<E>,
    K: Classify<E>,
    P: Plan,
{
    const LEN: usize = Rest::LEN + 1;
    #[inline]
    fn any_max_delay(&self) -> bool {
        self.0.any_max_delay() || self.1.settings.budget().is_some()
    }
    #[inline]
    fn select<V: PlanVisitor>(&self, f: &Failure<'_, E>, visitor: V) -> Result<V::Out, V> {
        match self.0.select(f, visitor) {
            Ok(out) => Ok(out),
            Err(visitor) if self.1.kind.matches(f) => {
                Ok(visitor.visit(&self.1.settings, RuleId::When(Rest::LEN), None))
            }
            Err(visitor) => Err(visitor),
        }
    }
}

impl<T, Rest: ValueRules<T>, K, P> ValueRules<T> for (Rest, Rule<K, P>) {
    const ACTIVE: bool = Rest::ACTIVE;
    const LEN: usize = Rest::LEN + 1;
    #[inline(always)]
    fn select_value<V: PlanVisitor>(&self, value: &T, visitor: V) -> Result<V::Out, V> {
        self.0.select_value(value, visitor)
    }
}

impl<E, Rest: Rules<E>, K, P: Plan> Rules<E> for (Rest, OkRule<K, P>) {
    const LEN: usize = Rest::LEN + 1;
    #[inline]
    fn any_max_delay(&self) -> bool {
        self.0.any_max_delay() || self.1.settings.budget().is_some()
    }
    #[inline(always)]
    fn select<V: PlanVisitor>(&self, f: &Failure<'_, E>, visitor: V) -> Result<V::Out, V> {
        self.0.select(f, visitor)
    }
}

impl<T, Rest, K, P> ValueRules<T> for (Rest, OkRule<K, P>)
where
    Rest: ValueRules<T>,
    K: ClassifyValue<T>,
    P: Plan,
{
    const ACTIVE: bool = true;
    const LEN: usize = Rest::LEN + 1;
    #[inline]
    fn select_value<V: PlanVisitor>(&self, value: &T, visitor: V) -> Result<V::Out, V> {
        match self.0.select_value(value, visitor) {
            Ok(out) => Ok(out),
            Err(visitor) if self.1.kind.matches_value(value) => Ok(visitor.visit(
                &self.1.settings,
                RuleId::When(Rest::LEN),
                self.1.kind.hint_value(value),
            )),
            Err(visitor) => Err(visitor),
        }
    }
}

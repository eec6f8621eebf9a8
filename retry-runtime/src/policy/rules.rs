//! Per-kind rules (`when` clauses) and the order in which they are tried.

use crate::kind::{Classify, Failure};
use crate::policy::settings::Plan;

/// One `when(KIND, ...)` rule: a kind and the settings it applies.
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

/// Receives the settings of the rule that matched, with their concrete type (so the retry
/// loop's work on them is statically dispatched and inlined).
pub trait PlanVisitor {
    /// What the visit returns.
    type Out;
    /// Called with the matching rule's settings and which rule it is.
    fn visit<P: Plan>(self, plan: &P, rule: crate::RuleId) -> Self::Out;
}

/// An ordered list of rules: `()` is empty, `(Rest, Rule)` appends a rule after `Rest`.
pub trait Rules<E> {
    /// The number of rules.
    const LEN: usize;
    /// Visits the settings of the first rule that matches `failure`, in the order written;
    /// gives the visitor back when no rule matches.
    fn select<V: PlanVisitor>(&self, failure: &Failure<'_, E>, visitor: V) -> Result<V::Out, V>;
}

impl<E> Rules<E> for () {
    const LEN: usize = 0;
    #[inline]
    fn select<V: PlanVisitor>(&self, _: &Failure<'_, E>, visitor: V) -> Result<V::Out, V> {
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
    fn select<V: PlanVisitor>(&self, f: &Failure<'_, E>, visitor: V) -> Result<V::Out, V> {
        match self.0.select(f, visitor) {
            Ok(out) => Ok(out),
            Err(visitor) if self.1.kind.matches(f) => {
                Ok(visitor.visit(&self.1.settings, crate::RuleId::When(Rest::LEN)))
            }
            Err(visitor) => Err(visitor),
        }
    }
}

//! Per-kind rules (`when` clauses) and the order in which they are tried.

use crate::kind::{Classify, Failure};
use crate::settings::Plan;

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

/// An ordered list of rules: `()` is empty, `(Rest, Rule)` appends a rule after `Rest`.
pub trait Rules<E> {
    /// The settings of the first rule that matches `failure`, in the order written.
    fn select(&self, failure: &Failure<'_, E>) -> Option<&dyn Plan>;
}

impl<E> Rules<E> for () {
    #[inline]
    fn select(&self, _: &Failure<'_, E>) -> Option<&dyn Plan> {
        None
    }
}

impl<E, Rest, K, P> Rules<E> for (Rest, Rule<K, P>)
where
    Rest: Rules<E>,
    K: Classify<E>,
    P: Plan,
{
    #[inline]
    fn select(&self, f: &Failure<'_, E>) -> Option<&dyn Plan> {
        match self.0.select(f) {
            Some(p) => Some(p),
            None if self.1.kind.matches(f) => Some(&self.1.settings),
            None => None,
        }
    }
}

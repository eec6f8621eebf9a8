//! Autoref specialisation probes: `(&&&Probe::<E>::new()).inspector()` picks how the attribute
//! sees an `E` as `&dyn Error` (through `Inspect`, else `std::error::Error`, else not at all);
//! `(&&Probe::<E>::new()).error_writer()` picks how events write it (`Display`, else its type
//! name). Decided at compile time; nothing here runs a decision of its own.

use std::error::Error;
use std::marker::PhantomData;

use crate::Inspect;
use crate::checks::{NoView, View};

/// How to view an `E` as `&dyn Error`.
pub use crate::kind::ErrorView as Inspector;

/// A probe for autoref specialisation: `(&&&Probe::<E>::new()).inspector()`.
#[derive(Debug)]
pub struct Probe<E>(PhantomData<fn() -> E>);

impl<E> Probe<E> {
    /// A probe.
    pub const fn new() -> Self {
        Probe(PhantomData)
    }
}

impl<E> Default for Probe<E> {
    fn default() -> Self {
        Self::new()
    }
}

/// Highest priority: `E: Inspect`.
pub trait ViaInspect<E> {
    /// The inspector.
    fn inspector(&self) -> View<E>;
}
impl<E: Inspect> ViaInspect<E> for &&Probe<E> {
    fn inspector(&self) -> View<E> {
        View(|e| e.as_error())
    }
}

/// Next: `E: std::error::Error`.
pub trait ViaError<E> {
    /// The inspector.
    fn inspector(&self) -> View<E>;
}
impl<E: Error + 'static> ViaError<E> for &Probe<E> {
    fn inspector(&self) -> View<E> {
        View(|e| Some(e))
    }
}

/// Last: no view; only the timeout flag and predicates classify such errors.
pub trait ViaNothing<E> {
    /// The inspector.
    fn inspector(&self) -> NoView<E>;
}
impl<E> ViaNothing<E> for Probe<E> {
    fn inspector(&self) -> NoView<E> {
        NoView(PhantomData)
    }
}

/// The fn's name and the way to write its errors; see [`describe`].
pub struct Described<Nm, D> {
    /// The fn's name: a closure returning it with the `tracing` feature, `()` without (nothing
    /// reads it then), so that without tracing fns with the same settings share one policy
    /// type, and the retry loop is compiled once for all of them.
    name: Nm,
    _error: D,
}

impl<Nm, D> std::fmt::Debug for Described<Nm, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Described")
    }
}

impl<Nm: Clone, D: Clone> Clone for Described<Nm, D> {
    fn clone(&self) -> Self {
        Described {
            name: self.name.clone(),
            _error: self._error.clone(),
        }
    }
}
impl<Nm: Copy, D: Copy> Copy for Described<Nm, D> {}

/// How an annotated fn's name is kept: as the closure that returns it with the `tracing`
/// feature, not at all without.
pub trait KeepName {
    /// What is kept.
    type Kept: NameOf;
    /// Keeps it.
    fn keep(self) -> Self::Kept;
}

#[cfg(feature = "tracing")]
impl<F: Fn() -> &'static str> KeepName for F {
    type Kept = F;
    #[inline(always)]
    fn keep(self) -> F {
        self
    }
}

#[cfg(not(feature = "tracing"))]
impl<F: Fn() -> &'static str> KeepName for F {
    type Kept = ();
    #[inline(always)]
    fn keep(self) {}
}

/// A kept name, or none.
pub trait NameOf {
    /// The name, if kept.
    fn name_of(&self) -> Option<&'static str>;
}

impl NameOf for () {
    #[inline(always)]
    fn name_of(&self) -> Option<&'static str> {
        None
    }
}

impl<F: Fn() -> &'static str> NameOf for F {
    #[inline(always)]
    fn name_of(&self) -> Option<&'static str> {
        Some(self())
    }
}

/// What the events of an annotated fn say: `name` returns the fn's name; `error` is the
/// marker `(&&Probe::<E>::new()).error_writer()` picked (`DisplayText` or `TypeName`).
#[inline(always)]
pub fn describe<Nm: KeepName, D>(name: Nm, error: D) -> Described<Nm::Kept, D> {
    Described {
        name: name.keep(),
        _error: error,
    }
}

impl<E, Nm: NameOf, D: WriteError<E>> crate::callbacks::Describe<E> for Described<Nm, D> {
    #[inline]
    fn name(&self) -> Option<&'static str> {
        self.name.name_of()
    }
    fn write_error(&self, error: &E, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        D::write_error(error, f)
    }
}

/// How an error of type `E` is written in an event.
pub trait WriteError<E> {
    /// Writes `error`.
    fn write_error(error: &E, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result;
}

/// Writes an error with its `Display` text.
#[derive(Debug, Clone, Copy)]
pub struct DisplayText;
impl<E: std::fmt::Display> WriteError<E> for DisplayText {
    #[inline]
    fn write_error(error: &E, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(error, f)
    }
}

/// Writes an error as the name of its type (it has no `Display`).
#[derive(Debug, Clone, Copy)]
pub struct TypeName;
impl<E> WriteError<E> for TypeName {
    #[inline]
    fn write_error(_: &E, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(std::any::type_name::<E>())
    }
}

/// First choice: `E: Display`.
pub trait ViaDisplay<E> {
    /// The marker.
    fn error_writer(&self) -> DisplayText;
}
impl<E: std::fmt::Display> ViaDisplay<E> for &Probe<E> {
    fn error_writer(&self) -> DisplayText {
        DisplayText
    }
}

/// Otherwise: the type's name.
pub trait ViaTypeName<E> {
    /// The marker.
    fn error_writer(&self) -> TypeName;
}
impl<E> ViaTypeName<E> for Probe<E> {
    fn error_writer(&self) -> TypeName {
        TypeName
    }
}

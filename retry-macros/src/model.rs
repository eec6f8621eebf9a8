//! The validated attribute: what `valid` makes of the raw items and `expand` writes out.
//! Every value here has passed its checks; `None` means "not written: the runtime's default".

use std::time::Duration;

use syn::{Expr, Ident};

use crate::ast::{Kind, Sp};

/// A limit that may be infinite (negative numbers, `none`).
#[derive(Clone, Copy)]
pub enum Limit {
    Finite(Duration),
    Infinite,
}

pub struct Spanned<T> {
    pub value: T,
    pub span: Sp,
}

/// The duration of an optional limit when it is finite (written, and not infinite).
pub fn finite_limit(limit: &Option<Spanned<Limit>>) -> Option<Duration> {
    match limit.as_ref()?.value {
        Limit::Finite(d) => Some(d),
        Limit::Infinite => None,
    }
}

pub enum Strategy {
    Exponential {
        base: Duration,
        max: Duration,
        /// `None`: the runtime's default.
        m: Option<f64>,
    },
    Linear {
        base: Duration,
        max: Duration,
        interval: Duration,
    },
    Fibonacci {
        base: Duration,
        max: Duration,
        unit: Option<Duration>,
    },
    Polynomial {
        base: Duration,
        max: Duration,
        p: Option<Vec<f64>>,
        unit: Option<Duration>,
    },
    Random {
        base: Duration,
        max: Duration,
    },
    Constant {
        base: Duration,
    },
    None,
    Custom(Box<Expr>),
    /// Not written: the runtime's default strategy.
    Default,
}

pub enum JitterSpec {
    /// Not written: the runtime's default jitter.
    Default,
    None,
    Full,
    Equal,
    Decorrelated,
    AwsDecorrelated,
    Custom(Box<Expr>),
}

/// The settings a `when` clause may override (and the top level sets).
#[derive(Default)]
pub struct Overrides {
    pub retries: Option<Spanned<i64>>,
    pub max_delay: Option<Spanned<Limit>>,
    pub backoff: Option<Spanned<Strategy>>,
    pub jitter: Option<Spanned<JitterSpec>>,
    pub scale: Option<Spanned<f64>>,
}

pub struct WhenRule {
    pub kind: Kind,
    pub overrides: Overrides,
    /// `hint = ...` of a `when(Ok(..), ...)` clause: reads the delay from the value.
    pub hint: Option<Box<Expr>>,
}

/// When a hedge starts (SPEC section 15).
#[derive(Clone, Copy)]
pub enum After {
    Fixed(Duration),
    /// A percentile in [50, 99.9].
    Percentile(f64),
}

/// `hedge(after = .., max = ..)`.
pub struct HedgeSpec {
    pub after: After,
    /// Where `after`'s value is written.
    pub after_sp: Sp,
    pub max: u32,
}

/// `timeout = adaptive(p = .., factor = .., min = .., max = ..)` (SPEC section 15b).
pub struct AdaptiveSpec {
    pub p: f64,
    pub factor: f64,
    pub min: Duration,
    /// Where `min`'s value is written.
    pub min_sp: Sp,
    pub max: Duration,
}

/// The validated attribute.
#[derive(Default)]
pub struct Config {
    pub timeout: Option<Spanned<Limit>>,
    /// `timeout = adaptive(..)`, instead of a fixed `timeout`.
    pub adaptive: Option<Spanned<AdaptiveSpec>>,
    /// `hedge(..)`: the span is the key's.
    pub hedge: Option<Spanned<HedgeSpec>>,
    /// The whole call's limit (SPEC section 12).
    pub deadline: Option<Spanned<Limit>>,
    pub settings: Overrides,
    pub on: Option<Spanned<Vec<Kind>>>,
    pub whens: Vec<WhenRule>,
    pub on_success: Option<Box<Expr>>,
    pub on_error: Option<Box<Expr>>,
    pub on_retry: Option<Box<Expr>>,
    pub hint: Option<Box<Expr>>,
    /// `fallback = ...` (SPEC section 14).
    pub fallback: Option<Box<Expr>>,
    pub budget: Option<Box<Expr>>,
    pub breaker: Option<Box<Expr>>,
    /// `throttle = ...` (SPEC section 16).
    pub throttle: Option<Box<Expr>>,
    /// `limit = ...` (SPEC section 16).
    pub limit: Option<Box<Expr>>,
    pub attempt: Option<Ident>,
    pub krate: Option<syn::Path>,
}

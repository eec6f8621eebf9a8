//! Error values of the runtime: configuration mistakes and per-attempt timeouts.

use std::error::Error;
use std::fmt;

/// A configuration value that breaks a rule of the reference design.
///
/// Every constructor and builder of this crate validates its input and reports the first
/// broken rule as a `ConfigError` instead of panicking. The error names the parameter and
/// the rule; it is `Copy` and allocation-free.
///
/// ```
/// use std::time::Duration;
/// use retry_runtime::Exponential;
///
/// let err = Exponential::new(Duration::from_secs(1), Duration::from_secs(60), 0.5).unwrap_err();
/// assert_eq!(err.parameter(), "m");
/// assert_eq!(err.to_string(), "invalid `m`: must be a finite number >= 1");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigError {
    parameter: &'static str,
    rule: &'static str,
}

impl ConfigError {
    /// A new error for `parameter`, saying which `rule` it breaks.
    pub const fn new(parameter: &'static str, rule: &'static str) -> Self {
        Self { parameter, rule }
    }

    /// The name of the offending parameter (`"base"`, `"m"`, `"scale"`, ...).
    pub const fn parameter(&self) -> &'static str {
        self.parameter
    }

    /// The rule the value breaks, as a phrase (`"must be a finite number >= 1"`).
    pub const fn rule(&self) -> &'static str {
        self.rule
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid `{}`: {}", self.parameter, self.rule)
    }
}

impl Error for ConfigError {}

/// The error of an async attempt that ran out of its `timeout`, or that the call's `deadline`
/// cut.
///
/// An async call (an async fn under `#[robust]`, or `call_async`) with a timeout or a deadline
/// needs its error type `E` to implement `From<Elapsed>`: the cut attempt then fails with
/// `E::from(Elapsed)`. A blocking call never builds one (its timeout is cooperative: an error
/// returned late counts as a `Timeout`), so it needs no conversion. This crate implements
/// the conversion for [`std::io::Error`] (kind [`TimedOut`](std::io::ErrorKind::TimedOut));
/// since `Elapsed` implements [`std::error::Error`], boxed errors and `anyhow::Error` get it
/// for free.
///
/// ```
/// use retry_runtime::Elapsed;
/// let io: std::io::Error = Elapsed::new().into();
/// assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Elapsed(());

impl Elapsed {
    /// A new `Elapsed` value.
    pub const fn new() -> Self {
        Self(())
    }
}

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("attempt timed out")
    }
}

impl Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(e: Elapsed) -> Self {
        std::io::Error::new(std::io::ErrorKind::TimedOut, e)
    }
}

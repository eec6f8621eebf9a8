//! Validation: turns the raw items into a [`Config`], checking every rule of the reference
//! design and collecting every error with the span of the offending token.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::Duration;

use proc_macro2::Span;
use syn::{Expr, Ident};

use crate::ast::{Call, Item, Kind, Number, Value};

/// A limit that may be infinite (negative numbers, `none`).
#[derive(Clone, Copy)]
pub enum Limit {
    Finite(Duration),
    Infinite,
}

pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

pub enum Strategy {
    Exponential {
        base: Duration,
        max: Duration,
        m: f64,
    },
    Linear {
        base: Duration,
        max: Duration,
        interval: Duration,
    },
    Fibonacci {
        base: Duration,
        max: Duration,
        unit: Duration,
    },
    Polynomial {
        base: Duration,
        max: Duration,
        p: Vec<f64>,
        unit: Duration,
    },
    Random {
        base: Duration,
        max: Duration,
    },
    Constant {
        base: Duration,
    },
    None,
    Custom(Expr),
}

pub enum JitterSpec {
    None,
    Full,
    Equal,
    Decorrelated,
    AwsDecorrelated,
    Custom(Expr),
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
}

/// The validated attribute.
#[derive(Default)]
pub struct Config {
    pub timeout: Option<Spanned<Limit>>,
    pub settings: Overrides,
    pub on: Option<Spanned<Vec<Kind>>>,
    pub whens: Vec<WhenRule>,
    pub on_success: Option<Expr>,
    pub on_error: Option<Expr>,
    pub on_retry: Option<Expr>,
    pub hint: Option<Expr>,
    pub budget: Option<Expr>,
    pub breaker: Option<Expr>,
    pub attempt: Option<Ident>,
    pub krate: Option<syn::Path>,
}

const KEYS: &str = "`timeout`, `retries`, `max_delay`, `backoff`, `jitter`, `scale`, `on`, `when(...)`, `on_success`, `on_error`, `on_retry`, `hint`, `budget`, `breaker`, `attempt`, `crate`";
const WHEN_KEYS: &str = "`retries`, `max_delay`, `backoff`, `jitter`, `scale`";
const STRATEGIES: &str = "`exponential(base, max, m = 2)`, `linear(base, max, interval = base)`, `fibonacci(base, max, unit = \"1s\")`, `polynomial(base, max, p = [2], unit = \"1s\")`, `random(base, max)`, `constant(base)`, `none`, `custom(EXPR)`";
const JITTERS: &str = "`none`, `full`, `equal`, `decorrelated`, `aws_decorrelated`, `custom(EXPR)`";
const DURATION_FORMS: &str =
    "a humantime string like \"2s\", \"150ms\", \"1m 30s\", or a number of seconds like 2 or 0.5";

/// The stable `std::io::ErrorKind` variants.
pub const IO_KINDS: &[&str] = &[
    "NotFound",
    "PermissionDenied",
    "ConnectionRefused",
    "ConnectionReset",
    "HostUnreachable",
    "NetworkUnreachable",
    "ConnectionAborted",
    "NotConnected",
    "AddrInUse",
    "AddrNotAvailable",
    "NetworkDown",
    "BrokenPipe",
    "AlreadyExists",
    "WouldBlock",
    "NotADirectory",
    "IsADirectory",
    "DirectoryNotEmpty",
    "ReadOnlyFilesystem",
    "StaleNetworkFileHandle",
    "InvalidInput",
    "InvalidData",
    "TimedOut",
    "WriteZero",
    "StorageFull",
    "NotSeekable",
    "QuotaExceeded",
    "FileTooLarge",
    "ResourceBusy",
    "ExecutableFileBusy",
    "Deadlock",
    "CrossesDevices",
    "TooManyLinks",
    "InvalidFilename",
    "ArgumentListTooLong",
    "Interrupted",
    "Unsupported",
    "UnexpectedEof",
    "OutOfMemory",
    "Other",
];

/// Collects errors; [`Errors::finish`] combines them into one.
#[derive(Default)]
pub struct Errors(Option<syn::Error>);

impl Errors {
    pub fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }

    pub fn at(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.push(syn::Error::new(span, msg));
    }

    /// Stores `value` in `slot`, or reports `key` as a duplicate (pointing at the later one).
    pub fn set_once<T>(&mut self, slot: &mut Option<T>, key: &Ident, value: Option<T>) {
        if slot.is_some() {
            self.at(
                key.span(),
                format!("duplicate `{key}`: it is already set above"),
            );
        } else if value.is_some() {
            *slot = value;
        }
    }

    pub fn finish(self) -> Option<syn::Error> {
        self.0
    }
}

fn spanned<T>(value: T, span: Span) -> Spanned<T> {
    Spanned { value, span }
}

/// A duration from seconds, or an error message.
fn secs(v: f64) -> Result<Duration, String> {
    if !v.is_finite() {
        return Err("this number is too large for a duration".into());
    }
    Duration::try_from_secs_f64(v).map_err(|_| "this number is too large for a duration".into())
}

/// Reads a duration or limit. With `infinite_ok`, negative numbers (and `none`) mean infinite.
fn limit(value: &Value, what: &str, infinite_ok: bool, errors: &mut Errors) -> Option<Limit> {
    let negative = |errors: &mut Errors, span| {
        if infinite_ok {
            Some(Limit::Infinite)
        } else {
            errors.at(
                span,
                format!("`{what}` must not be negative: expected {DURATION_FORMS}"),
            );
            None
        }
    };
    let from_secs = |v: f64, span, errors: &mut Errors| match secs(v) {
        Ok(d) => Some(Limit::Finite(d)),
        Err(m) => {
            errors.at(span, format!("invalid `{what}`: {m}"));
            None
        }
    };
    match value {
        Value::Number(n) if n.negative => negative(errors, n.span),
        Value::Number(n) => from_secs(n.as_f64(), n.span, errors),
        Value::Str(s) => {
            let text = s.value();
            let t = text.trim();
            if let Ok(v) = t.parse::<f64>() {
                if v < 0.0 {
                    return negative(errors, s.span());
                }
                if v.is_nan() {
                    errors.at(
                        s.span(),
                        format!("invalid `{what}` \"{text}\": expected {DURATION_FORMS}"),
                    );
                    return None;
                }
                return from_secs(v, s.span(), errors);
            }
            match humantime::parse_duration(t) {
                Ok(d) => Some(Limit::Finite(d)),
                Err(e) => {
                    errors.at(
                        s.span(),
                        format!("invalid `{what}` \"{text}\" ({e}): expected {DURATION_FORMS}"),
                    );
                    None
                }
            }
        }
        Value::Word(w) if w == "none" && infinite_ok => Some(Limit::Infinite),
        other => {
            let none = if infinite_ok {
                ", a negative number or `none` for no limit"
            } else {
                ""
            };
            errors.at(
                other.span(),
                format!("`{what}` expects {DURATION_FORMS}{none}"),
            );
            None
        }
    }
}

/// A duration that must be finite and non-negative.
fn duration(value: &Value, what: &str, errors: &mut Errors) -> Option<Duration> {
    match limit(value, what, false, errors)? {
        Limit::Finite(d) => Some(d),
        Limit::Infinite => None,
    }
}

fn number(value: &Value, what: &str, rule: &str, errors: &mut Errors) -> Option<Number> {
    match value {
        Value::Number(n) => Some(n.clone()),
        other => {
            errors.at(other.span(), format!("`{what}` expects {rule}"));
            None
        }
    }
}

fn retries(value: &Value, errors: &mut Errors) -> Option<i64> {
    const RULE: &str =
        "an integer: 0 = never retry, n = at most n retries, a negative number = retry forever";
    let n = number(value, "retries", RULE, errors)?;
    match n.as_i64() {
        Some(v) => Some(v),
        None => {
            errors.at(n.span, format!("`retries` expects {RULE}"));
            None
        }
    }
}

fn scale(value: &Value, errors: &mut Errors) -> Option<f64> {
    const RULE: &str = "a number > 0 that multiplies every delay, like 0.5 or 2";
    let n = number(value, "scale", RULE, errors)?;
    let v = n.as_f64();
    if v.is_finite() && v > 0.0 {
        Some(v)
    } else {
        errors.at(n.span, format!("`scale` must be > 0: expected {RULE}"));
        None
    }
}

/// Reads `name(key = value, ...)` parameters of a strategy.
struct Params {
    /// Name to (position in the call, key, value).
    items: HashMap<String, (usize, Ident, Value)>,
}

impl Params {
    fn read(call: Option<&Call>, allowed: &[&str], strategy: &str, errors: &mut Errors) -> Self {
        let mut items = HashMap::new();
        let Some(call) = call else {
            return Params { items };
        };
        let parsed = syn::parse::Parser::parse2(
            |input: syn::parse::ParseStream<'_>| Ok(crate::ast::parse_items(input)),
            call.args.clone(),
        );
        let (list, parse_errors) = match parsed {
            Ok(v) => v,
            Err(e) => (Vec::new(), vec![e]),
        };
        for e in parse_errors {
            errors.push(e);
        }
        for (index, Item { key, value }) in list.into_iter().enumerate() {
            let name = key.to_string();
            if !allowed.contains(&name.as_str()) {
                let list: Vec<String> = allowed.iter().map(|a| format!("`{a}`")).collect();
                let expected = if list.is_empty() {
                    "it takes no parameters".to_owned()
                } else {
                    format!("expected one of: {}", list.join(", "))
                };
                errors.at(
                    key.span(),
                    format!("unknown parameter `{name}` for `{strategy}`: {expected}"),
                );
            } else {
                match items.entry(name) {
                    Entry::Occupied(o) => errors.at(
                        key.span(),
                        format!("duplicate parameter `{}`: it is already set above", o.key()),
                    ),
                    Entry::Vacant(v) => {
                        v.insert((index, key, value));
                    }
                }
            }
        }
        Params { items }
    }

    fn get(&self, name: &str) -> Option<(&Ident, &Value)> {
        self.items.get(name).map(|(_, k, v)| (k, v))
    }

    fn duration(&self, name: &str, errors: &mut Errors) -> Option<Option<Duration>> {
        let (_, v) = self.get(name)?;
        Some(duration(v, name, errors))
    }

    /// Reports the required parameters that are missing, in one error at `at`.
    fn check_required(
        &self,
        names: &[&str],
        strategy: &str,
        form: &str,
        at: Span,
        errors: &mut Errors,
    ) {
        let missing: Vec<String> = names
            .iter()
            .filter(|n| self.get(n).is_none())
            .map(|n| format!("`{n}`"))
            .collect();
        if !missing.is_empty() {
            let (what, list) = if missing.len() == 1 {
                ("parameter", missing[0].clone())
            } else {
                ("parameters", missing.join(" and "))
            };
            errors.at(
                at,
                format!("`{strategy}` is missing its {list} {what}: write `{form}`"),
            );
        }
    }

    /// The span of the value written later of `a` and `b`, for conflicts.
    fn later(&self, a: &str, b: &str, fallback: Span) -> Span {
        [a, b]
            .iter()
            .filter_map(|k| self.items.get(*k))
            .max_by_key(|(index, _, _)| *index)
            .map_or(fallback, |(_, _, v)| v.span())
    }
}

fn strategy(value: &Value, errors: &mut Errors) -> Option<Strategy> {
    let (name, call) = match value {
        Value::Word(w) => (w.clone(), None),
        Value::Call(c) => (c.name.clone(), Some(c)),
        other => {
            errors.at(
                other.span(),
                format!("expected a backoff strategy: one of {STRATEGIES}"),
            );
            return None;
        }
    };
    let s = name.to_string();
    let at = call.map_or(name.span(), |c| c.span);
    if s == "custom" {
        let Some(call) = call else {
            errors.at(
                name.span(),
                "`custom` takes an expression: `custom(MyBackoff::new())`",
            );
            return None;
        };
        return match syn::parse2::<Expr>(call.args.clone()) {
            Ok(e) => Some(Strategy::Custom(e)),
            Err(e) => {
                errors.push(e);
                None
            }
        };
    }
    let allowed: &[&str] = match s.as_str() {
        "exponential" => &["base", "max", "m"],
        "linear" => &["base", "max", "interval"],
        "fibonacci" => &["base", "max", "unit"],
        "polynomial" => &["base", "max", "p", "unit"],
        "random" => &["base", "max"],
        "constant" => &["base"],
        "none" => &[],
        _ => {
            errors.at(
                name.span(),
                format!("unknown backoff strategy `{s}`: expected one of {STRATEGIES}"),
            );
            return None;
        }
    };
    let p = Params::read(call, allowed, &s, errors);
    let form = match s.as_str() {
        "constant" => "constant(base = \"200ms\")".to_owned(),
        "none" => return Some(Strategy::None),
        other => format!("{other}(base = \"100ms\", max = \"20s\")"),
    };
    let required: &[&str] = if s == "constant" {
        &["base"]
    } else {
        &["base", "max"]
    };
    p.check_required(required, &s, &form, at, errors);
    let base = p.duration("base", errors).flatten();
    if s == "constant" {
        return base.map(|base| Strategy::Constant { base });
    }
    let max = p.duration("max", errors).flatten();
    let range_ok = match (base, max) {
        (Some(b), Some(m)) if b > m => {
            errors.at(
                p.later("base", "max", at),
                format!(
                    "`base` ({}) must not exceed `max` ({})",
                    humantime::format_duration(b),
                    humantime::format_duration(m)
                ),
            );
            false
        }
        _ => true,
    };
    let unit = || Duration::from_secs(1);
    let result = match s.as_str() {
        "exponential" => {
            let m = match p.get("m") {
                None => Some(2.0),
                Some((_, v)) => {
                    const RULE: &str = "a number >= 1, like 2 or 1.5";
                    number(v, "m", RULE, errors).and_then(|n| {
                        let m = n.as_f64();
                        if m.is_finite() && m >= 1.0 {
                            Some(m)
                        } else {
                            errors.at(n.span, format!("`m` must be >= 1: expected {RULE}"));
                            None
                        }
                    })
                }
            };
            (|| {
                Some(Strategy::Exponential {
                    base: base?,
                    max: max?,
                    m: m?,
                })
            })()
        }
        "linear" => {
            let interval = match p.get("interval") {
                None => base,
                Some((_, Value::Number(n))) if n.negative => {
                    errors.at(
                        n.span,
                        format!("`interval` must be >= 0: expected {DURATION_FORMS}"),
                    );
                    None
                }
                Some(_) => p.duration("interval", errors).flatten(),
            };
            (|| {
                Some(Strategy::Linear {
                    base: base?,
                    max: max?,
                    interval: interval?,
                })
            })()
        }
        "fibonacci" => {
            let unit = p.duration("unit", errors).unwrap_or(Some(unit()));
            (|| {
                Some(Strategy::Fibonacci {
                    base: base?,
                    max: max?,
                    unit: unit?,
                })
            })()
        }
        "polynomial" => {
            let unit = p.duration("unit", errors).unwrap_or(Some(unit()));
            let exps = match p.get("p") {
                None => Some(vec![2.0]),
                Some((key, v)) => polynomial_exponents(key, v, errors),
            };
            (|| {
                Some(Strategy::Polynomial {
                    base: base?,
                    max: max?,
                    p: exps?,
                    unit: unit?,
                })
            })()
        }
        "random" => (|| {
            Some(Strategy::Random {
                base: base?,
                max: max?,
            })
        })(),
        _ => None,
    };
    if range_ok { result } else { None }
}

fn polynomial_exponents(key: &Ident, v: &Value, errors: &mut Errors) -> Option<Vec<f64>> {
    const RULE: &str = "every exponent must be > 1: write `p = 2` or `p = [2, 3]`";
    let numbers: Vec<Number> = match v {
        Value::Number(n) => vec![n.clone()],
        Value::Numbers(span, list) if list.is_empty() => {
            errors.at(*span, format!("`p` needs at least one exponent: {RULE}"));
            return None;
        }
        Value::Numbers(_, list) => list.clone(),
        other => {
            errors.at(other.span(), format!("`{key}` expects numbers: {RULE}"));
            return None;
        }
    };
    let mut ok = true;
    let mut out = Vec::new();
    for n in numbers {
        let x = n.as_f64();
        if x.is_finite() && x > 1.0 {
            out.push(x);
        } else {
            errors.at(
                n.span,
                format!("exponent {} is not > 1: {RULE}", n.as_f64()),
            );
            ok = false;
        }
    }
    ok.then_some(out)
}

fn jitter(value: &Value, errors: &mut Errors) -> Option<JitterSpec> {
    match value {
        Value::Word(w) => match w.to_string().as_str() {
            "none" => Some(JitterSpec::None),
            "full" => Some(JitterSpec::Full),
            "equal" => Some(JitterSpec::Equal),
            "decorrelated" => Some(JitterSpec::Decorrelated),
            "aws_decorrelated" => Some(JitterSpec::AwsDecorrelated),
            other => {
                errors.at(
                    w.span(),
                    format!("unknown jitter `{other}`: expected one of {JITTERS}"),
                );
                None
            }
        },
        Value::Call(c) if c.name == "custom" => match syn::parse2::<Expr>(c.args.clone()) {
            Ok(e) => Some(JitterSpec::Custom(e)),
            Err(e) => {
                errors.push(e);
                None
            }
        },
        Value::Call(c) => {
            errors.at(
                c.name.span(),
                format!("unknown jitter `{}`: expected one of {JITTERS}", c.name),
            );
            None
        }
        other => {
            errors.at(
                other.span(),
                format!("expected a jitter algorithm: one of {JITTERS}"),
            );
            None
        }
    }
}

fn check_kind(kind: &Kind, errors: &mut Errors) -> bool {
    let Kind::Io { kinds, .. } = kind else {
        return true;
    };
    let mut ok = true;
    let mut seen = Vec::new();
    for k in kinds {
        let name = k.to_string();
        if !IO_KINDS.contains(&name.as_str()) {
            errors.at(
                k.span(),
                format!(
                    "unknown `std::io::ErrorKind` `{name}`: expected one of {}",
                    IO_KINDS.join(", ")
                ),
            );
            ok = false;
        } else if seen.contains(&name) {
            errors.at(k.span(), format!("`{name}` is listed twice"));
            ok = false;
        }
        seen.push(name);
    }
    ok
}

/// Reads one of the overridable settings into `o`; false if `key` is not one of them.
fn overridable(key: &Ident, value: &Value, o: &mut Overrides, errors: &mut Errors) -> bool {
    let span = value.span();
    match key.to_string().as_str() {
        "retries" => {
            let v = retries(value, errors).map(|v| spanned(v, span));
            errors.set_once(&mut o.retries, key, v);
        }
        "max_delay" => {
            let v = limit(value, "max_delay", true, errors).map(|v| spanned(v, span));
            errors.set_once(&mut o.max_delay, key, v);
        }
        "backoff" => {
            let v = strategy(value, errors).map(|v| spanned(v, span));
            errors.set_once(&mut o.backoff, key, v);
        }
        "jitter" => {
            let v = jitter(value, errors).map(|v| spanned(v, span));
            errors.set_once(&mut o.jitter, key, v);
        }
        "scale" => {
            let v = scale(value, errors).map(|v| spanned(v, span));
            errors.set_once(&mut o.scale, key, v);
        }
        _ => return false,
    }
    true
}

/// Validates every item; returns the config and the combined errors, if any.
pub fn validate(items: Vec<Item>, errors: &mut Errors) -> Config {
    let mut c = Config::default();
    let mut when_kinds: Vec<(String, Span)> = Vec::new();
    for Item { key, value } in items {
        if overridable(&key, &value, &mut c.settings, errors) {
            continue;
        }
        match (key.to_string().as_str(), value) {
            ("timeout", value) => {
                let v = match limit(&value, "timeout", true, errors) {
                    Some(Limit::Finite(d)) if d.is_zero() => {
                        errors.at(
                            value.span(),
                            "`timeout` must be > 0: an attempt with no time can never succeed (use a negative number or `none` for no timeout)",
                        );
                        None
                    }
                    other => other.map(|v| spanned(v, key.span())),
                };
                errors.set_once(&mut c.timeout, &key, v);
            }
            ("on", Value::Kinds(span, kinds)) => {
                if kinds.is_empty() {
                    errors.at(
                        span,
                        "`on` needs at least one error kind: `Timeout`, `Io`, `Io(ErrorKind, ...)`, a pattern or a closure (leave `on` out to retry every error)",
                    );
                }
                let mut seen: Vec<String> = Vec::new();
                let mut ok = !kinds.is_empty();
                for k in &kinds {
                    ok &= check_kind(k, errors);
                    let kk = k.key();
                    if seen.contains(&kk) {
                        errors.at(k.span(), "this error kind is already in the `on` list");
                        ok = false;
                    }
                    seen.push(kk);
                }
                let v = ok.then(|| spanned(kinds, span));
                errors.set_once(&mut c.on, &key, v);
            }
            ("when", Value::When(w)) => {
                let mut o = Overrides::default();
                let mut ok = check_kind(&w.kind, errors);
                let kk = w.kind.key();
                if when_kinds.iter().any(|(k, _)| *k == kk) {
                    errors.at(
                        w.kind.span(),
                        "this error kind already has a `when` clause: merge the two",
                    );
                    ok = false;
                }
                when_kinds.push((kk, w.kind.span()));
                if w.overrides.is_empty() {
                    errors.at(
                        w.span,
                        format!("a `when` clause needs at least one override: {WHEN_KEYS}"),
                    );
                    ok = false;
                }
                for Item { key, value } in w.overrides {
                    if key == "timeout" {
                        errors.at(
                            key.span(),
                            "`timeout` cannot be set in a `when` clause: it limits every attempt before its error is known; set it at the top level",
                        );
                        ok = false;
                    } else if !overridable(&key, &value, &mut o, errors) {
                        errors.at(
                            key.span(),
                            format!(
                                "unknown key `{key}` in `when`: expected one of: {WHEN_KEYS}"
                            ),
                        );
                        ok = false;
                    }
                }
                if ok {
                    c.whens.push(WhenRule {
                        kind: w.kind,
                        overrides: o,
                    });
                }
            }
            ("on_success", Value::Expr(e)) => errors.set_once(&mut c.on_success, &key, Some(e)),
            ("on_error", Value::Expr(e)) => errors.set_once(&mut c.on_error, &key, Some(e)),
            ("on_retry", Value::Expr(e)) => errors.set_once(&mut c.on_retry, &key, Some(e)),
            ("hint", Value::Expr(e)) => errors.set_once(&mut c.hint, &key, Some(e)),
            ("budget", Value::Expr(e)) => errors.set_once(&mut c.budget, &key, Some(e)),
            ("breaker", Value::Expr(e)) => errors.set_once(&mut c.breaker, &key, Some(e)),
            ("attempt", Value::Word(w)) => errors.set_once(&mut c.attempt, &key, Some(w)),
            ("attempt", other) => errors.at(
                other.span(),
                "`attempt` takes a name to bind the attempt context to: `attempt = ctx`",
            ),
            ("crate", Value::Str(s)) => {
                let v = match s.parse::<syn::Path>() {
                    Ok(p) => Some(p),
                    Err(_) => {
                        errors.at(
                            s.span(),
                            "`crate` expects a path to `retry_runtime` as a string, like `crate = \"my_crate::retry\"`",
                        );
                        None
                    }
                };
                errors.set_once(&mut c.krate, &key, v);
            }
            ("crate", other) => errors.at(
                other.span(),
                "`crate` expects a path to `retry_runtime` as a string, like `crate = \"my_crate::retry\"`",
            ),
            (_, _) => errors.at(
                key.span(),
                format!("unknown key `{key}`: expected one of: {KEYS}"),
            ),
        }
    }
    c
}

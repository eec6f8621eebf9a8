//! Checks: turns the raw items into the validated model ([`Config`]), checking every rule of
//! the reference design and the fn's own shape, and collecting every error with the span of
//! the offending token.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::time::Duration;

use retry_grammar::DurationError;
use syn::{Expr, Ident};

use crate::ast::{Call, CallArgs, Item, Kind, Number, Sp, Value};
use crate::model::{
    AdaptiveSpec, After, Config, HedgeSpec, JitterSpec, Limit, Overrides, Spanned, Strategy,
    WhenRule, finite_limit,
};
use crate::table;

const DURATION_FORMS: &str = "a number with a unit like 150ms, 2s or 1m (units: `ns`, `us`, `ms`, `s`, `m`, `h`), a number of seconds like 2 or 0.5, or a humantime string like \"1m 30s\"";

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

    pub fn at(&mut self, sp: impl Into<Sp>, msg: impl std::fmt::Display) {
        self.push(sp.into().error(msg));
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

    /// No error so far: the validated configuration holds everything that was written (a
    /// rejected item is left out of it, which checks across items must not read as absent).
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

fn spanned<T>(value: T, span: Sp) -> Spanned<T> {
    Spanned { value, span }
}

/// Reads a duration or limit. With `infinite_ok`, negative numbers (and `none`) mean infinite.
/// The sign is the value's: `-0` is zero.
fn limit(value: &Value, what: &str, infinite_ok: bool, errors: &mut Errors) -> Option<Limit> {
    let negative = |errors: &mut Errors, sp: Sp| {
        if infinite_ok {
            Some(Limit::Infinite)
        } else {
            errors.at(
                sp,
                format!("`{what}` must not be negative: expected {DURATION_FORMS}"),
            );
            None
        }
    };
    let invalid = |errors: &mut Errors, sp: Sp, e: DurationError| {
        errors.at(sp, format!("invalid `{what}`: it {}", e.rule()));
        None
    };
    match value {
        // The unit and the magnitude are checked whatever the sign: `-1min` is an unknown
        // unit and `-1e400` is not finite, not "infinite".
        Value::Number(n) => match retry_grammar::from_number(&n.digits, &n.suffix) {
            Ok(_) if n.is_negative() => negative(errors, n.sp),
            // (A negative value is "no limit", however small: its magnitude rounding to 0 is
            // no mistake.)
            Err(DurationError::BelowNanosecond) if n.is_negative() => negative(errors, n.sp),
            Ok(d) => Some(Limit::Finite(d)),
            Err(DurationError::UnknownSuffix) => {
                errors.at(
                    n.lit_span,
                    format!(
                        "unknown unit `{}` in `{what}`: a duration's unit is one of {} (a number without a unit is seconds)",
                        n.suffix,
                        retry_grammar::SUFFIX_LIST
                    ),
                );
                None
            }
            Err(e) => invalid(errors, n.sp, e),
        },
        Value::Str(s) => {
            let text = s.value();
            let sp = Sp::from(s.span());
            match retry_grammar::parse_duration(&text) {
                Ok(d) => Some(Limit::Finite(d)),
                Err(DurationError::Negative) => negative(errors, sp),
                Err(DurationError::Syntax) => {
                    errors.at(
                        sp,
                        format!("invalid `{what}` \"{text}\": expected {DURATION_FORMS}"),
                    );
                    None
                }
                Err(e) => invalid(errors, sp, e),
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
                other.sp(),
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

/// A plain number (no unit suffix: `3f32` and `2ms` are errors here).
fn number(value: &Value, what: &str, rule: &str, errors: &mut Errors) -> Option<Number> {
    match value {
        Value::Number(n) if !n.suffix.is_empty() => {
            errors.at(
                n.lit_span,
                format!(
                    "`{what}` takes a plain number, without the suffix `{}`: expected {rule}",
                    n.suffix
                ),
            );
            None
        }
        Value::Number(n) => Some(n.clone()),
        other => {
            errors.at(other.sp(), format!("`{what}` expects {rule}"));
            None
        }
    }
}

/// A finite float, with a message saying what is wrong with it otherwise.
fn finite(n: &Number, what: &str, rule: &str, errors: &mut Errors) -> Option<f64> {
    let v = n.as_f64();
    if v.is_finite() {
        Some(v)
    } else {
        errors.at(
            n.sp,
            format!("`{what}` must be a finite number: expected {rule}"),
        );
        None
    }
}

fn retries(value: &Value, errors: &mut Errors) -> Option<i64> {
    const RULE: &str =
        "an integer: 0 = never retry, n = at most n retries, a negative number = retry forever";
    let n = number(value, "retries", RULE, errors)?;
    match n.as_i128() {
        Some(v) if v > i128::from(u32::MAX) => {
            errors.at(
                n.sp,
                format!(
                    "`retries` must be at most {} (write a negative number to retry forever)",
                    u32::MAX
                ),
            );
            None
        }
        // Any negative number means "forever".
        Some(v) => Some(v.max(-1) as i64),
        None => {
            errors.at(n.sp, format!("`retries` expects {RULE}"));
            None
        }
    }
}

fn scale(value: &Value, errors: &mut Errors) -> Option<f64> {
    const RULE: &str = "a number > 0 that multiplies every delay, like 0.5 or 2";
    let n = number(value, "scale", RULE, errors)?;
    let v = finite(&n, "scale", RULE, errors)?;
    if v > 0.0 {
        Some(v)
    } else {
        errors.at(n.sp, format!("`scale` must be > 0: expected {RULE}"));
        None
    }
}

/// The `name(key = value, ...)` parameters of a strategy.
struct Params<'a> {
    /// Name to (position in the call, key, value).
    items: HashMap<String, (usize, &'a Ident, &'a Value)>,
}

impl<'a> Params<'a> {
    fn read(list: &'a [Item], def: &table::Strategy, errors: &mut Errors) -> Self {
        let mut items = HashMap::new();
        let allowed = || def.param_names();
        for (index, Item { key, value }) in list.iter().enumerate() {
            let name = key.to_string();
            if !allowed().any(|a| a == name) {
                let expected = if def.params.is_empty() {
                    "it takes no parameters".to_owned()
                } else {
                    format!("expected one of: {}", table::list(allowed()))
                };
                errors.at(
                    key.span(),
                    format!(
                        "unknown parameter `{name}` for `{}`{}: {expected}",
                        def.name,
                        table::suggestion(&name, allowed())
                    ),
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

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.items.get(name).map(|(_, _, v)| *v)
    }

    fn duration(&self, name: &str, errors: &mut Errors) -> Option<Option<Duration>> {
        let v = self.get(name)?;
        Some(duration(v, name, errors))
    }

    /// Reports the required parameters that are missing, in one error at `at`.
    fn check_required(&self, def: &table::Strategy, at: Sp, errors: &mut Errors) {
        let missing: Vec<String> = def
            .params
            .iter()
            .filter(|p| p.default.is_none() && self.get(p.name).is_none())
            .map(|p| format!("`{}`", p.name))
            .collect();
        if !missing.is_empty() {
            let (what, list) = if missing.len() == 1 {
                ("parameter", missing[0].clone())
            } else {
                ("parameters", missing.join(" and "))
            };
            errors.at(
                at,
                format!(
                    "`{}` is missing its {list} {what}: write `{}`",
                    def.name,
                    def.example()
                ),
            );
        }
    }

    /// The span of the value written later of `a` and `b`, for conflicts.
    fn later(&self, a: &str, b: &str, fallback: Sp) -> Sp {
        [a, b]
            .iter()
            .filter_map(|k| self.items.get(*k))
            .max_by_key(|(index, _, _)| *index)
            .map_or(fallback, |(_, _, v)| v.sp())
    }
}

/// The expression of `custom(EXPR)`, or an error at the parentheses.
fn custom_expr(call: &Call, what: &str, example: &str, errors: &mut Errors) -> Option<Box<Expr>> {
    match &call.args {
        CallArgs::Expr(Some(e)) => Some(e.clone()),
        // The parse error is already collected.
        CallArgs::Invalid => None,
        _ => {
            errors.at(
                call.paren,
                format!("`custom` takes an expression, the {what} to use: `custom({example})`"),
            );
            None
        }
    }
}

fn strategy(value: &Value, errors: &mut Errors) -> Option<Strategy> {
    let (name, call) = match value {
        Value::Word(w) => (w.clone(), None),
        Value::Call(c) => (c.name.clone(), Some(c)),
        other => {
            errors.at(
                other.sp(),
                format!(
                    "expected a backoff strategy: one of {}",
                    table::strategy_forms()
                ),
            );
            return None;
        }
    };
    let s = name.to_string();
    let at = call.map_or(Sp::from(name.span()), |c| c.paren);
    let Some(def) = table::strategy(&s) else {
        errors.at(
            name.span(),
            format!(
                "unknown backoff strategy `{s}`{}: expected one of {}",
                table::suggestion(&s, table::STRATEGIES.iter().map(|s| s.name)),
                table::strategy_forms()
            ),
        );
        return None;
    };
    match (s.as_str(), call) {
        ("custom", None) => {
            errors.at(
                name.span(),
                "`custom` takes an expression: `custom(MyBackoff::new())`",
            );
            return None;
        }
        ("custom", Some(call)) => {
            return custom_expr(call, "backoff", "MyBackoff::new()", errors).map(Strategy::Custom);
        }
        ("none", None) => return Some(Strategy::None),
        ("none", Some(call)) => {
            errors.at(
                call.paren,
                "`none` takes no parameters: write `backoff = none`",
            );
            return None;
        }
        _ => {}
    }
    let list: &[Item] = match call.map(|c| &c.args) {
        Some(CallArgs::Params(list)) => list,
        _ => &[],
    };
    let p = Params::read(list, def, errors);
    p.check_required(def, at, errors);
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
                    retry_grammar::format(b),
                    retry_grammar::format(m)
                ),
            );
            false
        }
        _ => true,
    };
    // With `base` equal to `max` every delay is `base`: a growth written beside them is read
    // by nothing.
    if let (Some(b), Some(m)) = (base, max)
        && b == m
    {
        let growth: &[&str] = match s.as_str() {
            "exponential" => &["m"],
            "linear" => &["interval"],
            "fibonacci" => &["unit"],
            "polynomial" => &["p", "unit"],
            _ => &[],
        };
        for key in growth {
            if let Some(v) = p.get(key) {
                let b = retry_grammar::format(b);
                errors.at(
                    v.sp(),
                    format!("`{key}` has no effect: `base` and `max` are equal ({b}), so every delay is `base`; raise `max`, or write `constant(base = {b})`"),
                );
            }
        }
    }
    let result = match s.as_str() {
        "exponential" => {
            let m = match p.get("m") {
                None => Some(None),
                Some(v) => {
                    const RULE: &str = "a number >= 1, like 2 or 1.5";
                    number(v, "m", RULE, errors).and_then(|n| {
                        let m = finite(&n, "m", RULE, errors)?;
                        if m >= 1.0 {
                            Some(Some(m))
                        } else {
                            errors.at(n.sp, format!("`m` must be >= 1: expected {RULE}"));
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
                Some(Value::Number(n)) if n.is_negative() => {
                    errors.at(
                        n.sp,
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
            let unit = p
                .duration("unit", errors)
                .map_or(Some(None), |u| u.map(Some));
            (|| {
                Some(Strategy::Fibonacci {
                    base: base?,
                    max: max?,
                    unit: unit?,
                })
            })()
        }
        "polynomial" => {
            let unit = p
                .duration("unit", errors)
                .map_or(Some(None), |u| u.map(Some));
            let exps = match p.get("p") {
                None => Some(None),
                Some(v) => polynomial_exponents(v, errors).map(Some),
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

fn polynomial_exponents(v: &Value, errors: &mut Errors) -> Option<Vec<f64>> {
    const RULE: &str = "every exponent must be > 1: write `p = 2` or `p = [2, 3]`";
    let numbers: Vec<Number> = match v {
        Value::Number(n) => vec![n.clone()],
        Value::Numbers(sp, list) if list.is_empty() => {
            errors.at(*sp, format!("`p` needs at least one exponent: {RULE}"));
            return None;
        }
        Value::Numbers(_, list) => list.clone(),
        other => {
            errors.at(other.sp(), format!("`p` expects numbers: {RULE}"));
            return None;
        }
    };
    let mut ok = true;
    let mut out = Vec::new();
    for n in numbers {
        let Some(x) = number(&Value::Number(n.clone()), "p", RULE, errors)
            .and_then(|n| finite(&n, "p", RULE, errors))
        else {
            ok = false;
            continue;
        };
        if x > 1.0 {
            out.push(x);
        } else {
            errors.at(n.sp, format!("exponent {x} is not > 1: {RULE}"));
            ok = false;
        }
    }
    ok.then_some(out)
}

fn jitter(value: &Value, errors: &mut Errors) -> Option<JitterSpec> {
    let unknown = |errors: &mut Errors, name: &Ident| {
        let s = name.to_string();
        errors.at(
            name.span(),
            format!(
                "unknown jitter `{s}`{}: expected one of {}",
                table::suggestion(&s, table::JITTERS.iter().copied()),
                table::list(table::JITTERS.iter().copied())
            ),
        );
        None
    };
    match value {
        Value::Word(w) => match w.to_string().as_str() {
            "none" => Some(JitterSpec::None),
            "full" => Some(JitterSpec::Full),
            "equal" => Some(JitterSpec::Equal),
            "decorrelated" => Some(JitterSpec::Decorrelated),
            "aws_decorrelated" => Some(JitterSpec::AwsDecorrelated),
            "custom" => {
                errors.at(
                    w.span(),
                    "`custom` takes an expression: `custom(MyJitter::new())`",
                );
                None
            }
            _ => unknown(errors, w),
        },
        Value::Call(c) if c.name == "custom" => {
            custom_expr(c, "jitter", "MyJitter::new()", errors).map(JitterSpec::Custom)
        }
        Value::Call(c) if table::JITTERS.contains(&c.name.to_string().as_str()) => {
            errors.at(
                c.paren,
                format!("`{0}` takes no parameters: write `jitter = {0}`", c.name),
            );
            None
        }
        Value::Call(c) => unknown(errors, &c.name),
        other => {
            errors.at(
                other.sp(),
                format!(
                    "expected a jitter algorithm: one of {}",
                    table::list(table::JITTERS.iter().copied())
                ),
            );
            None
        }
    }
}

/// The top-level alternatives of a pattern (through `|` and parentheses), split by how they
/// are matched: `by_value` against the error itself (bare names, paths, literals and ranges:
/// constant patterns, which do not see through a reference, and bind nothing), `by_ref`
/// against `&E` (the rest, so that their bindings borrow).
pub fn alternatives<'a>(
    pat: &'a syn::Pat,
    by_value: &mut Vec<&'a syn::Pat>,
    by_ref: &mut Vec<&'a syn::Pat>,
) {
    match pat {
        syn::Pat::Ident(pi)
            if pi.subpat.is_none() && pi.by_ref.is_none() && pi.mutability.is_none() =>
        {
            by_value.push(pat)
        }
        syn::Pat::Path(_) | syn::Pat::Lit(_) | syn::Pat::Range(_) => by_value.push(pat),
        syn::Pat::Or(o) => o
            .cases
            .iter()
            .for_each(|c| alternatives(c, by_value, by_ref)),
        syn::Pat::Paren(p) => alternatives(&p.pat, by_value, by_ref),
        other => by_ref.push(other),
    }
}

/// The top-level alternatives of a pattern that bind a name: bare names (which must name a
/// value of the error type), `ref`/`mut` bindings and `name @ subpattern`.
fn top_bindings(pat: &syn::Pat) -> Vec<&syn::PatIdent> {
    match pat {
        syn::Pat::Ident(pi) => vec![pi],
        syn::Pat::Or(o) => o.cases.iter().flat_map(top_bindings).collect(),
        syn::Pat::Paren(p) => top_bindings(&p.pat),
        _ => Vec::new(),
    }
}

/// The bare names at the top of a pattern (alternatives and parentheses included): written as
/// a kind, each would bind every error unless it names a constant, unit struct or variant.
pub fn bare_names(pat: &syn::Pat) -> Vec<&syn::PatIdent> {
    let (mut by_value, mut by_ref) = (Vec::new(), Vec::new());
    alternatives(pat, &mut by_value, &mut by_ref);
    by_value
        .into_iter()
        .filter_map(|p| match p {
            syn::Pat::Ident(pi) => Some(pi),
            _ => None,
        })
        .collect()
}

/// Whether every value matches `p`, whatever its type: `_`, `()`, `(_, ..)`, `x @ _`, `&_`,
/// an or-pattern with such a branch. (A bare name is checked on its own: it may be a constant.)
fn matches_anything(p: &syn::Pat) -> bool {
    match p {
        syn::Pat::Wild(_) | syn::Pat::Rest(_) => true,
        syn::Pat::Tuple(t) => t.elems.iter().all(matches_anything),
        syn::Pat::Paren(p) => matches_anything(&p.pat),
        syn::Pat::Reference(r) => matches_anything(&r.pat),
        syn::Pat::Ident(i) => i.subpat.as_ref().is_some_and(|(_, p)| matches_anything(p)),
        syn::Pat::Or(o) => o.cases.iter().any(matches_anything),
        _ => false,
    }
}

/// What a closure kind returns whatever its argument, if its body is a `bool` literal
/// (`|_| true`, `|_e: &E| { false }`).
fn constant_closure(c: &syn::ExprClosure) -> Option<bool> {
    let mut body = &*c.body;
    loop {
        match body {
            Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Bool(b),
                ..
            }) => return Some(b.value),
            Expr::Paren(p) => body = &p.expr,
            Expr::Block(b) if b.block.stmts.len() == 1 => match &b.block.stmts[0] {
                syn::Stmt::Expr(e, None) => body = e,
                _ => return None,
            },
            _ => return None,
        }
    }
}

/// Whether a kind over errors takes every error: `_` (or another pattern that matches
/// anything) or a closure that returns `true` whatever the error.
fn takes_every_error(kind: &Kind) -> bool {
    match kind {
        Kind::Pattern(p) => matches_anything(p),
        Kind::Closure(c) => constant_closure(c) == Some(true),
        _ => false,
    }
}

/// [`takes_every_error`], or a bare `Io` where the error type is `std::io::Error` (`io_error`),
/// every one of which is an `Io` error.
fn takes_every_error_of(kind: &Kind, io_error: bool) -> bool {
    takes_every_error(kind)
        || io_error && matches!(kind, Kind::Io { kinds, .. } if kinds.is_empty())
}

fn check_kind(kind: &Kind, params: &[String], errors: &mut Errors) -> bool {
    check_kind_of(kind, "error", params, errors)
}

/// Checks a kind over `what` ("error", or "value" inside `Ok(..)`).
fn check_kind_of(kind: &Kind, what: &str, params: &[String], errors: &mut Errors) -> bool {
    match kind {
        Kind::Ok { inner, .. } => {
            // (Patterns that match every value of their type only, like `Ok(Response { .. })`,
            // are caught by rustc's unreachable-pattern lint, denied in the expansion's check
            // of the rules' patterns.)
            if let Kind::Pattern(p) = &**inner
                && matches_anything(p)
            {
                let written = quote::quote!(#p).to_string();
                errors.at(
                    Sp::of(p),
                    format!("`Ok({written})` matches every value, so every success would be retried: write the values to retry, like `Ok(Status::Busy)`, or a closure `Ok(|v| ...)`"),
                );
                return false;
            }
            if let Kind::Closure(c) = &**inner
                && constant_closure(c) == Some(true)
            {
                errors.at(
                    Sp::of(c),
                    "this closure returns `true` for every value, so every success would be retried: write the values to retry, like `Ok(|v| v.status == 503)`, or a pattern `Ok(Status::Busy)`",
                );
                return false;
            }
            check_kind_of(inner, "value", params, errors)
        }
        Kind::Io { kinds, .. } => {
            let mut ok = true;
            let mut seen = Vec::new();
            for k in kinds {
                let name = k.to_string();
                if !table::IO_KINDS.contains(&name.as_str()) {
                    errors.at(
                        k.span(),
                        format!(
                            "unknown `std::io::ErrorKind` `{name}`{}: expected one of {}",
                            table::suggestion(&name, table::IO_KINDS.iter().copied()),
                            table::IO_KINDS.join(", ")
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
        Kind::Pattern(p) => {
            let mut ok = true;
            for pi in top_bindings(p) {
                let name = pi.ident.to_string();
                let sp = Sp::of(pi);
                let catch_all = pi
                    .subpat
                    .as_ref()
                    .is_none_or(|(_, sub)| matches!(&**sub, syn::Pat::Wild(_)));
                if pi.subpat.is_some() && !catch_all {
                    // `name @ MyError::Busy { .. }`: restricted by its subpattern.
                    continue;
                }
                if pi.by_ref.is_some() || pi.mutability.is_some() || pi.subpat.is_some() {
                    let msg = if what == "value" {
                        "this pattern binds every value, so every success would be retried: write the values to retry, like `Ok(Status::Busy)`, or a closure `Ok(|v| ...)`".to_owned()
                    } else {
                        "this pattern binds every error, so every error would match: write the error kinds to retry, like `Timeout`, `Io` or `MyError::Busy` (or `_` if every error is meant)".to_owned()
                    };
                    errors.at(sp, msg);
                    ok = false;
                } else if what == "value" && table::KINDS.contains(&name.as_str()) {
                    errors.at(
                        sp,
                        format!(
                            "`{name}` is an error kind: inside `Ok(..)` write a pattern or closure over the fn's `Ok` value, and list `{name}` on its own, like `on = [{name}, Ok(..)]`"
                        ),
                    );
                    ok = false;
                } else if what == "value" {
                    if params.contains(&name) {
                        errors.at(
                            sp,
                            format!(
                                "`{name}` is a parameter of this fn: inside `Ok(..)` it would bind every value; write a pattern or closure over the fn's `Ok` value"
                            ),
                        );
                        ok = false;
                    }
                } else if table::KINDS.contains(&name.as_str()) {
                    errors.at(
                        sp,
                        format!(
                            "`{name}` is a kind of its own, not a pattern: list the kinds separately, like `on = [Timeout, Io]`"
                        ),
                    );
                    ok = false;
                } else if let Some(kind) = table::did_you_mean(&name, table::KINDS.iter().copied())
                {
                    errors.at(
                        sp,
                        format!(
                            "unknown error kind `{name}`: did you mean `{kind}`? (a bare name would bind every error; to match a constant or unit struct of this name, write its path, like `self::{name}`)"
                        ),
                    );
                    ok = false;
                } else if params.contains(&name) {
                    errors.at(
                        sp,
                        format!(
                            "`{name}` is a parameter of this fn: as a kind it would bind every error; write the error kind to retry, like `MyError::Busy`, or a closure `|e| ...`"
                        ),
                    );
                    ok = false;
                }
            }
            ok
        }
        Kind::Closure(c) if constant_closure(c) == Some(false) => {
            let example = if what == "value" {
                "|v| v.status == 503"
            } else {
                "|e| e.is_busy()"
            };
            errors.at(
                Sp::of(c),
                format!(
                    "this closure returns `false` for every {what}, so it never matches: write the {what}s to retry, like `{example}`, or leave it out"
                ),
            );
            false
        }
        Kind::Timeout(_) | Kind::Closure(_) => true,
    }
}

/// A limit that may be infinite but not zero (`timeout`, `deadline`): zero would leave `what`
/// (an attempt, a call) no time to succeed.
fn positive_limit(
    key: &Ident,
    value: &Value,
    what: &str,
    errors: &mut Errors,
) -> Option<Spanned<Limit>> {
    match limit(value, &key.to_string(), true, errors) {
        Some(Limit::Finite(d)) if d.is_zero() => {
            errors.at(
                value.sp(),
                format!(
                    "`{key}` must be > 0: {what} with no time can never succeed (use a negative number or `none` for no {key})"
                ),
            );
            None
        }
        other => other.map(|v| spanned(v, key.span().into())),
    }
}

/// The most hedges per round: more is a configuration mistake (Polly caps it at 10 too).
const MAX_HEDGES: i128 = 10;

/// `hedge(after = DURATION | pNN, max = N)` (SPEC section 15).
/// Whether a bare number in `hedge(after = N)` is read too easily as something else than
/// seconds: a fraction above 0.5 (`0.95`: a percentile), 50 up to 99.9 (`95`: a percentile),
/// or 100 and above (`100`: milliseconds).
fn misread(v: f64) -> bool {
    (v > 0.5 && v < 1.0) || v >= 50.0
}

/// The error for `hedge(after = N)` with a bare number [`misread`] (`quoted`: written as a
/// string): which readings it has, and how to write each.
fn bare_after(digits: &str, quoted: bool) -> String {
    let q = if quoted { "\"" } else { "" };
    let v: f64 = digits.parse().unwrap_or(0.0);
    let mut readings = vec![format!("`{q}{digits}s{q}` for {digits} seconds")];
    if (50.0..=99.9).contains(&v) {
        readings.insert(
            0,
            format!("`p{digits}` for the {digits}th percentile of the fn's recent latencies"),
        );
    } else if (0.5..1.0).contains(&v) {
        let p = format!("{}", (v * 1000.0).round() / 10.0);
        readings.insert(
            0,
            format!("`p{p}` for the {p}th percentile of the fn's recent latencies"),
        );
        readings.push(format!("`{q}{}ms{q}`", (v * 1000.0).round()));
    } else if v >= 1.0 {
        readings.insert(0, format!("`{q}{digits}ms{q}` for {digits} milliseconds"));
    }
    format!(
        "`after = {q}{digits}{q}` needs a unit or a `p` (a bare number is seconds, but this one is read too easily as a percentile or as milliseconds): write {}",
        readings.join(", or ")
    )
}

fn hedge(call: &Call, errors: &mut Errors) -> Option<HedgeSpec> {
    let CallArgs::Params(list) = &call.args else {
        return None;
    };
    let def = &table::HEDGE;
    let params = Params::read(list, def, errors);
    params.check_required(def, call.paren, errors);
    const AFTER: &str = "a duration like \"50ms\", or a percentile of the fn's recent latencies from `p50` to `p99.9`, like `p95`";
    let after_sp = params.get("after")?.sp();
    let after = match params.get("after")? {
        Value::Word(w) if w.to_string().starts_with('p') => {
            let text = w.to_string();
            match text[1..].parse::<u32>() {
                Ok(v) => percentile(f64::from(v), w.span().into(), errors),
                Err(_) => {
                    errors.at(w.span(), format!("`after` expects {AFTER}"));
                    None
                }
            }
        }
        Value::Percentile(v, sp) => percentile(*v, *sp, errors),
        Value::Word(w) => {
            errors.at(w.span(), format!("`after` expects {AFTER}"));
            None
        }
        // `"p95"`: a percentile in quotes would be read as a duration.
        Value::Str(text)
            if text.value().strip_prefix('p').is_some_and(|rest| {
                !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit() || b == b'.')
            }) =>
        {
            errors.at(
                text.span(),
                format!(
                    "a percentile is written without quotes: `after = {}`",
                    text.value()
                ),
            );
            None
        }
        // A bare number is seconds (`2`, `0.5`), but some are read too easily as something
        // else: `after = 95` or `after = 0.95` as the 95th percentile, `after = 100` as
        // 100 ms (hedges wait milliseconds): for those, a unit (or `p`) must say which.
        Value::Number(n) if n.suffix.is_empty() && !n.is_negative() && misread(n.as_f64()) => {
            errors.at(n.sp, bare_after(&n.digits, false));
            None
        }
        Value::Str(text) if text.value().trim().parse::<f64>().is_ok_and(misread) => {
            errors.at(text.span(), bare_after(text.value().trim(), true));
            None
        }
        v => match limit(v, "after", false, errors) {
            Some(Limit::Finite(d)) if d.is_zero() => {
                errors.at(
                    v.sp(),
                    "`after` must be > 0: a hedge sent at once doubles every call (raise `retries` instead, or write a delay like \"50ms\" or `p95`)",
                );
                None
            }
            Some(Limit::Finite(d)) => Some(After::Fixed(d)),
            _ => None,
        },
    };
    const MAX: &str = "the most extra attempts per round, from 1 to 10";
    let max = match params.get("max") {
        None => Some(1),
        Some(v) => {
            let n = number(v, "max", MAX, errors)?;
            match n.as_i128() {
                Some(m) if (1..=MAX_HEDGES).contains(&m) => Some(m as u32),
                Some(0) => {
                    errors.at(
                        n.sp,
                        "`max` must be at least 1: with no hedge, leave `hedge` out",
                    );
                    None
                }
                _ => {
                    errors.at(n.sp, format!("`max` expects {MAX}"));
                    None
                }
            }
        }
    };
    Some(HedgeSpec {
        after: after?,
        after_sp,
        max: max?,
    })
}

/// Bounds the deadline makes dead: an attempt runs under the smaller of its timeout and the
/// time left, and a retry must start before both `max_delay` and the deadline (both counted
/// from the first attempt's start), so a `timeout` (or an adaptive timeout's `min`) or a
/// `max_delay` no shorter than the deadline never applies.
pub fn check_under_deadline(config: &Config, errors: &mut Errors) {
    let Some(Spanned {
        value: Limit::Finite(deadline),
        ..
    }) = config.deadline
    else {
        return;
    };
    let mut dead = |what: &str, d: Duration, sp: Sp, effect: &str, fix: &str| {
        errors.at(
            sp,
            format!(
                "{what} ({d:?}) is not below `deadline` ({deadline:?}): {effect}, so it never applies; {fix}"
            ),
        );
    };
    let drop_it = "shorten it or leave it out";
    if let Some(Spanned {
        value: Limit::Finite(t),
        span,
    }) = config.timeout
        && t >= deadline
    {
        dead(
            "`timeout`",
            t,
            span,
            "every attempt is cut by the deadline first",
            drop_it,
        );
    }
    if let Some(a) = &config.adaptive
        && a.value.min >= deadline
    {
        dead(
            "the adaptive timeout's `min`",
            a.value.min,
            a.value.min_sp,
            "every attempt is cut by the deadline first",
            drop_it,
        );
    }
    // A `when`'s own `max_delay` replaces the top level's: left out, the rule would take that
    // one, so the way to bound the rule by the deadline alone is `-1` (no `max_delay`).
    let max_delays =
        std::iter::once((&config.settings.max_delay, drop_it))
            .chain(config.whens.iter().map(|w| {
            (
                &w.overrides.max_delay,
                "shorten it, or write `max_delay = -1` to bound this rule by the deadline alone",
            )
        }));
    for (m, fix) in max_delays {
        if let Some(Spanned {
            value: Limit::Finite(m),
            span,
        }) = *m
            && m >= deadline
        {
            dead(
                "`max_delay`",
                m,
                span,
                "no retry starts after the deadline, which comes first",
                fix,
            );
        }
    }
}

/// The rules that may retry (not `retries = 0` nor `max_delay = 0`, their own or the top
/// level's), the top level first, each with whether a `hint` may choose its delay instead of
/// its backoff.
/// Whether the top level's rule (the `on` rule) may retry: not `retries = 0` nor
/// `max_delay = 0` (see [`retrying_rules`], whose first rule it is when it does).
fn on_retries(config: &Config) -> bool {
    let top = &config.settings;
    top.retries.as_ref().is_none_or(|r| r.value != 0)
        && top
            .max_delay
            .as_ref()
            .is_none_or(|m| !matches!(m.value, Limit::Finite(d) if d.is_zero()))
}

fn retrying_rules(config: &Config) -> Vec<(&Overrides, bool)> {
    let top = &config.settings;
    let retries = |o: &Overrides| o.retries.as_ref().or(top.retries.as_ref()).map(|r| r.value);
    let no_time = |o: &Overrides| {
        o.max_delay
            .as_ref()
            .or(top.max_delay.as_ref())
            .is_some_and(|m| matches!(m.value, Limit::Finite(d) if d.is_zero()))
    };
    let mut rules: Vec<(&Overrides, bool)> = vec![(top, config.hint.is_some())];
    for w in &config.whens {
        let hinted = match &w.kind {
            Kind::Ok { .. } => w.hint.is_some(),
            _ => config.hint.is_some(),
        };
        rules.push((&w.overrides, hinted));
    }
    rules.retain(|(o, _)| retries(o) != Some(0) && !no_time(o));
    rules
}

/// The shortest delay (with jitter and scale) a rule ever waits before a retry, when it is
/// known: a little under it (so that rounding never makes a delay that can fit look as if it
/// could not), the value to show, the span of the strategy, and whether the rule wrote that
/// strategy itself. Known for the strategies and jitters whose shortest delay is (not a
/// `full` or custom jitter, nor a custom strategy).
/// Unwritten, the strategy is the default (`exponential(base = "100ms", ..)`), and its span is
/// the jitter's, whose choice made the delay known.
fn shortest_delay(top: &Overrides, o: &Overrides) -> Option<Shortest> {
    let own = o.backoff.is_some();
    let jitter = o.jitter.as_ref().or(top.jitter.as_ref())?;
    let default = Spanned {
        value: Strategy::Exponential {
            base: retry_grammar::DEFAULT_BASE,
            max: retry_grammar::DEFAULT_MAX,
            m: None,
        },
        span: jitter.span,
    };
    let strategy = o
        .backoff
        .as_ref()
        .or(top.backoff.as_ref())
        .unwrap_or(&default);
    let scale = o
        .scale
        .as_ref()
        .or(top.scale.as_ref())
        .map_or(1.0, |s| s.value);
    let first = match strategy.value {
        Strategy::Constant { base }
        | Strategy::Exponential { base, .. }
        | Strategy::Random { base, .. } => base,
        // (Every term added to `base` is at least zero.)
        Strategy::Linear { base, max, .. }
        | Strategy::Fibonacci { base, max, .. }
        | Strategy::Polynomial { base, max, .. } => base.min(max),
        _ => return None,
    };
    let jittered = match jitter.value {
        // (Decorrelated jitter may reset the exponent to 0, never below; AWS's draws from
        // `base` up.)
        JitterSpec::None | JitterSpec::Decorrelated | JitterSpec::AwsDecorrelated => first,
        JitterSpec::Equal => first / 2,
        _ => return None,
    };
    // Unscaled, the delay is exact; scaled, it is compared a little under the product and
    // shown as the product.
    let nanos = jittered.as_nanos() as f64 * scale;
    let at = |n: f64| Duration::try_from_secs_f64(n / 1e9).unwrap_or(Duration::MAX);
    let least = if scale == 1.0 {
        jittered
    } else {
        at(nanos * (1.0 - 1e-9))
    };
    Some(Shortest {
        least,
        shown: at(nanos.round()),
        span: strategy.span,
        // (The default strategy is shown at the jitter: the rule's own if it wrote one.)
        own: if std::ptr::eq(strategy, &default) {
            o.jitter.is_some()
        } else {
            own
        },
        default: std::ptr::eq(strategy, &default),
    })
}

/// A rule's shortest delay before a retry: see [`shortest_delay`].
struct Shortest {
    /// A little under the delay (exact when unscaled).
    least: Duration,
    /// The delay as the messages show it.
    shown: Duration,
    /// The strategy's span, or the jitter's for the default strategy.
    span: Sp,
    /// Whether the rule wrote its strategy itself.
    own: bool,
    /// Whether the strategy is the default one (written nowhere).
    default: bool,
}

impl Shortest {
    /// The backoff, as a message names it.
    fn name(&self, rule: &str) -> String {
        if self.default {
            format!(
                "the default backoff (`exponential(base = \"{:?}\", max = \"{:?}\")`)",
                retry_grammar::DEFAULT_BASE,
                retry_grammar::DEFAULT_MAX
            )
        } else {
            format!("{rule} backoff")
        }
    }
}

/// A retry is made only if its backoff ends before the call's deadline (which counts from the
/// first attempt's start) and before its rule's `max_delay` is spent: a rule whose shortest
/// delay is not below either never retries. Known only for the strategies and jitters whose
/// shortest delay is (not a `full` or custom jitter, nor a custom strategy), and not where a
/// `hint` may choose the delay instead. An async fn's timer (tokio's) may fire up to 2 ms
/// late: it makes no retry whose backoff would end less than 2 ms before the deadline either.
pub fn check_backoff_fits(config: &Config, is_async: bool, errors: &mut Errors) {
    let top = &config.settings;
    let deadline = match config.deadline {
        Some(Spanned {
            value: Limit::Finite(d),
            ..
        }) => Some(d),
        _ => None,
    };
    // A setting of the top level that a `when` inherits is reported once, at the top level.
    let (mut deadline_reported, mut max_delay_reported) = (false, false);
    // Reported at what the rule wrote itself (a `when`'s own setting), or else once, at the
    // top level's: the top level (always first) reports its own there too.
    let report = |is_top: bool, own: bool, reported: &mut bool| {
        if is_top || !own {
            !std::mem::replace(reported, true)
        } else {
            true
        }
    };
    for (o, hinted) in retrying_rules(config) {
        let is_top = std::ptr::eq(o, top);
        let Some(shortest) = shortest_delay(top, o).filter(|_| !hinted) else {
            continue;
        };
        let Shortest {
            least,
            shown,
            span: strategy,
            own,
            ..
        } = shortest;
        let resolution = retry_grammar::TOKIO_TIMER_LATENESS;
        if let Some(deadline) = deadline
            && (least >= deadline
                || is_async && !least.is_zero() && least.saturating_add(resolution) > deadline)
            && report(is_top, own, &mut deadline_reported)
        {
            let why = if least >= deadline {
                format!(
                    "is not below `deadline` ({deadline:?}), and a retry whose backoff would end at or after the deadline is not made"
                )
            } else {
                format!(
                    "is less than 2 ms below `deadline` ({deadline:?}), and an async fn makes no retry whose backoff would end that close to the deadline (tokio's timer may fire up to 2 ms late: at the deadline, leaving the attempt no time)"
                )
            };
            errors.at(
                strategy,
                format!(
                    "no retry can be made: the shortest delay {} gives ({shown:?}, with its jitter and scale) {why}; shorten the backoff, or lengthen the deadline",
                    shortest.name("this")
                ),
            );
        }
        let own_max = o.max_delay.is_some();
        if let Some(&Spanned {
            value: Limit::Finite(max_delay),
            span,
        }) = o.max_delay.as_ref().or(top.max_delay.as_ref())
            && !max_delay.is_zero()
            && least >= max_delay
            && report(is_top, own || own_max, &mut max_delay_reported)
        {
            // At what the rule wrote: its `max_delay`, or else its strategy.
            let span = if own && !own_max { strategy } else { span };
            errors.at(
                span,
                format!(
                    "no retry can be made: the shortest delay {} gives ({shown:?}, with its jitter and scale) is not below `max_delay` ({max_delay:?}), and a retry is made only if its backoff ends before `max_delay` is spent; lengthen `max_delay`, or shorten the backoff",
                    shortest.name("this rule's")
                ),
            );
        }
    }
}

/// A jitter that does not read what the strategy says, or a strategy that leaves a jitter
/// nothing to do, is a setting with no effect: `aws_decorrelated` reads only the strategy's
/// `base` and `max` (an exponential's `m`, a linear `interval`, a Fibonacci or polynomial
/// `unit` and `p` are never used); `decorrelated` only moves the backoff exponent, which a
/// strategy that gives every retry the same delay ignores (`constant`, `random`, `none`, or a
/// growth of zero written out); and with `backoff = none` every delay is zero, whatever the
/// jitter or the scale. Each is an error at what the rule wrote.
pub fn check_jitter_reads_strategy(config: &Config, errors: &mut Errors) {
    let top = &config.settings;
    let rules = retrying_rules(config);
    // The top level's settings reach every `when` that does not set its own: a setting of the
    // top level is judged only where no `when` sets a backoff or jitter (every rule then has
    // the same strategy and jitter; a `when`'s own `scale` changes neither what they read nor
    // a zero delay); a `when`'s pair, only where it wrote both.
    let whens_shape = config
        .whens
        .iter()
        .any(|w| w.overrides.backoff.is_some() || w.overrides.jitter.is_some());
    let single = rules.len() == 1;
    // `decorrelated` moves the call's one exponent, which every rule reads: it does nothing
    // only where every rule that retries has a strategy that ignores it, and no jitter of the
    // user's, which may read it (`JitterState::exponent`).
    let all_flat = rules.iter().all(|(o, _)| {
        o.backoff
            .as_ref()
            .or(top.backoff.as_ref())
            .is_some_and(|s| is_flat(&s.value))
            && !matches!(
                o.jitter.as_ref().or(top.jitter.as_ref()).map(|j| &j.value),
                Some(JitterSpec::Custom(_))
            )
    });
    // The top level's settings are read by the `when`s that inherit them even when the top
    // level itself never retries (`retries = 0`).
    let mut judged: Vec<&Overrides> = rules.iter().map(|(o, _)| *o).collect();
    if !judged.is_empty() && !judged.iter().any(|o| std::ptr::eq(*o, top)) {
        judged.insert(0, top);
    }
    for o in &judged {
        let is_top = std::ptr::eq(*o, top);
        if is_top && whens_shape {
            continue;
        }
        let strategy = o.backoff.as_ref().or(top.backoff.as_ref());
        let jitter = o.jitter.as_ref().or(top.jitter.as_ref());
        if let (Some(s), Some(scale)) = (strategy, o.scale.as_ref().or(top.scale.as_ref()))
            && let Some(why) = always_zero(&s.value)
            && (is_top || o.scale.is_some())
            && !matches!(jitter.map(|j| &j.value), Some(JitterSpec::Custom(_)))
        {
            errors.at(
                scale.span,
                format!(
                    "`scale` has no effect: {why}; leave it out, or choose a strategy that waits"
                ),
            );
        }
        let (Some(strategy), Some(jitter)) = (strategy, jitter) else {
            continue;
        };
        // A `when` is judged where it wrote its jitter, against its strategy or the one it
        // inherits (of the inherited one, only what makes its own jitter do nothing: the
        // strategy's parameters are the top level's, read by other rules; see below). A
        // strategy it writes beside an inherited `aws_decorrelated` is judged at the strategy:
        // that jitter reads only its `base` and `max`.
        if !is_top && o.jitter.is_none() {
            if o.backoff.is_some()
                && matches!(jitter.value, JitterSpec::AwsDecorrelated)
                && let Some(unread) = aws_unread(&strategy.value)
            {
                errors.at(
                    strategy.span,
                    unread.message(
                        " (this `when` inherits the top level's `jitter = aws_decorrelated`)",
                    ),
                );
            }
            continue;
        }
        let inherited = !is_top && o.backoff.is_none();
        // (Reported beside an unused parameter too: every error at once.)
        // (For a `when` beside other rules, the previous delay it starts from may be
        // another rule's; at the top level, every rule reads the same pair.)
        if matches!(jitter.value, JitterSpec::AwsDecorrelated)
            && starts_at_zero(&strategy.value)
            && (is_top || single)
        {
            errors.at(
                jitter.span,
                "`jitter = aws_decorrelated` makes every delay 0 here: it draws each delay between the strategy's `base` and three times the previous delay, starting from `base`, and the `base` is 0; give `base` a value above 0, or choose another jitter",
            );
        }
        if matches!(jitter.value, JitterSpec::AwsDecorrelated)
            && !inherited
            && let Some(unread) = aws_unread(&strategy.value)
        {
            // A custom strategy's error is at the jitter, which reads nothing of it.
            let span = match unread {
                AwsUnread::Custom => jitter.span,
                _ => strategy.span,
            };
            errors.at(span, unread.message(""));
            continue;
        }
        if let Some((name, why)) = dead_jitter(&jitter.value, &strategy.value, all_flat) {
            errors.at(
                jitter.span,
                format!("`jitter = {name}` has no effect: {why}; leave it out, or choose another strategy"),
            );
        }
    }
    // The top level's strategy beside `when`s that set a strategy or a jitter of their own
    // (the loop above skips the top level then): what `aws_decorrelated` leaves unread of it
    // is dead when every rule that reads it has that jitter, its own or the top level's.
    if whens_shape && let Some(strategy) = top.backoff.as_ref() {
        let mut readers = rules
            .iter()
            .map(|(o, _)| *o)
            .filter(|o| std::ptr::eq(*o, top) || o.backoff.is_none())
            .peekable();
        let aws = |o: &Overrides| {
            matches!(
                o.jitter.as_ref().or(top.jitter.as_ref()).map(|j| &j.value),
                Some(JitterSpec::AwsDecorrelated)
            )
        };
        if readers.peek().is_some()
            && readers.all(aws)
            && let Some(unread) = aws_unread(&strategy.value)
        {
            errors.at(
                strategy.span,
                unread.message(" (every rule that reads this strategy has that jitter)"),
            );
        }
    }
    // The top level's jitter and scale beside `when`s that set a strategy or a jitter of
    // their own: an error when one does nothing for every rule that reads it (the top level,
    // if it retries, and each `when` without one of its own, each with its strategy).
    // The rules that read the top level's setting: the top level, and each `when` that does
    // not set its own (`own`).
    let readers = |own: fn(&Overrides) -> bool| {
        rules
            .iter()
            .map(|(o, _)| *o)
            .filter(move |o| std::ptr::eq(*o, top) || !own(o))
    };
    if whens_shape && let Some(scale) = top.scale.as_ref() {
        let mut readers = readers(|o| o.scale.is_some()).peekable();
        let zero = |o: &Overrides| {
            let strategy = o.backoff.as_ref().or(top.backoff.as_ref());
            let jitter = o.jitter.as_ref().or(top.jitter.as_ref());
            strategy.is_some_and(|s| always_zero(&s.value).is_some())
                && !matches!(jitter.map(|j| &j.value), Some(JitterSpec::Custom(_)))
        };
        if readers.peek().is_some() && readers.all(zero) {
            errors.at(
                scale.span,
                "`scale` has no effect: every rule that reads it has `backoff = none` (or a constant of 0), so every delay is zero; leave it out, or choose a strategy that waits",
            );
        }
    }
    if whens_shape && let Some(jitter) = top.jitter.as_ref() {
        let readers: Vec<Option<(&str, &str)>> = readers(|o| o.jitter.is_some())
            .map(|o| {
                let strategy = o.backoff.as_ref().or(top.backoff.as_ref())?;
                dead_jitter(&jitter.value, &strategy.value, all_flat)
            })
            .collect();
        if let Some(Some((name, why))) = readers.first()
            && readers.iter().all(Option::is_some)
        {
            errors.at(
                jitter.span,
                format!("`jitter = {name}` has no effect: {why} for every rule that reads it (the `when`s that set their own jitter do not); leave it out, or choose another strategy"),
            );
        }
    }
}

/// What `jitter = aws_decorrelated`, which draws each delay from a strategy's `base` and
/// `max` and the previous delay, leaves unread of `strategy`.
#[derive(Clone, Copy)]
enum AwsUnread {
    /// A parameter written (`m`, `interval`, `unit`, `p`).
    Param(&'static str),
    /// A strategy chosen for its growth or its draw (`linear`, `fibonacci`, `polynomial`,
    /// `random`): any strategy with the same `base` and `max` gives the same delays.
    Growth(&'static str),
    /// A custom strategy, whose `base()` and `max()` are 0 and unbounded unless it defines
    /// them: every delay 0.
    Custom,
}

fn aws_unread(strategy: &Strategy) -> Option<AwsUnread> {
    Some(match strategy {
        Strategy::Exponential { m: Some(_), .. } => AwsUnread::Param("`m`"),
        Strategy::Linear { base, interval, .. } if interval != base => {
            AwsUnread::Param("`interval`")
        }
        Strategy::Fibonacci { unit: Some(_), .. } => AwsUnread::Param("`unit`"),
        Strategy::Polynomial { p: Some(_), .. } => AwsUnread::Param("`p`"),
        Strategy::Polynomial { unit: Some(_), .. } => AwsUnread::Param("`unit`"),
        Strategy::Linear { .. } => AwsUnread::Growth("linear"),
        Strategy::Fibonacci { .. } => AwsUnread::Growth("fibonacci"),
        Strategy::Polynomial { .. } => AwsUnread::Growth("polynomial"),
        Strategy::Random { .. } => AwsUnread::Growth("random"),
        Strategy::Custom(_) => AwsUnread::Custom,
        _ => return None,
    })
}

impl AwsUnread {
    /// The error, with `context` after its first clause.
    fn message(self, context: &str) -> String {
        match self {
            AwsUnread::Param(param) => format!(
                "{param} has no effect: `jitter = aws_decorrelated` draws each delay from the strategy's `base` and `max` and the previous delay, and reads nothing else of it{context}; leave {param} out, or choose another jitter"
            ),
            AwsUnread::Growth(name) => format!(
                "`{name}` has no effect: `jitter = aws_decorrelated` draws each delay from the strategy's `base` and `max` and the previous delay only, so any strategy with the same `base` and `max` gives the same delays{context}; write `exponential(base = .., max = ..)`, or choose another jitter"
            ),
            AwsUnread::Custom => format!(
                "`jitter = aws_decorrelated` reads only a strategy's `base()` and `max()`, never its delays, and a `custom` strategy's are 0 and unbounded unless it defines them (every delay 0: a hot loop){context}; for a strategy that defines both, write `jitter = custom(retry_runtime::AwsDecorrelated)`, or choose another jitter"
            ),
        }
    }
}

/// Why `jitter` does nothing beside `strategy` (its name and the reason), if it does nothing:
/// `decorrelated` beside a strategy whose delay is the same for every exponent, where every
/// rule that retries has such a strategy (`all_flat`: it moves the one exponent every rule
/// reads); `full`, `equal` or `aws_decorrelated`
/// beside `backoff = none`; `aws_decorrelated` beside a constant.
fn dead_jitter(
    jitter: &JitterSpec,
    strategy: &Strategy,
    all_flat: bool,
) -> Option<(&'static str, &'static str)> {
    let zero = always_zero(strategy);
    match *jitter {
        JitterSpec::Decorrelated if all_flat && is_flat(strategy) => Some((
            "decorrelated",
            "it only moves the backoff exponent, which this strategy's delay does not depend on",
        )),
        JitterSpec::AwsDecorrelated if zero.is_some() => zero.map(|why| ("aws_decorrelated", why)),

        JitterSpec::AwsDecorrelated if matches!(*strategy, Strategy::Constant { .. }) => Some((
            "aws_decorrelated",
            "it draws between the strategy's `base` and `max`, which a constant strategy makes the same",
        )),
        JitterSpec::Full | JitterSpec::Equal if zero.is_some() => zero.map(|why| {
            let name = if matches!(*jitter, JitterSpec::Full) {
                "full"
            } else {
                "equal"
            };
            (name, why)
        }),
        _ => None,
    }
}

/// Whether `strategy` gives the same delay for every exponent: `constant`, `random`, `none`,
/// equal bounds, or a growth of zero written out.
fn is_flat(strategy: &Strategy) -> bool {
    match strategy {
        Strategy::Constant { .. } | Strategy::Random { .. } | Strategy::None => true,
        Strategy::Exponential { base, max, .. }
        | Strategy::Linear { base, max, .. }
        | Strategy::Fibonacci { base, max, .. }
        | Strategy::Polynomial { base, max, .. }
            if base >= max =>
        {
            true
        }
        Strategy::Exponential { m: Some(m), .. } => *m == 1.0,
        Strategy::Linear { interval, .. } => interval.is_zero(),
        Strategy::Fibonacci { unit, .. } | Strategy::Polynomial { unit, .. } => {
            unit.is_some_and(|u| u.is_zero())
        }
        _ => false,
    }
}

/// A `scale` so small that the longest delay its rule's strategy gives (its `max`, a
/// constant's `base`, the default's 20 s) rounds to no nanosecond: every delay would be 0; or
/// so large that it takes the shortest (its `base`) above the 10^18 s no written duration may
/// exceed.
/// Judged for each rule that retries and writes its own (beside a built-in jitter: a
/// `custom` one may draw above `max`). An error at the scale.
pub fn check_scale_rounds_to_zero(config: &Config, errors: &mut Errors) {
    let top = &config.settings;
    // The top level's `scale` is read by each `when` without its own: judged against the
    // strategy of each, at the `when`'s strategy when it wrote one (reported once at the
    // `scale` otherwise).
    let mut reported_at_top = false;
    for (o, _) in retrying_rules(config) {
        let is_top = std::ptr::eq(o, top);
        let Some(scale) = o.scale.as_ref().or(top.scale.as_ref()) else {
            continue;
        };
        let at_when_strategy = (o.scale.is_none() && !is_top)
            .then_some(o.backoff.as_ref())
            .flatten()
            .map(|s| s.span);
        // Reported at the top level's `scale` (once): the top level's rule, and a `when` that
        // inherits both its `scale` and its strategy.
        let at_top_scale = is_top || o.scale.is_none() && at_when_strategy.is_none();
        if at_top_scale && reported_at_top {
            continue;
        }
        let jitter = o.jitter.as_ref().or(top.jitter.as_ref());
        if matches!(jitter.map(|j| &j.value), Some(JitterSpec::Custom(_))) {
            continue;
        }
        // The shortest delay the strategy gives before its jitter (its `base`) and the longest
        // (its `max`, which the retries may never reach).
        let (base, longest) = match o
            .backoff
            .as_ref()
            .or(top.backoff.as_ref())
            .map(|s| &s.value)
        {
            // (No strategy after an error: it may be one that was refused, not the default.)
            None if !errors.is_empty() => continue,
            None => (retry_grammar::DEFAULT_BASE, retry_grammar::DEFAULT_MAX),
            Some(Strategy::Constant { base }) => (*base, *base),
            Some(
                Strategy::Exponential { base, max, .. }
                | Strategy::Linear { base, max, .. }
                | Strategy::Fibonacci { base, max, .. }
                | Strategy::Polynomial { base, max, .. }
                | Strategy::Random { base, max },
            ) => (*base, *max),
            Some(_) => continue,
        };
        let scaled = base.as_secs_f64() * scale.value;
        let too_large = scaled > retry_grammar::MAX_SECS;
        let zero = !longest.is_zero() && longest.as_nanos() as f64 * scale.value < 0.5;
        if let Some(span) = at_when_strategy {
            // The `when` wrote its strategy and inherits the top level's `scale`.
            if too_large {
                errors.at(
                    span,
                    format!(
                        "this strategy's shortest delay, its `base` ({} s), times the `scale` this `when` inherits from the top level ({:?}) is {scaled:e} s, above the 10^18 s any duration written here may be; give this `when` a `scale` of its own, or lower the top level's",
                        base.as_secs_f64(),
                        scale.value
                    ),
                );
            }
            if zero {
                errors.at(
                    span,
                    format!(
                        "every delay of this rule is 0: the longest delay this strategy gives ({}) times the `scale` this `when` inherits from the top level ({:?}) is below half a nanosecond, which rounds to 0; give this `when` a `scale` of its own, or write `backoff = none` for retries without a wait",
                        retry_grammar::format(longest),
                        scale.value
                    ),
                );
            }
            continue;
        }
        if at_top_scale {
            reported_at_top |= too_large || zero;
        }
        if too_large {
            errors.at(
                scale.span,
                format!(
                    "this `scale` takes the strategy's shortest delay, its `base` ({} s), to {scaled:e} s, above the 10^18 s any duration written here may be; lower it",
                    base.as_secs_f64(),
                ),
            );
        }
        if zero {
            errors.at(
                scale.span,
                format!(
                    "this `scale` makes every delay 0: the longest delay the strategy gives ({}) times {:?} is below half a nanosecond, which rounds to 0; raise it, or write `backoff = none` for retries without a wait",
                    retry_grammar::format(longest),
                    scale.value
                ),
            );
        }
    }
}

/// Why every delay `strategy` gives is zero, if it is: `backoff = none`, or a constant of 0.
fn always_zero(strategy: &Strategy) -> Option<&'static str> {
    match strategy {
        Strategy::None => Some("with `backoff = none` every delay is zero"),
        Strategy::Constant { base } if base.is_zero() => {
            Some("with `backoff = constant(base = 0)` every delay is zero")
        }
        _ => None,
    }
}

/// Whether a strategy's `base` is 0.
fn starts_at_zero(s: &Strategy) -> bool {
    match s {
        Strategy::Constant { base }
        | Strategy::Exponential { base, .. }
        | Strategy::Linear { base, .. }
        | Strategy::Fibonacci { base, .. }
        | Strategy::Polynomial { base, .. }
        | Strategy::Random { base, .. } => base.is_zero(),
        _ => false,
    }
}

/// A strategy that waits zero before every retry, whatever its other parameters, is written
/// with a growth or a range it never uses: a `max` of 0 (which forces every delay to 0), an
/// `exponential(base = 0, ..)` (0 · m^x), a `linear(base = 0, ..)` with no `interval` (which
/// defaults to `base`) or one of 0, a Fibonacci or polynomial strategy from 0 with a `unit`
/// of 0. (`constant(base = 0)` says what it does.) An error at the strategy, unless a rule
/// that reads it has a custom jitter, which may make a delay of its own from 0.
pub fn check_backoff_never_waits(config: &Config, errors: &mut Errors) {
    // (With a custom jitter, which may make a delay of its own from 0, a rule waits.)
    let strategies = read_strategies(config, |j| matches!(j, Some(JitterSpec::Custom(_))));
    for (s, custom) in strategies {
        if custom {
            continue;
        }
        let zero_unit = |unit: &Option<Duration>| unit.is_some_and(|u| u.is_zero());
        let (what, fix) = match &s.value {
            Strategy::Exponential { max, .. }
            | Strategy::Linear { max, .. }
            | Strategy::Fibonacci { max, .. }
            | Strategy::Polynomial { max, .. }
            | Strategy::Random { max, .. }
                if max.is_zero() =>
            {
                (
                    "a backoff with a `max` of 0 waits 0 before every retry",
                    "give `max` a value above 0",
                )
            }
            Strategy::Exponential { base, .. } if base.is_zero() => (
                "an exponential backoff from a `base` of 0 waits 0 · m^x = 0 before every retry, and never reaches `max`",
                "give `base` a value above 0",
            ),
            Strategy::Linear { base, interval, .. } if base.is_zero() && interval.is_zero() => (
                "a linear backoff from a `base` of 0 with an `interval` of 0 (the default `interval` is `base`) waits 0 before every retry, and never reaches `max`",
                "give `base` or `interval` a value above 0",
            ),
            Strategy::Fibonacci { base, unit, .. } | Strategy::Polynomial { base, unit, .. }
                if base.is_zero() && zero_unit(unit) =>
            {
                (
                    "a backoff from a `base` of 0 that grows by a `unit` of 0 waits 0 before every retry, and never reaches `max`",
                    "give `base` or `unit` a value above 0",
                )
            }
            _ => continue,
        };
        errors.at(
            s.span,
            format!("{what}; {fix}, or write `backoff = none` for retries without a wait"),
        );
    }
}

/// Each written strategy that a rule that may retry reads, with whether the jitter (its own or
/// the top level's) of such a rule is one `jitter` picks: the top level's strategy is read by
/// the top level and every `when` without a strategy of its own. (One no rule that retries
/// reads is reported as a key with no effect by `check_never_retries`.)
fn read_strategies(
    config: &Config,
    jitter: impl Fn(Option<&JitterSpec>) -> bool,
) -> Vec<(&Spanned<Strategy>, bool)> {
    let top = &config.settings;
    let picked =
        |o: &Overrides| jitter(o.jitter.as_ref().or(top.jitter.as_ref()).map(|j| &j.value));
    let retrying = retrying_rules(config);
    let reads_top = |o: &&Overrides| std::ptr::eq(*o, top) || o.backoff.is_none();
    let top_readers = retrying.iter().map(|(o, _)| *o).filter(reads_top);
    let top_read = top_readers.clone().next().is_some();
    let top_picked = top_readers.clone().any(picked);
    let whens = retrying
        .iter()
        .map(|(o, _)| *o)
        .filter(|o| !std::ptr::eq(*o, top));
    top.backoff
        .as_ref()
        .filter(|_| top_read)
        .map(|s| (s, top_picked))
        .into_iter()
        .chain(whens.filter_map(|o| Some((o.backoff.as_ref()?, picked(o)))))
        .collect()
}

/// A strategy written with a growth of zero (`exponential(.., m = 1)`, `linear(.., interval =
/// 0)`, `fibonacci(.., unit = 0)`, `polynomial(.., unit = 0)`) from a `base` above 0 and below
/// its `max`: every delay is `base`, and the `max` is read by nothing (the dual of a growth
/// beside equal bounds, which the strategy's parse reports). An error at the strategy, unless a
/// rule that reads it has a custom jitter (which may read `max`) or `aws_decorrelated` (which
/// draws up to `max` and never reads the growth, reported as such).
pub fn check_backoff_grows(config: &Config, errors: &mut Errors) {
    // (Whether a rule that reads the strategy has a jitter that may read its `max`.)
    let strategies = read_strategies(config, |j| {
        matches!(j, Some(JitterSpec::Custom(_) | JitterSpec::AwsDecorrelated))
    });
    for (s, reads_max) in strategies {
        if reads_max {
            continue;
        }
        let zero_unit = |unit: &Option<Duration>| unit.is_some_and(|u| u.is_zero());
        let (growth, fix, base, max) = match &s.value {
            Strategy::Exponential {
                base,
                max,
                m: Some(m),
            } if *m == 1.0 => ("`m = 1`", "an `m` above 1", base, max),
            Strategy::Linear {
                base,
                max,
                interval,
            } if interval.is_zero() => ("`interval = 0`", "an `interval` above 0", base, max),
            Strategy::Fibonacci { base, max, unit }
            | Strategy::Polynomial {
                base, max, unit, ..
            } if zero_unit(unit) => ("`unit = 0`", "a `unit` above 0", base, max),
            _ => continue,
        };
        // (From a `base` of 0 it never waits, reported as such; with equal bounds, at the
        // growth.)
        if base.is_zero() || base >= max {
            continue;
        }
        let (b, m) = (retry_grammar::format(*base), retry_grammar::format(*max));
        errors.at(
            s.span,
            format!("this backoff never grows: {growth} keeps every delay at `base` ({b}), so its `max` ({m}) is never reached; write `constant(base = {b})`, or {fix}"),
        );
    }
}

/// A `fallback` that can never be called: the call gives up on an error only when a rule's
/// retries or `max_delay` are spent, a `deadline` passes, an error is not retried, or a guard
/// refuses an attempt. When every error reaches a rule that retries it for ever (negative
/// `retries`, no finite `max_delay`) through rules that all do (the `when`s in order, up to
/// one whose kind every error matches, `_` (or a closure that always says yes), or `Io` for a
/// fn written to return `std::io::Result`; else the top level's, with no `on` list or one with
/// such a kind), with
/// no finite `deadline` and no guard, none of these can happen: the call returns only a
/// success (or a value an `Ok(..)` kind matched), and the fallback is dead. An error at the
/// fallback.
///
/// For a fn whose error type may be `std::io::Error` without being written so (`io::Result`,
/// an alias), where `Io` would take every error: that error, with its place, for the expansion
/// to report if the type is std's (see [`check_dead_whens`]).
pub fn check_fallback_reachable(
    config: &Config,
    f: Option<&crate::ast::Func>,
    errors: &mut Errors,
) -> Option<(Sp, String)> {
    let f = f?;
    let io_written = matches!(io_spelling(&f.sig.output), IoSpelling::Std);
    if let Some((sp, msg)) = fallback_never_called(config, io_written) {
        errors.at(sp, msg);
        return None;
    }
    (!io_written)
        .then(|| fallback_never_called(config, true))
        .flatten()
        .map(|(sp, msg)| (sp, msg.to_owned()))
}

/// [`check_fallback_reachable`]'s rule, judged as if the error type were `std::io::Error` or
/// not (`io_error`): the error, with its place, if the fallback is never called.
fn fallback_never_called(config: &Config, io_error: bool) -> Option<(Sp, &'static str)> {
    let fallback = config.fallback.as_ref()?;
    let top = &config.settings;
    let unbounded =
        |m: Option<&Spanned<Limit>>| m.is_none_or(|m| matches!(m.value, Limit::Infinite));
    // A rule's own setting, or the top level's it inherits.
    let forever = |o: &Overrides| {
        o.retries
            .as_ref()
            .or(top.retries.as_ref())
            .is_some_and(|r| r.value < 0)
            && unbounded(o.max_delay.as_ref().or(top.max_delay.as_ref()))
    };
    let every_error = |k: &Kind| takes_every_error_of(k, io_error);
    // The `when`s on errors in order, each retrying for ever, up to one every error matches;
    // past them, the top level's rule, which must take every error too.
    let mut caught = false;
    for w in config.whens.iter().filter(|w| !w.kind.is_ok()) {
        if !forever(&w.overrides) {
            return None;
        }
        if every_error(&w.kind) {
            caught = true;
            break;
        }
    }
    let top_takes_every_error = config
        .on
        .as_ref()
        .is_none_or(|on| on.value.iter().any(every_error));
    let guarded = config.budget.is_some()
        || config.breaker.is_some()
        || config.throttle.is_some()
        || config.limit.is_some();
    ((caught || top_takes_every_error && forever(top))
        && unbounded(config.deadline.as_ref())
        && !guarded)
        .then(|| (
            Sp::of(&**fallback),
            "this `fallback` is never called: every error is retried for ever (every rule it can reach has a negative `retries`, and no `max_delay`, `deadline` or guard could end the retries), so the call returns only a success; bound the retries (`retries = N`, a `max_delay`, a `deadline`, an `on` list of the errors to retry, a `when` with a limit, or a guard: `budget`, `breaker`, `throttle`, `limit`), or leave the fallback out",
        ))
}

/// Keys that shape retries have no effect where no retry is ever made: `retries = 0` at the
/// top level (with no `when` that allows retries) or in a `when`, beside `backoff`, `jitter`,
/// `scale`, `max_delay`, `hint` or `on_retry`.
pub fn check_never_retries(config: &Config, errors: &mut Errors) {
    // Why a rule never retries, if it does not: `retries = 0`, or `max_delay = 0` (no retry
    // can start before a budget of zero), its own or, in a `when`, the top level's.
    let zero_retries = |r: &Option<Spanned<i64>>| r.as_ref().map(|r| r.value == 0);
    let zero_delay = |m: &Option<Spanned<Limit>>| {
        m.as_ref()
            .map(|m| matches!(m.value, Limit::Finite(d) if d.is_zero()))
    };
    let why = |retries: bool, delay: bool| match (retries, delay) {
        (true, _) => Some("`retries = 0`"),
        (false, true) => Some("`max_delay = 0`"),
        _ => None,
    };
    let top_retries = zero_retries(&config.settings.retries) == Some(true);
    let top_delay = zero_delay(&config.settings.max_delay) == Some(true);
    let no_effect = |errors: &mut Errors, sp: Sp, key: &str, subject: &str| {
        errors.at(
            sp,
            format!(
                "`{key}` has no effect: {subject} never retries; leave it out, or allow retries"
            ),
        );
    };
    // `subject` never retries: its settings that shape retries are errors.
    // (Not the reason itself: when `max_delay = 0` is the reason, no retry is made whatever
    // their number, so `retries` is among them.)
    let reason_key = |by_max_delay: bool| if by_max_delay { "max_delay" } else { "retries" };
    let dead = |o: &Overrides, errors: &mut Errors, subject: &str, by_max_delay: bool| {
        for (key, sp, _) in rule_keys(o) {
            if key != reason_key(by_max_delay)
                && let Some(sp) = sp
            {
                no_effect(errors, sp, key, subject);
            }
        }
    };
    let top = why(top_retries, top_delay);
    let mut any_retries = top.is_none();
    // Whether an error (not a value) may be retried: the top-level `hint` reads errors only.
    let on_errors = config
        .on
        .as_ref()
        .is_none_or(|on| on.value.iter().any(|k| !k.is_ok()));
    let mut errors_retried = any_retries && on_errors;
    // The `when`s that retry.
    let mut retrying: Vec<&Overrides> = Vec::new();
    for w in &config.whens {
        // A `when` takes the top level's settings it does not set.
        let retries = zero_retries(&w.overrides.retries).unwrap_or(top_retries);
        let delay = zero_delay(&w.overrides.max_delay).unwrap_or(top_delay);
        match why(retries, delay) {
            Some(reason) => {
                let subject = format!("this `when`, with {reason},");
                dead(&w.overrides, errors, &subject, !retries);
                if let Some(h) = &w.hint {
                    no_effect(errors, Sp::of(h), "hint", &subject);
                }
            }
            None => {
                any_retries = true;
                errors_retried |= !w.kind.is_ok();
                retrying.push(&w.overrides);
            }
        }
    }
    // The top level's rule never retries, but `when`s do: a top-level setting that each of them
    // sets for itself is read by no rule that retries. (When `max_delay = 0` is the reason,
    // the top level's `retries` is among them, and its `max_delay` is not.)
    if let Some(reason) = top
        && !retrying.is_empty()
    {
        for (key, sp, set) in rule_keys(&config.settings) {
            if key != reason_key(!top_retries)
                && let Some(sp) = sp
                && retrying.iter().all(|o| set(o))
            {
                errors.at(
                    sp,
                    format!(
                        "`{key}` has no effect: the top level's rule never retries ({reason}), and each `when` that retries sets its own `{key}`; leave it out"
                    ),
                );
            }
        }
    }
    if any_retries
        && !errors_retried
        && let Some(h) = &config.hint
    {
        errors.at(
            Sp::of(h),
            "`hint` has no effect: it reads the errors a rule retries, and here only values are retried (`on` lists only `Ok(..)` kinds, and no `when` on an error retries); a value's delay is read by its own `when(Ok(..), hint = ..)`",
        );
    }
    let Some(reason) = top.filter(|_| !any_retries) else {
        return;
    };
    dead(&config.settings, errors, reason, !top_retries);
    // (A budget is not among them: each call deposits into it, which matters when it is
    // shared with fns that retry.)
    for (key, e) in [
        ("hint", config.hint.as_ref()),
        ("on_retry", config.on_retry.as_ref()),
    ] {
        if let Some(e) = e {
            no_effect(errors, Sp::of(e), key, reason);
        }
    }
}

/// A retry setting's key, where the top level writes it, and whether a `when` sets its own.
type RuleKey = (&'static str, Option<Sp>, fn(&Overrides) -> bool);

/// The rules' retry settings, as [`RuleKey`]s of the top level `top`.
fn rule_keys(top: &Overrides) -> [RuleKey; 5] {
    [
        ("retries", top.retries.as_ref().map(|v| v.span), |o| {
            o.retries.is_some()
        }),
        ("backoff", top.backoff.as_ref().map(|v| v.span), |o| {
            o.backoff.is_some()
        }),
        ("jitter", top.jitter.as_ref().map(|v| v.span), |o| {
            o.jitter.is_some()
        }),
        ("scale", top.scale.as_ref().map(|v| v.span), |o| {
            o.scale.is_some()
        }),
        ("max_delay", top.max_delay.as_ref().map(|v| v.span), |o| {
            o.max_delay.is_some()
        }),
    ]
}

/// A `when` clause (or a kind of `on`) that an earlier `when` always takes first never applies
/// (rules are tried in the order written, `on` last): `Io(ConnectionReset)` after `Io` or a
/// wider `Io(..)`; `Io(TimedOut)` after `Timeout`; and, for an `io::Error`, `Timeout` after
/// `Io` (an error from a timeout is
/// an `io::Error` of kind `TimedOut`, and every error is an `Io` one) or after `Io(TimedOut)`
/// (in an async fn, or a blocking one without a per-attempt timeout, whose late errors would
/// otherwise count as timeouts).
///
/// Those that are dead only when the error type is `std::io::Error` (a `Timeout` after `Io`, any
/// error kind after a bare `Io`) are errors here when the return type says so as written
/// (`std::io::Result<T>`); otherwise they are returned, with how the type is written, for the
/// expansion to check against the error type itself (see `retry_runtime::__private::IoProbe`):
/// where the fn is written for `io::Result<T>` (a `const` item, which `cargo check` evaluates),
/// where it is built for an imported `Error` or an alias (an inline `const`, which may name
/// the fn's generic parameters).
pub fn check_dead_whens(
    config: &Config,
    f: &crate::ast::Func,
    errors: &mut Errors,
) -> (Vec<(Sp, String)>, IoSpelling) {
    let complete = errors.is_empty();
    let spelling = io_spelling(&f.sig.output);
    let io_written = matches!(spelling, IoSpelling::Std);
    let mut written = Vec::new();
    dead_whens(config, f, io_written, complete, &mut |sp, msg| {
        written.push(msg.clone());
        errors.at(sp, msg);
    });
    let mut by_type = Vec::new();
    if !io_written {
        dead_whens(config, f, true, complete, &mut |sp, msg| {
            if !written.contains(&msg) {
                by_type.push((sp, msg));
            }
        });
    }
    (by_type, spelling)
}

/// [`check_dead_whens`]' rules, each dead rule `report`ed, judged as if the error type were
/// `std::io::Error` or not (`io_error`).
fn dead_whens(
    config: &Config,
    f: &crate::ast::Func,
    io_error: bool,
    complete: bool,
    report: &mut dyn FnMut(Sp, String),
) {
    let per_attempt = finite_limit(&config.timeout).is_some() || config.adaptive.is_some();
    let late_errors_time_out = f.sig.asyncness.is_none() && per_attempt;
    let io_kinds = |k: &Kind| match k {
        Kind::Io { kinds, .. } => Some(kinds.iter().map(|i| i.to_string()).collect::<Vec<_>>()),
        _ => None,
    };
    // Why `earlier` always takes `later` first, if it does.
    let taken = |earlier: &Kind, later: &Kind| -> Option<&'static str> {
        // `_` (or a closure that always says yes) takes every error.
        if takes_every_error(earlier) && !later.is_ok() {
            return Some("every error");
        }
        // `Timeout` takes every `io::Error` of kind `TimedOut` (in an error's sources too).
        if let (Kind::Timeout(_), Kind::Io { kinds, .. }) = (earlier, later)
            && !kinds.is_empty()
            && kinds.iter().all(|k| k == "TimedOut")
        {
            return Some("the errors of kind `TimedOut`, which are timeouts");
        }
        let before = io_kinds(earlier)?;
        // For an `io::Error`, `Io` takes every error: a closure's, a pattern's, `_` too.
        if io_error
            && before.is_empty()
            && !later.is_ok()
            && !matches!(later, Kind::Io { .. } | Kind::Timeout(_))
        {
            return Some(
                "every error (the fn's error type is `std::io::Error`, and every one is an `Io` error)",
            );
        }
        match later {
            // `Io` takes every I/O error; `Io(A, B)` takes those of its kinds.
            Kind::Io { kinds, .. }
                if before.is_empty()
                    || !kinds.is_empty()
                        && kinds.iter().all(|k| before.contains(&k.to_string())) =>
            {
                Some("every error this one would")
            }
            Kind::Timeout(_)
                if io_error
                    && (before.is_empty()
                        || !late_errors_time_out && before.iter().any(|k| k == "TimedOut")) =>
            {
                Some(
                    "the errors of timeouts (`io::Error`s of kind `TimedOut`, and the fn's error type is `std::io::Error`)",
                )
            }
            _ => None,
        }
    };
    let later_kinds = config
        .whens
        .iter()
        .enumerate()
        .map(|(j, w)| {
            (
                j,
                &w.kind,
                "this `when`",
                "put this one first, or leave it out",
            )
        })
        .chain(config.on.iter().flat_map(|on| on.value.iter()).map(|k| {
            let n = config.whens.len();
            (n, k, "this kind of `on`", "leave it out of `on`")
        }));
    for (j, later, what, fix) in later_kinds {
        // A kind of `on` that is also a `when`'s, the same, says that it is retried, with the
        // `when`'s settings (`on = [Timeout, Io], when(Timeout, ..)`): not a mistake.
        let on_of_a_when =
            |w: &&crate::model::WhenRule| j == config.whens.len() && w.kind.key() == later.key();
        let first = config.whens[..j]
            .iter()
            .filter(|w| !on_of_a_when(w))
            .find_map(|w| Some((taken(&w.kind, later)?, &w.kind)));
        if let Some((takes, earlier)) = first {
            report(
                later.sp(),
                format!(
                    "{what} never applies: `when({}, ..)` above takes first {takes} (rules are tried in the order written, `on` last); {fix}",
                    earlier.written()
                ),
            );
        }
    }
    // The `on` rule decides nothing when a `when` takes each of its kinds first (the same
    // kind, a wider one, or `_`; without `on`, every error, which only `_` takes): the top
    // level's retry settings are then read only by the `when`s that do not set their own.
    // A pattern kind's alternatives as written (through `|` and parentheses).
    let cases = |k: &Kind| match k {
        Kind::Pattern(p) => {
            let (mut by_value, mut by_ref) = (Vec::new(), Vec::new());
            alternatives(p, &mut by_value, &mut by_ref);
            let all = by_value.into_iter().chain(by_ref);
            Some(
                all.map(|p| quote::quote!(#p).to_string())
                    .collect::<Vec<_>>(),
            )
        }
        _ => None,
    };
    let on_taken = |k: &Kind| {
        config
            .whens
            .iter()
            .any(|w| w.kind.key() == k.key() || taken(&w.kind, k).is_some())
            // (Or each of its alternatives is one of a `when`'s: `on = [E::A, E::B]` beside
            // `when(E::A | E::B, ..)`.)
            || cases(k).is_some_and(|alternatives| {
                alternatives.iter().all(|a| {
                    config
                        .whens
                        .iter()
                        .any(|w| cases(&w.kind).is_some_and(|c| c.contains(a)))
                })
            })
    };
    // (Without `on`, every error: `_` takes it, and so does `Io` for an `io::Error`.)
    let on_dead = match &config.on {
        Some(on) => on.value.iter().all(on_taken),
        None => config
            .whens
            .iter()
            .any(|w| takes_every_error_of(&w.kind, io_error)),
    };
    let whens_retry = retrying_rules(config).len() > usize::from(on_retries(config));
    if complete && on_dead && whens_retry {
        let all_set = |set: fn(&Overrides) -> bool| config.whens.iter().all(|w| set(&w.overrides));
        for (key, sp, set) in rule_keys(&config.settings) {
            if let Some(sp) = sp
                && all_set(set)
            {
                report(
                    sp,
                    format!(
                        "`{key}` has no effect: a `when` takes first every error the top level's rule would retry, and each `when` sets its own `{key}`; leave it out"
                    ),
                );
            }
        }
    }
    // The kinds of `on` are a set: one that another takes all of adds nothing (`Io` beside
    // `Io(ConnectionReset)`, `_` beside any kind of error). (`Timeout` beside `Io` is not one
    // of them, though for an `io::Error` every timeout is an `Io` error: the two name what is
    // meant, as in `on = [Timeout, Io]`.)
    let Some(on) = &config.on else {
        return;
    };
    // `taken`'s relations between `_` and any error kind, and between `Io` kinds (not those
    // of `Timeout`), for another kind than `w` itself.
    let wider = |w: &Kind, k: &Kind| -> bool {
        !takes_every_error(k)
            && w.key() != k.key()
            && (takes_every_error(w) || io_kinds(w).is_some() && matches!(k, Kind::Io { .. }))
            && taken(w, k).is_some()
    };
    for (i, k) in on.value.iter().enumerate() {
        // (The same kind as a `when`'s says that it is retried, with the `when`'s settings.)
        if config.whens.iter().any(|w| w.kind.key() == k.key()) {
            continue;
        }
        let both_every = |j: usize, w: &Kind| j < i && takes_every_error(w) && takes_every_error(k);
        if let Some((_, w)) = on
            .value
            .iter()
            .enumerate()
            .find(|&(j, w)| j != i && wider(w, k) || both_every(j, w))
        {
            report(
                k.sp(),
                format!(
                    "this kind of `on` adds nothing: `{}` in the same list already takes every error it would; leave it out",
                    w.written()
                ),
            );
        }
    }
}

/// How the fn's return type names its error type, as far as `std::io::Error` goes.
pub enum IoSpelling {
    /// `CRATE::io::Result<_>` or `Result<_, CRATE::io::Error>` for std or a crate that
    /// re-exports std's types there (`tokio::io::Result`): std's, as written.
    Std,
    /// `io::Result<_>` or `Result<_, io::Error>`: std's whenever `io` is `std::io` (nearly
    /// always), checked against the type all the same (a `use rustix::io;` is not). `ty` is
    /// the type to look at: `io::Result<()>`'s `Err` (`result`), or `io::Error` itself.
    Bare { ty: Box<syn::Type>, result: bool },
    /// Anything else (an imported `Error`, an alias, a generic type): the error type itself
    /// is looked at, where the fn is built.
    Unknown,
}

/// How the fn's return type names its error type (not a path through a module of the
/// crate's own, `crate::io::Result`, which may be an alias of another error type).
fn io_spelling(output: &syn::ReturnType) -> IoSpelling {
    // The crates whose `io::Result` and `io::Error` are std's.
    const STD_IO: &[&str] = &[
        "std",
        "tokio",
        "futures",
        "futures_util",
        "futures_io",
        "async_std",
        "smol",
    ];
    // `io::NAME` (`Some(false)`) or `CRATE::io::NAME` (`Some(true)`).
    let named = |path: &syn::Path, name: &str| {
        let names: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        match names
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["io", last] if *last == name => Some(false),
            [krate, "io", last] if STD_IO.contains(krate) && *last == name => Some(true),
            _ => None,
        }
    };
    let syn::ReturnType::Type(_, ty) = output else {
        return IoSpelling::Unknown;
    };
    let syn::Type::Path(tp) = peel(ty) else {
        return IoSpelling::Unknown;
    };
    match named(&tp.path, "Result") {
        Some(true) => return IoSpelling::Std,
        Some(false) => {
            // `io::Result<()>`: the alias's `Err`, whatever its `Ok`.
            let mut path = tp.path.clone();
            if let Some(last) = path.segments.last_mut() {
                last.arguments = syn::PathArguments::AngleBracketed(syn::parse_quote!(<()>));
            }
            let ty = syn::Type::Path(syn::TypePath { qself: None, path });
            return IoSpelling::Bare {
                ty: Box::new(ty),
                result: true,
            };
        }
        None => {}
    }
    let Some(last) = tp.path.segments.last().filter(|l| l.ident == "Result") else {
        return IoSpelling::Unknown;
    };
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return IoSpelling::Unknown;
    };
    match args.args.iter().nth(1) {
        Some(syn::GenericArgument::Type(syn::Type::Path(e))) => match named(&e.path, "Error") {
            Some(true) => IoSpelling::Std,
            Some(false) => IoSpelling::Bare {
                ty: Box::new(syn::Type::Path(e.clone())),
                result: false,
            },
            None => IoSpelling::Unknown,
        },
        _ => IoSpelling::Unknown,
    }
}

/// A hedge must be due before its attempt is cut: otherwise the attempt is always cut first,
/// and the "hedge" is sent after it, alone (a retry without backoff), never beside it.
fn check_hedge_in_time(config: &Config, h: &HedgeSpec, errors: &mut Errors) {
    match h.after {
        After::Fixed(after) => {
            // The attempt's longest limit: its timeout (an adaptive one's `max`), and the
            // deadline.
            let cuts = [
                (finite_limit(&config.timeout), "`timeout`"),
                (
                    config.adaptive.as_ref().map(|a| a.value.max),
                    "the adaptive timeout's `max`",
                ),
                (finite_limit(&config.deadline), "`deadline`"),
            ];
            if let Some((limit, what)) = cuts
                .into_iter()
                .filter_map(|(d, what)| Some((d?, what)))
                .find(|(d, _)| after >= *d)
            {
                errors.at(
                    h.after_sp,
                    format!(
                        "`after` ({:?}) is not below {what} ({:?}): every attempt is cut before its hedge is due, so no hedge would ever run beside it; hedge earlier, or raise {what}",
                        after,
                        limit,
                    ),
                );
            }
        }
        // A hedge after a percentile is compared with the timeout only when both are known:
        // an adaptive timeout is clamped to its `min`, which may keep it above the hedge.
        After::Percentile(_) => {}
    }
}

/// A hedging percentile: from p50 to p99.9.
fn percentile(v: f64, sp: Sp, errors: &mut Errors) -> Option<After> {
    if (50.0..=99.9).contains(&v) {
        Some(After::Percentile(v))
    } else {
        errors.at(
            sp,
            "a hedging percentile must be from `p50` to `p99.9`: below the median most calls would be hedged, and above p99.9 the window holds too few samples",
        );
        None
    }
}

/// `0.999` as a percentile, `99.9`, shifting the decimal point in the literal's digits (no
/// floating-point product: `0.57 * 100.0` prints `56.99999999999999`); `None` when the digits
/// are not a plain `0.DDD`.
fn fraction_as_percent(digits: &str) -> Option<String> {
    let frac = digits.strip_prefix("0.")?;
    if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac = format!("{frac:0<2}");
    let (whole, rest) = frac.split_at(2);
    let whole = whole.trim_start_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    let rest = rest.trim_end_matches('0');
    Some(if rest.is_empty() {
        whole.to_owned()
    } else {
        format!("{whole}.{rest}")
    })
}

/// `timeout = adaptive(p = .., factor = .., min = .., max = ..)` (SPEC section 15b).
fn adaptive(call: &Call, errors: &mut Errors) -> Option<AdaptiveSpec> {
    let CallArgs::Params(list) = &call.args else {
        errors.at(
            call.paren,
            "write `adaptive(p = 99.9, factor = 2, min = \"50ms\", max = \"5s\")`",
        );
        return None;
    };
    let def = &table::ADAPTIVE;
    let params = Params::read(list, def, errors);
    params.check_required(def, call.paren, errors);
    const P: &str = "the percentile of recent successful latencies, from 50 to 99.9, like 99";
    let p = params.get("p").and_then(|v| {
        let n = number(v, "p", P, errors)?;
        let p = finite(&n, "p", P, errors)?;
        // A fraction's percentile, written from its digits (`0.999` -> `99.9`), when it is one
        // robust takes.
        let as_percent = (p > 0.0 && p < 1.0)
            .then(|| fraction_as_percent(&n.digits))
            .flatten()
            .filter(|text| text.parse::<f64>().is_ok_and(|v| (50.0..=99.9).contains(&v)));
        if (50.0..=99.9).contains(&p) {
            Some(p)
        } else if let Some(percent) = as_percent {
            errors.at(
                n.sp,
                format!(
                    "`p` is a percentile, not a fraction: write `p = {percent}` for the {percent}th percentile"
                ),
            );
            None
        } else if p > 0.0 && p < 50.0 {
            errors.at(
                n.sp,
                format!("`p` must be at least 50 (a percentile, not a fraction): a timeout from a percentile under the median follows the fast attempts, not the slow ones; take p50 or above, and `factor` for the margin; expected {P}"),
            );
            None
        } else if p > 99.9 && p < 100.0 {
            errors.at(
                n.sp,
                format!("`p` must be at most 99.9: the histogram's window holds too few samples above it (the result would be its slowest sample, not the percentile asked for); expected {P}"),
            );
            None
        } else {
            errors.at(n.sp, format!("`p` must be from 50 to 99.9: expected {P}"));
            None
        }
    });
    const FACTOR: &str = "a number >= 1 that multiplies the percentile, like 2";
    let factor = match params.get("factor") {
        None => Some(1.0),
        Some(v) => (|| {
            let n = number(v, "factor", FACTOR, errors)?;
            let f = finite(&n, "factor", FACTOR, errors)?;
            if f >= 1.0 {
                Some(f)
            } else {
                errors.at(
                    n.sp,
                    format!("`factor` must be >= 1: a timeout below the percentile would cut good attempts; expected {FACTOR}"),
                );
                None
            }
        })(),
    };
    let min = params.duration("min", errors).flatten();
    let max = params.duration("max", errors).flatten();
    if let (Some(d), Some(v)) = (min, params.get("min"))
        && d.is_zero()
    {
        errors.at(
            v.sp(),
            "`min` must be > 0: an attempt with no time can never succeed",
        );
        return None;
    }
    if let (Some(lo), Some(hi)) = (min, max)
        && lo == hi
    {
        errors.at(
            params.later("min", "max", call.paren),
            format!(
                "`min` and `max` are both {lo:?}: the timeout would be fixed, whatever the latencies (`p` and `factor` would do nothing); write `timeout = {lo:?}`, or widen the range"
            ),
        );
        return None;
    }
    if let (Some(lo), Some(hi)) = (min, max)
        && lo > hi
    {
        errors.at(
            params.later("min", "max", call.paren),
            format!(
                "`min` ({lo:?}) must be at most `max` ({hi:?}); a number without a unit is seconds"
            ),
        );
        return None;
    }
    Some(AdaptiveSpec {
        p: p?,
        factor: factor?,
        min: min?,
        min_sp: params.get("min").map_or(call.paren, Value::sp),
        max: max?,
    })
}

/// Reads one of the overridable settings into `o`; false if `key` is not one of them.
fn overridable(key: &Ident, value: &Value, o: &mut Overrides, errors: &mut Errors) -> bool {
    let span = value.sp();
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

/// Validates every item against the rules and against the fn's parameters (`params`: their
/// names, for kinds and `attempt` that would shadow one). Errors are collected in `errors`.
pub fn validate(items: Vec<Item>, params: &[String], errors: &mut Errors) -> Config {
    let mut c = Config::default();
    let mut when_kinds: Vec<String> = Vec::new();
    for Item { key, value } in items {
        if overridable(&key, &value, &mut c.settings, errors) {
            continue;
        }
        match (key.to_string().as_str(), value) {
            ("timeout", Value::Call(call)) if call.name == "adaptive" => {
                let v = adaptive(&call, errors).map(|v| spanned(v, key.span().into()));
                if c.timeout.is_some() {
                    errors.at(key.span(), "duplicate `timeout`: it is already set above");
                } else {
                    errors.set_once(&mut c.adaptive, &key, v);
                }
            }
            ("timeout", Value::Call(call)) => errors.at(
                call.name.span(),
                format!(
                    "`timeout` expects {DURATION_FORMS}, a negative number or `none` for no limit, or `adaptive(p = 99.9, factor = 2, min = \"50ms\", max = \"5s\")`{}",
                    table::suggestion(&call.name.to_string(), ["adaptive"].into_iter())
                ),
            ),
            ("timeout", value) => {
                let v = positive_limit(&key, &value, "an attempt", errors);
                if c.adaptive.is_some() {
                    errors.at(key.span(), "duplicate `timeout`: it is already set above");
                } else {
                    errors.set_once(&mut c.timeout, &key, v);
                }
            }
            ("hedge", Value::Call(call)) => {
                let v = hedge(&call, errors).map(|v| spanned(v, key.span().into()));
                errors.set_once(&mut c.hedge, &key, v);
            }
            ("deadline", value) => {
                let v = positive_limit(&key, &value, "a call", errors);
                errors.set_once(&mut c.deadline, &key, v);
            }
            ("on", Value::Kinds(sp, kinds, clean)) => {
                if kinds.is_empty() && clean {
                    errors.at(
                        sp,
                        "`on` needs at least one error kind: `Timeout`, `Io`, `Io(ErrorKind, ...)`, a pattern or a closure (leave `on` out to retry every error)",
                    );
                }
                let mut seen: Vec<String> = Vec::new();
                let mut ok = !kinds.is_empty() && clean;
                for k in &kinds {
                    ok &= check_kind(k, params, errors);
                    let kk = k.key();
                    if seen.contains(&kk) {
                        errors.at(k.sp(), "this kind is already in the `on` list");
                        ok = false;
                    }
                    seen.push(kk);
                }
                let v = ok.then(|| spanned(kinds, sp));
                errors.set_once(&mut c.on, &key, v);
            }
            ("when", Value::When(w)) => {
                let mut o = Overrides::default();
                let mut ok = w.kind.is_some();
                let is_ok = w.kind.as_ref().is_some_and(Kind::is_ok);
                // (A `when` over values takes a `hint` too.)
                let with_hint = if is_ok { ", or (for an `Ok(..)` kind) `hint`" } else { "" };
                if let Some(kind) = &w.kind {
                    ok &= check_kind(kind, params, errors);
                    let kk = kind.key();
                    if when_kinds.contains(&kk) {
                        errors.at(
                            kind.sp(),
                            "this error kind already has a `when` clause: merge the two",
                        );
                        ok = false;
                    }
                    when_kinds.push(kk);
                    if w.overrides.is_empty() {
                        errors.at(
                            w.sp,
                            format!(
                                "a `when` clause needs at least one override: {}{with_hint}",
                                table::list(table::key_names(true)),
                            ),
                        );
                        ok = false;
                    }
                }
                let mut hint = None;
                for Item { key, value } in w.overrides {
                    if key == "hint" {
                        // `hint` reads as an expression (its type is checked by rustc).
                        match value {
                            Value::Expr(e) if is_ok => errors.set_once(&mut hint, &key, Some(e)),
                            _ => {
                                errors.at(
                                    key.span(),
                                    "`hint` inside `when` reads the delay from a value matched by an `Ok(..)` kind; for errors, set `hint` at the top level",
                                );
                                ok = false;
                            }
                        }
                    } else if key == "timeout" {
                        errors.at(
                            key.span(),
                            "`timeout` cannot be set in a `when` clause: it limits every attempt before its error is known; set it at the top level",
                        );
                        ok = false;
                    } else if !overridable(&key, &value, &mut o, errors) {
                        let k = key.to_string();
                        let top_level = table::key_names(false).any(|n| n == k);
                        let why = if top_level {
                            format!("`{k}` applies to the whole call and cannot be set in a `when` clause")
                        } else {
                            format!(
                                "unknown key `{k}` in `when`{}",
                                table::suggestion(&k, table::key_names(true))
                            )
                        };
                        let list = table::list(table::key_names(true));
                        let msg = if top_level {
                            format!("{why}; a `when` clause overrides only: {list}{with_hint}")
                        } else {
                            format!("{why}: expected one of: {list}{with_hint}")
                        };
                        errors.at(key.span(), msg);
                        ok = false;
                    }
                }
                if ok && let Some(kind) = w.kind {
                    c.whens.push(WhenRule {
                        kind,
                        overrides: o,
                        hint,
                    });
                }
            }
            // A guard is a value shared by every call, never a literal (`limit = 4` meant as
            // the number of slots).
            (guard @ ("budget" | "breaker" | "throttle" | "limit"), Value::Expr(e))
                if is_literal(&e) =>
            {
                let (ty, example) = match guard {
                    "budget" => ("RetryBudget", "RetryBudget::new(10.0, 0.1, 1.0)"),
                    "breaker" => (
                        "CircuitBreaker",
                        "CircuitBreaker::new(20, 10, 0.5, Duration::from_secs(30), 1)",
                    ),
                    "throttle" => ("AdaptiveThrottle", "AdaptiveThrottle::new(2.0, Duration::from_secs(60))"),
                    _ => ("ConcurrencyLimit", "ConcurrencyLimit::new(4, 16)"),
                };
                let name = guard.to_uppercase();
                errors.at(
                    Sp::of(&e),
                    format!(
                        "`{guard}` names a guard shared by every call, not a literal: declare `static {name}: {ty} = match {example} {{ Ok(g) => g, Err(_) => panic!() }};` and write `{guard} = {name}`"
                    ),
                );
            }
            // A `const` declared in the guard's expression and given as the guard: a new one
            // each time it is named, so for each call.
            (guard @ ("budget" | "breaker" | "throttle" | "limit"), Value::Expr(e))
                if const_given(&e).is_some() =>
            {
                if let Some(name) = const_given(&e) {
                    errors.at(
                        Sp::of(name),
                        format!(
                            "`{guard}` would be a new guard for each call: `{name}` is a `const`, a new value each time it is named; declare it `static {name}` to share one guard between calls"
                        ),
                    );
                }
            }
            ("on_success", Value::Expr(e)) => errors.set_once(&mut c.on_success, &key, Some(e)),
            ("on_error", Value::Expr(e)) => errors.set_once(&mut c.on_error, &key, Some(e)),
            ("on_retry", Value::Expr(e)) => errors.set_once(&mut c.on_retry, &key, Some(e)),
            ("hint", Value::Expr(e)) => errors.set_once(&mut c.hint, &key, Some(e)),
            ("fallback", Value::Expr(e)) => errors.set_once(&mut c.fallback, &key, Some(e)),
            ("budget", Value::Expr(e)) => errors.set_once(&mut c.budget, &key, Some(e)),
            ("breaker", Value::Expr(e)) => errors.set_once(&mut c.breaker, &key, Some(e)),
            ("throttle", Value::Expr(e)) => errors.set_once(&mut c.throttle, &key, Some(e)),
            ("limit", Value::Expr(e)) => errors.set_once(&mut c.limit, &key, Some(e)),
            ("attempt", Value::Word(w)) => {
                if w == "_" {
                    // `_` binds nothing: a `timeout` the body was to check would go unread,
                    // and the checks that look for the context's use would take `_` for one.
                    errors.at(
                        w.span(),
                        "`attempt = _` binds nothing: name the attempt context (`attempt = ctx`) and read it in the body, or leave `attempt` out",
                    );
                } else if ["self", "Self", "super", "crate"].contains(&w.to_string().as_str()) {
                    // A path keyword cannot be bound by a `let`.
                    errors.at(
                        w.span(),
                        format!("`attempt = {w}`: `{w}` is a keyword, which no `let` can bind; name the attempt context, like `attempt = ctx`"),
                    );
                } else if params.contains(&w.to_string()) {
                    errors.at(
                        w.span(),
                        format!("`attempt = {w}` would shadow the parameter `{w}` in the body: choose another name, like `attempt = ctx`"),
                    );
                } else {
                    errors.set_once(&mut c.attempt, &key, Some(w));
                }
            }
            ("attempt", other) => errors.at(
                other.sp(),
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
                other.sp(),
                "`crate` expects a path to `retry_runtime` as a string, like `crate = \"my_crate::retry\"`",
            ),
            (k, _) => {
                let known = table::key_names(false).any(|n| n == k);
                let msg = if known {
                    format!("`{k}` expects a different kind of value; see the `#[robust]` docs")
                } else {
                    format!(
                        "unknown key `{k}`{}: expected one of: {}",
                        table::suggestion(k, table::key_names(false)),
                        table::list(table::key_names(false))
                    )
                };
                errors.at(key.span(), msg)
            }
        }
    }
    c
}

/// The type inside invisible groups (from `macro_rules!` `$t:ty`) and parentheses.
pub fn peel(ty: &syn::Type) -> &syn::Type {
    let mut ty = ty;
    loop {
        match ty {
            syn::Type::Group(g) => ty = &g.elem,
            syn::Type::Paren(p) => ty = &p.elem,
            other => return other,
        }
    }
}

/// How each attempt reborrows a parameter that holds a unique borrow (one that cannot be
/// cloned for it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Reborrow {
    /// `&mut T`: `&mut *x`.
    Ref,
    /// `Option<&mut T>`: `Option::as_deref_mut(&mut x)`.
    Option,
    /// `Pin<&mut T>`: `Pin::as_mut(&mut x)`.
    Pin,
}

/// Whether a parameter of type `ty` holds a unique borrow that each attempt reborrows: `&mut T`,
/// `Option<&mut T>` or `Pin<&mut T>` (read from the type as written: through an alias it is
/// taken for an owned value, and cloned).
pub fn reborrow_of(ty: &syn::Type) -> Option<Reborrow> {
    reborrow_pointee(ty).map(|(how, _)| how)
}

/// [`reborrow_of`], with the borrow's pointee: the `T` of `&mut T`, `Option<&mut T>` or
/// `Pin<&mut T>`.
pub fn reborrow_pointee(ty: &syn::Type) -> Option<(Reborrow, &syn::Type)> {
    fn mut_pointee(ty: &syn::Type) -> Option<&syn::Type> {
        match peel(ty) {
            syn::Type::Reference(r) if r.mutability.is_some() => Some(&r.elem),
            _ => None,
        }
    }
    if let Some(pointee) = mut_pointee(ty) {
        return Some((Reborrow::Ref, pointee));
    }
    let syn::Type::Path(tp) = peel(ty) else {
        return None;
    };
    let last = tp.path.segments.last().filter(|_| tp.qself.is_none())?;
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let mut types = args.args.iter().filter_map(|a| match a {
        syn::GenericArgument::Type(t) => Some(t),
        _ => None,
    });
    let (Some(inner), None) = (types.next(), types.next()) else {
        return None;
    };
    let pointee = mut_pointee(inner)?;
    if last.ident == "Option" {
        Some((Reborrow::Option, pointee))
    } else if last.ident == "Pin" {
        Some((Reborrow::Pin, pointee))
    } else {
        None
    }
}

/// Whether the attempts leave a parameter (bound by `pat`) alone, so that it needs no clone
/// or reborrow for them: a wildcard, or a plain name the body (`body`) never mentions, when it
/// includes no file (which may name anything).
pub fn attempts_leave_alone(pat: &syn::Pat, body: &proc_macro2::TokenStream) -> bool {
    match pat {
        syn::Pat::Wild(_) => true,
        syn::Pat::Ident(pi) => {
            pi.subpat.is_none()
                && !includes_code(body.clone())
                && !mentions(body.clone(), &pi.ident)
        }
        _ => false,
    }
}

/// Every name a pattern binds.
pub fn bound_names(pat: &syn::Pat, out: &mut Vec<String>) {
    let mut stack = vec![pat];
    while let Some(p) = stack.pop() {
        match p {
            syn::Pat::Ident(pi) => {
                out.push(pi.ident.to_string());
                if let Some((_, sub)) = &pi.subpat {
                    stack.push(sub);
                }
            }
            syn::Pat::Tuple(t) => stack.extend(t.elems.iter()),
            syn::Pat::TupleStruct(t) => stack.extend(t.elems.iter()),
            syn::Pat::Struct(s) => stack.extend(s.fields.iter().map(|f| &*f.pat)),
            syn::Pat::Slice(s) => stack.extend(s.elems.iter()),
            syn::Pat::Or(o) => stack.extend(o.cases.iter()),
            syn::Pat::Reference(r) => stack.push(&r.pat),
            syn::Pat::Paren(p) => stack.push(&p.pat),
            syn::Pat::Type(t) => stack.push(&t.pat),
            _ => {}
        }
    }
}

/// The names the fn's parameters bind.
pub fn param_names(f: &crate::ast::Func) -> Vec<String> {
    let mut out = Vec::new();
    for arg in &f.sig.inputs {
        if let syn::FnArg::Typed(pt) = arg {
            bound_names(&pt.pat, &mut out);
        }
    }
    out
}

/// A lifetime position in a type: `&` (with its lifetime, if named) or a lifetime alone.
struct Slot {
    sp: Sp,
    /// The lifetime's name (`a` for `'a`); `None` when elided (`&T`, `'_`).
    name: Option<String>,
    /// A `&mut` reference.
    mutable: bool,
}

/// The lifetime positions of `tokens`, in order, read without recursion. An elided lifetime in
/// the parameters or the output of a `Fn(..) -> ..`, `FnMut`, `FnOnce` or `fn(..) -> ..` type
/// is not one: it is that type's own (higher-ranked), not the fn's.
fn slots(tokens: proc_macro2::TokenStream) -> Vec<Slot> {
    use proc_macro2::{Delimiter, TokenTree};
    /// A token list being read.
    struct Frame {
        iter: proc_macro2::token_stream::IntoIter,
        /// Inside a `Fn(..)` type's parameters or output: elided lifetimes are its own.
        own: bool,
        /// The last token was `Fn`, `FnMut`, `FnOnce` or `fn`.
        sugar: bool,
        /// A `Fn(..)` type's parameters were just read (its `->` may follow).
        after_params: bool,
        /// The `-` of that `->` was just read.
        arrow: bool,
        /// In that output: the `<` open in it (it ends at a `,` or `>` outside them).
        output: Option<u32>,
    }
    let frame = |iter, own| Frame {
        iter,
        own,
        sugar: false,
        after_params: false,
        arrow: false,
        output: None,
    };
    let mut out = Vec::new();
    let mut stack = vec![frame(tokens.into_iter(), false)];
    // The `&` just read, waiting for an optional lifetime and `mut`, and whether an elided one
    // is a `Fn` type's own.
    let mut amp: Option<(proc_macro2::Span, Option<String>, bool)> = None;
    let mut quote: Option<proc_macro2::Span> = None;
    while let Some(f) = stack.last_mut() {
        let Some(tt) = f.iter.next() else {
            stack.pop();
            continue;
        };
        let own = f.own || f.output.is_some();
        // A lifetime is `'` followed by an identifier.
        if let Some(q) = quote.take()
            && let TokenTree::Ident(i) = &tt
        {
            let name = (i != "_").then(|| i.to_string());
            match &mut amp {
                Some((_, lt, _)) if lt.is_none() => *lt = name.or(Some("_".into())),
                _ => {
                    if i != "static" && !(own && name.is_none()) {
                        out.push(Slot {
                            sp: Sp {
                                start: q,
                                end: i.span(),
                            },
                            name,
                            mutable: false,
                        })
                    }
                }
            }
            continue;
        }
        if let Some((s, lt, own_amp)) = amp.take() {
            match &tt {
                TokenTree::Punct(p) if p.as_char() == '\'' && lt.is_none() => {
                    amp = Some((s, None, own_amp));
                    quote = Some(p.span());
                    continue;
                }
                _ => {
                    let mutable = matches!(&tt, TokenTree::Ident(i) if i == "mut");
                    let name = lt.filter(|n| n != "_");
                    if name.as_deref() != Some("static") && !(own_amp && name.is_none()) {
                        out.push(Slot {
                            sp: s.into(),
                            name,
                            mutable,
                        });
                    }
                }
            }
        }
        let (sugar, after_params, arrow) = (f.sugar, f.after_params, f.arrow);
        f.sugar = false;
        f.after_params = false;
        f.arrow = false;
        match &tt {
            TokenTree::Punct(p) if p.as_char() == '-' && after_params => f.arrow = true,
            // (A `->` inside an output keeps the output's depth.)
            TokenTree::Punct(p) if p.as_char() == '>' && arrow => {
                f.output = Some(f.output.unwrap_or(0))
            }
            // `dyn Fn(&T) -> U + '_`: the bound after the output is the `dyn`'s, not the output's.
            TokenTree::Punct(p) if p.as_char() == '+' && f.output == Some(0) => f.output = None,
            TokenTree::Punct(p) if p.as_char() == '<' => {
                if let Some(d) = &mut f.output {
                    *d += 1;
                }
            }
            TokenTree::Punct(p) if p.as_char() == '>' || p.as_char() == ',' => {
                match &mut f.output {
                    Some(0) => f.output = None,
                    Some(d) if p.as_char() == '>' => *d -= 1,
                    _ => {}
                }
            }
            TokenTree::Ident(i) => f.sugar = ["Fn", "FnMut", "FnOnce", "fn"].iter().any(|n| i == n),
            _ => {}
        }
        match tt {
            TokenTree::Punct(p) if p.as_char() == '&' => {
                amp = Some((p.span(), None, own));
            }
            TokenTree::Punct(p) if p.as_char() == '\'' => quote = Some(p.span()),
            TokenTree::Group(g) => {
                let params = sugar && g.delimiter() == Delimiter::Parenthesis;
                f.after_params = params;
                stack.push(frame(g.stream().into_iter(), own || params));
            }
            _ => {}
        }
    }
    if let Some((s, lt, own_amp)) = amp {
        let name = lt.filter(|n| n != "_");
        if !(own_amp && name.is_none()) {
            out.push(Slot {
                sp: s.into(),
                name,
                mutable: false,
            });
        }
    }
    out
}

/// The span of an `impl` keyword in `tokens`, if any (`Result<impl Display, E>`).
pub fn find_impl_trait(tokens: proc_macro2::TokenStream) -> Option<proc_macro2::Span> {
    let mut stack = vec![tokens.into_iter()];
    while let Some(iter) = stack.last_mut() {
        match iter.next() {
            None => {
                stack.pop();
            }
            Some(proc_macro2::TokenTree::Ident(i)) if i == "impl" => return Some(i.span()),
            Some(proc_macro2::TokenTree::Group(g)) => stack.push(g.stream().into_iter()),
            Some(_) => {}
        }
    }
    None
}

/// Whether the attribute may retry (a rule that retries, or a hedge): two such on one fn
/// multiply their attempts ([`check_robust_twice`]).
pub fn may_retry(config: &Config) -> bool {
    !retrying_rules(config).is_empty() || config.hedge.is_some()
}

/// The value of the unnamed `const` an expansion that may retry writes first in the fn's body
/// (`const _: &str = "__ROBUST_RETRYING";`), so that another `#[robust]` under it, whatever
/// the name it is imported as, sees the fn is one already.
pub const RETRYING_MARK: &str = "__ROBUST_RETRYING";

/// Another `#[robust]` on the fn (by any path ending in `robust`, or in a `cfg_attr`'s
/// attributes after its condition), where both retry, wraps this one's loop around the other's:
/// each of its attempts runs all of the other's, and the attempts multiply. (One of the two
/// that never retries, `retries = 0`, only adds its guards, timeout or deadline around the
/// other's calls or attempts, as the two nest.) An error at the other attribute; or, when the
/// fn is already the expansion of one that may retry (its body starts with the
/// [`RETRYING_MARK`]: the other was written above this one, under a name that does not end in
/// `robust`, `use retry_runtime::robust as resilient`), at this one.
pub fn check_robust_twice(config: &Config, f: &crate::ast::Func, errors: &mut Errors) {
    if !may_retry(config) {
        return;
    }
    const TWICE: &str = "`#[robust]` is written twice on this fn, and both retry: the outer one would retry the inner one's whole call, each of its attempts making all of the inner one's, so the attempts multiply (two `retries = 2` make 9); write one `#[robust(...)]` with every key, or give one of them `retries = 0`, so that one alone retries";
    for a in &f.attrs {
        if robust_args(a).is_some_and(|args| !never_retries(args)) {
            errors.at(Sp::of(a), TWICE);
        }
    }
    let mark = proc_macro2::Literal::string(RETRYING_MARK).to_string();
    let marked = f
        .body
        .stream()
        .into_iter()
        .take(8)
        .any(|t| matches!(t, proc_macro2::TokenTree::Literal(l) if l.to_string() == mark));
    if marked {
        errors.at(
            Sp::from(proc_macro2::Span::call_site()),
            format!("{TWICE} (the other one is written above this one, under another name)"),
        );
    }
}

/// The arguments of `a` if it is a `#[robust(..)]` (by any path ending in `robust`), or a
/// `cfg_attr` whose attributes (after its condition) include one (empty for `#[robust]`).
fn robust_args(a: &syn::Attribute) -> Option<proc_macro2::TokenStream> {
    let ends_in_robust = |p: &syn::Path| p.segments.last().is_some_and(|s| s.ident == "robust");
    let list = match &a.meta {
        syn::Meta::Path(p) if ends_in_robust(p) => return Some(proc_macro2::TokenStream::new()),
        syn::Meta::List(list) if ends_in_robust(&list.path) => return Some(list.tokens.clone()),
        syn::Meta::List(list) if list.path.is_ident("cfg_attr") => list,
        _ => return None,
    };
    // The attributes come after the condition's comma, each a path (whose last segment is
    // not followed by `::`) then its arguments.
    let tokens: Vec<_> = list.tokens.clone().into_iter().collect();
    let comma = |t: &proc_macro2::TokenTree| matches!(t, proc_macro2::TokenTree::Punct(p) if p.as_char() == ',');
    let first_comma = tokens.iter().position(comma)?;
    tokens
        .iter()
        .enumerate()
        .skip(first_comma + 1)
        .find_map(|(i, t)| match t {
            proc_macro2::TokenTree::Ident(id) if id == "robust" => match tokens.get(i + 1) {
                Some(proc_macro2::TokenTree::Punct(p)) if p.as_char() == ':' => None,
                Some(proc_macro2::TokenTree::Group(g)) => Some(g.stream()),
                _ => Some(proc_macro2::TokenStream::new()),
            },
            _ => None,
        })
}

/// Whether a `#[robust(..)]`'s arguments say it never retries: `retries = 0` or
/// `max_delay = 0` at the top level, with no `when` (which may retry) nor `hedge`.
fn never_retries(args: proc_macro2::TokenStream) -> bool {
    let tokens: Vec<_> = args.into_iter().collect();
    let ident = |i: usize, name: &str| matches!(tokens.get(i), Some(proc_macro2::TokenTree::Ident(id)) if id == name);
    let zero_after = |i: usize| {
        matches!(tokens.get(i + 1), Some(proc_macro2::TokenTree::Punct(p)) if p.as_char() == '=')
            && matches!(tokens.get(i + 2),
                Some(proc_macro2::TokenTree::Literal(l)) if l.to_string() == "0")
    };
    let zero =
        (0..tokens.len()).any(|i| (ident(i, "retries") || ident(i, "max_delay")) && zero_after(i));
    zero && !(0..tokens.len()).any(|i| ident(i, "when") || ident(i, "hedge"))
}

/// A `const` a guard's expression declares in a block and gives as its value (`{ const L:
/// ConcurrencyLimit = ..; &L }`), through the tails of its blocks and the branches of its
/// `if`s and `match`es, under `&`, `*` or a field: its name. (Not a method's receiver: a
/// method called on a `const`, a key, may return a shared guard.)
fn const_given(e: &syn::Expr) -> Option<&syn::Ident> {
    const_given_in(e, &[])
}

fn const_given_in<'e>(e: &'e syn::Expr, consts: &[&'e syn::Ident]) -> Option<&'e syn::Ident> {
    let tail = |b: &'e syn::Block| {
        let mut consts = consts.to_vec();
        consts.extend(b.stmts.iter().filter_map(|s| match s {
            syn::Stmt::Item(syn::Item::Const(c)) => Some(&c.ident),
            _ => None,
        }));
        match b.stmts.last() {
            Some(syn::Stmt::Expr(tail, None)) => const_given_in(tail, &consts),
            _ => None,
        }
    };
    match e {
        syn::Expr::Paren(syn::ExprParen { expr, .. })
        | syn::Expr::Group(syn::ExprGroup { expr, .. })
        | syn::Expr::Reference(syn::ExprReference { expr, .. })
        | syn::Expr::Unary(syn::ExprUnary { expr, .. })
        | syn::Expr::Field(syn::ExprField { base: expr, .. }) => const_given_in(expr, consts),
        syn::Expr::Path(p) => p.path.get_ident().filter(|i| consts.contains(i)),
        syn::Expr::Block(b) => tail(&b.block),
        syn::Expr::If(i) => tail(&i.then_branch).or_else(|| {
            i.else_branch
                .as_ref()
                .and_then(|(_, e)| const_given_in(e, consts))
        }),
        syn::Expr::Match(m) => m.arms.iter().find_map(|a| const_given_in(&a.body, consts)),
        _ => None,
    }
}

/// Checks the fn's own shape: what the expansion cannot run in a loop, each at its token.
pub fn check_fn(f: &crate::ast::Func, errors: &mut Errors) {
    use quote::ToTokens;
    let sig = &f.sig;
    if let Some(c) = &sig.constness {
        errors.at(
            c.span,
            "`#[robust]` cannot be used on a `const fn`: retries sleep and read the clock, which a `const fn` cannot do; remove `const`",
        );
    }
    // `#[track_caller]` would reach the fn and stop there: its body runs in a closure (or an
    // `async` block) the loop calls once per attempt, which does not pass the caller's
    // location on, so a panic in the body would silently report the body's line.
    if let Some(a) = f.attrs.iter().find(|a| a.path().is_ident("track_caller")) {
        errors.at(
            Sp::of(a),
            "`#[track_caller]` does not reach the body under `#[robust]`: the body runs in a closure (or an `async` block) called once per attempt, which does not pass the caller's location on, so a panic in it would report the body's line; remove `#[track_caller]`",
        );
    }
    let mut mut_receiver = false;
    let mut mut_lifetimes: Vec<(String, String)> = Vec::new();
    // Lifetimes a shared reference carries too: a borrow named by one of these may come from
    // that reference, which the retry loop does not hold (rustc decides).
    let mut shared_lifetimes: Vec<String> = Vec::new();
    let mut input_slots = Vec::new();
    for arg in &sig.inputs {
        match arg {
            syn::FnArg::Receiver(r) => {
                // `self: &Self` and `self: &mut Self` leave `reference` empty: read the type.
                let is_ref =
                    r.reference.is_some() || matches!(peel(&r.ty), syn::Type::Reference(_));
                // A receiver by a pointer type (`self: Pin<&mut Self>`, `self: Arc<Self>`) is
                // owned too: the expansion hands each attempt its own reborrow of `self`,
                // which only a reference gives.
                let pointer = match peel(&r.ty) {
                    syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
                    _ => None,
                }
                .filter(|name| name != "Self");
                if !is_ref {
                    errors.at(
                        Sp::of(r),
                        match pointer {
                            Some(name) => format!("`#[robust]` needs `&self` or `&mut self`: `self: {name}<..>` is moved into the first attempt (the expansion reborrows only a reference for each attempt); take `&self` or `&mut self`, or put `#[robust]` on a fn this method calls"),
                            None => "`#[robust]` needs `&self` or `&mut self`: an owned `self` is consumed by the first attempt and cannot be retried".to_string(),
                        },
                    );
                }
                let s = slots(r.ty.to_token_stream());
                mut_receiver = s.first().is_some_and(|s| s.mutable);
                for slot in &s {
                    match (&slot.name, slot.mutable) {
                        (Some(n), true) => mut_lifetimes.push((n.clone(), "self".into())),
                        (Some(n), false) => shared_lifetimes.push(n.clone()),
                        (None, _) => {}
                    }
                }
                input_slots.extend(s.into_iter().map(|s| (s, "self".to_owned())));
            }
            syn::FnArg::Typed(pt) => {
                let name = pt.pat.to_token_stream().to_string();
                for slot in slots(pt.ty.to_token_stream()) {
                    match (&slot.name, slot.mutable) {
                        (Some(n), true) => mut_lifetimes.push((n.clone(), name.clone())),
                        (Some(n), false) => shared_lifetimes.push(n.clone()),
                        (None, _) => {}
                    }
                    input_slots.push((slot, name.clone()));
                }
            }
        }
    }
    let ret = match &sig.output {
        syn::ReturnType::Type(_, ty) => ty,
        syn::ReturnType::Default => {
            errors.at(
                sig.ident.span(),
                "`#[robust]` needs a function that returns a `Result`: failures are recognised by their `Err` value",
            );
            return;
        }
    };
    // A boxed future: a method `#[async_trait]` rewrote before this attribute ran (on a
    // trait's impl, it turns each `async fn` into a fn returning `Pin<Box<dyn Future>>`).
    if sig.asyncness.is_none()
        && let syn::Type::Path(p) = peel(ret)
        && p.path.segments.last().is_some_and(|s| {
            s.ident == "Pin" || s.ident == "BoxFuture" || s.ident == "LocalBoxFuture"
        })
    {
        errors.at(
            Sp::of(ret),
            "`#[robust]` needs a function that returns a `Result`, and this one returns a boxed future: a method that `#[async_trait]` rewrote before `#[robust]` ran (it makes each `async fn` of a trait's impl return `Pin<Box<dyn Future>>`)? Put `#[robust]` on an inherent or free `async fn` and call it from the trait's method, or write the trait with `async fn` (no `#[async_trait]`, Rust 1.75)",
        );
        return;
    }
    if let Some(tok) = find_impl_trait(ret.to_token_stream()) {
        errors.at(
            tok,
            "`#[robust]` cannot name a return type that contains `impl Trait`: the loop has to write the type out; return a concrete type or `Box<dyn Trait>`",
        );
    }
    // A borrow of a `&mut` argument returned from an attempt stays borrowed on the path that
    // retries: Rust's borrow checker (NLL) rejects that loop, so say why here instead.
    let receiver_is_ref = matches!(sig.inputs.first(), Some(syn::FnArg::Receiver(r)) if r.reference.is_some() || matches!(peel(&r.ty), syn::Type::Reference(_)));
    for slot in slots(ret.to_token_stream()) {
        let from = match &slot.name {
            Some(n) if shared_lifetimes.contains(n) => None,
            Some(n) => mut_lifetimes
                .iter()
                .find(|(l, _)| l == n)
                .map(|(_, p)| p.clone()),
            None if receiver_is_ref => mut_receiver.then(|| "self".to_owned()),
            None if input_slots.len() == 1 && input_slots[0].0.mutable => {
                Some(input_slots[0].1.clone())
            }
            None => None,
        };
        if let Some(param) = from {
            errors.at(
                slot.sp,
                format!(
                    "`#[robust]` cannot return a borrow of the `&mut` argument `{param}`: every attempt reborrows it, and Rust's borrow checker cannot end a borrow that is returned on one path and retried on another; return an owned value (or a borrow of a `&` argument)"
                ),
            );
            break;
        }
    }
}

/// A blocking fn's timeout is cooperative (a running thread cannot be cancelled): it acts only
/// through the attempt's context, which the body reads (`attempt = NAME`), and through the
/// `Timeout` kind, which an error returned after it matches. With neither, it does nothing.
/// So is an async fn's whose body never awaits (no `.await`, no macro that may hide one):
/// each attempt ends at its first poll, before any timer can cut it.
pub fn check_blocking_timeout(config: &Config, f: &crate::ast::Func, errors: &mut Errors) {
    let runs_through = f.sig.asyncness.is_none() || never_awaits(f.body.stream());
    let which = if f.sig.asyncness.is_none() {
        "a blocking fn's timeout is cooperative (a running thread cannot be cancelled)"
    } else {
        "this async fn's body never awaits (no `.await`, no macro that may hide one), so each attempt runs to its end at its first poll and its timeout is cooperative, as a blocking fn's"
    };
    let which_deadline = if f.sig.asyncness.is_none() {
        "a blocking fn's deadline is cooperative (a running thread cannot be cancelled)"
    } else {
        "this async fn's body never awaits (no `.await`, no macro that may hide one), so its deadline is cooperative, as a blocking fn's"
    };
    // A name the body never mentions does not read it (a mention under `#[cfg(..)]` counts),
    // nor one it only asks for the attempt's number or start (`ctx.number()`).
    let unread = config
        .attempt
        .as_ref()
        .filter(|a| !may_read_limit(f.body.stream(), a));
    if !runs_through || config.attempt.is_some() && unread.is_none() {
        return;
    }
    let unread_note = unread.map_or(String::new(), |a| {
        if mentions(f.body.stream(), a) {
            format!(
                " (`attempt = {a}` names it, but the body only calls methods of `{a}` that read no limit: {})",
                HARMLESS_ATTEMPT_METHODS
                    .iter()
                    .map(|m| format!("`{m}()`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            format!(" (`attempt = {a}` names it, but the body never mentions `{a}`)")
        }
    });
    // With no retry to stop, a deadline (and a rule on `Timeout`) has nothing to act on
    // (unless a guard counts what it makes a timeout).
    // (A hedge is one too: a failure a rule matches sends the next hedge at once, until the
    // deadline.)
    let never_retries = retrying_rules(config).is_empty()
        && config.throttle.is_none()
        && config.breaker.is_none()
        && config.hedge.is_none();
    if never_retries
        && let Some(Spanned {
            value: Limit::Finite(_),
            span,
        }) = config.deadline
    {
        errors.at(
            span,
            format!("this `deadline` does nothing: {which_deadline}: it stops retries, and no retry is ever made here, and nothing reads it{unread_note}; name the attempt (`attempt = ctx`) and stop when `ctx.is_expired()`, or leave it out"),
        );
    }
    let timeout_kind = |k: &Kind| matches!(k, Kind::Timeout(_));
    let named = config
        .on
        .as_ref()
        .is_some_and(|on| on.value.iter().any(timeout_kind))
        || config.whens.iter().any(|w| timeout_kind(&w.kind));
    let span = match (&config.timeout, &config.adaptive) {
        (Some(t), _) if matches!(t.value, Limit::Finite(_)) => t.span,
        (_, Some(a)) => a.span,
        _ => return,
    };
    if !named {
        errors.at(
            span,
            format!("this `timeout` does nothing: {which}, and nothing here reads it{unread_note}; name the attempt (`attempt = ctx`) and stop when `ctx.is_expired()`, add a rule on `Timeout` (an error returned after the timeout is one), or leave it out"),
        );
    } else if never_retries {
        errors.at(
            span,
            format!("this `timeout` does nothing: {which}: it makes a late error a `Timeout`, which no rule here retries, as no rule retries at all, and nothing reads it{unread_note}; name the attempt (`attempt = ctx`) and stop when `ctx.is_expired()`, or leave it out"),
        );
    }
}

/// The parameters each attempt borrows mutably: those taken by `&mut` (or `Option<&mut _>`,
/// `Pin<&mut _>`) under a plain name the body mentions, and `self` behind `&mut self`.
fn mut_params(f: &crate::ast::Func) -> Vec<syn::Ident> {
    let mut names: Vec<syn::Ident> = Vec::new();
    let body = f.body.stream();
    for arg in &f.sig.inputs {
        match arg {
            // (`&mut self` and `self: &mut Self` alike: syn gives both their type.)
            syn::FnArg::Receiver(r) if matches!(peel(&r.ty), syn::Type::Reference(t) if t.mutability.is_some()) =>
            {
                names.push(syn::Ident::new("self", r.self_token.span));
            }
            syn::FnArg::Typed(pt) => {
                if let syn::Pat::Ident(pi) = &*pt.pat
                    && reborrow_of(&pt.ty).is_some()
                    && !attempts_leave_alone(&pt.pat, &body)
                {
                    names.push(pi.ident.clone());
                }
            }
            _ => {}
        }
    }
    names
}

/// Whether an expression a blocking fn's fast path evaluates after its first attempt (the
/// `on_error` callback and the hints: they make the policy) names a parameter each
/// attempt borrows mutably, `{ let n = buf.len(); move |..| .. }`. The body's closure holds that
/// borrow from the first attempt on, so such a fn takes the general path, which evaluates them
/// before its first attempt.
pub fn late_exprs_read_mut_params(config: &Config, f: &crate::ast::Func) -> bool {
    let names = mut_params(f);
    if names.is_empty() {
        return false;
    }
    // (A kind's closure that reads one is refused by `check_mut_params_in_callbacks`, and a
    // kind cannot be a block.)
    [&config.on_error, &config.hint]
        .into_iter()
        .chain(config.whens.iter().map(|w| &w.hint))
        .flatten()
        .map(|e| quote::ToTokens::to_token_stream(&**e))
        .any(|e| names.iter().any(|n| names_variable(e.clone(), n, true)))
}

/// A callback of the attribute written as a closure (`on_error`, `on_success`, `on_retry`,
/// `hint`, a kind's closure) that reads a parameter each attempt borrows mutably (a `&mut`
/// parameter, or `self` behind `&mut self`): the policy holds the closure, and its borrow,
/// across the attempts, which the compiler refuses with a bare borrow error. Said here, at the
/// closure. Not for the guards (bound before the loop, to a value that need not borrow the
/// parameter: `BREAKERS.get(&conn.host)`), nor a value computed before a `move` closure is
/// made (`{ let n = buf.len(); move |..| .. }`: a blocking fn whose `on_error` or hint does so
/// skips the fast path, see `late_exprs_read_mut_params`); nor for the `fallback`, made after the loop. A name a closure's
/// own parameter binds, or a path segment (`conn::X`), is not the parameter.
pub fn check_mut_params_in_callbacks(config: &Config, f: &crate::ast::Func, errors: &mut Errors) {
    let names = mut_params(f);
    if names.is_empty() {
        return;
    }
    fn closure_of(mut e: &Expr) -> Option<&syn::ExprClosure> {
        while let Expr::Paren(p) = e {
            e = &p.expr;
        }
        match e {
            Expr::Closure(c) => Some(c),
            _ => None,
        }
    }
    // Each closure, what it is for, and whether it is a kind's (no block can stand there).
    let mut closures: Vec<(String, &syn::ExprClosure, bool)> = Vec::new();
    for (key, e) in [
        ("on_error", &config.on_error),
        ("on_success", &config.on_success),
        ("on_retry", &config.on_retry),
        ("hint", &config.hint),
    ] {
        if let Some(c) = e.as_deref().and_then(closure_of) {
            closures.push((format!("`{key}`"), c, false));
        }
    }
    for w in &config.whens {
        if let Some(c) = w.hint.as_deref().and_then(closure_of) {
            closures.push(("`hint`".to_owned(), c, false));
        }
    }
    let kinds = config
        .on
        .iter()
        .flat_map(|o| o.value.iter())
        .chain(config.whens.iter().map(|w| &w.kind));
    for k in kinds {
        let k = match k {
            Kind::Ok { inner, .. } => &**inner,
            k => k,
        };
        if let Kind::Closure(c) = k {
            closures.push(("this kind's closure".to_owned(), c, true));
        }
    }
    // Every name a pattern of the closure binds, its parameters' and those in its body
    // (`let v = ..`, `if let Err(buf) = r`, a `match` arm's, a nested closure's): a name it
    // binds itself is not the fn's parameter. (Where such a name shadows a parameter only in
    // part of the body, a read of the parameter elsewhere goes unreported here: rustc's
    // borrow error says it then.)
    struct Binds(Vec<String>);
    impl<'a> syn::visit::Visit<'a> for Binds {
        fn visit_pat(&mut self, p: &'a syn::Pat) {
            bound_names(p, &mut self.0);
            syn::visit::visit_pat(self, p);
        }
    }
    for (what, c, is_kind) in closures {
        let mut binds = Binds(Vec::new());
        syn::visit::Visit::visit_expr_closure(&mut binds, c);
        let own = binds.0;
        let read = names.iter().find(|n| {
            !own.iter().any(|o| *n == o)
                && names_variable(quote::ToTokens::to_token_stream(&c.body), n, true)
        });
        if let Some(name) = read {
            // (A kind cannot be a block.)
            let advice = if is_kind {
                ""
            } else {
                ", or give a `move` closure a value computed from it first: `{ let n = ..; move |..| .. }`"
            };
            let whose = if name == "self" {
                "`self`, which each attempt borrows mutably (`&mut self`)".to_owned()
            } else {
                format!("`{name}`, which each attempt borrows mutably (`&mut`)")
            };
            errors.at(
                Sp::of(c),
                format!(
                    "{what} reads {whose}, and the retry loop holds the closure across the attempts: read it in the `fallback`, which is made after the retries{advice}"
                ),
            );
        }
    }
}

/// Whether an async fn's body never awaits: no `.await` at any depth, and no macro call that
/// could expand to one (`select!`, `join!`, a macro of the user's; a keyword before `!(..)`,
/// `if !(ready)`, is a negation, not a macro). Each attempt then ends at its first poll.
fn never_awaits(tokens: proc_macro2::TokenStream) -> bool {
    use proc_macro2::TokenTree;
    const KEYWORDS: [&str; 8] = [
        "return", "if", "while", "match", "in", "else", "break", "as",
    ];
    !any_token(tokens, |level, i| {
        let before = i.checked_sub(1).and_then(|j| level.get(j));
        match &level[i] {
            TokenTree::Ident(id) if id == "await" => {
                matches!(before, Some(TokenTree::Punct(p)) if p.as_char() == '.')
            }
            TokenTree::Punct(p) if p.as_char() == '!' => {
                matches!(before, Some(TokenTree::Ident(name)) if !KEYWORDS.iter().any(|k| name == k))
                    && matches!(level.get(i + 1), Some(TokenTree::Group(_)))
            }
            _ => false,
        }
    })
}

/// Whether `found` holds at some token of `tokens`, at any depth: it is given each token's
/// level (the tokens of one group) and index there. Iterative: a body may nest deeper than the
/// stack would allow a recursion.
fn any_token(
    tokens: proc_macro2::TokenStream,
    mut found: impl FnMut(&[proc_macro2::TokenTree], usize) -> bool,
) -> bool {
    use proc_macro2::TokenTree;
    let mut stack: Vec<Vec<TokenTree>> = vec![tokens.into_iter().collect()];
    while let Some(level) = stack.pop() {
        for (i, t) in level.iter().enumerate() {
            if found(&level, i) {
                return true;
            }
            if let TokenTree::Group(g) = t {
                stack.push(g.stream().into_iter().collect());
            }
        }
    }
    false
}

/// The methods of an attempt context that read no limit (its timeout or deadline).
const HARMLESS_ATTEMPT_METHODS: [&str; 4] = ["number", "retries", "started", "elapsed"];

/// Whether `tokens` may read the attempt's limit through the attempt context `name`: a mention
/// of the variable other than a call of one of [`HARMLESS_ATTEMPT_METHODS`] (`ctx.number()`)
/// or a path segment of that name. (Passing it on, `helper(ctx)`, may read it.)
fn may_read_limit(tokens: proc_macro2::TokenStream, name: &syn::Ident) -> bool {
    // (A file the body includes may read it.)
    includes_code(tokens.clone())
        || names_variable_but(tokens, name, true, &HARMLESS_ATTEMPT_METHODS)
}

/// Whether `tokens` contain the identifier `name`, at any depth, or a string literal that
/// names it as a format argument (`"{name}"`, `"{name:?}"`). Iterative: a body may nest deeper
/// than the stack would allow a recursion.
pub fn mentions(tokens: proc_macro2::TokenStream, name: &syn::Ident) -> bool {
    names_variable(tokens, name, false)
}

/// Whether `tokens` call `include!` (at any depth): the file it includes may name anything,
/// which no reading of the tokens can see.
pub fn includes_code(tokens: proc_macro2::TokenStream) -> bool {
    use proc_macro2::TokenTree;
    any_token(tokens, |level, i| {
        matches!(&level[i], TokenTree::Ident(id) if id == "include")
            && matches!(level.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == '!')
    })
}

/// [`mentions`], and with `skip_paths` not as a path segment either (`name::X`, `X::name`):
/// whether `tokens` may read the variable `name`. (A name after a `.` is a field, never the
/// variable.)
fn names_variable(tokens: proc_macro2::TokenStream, name: &syn::Ident, skip_paths: bool) -> bool {
    names_variable_but(tokens, name, skip_paths, &[])
}

/// [`names_variable`], not counting a call of one of `methods` on it (`name.number()`).
fn names_variable_but(
    tokens: proc_macro2::TokenStream,
    name: &syn::Ident,
    skip_paths: bool,
    methods: &[&str],
) -> bool {
    use proc_macro2::{Delimiter, TokenTree};
    use syn::ext::IdentExt;
    // (`r#ctx` and `ctx` are one name.)
    let name = &name.unraw();
    let (plain, formatted) = (format!("{{{name}}}"), format!("{{{name}:"));
    let punct =
        |t: Option<&TokenTree>, c: char| matches!(t, Some(TokenTree::Punct(p)) if p.as_char() == c);
    any_token(tokens, |level, i| match &level[i] {
        TokenTree::Ident(id) if id.unraw() == *name => {
            let before = i.checked_sub(1).and_then(|j| level.get(j));
            let path = skip_paths
                && (punct(level.get(i + 1), ':') && punct(level.get(i + 2), ':')
                    || i >= 2 && punct(before, ':') && punct(level.get(i - 2), ':'));
            let method = punct(level.get(i + 1), '.')
                && matches!(level.get(i + 2), Some(TokenTree::Ident(m))
                    if methods.iter().any(|h| m == h))
                && matches!(level.get(i + 3), Some(TokenTree::Group(g))
                    if g.delimiter() == Delimiter::Parenthesis && g.stream().is_empty());
            // (After `..`, a range's end or a struct update's base, it is the variable.)
            let field = punct(before, '.') && !(i >= 2 && punct(level.get(i - 2), '.'));
            !field && !path && !method
        }
        TokenTree::Literal(l) => {
            let text = l.to_string();
            text.contains(&plain) || text.contains(&formatted)
        }
        _ => false,
    })
}

/// Whether a `Timeout` kind matches a timed-out attempt without looking into the error: when
/// an attempt's own timeout can cut it and a retry follow (beside a throttle, a deadline alone
/// is enough). Otherwise it must find a timeout in the error itself. (The expansion picks the
/// kind's check by it.)
pub fn timeout_kind_is_timed(config: &Config) -> bool {
    finite_limit(&config.timeout).is_some()
        || config.adaptive.is_some()
        || finite_limit(&config.deadline).is_some() && config.throttle.is_some()
}

/// A `deadline` where no retry is ever made and no hedge is sent: the only attempt is limited
/// by the smaller of its timeout and the deadline, so a timeout shorter than the deadline (a
/// fixed one, or an adaptive one's `max`) always ends it first and the deadline does nothing:
/// an async attempt is cut by its timeout first, and the attempt's context (`attempt = ctx`)
/// reads the earlier of the two ends, always the timeout's. (A cooperative fn, blocking or
/// never awaiting, whose context is not read is judged by `check_blocking_timeout`; a timeout
/// at or above the deadline is `check_under_deadline`'s.)
pub fn check_async_deadline(config: &Config, f: &crate::ast::Func, errors: &mut Errors) {
    let cooperative = f.sig.asyncness.is_none() || never_awaits(f.body.stream());
    let read = config
        .attempt
        .as_ref()
        .filter(|a| may_read_limit(f.body.stream(), a));
    if !errors.is_empty()
        || cooperative && read.is_none()
        || config.hedge.is_some()
        || !retrying_rules(config).is_empty()
    {
        return;
    }
    let Some(Spanned {
        value: Limit::Finite(deadline),
        span,
    }) = config.deadline
    else {
        return;
    };
    let longest = match (finite_limit(&config.timeout), &config.adaptive) {
        (Some(t), _) => t,
        (None, Some(a)) => a.value.max,
        (None, None) => return,
    };
    if longest < deadline {
        let ends = if cooperative {
            "the only attempt's limit is always its `timeout`'s"
        } else {
            "the only attempt is always cut first by its `timeout`"
        };
        let context = read.map_or(String::new(), |a| {
            format!(", and `{a}` reads the earlier of the two ends, which is always the timeout's")
        });
        errors.at(
            span,
            format!(
                "this `deadline` does nothing: no retry is ever made here, and {ends} (at most {longest:?}, shorter than the deadline){context}; leave it out, or allow retries"
            ),
        );
    }
}

/// A literal, or a negated one (`4`, `-1`, `"x"`, `true`).
fn is_literal(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) => true,
        Expr::Unary(u) => matches!(u.op, syn::UnOp::Neg(_)) && is_literal(&u.expr),
        Expr::Paren(p) => is_literal(&p.expr),
        Expr::Group(g) => is_literal(&g.expr),
        _ => false,
    }
}

/// `hedge` runs attempts concurrently (SPEC section 15): an async fn, with no `&mut` receiver
/// or argument (each attempt would borrow it mutably at the same time).
pub fn check_hedge(config: &Config, f: &crate::ast::Func, errors: &mut Errors) {
    let Some(h) = &config.hedge else { return };
    check_hedge_in_time(config, &h.value, errors);
    if f.sig.asyncness.is_none() {
        errors.at(
            h.span,
            "`hedge` needs an async fn: hedges run beside the attempt they back up, and a blocking fn's thread runs one attempt at a time",
        );
    } else if never_awaits(f.body.stream()) {
        // Each attempt ends at its first poll: no hedge is ever due beside it, and a failure
        // sends the next "hedge" at once, a retry without backoff.
        errors.at(
            h.span,
            "this `hedge` never runs beside an attempt: this async fn's body never awaits (no `.await`, no macro that may hide one), so each attempt runs to its end at its first poll, and a failure would only send the next attempt at once, as a retry without backoff (`after` would do nothing); await in the body, or leave `hedge` out",
        );
    }
    let mut_ref =
        |ty: &syn::Type| matches!(peel(ty), syn::Type::Reference(r) if r.mutability.is_some());
    let body = f.body.stream();
    for arg in &f.sig.inputs {
        match arg {
            syn::FnArg::Receiver(r)
                if r.reference.as_ref().is_some() && r.mutability.is_some()
                    || r.reference.is_none() && mut_ref(&r.ty) =>
            {
                errors.at(
                    Sp::of(r),
                    "`hedge` runs attempts of this fn at the same time, and each would borrow `self` mutably: take `&self` (with interior mutability for what the attempts change), or leave `hedge` out",
                );
            }
            // (A parameter the attempts leave alone, which only `fallback` may read, is
            // borrowed by none of them.)
            syn::FnArg::Typed(pt)
                if reborrow_of(&pt.ty).is_some() && !attempts_leave_alone(&pt.pat, &body) =>
            {
                errors.at(
                Sp::of(&pt.ty),
                "`hedge` runs attempts of this fn at the same time, and each would borrow this argument mutably: take it by `&` or by value, or leave `hedge` out",
            )
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fraction_as_percent;

    #[test]
    fn a_fraction_is_shifted_as_written() {
        let cases = [
            ("0.99", Some("99")),
            ("0.999", Some("99.9")),
            ("0.57", Some("57")),
            ("0.5", Some("50")),
            ("0.07", Some("7")),
            ("0.9990", Some("99.9")),
            ("0.0001", Some("0.01")),
            ("1.5", None),
            ("0.", None),
            ("0.9e1", None),
        ];
        for (digits, want) in cases {
            assert_eq!(fraction_as_percent(digits).as_deref(), want, "{digits}");
        }
    }
}

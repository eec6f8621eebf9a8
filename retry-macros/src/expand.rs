//! Expansion: the function with its body run as a plain loop over the attempts, calling into
//! `retry_runtime::__private`. No box, no allocation: the policy is a stack value.

use std::time::Duration;

use proc_macro2::{Group, Literal, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Ident, Pat, ReturnType, Token, Type};

use crate::ast::{Func, Kind};
use crate::model::{
    AdaptiveSpec, After, Config, JitterSpec, Limit, Overrides, Strategy, finite_limit,
};
use crate::valid::{Reborrow, peel};

/// `tokens` with every span set to `span` (groups included), so that an error about a
/// generated path points at the user's token instead of the whole attribute.
fn respan(tokens: &TokenStream, span: Span) -> TokenStream {
    tokens
        .clone()
        .into_iter()
        .map(|tt| match tt {
            TokenTree::Group(g) => {
                let mut n = Group::new(g.delimiter(), respan(&g.stream(), span));
                n.set_span(span);
                TokenTree::Group(n)
            }
            mut other => {
                other.set_span(span);
                other
            }
        })
        .collect()
}

/// `(tokens)` with the parentheses spanned at `span`.
fn spanned_group(tokens: TokenStream, span: Span) -> Group {
    let mut g = Group::new(proc_macro2::Delimiter::Parenthesis, tokens);
    g.set_span(span);
    g
}

fn dur(p: &TokenStream, d: Duration) -> TokenStream {
    let secs = Literal::u64_suffixed(d.as_secs());
    let nanos = Literal::u32_suffixed(d.subsec_nanos());
    quote!(#p::Dur::new(#secs, #nanos))
}

fn float(v: f64) -> Literal {
    // Validated values are finite.
    Literal::f64_suffixed(v)
}

fn limit(p: &TokenStream, l: Option<Limit>) -> TokenStream {
    match l {
        Some(Limit::Finite(d)) => {
            let d = dur(p, d);
            quote!(::core::option::Option::Some(#d))
        }
        Some(Limit::Infinite) => quote!(::core::option::Option::None),
        None => quote!(#p::DEFAULT_MAX_DELAY),
    }
}

/// A duration, or the runtime's default `default` when not written.
fn dur_or(p: &TokenStream, d: Option<Duration>, default: TokenStream) -> TokenStream {
    d.map_or(default, |d| dur(p, d))
}

fn strategy(p: &TokenStream, s: &Strategy) -> TokenStream {
    match s {
        Strategy::Exponential { base, max, m } => {
            let m = m.map_or(quote!(#p::DEFAULT_M), |m| {
                let m = float(m);
                quote!(#m)
            });
            let (b, x) = (dur(p, *base), dur(p, *max));
            quote!(#p::Exponential::new_unchecked(#b, #x, #m))
        }
        Strategy::Linear {
            base,
            max,
            interval,
        } => {
            let (b, x, i) = (dur(p, *base), dur(p, *max), dur(p, *interval));
            quote!(#p::Linear::new_unchecked(#b, #x, #i))
        }
        Strategy::Fibonacci { base, max, unit } => {
            let u = dur_or(p, *unit, quote!(#p::DEFAULT_UNIT));
            let (b, x) = (dur(p, *base), dur(p, *max));
            quote!(#p::Fibonacci::new_unchecked(#b, #x, #u))
        }
        Strategy::Polynomial {
            base,
            max,
            p: exps,
            unit,
        } => {
            let u = dur_or(p, *unit, quote!(#p::DEFAULT_UNIT));
            let (b, x) = (dur(p, *base), dur(p, *max));
            let exps = match exps {
                Some(exps) => {
                    let exps = exps.iter().map(|e| float(*e));
                    quote!([#(#exps),*])
                }
                None => quote!(#p::DEFAULT_P),
            };
            quote!(#p::Polynomial::new_unchecked(#b, #x, #exps, #u))
        }
        Strategy::Random { base, max } => {
            let (b, x) = (dur(p, *base), dur(p, *max));
            quote!(#p::Random::new_unchecked(#b, #x))
        }
        Strategy::Constant { base } => {
            let b = dur(p, *base);
            quote!(#p::Constant::new(#b))
        }
        Strategy::None => quote!(#p::NoBackoff),
        Strategy::Custom(e) => quote!(#e),
        Strategy::Default => quote!(#p::DEFAULT_BACKOFF),
    }
}

fn jitter(p: &TokenStream, j: &JitterSpec) -> TokenStream {
    match j {
        JitterSpec::None => quote!(#p::NoJitter),
        JitterSpec::Full => quote!(#p::FullJitter),
        JitterSpec::Equal => quote!(#p::EqualJitter),
        JitterSpec::Decorrelated => quote!(#p::Decorrelated),
        JitterSpec::AwsDecorrelated => quote!(#p::AwsDecorrelated),
        JitterSpec::Custom(e) => quote!(#e),
        JitterSpec::Default => quote!(#p::DEFAULT_JITTER),
    }
}

fn retries(p: &TokenStream, r: Option<i64>) -> TokenStream {
    let Some(r) = r else {
        return quote!(#p::DEFAULT_RETRIES);
    };
    match r {
        n if n < 0 => quote!(#p::Retries::Forever),
        n => {
            let n = Literal::u32_suffixed(u32::try_from(n).unwrap_or(u32::MAX));
            quote!(#p::Retries::Limited(#n))
        }
    }
}

/// `let name = <strategy>;`. A custom strategy is bound as a trait object: a value that is
/// not a `Backoff` is then reported once, at its expression, and nothing else depends on its
/// type. Async fns add `Sync` so that their future stays `Send`.
fn bind_backoff(p: &TokenStream, name: &Ident, s: &Strategy, is_async: bool) -> TokenStream {
    match s {
        Strategy::Custom(e) => {
            let ps = respan(p, e.span());
            let sync = is_async.then(|| {
                let core = core_at(p, e.span());
                quote_spanned!(e.span()=> + #core::marker::Sync)
            });
            let dyn_ = dyn_at(e.span());
            quote_spanned!(e.span()=> let #name: &(#dyn_ #ps::Backoff #sync) = &(#e);)
        }
        other => {
            let v = strategy(p, other);
            quote!(let #name = #v;)
        }
    }
}

/// `dyn`, before a path written at `span` that starts with `::`: at the user's tokens, a crate
/// of edition 2015 would read `dyn ::path` as a path whose first name is `dyn`.
fn dyn_at(span: Span) -> Token![dyn] {
    Token![dyn](Span::mixed_site().located_at(span))
}

/// `let name = <jitter>;`, custom jitter as a trait object (see [`bind_backoff`]).
fn bind_jitter(p: &TokenStream, name: &Ident, j: &JitterSpec, is_async: bool) -> TokenStream {
    match j {
        JitterSpec::Custom(e) => {
            let ps = respan(p, e.span());
            let sync = is_async.then(|| {
                let core = core_at(p, e.span());
                quote_spanned!(e.span()=> + #core::marker::Sync)
            });
            let dyn_ = dyn_at(e.span());
            quote_spanned!(e.span()=> let #name: &(#dyn_ #ps::Jitter #sync) = &(#e);)
        }
        other => {
            let v = jitter(p, other);
            quote!(let #name = #v;)
        }
    }
}

/// The names the generated code uses; mixed-site hygiene hides them from the user's body.
struct Names {
    policy: Ident,
    call: Ident,
    attempt: Ident,
    result: Ident,
    fired: Ident,
    inspect: Ident,
    backoff: Ident,
    jitter: Ident,
    e: Ident,
    /// A finite `timeout` applies: `Timeout` then matches whatever the error type.
    timed: bool,
}

impl Names {
    fn new(timed: bool) -> Self {
        let n = |s: &str| Ident::new(s, Span::mixed_site());
        Names {
            policy: n("__robust_policy"),
            call: n("__robust_call"),
            attempt: n("__robust_attempt"),
            result: n("__robust_result"),
            fired: n("__robust_fired"),
            inspect: n("__robust_inspect"),
            backoff: n("__robust_backoff"),
            jitter: n("__robust_jitter"),
            e: n("__robust_e"),
            timed,
        }
    }
}

fn kind(p: &TokenStream, err: &TokenStream, names: &Names, k: &Kind) -> TokenStream {
    // The inspector is named at the kind's token, so that a kind that can never match the
    // error type is reported there.
    let inspect = |span: Span| {
        let mut i = names.inspect.clone();
        i.set_span(Span::mixed_site().located_at(span));
        i
    };
    match k {
        Kind::Timeout(i) => {
            let ps = respan(p, i.span());
            let inspect = inspect(i.span());
            if names.timed {
                quote_spanned!(i.span()=> #ps::timeout_kind::<#err, _>(#inspect))
            } else {
                quote_spanned!(i.span()=> #ps::timeout_kind_viewed::<#err, _>(#inspect))
            }
        }
        Kind::Io { ident, kinds, .. } => {
            let n = kinds.len();
            let kinds = kinds
                .iter()
                .map(|k| quote_spanned!(k.span()=> #p::ErrorKind::#k));
            let ps = respan(p, ident.span());
            let inspect = inspect(ident.span());
            quote_spanned!(ident.span()=> #ps::io_kind::<#err, _, #n>(#inspect, [#(#kinds),*]))
        }
        Kind::Closure(c) => {
            let p = respan(p, c.span());
            quote_spanned!(c.span()=> #p::predicate::<#err, _>(#c))
        }
        Kind::Ok { sp, .. } => {
            // Value kinds are split out before: never an error kind.
            sp.error("internal: `Ok(..)` among error kinds")
                .to_compile_error()
        }
        Kind::Pattern(pat) => {
            let e = &names.e;
            let test = pattern_test(p, pat, e);
            quote_spanned!(pat.span()=>
                #p::predicate::<#err, _>(|#e: &#err| #test))
        }
    }
}

/// `core`, for a path written at `span`: `<p>::core`, re-exported by `__private`. (At the
/// user's tokens, `::core` would resolve in the user's edition, and in 2015 it names an item
/// of the crate's root, not the `core` crate.)
fn core_at(p: &TokenStream, span: Span) -> TokenStream {
    let ps = respan(p, span);
    quote_spanned!(span=> #ps::core)
}

/// Whether `value` (a reference) matches `pat`. Bare names (constants, unit structs and
/// variants) are matched against the value itself: a constant pattern does not see through
/// the reference. Other patterns are matched against the reference, so their bindings borrow.
fn pattern_test(p: &TokenStream, pat: &syn::Pat, value: &Ident) -> TokenStream {
    let alternatives = against_reference(pat);
    let core = core_at(p, pat.span());
    quote_spanned!(pat.span()=> #core::matches!(#value, #(#alternatives)|*))
}

/// `pat`'s alternatives, to match against a reference: bare names behind `&(..)` (a constant
/// pattern does not see through a reference), the others as written (their bindings borrow).
/// The rules' predicates and their order check write them alike, so that a mistake in one
/// (a constant of another type) is one error, not one per copy.
fn against_reference(pat: &syn::Pat) -> Vec<TokenStream> {
    let mut values = Vec::new();
    let mut others = Vec::new();
    crate::valid::alternatives(pat, &mut values, &mut others);
    values
        .iter()
        .map(|v| match v {
            // (`&a..=b` does not parse.)
            syn::Pat::Range(_) => quote_spanned!(v.span()=> &(#v)),
            _ => quote_spanned!(v.span()=> &#v),
        })
        .chain(others.iter().map(|o| quote!(#o)))
        .collect()
}

fn kinds(p: &TokenStream, err: &TokenStream, names: &Names, ks: &[&Kind]) -> TokenStream {
    match ks.split_first() {
        None => quote!(#p::AnyError),
        Some((first, [])) => kind(p, err, names, first),
        Some((first, rest)) => {
            let a = kind(p, err, names, first);
            let b = kinds(p, err, names, rest);
            quote!(#p::Or(#a, #b))
        }
    }
}

/// An `Ok(..)` kind, checked against the fn's `Ok` type `ok` where it is written.
fn value_kind(p: &TokenStream, ok: &TokenStream, names: &Names, k: &Kind) -> TokenStream {
    let Kind::Ok { inner, sp } = k else {
        return quote!(());
    };
    let ps = respan(p, sp.start);
    // The `Ok` type keeps the return type's span: a return type that is not a `Result` is
    // reported once, there, and a closure or pattern of the wrong type at the kind.
    let ok_at = ok;
    match &**inner {
        Kind::Closure(c) => {
            quote_spanned!(c.span()=> #ps::ok_kind::<#ok_at, _>(#c))
        }
        Kind::Pattern(pat) => {
            let v = &names.e;
            let test = pattern_test(p, pat, v);
            // (A pattern every value matches, `Ok(())` or `Ok(Response { .. })`, would make
            // every success a failure: `rule_order_check` reports it.)
            quote_spanned!(pat.span()=> #ps::ok_kind::<#ok_at, _>(|#v: &#ok_at| #test))
        }
        other => other
            .sp()
            .error("internal: unexpected kind inside `Ok(..)`")
            .to_compile_error(),
    }
}

/// The patterns among the `when`s' kinds and then the `on` list's (error kinds, or the
/// patterns inside `Ok(..)` kinds), in the order their rules are tried, matched against one
/// `&ty` in one `match` that is never run. rustc then reports, at the pattern: one that an
/// earlier rule's pattern covers (`when(Status(_), ..)` before `when(Status(429), ..)`: the
/// later rule never applies), as an unreachable pattern; and a name a pattern binds
/// (`Status(TOO_MANY)` where the constant is not in scope binds every status to a new name, and
/// the rule matches them all), as an unused variable. An alternative of an `on` kind written as
/// a `when`'s own kind (or one of its alternatives) is left out: listed in both, it says that
/// it is retried, with the `when`'s settings (`on = [Busy | Deadlock], when(Deadlock, ..)`).
/// With `values` (the patterns inside `Ok(..)` kinds), a pattern that matches every value
/// (`Ok(())`, `Ok(Some(_) | None)`), or patterns of several kinds that together do
/// (`on = [Ok(R::Busy), Ok(R::Fine)]` for an enum of the two), would make every success a
/// failure: rustc reports the arm after them, `Seen::Value(_)`, as unreachable, at the last
/// pattern.
/// Empty without patterns.
fn rule_order_check<'k>(
    p: &TokenStream,
    ty: &TokenStream,
    whens: impl Iterator<Item = &'k Kind>,
    on: impl Iterator<Item = &'k Kind>,
    values: bool,
) -> TokenStream {
    fn pattern(k: &Kind) -> Option<&syn::Pat> {
        match k {
            Kind::Pattern(p) => Some(p),
            Kind::Ok { inner, .. } => match &**inner {
                Kind::Pattern(p) => Some(p),
                _ => None,
            },
            _ => None,
        }
    }
    // A pattern's top-level alternatives (bare names first: their order in an arm does not
    // change what the arm matches).
    fn top_alternatives(pat: &syn::Pat) -> Vec<&syn::Pat> {
        let (mut values, mut others) = (Vec::new(), Vec::new());
        crate::valid::alternatives(pat, &mut values, &mut others);
        values.extend(others);
        values
    }
    // Patterns compared as written, but without `name @` bindings and with each path reduced
    // to its last segment: `when(self::Busy)` and `when(e @ Unit::Busy)` both name `Busy`.
    let text = |p: &syn::Pat| {
        let mut p = without_at_bindings(p);
        syn::visit_mut::VisitMut::visit_pat_mut(&mut LastSegments, &mut p);
        quote!(#p).to_string()
    };
    // Each arm: its alternatives, and whether they are `when`s' own kinds listed in `on` too
    // (such an arm may be unreachable, but is still checked for the names it binds).
    let (whens, on): (Vec<&Kind>, Vec<&Kind>) = (whens.collect(), on.collect());
    // The `Ok` of the last `Ok(..)` kind with a pattern, in the order the rules are tried.
    let last_ok = whens
        .iter()
        .chain(&on)
        .filter_map(|k| match k {
            Kind::Ok { inner, sp } if matches!(**inner, Kind::Pattern(_)) => Some(sp.start),
            _ => None,
        })
        .next_back();
    let mut arms: Vec<(Vec<&syn::Pat>, bool)> = whens
        .iter()
        .filter_map(|k| pattern(k))
        .map(|p| (top_alternatives(p), false))
        .collect();
    let owned: std::collections::HashSet<String> = arms
        .iter()
        .flat_map(|(alts, _)| alts.iter().map(|a| text(a)))
        .collect();
    for p in on.iter().filter_map(|k| pattern(k)) {
        let (own, rest): (Vec<&syn::Pat>, Vec<&syn::Pat>) = top_alternatives(p)
            .into_iter()
            .partition(|a| owned.contains(&text(a)));
        for (alts, own) in [(rest, false), (own, true)] {
            if !alts.is_empty() {
                arms.push((alts, own));
            }
        }
    }
    let Some(first) = arms.first().and_then(|(a, _)| a.first()) else {
        return quote!();
    };
    let last = arms.last().and_then(|(a, _)| a.last()).unwrap_or(first);
    // (Named at the first pattern: rustc does not report these lints on code whose spans
    // mix the macro's names with the user's tokens.)
    let seen = Ident::new("__robust_rule_order", first.span());
    // Each alternative as the value of a `Seen`, whose path is spanned at it.
    let arm = |alts: &[&syn::Pat]| {
        let alternatives = alts.iter().flat_map(|a| {
            against_reference(&without_at_bindings(a))
                .into_iter()
                .map(move |alt| {
                    // (The parentheses at the pattern's last token: the arm's span is then
                    // the pattern's, from its first token to its last.)
                    let ps = respan(p, a.span());
                    let end = alt
                        .clone()
                        .into_iter()
                        .last()
                        .map_or(a.span(), |t| match t {
                            proc_macro2::TokenTree::Group(g) => g.span_close(),
                            t => t.span(),
                        });
                    let inner = spanned_group(alt, end);
                    quote_spanned!(a.span()=> #ps::Seen::Value #inner)
                })
        });
        quote!(#(#alternatives)|* => {})
    };
    // `Seen` is non-exhaustive: the last arm, `_`, is never unreachable, so no lint is
    // allowed (an `allow` under a `forbid` is an error). An arm of `when`s' own kinds listed in
    // `on` too may be unreachable: it has a `match` of its own, still checked for the names it
    // binds.
    let (own, rest): (Vec<_>, Vec<_>) = arms.iter().partition(|(_, own)| *own);
    let ps = respan(p, first.span());
    let matches = |arms: &[TokenStream], end: TokenStream| {
        quote_spanned!(first.span()=>
            match #ps::Seen::Value(#seen) {
                #(#arms)*
                #end
                _ => {}
            }
        )
    };
    // (For values, at the `Ok` of the last kind: "no value can reach" what is left after the
    // patterns, which rustc's note shows, since they match every value.)
    let end = if values {
        let at = last_ok.unwrap_or_else(|| last.span());
        let ps = respan(p, at);
        quote_spanned!(at=> #[deny(unreachable_patterns)] #ps::Seen::Value(_) => {})
    } else {
        quote!()
    };
    let main = matches(
        &rest.iter().map(|(alts, _)| arm(alts)).collect::<Vec<_>>(),
        end,
    );
    let own = own.iter().map(|(alts, _)| matches(&[arm(alts)], quote!()));
    quote_spanned!(first.span()=>
        let _ = |#seen: &#ty| {
            #[deny(unreachable_patterns, unused_variables)]
            {
                #main
                #(#own)*
            }
        };
    )
}

/// The fn's and its parameters' `#[expect(..)]` lint attributes become `#[allow(..)]`: they
/// are copied onto the statements that rebind each parameter, and the lints they expect may
/// fire elsewhere, or not at all, in the code the attribute writes (a parameter read by its
/// clone is never unused; clippy's `unused_async` does not see the body's `.await`s), where
/// an expectation left unfulfilled would be a warning of the attribute's making. What they
/// allow stays allowed.
fn expectations_as_allows(f: &mut Func) {
    let params = f.sig.inputs.iter_mut().map(|arg| match arg {
        FnArg::Receiver(r) => &mut r.attrs,
        FnArg::Typed(pt) => &mut pt.attrs,
    });
    // `expect(..)`, also under `cfg_attr(.., expect(..))`.
    fn rewrite(meta: &mut syn::Meta) {
        let syn::Meta::List(list) = meta else { return };
        if list.path.is_ident("expect") {
            let span = list.path.segments[0].ident.span();
            list.path = Ident::new("allow", span).into();
        } else if list.path.is_ident("cfg_attr") {
            let parser = syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated;
            if let Ok(mut items) = syn::parse::Parser::parse2(parser, list.tokens.clone()) {
                // (The first is the condition.)
                items.iter_mut().skip(1).for_each(rewrite);
                list.tokens = quote!(#items);
            }
        }
    }
    for attrs in std::iter::once(&mut f.attrs).chain(params) {
        for attr in attrs.iter_mut() {
            rewrite(&mut attr.meta);
        }
    }
}

/// A parameter's pattern for the view the attribute's expressions read: a name none of them
/// reads is `_` (or its subpattern), so it is no unused variable; a unit struct's name, which
/// matches its only value, is `_` alike. Also the `mut` names kept.
fn view_pattern(
    pat: &syn::Pat,
    read: &std::collections::HashSet<String>,
) -> (syn::Pat, Vec<Ident>) {
    struct Unread<'a>(&'a std::collections::HashSet<String>, Vec<Ident>);
    impl syn::visit_mut::VisitMut for Unread<'_> {
        fn visit_pat_mut(&mut self, p: &mut syn::Pat) {
            if let syn::Pat::Ident(pi) = p {
                let name = &pi.ident;
                let is_read = self.0.contains(&name.to_string())
                    || self
                        .0
                        .contains(&syn::ext::IdentExt::unraw(name).to_string());
                if !is_read {
                    *p = match pi.subpat.take() {
                        Some((_, sub)) => *sub,
                        None => syn::Pat::Wild(syn::PatWild {
                            attrs: Vec::new(),
                            underscore_token: syn::Token![_](name.span()),
                        }),
                    };
                    return self.visit_pat_mut(p);
                }
                if pi.by_ref.is_none() && pi.mutability.is_some() {
                    self.1.push(name.clone());
                }
            }
            syn::visit_mut::visit_pat_mut(self, p);
        }
        // `Point { x }` becomes `Point { x: _ }` when `x` is not read: written in full then
        // (a shorthand kept as written raises no `non_shorthand_field_patterns`).
        fn visit_field_pat_mut(&mut self, f: &mut syn::FieldPat) {
            syn::visit_mut::visit_field_pat_mut(self, f);
            let kept = matches!((&*f.pat, &f.member),
                (syn::Pat::Ident(pi), syn::Member::Named(name)) if pi.ident == *name);
            if f.colon_token.is_none() && !kept {
                f.colon_token = Some(syn::Token![:](f.pat.span()));
            }
        }
    }
    let mut p = pat.clone();
    let mut unread = Unread(read, Vec::new());
    syn::visit_mut::VisitMut::visit_pat_mut(&mut unread, &mut p);
    (p, unread.1)
}

/// Reduces each path it visits to its last segment (`self::Unit::Busy` to `Busy`).
struct LastSegments;

impl syn::visit_mut::VisitMut for LastSegments {
    fn visit_path_mut(&mut self, path: &mut syn::Path) {
        if let Some(last) = path.segments.pop() {
            path.segments.clear();
            path.segments.push(last.into_value());
        }
        path.leading_colon = None;
        syn::visit_mut::visit_path_mut(self, path);
    }
}

/// `pat` without its `name @` bindings (`e @ Busy` is `Busy`): such a name widens nothing, so
/// the order check's unused-variable lint must not see it.
fn without_at_bindings(pat: &syn::Pat) -> syn::Pat {
    struct Strip;
    impl syn::visit_mut::VisitMut for Strip {
        fn visit_pat_mut(&mut self, p: &mut syn::Pat) {
            if let syn::Pat::Ident(pi) = p
                && let Some((_, sub)) = pi.subpat.take()
            {
                *p = *sub;
                return self.visit_pat_mut(p);
            }
            syn::visit_mut::visit_pat_mut(self, p);
        }
    }
    let mut p = pat.clone();
    syn::visit_mut::VisitMut::visit_pat_mut(&mut Strip, &mut p);
    p
}

/// The `Ok(..)` kinds of the `on` list, combined; `()` for none.
fn value_kinds(p: &TokenStream, ok: &TokenStream, names: &Names, ks: &[&Kind]) -> TokenStream {
    match ks.split_first() {
        None => quote!(()),
        Some((first, [])) => value_kind(p, ok, names, first),
        Some((first, rest)) => {
            let a = value_kind(p, ok, names, first);
            let b = value_kinds(p, ok, names, rest);
            quote!(#p::Or(#a, #b))
        }
    }
}

/// The token of the first `Timeout` or `Io` kind (`on`, then the `when`s), if any: the kinds
/// that read the error's inspector.
fn inspecting_kind_span(c: &Config) -> Option<Span> {
    c.on.iter()
        .flat_map(|on| on.value.iter())
        .chain(c.whens.iter().map(|w| &w.kind))
        .find_map(|k| match k {
            Kind::Timeout(i) => Some(i.span()),
            Kind::Io { ident, .. } => Some(ident.span()),
            _ => None,
        })
}

/// The type of a built-in strategy; `None` for `custom(...)`.
fn strategy_type(p: &TokenStream, s: &Strategy) -> Option<TokenStream> {
    Some(match s {
        Strategy::Exponential { .. } => quote!(#p::Exponential),
        Strategy::Linear { .. } => quote!(#p::Linear),
        Strategy::Fibonacci { .. } => quote!(#p::Fibonacci),
        Strategy::Polynomial { p: exps, .. } => {
            let n = exps.as_ref().map_or(1, Vec::len);
            quote!(#p::Polynomial<#n>)
        }
        Strategy::Random { .. } => quote!(#p::Random),
        Strategy::Constant { .. } => quote!(#p::Constant),
        Strategy::None => quote!(#p::NoBackoff),
        Strategy::Default => quote!(#p::DefaultBackoff),
        Strategy::Custom(_) => return None,
    })
}

/// The type of a built-in jitter; `None` for `custom(...)`.
fn jitter_type(p: &TokenStream, j: &JitterSpec) -> Option<TokenStream> {
    Some(match j {
        JitterSpec::None => quote!(#p::NoJitter),
        JitterSpec::Full => quote!(#p::FullJitter),
        JitterSpec::Equal => quote!(#p::EqualJitter),
        JitterSpec::Decorrelated => quote!(#p::Decorrelated),
        JitterSpec::AwsDecorrelated => quote!(#p::AwsDecorrelated),
        JitterSpec::Default => quote!(#p::DefaultJitter),
        JitterSpec::Custom(_) => return None,
    })
}

/// One rule's settings: `o` overrides `top`. With a built-in strategy and jitter they are a
/// `const` item (pushed to `items`) and the policy holds a `&'static` reference to it, which
/// keeps the async future small; a custom strategy or jitter is referred to through the local
/// that binds it (`custom.0`, `custom.1`).
fn rule_settings(
    p: &TokenStream,
    top: &Overrides,
    o: Option<&Overrides>,
    index: usize,
    custom: (&Ident, &Ident),
    items: &mut Vec<TokenStream>,
) -> TokenStream {
    let pick = |f: fn(&Overrides) -> bool| o.filter(|o| f(o)).unwrap_or(top);
    let r = pick(|o| o.retries.is_some());
    let retries = retries(p, r.retries.as_ref().map(|s| s.value));
    let m = pick(|o| o.max_delay.is_some());
    let max_delay = limit(p, m.max_delay.as_ref().map(|s| s.value));
    let s = pick(|o| o.scale.is_some());
    let scale = s.scale.as_ref().map_or(quote!(#p::DEFAULT_SCALE), |s| {
        let f = float(s.value);
        quote!(#f)
    });
    let default_backoff = Strategy::Default;
    let backoff = pick(|o| o.backoff.is_some())
        .backoff
        .as_ref()
        .map_or(&default_backoff, |s| &s.value);
    let jitter_spec = pick(|o| o.jitter.is_some())
        .jitter
        .as_ref()
        .map_or(&JitterSpec::Default, |s| &s.value);
    match (strategy_type(p, backoff), jitter_type(p, jitter_spec)) {
        (Some(bt), Some(jt)) => {
            let name = format_ident!("__ROBUST_SETTINGS_{}", index, span = Span::mixed_site());
            let b = strategy(p, backoff);
            let j = jitter(p, jitter_spec);
            items.push(quote! {
                const #name: #p::RuleSettings<#bt, #jt> =
                    #p::settings(#retries, #max_delay, #b, #j, #scale);
            });
            quote!(&#name)
        }
        (bt, jt) => {
            let (cb, cj) = custom;
            let b = if bt.is_some() {
                strategy(p, backoff)
            } else {
                quote!(#cb)
            };
            let j = if jt.is_some() {
                jitter(p, jitter_spec)
            } else {
                quote!(#cj)
            };
            quote!(#p::settings(#retries, #max_delay, #b, #j, #scale))
        }
    }
}

/// What [`rebind_args`] writes: the statements each hedge's closure starts with (`outer`), those
/// each attempt starts with (`prelude`), and the views of the names a parameter's pattern binds
/// (`views`: the names and a `let` that binds them, for the attribute's expressions, which run
/// outside the attempts).
struct Rebound {
    /// With `hedge`: what the attempts' maker owns, bound before it (each owned parameter,
    /// moved, or cloned when the attribute's expressions read it too).
    held: Vec<TokenStream>,
    outer: Vec<TokenStream>,
    /// With `split` (an async fn that is not hedged): the clones of owned parameters, made
    /// before each attempt's `async` block (which moves them in), so that the block borrows
    /// no parameter that it owns a copy of.
    pre: Vec<TokenStream>,
    prelude: Vec<TokenStream>,
    views: Vec<(Vec<String>, TokenStream)>,
    /// A statement that borrows each name `prelude` binds for a parameter written as a name
    /// (under that parameter's attributes): in an `async move` block, it makes the block
    /// capture the whole value (a block that reads one field captures only that field, and the
    /// rest would drop before the attempt runs).
    whole: Vec<TokenStream>,
    /// Whether `prelude` binds a parameter's pattern (`(host, port)`, `State(app)`).
    patterns: bool,
    /// Whether the receiver is `&mut self`.
    mut_receiver: bool,
}

/// How an attempt reborrows the parameter `name` of type `ty`, which holds a unique borrow
/// (`how`): the type its binding is given, if any, and the value.
///
/// A borrow of a trait object (`&mut dyn Write`, `Option<&mut dyn Write>`, `Pin<&mut dyn
/// Future<Output = ()>>`) is given the parameter's type with the borrow's lifetime and the
/// object's left to inference (`&'_ mut (dyn Write + '_)`): a plain reborrow keeps the object's
/// lifetime, that of the whole call, and `&mut` is invariant in it, so a body that passes the
/// reborrow on to a fn taking `Option<&mut dyn Write>` would need the object to outlive the
/// reborrow, which no borrow made for one attempt can. The annotation lets the object's lifetime
/// shorten to the reborrow's, as the parameter's own type does without the attribute. (Only for
/// a trait object with no `impl Trait` in it: that cannot be named in a `let`.)
fn reborrowed(
    p: &TokenStream,
    how: Reborrow,
    name: &Ident,
    ty: &Type,
) -> (Option<TokenStream>, TokenStream) {
    let span = ty.span();
    // (An `impl Trait` inside the object, `dyn Iterator<Item = impl Debug>`, cannot be named
    // in a `let` either: such an object keeps the plain reborrow.)
    let object = match crate::valid::reborrow_pointee(ty).map(|(_, t)| peel(t)) {
        Some(Type::TraitObject(o))
            if crate::valid::find_impl_trait(quote::ToTokens::to_token_stream(o)).is_none() =>
        {
            let mut o = o.clone();
            o.bounds = o
                .bounds
                .into_iter()
                .filter(|b| !matches!(b, syn::TypeParamBound::Lifetime(_)))
                .collect();
            let anon = syn::Lifetime::new("'_", span);
            o.bounds.push(syn::TypeParamBound::Lifetime(anon));
            Some(quote_spanned!(span=> &'_ mut (#o)))
        }
        _ => None,
    };
    match (how, object) {
        (Reborrow::Ref, object) => (object.map(|o| quote!(: #o)), quote!(&mut *#name)),
        (Reborrow::Option, None) => (
            None,
            quote!(::core::option::Option::as_deref_mut(&mut #name)),
        ),
        (Reborrow::Option, Some(o)) => {
            let r = Ident::new("__robust_ref", Span::mixed_site());
            (
                Some({
                    let core = core_at(p, span);
                    quote_spanned!(span=> : #core::option::Option<#o>)
                }),
                quote! {
                    match &mut #name {
                        ::core::option::Option::Some(#r) => ::core::option::Option::Some(&mut **#r),
                        ::core::option::Option::None => ::core::option::Option::None,
                    }
                },
            )
        }
        (Reborrow::Pin, object) => (
            object.map(|o| {
                let core = core_at(p, span);
                quote_spanned!(span=> : #core::pin::Pin<#o>)
            }),
            quote!(::core::pin::Pin::as_mut(&mut #name)),
        ),
    }
}

/// Rewrites the parameters: owned ones are cloned for each attempt, `&mut` ones reborrowed; a
/// pattern (`(host, port)`, `State(app)`) is replaced by a name and destructured in each
/// attempt. A parameter neither the body nor an expression of the attribute mentions is left
/// as it is, and so is a unique borrow the body does not mention; an async attempt borrows `&mut self` uniquely (see below). Every statement carries the parameter's attributes, so a parameter under
/// `#[cfg(...)]` is rebound exactly when it exists.
///
/// With `hedge`, attempts are `async move` blocks made by a `move` closure, several alive at
/// once: the closure owns each owned parameter (`held`: moved in, or a clone when one of the
/// attribute's expressions, `attr_names`, may read it too) and clones it for each block
/// (`outer`), which moves the clone in. Neither holds a reference to a parameter, so the fn's
/// future is `Send` for parameters that are `Send` and not `Sync`.
///
/// With `split` (an async fn, not hedged), an owned parameter is cloned before the attempt's
/// block (`pre`) and the block moves the clone in: a block that cloned it itself would hold a
/// reference to it for its whole life, and the fn's future would not be `Send` for a `Send`
/// parameter that is not `Sync` (a `RefCell`, a `Cell`), as it is without the attribute.
fn rebind_args(
    p: &TokenStream,
    f: &mut Func,
    hedge: bool,
    split: bool,
    attr_names: &std::collections::HashSet<String>,
    guard_roots: &[String],
) -> Rebound {
    let mut held = Vec::new();
    let mut outer = Vec::new();
    let mut pre = Vec::new();
    let mut prelude = Vec::new();
    let mut views = Vec::new();
    let mut whole = Vec::new();
    let mut patterns = false;
    let mut mut_receiver = false;
    let body = f.body.stream();
    for (i, arg) in f.sig.inputs.iter_mut().enumerate() {
        // The receiver is checked in `valid`: only `&self` and `&mut self` get here. An async
        // attempt borrows `&mut self` uniquely: a block that only reads it would capture a
        // shared reference to it, and its future would be `Send` only for a `Sync` type (a
        // `Cell` field), where the fn's own is `Send` for a `Send` one. (Not when an expression
        // of the attribute names `self`: a guard taken from it, `breaker = self.breaker`, is
        // borrowed for the whole call.)
        let pt = match arg {
            FnArg::Receiver(r) => {
                mut_receiver = matches!(peel(&r.ty), Type::Reference(r) if r.mutability.is_some());
                if split && mut_receiver && !attr_names.contains("self") {
                    let this = Ident::new("self", r.self_token.span);
                    prelude.push(quote!(let _ = &mut *#this;));
                }
                continue;
            }
            FnArg::Typed(pt) => pt,
        };
        let attrs = &pt.attrs;
        let is_ref = matches!(peel(&pt.ty), Type::Reference(_));
        let reborrow = crate::valid::reborrow_of(&pt.ty);
        let ty_span = pt.ty.span();
        let cloned = |name: &Ident| {
            let p = respan(p, ty_span);
            quote_spanned!(ty_span=> #p::clone_arg(&#name))
        };
        // The same for a name of the attribute's own (`__robust_arg0` for a pattern,
        // `__robust_hold0` with `hedge`), whose span is the attribute's: the reference goes
        // through `identity`, a call spanned at the parameter's type, so that a missing
        // `Clone` is reported there (rustc points at the argument of the call whose bound
        // fails), not at the whole attribute. (rustc then suggests taking the parameter by
        // reference in place of the crate's label, as it does for any value passed on there.)
        let cloned_own = |name: &Ident| {
            let p = respan(p, ty_span);
            let core = core_at(&p, ty_span);
            quote_spanned!(ty_span=> #p::clone_arg(#core::convert::identity(&#name)))
        };
        // An owned parameter `source`, bound by `binding` in each attempt (`movable`: no
        // expression of the attribute reads it).
        let mut owned = |source: &Ident, binding: TokenStream, movable: bool, own_name: bool| {
            let cloned = |name: &Ident| {
                if own_name {
                    cloned_own(name)
                } else {
                    cloned(name)
                }
            };
            let own = format_ident!("__robust_own{}", i, span = Span::mixed_site());
            let ps = respan(p, ty_span);
            // A parameter an expression of the attribute reads (a fallback that moves it) may
            // be one the body does not: its clone for the attempt is then unused, and no
            // mistake (it is borrowed once, rather than a lint allowed, which a `forbid` would
            // refuse).
            let touch = (!movable).then(|| quote!(#(#attrs)* let _ = &#source;));
            if hedge {
                let hold = format_ident!("__robust_hold{}", i, span = Span::mixed_site());
                let value = if movable {
                    quote!(#source)
                } else {
                    cloned(source)
                };
                held.push(quote!(#(#attrs)* let #hold = #value;));
                let clone = cloned_own(&hold);
                outer.push(quote!(#(#attrs)* let #own = #ps::Owned(#clone);));
                prelude.push(quote!(#(#attrs)* let #binding = #own.into_inner(); #touch));
            } else if split {
                let clone = cloned(source);
                pre.push(quote!(#(#attrs)* let #own = #ps::Owned(#clone);));
                prelude.push(quote!(#(#attrs)* let #binding = #own.into_inner(); #touch));
            } else {
                let clone = cloned(source);
                prelude.push(quote!(#(#attrs)* let #binding = #clone; #touch));
            }
        };
        // A wildcard is never read: nothing to clone or reborrow. Nor is a name the body does
        // not mention (`_unused`), unless an expression of the attribute reads an owned one
        // (from a clone, as the attempts may move it): it stays the parameter's, dropped when
        // the fn returns, as without the attribute, and needs no `Clone`. (Its tokens are read
        // whole, macros' included.)
        let alone = crate::valid::attempts_leave_alone(&pt.pat, &body);
        match &mut *pt.pat {
            Pat::Wild(_) => {}
            Pat::Ident(pi)
                if alone
                    && (reborrow.is_some()
                        || !attr_names
                            .contains(&syn::ext::IdentExt::unraw(&pi.ident).to_string())
                            && !attr_names.contains(&pi.ident.to_string())) => {}
            // A unique borrow a guard is taken from (`limit = st.limit`: `guard_roots`) is
            // not reborrowed whole by the attempts: the call holds a borrow of a part of it for
            // its whole length, and a reborrow of all of it would conflict (E0502). The
            // attempts use the parameter itself, as a `&mut self` method's use `self` (an
            // async one's block does not move it), and capture only the places the body uses.
            // (Not one written `mut`, which the body may point elsewhere: each attempt starts
            // from the borrow passed in.)
            Pat::Ident(pi)
                if reborrow == Some(Reborrow::Ref)
                    && pi.by_ref.is_none()
                    && pi.mutability.is_none()
                    && pi.subpat.is_none()
                    && guard_roots.contains(&syn::ext::IdentExt::unraw(&pi.ident).to_string()) =>
            {
                mut_receiver = true;
            }
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                let ident = pi.ident.clone();
                // Each attempt binds the name again, but a shared borrow written without `mut`.
                if reborrow.is_some() || !is_ref || pi.mutability.is_some() {
                    whole.push(quote!(#(#attrs)* let _ = &#ident;));
                }
                if let Some(how) = reborrow {
                    // A unique borrow: each attempt reborrows it through the parameter, which
                    // an `Option` or a `Pin` needs `mut` for (the `mut` written on it goes to
                    // the attempt's binding).
                    let m = if how == Reborrow::Ref {
                        pi.mutability.take()
                    } else {
                        pi.mutability.replace(Token![mut](ident.span()))
                    };
                    let (ty, value) = reborrowed(p, how, &ident, &pt.ty);
                    prelude.push(quote!(#(#attrs)* let #m #ident #ty = #value;));
                } else if is_ref {
                    // `mut r: &T`: each attempt starts from the reference passed in, whatever
                    // an earlier attempt reassigned.
                    if let Some(m) = pi.mutability.take() {
                        prelude.push(quote!(#(#attrs)* let #m #ident = #ident;));
                    }
                } else {
                    let m = pi.mutability.take();
                    // (`names_in` keeps a raw identifier's `r#`.)
                    let read = attr_names.contains(&ident.to_string())
                        || attr_names.contains(&syn::ext::IdentExt::unraw(&ident).to_string());
                    owned(&ident, quote!(#m #ident), !read, false);
                }
            }
            pat => {
                patterns = true;
                let name = format_ident!("__robust_arg{}", i, span = Span::mixed_site());
                // (An `Option` or a `Pin` is reborrowed through `&mut`.)
                let needs_mut = matches!(reborrow, Some(Reborrow::Option | Reborrow::Pin));
                let original = std::mem::replace(
                    pat,
                    Pat::Ident(syn::PatIdent {
                        attrs: Vec::new(),
                        by_ref: None,
                        mutability: needs_mut.then(|| Token![mut](Span::mixed_site())),
                        ident: name.clone(),
                        subpat: None,
                    }),
                );
                // The names the pattern binds, for the attribute's expressions (`breaker =
                // BREAKERS.get(host)`, `on_retry = |r, i| log(&app, r)`), which run outside
                // the attempts: bound as each attempt binds them, from a clone of the argument
                // (or the reference passed in), so they have the types the body sees. (Not for
                // a unique borrow: each attempt reborrows it.)
                if reborrow.is_none() {
                    let value = if is_ref {
                        quote!(#name)
                    } else {
                        cloned_own(&name)
                    };
                    let mut names = Vec::new();
                    crate::valid::bound_names(&original, &mut names);
                    // The view binds only the names an expression reads (the others are
                    // `_`), and each `mut` one is borrowed `&mut` once: no lint is allowed (an
                    // `allow` under a `forbid` is an error).
                    let (view_pat, muts) = view_pattern(&original, attr_names);
                    let touched =
                        (!muts.is_empty()).then(|| quote!(#(#attrs)* let _ = (#(&mut #muts,)*);));
                    let view = quote! {
                        #(#attrs)*
                        let #view_pat = #value;
                        #touched
                    };
                    views.push((names, view));
                }
                if let Some(how) = reborrow {
                    let (ty, value) = reborrowed(p, how, &name, &pt.ty);
                    prelude.push(quote!(#(#attrs)* let #original #ty = #value;));
                } else if is_ref {
                    prelude.push(quote!(#(#attrs)* let #original = #name;));
                } else {
                    // (The attribute's expressions read the pattern's names from their views,
                    // bound above from clones: the parameter itself may be moved.)
                    owned(&name, quote!(#original), true, true);
                }
            }
        }
    }
    Rebound {
        held,
        outer,
        pre,
        prelude,
        views,
        whole,
        patterns,
        mut_receiver,
    }
}

/// Every name written in the attribute, but for the keys before a `=` (`timeout = ..`,
/// `max = ..`), and every word inside its string literals (a format string's `{host}`): an
/// over-estimate of the names its expressions read.
pub fn names_in(tokens: TokenStream) -> std::collections::HashSet<String> {
    let mut out = std::collections::HashSet::new();
    let mut stack = vec![tokens.into_iter().peekable()];
    while let Some(iter) = stack.last_mut() {
        match iter.next() {
            Some(TokenTree::Group(g)) => stack.push(g.stream().into_iter().peekable()),
            Some(TokenTree::Ident(i)) => {
                // A key: followed by a `=` alone (not `==` nor `=>`).
                let key = matches!(
                    iter.peek(),
                    Some(TokenTree::Punct(p))
                        if p.as_char() == '=' && p.spacing() == proc_macro2::Spacing::Alone
                );
                if !key {
                    out.insert(i.to_string());
                }
            }
            Some(TokenTree::Literal(l)) => {
                let text = l.to_string();
                out.extend(
                    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .filter(|w| !w.is_empty())
                        .map(str::to_owned),
                );
            }
            Some(TokenTree::Punct(_)) => {}
            None => {
                stack.pop();
            }
        }
    }
    out
}

/// The names the guards' expressions (`budget`, `breaker`, `throttle`, `limit`) take their
/// guard from, when it is a place the call then borrows for its whole length: `conn` for
/// `conn.limit`, `&conn.limits[i]`, `*conn.limit` or `conn.limit()` (a method's result may
/// borrow from it: the attribute sees no types). Not for `LIMITS[conn.idx]`, which only reads
/// `conn`.
fn guard_roots(config: &Config) -> Vec<String> {
    fn root(e: &syn::Expr) -> Option<String> {
        match e {
            syn::Expr::Path(p) => p
                .path
                .get_ident()
                .map(|i| syn::ext::IdentExt::unraw(i).to_string()),
            syn::Expr::Field(f) => root(&f.base),
            syn::Expr::Index(i) => root(&i.expr),
            syn::Expr::Reference(r) => root(&r.expr),
            syn::Expr::Paren(p) => root(&p.expr),
            syn::Expr::Group(g) => root(&g.expr),
            syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => root(&u.expr),
            syn::Expr::MethodCall(m) => root(&m.receiver),
            _ => None,
        }
    }
    [
        &config.budget,
        &config.breaker,
        &config.throttle,
        &config.limit,
    ]
    .into_iter()
    .flatten()
    .filter_map(|e| root(e))
    .collect()
}

/// How a guard's expression (`budget`, `breaker`, `throttle`, `limit`) is checked to give one
/// guard shared by every call, not a new one made by each call (which would never run dry,
/// open, throttle or limit).
enum Sharing<'e> {
    /// A path that is no parameter (or the base of a field or element taken from it): it must
    /// name a `static` (a `const` makes a new guard each time it is named).
    Static(&'e syn::ExprPath),
    /// A parameter, a field or an element of one (`self.limit`), or a macro's expansion: the
    /// caller's guard.
    Place,
    /// A value made by the call (a call, a method call, a block): dereferenced this many more
    /// times (through the `&`s written before it, or an `Arc::new(..)` / `Rc::new(..)` made
    /// here), it must not be a guard itself; a reference or an `Arc` to one made elsewhere
    /// (a keyed map's `BREAKERS.get(host)`) is fine. When it is taken from a path that is no
    /// parameter (the map of `BREAKERS.get(host)`), that path must name a `static` too: a
    /// `const` map makes a new map, and so new guards, each time it is named.
    Value(&'e syn::Expr, usize, Option<&'e syn::ExprPath>),
}

fn sharing<'e>(e: &'e syn::Expr, params: &[String]) -> Sharing<'e> {
    match e {
        syn::Expr::Path(path) => match path.path.get_ident() {
            Some(name) if name == "self" || params.contains(&name.to_string()) => Sharing::Place,
            _ => Sharing::Static(path),
        },
        syn::Expr::Reference(r) => match sharing(&r.expr, params) {
            Sharing::Value(value, refs, root) => Sharing::Value(value, refs + 1, root),
            other => other,
        },
        syn::Expr::Paren(p) => sharing(&p.expr, params),
        syn::Expr::Group(g) => sharing(&g.expr, params),
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => {
            match sharing(&u.expr, params) {
                // `*LAZY` dereferences a `static`; `*value` is what the value points to (a
                // keyed map's guard), unless that was made here too (`*Arc::new(..)`).
                Sharing::Value(_, 0, None) => Sharing::Place,
                Sharing::Value(_, 0, Some(root)) => Sharing::Static(root),
                Sharing::Value(value, refs, root) => Sharing::Value(value, refs - 1, root),
                other => other,
            }
        }
        // A field or an element is as shared as what it is taken from; one of a value the call
        // made is checked as a value (the attribute sees no types: `make_guards().breaker`
        // builds a guard for each call, while `registry().breaker` may reach a shared one;
        // both are refused, and a fn returning the guard's reference is the way to name it).
        syn::Expr::Field(syn::ExprField { base: of, .. })
        | syn::Expr::Index(syn::ExprIndex { expr: of, .. }) => match sharing(of, params) {
            Sharing::Value(_, _, root) => Sharing::Value(e, 0, root),
            other => other,
        },
        syn::Expr::Macro(_) => Sharing::Place,
        // A copy of a pointer points where it does (`Arc::new(..).clone()` to a guard made
        // here); a copy of a guard (`GUARD.clone()`) is a value made here, as any method's.
        syn::Expr::MethodCall(call) if call.method == "clone" && call.args.is_empty() => {
            match sharing(&call.receiver, params) {
                Sharing::Value(_, refs, root) => Sharing::Value(e, refs, root),
                Sharing::Static(path) => Sharing::Value(e, 0, Some(path)),
                Sharing::Place => Sharing::Value(e, 0, None),
            }
        }
        // `Arc::clone(&pointer)` is `pointer.clone()`.
        syn::Expr::Call(call) if clone_by_path(call) => {
            match call.args.first().map(|arg| sharing(arg, params)) {
                Some(Sharing::Value(_, refs, root)) if refs > 0 => {
                    Sharing::Value(e, refs - 1, root)
                }
                Some(Sharing::Value(_, _, root)) => Sharing::Value(e, 0, root),
                Some(Sharing::Static(path)) => Sharing::Value(e, 0, Some(path)),
                _ => Sharing::Value(e, 0, None),
            }
        }
        // A method's receiver is checked as the guard's root: `BREAKERS.get(host)` needs a
        // `static` map.
        syn::Expr::MethodCall(call) => {
            let root = match sharing(&call.receiver, params) {
                Sharing::Static(path) => Some(path),
                Sharing::Value(_, _, root) => root,
                Sharing::Place => None,
            };
            Sharing::Value(e, 0, root)
        }
        // A pointer made here points to a guard made here.
        syn::Expr::Call(call) if pointer_made_here(&call.func) => Sharing::Value(e, 1, None),
        // A method called by its path (`Keyed::get(&BREAKERS, host)`) is checked as the method
        // call it is: its first argument, written as a reference, as the root.
        syn::Expr::Call(call) => {
            let root = receiver_by_path(call).and_then(|first| match sharing(first, params) {
                Sharing::Static(path) => Some(path),
                Sharing::Value(_, _, root) => root,
                Sharing::Place => None,
            });
            Sharing::Value(e, 0, root)
        }
        _ => Sharing::Value(e, 0, None),
    }
}

/// Every name a pattern inside `e` binds (`let`, `match` arms, closures' parameters, ...).
fn bound_names(e: &syn::Expr) -> Vec<String> {
    struct Bound(Vec<String>);
    impl<'ast> syn::visit::Visit<'ast> for Bound {
        fn visit_pat_ident(&mut self, p: &'ast syn::PatIdent) {
            self.0.push(p.ident.to_string());
            syn::visit::visit_pat_ident(self, p);
        }
    }
    let mut bound = Bound(Vec::new());
    syn::visit::Visit::visit_expr(&mut bound, e);
    bound.0
}

/// The `static`s a guard's expression may give through one of its branches (the tail of a
/// block, each branch of an `if` or a `match`): each must be a `static`, as a guard named
/// directly must (`limit = if fast { &FAST } else { &SLOW }` with `const` guards would make a
/// new guard for each call).
fn branch_roots<'e>(e: &'e syn::Expr, params: &[String], roots: &mut Vec<&'e syn::ExprPath>) {
    // (A block that declares items or imports of its own is not looked into: its names are
    // not in scope where the checks go. Nor is an `unsafe` block, whose `static mut` could
    // not be named outside it.)
    let tail = |b: &'e syn::Block| match b.stmts.last() {
        Some(syn::Stmt::Expr(tail, None))
            if !b.stmts.iter().any(|s| matches!(s, syn::Stmt::Item(_))) =>
        {
            Some(tail)
        }
        _ => None,
    };
    let branches: Vec<&'e syn::Expr> = match e {
        // (A path under these is checked by `sharing`, not here.)
        syn::Expr::Paren(p) => return branch_roots(&p.expr, params, roots),
        syn::Expr::Group(g) => return branch_roots(&g.expr, params, roots),
        syn::Expr::Reference(r) => return branch_roots(&r.expr, params, roots),
        syn::Expr::Block(b) => tail(&b.block).into_iter().collect(),
        syn::Expr::If(i) => {
            let mut v: Vec<&'e syn::Expr> = tail(&i.then_branch).into_iter().collect();
            if let Some((_, other)) = &i.else_branch {
                v.push(other);
            }
            v
        }
        syn::Expr::Match(m) => m.arms.iter().map(|arm| &*arm.body).collect(),
        _ => return,
    };
    for branch in branches {
        let mut inner = branch;
        while let syn::Expr::Paren(syn::ExprParen { expr, .. })
        | syn::Expr::Group(syn::ExprGroup { expr, .. })
        | syn::Expr::Reference(syn::ExprReference { expr, .. }) = inner
        {
            inner = expr;
        }
        if matches!(
            inner,
            syn::Expr::Block(_) | syn::Expr::If(_) | syn::Expr::Match(_)
        ) {
            branch_roots(inner, params, roots);
            continue;
        }
        match sharing(branch, params) {
            Sharing::Static(path) | Sharing::Value(_, _, Some(path)) => roots.push(path),
            _ => {}
        }
    }
}

/// The parts of a guard's expression that are values made by the call and that the guard is
/// taken from, with the dereferences [`sharing`] gives each: the argument of `Arc::from(..)`,
/// `Rc::from(..)` or `Box::from(..)` (a guard made here, or a box of one, converted into a
/// pointer made here: the pointer's type alone is that of `Arc::from(arc)`), and the receiver of
/// a method (`Keyed::new(..)?.get(host)`, `make_map().get(host)`: a keyed map made here makes
/// new guards). Each must not be a guard's own type (`OwnedGuard`, which a keyed map is): its
/// type is probed where the expression is, in a branch never taken.
fn made_here_parts<'e>(e: &'e syn::Expr, params: &[String], out: &mut Vec<(&'e syn::Expr, usize)>) {
    // A value the call makes (the result of a call, a method, a `?`, an `.await`, a block, an
    // `if`, a `match` or a macro, and with `fields`, a field or an element of one), under the
    // parentheses and the `&`s written around it. (A receiver's field is a place, which may be
    // shared: `registry().breakers.get(host)`; a value converted into a pointer is moved, so
    // a field of one is the call's.)
    fn made(x: &syn::Expr, fields: bool) -> Option<&syn::Expr> {
        let mut x = x;
        while let syn::Expr::Paren(syn::ExprParen { expr, .. })
        | syn::Expr::Group(syn::ExprGroup { expr, .. })
        | syn::Expr::Reference(syn::ExprReference { expr, .. }) = x
        {
            x = expr;
        }
        let mut base = x;
        while let syn::Expr::Field(syn::ExprField { base: of, .. })
        | syn::Expr::Index(syn::ExprIndex { expr: of, .. }) = base
            && fields
        {
            base = of;
        }
        matches!(
            base,
            syn::Expr::Call(_)
                | syn::Expr::MethodCall(_)
                | syn::Expr::Try(_)
                | syn::Expr::Await(_)
                | syn::Expr::Block(_)
                | syn::Expr::If(_)
                | syn::Expr::Match(_)
                | syn::Expr::Macro(_)
        )
        .then_some(x)
    }
    let probe = |x: &'e syn::Expr, fields: bool, out: &mut Vec<(&'e syn::Expr, usize)>| {
        if let Some(x) = made(x, fields) {
            let refs = match sharing(x, params) {
                Sharing::Value(_, refs, _) => refs,
                _ => 0,
            };
            out.push((x, refs));
        }
    };
    match e {
        syn::Expr::Reference(syn::ExprReference { expr: inner, .. })
        | syn::Expr::Paren(syn::ExprParen { expr: inner, .. })
        | syn::Expr::Group(syn::ExprGroup { expr: inner, .. })
        | syn::Expr::Try(syn::ExprTry { expr: inner, .. })
        | syn::Expr::Await(syn::ExprAwait { base: inner, .. })
        | syn::Expr::Field(syn::ExprField { base: inner, .. })
        | syn::Expr::Index(syn::ExprIndex { expr: inner, .. }) => {
            made_here_parts(inner, params, out)
        }
        syn::Expr::Unary(u) if matches!(u.op, syn::UnOp::Deref(_)) => {
            made_here_parts(&u.expr, params, out)
        }
        syn::Expr::MethodCall(call) => {
            // (A copy's receiver is checked by `sharing`, with the copy: `Arc::new(..).clone()`.)
            if call.method != "clone" {
                probe(&call.receiver, false, out);
            }
            made_here_parts(&call.receiver, params, out);
        }
        syn::Expr::Call(call) if pointer_from(&call.func) && call.args.len() == 1 => {
            probe(&call.args[0], true, out);
            made_here_parts(&call.args[0], params, out);
        }
        // `Arc::clone(&pointer)`, as `pointer.clone()`.
        syn::Expr::Call(call) if clone_by_path(call) => {
            made_here_parts(&call.args[0], params, out);
        }
        // A method called by its path (`KeyedBreaker::get(&make_map(), host)`), as the method
        // call it is: its first argument, written as a reference, is its receiver.
        syn::Expr::Call(call) => {
            if let Some(first) = receiver_by_path(call) {
                probe(first, false, out);
                made_here_parts(first, params, out);
            }
        }
        _ => {}
    }
}

/// The receiver of a method called by its path (`Keyed::get(&BREAKERS, host)`): its first
/// argument, written as a reference.
fn receiver_by_path(call: &syn::ExprCall) -> Option<&syn::Expr> {
    let by_path = matches!(&*call.func, syn::Expr::Path(p) if p.path.segments.len() >= 2);
    call.args
        .first()
        .filter(|first| by_path && matches!(first, syn::Expr::Reference(_)))
}

/// `Arc::clone(&pointer)` (a path that ends in `clone`, with one argument): `pointer.clone()`.
fn clone_by_path(call: &syn::ExprCall) -> bool {
    matches!(&*call.func, syn::Expr::Path(p)
        if p.path.segments.len() >= 2
            && p.path.segments.last().is_some_and(|s| s.ident == "clone"))
        && call.args.len() == 1
}

/// The pointer type and the fn a call's path names: `("Arc", "new")` for `Arc::new`,
/// `std::sync::Arc::<T>::new` or `<Arc<T>>::new`, `("Rc", "from")` for
/// `<Rc<T> as From<T>>::from`.
fn pointer_fn(func: &syn::Expr) -> Option<(String, String)> {
    let syn::Expr::Path(p) = func else {
        return None;
    };
    let f = p.path.segments.last()?.ident.to_string();
    let ty = match &p.qself {
        Some(q) => match &*q.ty {
            Type::Path(t) => t.path.segments.last()?.ident.to_string(),
            _ => return None,
        },
        None => {
            let n = p.path.segments.len();
            p.path
                .segments
                .iter()
                .nth(n.checked_sub(2)?)?
                .ident
                .to_string()
        }
    };
    Some((ty, f))
}

/// `Arc::from` or `Rc::from` (`Box::from` is as `Box::new`: [`pointer_made_here`]).
fn pointer_from(func: &syn::Expr) -> bool {
    pointer_fn(func).is_some_and(|(ptr, f)| ["Arc", "Rc"].contains(&ptr.as_str()) && f == "from")
}

/// Whether `tokens` name one of `params` or `self` as a variable ([`crate::valid::mentions`]:
/// a format string's `{name}` too). A name that does not parse as one counts.
fn names_any(tokens: &TokenStream, params: &[String]) -> bool {
    let named = |name: &Ident| crate::valid::mentions(tokens.clone(), name);
    named(&Ident::new("self", Span::call_site()))
        || params
            .iter()
            .any(|p| syn::parse_str::<Ident>(p).map_or(true, |p| named(&p)))
}

/// `Arc::new`, `Rc::new` or `Box::new` (or `pin`, `new_cyclic`), `Box::leak`, a lazy value's
/// `new` (`LazyLock`, `LazyCell`, once_cell's `Lazy`: made by the call, it makes its value for
/// the call): a pointer to a value made by the call. (Not `Arc::from` nor `Rc::from`, which may
/// convert a pointer into itself, `Arc::from(arc)`; but `Box::from`: a box is owned, so one
/// made from another is the call's too.)
fn pointer_made_here(func: &syn::Expr) -> bool {
    pointer_fn(func).is_some_and(|(ptr, f)| {
        (["Arc", "Rc", "Box", "LazyLock", "LazyCell", "Lazy"].contains(&ptr.as_str())
            && ["new", "pin", "new_cyclic", "leak"].contains(&f.as_str()))
            // (A `Box` is owned: one made from another is the call's too.)
            || (ptr == "Box" && f == "from")
    })
}

/// A `move` callback (`on_error = move |e, n| log(&name, e)`, `on_success`, `on_retry`, a
/// `hint`) that names an owned parameter gets a clone of it, made where the callback is
/// (`{ let name = clone_arg(&name); move |e, n| .. }`): the closure would otherwise take the
/// parameter, which the attempts still clone (rustc's "cannot move out of `name` because it
/// is borrowed").
fn clone_into_move_callbacks(config: &mut Config, f: &Func, p: &TokenStream) {
    let owned: Vec<(Ident, Span)> = f
        .sig
        .inputs
        .iter()
        .filter_map(|arg| match arg {
            FnArg::Typed(pt) => match &*pt.pat {
                Pat::Ident(pi)
                    if pi.by_ref.is_none()
                        && pi.subpat.is_none()
                        && !matches!(peel(&pt.ty), Type::Reference(_))
                        && crate::valid::reborrow_of(&pt.ty).is_none() =>
                {
                    Some((pi.ident.clone(), pt.ty.span()))
                }
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect();
    if owned.is_empty() {
        return;
    }
    let callbacks = [
        &mut config.on_success,
        &mut config.on_error,
        &mut config.on_retry,
        &mut config.hint,
    ]
    .into_iter()
    .flatten()
    .chain(config.whens.iter_mut().filter_map(|w| w.hint.as_mut()));
    for e in callbacks {
        let syn::Expr::Closure(closure) = &**e else {
            continue;
        };
        if closure.capture.is_none() {
            continue;
        }
        // (A name the closure's own parameters bind is theirs, not the fn's.)
        let mut own = Vec::new();
        for input in &closure.inputs {
            crate::valid::bound_names(input, &mut own);
        }
        let written = quote::ToTokens::to_token_stream(&**e);
        let at = e.span();
        // (The clone is borrowed once: a name the closure binds again in its body, which the
        // tokens cannot tell from the parameter, leaves it unread, and no lint is allowed.)
        // The clone is written as an attempt's is, at the parameter's type: a parameter that
        // is not `Clone` is then reported once, at the parameter, not again at the callback
        // (rustc merges the two errors, which are the same).
        let clones: Vec<TokenStream> = owned
            .iter()
            .filter(|(name, _)| !own.contains(&name.to_string()))
            .filter(|(name, _)| crate::valid::mentions(written.clone(), name))
            .map(|(name, ty_span)| {
                let ps = respan(p, *ty_span);
                let clone = quote_spanned!(*ty_span=> #ps::clone_arg(&#name));
                quote_spanned!(at=> let #name = #clone; let _ = &#name;)
            })
            .collect();
        if clones.is_empty() {
            continue;
        }
        if let Ok(block) = syn::parse2::<syn::Expr>(quote_spanned!(at=> { #(#clones)* #written })) {
            **e = block;
        }
    }
}

/// The function under the attribute, expanded. `valid::check_fn` has accepted its shape.
pub fn expand(
    mut config: Config,
    mut f: Func,
    attr_names: &std::collections::HashSet<String>,
    io_dead: &(Vec<(crate::ast::Sp, String)>, crate::valid::IoSpelling),
) -> TokenStream {
    let param_names = crate::valid::param_names(&f);
    let p = match &config.krate {
        Some(path) => quote!(#path::__private),
        None => quote!(::retry_runtime::__private),
    };
    let ret = match &f.sig.output {
        ReturnType::Type(_, ty) => (**ty).clone(),
        ReturnType::Default => syn::parse_quote!(()),
    };
    let is_async = f.sig.asyncness.is_some();
    let latencies = Ident::new("__ROBUST_LATENCIES", Span::mixed_site());
    clone_into_move_callbacks(&mut config, &f, &p);
    expectations_as_allows(&mut f);
    let Rebound {
        held,
        outer,
        pre,
        prelude,
        views,
        whole,
        patterns,
        mut_receiver,
    } = rebind_args(
        &p,
        &mut f,
        config.hedge.is_some(),
        is_async && config.hedge.is_none(),
        attr_names,
        &guard_roots(&config),
    );
    // The views the attribute's expressions may read.
    let views = views
        .into_iter()
        .filter(|(names, _)| names.iter().any(|n| attr_names.contains(n)))
        .map(|(_, view)| view)
        .collect::<Vec<_>>();
    // Without a timeout or a deadline an async attempt is simply awaited: no timer, no race.
    let has_deadline = finite_limit(&config.deadline).is_some();
    let timed =
        finite_limit(&config.timeout).is_some() || has_deadline || config.adaptive.is_some();
    // `Timeout` matches a timed-out attempt without looking into the error only when an
    // attempt's own timeout can cut it and a retry follow: an attempt the call's deadline cuts
    // is never retried (no time is left), so with a deadline alone `Timeout` must find a
    // timeout in the error itself.
    // (Beside a throttle, a deadline alone is enough: an attempt it cuts is then counted as
    // not accepted when a rule on `Timeout` takes it, as accepted otherwise.)
    let names = Names::new(crate::valid::timeout_kind_is_timed(&config));
    let Names {
        policy,
        call,
        attempt,
        result,
        fired,
        inspect,
        backoff,
        jitter: jitter_name,
        ..
    } = &names;

    let ret_span = ret.span();
    let pr = respan(&p, ret_span);
    let err = quote_spanned!(ret_span=> <#ret as #pr::IsResult>::Err);
    let ok = quote_spanned!(ret_span=> <#ret as #pr::IsResult>::Ok);

    // At the first kind that looks inside the error: an error type whose `std::error::Error`
    // view the probe cannot take (a downcast needs `'static`: a generic one with no `'static`
    // bound, a borrowed one without an `Inspect` impl) is reported there, by rustc.
    let inspector = match inspecting_kind_span(&config) {
        Some(span) => {
            let ps = respan(&p, span);
            let errs = respan(&err, span);
            quote_spanned! {span=>
                let #inspect = {
                    use #ps::prelude::inspect::*;
                    (&&&#ps::Probe::<#errs>::new()).inspector()
                };
            }
        }
        None => quote!(),
    };

    let top = &config.settings;
    let default_backoff = Strategy::Default;
    let top_backoff = top.backoff.as_ref().map_or(&default_backoff, |s| &s.value);
    let top_jitter = top
        .jitter
        .as_ref()
        .map_or(&JitterSpec::Default, |s| &s.value);

    let mut whens = quote!(());
    // Custom strategies and jitter are bound once to locals; built-in settings become consts.
    let mut locals = Vec::new();
    if matches!(top_backoff, Strategy::Custom(_)) {
        locals.push(bind_backoff(&p, backoff, top_backoff, is_async));
    }
    if matches!(top_jitter, JitterSpec::Custom(_)) {
        locals.push(bind_jitter(&p, jitter_name, top_jitter, is_async));
    }
    for (i, w) in config.whens.iter().enumerate() {
        let value_rule = w.kind.is_ok();
        let k = if value_rule {
            let k = value_kind(&p, &ok, &names, &w.kind);
            match &w.hint {
                Some(h) => {
                    let ps = respan(&p, h.span());
                    quote_spanned!(h.span()=> #ps::ok_hint::<#ok, _, _>(#k, #h))
                }
                None => k,
            }
        } else {
            kind(&p, &err, &names, &w.kind)
        };
        let mut b = backoff.clone();
        let mut j = jitter_name.clone();
        if let Some(s) = &w.overrides.backoff
            && matches!(s.value, Strategy::Custom(_))
        {
            b = format_ident!("__robust_backoff{}", i, span = Span::mixed_site());
            locals.push(bind_backoff(&p, &b, &s.value, is_async));
        }
        if let Some(s) = &w.overrides.jitter
            && matches!(s.value, JitterSpec::Custom(_))
        {
            j = format_ident!("__robust_jitter{}", i, span = Span::mixed_site());
            locals.push(bind_jitter(&p, &j, &s.value, is_async));
        }
        let s = rule_settings(&p, top, Some(&w.overrides), i + 1, (&b, &j), &mut locals);
        whens = if value_rule {
            quote!(#p::when_ok(#whens, #k, #s))
        } else {
            quote!(#p::when(#whens, #k, #s))
        };
    }
    let on_list: Vec<&Kind> = config.on.iter().flat_map(|o| o.value.iter()).collect();
    let (on_values, on_errors): (Vec<&Kind>, Vec<&Kind>) = on_list.iter().partition(|k| k.is_ok());
    let on = if config.on.is_some() && on_errors.is_empty() {
        // An `on` list of `Ok(..)` kinds only retries no error.
        quote!(#p::NoError)
    } else {
        kinds(&p, &err, &names, &on_errors)
    };
    let on_ok = value_kinds(&p, &ok, &names, &on_values);
    // Rules are tried in order: the `when`s as written, then the `on` list.
    let error_order = rule_order_check(
        &p,
        &err,
        config.whens.iter().map(|w| &w.kind).filter(|k| !k.is_ok()),
        on_errors.iter().copied(),
        false,
    );
    let value_order = rule_order_check(
        &p,
        &ok,
        config.whens.iter().map(|w| &w.kind).filter(|k| k.is_ok()),
        on_values.iter().copied(),
        true,
    );
    locals.push(quote!(#error_order #value_order));
    let has_values = !on_values.is_empty() || config.whens.iter().any(|w| w.kind.is_ok());
    let top_settings = rule_settings(&p, top, None, 0, (backoff, jitter_name), &mut locals);

    let timeout = match &config.timeout {
        Some(t) => match t.value {
            Limit::Finite(d) => {
                let d = dur(&p, d);
                let ps = respan(&p, t.span.start);
                if is_async && (config.deadline.is_some() || config.hedge.is_some()) {
                    // Wrapped by the deadline or hedging below, the error type is not
                    // inferred: name it.
                    let err = respan(&err, t.span.start);
                    quote_spanned!(t.span.start=> #ps::async_timeout::<#err>(#d))
                } else if is_async {
                    quote_spanned!(t.span.start=> #ps::async_timeout::<_>(#d))
                } else {
                    quote_spanned!(t.span.start=> #ps::sync_timeout(#d))
                }
            }
            Limit::Infinite => quote!(#p::NoTimeout),
        },
        None => match &config.adaptive {
            // An adaptive timeout reads and records the fn's own latency histogram.
            Some(a) => {
                let AdaptiveSpec {
                    p: pv,
                    factor,
                    min,
                    max,
                    ..
                } = &a.value;
                let (pv, factor) = (float(*pv), float(*factor));
                let (min, max) = (dur(&p, *min), dur(&p, *max));
                let ps = respan(&p, a.span.start);
                if is_async {
                    let err = respan(&err, a.span.start);
                    quote_spanned!(a.span.start=> #ps::async_adaptive::<#err>(&#latencies, #pv, #factor, #min, #max))
                } else {
                    quote_spanned!(a.span.start=> #ps::adaptive_timeout(&#latencies, #pv, #factor, #min, #max))
                }
            }
            None => quote!(#p::NoTimeout),
        },
    };
    // A deadline wraps the timeout setting; in an async fn its expiry builds `E::from(Elapsed)`,
    // checked where `deadline` is written.
    let timeout = match config.deadline.as_ref().map(|d| (d.value, d.span)) {
        Some((Limit::Finite(d), sp)) => {
            let d = dur(&p, d);
            let ps = respan(&p, sp.start);
            if is_async {
                quote_spanned!(sp.start=> #ps::async_deadline::<_, _>(#timeout, #d))
            } else {
                quote_spanned!(sp.start=> #ps::sync_deadline(#timeout, #d))
            }
        }
        _ => timeout,
    };
    // Hedging (SPEC section 15) goes with the timeout setting.
    let timeout = match &config.hedge {
        Some(h) => {
            let max = h.value.max;
            let hedge = match h.value.after {
                After::Fixed(d) => {
                    let d = dur(&p, d);
                    quote!(#p::hedge_after(#d, #max))
                }
                After::Percentile(v) => {
                    let v = float(v);
                    quote!(#p::hedge_percentile(&#latencies, #v, #max))
                }
            };
            quote!(#p::hedged(#timeout, #hedge))
        }
        None => timeout,
    };
    // The fn's latency histogram, when something reads it.
    let uses_latencies = config.adaptive.is_some()
        || matches!(&config.hedge, Some(h) if matches!(h.value.after, After::Percentile(_)));
    let latencies_static =
        uses_latencies.then(|| quote!(static #latencies: #p::Latencies = #p::Latencies::new();));
    let on_success = match &config.on_success {
        Some(e) => {
            let ps = respan(&p, e.span());
            quote_spanned!(e.span()=> #ps::on_success(#e))
        }
        None => quote!(#p::Noop),
    };
    let on_error = match &config.on_error {
        Some(e) => {
            let ps = respan(&p, e.span());
            // The error type is spanned at the callback too: a callback of the wrong type is
            // then reported once, there.
            let err = respan(&err, e.span());
            quote_spanned!(e.span()=> #ps::on_error::<#err, _>(#e))
        }
        None => quote!(#p::Noop),
    };
    let spanned_call = |e: &syn::Expr, f: &str, generic: bool| {
        let ps = respan(&p, e.span());
        let f = Ident::new(f, e.span());
        if generic {
            let err = respan(&err, e.span());
            quote_spanned!(e.span()=> #ps::#f::<#err, _>(#e))
        } else {
            quote_spanned!(e.span()=> #ps::#f(&#e))
        }
    };
    // The guards are bound by reference first (`let g = &EXPR;` keeps a temporary alive for
    // the whole call): a `static`, or a guard returned by a keyed map (`BREAKERS.get(host)`).
    // Each is then checked where it is written, through the runtime's check for its key.
    let guard = |expr: &Option<Box<syn::Expr>>, owner: &str, check: &str, params: TokenStream| {
        let Some(e) = expr else {
            return (quote!(), quote!(()));
        };
        let owner = Ident::new(owner, Span::mixed_site().located_at(e.span()));
        let ps = respan(&p, e.span());
        let check = Ident::new(check, e.span());
        // The type parameters too are spanned at the expression: an error is reported there.
        let params = respan(&params, e.span());
        // The guard must be one for every call, not one made by this call.
        let bind = match sharing(e, &param_names) {
            Sharing::Place => quote_spanned!(e.span()=> let #owner = &#e;),
            Sharing::Static(path) => {
                let ps = respan(&p, path.span());
                quote_spanned!(path.span()=> let #owner = &#e; #ps::static_guard(&#path);)
            }
            Sharing::Value(value, refs, root) => {
                // The value is checked under the `&`s written before it (`&Guard::new()` as
                // `Guard::new()`), through a method named at the expression, so that an error
                // points there (the binding's own name would point at the whole attribute).
                // The receiver's tokens share the binding's context (tokens of two contexts
                // would be reported at the whole attribute).
                let at = Span::mixed_site().located_at(value.span());
                let ps = respan(&p, at);
                let derefs = std::iter::repeat_n(quote_spanned!(at=> *), refs + 1);
                let receiver = spanned_group(
                    quote_spanned!(at=> &#ps::GuardValue(&#(#derefs)* #owner)),
                    at,
                );
                let method = Ident::new("robust_shared_guard", at);
                let root = root.map(|path| {
                    let ps = respan(&p, path.span());
                    quote_spanned!(path.span()=> #ps::static_guard(&#path);)
                });
                quote_spanned!(e.span()=>
                    let #owner = &#e;
                    #root
                    {
                        use #ps::prelude::guard_check::*;
                        #receiver.#method();
                    }
                )
            }
        };
        // The values made by the call that the guard is taken from must not be guards (or
        // keyed maps) either: their types are probed in a branch never taken, where the
        // expression is (its `?` and `.await` as there). Not one that names a parameter,
        // which the probe would move or borrow: the attribute sees no types.
        let mut parts = Vec::new();
        made_here_parts(e, &param_names, &mut parts);
        let probes = parts
            .into_iter()
            .filter(|(x, _)| !names_any(&quote::ToTokens::to_token_stream(*x), &param_names))
            .map(|(x, refs)| {
                let at = Span::mixed_site().located_at(x.span());
                let ps = respan(&p, at);
                let derefs = std::iter::repeat_n(quote_spanned!(at=> *), refs);
                let x = spanned_group(quote::ToTokens::to_token_stream(x), x.span());
                let receiver =
                    spanned_group(quote_spanned!(at=> &#ps::GuardValue(&#(#derefs)* #x)), at);
                let method = Ident::new("robust_shared_guard", at);
                quote_spanned!(at=>
                    if false {
                        use #ps::prelude::guard_check::*;
                        #receiver.#method();
                    }
                )
            });
        let bind = quote!(#bind #(#probes)*);
        // The `static`s its branches may give (an `if`, a `match`, a block), but no name the
        // expression binds itself (`{ let t = ..; t.unwrap() }`, a `match` arm's binding).
        let mut roots = Vec::new();
        branch_roots(e, &param_names, &mut roots);
        let bound = bound_names(e);
        let roots = roots.into_iter().filter(|path| {
            path.path
                .get_ident()
                .is_none_or(|name| !bound.contains(&name.to_string()))
        });
        let roots = roots.map(|path| {
            let ps = respan(&p, path.span());
            quote_spanned!(path.span()=> #ps::static_guard(&#path);)
        });
        (
            quote!(#bind #(#roots)*),
            quote_spanned!(e.span()=> #ps::#check::<#params>(#owner)),
        )
    };
    let (budget_bind, budget_tokens) =
        guard(&config.budget, "__robust_budget_owner", "budget", quote!(_));
    let (breaker_bind, breaker_tokens) = guard(
        &config.breaker,
        "__robust_breaker_owner",
        "check_breaker",
        quote!(_, _),
    );
    let (throttle_bind, throttle_tokens) = guard(
        &config.throttle,
        "__robust_throttle_owner",
        "check_throttle",
        quote!(_),
    );
    let (limit_bind, limit_tokens) = guard(
        &config.limit,
        "__robust_limit_owner",
        "check_limit",
        quote!(_),
    );
    let guard_binds = quote!(#budget_bind #breaker_bind #throttle_bind #limit_bind);
    let hint_tokens = config
        .hint
        .as_ref()
        .map_or(quote!(#p::Noop), |e| spanned_call(e, "hint", true));
    let on_retry_tokens = config.on_retry.as_ref().map_or(quote!(#p::Noop), |e| {
        let ps = respan(&p, e.span());
        quote_spanned!(e.span()=> #ps::on_retry::<#ok, #err, _>(#e))
    });
    // Tracing events name the fn and write the error's `Display` text if it has one.
    let fn_name = syn::ext::IdentExt::unraw(&f.sig.ident).to_string();
    let describe = quote_spanned!(ret_span=> #pr::describe(|| #fn_name, {
        use #p::prelude::error_writer::*;
        (&&#pr::Probe::<#err>::new()).error_writer()
    }));
    let extras = quote!(#p::extras(#budget_tokens, #breaker_tokens, #hint_tokens, #on_retry_tokens, #describe, #on_ok, #throttle_tokens, #limit_tokens));
    let ctx = config.attempt.as_ref().map(|ctx| {
        let krate = match &config.krate {
            Some(path) => quote!(#path),
            None => quote!(::retry_runtime),
        };
        quote!(let #ctx: &#krate::Attempt<'_> = &#attempt;)
    });

    // (In braces of the body's own span: `in_braces`.) The attempt's own bindings (`ctx`,
    // the parameters' clones and reborrows) are made before the body's block, so that the
    // temporaries of the body's tail drop before them, as a fn's drop before its parameters
    // (`Ok(p.borrow().len())` borrows the attempt's clone of `p`; in a crate of edition 2021
    // a block's tail temporaries outlive its locals), and the lints that read a body's tail
    // (`needless_question_mark`, `implicit_return`) still see it as written: a blocking
    // attempt's block is the body of a closure the bindings are made around, an async
    // attempt's the body of an `async move` block they are moved into (its future owns them,
    // and holds no reference to them across its awaits: it is `Send` for a parameter that is
    // `Send` and not `Sync`; each binding is borrowed whole in it, `whole`, so that it owns
    // all of it, not the one field the body reads). An async `&mut self` method's attempt
    // cannot move `self` into it (the next attempt needs `self`), and the names a parameter's
    // pattern binds cannot all be moved in without reading them (a name the body never reads,
    // `_permit`, would drop before the attempt runs, and one it should warn about would be
    // read): such an attempt's block is the body of a match arm after the bindings, a scope
    // of its temporaries too, which those lints do not read. Items the body declares stay
    // ahead of its statements in its own block (clippy's `items_after_statements`).
    let stmts = f.body.stream();
    let bound = ctx.is_some() || !prelude.is_empty();
    let bindings = quote!(#ctx #(#prelude)*);
    let block = in_braces(stmts.clone(), f.body.span());
    let typed = |before: TokenStream, body: TokenStream| {
        typed_async(&before, &body, &ret, &pr, ret_span, f.body.span())
    };
    // The form for what cannot move into an `async move` block around which its bindings are
    // made: the bindings in the block, then the body's block as a match arm's.
    let in_arm = || typed(quote!(), quote!(#bindings match () { () => #block }));
    let (async_bindings, async_block) = if !bound {
        (quote!(), typed(quote!(), stmts.clone()))
    } else if mut_receiver || patterns {
        (quote!(), in_arm())
    } else {
        let body = typed(quote!(#(#whole)*), stmts.clone());
        (bindings.clone(), quote!(move #body))
    };
    // A hedged attempt (made by a `move` closure, several alive at once) always moves what it
    // takes (`hedge` refuses `&mut self`), and binds its context in its block, from the
    // `attempt` its closure takes (a reference, which no temporary outlives).
    let (hedged_bindings, hedged_async) = if patterns {
        (quote!(), in_arm())
    } else {
        (
            quote!(#(#prelude)*),
            typed(quote!(#ctx #(#whole)*), stmts.clone()),
        )
    };

    // Every use of `IsResult` carries the return type's span, so a non-`Result` return type
    // is reported once, there.
    let pr = respan(&p, ret_span);
    let returned = Ident::new("__robust_returned", Span::mixed_site());
    // When an expression of the attribute names a parameter the body uses (`limit =
    // self.limit` in a method that writes `self.sent`), the attempt's closure and an async
    // attempt's block are of the attribute's edition (their first token at a mixed-site
    // span): they capture the fields the body uses (since edition 2021), not the whole of
    // each variable, whatever the user's edition. In editions 2015 and 2018 such a method
    // failed with E0500 ("closure requires unique access to `self`"): `tests/edition-2015`
    // and `tests/edition-2018`. Otherwise they keep the user's spans, under which clippy
    // reads the body's tail and returns as the fn's (`implicit_return`, `needless_return`:
    // `tests/lint-probe`).
    let body_tokens = f.body.stream();
    // (Only a parameter, `self` included, can be captured by the attempt: a name such as `Ok`,
    // `io` or a closure's own parameter, in the attribute and the body alike, is not one.)
    let receiver = f.sig.receiver().map(|_| "self".to_string());
    let shares_a_name = param_names.iter().chain(&receiver).any(|n| {
        let word = n.strip_prefix("r#").unwrap_or(n);
        (attr_names.contains(n) || attr_names.contains(word))
            && crate::valid::mentions(body_tokens.clone(), &Ident::new(word, ret_span))
    });
    let first_at = if shares_a_name {
        Span::mixed_site().located_at(ret_span)
    } else {
        ret_span
    };
    let pipes = quote_spanned!(first_at=> ||);
    let async_ = Token![async](first_at);
    let sync_call = quote_spanned!(ret_span=> #pr::sync_attempt::<#ret, _>(#pipes #block));
    let sync_attempt = if bound {
        quote!({ #bindings #sync_call })
    } else {
        sync_call
    };
    // An async attempt's future (after the bindings it takes, in the block that holds them).
    let async_future = quote_spanned!(ret_span=> #pr::pin_output::<#ret, _>(#async_ #async_block));
    let async_future = quote!(#async_bindings #async_future);
    let async_attempt = quote_spanned!(ret_span=> { #(#pre)* #async_future });
    let hedged_future =
        quote_spanned!(ret_span=> #pr::pin_output::<#ret, _>(#async_ move #hedged_async));
    let hedged_future = quote!(#hedged_bindings #hedged_future);
    let from_result = quote_spanned!(ret_span=> <#ret as #pr::IsResult>::from_result(#returned));
    // Bind with patterns spanned at the return type: a type error in the binding is then
    // reported there too (and merged with the error above) instead of on the whole attribute.
    let pattern = spanned_group(quote!(#result, #fired), ret_span);
    // The fallback (SPEC section 14) replaces the error the call would return. Every way out
    // of the loop but a success breaks with the call's result; the fallback is made and called
    // after the loop, when the body's borrows have ended (so it may use `&mut self`).
    let apply_fallback = match &config.fallback {
        None => quote!(),
        Some(e) => {
            let ps = respan(&p, e.span());
            let fe = Ident::new("__robust_fe", Span::mixed_site());
            let at = Span::mixed_site().located_at(e.span());
            let out = Ident::new("__robust_fo", at);
            let tag = Ident::new("__robust_tag", at);
            let label = syn::Lifetime::new("'__robust_fallback", Span::mixed_site());
            let (ok_at, err_at) = (respan(&ok, e.span()), respan(&err, e.span()));
            let value = if is_async {
                quote_spanned! {e.span()=>
                    {
                        use #ps::prelude::fallback_kind::*;
                        // A `match`, not a `let`: the temporaries of the fallback's expression
                        // live until its future is done, as they would in the expression
                        // written by hand. The fallback itself is moved into `run` and dropped
                        // there, before the `.await` (a closure that borrows a `!Sync` argument
                        // would make the fn's future `!Send`).
                        match #ps::async_fallback::<#err, _, _>(#e).run(#fe) {
                            #out => {
                                // The tag is read in a block of its own: a local once
                                // borrowed counts as held until its scope ends, and this one
                                // ends before the `.await` (the fn's future stays `Send` when
                                // the fallback's is). A `Result` is returned as it is, never
                                // held across the `.await` (it is `Send` only when the fn's `T`
                                // and `E` are).
                                let (#tag, #out) = {
                                    let #out = #out;
                                    ((&#out).fallback_kind(), #out)
                                };
                                let #out = match #tag.split::<#ok_at, #err_at, _>(#out) {
                                    #ps::FallbackNow::Now(#out) => break #label #out,
                                    #ps::FallbackNow::Later(#out) => #out,
                                };
                                #out.await
                            }
                        }
                    }
                }
            } else {
                quote_spanned!(e.span()=> #ps::fallback::<#ok, #err, _>(#e).run(#fe))
            };
            quote! {
                let #returned = #label: {
                    let #fe = match #p::fallback_error(#returned) {
                        ::core::ops::ControlFlow::Continue(#fe) => #fe,
                        ::core::ops::ControlFlow::Break(#returned) => break #label #returned,
                    };
                    #value
                };
            }
        }
    };
    // The call and its policy, which hold the callbacks, end before the fallback is made: a
    // callback may read a unique borrow the body never names, which the fallback then writes.
    // (Moved into blocks of their own, the call first, as it borrows the policy.)
    let release = |with_call: bool| {
        if config.fallback.is_none() {
            return quote!();
        }
        let end = Ident::new("__robust_end", Span::mixed_site());
        let call = with_call.then(|| quote!({ let #end = #call; }));
        quote!(#call { let #end = #policy; })
    };
    let core = core_at(&p, ret_span);
    let admit = quote_spanned! {ret_span=>
        if let #core::option::Option::Some(#returned) =
            #pr::admit::<#ret, _, _>(&mut #call)
        {
            break #returned;
        }
    };
    let timer = Ident::new("__robust_timer", Span::mixed_site());
    // With a deadline the timer is armed for each attempt's own time (the smaller of its
    // timeout and the time left), read from the attempt context.
    // The clock is read only when something needs it: the attempt context, a `max_delay`
    // budget, or a blocking fn's cooperative timeout. Otherwise the success path reads no
    // clock at all.
    let budget = finite_limit(&config.settings.max_delay).is_some()
        || config
            .whens
            .iter()
            .any(|w| finite_limit(&w.overrides.max_delay).is_some());
    let needs_clock = config.attempt.is_some()
        || config.adaptive.is_some()
        || budget
        || has_deadline
        || config.on_retry.is_some()
        || (!is_async && finite_limit(&config.timeout).is_some());
    let fut_name = Ident::new("__robust_future", Span::mixed_site());
    // When each attempt's start is read anyway, its timer is armed from it (one clock reading
    // less per attempt; the call's timer is made without one either).
    let race_call = if needs_clock {
        quote!(#p::race_from(#timer.as_mut(), #fut_name, #policy.timeout(), #attempt.limit(), #attempt.started()).await)
    } else {
        quote!(#p::race(#timer.as_mut(), #fut_name, #policy.timeout(), #call.retries() > 0).await)
    };
    let run_attempt = if is_async && !timed {
        let plain = quote_spanned! {ret_span=>
            (<#ret as #pr::IsResult>::into_result(
                { #(#pre)* #async_future }.await
            ), false)
        };
        quote!(let #pattern = #plain;)
    } else if is_async {
        let fut = Ident::new("__robust_future", Span::mixed_site());
        quote! {
            let #pattern = {
                let #fut = ::core::pin::pin!(#async_attempt);
                #race_call
            };
        }
    } else {
        let value = spanned_group(quote!(#sync_attempt, false), ret_span);
        quote!(let #pattern = #value;)
    };
    let delay = Ident::new("__robust_delay", Span::mixed_site());
    let timer_stmt = if is_async && timed && needs_clock {
        quote!(let mut #timer = ::core::pin::pin!(#p::timer_unarmed());)
    } else if is_async && timed {
        quote!(let mut #timer = ::core::pin::pin!(#p::timer_for(#policy.timeout()));)
    } else if is_async {
        quote!(let mut #timer = #p::boxed_timer();)
    } else {
        quote!()
    };
    let sleep = if is_async && timed && needs_clock {
        quote!(#p::backoff_from(#timer.as_mut(), #delay).await)
    } else if is_async && timed {
        quote!(#p::backoff_on(#timer.as_mut(), #delay).await)
    } else if is_async {
        quote!(#p::backoff_boxed(&mut #timer, #delay).await)
    } else {
        quote!(#p::sleep(#policy.env(), #delay))
    };

    // A blocking fn's call reads the clock its sleeper agrees with (std's, not tokio's).
    // With an attempt context the first attempt reads the call's first instant: no reading
    // before it.
    let (eager, lazy) = if is_async {
        (quote!(#p::start_timed), quote!(start_lazy))
    } else {
        (
            quote!(#p::start_timed_blocking),
            quote!(start_lazy_blocking),
        )
    };
    let (start, attempt_stmt) = if needs_clock {
        (
            quote!(#eager(&#policy)),
            quote!(let #attempt = #call.attempt();),
        )
    } else {
        (quote!(#policy.#lazy()), quote!())
    };
    // An async attempt with no time left before the deadline is not made (its first poll would
    // send it): the call ends with `E::from(Elapsed)`.
    let out_of_time = if is_async && has_deadline {
        quote_spanned! {ret_span=>
            if let #core::option::Option::Some(#returned) =
                #pr::out_of_time::<#ret, _, _>(&mut #call, &#attempt)
            {
                break #returned;
            }
        }
    } else {
        quote!()
    };

    // A bare name in a kind must be a value of the error type, not a binding.
    let all_kinds = config
        .on
        .iter()
        .flat_map(|o| o.value.iter())
        .chain(config.whens.iter().map(|w| &w.kind));
    let name_checks = all_kinds.flat_map(|k| {
        let (k, of) = match k {
            Kind::Ok { inner, .. } => (&**inner, &ok),
            k => (k, &err),
        };
        match k {
            Kind::Pattern(pat) => crate::valid::bare_names(pat)
                .into_iter()
                .map(|pi| {
                    let name = &pi.ident;
                    let ps = respan(&p, name.span());
                    // (Closures of the attribute's hygiene: clippy's `implicit_return` took
                    // the user's spans for the user's closures, and asked for `Ok(return
                    // None)`: `tests/lint-probe`.)
                    let at = Span::mixed_site().located_at(name.span());
                    let bars = quote_spanned!(at=> ||);
                    quote_spanned!(name.span()=> let _ = #bars #ps::is_value_of::<#of>(#bars #name);)
                })
                .collect(),
            _ => Vec::new(),
        }
    });
    let mut name_checks: Vec<TokenStream> = name_checks.collect();
    // Rules that never apply when the error type is `std::io::Error`, which its spelling did
    // not show (an imported `Error`, an alias): checked against the type, at compile time.
    // Written `io::Result<T>`, the alias's error type is looked at by a `const` item (which
    // `cargo check` evaluates, and which names no generic parameter of the fn); otherwise the
    // fn's own error type, by an inline `const` (evaluated where the fn is built).
    let (io_dead, spelling) = io_dead;
    name_checks.extend(io_dead.iter().map(|(sp, msg)| {
        let at = sp.start;
        let ps = respan(&p, at);
        let core = core_at(&p, at);
        let probe = |e: TokenStream| {
            quote_spanned! {at=>
                use #ps::prelude::io_probe::*;
                if IoProbe::<#e>::IS_IO {
                    #core::panic!("{}", #msg)
                }
            }
        };
        match spelling {
            crate::valid::IoSpelling::Bare { ty, result } => {
                let ty = respan(&quote::ToTokens::to_token_stream(&**ty), at);
                let e = if *result {
                    quote_spanned!(at=> <#ty as #ps::IsResult>::Err)
                } else {
                    ty
                };
                let check = probe(e);
                quote_spanned!(at=> const _: () = { #check };)
            }
            _ => {
                let check = probe(respan(&err, at));
                quote_spanned!(at=> const { #check };)
            }
        }
    }));
    // The fast path of a blocking fn: when no breaker must admit the first attempt and no
    // clock is read for it, the body (a closure) runs first, and the policy and the call are
    // made only if it fails. Async fns start the call first: measured, a lazy call or an async
    // closure made their success path no faster and their future larger (docs/BENCHMARKS.md).
    // A slot of the concurrency limit is held while an attempt runs (SPEC section 16).
    let slot = Ident::new("__robust_slot", Span::mixed_site());
    // A blocking fn with a deadline, or a limit and a `max_delay`, keeps the failure a retry
    // follows: the call returns it if the deadline has passed when the retry would start (a
    // backoff that ended late, after slow callbacks or a late wake-up, or a wait for a slot of
    // the limit), or if its rule's `max_delay` was spent while it waited for a slot.
    let any_max_delay = std::iter::once(&config.settings)
        .chain(config.whens.iter().map(|w| &w.overrides))
        .any(|o| finite_limit(&o.max_delay).is_some());
    let keep_last = !is_async && (has_deadline || config.limit.is_some() && any_max_delay);
    let last = Ident::new("__robust_last", Span::mixed_site());
    let (slot_take, slot_drop) = match &config.limit {
        None if !keep_last => (quote!(), quote!()),
        _ => {
            let refused = quote_spanned! {ret_span=>
                match #pr::refused::<#ret, _, _>(&mut #call) {
                    #core::option::Option::Some(#returned) => break #returned,
                    #core::option::Option::None => #core::option::Option::None,
                }
            };
            // An async fn takes a free slot without polling the wait's future (blocking fns
            // do so in `acquire_blocking`); a retry that waits does not wait past the call's
            // deadline.
            let take = if is_async {
                let ended = quote_spanned! {ret_span=>
                    #core::result::Result::Err(#returned) => break #returned,
                };
                // The call's timer, made before the loop for the first attempt, starts again
                // after a wait: the attempt starts when it holds the slot. (A fn reading each
                // attempt's start arms its timer from it; a retry's is reset anyway.)
                let restart = if timed && !needs_clock {
                    quote!(if #call.retries() == 0 {
                        #p::timer_restart(#timer.as_mut(), #policy.timeout());
                    })
                } else {
                    quote!()
                };
                // A lazy call's first instant (kept for the `tracing` events only) moves to
                // when its first attempt holds the slot. (A call that reads its attempts'
                // starts reads the first when the attempt starts.)
                let retime = if needs_clock {
                    quote!()
                } else {
                    quote!(#call.first_attempt_starts_now();)
                };
                quote! {
                    match #p::limit_try(&#policy) {
                        ::core::option::Option::Some(__robust_s) => ::core::option::Option::Some(__robust_s),
                        ::core::option::Option::None => match #p::limit_slot::<#ret, _, _>(&mut #call).await {
                            ::core::result::Result::Ok(__robust_s) => {
                                #restart
                                #retime
                                __robust_s
                            }
                            #ended
                        },
                    }
                }
            } else if keep_last {
                // A retry waits for a slot until the deadline at most; the failure it follows
                // is then returned.
                quote_spanned! {ret_span=>
                    match #pr::limit_slot_blocking::<#ret, _, _>(&mut #call, &mut #last) {
                        #core::result::Result::Ok(__robust_s) => __robust_s,
                        #core::result::Result::Err(#returned) => break #returned,
                    }
                }
            } else {
                // (As above: a lazy call's first instant moves to when its first attempt holds
                // the slot.)
                let retime = if needs_clock {
                    quote!()
                } else {
                    quote!(#call.first_attempt_starts_now();)
                };
                quote! {
                    match #p::limit_wait_blocking(&#policy) {
                        ::core::result::Result::Ok(__robust_s) => {
                            #retime
                            ::core::option::Option::Some(__robust_s)
                        }
                        ::core::result::Result::Err(_) => #refused,
                    }
                }
            };
            (
                quote! {
                    let #slot = #take;
                },
                quote!(::core::mem::drop(#slot);),
            )
        }
    };
    let on_error_name = Ident::new("__robust_on_error", Span::mixed_site());
    // An adaptive timeout learns from each successful attempt's latency.
    let measure = config
        .adaptive
        .as_ref()
        .map(|_| quote!(#call.measure(#attempt.started(), &#result, #fired);));
    let fast = !needs_clock
        && config.breaker.is_none()
        && config.throttle.is_none()
        && config.limit.is_none()
        && !is_async
        && !has_values
        && !crate::valid::late_exprs_read_mut_params(&config, &f);
    // What the hedged loop and the general loop start with: the checks, the locals and guards,
    // and the policy.
    let policy_setup = quote! {
            #(#name_checks)*
            #inspector
            #(#locals)*
            #guard_binds
            #latencies_static
            let #on_error_name = #on_error;
            let #policy = #p::policy(#whens, #on, #top_settings, #timeout, #on_success, #on_error_name, #extras);
    };
    let (release_policy, release_call) = (release(false), release(true));
    let new_block = if config.hedge.is_some() {
        // Hedged (SPEC section 15): the runtime's loop runs rounds of attempts, each made by
        // this closure as an `async move` block.
        // Without an attempt context the attempts do not see theirs: the loop then reads a
        // round's start only once its first attempt is pending.
        let (make_args, hedged_loop) = match &config.attempt {
            Some(_) => (quote!(|#attempt|), quote!(hedged_loop)),
            None => (quote!(||), quote!(hedged_loop_blind)),
        };
        let make = quote_spanned! {ret_span=>
            move #make_args {
                #(#outer)*
                #hedged_future
            }
        };
        quote! {{
            #policy_setup
            #(#held)*
            let #returned = #p::#hedged_loop(&#policy, #make).await;
            #release_policy
            #apply_fallback
            return #from_result;
        }}
    } else if fast {
        let first = Ident::new("__robust_first", Span::mixed_site());
        let tm = Ident::new("__robust_timeout", Span::mixed_site());
        let body_fn = Ident::new("__robust_body", Span::mixed_site());
        let on_success_value = Ident::new("__robust_on_success", Span::mixed_site());
        let budget_value = Ident::new("__robust_budget", Span::mixed_site());
        // What the success path needs is bound before the first attempt: the `on_success`
        // callback and the budget, credited once per call. The rest is made after a failure.
        let (on_success_bind, on_success_ref, on_success_now) = match &config.on_success {
            Some(_) => (
                quote!(let #on_success_value = #on_success;),
                quote!(&#on_success_value),
                quote!(#p::OnSuccess::on_success(&#on_success_value);),
            ),
            None => (quote!(), quote!(#p::Noop), quote!()),
        };
        let (budget_bind, budget_ref) = match &config.budget {
            Some(_) => (
                quote! {
                    let #budget_value = #budget_tokens;
                    #p::Budget::deposit(&#budget_value);
                },
                quote!(#budget_value),
            ),
            None => (quote!(), quote!(())),
        };
        let extras = quote!(#p::extras(#budget_ref, (), #hint_tokens, #on_retry_tokens, #describe, (), (), ()));
        // The body is a closure called once per attempt.
        let make_body = if bound {
            let value = quote_spanned!(ret_span=> #pr::attempt_value::<#ret, _>(#pipes #block));
            let attempt = quote!({ #bindings #value });
            quote_spanned!(ret_span=> #pr::body_fn::<#ret, _>(#pipes #attempt))
        } else {
            quote_spanned!(ret_span=> #pr::body_fn::<#ret, _>(#pipes #block))
        };
        let run = quote_spanned!(ret_span=> <#ret as #pr::IsResult>::into_result(#body_fn()));
        quote! {{
            #(#name_checks)*
            #inspector
            #(#locals)*
            #guard_binds
            #on_success_bind
            #budget_bind
            let #tm = #timeout;
            let #first = #p::first_instant();
            let mut #body_fn = #make_body;
            let #result = match #run {
                ::core::result::Result::Ok(__robust_v) => {
                    #on_success_now
                    let #returned = ::core::result::Result::Ok(__robust_v);
                    return #from_result;
                }
                __robust_e => __robust_e,
            };
            let #policy = {
                let #on_error_name = #on_error;
                #p::policy(#whens, #on, #top_settings, #tm, #on_success_ref, #on_error_name, #extras)
            };
            let mut #call = #p::resume_blocking(&#policy, #first);
            let mut #result = #result;
            let #returned = loop {
                match #call.settle(#result, false) {
                    #p::Step::Return(#returned) => break #returned,
                    #p::Step::Retry(#delay) => #p::sleep(&#p::DefaultEnv, #delay),
                }
                #result = #run;
            };
            #release_call
            #apply_fallback
            return #from_result;
        }}
    } else {
        let (last_bind, settle) = if keep_last {
            (
                quote!(let mut #last = ::core::option::Option::None;),
                quote! {
                    match #call.settle_keeping(#result, #fired) {
                        #pr::Settled::Return(#returned) => break #returned,
                        #pr::Settled::Retry(#delay, __robust_failure) => {
                            #last = ::core::option::Option::Some(__robust_failure);
                            #delay
                        }
                    }
                },
            )
        } else {
            (
                quote!(),
                quote! {
                    match #call.settle(#result, #fired) {
                        #p::Step::Return(#returned) => break #returned,
                        #p::Step::Retry(#delay) => #delay,
                    }
                },
            )
        };
        // The attempt's result lives in a block that ends before the backoff's sleep: a
        // local once borrowed (to measure it), or a `Step` matched, counts as held until its
        // scope ends, and the fn's future would not be `Send` for a `T` or an `E` that is not.
        quote! {{
            #policy_setup
            let mut #call = #start;
            #last_bind
            #timer_stmt
            let #returned = loop {
                #admit
                #slot_take
                #attempt_stmt
                #out_of_time
                let #delay = {
                    #run_attempt
                    #slot_drop
                    #measure
                    #settle
                };
                #sleep;
            };
            #release_call
            #apply_fallback
            return #from_result;
        }}
    };
    let Func {
        attrs, vis, sig, ..
    } = &f;
    // A `#[robust]` under this one sees that the fn retries already, whatever name either is
    // imported as (`valid::check_robust_twice`).
    // (An unnamed `const`, never dead code, whose value is the mark: no lint to allow.)
    let mark = crate::valid::may_retry(&config).then(|| {
        let mark = Literal::string(crate::valid::RETRYING_MARK);
        quote!(const _: &str = #mark;)
    });
    if views.is_empty() && mark.is_none() {
        quote!(#(#attrs)* #vis #sig #new_block)
    } else {
        quote!(#(#attrs)* #vis #sig { #mark #(#views)* #new_block })
    }
}

/// An async attempt's block: `body`, after a `return` of the fn's return type `ret` that never
/// runs (`if false { return __private::typed::<Ret>(); }`). An async block infers its output
/// from what it returns, and coerces nothing into a type it does not know yet; once this first
/// `return` has given it `Ret`, the body's returns and tail are checked against it, and coerce
/// into it as an `async fn`'s do (`Ok(&self.name)` into `io::Result<&str>`, `Box<Mem>` into
/// `Box<dyn Trait>`), those written by macros included. Nothing follows the body (a body that
/// diverges leaves nothing unreachable), and `Ret` is named outside it (an item of the body's
/// own cannot shadow a name of the return type).
///
/// The body's statements (`body`) are in braces of the body's own (`in_braces`, at `braces`),
/// after an unnamed constant: a block of one expression, the tail of this one, would be
/// called unnecessary by rustc's `unused_braces` (its braces are the user's). The attempt's
/// own statements (`before`: its context, the borrows that make the `async move` block own
/// each clone whole) come between the `return` and that block, not in it: the body's block
/// stays the only block in its braces, and the items it declares stay ahead of its
/// statements.
fn typed_async(
    before: &TokenStream,
    body: &TokenStream,
    ret: &Type,
    pr: &TokenStream,
    span: Span,
    braces: Span,
) -> TokenStream {
    let body = in_braces(quote!(const _: () = (); #body), braces);
    quote_spanned! {span=> {
        if false {
            return #pr::typed::<#ret>();
        }
        #before
        #body
    }}
}

/// `tokens` in braces spanned at `braces`, the body's own: a block's edition is its span's,
/// and decides when the temporaries of its tail drop (after its locals before edition 2024,
/// before them since), so a crate of an older edition keeps its rules under the attribute.
fn in_braces(tokens: TokenStream, braces: Span) -> TokenStream {
    let mut group = Group::new(proc_macro2::Delimiter::Brace, tokens);
    group.set_span(braces);
    quote!(#group)
}

//! The raw syntax of `#[robust(...)]`: items as written, every value with the span of its first
//! and last token. No rule is checked here beyond the token shapes; see `valid.rs`.
//!
//! Every nested group (`when(...)`, `on = [...]`, `exponential(...)`) is read to its end even
//! when something inside it is wrong: each error is collected at its token, and the items
//! around it are still read, so that one mistake never hides another.

use std::fmt::Display;

use proc_macro2::{Punct, Spacing, Span, TokenStream, TokenTree};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::parse::{ParseStream, Parser};
use syn::{Expr, ExprClosure, Ident, LitStr, Pat, Token, bracketed, parenthesized};

use crate::table::Syntax;

/// The first and last token of something written in the attribute. On stable Rust a span
/// cannot be joined, so an error made from both (see [`Sp::error`]) underlines the whole of it:
/// the minus of `-1` included.
#[derive(Clone, Copy)]
pub struct Sp {
    pub start: Span,
    pub end: Span,
}

impl Sp {
    /// From the first to the last token of `tokens`.
    pub fn of(tokens: &impl ToTokens) -> Sp {
        let mut iter = tokens.to_token_stream().into_iter();
        let start = iter.next().map_or_else(Span::call_site, |t| t.span());
        let end = iter.last().map_or(start, |t| t.span());
        Sp { start, end }
    }

    /// From the start of `self` to the end of `other`.
    pub fn to(self, other: Sp) -> Sp {
        Sp {
            start: self.start,
            end: other.end,
        }
    }

    /// An error underlining the span.
    pub fn error(self, msg: impl Display) -> syn::Error {
        let mut a = Punct::new('-', Spacing::Alone);
        a.set_span(self.start);
        let mut b = Punct::new('-', Spacing::Alone);
        b.set_span(self.end);
        let tokens: TokenStream = [TokenTree::from(a), TokenTree::from(b)]
            .into_iter()
            .collect();
        syn::Error::new_spanned(tokens, msg)
    }
}

impl From<Span> for Sp {
    fn from(s: Span) -> Sp {
        Sp { start: s, end: s }
    }
}

/// The attribute's arguments, and the syntax errors met while reading them.
pub struct Args {
    pub items: Vec<Item>,
    pub errors: Vec<syn::Error>,
}

/// `key = value`, or `when(KIND, key = value, ...)` (key `when`, value [`Value::When`]).
pub struct Item {
    pub key: Ident,
    pub value: Value,
}

pub enum Value {
    /// `2`, `-1`, `0.5`, `150ms`.
    Number(Number),
    /// `"2s"`.
    Str(LitStr),
    /// `none`, `full`, `ctx`.
    Word(Ident),
    /// `exponential(...)`, `custom(...)`.
    Call(Call),
    /// `[2, 3]`.
    Numbers(Sp, Vec<Number>),
    /// `on = [KIND, ...]`: the kinds read without error, and whether every kind read.
    Kinds(Sp, Vec<Kind>, bool),
    /// `when(KIND, ...)`.
    When(When),
    /// `on_success = EXPR`.
    Expr(Box<Expr>),
    /// `p99.9` (a percentile written with a fraction: `p99`, `.`, `9`; `p95` is a word).
    Percentile(f64, Sp),
}

impl Value {
    pub fn sp(&self) -> Sp {
        match self {
            Value::Number(n) => n.sp,
            Value::Str(s) => s.span().into(),
            Value::Word(w) => w.span().into(),
            Value::Call(c) => Sp::from(c.name.span()).to(c.paren),
            Value::Numbers(s, _) | Value::Kinds(s, _, _) => *s,
            Value::When(w) => w.sp,
            Value::Expr(e) => Sp::of(e),
            Value::Percentile(_, sp) => *sp,
        }
    }
}

/// A numeric literal with an optional minus sign and an optional suffix (`150ms`, `3f32`).
#[derive(Clone)]
pub struct Number {
    /// Written with a minus sign (`-0` included: see [`Number::is_negative`]).
    pub minus: bool,
    /// The decimal digits, without sign or suffix (`"150"`, `"1.5"`, `"1e3"`).
    pub digits: String,
    /// The literal's suffix (`"ms"`, `"f32"`), empty if none.
    pub suffix: String,
    pub is_int: bool,
    /// The suffix alone, for errors about it.
    pub lit_span: Span,
    pub sp: Sp,
}

impl Number {
    /// The value as a float, with its sign (may be infinite for huge literals).
    pub fn as_f64(&self) -> f64 {
        let v: f64 = self.digits.parse().unwrap_or(f64::NAN);
        if self.minus { -v } else { v }
    }

    /// Below zero: the sign is the value's, so `-0` is not negative.
    pub fn is_negative(&self) -> bool {
        // (`-1e-9999` is negative, though it reads as `-0.0`.)
        self.as_f64() < 0.0 || (self.minus && retry_grammar::written_above_zero(&self.digits))
    }

    /// The value as an integer, saturating at the `i128` range; `None` for floats.
    pub fn as_i128(&self) -> Option<i128> {
        if !self.is_int {
            return None;
        }
        let v: i128 = self.digits.parse().unwrap_or(i128::MAX);
        Some(if self.minus { -v } else { v })
    }
}

/// Reads `-`? LITERAL: one minus sign at most (`--3` is an error), an integer or a float.
fn parse_number(input: ParseStream<'_>) -> syn::Result<Number> {
    let minus: Option<Token![-]> = input.parse()?;
    let lit: proc_macro2::Literal = input.step(|cursor| match cursor.literal() {
        Some((lit, rest)) => Ok((lit, rest)),
        None => Err(cursor.error(if minus.is_some() {
            "expected a number after `-`"
        } else {
            "expected a number"
        })),
    })?;
    let lit_span = lit.span();
    let (digits, suffix, is_int) = match syn::Lit::new(lit) {
        syn::Lit::Int(i) => (i.base10_digits().to_owned(), i.suffix().to_owned(), true),
        syn::Lit::Float(f) => (f.base10_digits().to_owned(), f.suffix().to_owned(), false),
        _ => return Err(syn::Error::new(lit_span, "expected a number")),
    };
    if digits.starts_with('-') {
        // A literal made negative by another macro: read like a second minus sign.
        return Err(syn::Error::new(
            lit_span,
            "expected a number without a second `-`",
        ));
    }
    let start = minus.map_or(lit_span, |m| m.span);
    Ok(Number {
        minus: minus.is_some(),
        digits,
        suffix,
        is_int,
        lit_span,
        sp: Sp {
            start,
            end: lit_span,
        },
    })
}

/// `name(args)`.
pub struct Call {
    pub name: Ident,
    pub args: CallArgs,
    /// The parentheses.
    pub paren: Sp,
}

pub enum CallArgs {
    /// `custom(EXPR)`: the expression, `None` when the parentheses are empty.
    Expr(Option<Box<Expr>>),
    /// `custom(...)` whose expression could not be read (the error is collected).
    Invalid,
    /// `exponential(base = 1, max = 60)`: the parameters read without error.
    Params(Vec<Item>),
}

/// `when(KIND, key = value, ...)`.
pub struct When {
    /// `None` when the kind could not be read (the error is collected).
    pub kind: Option<Kind>,
    pub overrides: Vec<Item>,
    pub sp: Sp,
}

/// A kind: `Timeout`, `Io`, `Io(A, B)`, a closure or a pattern over the error; or `Ok(..)`,
/// a closure or a pattern over the successful value (SPEC section 13).
pub enum Kind {
    Timeout(Ident),
    Io {
        ident: Ident,
        kinds: Vec<Ident>,
        sp: Sp,
    },
    Closure(Box<ExprClosure>),
    Pattern(Box<Pat>),
    /// `Ok(inner)`: `inner` is a `Closure` or a `Pattern`, over the value.
    Ok {
        inner: Box<Kind>,
        sp: Sp,
    },
}

impl Kind {
    pub fn sp(&self) -> Sp {
        match self {
            Kind::Timeout(i) => i.span().into(),
            Kind::Io { sp, .. } => *sp,
            Kind::Closure(c) => Sp::of(c),
            Kind::Pattern(p) => Sp::of(p),
            Kind::Ok { sp, .. } => *sp,
        }
    }

    /// Whether this is an `Ok(..)` kind, over values.
    pub fn is_ok(&self) -> bool {
        matches!(self, Kind::Ok { .. })
    }

    /// What duplicate checks compare: the kind as written (`Io`, a pattern's tokens), with an
    /// `Io` kind's list sorted, since it is a set (`Io(ConnectionReset, BrokenPipe)` is
    /// `Io(BrokenPipe, ConnectionReset)`).
    pub fn key(&self) -> String {
        self.text(true)
    }

    /// The kind as written, for messages.
    pub fn written(&self) -> String {
        self.text(false)
    }

    fn text(&self, sorted: bool) -> String {
        match self {
            Kind::Timeout(_) => "Timeout".into(),
            Kind::Io { kinds, .. } if kinds.is_empty() => "Io".into(),
            Kind::Io { kinds, .. } => {
                let mut names: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
                if sorted {
                    names.sort();
                }
                format!("Io({})", names.join(", "))
            }
            Kind::Closure(c) => quote::quote!(#c).to_string(),
            Kind::Pattern(p) => quote::quote!(#p).to_string(),
            Kind::Ok { inner, .. } => format!("Ok({})", inner.text(sorted)),
        }
    }
}

fn at_item_end(input: ParseStream<'_>) -> bool {
    input.is_empty() || input.peek(Token![,])
}

/// Skips tokens up to and including the next top-level comma.
fn skip_item(input: ParseStream<'_>) {
    let _ = input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((tt, next)) = rest.token_tree() {
            rest = next;
            if let TokenTree::Punct(p) = &tt
                && p.as_char() == ','
            {
                return Ok(((), rest));
            }
        }
        Ok(((), rest))
    });
}

/// Reads a comma-separated list to its end with `one`, collecting errors: after an error the
/// rest of that element is skipped and the next one is read.
fn parse_list<T>(
    input: ParseStream<'_>,
    errors: &mut Vec<syn::Error>,
    mut one: impl FnMut(ParseStream<'_>, &mut Vec<syn::Error>) -> Option<T>,
) -> Vec<T> {
    let mut out = Vec::new();
    while !input.is_empty() {
        if input.peek(Token![,]) {
            errors.push(syn::Error::new(input.span(), "expected an item before `,`"));
            skip_item(input);
            continue;
        }
        match one(input, errors) {
            Some(v) => {
                out.push(v);
                if input.is_empty() {
                    break;
                }
                if input.parse::<Token![,]>().is_err() {
                    errors.push(syn::Error::new(input.span(), "expected `,` between items"));
                    skip_item(input);
                }
            }
            None => skip_item(input),
        }
    }
    out
}

/// `f(input)`, with its error collected.
fn collect<T>(errors: &mut Vec<syn::Error>, r: syn::Result<T>) -> Option<T> {
    r.map_err(|e| errors.push(e)).ok()
}

fn parse_kind(input: ParseStream<'_>, errors: &mut Vec<syn::Error>) -> Option<Kind> {
    match parse_kind_or_err(input, errors) {
        Ok(k) => k,
        Err(e) => {
            errors.push(e);
            None
        }
    }
}

fn parse_kind_or_err(
    input: ParseStream<'_>,
    errors: &mut Vec<syn::Error>,
) -> syn::Result<Option<Kind>> {
    if input.peek(Token![|]) || input.peek(Token![||]) || input.peek(Token![move]) {
        return Ok(Some(Kind::Closure(Box::new(input.parse()?))));
    }
    if input.peek(Ident) {
        let fork = input.fork();
        let ident: Ident = fork.parse()?;
        if ident == "Ok" {
            return parse_ok_kind(input).map(Some);
        }
        if ident == "Timeout" && at_item_end(&fork) {
            input.parse::<Ident>()?;
            return Ok(Some(Kind::Timeout(ident)));
        }
        if ident == "Io" && (at_item_end(&fork) || fork.peek(syn::token::Paren)) {
            input.parse::<Ident>()?;
            let mut kinds = Vec::new();
            let mut sp = Sp::from(ident.span());
            if input.peek(syn::token::Paren) {
                let content;
                let paren = parenthesized!(content in input);
                let parens = Sp::from(paren.span.open()).to(paren.span.close().into());
                sp = sp.to(parens);
                let before = errors.len();
                kinds = parse_list(&content, errors, |input, errors| {
                    // A path (`ErrorKind::NotFound`): the kind is named alone.
                    if input.peek(Ident) && input.peek2(Token![::]) {
                        let path = collect(errors, input.parse::<syn::Path>())?;
                        let last = path.segments.last().map(|s| s.ident.to_string());
                        errors.push(syn::Error::new_spanned(
                            &path,
                            format!(
                                "write the kind's name alone, `{}`: `Io(..)` takes names of `std::io::ErrorKind`, not paths",
                                last.unwrap_or_default()
                            ),
                        ));
                        return None;
                    }
                    collect(
                        errors,
                        input.parse::<Ident>().map_err(|e| {
                            syn::Error::new(
                                e.span(),
                                "expected the name of a `std::io::ErrorKind`, like `ConnectionRefused`",
                            )
                        }),
                    )
                });
                if errors.len() > before {
                    return Ok(None);
                }
                if kinds.is_empty() {
                    return Err(parens.error(
                        "`Io()` needs at least one `std::io::ErrorKind`, like `Io(ConnectionRefused)`; write `Io` for any I/O error",
                    ));
                }
            }
            // `Io(A) | Io(B)`: one `Io` takes every kind.
            if input.peek(Token![|]) && !input.peek(Token![||]) {
                let bar: Token![|] = input.parse()?;
                return Err(syn::Error::new(
                    bar.span,
                    "`Io` is a kind of its own, not a pattern: write its error kinds in one list, like `Io(NotFound, BrokenPipe)`, or list the kinds separately, like `on = [Timeout, Io]`",
                ));
            }
            return Ok(Some(Kind::Io { ident, kinds, sp }));
        }
    }
    let pat = Pat::parse_multi_with_leading_vert(input).map_err(|e| {
        syn::Error::new(
            e.span(),
            "expected an error kind: `Timeout`, `Io`, `Io(ErrorKind, ...)`, a pattern such as `MyError::Busy { .. }`, or a closure `|e| ...`",
        )
    })?;
    Ok(Some(Kind::Pattern(Box::new(pat))))
}

/// `Ok(PATTERN)` or `Ok(CLOSURE)`.
fn parse_ok_kind(input: ParseStream<'_>) -> syn::Result<Kind> {
    let ident: Ident = input.parse()?;
    let what = "`Ok(..)` takes one pattern or closure over the fn's `Ok` value, like `Ok(Status::Busy)` or `Ok(|r: &Response| r.status() == 503)`";
    if !input.peek(syn::token::Paren) {
        return Err(syn::Error::new(ident.span(), what));
    }
    let content;
    let paren = parenthesized!(content in input);
    let sp = Sp::from(ident.span()).to(Sp::from(paren.span.close()));
    if content.is_empty() {
        return Err(sp.error(what));
    }
    let inner = if content.peek(Token![|]) || content.peek(Token![||]) || content.peek(Token![move])
    {
        content.parse().map(|c| Kind::Closure(Box::new(c)))
    } else {
        Pat::parse_multi_with_leading_vert(&content)
            .map(|p| Kind::Pattern(Box::new(p)))
            .map_err(|e| syn::Error::new(e.span(), what))
    };
    let rest = (!content.is_empty()).then(|| content.span());
    // What is left inside the parentheses is consumed, so that the error is this one.
    let _ = content.parse::<proc_macro2::TokenStream>();
    let inner = inner?;
    if let Some(at) = rest {
        return Err(syn::Error::new(at, what));
    }
    Ok(Kind::Ok {
        inner: Box::new(inner),
        sp,
    })
}

/// Reads a value: number, string, word, call or list of numbers.
fn parse_value(input: ParseStream<'_>, errors: &mut Vec<syn::Error>) -> syn::Result<Option<Value>> {
    if input.peek(Token![-]) || input.peek(syn::LitInt) || input.peek(syn::LitFloat) {
        return parse_number(input).map(|n| Some(Value::Number(n)));
    }
    if input.peek(LitStr) {
        return input.parse().map(|s| Some(Value::Str(s)));
    }
    if input.peek(syn::token::Bracket) {
        let content;
        let bracket = bracketed!(content in input);
        let list = parse_list(&content, errors, |input, errors| {
            collect(errors, parse_number(input))
        });
        let sp = Sp::from(bracket.span.open()).to(bracket.span.close().into());
        return Ok(Some(Value::Numbers(sp, list)));
    }
    if input.peek(Ident::peek_any) {
        let name = input.call(Ident::parse_any)?;
        if input.peek(syn::token::Paren) {
            let content;
            let paren = parenthesized!(content in input);
            let paren_sp = Sp::from(paren.span.open()).to(paren.span.close().into());
            let args = if name == "custom" {
                if content.is_empty() {
                    CallArgs::Expr(None)
                } else {
                    let e = collect(errors, content.parse::<Expr>());
                    let extra = !content.is_empty();
                    if extra {
                        if e.is_some() {
                            errors.push(syn::Error::new(
                                content.span(),
                                "`custom` takes one expression: `custom(MyBackoff::new())`",
                            ));
                        }
                        let _ = content.parse::<TokenStream>();
                    }
                    match e {
                        Some(e) if !extra => CallArgs::Expr(Some(Box::new(e))),
                        _ => CallArgs::Invalid,
                    }
                }
            } else {
                CallArgs::Params(parse_list(&content, errors, parse_item))
            };
            return Ok(Some(Value::Call(Call {
                name,
                args,
                paren: paren_sp,
            })));
        }
        // `p99.9`: the word `p99`, a dot and the fraction's digits.
        let text = name.to_string();
        if input.peek(Token![.])
            && text.len() > 1
            && text.starts_with('p')
            && text[1..].bytes().all(|b| b.is_ascii_digit())
        {
            input.parse::<Token![.]>()?;
            let frac: syn::LitInt = input.parse()?;
            let sp = Sp::from(name.span()).to(frac.span().into());
            // The fraction's digits as written: `base10_digits` would drop the leading zeros of
            // `p99.05` (read as p99.5) and accept `p99.0_5` or `p99.0x5`.
            let digits = frac.to_string();
            return match format!("{}.{digits}", &text[1..]).parse::<f64>() {
                Ok(v) if digits.bytes().all(|b| b.is_ascii_digit()) => {
                    Ok(Some(Value::Percentile(v, sp)))
                }
                _ => Err(sp.error("expected a percentile like `p95` or `p99.9`")),
            };
        }
        return Ok(Some(Value::Word(name)));
    }
    Err(input
        .error("expected a value: a number, a string, a name or a call like `exponential(...)`"))
}

/// Reads one `key = value` or `when(...)` item; on a syntax error, collects it and returns
/// `None` (the caller skips the rest of the item).
/// A strategy's parameter, `base = 1`.
fn parse_item(input: ParseStream<'_>, errors: &mut Vec<syn::Error>) -> Option<Item> {
    match parse_item_or_err(input, errors, false) {
        Ok(item) => item,
        Err(e) => {
            errors.push(e);
            None
        }
    }
}

/// A setting of the attribute or of a `when` clause: an unknown key is kept with its value's
/// tokens skipped, so that it is reported by name.
fn parse_setting(input: ParseStream<'_>, errors: &mut Vec<syn::Error>) -> Option<Item> {
    match parse_item_or_err(input, errors, true) {
        Ok(item) => item,
        Err(e) => {
            errors.push(e);
            None
        }
    }
}

fn parse_item_or_err(
    input: ParseStream<'_>,
    errors: &mut Vec<syn::Error>,
    setting: bool,
) -> syn::Result<Option<Item>> {
    let key = input
        .call(Ident::parse_any)
        .map_err(|e| syn::Error::new(e.span(), "expected a setting like `retries = 3`"))?;
    let syntax = crate::table::syntax(&key.to_string());
    if syntax == Syntax::Call {
        // `hedge(after = .., max = ..)`: the key is written as a call.
        if !input.peek(syn::token::Paren) {
            return Err(syn::Error::new(
                key.span(),
                format!(
                    "write `{key}` with its parameters in parentheses: `{key}(after = \"50ms\", max = 1)`"
                ),
            ));
        }
        let content;
        let paren = parenthesized!(content in input);
        let paren_sp = Sp::from(paren.span.open()).to(paren.span.close().into());
        let params = parse_list(&content, errors, parse_item);
        return Ok(Some(Item {
            key: key.clone(),
            value: Value::Call(Call {
                name: key,
                args: CallArgs::Params(params),
                paren: paren_sp,
            }),
        }));
    }
    if syntax == Syntax::When && input.peek(syn::token::Paren) {
        let content;
        let paren = parenthesized!(content in input);
        let sp = Sp::from(key.span()).to(paren.span.close().into());
        let kind = if content.is_empty() {
            errors.push(
                sp.error("`when` needs an error kind and overrides: `when(Timeout, retries = 5)`"),
            );
            None
        } else if content.peek(Token![,]) {
            errors.push(syn::Error::new(
                content.span(),
                "expected an error kind before `,`: `when(Timeout, retries = 5)`",
            ));
            None
        } else {
            let k = parse_kind(&content, errors);
            if k.is_none() || !at_item_end(&content) {
                if k.is_some() {
                    errors.push(syn::Error::new(
                        content.span(),
                        "expected `,` after the kind",
                    ));
                }
                skip_item(&content);
                None
            } else {
                let _ = content.parse::<Option<Token![,]>>();
                k
            }
        };
        let overrides = parse_list(&content, errors, parse_setting);
        return Ok(Some(Item {
            key,
            value: Value::When(When {
                kind,
                overrides,
                sp,
            }),
        }));
    }
    let eq = input.parse::<Token![=]>().map_err(|_| {
        syn::Error::new(
            key.span(),
            format!("expected `{key} = value` (or `when(KIND, key = value, ...)`)"),
        )
    })?;
    if at_item_end(input) {
        return Err(Sp::from(key.span())
            .to(eq.span.into())
            .error(format!("`{key} =` needs a value after the `=`")));
    }
    let known = crate::table::KEYS.iter().any(|k| key == k.name);
    let value = if setting && !known {
        // An unknown key is reported by name (with "did you mean"), whatever its value: the
        // value's tokens are skipped, so that a closure after a misspelled callback key does
        // not read as a malformed value.
        while !at_item_end(input) {
            input.parse::<TokenTree>()?;
        }
        Value::Expr(Box::new(syn::Expr::Verbatim(TokenStream::new())))
    } else if syntax == Syntax::Expr {
        Value::Expr(Box::new(input.parse()?))
    } else if syntax == Syntax::Kinds {
        if !input.peek(syn::token::Bracket) {
            return Err(input.error("`on` takes a list of error kinds: `on = [Timeout, Io]`"));
        }
        let content;
        let bracket = bracketed!(content in input);
        let before = errors.len();
        let list = parse_list(&content, errors, parse_kind);
        Value::Kinds(
            Sp::from(bracket.span.open()).to(bracket.span.close().into()),
            list,
            errors.len() == before,
        )
    } else {
        match parse_value(input, errors)? {
            Some(v) => v,
            None => return Ok(None),
        }
    };
    Ok(Some(Item { key, value }))
}

/// Reads comma-separated items to the end of `input`, collecting every error.
pub fn parse_items(input: ParseStream<'_>) -> (Vec<Item>, Vec<syn::Error>) {
    let mut errors = Vec::new();
    let items = parse_list(input, &mut errors, parse_setting);
    (items, errors)
}

impl Args {
    /// Reads the attribute's tokens; never fails: errors are in [`Args::errors`].
    pub fn read(tokens: TokenStream) -> Args {
        let parsed = (|input: ParseStream<'_>| Ok(parse_items(input))).parse2(tokens);
        let (items, errors) = parsed.unwrap_or_else(|e| (Vec::new(), vec![e]));
        Args { items, errors }
    }
}

/// The function under the attribute. Its body is kept as tokens and never parsed: the
/// expansion only moves it, so a deeply nested body costs nothing here.
pub struct Func {
    pub attrs: Vec<syn::Attribute>,
    pub vis: syn::Visibility,
    pub sig: syn::Signature,
    pub body: proc_macro2::Group,
}

impl syn::parse::Parse for Func {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut attrs = input.call(syn::Attribute::parse_outer)?;
        let vis = input.parse()?;
        let sig = input.parse()?;
        let body = input.step(|cursor| match cursor.token_tree() {
            Some((TokenTree::Group(g), rest)) if g.delimiter() == proc_macro2::Delimiter::Brace => {
                Ok((g, rest))
            }
            // A body a `macro_rules!` macro passed as `$body:block` comes in an invisible
            // group.
            Some((TokenTree::Group(g), rest)) if g.delimiter() == proc_macro2::Delimiter::None => {
                let mut inner = g.stream().into_iter();
                match (inner.next(), inner.next()) {
                    (Some(TokenTree::Group(b)), None)
                        if b.delimiter() == proc_macro2::Delimiter::Brace =>
                    {
                        Ok((b, rest))
                    }
                    _ => Err(cursor.error("expected the function's body")),
                }
            }
            _ => Err(cursor.error("expected the function's body")),
        })?;
        // The body's inner attributes (`#![allow(..)]` first in it) apply to the fn: they
        // become outer ones, since the body is moved into a closure or an `async` block,
        // where inner attributes are not allowed.
        let (inner, body) = inner_attributes(body)?;
        attrs.extend(inner);
        Ok(Func {
            attrs,
            vis,
            sig,
            body,
        })
    }
}

/// The inner attributes at the start of `body` (`#![..]`, and `//!` comments), as outer ones,
/// and the body without them.
fn inner_attributes(
    body: proc_macro2::Group,
) -> syn::Result<(Vec<syn::Attribute>, proc_macro2::Group)> {
    let tokens: Vec<TokenTree> = body.stream().into_iter().collect();
    let mut attrs = Vec::new();
    let mut at = 0;
    while let [
        TokenTree::Punct(hash),
        TokenTree::Punct(bang),
        TokenTree::Group(meta),
        ..,
    ] = &tokens[at..]
        && hash.as_char() == '#'
        && bang.as_char() == '!'
        && meta.delimiter() == proc_macro2::Delimiter::Bracket
    {
        let outer = quote::quote_spanned!(hash.span()=> #hash #meta);
        attrs.extend(syn::parse::Parser::parse2(
            syn::Attribute::parse_outer,
            outer,
        )?);
        at += 3;
    }
    if at == 0 {
        return Ok((attrs, body));
    }
    let mut rest = proc_macro2::Group::new(
        proc_macro2::Delimiter::Brace,
        tokens[at..].iter().cloned().collect(),
    );
    rest.set_span(body.span());
    Ok((attrs, rest))
}

/// The start of an item that is not a function (its keyword to its name), for the error that
/// says so: `struct Foo`, `impl Trait for T`, `fn f(..) -> R;`.
pub fn item_sp(item: &TokenStream) -> Sp {
    let mut tokens = item.clone().into_iter().peekable();
    // Skip the outer attributes: `#` followed by a bracketed group.
    while let Some(TokenTree::Punct(p)) = tokens.peek() {
        if p.as_char() != '#' {
            break;
        }
        tokens.next();
        tokens.next();
    }
    let Some(first) = tokens.next() else {
        return Span::call_site().into();
    };
    let start = first.span();
    let mut end = start;
    const LEADING: &[&str] = &[
        "pub", "crate", "struct", "enum", "union", "trait", "impl", "mod", "const", "static",
        "type", "use", "extern", "unsafe", "async", "fn", "auto",
    ];
    let mut tt = Some(first);
    while let Some(t) = tt {
        end = t.span();
        match &t {
            TokenTree::Ident(i) if LEADING.contains(&i.to_string().as_str()) => {}
            TokenTree::Group(g) if g.delimiter() == proc_macro2::Delimiter::Parenthesis => {}
            _ => break,
        }
        tt = tokens.next();
    }
    Sp { start, end }
}

#[cfg(test)]
mod tests {
    use syn::parse::Parser;

    use super::*;

    /// The value `tokens` reads as, or the error's message.
    fn value(tokens: &str) -> Result<Option<Value>, String> {
        let tokens: TokenStream = tokens.parse().expect("valid tokens");
        let mut errors = Vec::new();
        (|input: ParseStream<'_>| parse_value(input, &mut errors))
            .parse2(tokens)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_percentiles_fraction_is_read_as_written() {
        let read = |t: &str| match value(t) {
            Ok(Some(Value::Percentile(v, _))) => Ok(v),
            Ok(_) => Err("not a percentile".to_owned()),
            Err(e) => Err(e),
        };
        assert_eq!(read("p99.9"), Ok(99.9));
        assert_eq!(read("p99.05"), Ok(99.05));
        assert_eq!(read("p99.009"), Ok(99.009));
        assert_eq!(read("p50.0"), Ok(50.0));
        for wrong in ["p99.0_5", "p99.0x5", "p99.5u8"] {
            assert_eq!(
                read(wrong),
                Err("expected a percentile like `p95` or `p99.9`".to_owned()),
                "{wrong}"
            );
        }
    }
}

//! The raw syntax of `#[robust(...)]`: items as written, every value with its span.
//! No rule is checked here beyond the token shapes; see `valid.rs`.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Expr, ExprClosure, Ident, Lit, LitStr, Pat, Token, bracketed, parenthesized};

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
    /// `2`, `-1`, `0.5`.
    Number(Number),
    /// `"2s"`.
    Str(LitStr),
    /// `none`, `full`, `ctx`.
    Word(Ident),
    /// `exponential(...)`, `custom(...)`: the arguments are read by the validator.
    Call(Call),
    /// `[2, 3]`.
    Numbers(Span, Vec<Number>),
    /// `on = [KIND, ...]`.
    Kinds(Span, Vec<Kind>),
    /// `when(KIND, ...)`.
    When(When),
    /// `on_success = EXPR`.
    Expr(Expr),
}

impl Value {
    pub fn span(&self) -> Span {
        match self {
            Value::Number(n) => n.span,
            Value::Str(s) => s.span(),
            Value::Word(w) => w.span(),
            Value::Call(c) => c.name.span().join(c.span).unwrap_or(c.name.span()),
            Value::Numbers(s, _) | Value::Kinds(s, _) => *s,
            Value::When(w) => w.span,
            Value::Expr(e) => e.span(),
        }
    }
}

/// A numeric literal with an optional minus sign.
#[derive(Clone)]
pub struct Number {
    pub negative: bool,
    pub digits: String,
    pub is_int: bool,
    pub span: Span,
}

impl Number {
    /// The value as a float (may be infinite for huge literals).
    pub fn as_f64(&self) -> f64 {
        let v: f64 = self.digits.parse().unwrap_or(f64::NAN);
        if self.negative { -v } else { v }
    }

    /// The value as an integer, saturating at the `i64` range; `None` for floats.
    pub fn as_i64(&self) -> Option<i64> {
        if !self.is_int {
            return None;
        }
        let v: i128 = self.digits.parse().unwrap_or(i128::MAX);
        let v = if self.negative { -v } else { v };
        Some(v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
    }
}

impl Parse for Number {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let minus: Option<Token![-]> = input.parse()?;
        let lit: Lit = input.parse()?;
        let (digits, is_int) = match &lit {
            Lit::Int(i) => (i.base10_digits().to_owned(), true),
            Lit::Float(f) => (f.base10_digits().to_owned(), false),
            other => return Err(syn::Error::new(other.span(), "expected a number")),
        };
        let span = match minus {
            Some(m) => m.span.join(lit.span()).unwrap_or(lit.span()),
            None => lit.span(),
        };
        Ok(Number {
            negative: minus.is_some(),
            digits,
            is_int,
            span,
        })
    }
}

/// `name(args)`, arguments kept as tokens.
pub struct Call {
    pub name: Ident,
    pub args: TokenStream,
    /// The span of the parentheses.
    pub span: Span,
}

/// `when(KIND, key = value, ...)`.
pub struct When {
    pub kind: Kind,
    pub overrides: Vec<Item>,
    pub span: Span,
}

/// An error kind: `Timeout`, `Io`, `Io(A, B)`, a closure or a pattern.
pub enum Kind {
    Timeout(Ident),
    Io {
        ident: Ident,
        kinds: Vec<Ident>,
        span: Span,
    },
    Closure(Box<ExprClosure>),
    Pattern(Box<Pat>),
}

impl Kind {
    pub fn span(&self) -> Span {
        match self {
            Kind::Timeout(i) => i.span(),
            Kind::Io { span, .. } => *span,
            Kind::Closure(c) => c.span(),
            Kind::Pattern(p) => p.span(),
        }
    }

    /// A key that identifies the kind for duplicate checks: its tokens as text.
    pub fn key(&self) -> String {
        match self {
            Kind::Timeout(_) => "Timeout".into(),
            Kind::Io { kinds, .. } => {
                let names: Vec<String> = kinds.iter().map(|k| k.to_string()).collect();
                format!("Io({})", names.join(","))
            }
            Kind::Closure(c) => quote::quote!(#c).to_string(),
            Kind::Pattern(p) => quote::quote!(#p).to_string(),
        }
    }
}

fn at_item_end(input: ParseStream<'_>) -> bool {
    input.is_empty() || input.peek(Token![,])
}

impl Parse for Kind {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        if input.peek(Token![|]) || input.peek(Token![||]) || input.peek(Token![move]) {
            return Ok(Kind::Closure(Box::new(input.parse()?)));
        }
        if input.peek(Ident) {
            let fork = input.fork();
            let ident: Ident = fork.parse()?;
            if ident == "Timeout" && at_item_end(&fork) {
                input.parse::<Ident>()?;
                return Ok(Kind::Timeout(ident));
            }
            if ident == "Io" && (at_item_end(&fork) || fork.peek(syn::token::Paren)) {
                input.parse::<Ident>()?;
                let mut kinds = Vec::new();
                let mut span = ident.span();
                if input.peek(syn::token::Paren) {
                    let content;
                    let paren = parenthesized!(content in input);
                    span = ident.span().join(paren.span.join()).unwrap_or(span);
                    let list = content.parse_terminated(Ident::parse, Token![,])?;
                    if list.is_empty() {
                        return Err(syn::Error::new(
                            paren.span.join(),
                            "`Io()` needs at least one `std::io::ErrorKind`, like `Io(ConnectionRefused)`; write `Io` for any I/O error",
                        ));
                    }
                    kinds.extend(list);
                }
                return Ok(Kind::Io { ident, kinds, span });
            }
        }
        let pat = Pat::parse_multi_with_leading_vert(input).map_err(|e| {
            syn::Error::new(
                e.span(),
                "expected an error kind: `Timeout`, `Io`, `Io(ErrorKind, ...)`, a pattern such as `MyError::Busy { .. }`, or a closure `|e| ...`",
            )
        })?;
        Ok(Kind::Pattern(Box::new(pat)))
    }
}

/// Reads a generic value: number, string, word, call or list of numbers.
fn parse_value(input: ParseStream<'_>) -> syn::Result<Value> {
    if input.peek(Token![-]) || input.peek(syn::LitInt) || input.peek(syn::LitFloat) {
        return Ok(Value::Number(input.parse()?));
    }
    if input.peek(LitStr) {
        return Ok(Value::Str(input.parse()?));
    }
    if input.peek(syn::token::Bracket) {
        let content;
        let bracket = bracketed!(content in input);
        let list = content.parse_terminated(Number::parse, Token![,])?;
        return Ok(Value::Numbers(
            bracket.span.join(),
            list.into_iter().collect(),
        ));
    }
    if input.peek(Ident::peek_any) {
        let name = input.call(Ident::parse_any)?;
        if input.peek(syn::token::Paren) {
            let content;
            let paren = parenthesized!(content in input);
            return Ok(Value::Call(Call {
                name,
                args: content.parse()?,
                span: paren.span.join(),
            }));
        }
        return Ok(Value::Word(name));
    }
    Err(input
        .error("expected a value: a number, a string, a name or a call like `exponential(...)`"))
}

/// Reads one `key = value` or `when(...)` item.
fn parse_item(input: ParseStream<'_>) -> syn::Result<Item> {
    let key = input.call(Ident::parse_any)?;
    if key == "when" && input.peek(syn::token::Paren) {
        let content;
        let paren = parenthesized!(content in input);
        let kind: Kind = content.parse()?;
        let mut overrides = Vec::new();
        while !content.is_empty() {
            content.parse::<Token![,]>()?;
            if content.is_empty() {
                break;
            }
            overrides.push(parse_item(&content)?);
        }
        let span = key.span().join(paren.span.join()).unwrap_or(key.span());
        return Ok(Item {
            key,
            value: Value::When(When {
                kind,
                overrides,
                span,
            }),
        });
    }
    input.parse::<Token![=]>().map_err(|_| {
        syn::Error::new(
            key.span(),
            format!("expected `{key} = value` (or `when(KIND, key = value, ...)`)"),
        )
    })?;
    let value = match key.to_string().as_str() {
        "on_success" | "on_error" | "hint" | "on_retry" | "budget" | "breaker" => {
            Value::Expr(input.parse()?)
        }
        "on" => {
            if !input.peek(syn::token::Bracket) {
                return Err(input.error("`on` takes a list of error kinds: `on = [Timeout, Io]`"));
            }
            let content;
            let bracket = bracketed!(content in input);
            let list = content.parse_terminated(Kind::parse, Token![,])?;
            Value::Kinds(bracket.span.join(), list.into_iter().collect())
        }
        _ => parse_value(input)?,
    };
    Ok(Item { key, value })
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

/// Reads comma-separated items, collecting errors instead of stopping at the first.
pub fn parse_items(input: ParseStream<'_>) -> (Vec<Item>, Vec<syn::Error>) {
    let mut items = Vec::new();
    let mut errors = Vec::new();
    while !input.is_empty() {
        match parse_item(input) {
            Ok(item) => {
                items.push(item);
                if input.is_empty() {
                    break;
                }
                if let Err(e) = input.parse::<Token![,]>() {
                    errors.push(syn::Error::new(e.span(), "expected `,` between items"));
                    skip_item(input);
                }
            }
            Err(e) => {
                errors.push(e);
                skip_item(input);
            }
        }
    }
    (items, errors)
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let (items, errors) = parse_items(input);
        Ok(Args { items, errors })
    }
}

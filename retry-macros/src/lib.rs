//! The `#[robust(...)]` attribute: per-attempt timeouts, retries, backoff, jitter, per-error
//! rules and callbacks for a function returning a `Result`, validated at compile time.
//!
//! Use it through `retry_runtime::robust`; the documentation, with examples, is there.
//!
//! The crate reads the attribute into a raw syntax model with spans (`ast`), checks every rule
//! and the function's shape with the span of the offending token (`valid`), producing the
//! validated model (`model`), and writes the function with its body run in a loop over the
//! attempts (`expand`). One table (`table`) holds the keys, strategies, jitters and kinds:
//! parsing, checks and messages ("expected one of", "did you mean") all read it. Every error is collected; on any error the function is emitted unchanged next
//! to the errors, so one mistake does not cascade into others.

use proc_macro::TokenStream;

mod ast;
mod expand;
mod model;
mod table;
mod valid;

/// Types and expressions nested thousands of levels deep are valid Rust, and reading them
/// recurses: the macro must not be what overflows first. Inputs whose attribute and signature
/// hold more than [`DEEP`] tokens (the body is never parsed) run on a stack of [`STACK`] bytes
/// (the `stacker` crate, as rustc itself does); other inputs run on the compiler's own.
const DEEP: usize = 1_000;
const STACK: usize = 256 * 1024 * 1024;

/// Makes a function resilient: see `retry_runtime::robust` for the documentation.
#[proc_macro_attribute]
pub fn robust(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr = proc_macro2::TokenStream::from(attr);
    let item = proc_macro2::TokenStream::from(item);
    if tokens_outside_bodies(&attr) + tokens_outside_bodies(&item) > DEEP {
        stacker::grow(STACK, move || robust2(attr, item)).into()
    } else {
        robust2(attr, item).into()
    }
}

/// The number of tokens in `tokens`, groups included, but not inside a top-level `{ ... }`
/// (a fn's body, which the macro moves without reading). Iterative: no recursion here.
fn tokens_outside_bodies(tokens: &proc_macro2::TokenStream) -> usize {
    use proc_macro2::{Delimiter, TokenTree};
    let mut count = 0;
    let mut stack: Vec<proc_macro2::token_stream::IntoIter> = Vec::new();
    for tt in tokens.clone() {
        count += 1;
        if let TokenTree::Group(g) = tt
            && g.delimiter() != Delimiter::Brace
        {
            stack.push(g.stream().into_iter());
        }
        while let Some(iter) = stack.last_mut() {
            match iter.next() {
                Some(TokenTree::Group(g)) => {
                    count += 1;
                    stack.push(g.stream().into_iter());
                }
                Some(_) => count += 1,
                None => {
                    stack.pop();
                }
            }
        }
    }
    count
}

fn robust2(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let mut errors = valid::Errors::default();
    let attr_names = expand::names_in(attr.clone());
    let args = ast::Args::read(attr);
    for e in args.errors {
        errors.push(e);
    }
    let func = match syn::parse2::<ast::Func>(item.clone()) {
        Ok(f) => Some(f),
        // A fn with a body whose signature syn does not read: in edition 2015, a parameter
        // without a name (`fn get(&self, u32)`) or named by a later keyword (`dyn: u32`).
        Err(e) if fn_with_body(&item) && syn::parse2::<syn::Item>(item.clone()).is_err() => {
            errors.push(syn::Error::new(
                e.span(),
                format!(
                    "`#[robust]` cannot read this function's signature ({e}): it reads signatures as editions 2018 and later write them, where every parameter has a name and `async`, `await`, `dyn` and `try` are keywords"
                ),
            ));
            None
        }
        Err(_) => {
            errors.at(
                ast::item_sp(&item),
                "`#[robust]` applies to functions with a body (free functions, methods, trait impl methods)",
            );
            None
        }
    };
    let params = func.as_ref().map(valid::param_names).unwrap_or_default();
    let config = valid::validate(args.items, &params, &mut errors);
    valid::check_never_retries(&config, &mut errors);
    let fallback_by_type = valid::check_fallback_reachable(&config, func.as_ref(), &mut errors);
    valid::check_under_deadline(&config, &mut errors);
    valid::check_backoff_fits(
        &config,
        func.as_ref().is_some_and(|f| f.sig.asyncness.is_some()),
        &mut errors,
    );
    valid::check_jitter_reads_strategy(&config, &mut errors);
    valid::check_scale_rounds_to_zero(&config, &mut errors);
    valid::check_backoff_never_waits(&config, &mut errors);
    valid::check_backoff_grows(&config, &mut errors);
    // Rules dead only if the error type is `std::io::Error`, for the expansion to check.
    let mut io_dead = (Vec::new(), valid::IoSpelling::Unknown);
    if let Some(f) = &func {
        valid::check_fn(f, &mut errors);
        valid::check_robust_twice(&config, f, &mut errors);
        valid::check_hedge(&config, f, &mut errors);
        valid::check_blocking_timeout(&config, f, &mut errors);
        valid::check_async_deadline(&config, f, &mut errors);
        valid::check_mut_params_in_callbacks(&config, f, &mut errors);
        io_dead = valid::check_dead_whens(&config, f, &mut errors);
        io_dead.0.extend(fallback_by_type);
    }
    match (errors.finish(), func) {
        (None, Some(func)) => expand::expand(config, func, &attr_names, &io_dead),
        (Some(e), _) => with_errors(item, e),
        (None, None) => item,
    }
}

/// Whether `item` may be a fn with a body: `fn` among its tokens before a last `{ .. }`. (With
/// an item syn does not read, as a whole, either: `impl From<fn() -> u8> for W {}` is read.)
fn fn_with_body(item: &proc_macro2::TokenStream) -> bool {
    use proc_macro2::{Delimiter, TokenTree};
    let tokens: Vec<TokenTree> = item.clone().into_iter().collect();
    let body =
        matches!(tokens.last(), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace);
    body && tokens
        .iter()
        .any(|t| matches!(t, TokenTree::Ident(i) if i == "fn"))
}

/// The item unchanged, with the errors beside it.
fn with_errors(item: proc_macro2::TokenStream, e: syn::Error) -> proc_macro2::TokenStream {
    let errors = in_std(e.to_compile_error());
    quote::quote!(#errors #item)
}

/// syn's `::core::compile_error! { .. }` as `::std::compile_error! { .. }`, the same macro.
/// At the user's tokens, `::core` resolves in the user's edition, and in 2015 it names an item
/// of the crate's root, which holds `std` (`tests/edition-2015`). (A plain `compile_error!`
/// would miss in a module under `#![no_implicit_prelude]`.)
fn in_std(errors: proc_macro2::TokenStream) -> proc_macro2::TokenStream {
    use proc_macro2::{Ident, TokenTree};
    let mut tokens: Vec<TokenTree> = errors.into_iter().collect();
    for i in 2..tokens.len().saturating_sub(3) {
        let is = |t: &TokenTree, s: &str| t.to_string() == s;
        if is(&tokens[i], "core")
            && is(&tokens[i - 1], ":")
            && is(&tokens[i + 1], ":")
            && is(&tokens[i + 3], "compile_error")
        {
            tokens[i] = TokenTree::Ident(Ident::new("std", tokens[i].span()));
        }
    }
    tokens.into_iter().collect()
}

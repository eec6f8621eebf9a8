//! The `#[robust(...)]` attribute: per-attempt timeouts, retries, backoff, jitter, per-error
//! rules and callbacks for a function returning a `Result`, validated at compile time.
//!
//! Use it through `retry_runtime::robust`; the documentation, with examples, is there.
//!
//! The crate reads the attribute into a raw syntax model (`ast`), checks every rule with the
//! span of the offending token (`valid`), and writes the function with its body run in a loop
//! over the attempts (`expand`). On any error the function is emitted unchanged next to the
//! errors, so one mistake does not cascade into others.

use proc_macro::TokenStream;

mod ast;
mod expand;
mod valid;

/// Makes a function resilient: see `retry_runtime::robust` for the documentation.
#[proc_macro_attribute]
pub fn robust(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item2: proc_macro2::TokenStream = item.clone().into();
    let mut errors = valid::Errors::default();
    let args = match syn::parse::<ast::Args>(attr) {
        Ok(a) => a,
        Err(e) => {
            errors.push(e);
            ast::Args {
                items: Vec::new(),
                errors: Vec::new(),
            }
        }
    };
    for e in args.errors {
        errors.push(e);
    }
    let config = valid::validate(args.items, &mut errors);
    let func = match syn::parse::<syn::ItemFn>(item) {
        Ok(f) => Some(f),
        Err(_) => {
            errors.push(syn::Error::new(
                proc_macro2::Span::call_site(),
                "`#[robust]` applies to functions with a body (free functions, methods, trait impl methods)",
            ));
            None
        }
    };
    if let Some(e) = errors.finish() {
        return with_errors(item2, e);
    }
    let Some(func) = func else {
        return item2.into();
    };
    match expand::expand(config, func) {
        Ok(ts) => ts.into(),
        Err(e) => with_errors(item2, e),
    }
}

/// The item unchanged, with the errors beside it.
fn with_errors(item: proc_macro2::TokenStream, e: syn::Error) -> TokenStream {
    let errors = e.to_compile_error();
    quote::quote!(#errors #item).into()
}

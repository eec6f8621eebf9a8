//! The `#[robust(...)]` attribute. Use it through `retry_runtime::robust`.

use proc_macro::TokenStream;

/// Placeholder: the attribute is implemented in a later step; for now it leaves the item unchanged.
#[proc_macro_attribute]
pub fn robust(_attr: TokenStream, item: TokenStream) -> TokenStream {
    item
}

//! A mistake in the attribute, in a crate of edition 2015, is reported with the attribute's own
//! message, at the offending token. (syn writes errors as `::core::compile_error!`, and in this
//! edition `::core` names an item of the crate's root: each error used to read "cannot find
//! `core` in the crate root".)

#[test]
fn ui() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}

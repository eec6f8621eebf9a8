//! Compile-time behaviour of `#[robust]`: accepted forms build; every configuration mistake
//! is a compile error pointing at the offending token (expected output in `tests/ui/fail/*.stderr`).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}

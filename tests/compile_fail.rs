//! Misuse of the safe API does not compile.
//!
//! Each file in `tests/ui` is a program that must be rejected, with the
//! compiler's message kept beside it (`*.stderr`).

#[test]
fn misuse_does_not_compile() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}

//! perftest's `TestParams::decode` on arbitrary bytes; accepted blocks
//! must pass the checks and re-encode to the input.
#![no_main]

#[path = "../../tests/decoder_robustness/bootstrap.rs"]
mod bootstrap;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bootstrap::check_params(data);
});

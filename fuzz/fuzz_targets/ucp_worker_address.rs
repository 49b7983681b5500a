//! `WorkerAddress::decode` on arbitrary bytes; accepted addresses must
//! re-encode to the input and decode to themselves again.
#![no_main]

#[path = "../../tests/ucp_decoder_robustness/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::check_address(data);
});

//! perftest's `Wireup::decode` on arbitrary bytes; accepted payloads must
//! re-encode to the input, keep the key within its limit and carry a key
//! exactly when they name a buffer.
#![no_main]

#[path = "../../tests/decoder_robustness/bootstrap.rs"]
mod bootstrap;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    bootstrap::check_wireup(data);
});

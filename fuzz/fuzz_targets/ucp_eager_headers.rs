//! The eager protocol's header decoders (`decode_only`,
//! `FirstHdr::decode`, `MiddleHdr::decode`) on arbitrary bytes.
#![no_main]

#[path = "../../ucp/tests/decoder_robustness/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::check_eager_headers(data);
});

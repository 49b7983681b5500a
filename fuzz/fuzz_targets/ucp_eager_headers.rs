//! The eager and rendezvous header decoders (`decode_only`,
//! `FirstHdr::decode`, `MiddleHdr::decode`, `decode_rtr_put`,
//! `decode_atp`, `decode_rts_keys`, ...) on arbitrary bytes.
#![no_main]

#[path = "../../tests/ucp_decoder_robustness/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::check_eager_headers(data);
    checks::check_rndv_headers(data);
});

//! The one-sided (RMA) message decoders (`decode_put`, `GetReq::decode`,
//! `AtomicReq::decode`, `Reply::decode`) on arbitrary bytes.
#![no_main]

#[path = "../../tests/ucp_decoder_robustness/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::check_rma_headers(data);
});

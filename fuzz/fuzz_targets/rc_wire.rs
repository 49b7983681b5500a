//! The RC transport's wire decoders (`ConnReq::decode`, `ConnRep::decode`,
//! `parse_header`) on arbitrary bytes. Accepted input must re-encode to
//! the bytes it was read from; refusals must be explained by the input.
#![no_main]

// `checks` reaches the wire items through `super`, as it does inside the
// crate.
use rucx_rdma::rc::wire::{header, parse_header, ConnRep, ConnReq, HDR, MAGIC, REP_LEN, REQ_LEN};

#[path = "../../transports/rdma/src/rc/wire/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::check_all(data);
});

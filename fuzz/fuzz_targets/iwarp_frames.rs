//! The iWARP wire decoders (`MpaFrame::decode`, `check_fpdu` with and
//! without CRC, `DdpHeader::decode`, `ReadRequest::decode`,
//! `Terminate::decode`) on arbitrary bytes, and the bytes read as a stream
//! of FPDUs. Accepted input must re-encode to itself (reserved bits
//! aside); refusals must be explained by the input.
#![no_main]

// `checks` reaches the wire modules through `super`, as it does inside
// the crate.
use rucx_iwarp::wire::{crc, ddp, fpdu, mpa, rdmap, term, WireError};

#[path = "../../transports/iwarp/src/wire/checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    checks::check_all(data);
});

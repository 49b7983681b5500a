//! Arbitrary bytes, and real packed keys of registrations with edits,
//! into `rkey_unpack` of the `shm` memory domain: a key is accepted
//! exactly when the model of the documented layout accepts it, and then
//! declares the model's range (whose end does not wrap) and rights (known
//! bits only); a real key unpacks to its registration.
//!
//! Input: a mode byte, then raw key bytes (mode 0), the tail of a key
//! after a valid header (mode 1), or edits of real key `mode >> 2`
//! (mode 2; see `edit`).
#![no_main]

#[path = "../../transports/shm/tests/decoder_robustness/rkey.rs"]
mod rkey;

use std::sync::OnceLock;

use rkey::{Edit, Keys};
use rucx_fuzz::Input;

static KEYS: OnceLock<Keys> = OnceLock::new();

fn edit(input: &mut Input<'_>) -> Edit {
    let e = input.u8();
    match e % 5 {
        0 => Edit::Xor(input.u8(), input.u8() | 1),
        1 => Edit::Set(input.u8(), input.u8()),
        2 => Edit::Truncate(input.u8()),
        3 => Edit::Append(input.bytes(usize::from(e >> 5) + 1).to_vec()),
        _ => Edit::U64(input.u8(), input.u64()),
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let keys = KEYS.get_or_init(Keys::open);
    let mut input = Input::new(data);
    let mode = input.u8();
    match mode % 3 {
        0 => {
            keys.check(input.rest());
        }
        1 => {
            let mut k = rkey::HEADER.to_vec();
            k.extend_from_slice(input.rest());
            keys.check(&k);
        }
        _ => {
            let mut edits = Vec::new();
            while !input.is_empty() && edits.len() < 16 {
                edits.push(edit(&mut input));
            }
            keys.check_real(usize::from(mode >> 2), &edits);
        }
    }
});

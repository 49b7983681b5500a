//! Eager-protocol messages with arbitrary headers from a raw peer into a
//! real worker (through its TCP iface): decoding, matching and fragment
//! reassembly must not panic, hang or corrupt, and a well-behaved peer
//! must still get its messages through.
//!
//! Input: a receive count byte and two bytes per receive (tag, capacity),
//! a write size byte (0 = one write), then messages: a kind byte and its
//! fields, until the input ends.
#![no_main]

#[path = "../../tests/ucp_decoder_robustness/victim.rs"]
mod victim;

use std::sync::{Mutex, OnceLock};

use rucx_fuzz::{init, Input};
use victim::{Msg, Victim};

static VICTIM: OnceLock<Mutex<Victim>> = OnceLock::new();

/// Most messages per input.
const MAX_MSGS: usize = 32;

/// A length or offset: small most of the time, any `u64` when the flag
/// byte is odd.
fn size(input: &mut Input<'_>) -> u64 {
    if input.u8() & 1 == 1 {
        input.u64()
    } else {
        u64::from(input.u8()) * 4
    }
}

fn msg(input: &mut Input<'_>) -> Msg {
    let tag = |input: &mut Input<'_>| u64::from(input.u8() % 4);
    let data = |input: &mut Input<'_>| {
        let n = input.u8() as usize % 65;
        input.bytes(n).to_vec()
    };
    match input.u8() % 4 {
        0 => Msg::Only {
            tag: tag(input),
            payload: data(input),
        },
        1 => Msg::First {
            tag: tag(input),
            total: size(input),
            msg_id: u64::from(input.u8() % 4),
            frag: data(input),
        },
        2 => Msg::Middle {
            msg_id: u64::from(input.u8() % 4),
            offset: size(input),
            frag: data(input),
        },
        _ => Msg::Raw {
            id: input.u8(),
            data: data(input),
        },
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    init();
    let mut input = Input::new(data);
    let n = input.u8() as usize % 5;
    let recvs: Vec<(u64, usize)> = (0..n)
        .map(|_| (u64::from(input.u8() % 4), input.u8() as usize * 2))
        .collect();
    let piece = input.u8() as usize;
    let mut msgs = Vec::new();
    while !input.is_empty() && msgs.len() < MAX_MSGS {
        msgs.push(msg(&mut input));
    }
    let pieces = [if piece == 0 { usize::MAX } else { piece }];
    let victim = VICTIM.get_or_init(|| Mutex::new(Victim::open()));
    let mut v = victim.lock().unwrap_or_else(|e| e.into_inner());
    v.attack(&recvs, &msgs, &pieces);
});

//! PUT and PUT_ACK frames from a raw peer into a real TCP iface over
//! loopback, among active messages: puts into the iface's registered
//! windows (writable, read-only, ended, of another process, of no slot,
//! with a wrong secret)
//! at any offset, with any data, truncated or with a damaged header. The
//! iface must answer and write exactly what the model of the wire format
//! predicts, fail only that connection when the model says so, and keep
//! serving a well-behaved endpoint.
//!
//! Input: a write size byte (0 = one write), then records: a kind byte
//! and its fields (see `build`); the last record may be cut anywhere.
#![no_main]

#[path = "../../transports/tcp/tests/decoder_robustness/harness.rs"]
mod harness;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Mutex, OnceLock};

use harness::put_model::{CTRL_PUT_ACK, PUT_HDR};
use harness::{frame, hello, Target};
use rucx_fuzz::{init, Input, MAX_STREAM};

static TARGET: OnceLock<Mutex<Target>> = OnceLock::new();

/// The stream after the hello, from the input's records.
fn build(t: &Target, input: &mut Input<'_>) -> Vec<u8> {
    let mut v = Vec::new();
    while !input.is_empty() && v.len() < MAX_STREAM {
        let kind = input.u8();
        match kind % 6 {
            // A user message.
            0 => {
                let len = usize::from(input.u8());
                v.extend(frame(kind >> 3, input.bytes(len)));
            }
            // A put: window, seq, offset (small, signed), data.
            1 | 2 => {
                let w = input.u8();
                let seq = input.u64();
                let off = i64::from(input.u8() as i8) * i64::from(1 + (kind >> 4));
                let len = usize::from(input.u8()) + usize::from(input.u8() & 1) * 256;
                let data = input.bytes(len).to_vec();
                let mut f = t.put_frame(w, seq, off, &data);
                if kind & 0x80 != 0 {
                    // Damage one byte of the frame header or put header.
                    let at = usize::from(input.u8()) % (5 + PUT_HDR);
                    f[at] ^= input.u8() | 1;
                }
                v.extend(f);
            }
            // An acknowledgement of a put never made.
            3 => v.extend(frame(CTRL_PUT_ACK, input.bytes(12))),
            // Raw bytes.
            _ => {
                let len = usize::from(input.u8() % 32);
                v.extend_from_slice(input.bytes(len));
            }
        }
    }
    v
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    init();
    let mut input = Input::new(data);
    let piece = input.u8() as usize;
    let target = TARGET.get_or_init(|| Mutex::new(Target::open()));
    let mut t = target.lock().unwrap_or_else(|e| e.into_inner());
    let mut bytes = hello(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 2), 9));
    bytes.extend(build(&t, &mut input));
    if bytes.len() > MAX_STREAM {
        return;
    }
    let pieces = [if piece == 0 { usize::MAX } else { piece }];
    t.check(&bytes, &pieces);
});

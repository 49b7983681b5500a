//! Arbitrary bytes from a peer into a real TCP iface over loopback. The
//! iface must deliver exactly what a model of the wire format predicts,
//! fail only that connection, and keep serving a well-behaved endpoint.
//!
//! Input: a mode byte (no hello added / a stranger's hello / the open
//! peer's hello / the iface's own address in the hello), a write size
//! byte (0 = one write), then the stream.
#![no_main]

#[path = "../../transports/tcp/tests/decoder_robustness/harness.rs"]
mod harness;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Mutex, OnceLock};

use harness::{hello, Target};
use rucx_fuzz::{init, Input, MAX_STREAM};

static TARGET: OnceLock<Mutex<Target>> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    init();
    let mut input = Input::new(data);
    let mode = input.u8();
    let piece = input.u8() as usize;
    let rest = input.rest();
    if rest.len() > MAX_STREAM {
        return;
    }
    let target = TARGET.get_or_init(|| Mutex::new(Target::open()));
    let mut t = target.lock().unwrap_or_else(|e| e.into_inner());
    let mut bytes = match mode % 4 {
        0 => Vec::new(),
        1 => hello(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 2), 9)),
        2 => hello(t.peer_addr()),
        _ => hello(t.own_addr()),
    };
    bytes.extend_from_slice(rest);
    let pieces = [if piece == 0 { usize::MAX } else { piece }];
    t.check(&bytes, &pieces);
});

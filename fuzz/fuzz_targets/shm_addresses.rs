//! Arbitrary device and iface addresses into a real `posix` iface and a
//! real `cma` iface (opened once per process): `is_reachable` says exactly
//! what the documented address formats allow, a malformed address never
//! gives an endpoint and a real one always does, `am_short` on an endpoint
//! succeeds or fails without panicking and what it sent arrives intact,
//! and every endpoint can be destroyed.
//!
//! Input: probes, each a header byte (transport, number of sends), a
//! device address, an iface address (raw bytes, or a real address of the
//! ifaces here with edits; see `bytes`), then the sends.
#![no_main]

#[path = "../../transports/shm/tests/decoder_robustness/addresses.rs"]
mod addresses;

use std::sync::{Mutex, OnceLock};

use addresses::{Base, Bytes, Edit, Probe, Send, Target, Tl, MAX_PROBES, MAX_SENDS};
use rucx_fuzz::Input;

static TARGET: OnceLock<Mutex<Target>> = OnceLock::new();

/// Values the geometry and length fields take besides arbitrary ones.
const U32S: [u32; 12] = [
    0,
    1,
    2,
    3,
    16,
    64,
    128,
    256,
    8192,
    1 << 20,
    1 << 21,
    u32::MAX,
];

fn edit(input: &mut Input<'_>) -> Edit {
    let e = input.u8();
    match e % 6 {
        0 => Edit::Xor(u16::from(input.u8()), input.u8() | 1),
        1 => Edit::Set(u16::from(input.u8()), input.u8()),
        2 => Edit::Truncate(u16::from(input.u8() % 50)),
        3 => Edit::Append(input.bytes(usize::from(e >> 3) % 8 + 1).to_vec()),
        4 => {
            let t = input.u8();
            let v = match U32S.get(usize::from(t)) {
                Some(&v) => v,
                None => u32::from_le_bytes([input.u8(), input.u8(), input.u8(), input.u8()]),
            };
            Edit::U32(e >> 3, v)
        }
        _ => Edit::U64(e >> 3, input.u64()),
    }
}

/// An address: `sel % 8` picks raw bytes (7) or a real address (base from
/// `sel % 4`, the device address for the device), `sel >> 5` edits.
fn bytes(input: &mut Input<'_>, device: bool) -> Bytes {
    let sel = input.u8();
    if sel % 8 == 7 {
        let n = usize::from(input.u8() % 64);
        return Bytes::Raw(input.bytes(n).to_vec());
    }
    let base = if device {
        Base::Device
    } else {
        [Base::Posix, Base::PosixPeer, Base::Cma, Base::Posix][usize::from(sel % 4)]
    };
    let edits = (0..sel >> 5).map(|_| edit(input)).collect();
    Bytes::Real(base, edits)
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mut probes = Vec::new();
    while !input.is_empty() && probes.len() < MAX_PROBES {
        let h = input.u8();
        let tl = if h % 4 == 3 { Tl::Cma } else { Tl::Posix };
        let dev = bytes(&mut input, true);
        let iface = bytes(&mut input, false);
        let sends = (0..usize::from(h >> 2) % (MAX_SENDS + 1))
            .map(|_| Send {
                id: input.u8(),
                header: input.u64(),
                len: input.u8(),
            })
            .collect();
        probes.push(Probe {
            tl,
            dev,
            iface,
            sends,
        });
    }
    let target = TARGET.get_or_init(|| Mutex::new(Target::open()));
    let mut t = target.lock().unwrap_or_else(|e| e.into_inner());
    t.check(&probes);
});

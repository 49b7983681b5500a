//! Arbitrary bytes as a peer's side of the MPA handshake and what follows,
//! against the userspace iWARP engine over loopback: as the initiator
//! (request, then a stream) or as the responder (reply, then a stream).
//! The engine must not panic or hang, and must keep serving.
//!
//! Input: a mode byte (bit 0: initiator; bit 1: accept the request; the
//! rest: the piece size of the writes), then the bytes.
#![no_main]

#[path = "../../transports/iwarp/tests/handshake_robustness/harness.rs"]
mod harness;

use std::sync::{Mutex, OnceLock};

use harness::Target;

static TARGET: OnceLock<Mutex<Target>> = OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&mode, bytes)) = data.split_first() else {
        return;
    };
    if bytes.len() > 4096 {
        return;
    }
    let target = TARGET.get_or_init(|| Mutex::new(Target::open()));
    let mut t = target.lock().unwrap_or_else(|e| e.into_inner());
    if mode & 1 == 1 {
        t.play_initiator(bytes, usize::from(mode >> 2), mode & 2 == 2);
    } else {
        t.play_responder(bytes);
    }
    t.still_serves();
});

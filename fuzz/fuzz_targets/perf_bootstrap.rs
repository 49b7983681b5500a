//! perftest's bootstrap frame reader fed by a raw socket: a script of
//! reads (`recv`, `recv_outcome`, `barrier`, `check_alive`) over bytes a
//! peer wrote and then closed, compared with a model of the format.
//!
//! Input: a step count byte, one byte per step, then the stream.
#![no_main]

#[path = "../../tests/decoder_robustness/bootstrap.rs"]
mod bootstrap;

use std::sync::{Mutex, OnceLock};

use bootstrap::{Server, Step, KINDS};
use rucx::perf::bootstrap::FrameKind;
use rucx_fuzz::{init, Input, MAX_STREAM};

static SERVER: OnceLock<Mutex<Server>> = OnceLock::new();

fn step(b: u8) -> Step {
    match b % 10 {
        i @ 0..=5 => Step::Recv(KINDS[i as usize]),
        6 => Step::Outcome(FrameKind::Accept),
        7 => Step::Outcome(FrameKind::Status),
        8 => Step::Barrier,
        _ => Step::CheckAlive,
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    init();
    let mut input = Input::new(data);
    let n = 1 + input.u8() as usize % 6;
    let steps: Vec<Step> = (0..n).map(|_| step(input.u8())).collect();
    let bytes = input.rest();
    if bytes.len() > MAX_STREAM {
        return;
    }
    let server = SERVER.get_or_init(|| Mutex::new(Server::open()));
    let server = server.lock().unwrap_or_else(|e| e.into_inner());
    server.check(bytes, &steps);
});

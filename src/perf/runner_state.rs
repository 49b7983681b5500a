//! The buffers and operations in flight of a test ([`LoopState`]), kept
//! across its runs.

use crate::perf::buffers::Slots;
use crate::perf::catalog::{Command, TestType};
use crate::perf::error::Result;
use crate::perf::params::TestParams;
use std::collections::VecDeque;

/// Buffers and in-flight operations of a test, kept across the warm-up and
/// the measured run.
#[derive(Debug)]
pub struct LoopState<R> {
    pub(super) msg_len: usize,
    pub(super) max: usize,
    pub(super) validate: bool,
    pub(super) test_type: TestType,
    pub(super) command: Command,
    /// Data messages are synchronous sends.
    pub(super) sync: bool,
    /// The endpoints have error handling (`-e`), hence a keepalive the
    /// peer expects answers to: a sender whose operations finish at once
    /// still progresses now and then.
    pub(super) keepalive: bool,
    /// Tag tests: send buffers. One-sided tests: the local side of each
    /// operation (put source, get destination, fetched value).
    pub(super) send: Slots,
    /// Tag tests: receive buffers. One-sided tests with `-V`: a copy of the
    /// exposed buffer to check.
    pub(super) recv: Slots,
    /// Tag tests: the end-of-stream acknowledgement. One-sided tests: the
    /// marker byte a get stream ends with.
    pub(super) ack: Slots,
    pub(super) sends: VecDeque<(R, u64)>,
    pub(super) recvs: VecDeque<(R, u64)>,
}

impl<R: Copy> LoopState<R> {
    /// Allocates the buffers `params` need.
    pub fn new(params: &TestParams) -> Result<LoopState<R>> {
        params.check()?;
        let msg_len = params.message_size();
        let slots = params.buffer_slots();
        let max = params.outstanding as usize;
        let info = params.test.info();
        let (send_len, recv_len, recv_slots) = if !info.command.is_one_sided() {
            (msg_len, msg_len, slots)
        } else {
            // Fetched values are written as 64-bit words.
            let local = if info.command.is_atomic() { 8 } else { msg_len };
            (local, if params.validate { msg_len } else { 0 }, 1)
        };
        Ok(LoopState {
            msg_len,
            max,
            validate: params.validate,
            test_type: info.test_type,
            command: info.command,
            sync: info.command == Command::TagSync,
            keepalive: params.err_handling,
            send: Slots::new(send_len, slots)?,
            recv: Slots::new(recv_len, recv_slots)?,
            ack: Slots::new(1, 1)?,
            sends: VecDeque::with_capacity(max),
            recvs: VecDeque::with_capacity(max),
        })
    }

    /// Length of the buffer a one-sided test exposes to the peer: the
    /// message rounded up to whole 8-byte words. `None` for tag tests.
    pub fn exposed_len(&self) -> Option<usize> {
        self.command
            .is_one_sided()
            .then(|| self.msg_len.max(1).div_ceil(8) * 8)
    }

    pub(super) fn leak(&mut self) {
        self.send.leak();
        self.recv.leak();
        self.ack.leak();
    }
}

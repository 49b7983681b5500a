//! The loops of the one-sided tests, after UCX's `ucp_tests.cc`.
//!
//! Each side exposes a buffer of the message size (rounded up to 8 bytes)
//! that the peer reaches at offset 0. Its *marker* is byte `len - 1`, the
//! last byte of the message (for atomics, of the 4- or 8-byte word at
//! offset 0).
//!
//! * `ucp_put_lat` (ping-pong): the server puts message `sn` into the
//!   client's buffer, its last byte set to `sn` (as a `u8`), and waits
//!   until its own marker shows `sn`; the client waits for `sn`, then puts
//!   it back. Each side writes its next message into its send buffer while
//!   it waits, so that only the put follows an arrival, as an application
//!   that knows its next message would do. Before a run both markers hold
//!   0xff, a value no first message carries.
//! * Streams (`ucp_put_bw`, `ucp_get`, `ucp_add`, `ucp_fadd`, `ucp_swap`,
//!   `ucp_cswap`): the client posts one operation per iteration on the
//!   server's buffer, at most `outstanding` in flight. Puts write the whole
//!   message, gets read it, atomics use the operand 0 (compare 0 for
//!   `cswap`), so the server's marker stays 0. Once every operation has
//!   completed (a fence), the client ends the stream with one more
//!   operation that sets the marker to 1: the whole message with its last
//!   byte 1 (put), a 1-byte put at the marker (get), or an atomic whose
//!   operand has 1 in the marker byte (add, fadd, swap, and cswap against
//!   0). The server progresses once per iteration (UCX skips this for
//!   puts) and then until its marker is 1, looking at it less and less
//!   often, so that operations emulated over active messages are executed.
//!   The client's clock stops when everything it posted has completed.
//! * Loopback: ping-pong as the server does against its own buffer; streams
//!   without the marker.
//!
//! With `-V`: put ping-pong messages carry the pattern of `sn` (checked
//! whole); a put stream carries the pattern of message 0 (checked by the
//! server at the end); a get stream reads the server's pattern of message 0
//! (each get checked); fetching atomics must fetch 0, and the server's word
//! must end as exactly the marker operand.
//!
//! [`prepare`] sets the markers (and the patterns) before the barrier that
//! precedes a run: after it, the peer may write at once.

use super::{LoopState, Runner, Side};
use crate::perf::catalog::{Command, TestType};
use crate::perf::error::{PerfError, Result};
use crate::perf::measure::{Meter, PerfResult};
use crate::perf::pattern;
use crate::perf::worker::{AtomicKind, PerfWorker, Started};

/// The ping-pong marker before the first message.
const UNKNOWN_SN: u8 = u8::MAX;
/// The stream marker while the stream runs.
const INITIAL_SN: u8 = 0;
/// The stream marker once the last operation landed.
const LAST_ITER_SN: u8 = 1;
/// Polls between the first two looks at the end-of-stream marker.
const END_CHECK_FIRST: u32 = 64;
/// Most polls between two looks at the end-of-stream marker.
const END_CHECK_MAX: u32 = 1 << 14;
/// Sequence number of the operation that ends a stream.
const MARKER_SN: u64 = u64::MAX;

/// The operand of an atomic of `width` bytes that sets only its last byte
/// to [`LAST_ITER_SN`].
fn marker_operand(width: usize) -> u64 {
    let mut b = [0u8; 8];
    b[width - 1] = LAST_ITER_SN;
    if width == 4 {
        u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    } else {
        u64::from_ne_bytes(b)
    }
}

/// Sets the markers (and, with `-V`, the patterns) of the local and the
/// exposed buffer for the next run. Call it while no operation of either
/// side is in flight, before the barrier that precedes the run. Does
/// nothing for tag tests.
pub fn prepare<W: PerfWorker>(w: &mut W, st: &mut LoopState<W::Req>) -> Result<()> {
    if !st.command.is_one_sided() {
        return Ok(());
    }
    let len = st.msg_len;
    let marker = if st.test_type == TestType::PingPong {
        UNKNOWN_SN
    } else {
        INITIAL_SN
    };
    let streamed_pattern = st.validate && st.test_type == TestType::StreamUni;
    match st.command {
        Command::Get if streamed_pattern => {
            let mut exposed = vec![0u8; len];
            pattern::fill(&mut exposed, 0);
            exposed[len - 1] = marker;
            w.exposed_write(0, &exposed)?;
        }
        c if c.is_atomic() => w.exposed_write(0, &vec![0u8; len])?,
        _ => w.exposed_write(len - 1, &[marker])?,
    }
    if st.command == Command::Put {
        for slot in 0..st.send.count() as u64 {
            // SAFETY: nothing is in flight between runs (the caller's
            // promise), so no operation uses the slot.
            let buf = unsafe { st.send.slice_mut(slot) };
            if streamed_pattern {
                pattern::fill(buf, 0);
            }
            buf[len - 1] = marker;
        }
    }
    Ok(())
}

impl<W: PerfWorker> Runner<'_, W> {
    /// `ucp_put_lat`.
    pub(super) fn put_ping_pong(
        &mut self,
        side: Side,
        meter: &mut Meter,
        report: &mut dyn FnMut(&PerfResult),
    ) -> Result<()> {
        let (len, max) = (self.st.msg_len, self.st.max);
        let mut sn = 0u64;
        meter.start_clock();
        if side == Side::Client {
            while !meter.done() {
                // The answer is written while the message is awaited, so
                // that only the put itself follows its arrival.
                self.prepare_sn(sn)?;
                self.wait_sn(sn)?;
                self.put_prepared(sn)?;
                meter.update(len, report);
                sn += 1;
            }
        } else if !meter.done() {
            // Likewise the next message is written while the answer to
            // this one is awaited.
            self.prepare_sn(sn)?;
            self.put_prepared(sn)?;
            while !meter.done() {
                let last = meter.last_iteration();
                if !last {
                    self.prepare_sn(sn + 1)?;
                }
                self.wait_sn(sn)?;
                if !last {
                    self.put_prepared(sn + 1)?;
                }
                meter.update(len, report);
                sn += 1;
            }
        }
        self.wait_sends(max, None)?;
        self.w.flush()?;
        meter.mark_end();
        Ok(())
    }

    /// The one-sided stream tests.
    pub(super) fn rma_stream(
        &mut self,
        side: Side,
        meter: &mut Meter,
        report: &mut dyn FnMut(&PerfResult),
    ) -> Result<()> {
        let (len, max) = (self.st.msg_len, self.st.max);
        let mut sn = 0u64;
        meter.start_clock();
        if side == Side::Server {
            // UCX does not progress here for puts; doing it keeps an
            // endless (-n 0) put stream going over emulated puts.
            while !meter.done() {
                self.poll()?;
                meter.update(len, report);
            }
            self.wait_end(len - 1)?;
            if self.st.validate {
                self.check_exposed_end(meter.iters())?;
            }
        } else {
            while !meter.done() {
                self.rma_op(sn)?;
                if side == Side::Loopback {
                    self.poll()?;
                } else {
                    // Operations on mapped memory never wait: look at the
                    // peer now and then all the same.
                    self.count_look()?;
                }
                meter.update(len, report);
                sn += 1;
            }
            // Every operation has completed: the fence before the marker.
            self.wait_sends(max, None)?;
            if side == Side::Client {
                self.end_stream()?;
                self.wait_sends(max, None)?;
            }
        }
        self.w.flush()?;
        meter.mark_end();
        Ok(())
    }

    /// Waits until the server's marker shows [`LAST_ITER_SN`], progressing.
    /// The marker shares a cache line with what the client updates (for
    /// atomics, the very word), and every look pulls the line away from
    /// the client's next access when the memory is mapped in both
    /// processes: the looks back off from every [`END_CHECK_FIRST`] polls
    /// to every [`END_CHECK_MAX`]. Noticing the end late delays only the
    /// server, whose figures are not reported.
    fn wait_end(&mut self, marker: usize) -> Result<()> {
        let mut every = END_CHECK_FIRST;
        loop {
            if self.w.exposed_byte(marker)? == LAST_ITER_SN {
                return Ok(());
            }
            for _ in 0..every {
                self.poll()?;
            }
            every = (every * 2).min(END_CHECK_MAX);
        }
    }

    /// Waits until the exposed marker shows `sn`; with `-V`, checks the
    /// rest of the message.
    #[inline]
    fn wait_sn(&mut self, sn: u64) -> Result<()> {
        let last = self.st.msg_len - 1;
        while self.w.exposed_byte(last)? != sn as u8 {
            self.poll()?;
        }
        if self.st.validate {
            // SAFETY: the scratch buffer is never handed to the worker.
            let buf = unsafe { self.st.recv.slice_mut(0) };
            self.w.exposed_read(0, buf)?;
            check_pattern(&buf[..last], sn, sn)?;
        }
        Ok(())
    }

    /// Writes message `sn` into its send slot, its last byte set to `sn`,
    /// once no operation is in flight on the slot.
    #[inline]
    fn prepare_sn(&mut self, sn: u64) -> Result<()> {
        self.wait_sends(1, Some(sn))?;
        let len = self.st.msg_len;
        // SAFETY: wait_sends made sure no operation is in flight on this
        // slot.
        let buf = unsafe { self.st.send.slice_mut(sn) };
        if self.st.validate {
            pattern::fill(buf, sn);
        }
        buf[len - 1] = sn as u8;
        Ok(())
    }

    /// Puts message `sn`, written by [`Runner::prepare_sn`].
    #[inline]
    fn put_prepared(&mut self, sn: u64) -> Result<()> {
        let ptr = self.st.send.ptr(sn);
        // SAFETY: the slot belongs to `st`, which keeps it until the put
        // is reaped (or leaks it after a failure); nothing writes it
        // meanwhile (slot_free).
        let started = unsafe { self.w.put(ptr, self.st.msg_len, 0) }?;
        self.posted(started, sn)
    }

    /// Posts operation `sn` of a stream.
    #[inline]
    fn rma_op(&mut self, sn: u64) -> Result<()> {
        self.wait_sends(1, Some(sn))?;
        let len = self.st.msg_len;
        let ptr = self.st.send.ptr(sn);
        // SAFETY (all arms): the slot belongs to `st` until the operation
        // is reaped, and no other operation uses it meanwhile (slot_free;
        // puts of one shared slot only read it).
        let started = match self.st.command {
            Command::Put => unsafe { self.w.put(ptr, len, 0) },
            Command::Get => unsafe { self.w.get(ptr, len, 0) },
            Command::Add => self.w.atomic_post(AtomicKind::Add, len, 0, 0),
            Command::Fadd => unsafe { self.w.atomic_fetch(AtomicKind::Add, len, 0, 0, ptr, 0) },
            Command::Swap => unsafe { self.w.atomic_fetch(AtomicKind::Swap, len, 0, 0, ptr, 0) },
            Command::Cswap => unsafe { self.w.atomic_fetch(AtomicKind::Cswap, len, 0, 0, ptr, 0) },
            Command::Tag | Command::TagSync | Command::Stream | Command::Am => {
                return Err(PerfError::Params(
                    "a two-sided test in a one-sided loop".into(),
                ))
            }
        }?;
        self.posted(started, sn)
    }

    /// Posts the operation that sets the server's marker to
    /// [`LAST_ITER_SN`]; every earlier operation has completed.
    fn end_stream(&mut self) -> Result<()> {
        let len = self.st.msg_len;
        let last = len - 1;
        let ptr = self.st.send.ptr(0);
        let value = if self.st.command.is_atomic() {
            marker_operand(len)
        } else {
            0
        };
        // SAFETY (all arms): nothing is in flight, so slot 0 and the
        // marker byte are free; they belong to `st` until the operation is
        // reaped.
        let started = match self.st.command {
            Command::Put => {
                // SAFETY: no operation is in flight on the slot.
                let buf = unsafe { self.st.send.slice_mut(0) };
                buf[last] = LAST_ITER_SN;
                unsafe { self.w.put(ptr, len, 0) }
            }
            Command::Get => {
                // SAFETY: the marker byte is used by this operation only.
                let byte = unsafe { self.st.ack.slice_mut(0) };
                byte[0] = LAST_ITER_SN;
                unsafe { self.w.put(self.st.ack.ptr(0), 1, last as u64) }
            }
            Command::Add => self.w.atomic_post(AtomicKind::Add, len, value, 0),
            Command::Fadd => unsafe { self.w.atomic_fetch(AtomicKind::Add, len, value, 0, ptr, 0) },
            Command::Swap => unsafe {
                self.w.atomic_fetch(AtomicKind::Swap, len, value, 0, ptr, 0)
            },
            Command::Cswap => unsafe {
                self.w
                    .atomic_fetch(AtomicKind::Cswap, len, value, 0, ptr, 0)
            },
            Command::Tag | Command::TagSync | Command::Stream | Command::Am => return Ok(()),
        }?;
        self.posted(started, MARKER_SN)
    }

    /// Tracks a posted operation, or checks one that finished at once.
    #[inline]
    fn posted(&mut self, started: Started<W::Req>, sn: u64) -> Result<()> {
        match started {
            Started::InFlight(req) => {
                self.st.sends.push_back((req, sn));
                Ok(())
            }
            Started::Done(_) if self.st.validate && self.st.command.fetches() => self.fetched(sn),
            Started::Done(_) => Ok(()),
        }
    }

    /// Checks what finished operation `sn` fetched (`-V`): a get the
    /// server's pattern, a fetching atomic the value 0.
    pub(super) fn fetched(&mut self, sn: u64) -> Result<()> {
        if sn == MARKER_SN {
            return Ok(());
        }
        let last = self.st.msg_len - 1;
        // SAFETY: the operation on this slot has finished and no other
        // uses it until a later one is posted.
        let buf = unsafe { self.st.send.slice_mut(sn) };
        if self.st.command == Command::Get {
            check_pattern(&buf[..last], 0, sn)?;
            return check_byte(buf[last], INITIAL_SN, last, sn);
        }
        match buf.iter().position(|&b| b != 0) {
            None => Ok(()),
            Some(offset) => Err(PerfError::Validation {
                iter: sn,
                offset,
                expected: 0,
                actual: buf[offset],
            }),
        }
    }

    /// The server's check of its exposed buffer after a stream (`-V`).
    fn check_exposed_end(&mut self, iters: u64) -> Result<()> {
        let len = self.st.msg_len;
        // SAFETY: the scratch buffer is never handed to the worker.
        let buf = unsafe { self.st.recv.slice_mut(0) };
        self.w.exposed_read(0, buf)?;
        if self.st.command.is_atomic() {
            let mut want = [0u8; 8];
            want[len - 1] = LAST_ITER_SN;
            for (offset, (&actual, &expected)) in buf.iter().zip(&want).enumerate() {
                check_byte(actual, expected, offset, iters)?;
            }
            return Ok(());
        }
        check_pattern(&buf[..len - 1], 0, iters)
    }
}

/// `buf` holds the pattern of message `sn`; errors name iteration `iter`.
fn check_pattern(buf: &[u8], sn: u64, iter: u64) -> Result<()> {
    pattern::check(buf, sn).map_err(|m| PerfError::Validation {
        iter,
        offset: m.offset,
        expected: m.expected,
        actual: m.actual,
    })
}

fn check_byte(actual: u8, expected: u8, offset: usize, iter: u64) -> Result<()> {
    if actual == expected {
        Ok(())
    } else {
        Err(PerfError::Validation {
            iter,
            offset,
            expected,
            actual,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_operand_sets_the_last_byte() {
        assert_eq!(marker_operand(8).to_ne_bytes(), [0, 0, 0, 0, 0, 0, 0, 1]);
        let v = marker_operand(4);
        assert!(v <= u64::from(u32::MAX));
        assert_eq!((v as u32).to_ne_bytes(), [0, 0, 0, 1]);
    }
}

//! The test loops, after UCX's `ucp_tests.cc`.
//!
//! * Ping-pong (`tag_lat`): the server (UCX's group index 0) sends message
//!   `sn` and waits for the answer; the client receives it and answers.
//!   Each side counts an iteration per exchange, so one iteration is a
//!   round trip and the meter halves it.
//! * Stream (`tag_bw`): the client sends every message, keeping at most
//!   `outstanding` sends in flight; the server keeps at most `outstanding`
//!   receives posted. When the server has received everything it sends a
//!   1-byte acknowledgement, which ends the client's clock.
//! * Loopback (`-l`): one worker does both halves of each iteration.
//!
//! Without `-V` every message uses the same send and receive buffer, as
//! UCX does, and receives still in flight are released rather than
//! tested (when the worker can: [`PerfWorker::release`]): the loop counts
//! the finished ones, like UCX's completion callbacks, and waits for all
//! of them before the buffers go; a receive that fails ends the run, but
//! a message shorter than expected is not noticed. With `-V` each
//! operation in flight has its own buffer (slot `sn % outstanding`), the
//! sender writes the pattern of message `sn` and the receiver checks its
//! length and content on completion.
//!
//! The one-sided tests (`ucp_put_lat`, `ucp_put_bw`, `ucp_get` and the
//! atomics) have their own loops, described in `runner_rma.rs`; they need
//! [`prepare`] before the barrier that precedes each run.
//!
//! While waiting, the loops check the endpoint and a [`Watch`] (the
//! bootstrap connection) every few thousand polls, so that a vanished peer
//! ends the run with an error instead of a hang. With `-e` the peer's
//! endpoint also expects keepalive answers, so loops whose operations
//! finish at once (a stream client's sends, one-sided streams) progress
//! at those checks too.

use super::catalog::{Command, TestType};
use super::error::Result;
use super::measure::{Meter, PerfResult};
use super::pattern;
use super::worker::{PerfWorker, Started};
use std::collections::VecDeque;

/// Tag of every perftest message (UCX's value).
pub const TAG: u64 = 0x1337_a880;
/// Tag mask of every receive: exact match.
pub const TAG_MASK: u64 = u64::MAX;

/// Polls between two checks of the peer.
const CHECK_EVERY: u32 = 1024;

/// The part this process plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// UCX's group index 0: starts each ping-pong exchange; receives
    /// streams.
    Server,
    /// UCX's group index 1: measures and reports; sends streams.
    Client,
    /// Both halves in one worker.
    Loopback,
}

/// Something to check now and then while waiting for completions.
pub trait Watch {
    /// Fails when the peer is gone or has aborted the test. May skip the
    /// look when the last one was recent, unless `now` is set.
    fn check(&mut self, now: bool) -> Result<()>;
}

/// A [`Watch`] with nothing to check (loopback runs).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoWatch;

impl Watch for NoWatch {
    fn check(&mut self, _now: bool) -> Result<()> {
        Ok(())
    }
}

/// Runs the test loop once for `meter`'s iterations. `report` gets the
/// figures of each report interval.
///
/// After an error, operations may still be in flight on the buffers, so
/// they are leaked rather than freed; the caller should not run `st`
/// again.
pub fn run<W: PerfWorker>(
    w: &mut W,
    watch: &mut dyn Watch,
    st: &mut LoopState<W::Req>,
    side: Side,
    meter: &mut Meter,
    report: &mut dyn FnMut(&PerfResult),
) -> Result<()> {
    let mut r = Runner {
        w,
        watch,
        st,
        polls: 0,
        sends_seen: None,
        recvs_seen: None,
        release_recvs: false,
        released: 0,
        released_base: 0,
    };
    r.release_recvs = !r.st.validate && r.st.recv.count() == 1;
    r.released_base = r.w.released_finished();
    let result = match (r.st.command.is_one_sided(), r.st.test_type) {
        (false, TestType::PingPong) => r.ping_pong(side, meter, report),
        (false, TestType::StreamUni) => r.stream(side, meter, report),
        (true, TestType::PingPong) => r.put_ping_pong(side, meter, report),
        (true, TestType::StreamUni) => r.rma_stream(side, meter, report),
    };
    if result.is_err() {
        r.st.sends.clear();
        r.st.recvs.clear();
        r.st.leak();
    }
    result
}

struct Runner<'a, W: PerfWorker> {
    w: &'a mut W,
    watch: &'a mut dyn Watch,
    st: &'a mut LoopState<W::Req>,
    polls: u32,
    /// The worker's completion count when the sends (receives) were last
    /// reaped; `None`: reap at the next look.
    sends_seen: Option<u64>,
    recvs_seen: Option<u64>,
    /// Receives are released once posted rather than tested (no `-V`,
    /// one shared buffer): only their number matters.
    release_recvs: bool,
    /// Receives released so far, and the worker's count of finished
    /// released operations when the loop started.
    released: u64,
    released_base: u64,
}

impl<W: PerfWorker> Runner<'_, W> {
    fn ping_pong(
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
                self.recv(sn)?;
                self.wait_recvs(max, None)?;
                self.send(sn)?;
                meter.update(len, report);
                sn += 1;
            }
        } else {
            while !meter.done() {
                self.send(sn)?;
                self.recv(sn)?;
                self.wait_recvs(max, None)?;
                meter.update(len, report);
                sn += 1;
            }
        }
        self.wait_recvs(max, None)?;
        self.wait_sends(max, None)?;
        self.w.flush()?;
        meter.mark_end();
        Ok(())
    }

    fn stream(
        &mut self,
        side: Side,
        meter: &mut Meter,
        report: &mut dyn FnMut(&PerfResult),
    ) -> Result<()> {
        let (len, max) = (self.st.msg_len, self.st.max);
        let mut sn = 0u64;
        meter.start_clock();
        match side {
            Side::Loopback => {
                while !meter.done() {
                    self.send(sn)?;
                    self.recv(sn)?;
                    meter.update(len, report);
                    sn += 1;
                }
                self.wait_sends(max, None)?;
                self.wait_recvs(max, None)?;
            }
            Side::Server => {
                while !meter.done() {
                    self.recv(sn)?;
                    meter.update(len, report);
                    sn += 1;
                }
                self.wait_recvs(max, None)?;
                self.ack(true)?;
                self.wait_sends(max, None)?;
            }
            Side::Client if self.st.keepalive => {
                // Sends that finish at once never poll: look anyway.
                while !meter.done() {
                    self.send(sn)?;
                    self.count_look()?;
                    meter.update(len, report);
                    sn += 1;
                }
                self.wait_sends(max, None)?;
                self.ack(false)?;
            }
            Side::Client => {
                while !meter.done() {
                    self.send(sn)?;
                    meter.update(len, report);
                    sn += 1;
                }
                self.wait_sends(max, None)?;
                self.ack(false)?;
            }
        }
        self.w.flush()?;
        meter.mark_end();
        Ok(())
    }

    /// Progresses once; checks the peer every [`CHECK_EVERY`] calls.
    #[inline]
    fn poll(&mut self) -> Result<()> {
        self.w.progress();
        self.count_look()
    }

    /// Counts a look; checks the peer every [`CHECK_EVERY`] of them (also
    /// for loops that post operations finishing at once, which never
    /// poll: puts into a peer's memory mapped here), and with `-e` also
    /// progresses then.
    #[inline]
    fn count_look(&mut self) -> Result<()> {
        self.polls = self.polls.wrapping_add(1);
        if self.polls % CHECK_EVERY == 0 {
            if self.st.keepalive {
                // Answers the peer's keepalive even in loops that never
                // poll.
                self.w.progress();
            }
            if let Err(e) = self.w.check_peer() {
                // The peer may have said why before it went away.
                self.watch.check(true)?;
                return Err(e);
            }
            self.watch.check(false)?;
        }
        Ok(())
    }

    /// Forgets finished sends (and one-sided operations), oldest first;
    /// with `-V`, checks what a one-sided operation fetched.
    #[inline]
    fn reap_sends(&mut self) -> Result<()> {
        let now = self.w.completed_count();
        if now.is_some() && now == self.sends_seen {
            return Ok(());
        }
        self.sends_seen = now;
        while let Some(&(req, sn)) = self.st.sends.front() {
            match self.w.test(req) {
                None => break,
                Some(outcome) => {
                    self.st.sends.pop_front();
                    outcome?;
                    if self.st.validate && self.st.command.fetches() {
                        self.fetched(sn)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks finished receives, oldest first.
    #[inline]
    fn reap_recvs(&mut self) -> Result<()> {
        let now = self.w.completed_count();
        if now.is_some() && now == self.recvs_seen {
            return Ok(());
        }
        self.recvs_seen = now;
        while let Some(&(req, sn)) = self.st.recvs.front() {
            match self.w.test(req) {
                None => break,
                Some(outcome) => {
                    self.st.recvs.pop_front();
                    let len = outcome?;
                    if len != self.st.msg_len || self.st.validate {
                        self.received(sn, len)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether message `sn` may use its buffer: always without validation
    /// (all messages share one), else once the message that used the slot
    /// before has finished.
    #[inline]
    fn slot_free(q: &VecDeque<(W::Req, u64)>, slots: usize, sn: Option<u64>) -> bool {
        match (sn, q.front()) {
            (Some(sn), Some(&(_, oldest))) if slots > 1 => oldest.saturating_add(slots as u64) > sn,
            _ => true,
        }
    }

    /// Waits until `n` more sends fit the window (and the buffer of `sn`
    /// is free). `n == max` waits for every send.
    #[inline(always)]
    fn wait_sends(&mut self, n: usize, sn: Option<u64>) -> Result<()> {
        if self.st.sends.is_empty() && n <= self.st.max {
            // Nothing in flight: every slot is free (operations that
            // finished at once, such as one-sided ones on mapped memory).
            return Ok(());
        }
        self.wait_sends_busy(n, sn)
    }

    /// [`Runner::wait_sends`] with operations in flight.
    #[inline]
    fn wait_sends_busy(&mut self, n: usize, sn: Option<u64>) -> Result<()> {
        loop {
            self.reap_sends()?;
            if self.st.sends.len() + n <= self.st.max
                && Self::slot_free(&self.st.sends, self.st.send.count(), sn)
            {
                return Ok(());
            }
            self.poll()?;
        }
    }

    /// Released receives not finished yet.
    #[inline(always)]
    fn released_pending(&self) -> usize {
        let done = self.w.released_finished().wrapping_sub(self.released_base);
        self.released.wrapping_sub(done) as usize
    }

    /// Like [`Runner::wait_sends`] for receives, released ones included.
    #[inline]
    fn wait_recvs(&mut self, n: usize, sn: Option<u64>) -> Result<()> {
        loop {
            self.reap_recvs()?;
            if self.released != 0 {
                if let Some(e) = self.w.released_error() {
                    return Err(e);
                }
            }
            if self.st.recvs.len() + self.released_pending() + n <= self.st.max
                && Self::slot_free(&self.st.recvs, self.st.recv.count(), sn)
            {
                return Ok(());
            }
            self.poll()?;
        }
    }

    #[inline(always)]
    fn send(&mut self, sn: u64) -> Result<()> {
        if self.st.sends.len() >= self.st.max || self.st.send.count() > 1 {
            self.wait_sends(1, Some(sn))?;
        }
        if self.st.validate {
            // SAFETY: wait_sends made sure no send is in flight on this
            // slot, and nothing else ever uses send buffers.
            pattern::fill(unsafe { self.st.send.slice_mut(sn) }, sn);
        }
        let ptr = self.st.send.ptr(sn);
        // SAFETY: the buffer belongs to `st`, which keeps it until the send
        // is reaped, or leaks it if the run fails first; nothing writes the
        // slot until then (slot_free).
        let len = self.st.msg_len;
        let started = match self.st.command {
            Command::Stream => unsafe { self.w.stream_send(ptr, len) },
            Command::Am => unsafe { self.w.am_send(ptr, len) },
            _ => unsafe { self.w.tag_send(ptr, len, TAG, self.st.sync) },
        }?;
        if let Started::InFlight(req) = started {
            self.st.sends.push_back((req, sn));
        }
        Ok(())
    }

    #[inline(always)]
    fn recv(&mut self, sn: u64) -> Result<()> {
        if self.st.recvs.len() + self.released_pending() >= self.st.max || self.st.recv.count() > 1
        {
            self.wait_recvs(1, Some(sn))?;
        }
        let ptr = self.st.recv.ptr(sn);
        let len = self.st.msg_len;
        // SAFETY: as for sends; receive slots are only read (validated)
        // after their receive finished.
        let started = match self.st.command {
            Command::Stream => unsafe { self.w.stream_recv(ptr, len) },
            Command::Am => return self.am_recv(sn),
            _ => unsafe { self.w.tag_recv(ptr, len, TAG, TAG_MASK) },
        }?;
        match started {
            Started::Done(len) if len == self.st.msg_len && !self.st.validate => Ok(()),
            Started::Done(len) => self.received(sn, len),
            Started::InFlight(req) => {
                if self.release_recvs {
                    if self.w.release(req) {
                        self.released += 1;
                        return Ok(());
                    }
                    self.release_recvs = false;
                }
                self.st.recvs.push_back((req, sn));
                Ok(())
            }
        }
    }
}

#[path = "runner_msg.rs"]
mod msg;
#[path = "runner_rma.rs"]
mod rma;
#[path = "runner_state.rs"]
mod state;

pub use state::LoopState;

pub use rma::prepare;

#[cfg(test)]
#[path = "runner_tests.rs"]
mod tests;

//! Streams, the worker's side: ordered byte streams per endpoint (the
//! protocol is `proto/stream.rs`), in the owned, blocking and raw tiers.
//!
//! A stream has no message boundaries: a receive completes with the bytes
//! that have arrived (at least one), or, posted with `*_all`, once its
//! buffer is full (`UCP_STREAM_RECV_FLAG_WAITALL`). The result's
//! [`Info::length`] is the number of bytes received.
#![allow(unsafe_code)]

use super::Worker;
use crate::proto::eager_tx::Started;
use crate::request::buf::{RecvBuf, SendBuf};
use crate::request::{Info, IoBuf, IoBufMut, Op, Posted, ReqId};
use crate::{Ep, Result};

fn posted<B>(s: Started, buf: B) -> (Posted<B>, Option<B>) {
    match s {
        Started::Done(info) => (Posted::Done(info, buf), None),
        Started::InFlight(id) => (Posted::InFlight(ReqId(id)), Some(buf)),
    }
}

impl Worker {
    /// Sends `buf` on `ep`'s stream. The worker keeps the buffer until
    /// the send completes (its bytes left); get it back with
    /// [`Worker::take`].
    pub fn stream_send<B: IoBuf>(&mut self, ep: Ep, buf: B, op: Op) -> Result<Posted<B>> {
        // SAFETY: the buffer moves into the request (before any progress
        // can run) and stays there until completion; IoBuf promises its
        // memory does not move with it.
        let sb = unsafe { SendBuf::new(buf.as_ptr(), buf.len()) };
        let s = self.core.stream_start(&mut self.ifaces, ep.0, sb, op)?;
        Ok(self.keep(s, buf))
    }

    /// Receives what has arrived on `ep`'s stream into `buf`, at least one
    /// byte: completes at once if bytes are there, else when some arrive.
    pub fn stream_recv<B: IoBufMut>(&mut self, ep: Ep, buf: B, op: Op) -> Result<Posted<B>> {
        self.stream_recv_owned(ep, buf, false, op)
    }

    /// Receives exactly `buf.len()` bytes of `ep`'s stream into `buf`.
    pub fn stream_recv_all<B: IoBufMut>(&mut self, ep: Ep, buf: B, op: Op) -> Result<Posted<B>> {
        self.stream_recv_owned(ep, buf, true, op)
    }

    fn stream_recv_owned<B: IoBufMut>(
        &mut self,
        ep: Ep,
        mut buf: B,
        wait_all: bool,
        op: Op,
    ) -> Result<Posted<B>> {
        // SAFETY: as in stream_send; the buffer is exclusively the
        // request's.
        let rb = unsafe { RecvBuf::new(buf.as_mut_ptr(), buf.len()) };
        let s = self.core.stream_recv_start(ep.0, rb, wait_all, op)?;
        Ok(self.keep(s, buf))
    }

    /// Gives an in-flight request its owned buffer.
    fn keep<B: Send + 'static>(&mut self, s: Started, buf: B) -> Posted<B> {
        self.hold(s, buf, None)
    }

    /// Sends `buf` on `ep`'s stream and waits until it may be reused.
    pub fn stream_send_blocking(&mut self, ep: Ep, buf: &[u8]) -> Result<Info> {
        // SAFETY: `buf` stays borrowed for this whole call, which returns
        // only after the request completed (or aborts).
        match unsafe { self.stream_send_raw(ep, buf.as_ptr(), buf.len(), Op::new())? } {
            Posted::Done(info, ()) => Ok(info),
            Posted::InFlight(id) => self.wait_borrowed(id),
        }
    }

    /// Receives what arrives on `ep`'s stream into `buf` (at least one
    /// byte), waiting for it.
    pub fn stream_recv_blocking(&mut self, ep: Ep, buf: &mut [u8]) -> Result<Info> {
        self.stream_recv_wait(ep, buf, false)
    }

    /// Receives exactly `buf.len()` bytes of `ep`'s stream, waiting for
    /// them.
    pub fn stream_recv_all_blocking(&mut self, ep: Ep, buf: &mut [u8]) -> Result<Info> {
        self.stream_recv_wait(ep, buf, true)
    }

    fn stream_recv_wait(&mut self, ep: Ep, buf: &mut [u8], wait_all: bool) -> Result<Info> {
        // SAFETY: as in stream_send_blocking; `buf` is exclusively borrowed.
        let p =
            unsafe { self.stream_recv_raw(ep, buf.as_mut_ptr(), buf.len(), wait_all, Op::new()) };
        match p? {
            Posted::Done(info, ()) => Ok(info),
            Posted::InFlight(id) => self.wait_borrowed(id),
        }
    }

    /// Posts a stream send of `len` bytes at `ptr` on `ep`.
    ///
    /// # Safety
    ///
    /// As [`Worker::tag_send_raw`]: unless this returns `Posted::Done` or
    /// an error, the bytes must stay readable and unmodified until the
    /// request's completion has been observed or the worker is dropped.
    pub unsafe fn stream_send_raw(
        &mut self,
        ep: Ep,
        ptr: *const u8,
        len: usize,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        let sb = unsafe { SendBuf::new(ptr, len) };
        let s = self.core.stream_start(&mut self.ifaces, ep.0, sb, op)?;
        Ok(posted(s, ()).0)
    }

    /// Posts a stream receive of up to `len` bytes into `ptr` on `ep`
    /// (exactly `len` with `wait_all`).
    ///
    /// # Safety
    ///
    /// As [`Worker::tag_recv_raw`]: unless this returns `Posted::Done` or
    /// an error, the bytes must stay writable, and untouched by anyone
    /// else, until the request's completion has been observed or the
    /// worker is dropped.
    pub unsafe fn stream_recv_raw(
        &mut self,
        ep: Ep,
        ptr: *mut u8,
        len: usize,
        wait_all: bool,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.stream_recv_elems_raw(ep, ptr, len, 1, wait_all, op) }
    }

    /// [`Worker::stream_recv_raw`] into elements of `elem` bytes (UCX's
    /// contiguous datatypes): without `wait_all` it completes once a
    /// whole number of elements arrived (or the buffer is full), never
    /// inside one.
    ///
    /// # Safety
    ///
    /// As [`Worker::stream_recv_raw`].
    pub unsafe fn stream_recv_elems_raw(
        &mut self,
        ep: Ep,
        ptr: *mut u8,
        len: usize,
        elem: usize,
        wait_all: bool,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        let rb = unsafe { RecvBuf::new(ptr, len) };
        let unit = crate::request::StreamRecvState::unit_of(len, elem, wait_all);
        let s = self.core.stream_recv_start_unit(ep.0, rb, unit, op)?;
        Ok(posted(s, ()).0)
    }

    /// The oldest bytes that arrived on `ep`'s stream and wait for a
    /// receive, handed over as they arrived, without a copy
    /// (`ucp_stream_recv_data_nb`; dropping them is the release). `None`
    /// if none wait, or if receives are posted (they come first). Fails
    /// once the endpoint failed and nothing is left.
    pub fn stream_recv_data(&mut self, ep: Ep) -> Result<Option<Vec<u8>>> {
        self.core.stream_take_chunk(ep.0)
    }

    /// Endpoints whose streams hold bytes waiting for a receive, at most
    /// `max` (`ucp_stream_worker_poll`). Call [`Worker::progress`] first
    /// for news.
    pub fn stream_worker_poll(&mut self, max: usize) -> Vec<Ep> {
        self.core.stream_poll(max).into_iter().map(Ep).collect()
    }
}

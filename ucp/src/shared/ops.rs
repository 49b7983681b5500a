//! A [`SharedWorker`]'s operations: each takes the lock for the post
//! alone and returns a future ([`OpFuture`], [`Polling`], [`Accepting`]).
#![allow(unsafe_code)]

use super::futures::{Incoming, OpFuture, Polling, SharedListener};
use super::SharedWorker;
use crate::request::{IoBuf, IoBufMut, Posted};
use crate::{AmParams, AtomicOp, AtomicValue, CloseMode, Ep, EpParams, Op, Result, Rkey, Worker};
use std::net::SocketAddr;

impl SharedWorker {
    /// Posts with the lock held; the future of what it posted.
    fn post<B: Send + 'static>(
        &self,
        cancel: bool,
        f: impl FnOnce(&mut Worker) -> Result<Posted<B>>,
    ) -> Result<OpFuture<B>> {
        let mut g = self.lock();
        let p = f(g.worker());
        g.unlock(false);
        Ok(OpFuture::new(self, p?, cancel))
    }

    /// An endpoint to the worker whose address is `remote` (see
    /// [`Worker::connect`]).
    pub fn connect(&self, remote: &[u8]) -> Result<Ep> {
        self.with(|w| w.connect(remote))
    }

    /// [`SharedWorker::connect`] with endpoint parameters (error mode and
    /// handler; see [`Worker::connect_with`]).
    pub fn connect_with(&self, remote: &[u8], params: EpParams) -> Result<Ep> {
        self.with(|w| w.connect_with(remote, params))
    }

    /// Connects to the listener at `addr` (see [`Worker::connect_to`]).
    pub fn connect_to(&self, addr: SocketAddr, params: EpParams) -> Polling<Ep> {
        match self.with(|w| w.connect_start(addr, params)) {
            Ok(mut c) => Polling::new(self.clone(), Box::new(move |w| w.connect_poll(&mut c))),
            Err(e) => Polling::ended(self.clone(), Err(e)),
        }
    }

    /// Listens for clients on `addr` (port 0: any); their requests queue
    /// in the listener until accepted.
    pub fn listen(&self, addr: SocketAddr) -> Result<SharedListener> {
        let incoming = Incoming::default();
        let queue = Incoming::clone(&incoming);
        let l = self.with(|w| w.listen(addr, move |_, req| queue.lock().push_back(req)))?;
        Ok(SharedListener {
            w: self.clone(),
            l,
            incoming,
        })
    }

    /// Closes `ep` in `mode` (see [`Worker::ep_close_start`]).
    pub fn ep_close(&self, ep: Ep, mode: CloseMode) -> Polling<()> {
        match self.with(|w| w.ep_close_start(ep, mode)) {
            Ok(mut c) => Polling::new(self.clone(), Box::new(move |w| w.ep_close_poll(&mut c))),
            Err(e) => Polling::ended(self.clone(), Err(e)),
        }
    }

    /// Completes every operation posted on `ep` so far (see
    /// [`Worker::ep_flush_start`]).
    pub fn ep_flush(&self, ep: Ep) -> Polling<()> {
        match self.with(|w| w.ep_flush_start(ep)) {
            Ok(mut f) => Polling::new(self.clone(), Box::new(move |w| w.flush_poll(&mut f))),
            Err(e) => Polling::ended(self.clone(), Err(e)),
        }
    }

    /// Completes every operation posted on the worker so far.
    pub fn flush(&self) -> Polling<()> {
        let mut f = self.with(|w| w.flush_start());
        Polling::new(self.clone(), Box::new(move |w| w.flush_poll(&mut f)))
    }

    /// Sends `buf` with `tag` on `ep` (see [`Worker::tag_send`]).
    pub fn tag_send<B: IoBuf>(&self, ep: Ep, buf: B, tag: u64) -> Result<OpFuture<B>> {
        self.post(false, |w| w.tag_send(ep, buf, tag, Op::new()))
    }

    /// Sends `buf` with `tag` on `ep`, completing once a receive matched
    /// it (`ucp_tag_send_sync_nbx`).
    pub fn tag_send_sync<B: IoBuf>(&self, ep: Ep, buf: B, tag: u64) -> Result<OpFuture<B>> {
        self.post(false, |w| w.tag_send(ep, buf, tag, Op::new().sync()))
    }

    /// Receives a message matching `(tag, mask)` into `buf`; a drop before
    /// completion cancels the receive.
    pub fn tag_recv<B: IoBufMut>(&self, buf: B, tag: u64, mask: u64) -> Result<OpFuture<B>> {
        self.post(true, |w| w.tag_recv(buf, tag, mask, Op::new()))
    }

    /// Sends `buf` on `ep`'s stream (see [`Worker::stream_send`]).
    pub fn stream_send<B: IoBuf>(&self, ep: Ep, buf: B) -> Result<OpFuture<B>> {
        self.post(false, |w| w.stream_send(ep, buf, Op::new()))
    }

    /// Receives at least one byte of `ep`'s stream into `buf`; a drop
    /// before completion cancels it.
    pub fn stream_recv<B: IoBufMut>(&self, ep: Ep, buf: B) -> Result<OpFuture<B>> {
        self.post(true, |w| w.stream_recv(ep, buf, Op::new()))
    }

    /// Receives exactly `buf.len()` bytes of `ep`'s stream into `buf`.
    pub fn stream_recv_all<B: IoBufMut>(&self, ep: Ep, buf: B) -> Result<OpFuture<B>> {
        self.post(true, |w| w.stream_recv_all(ep, buf, Op::new()))
    }

    /// Sends active message `id` with `header` and the data `buf` (see
    /// [`Worker::am_send_owned`]).
    pub fn am_send<B: IoBuf>(
        &self,
        ep: Ep,
        id: u16,
        header: &[u8],
        buf: B,
        params: AmParams,
    ) -> Result<OpFuture<B>> {
        self.post(false, |w| {
            w.am_send_owned(ep, id, header, buf, params, Op::new())
        })
    }

    /// Writes `buf` to `remote_addr` of the peer's memory named by `rkey`
    /// (unpacked on `ep`); completes once the data is there.
    pub fn put<B: IoBuf>(
        &self,
        ep: Ep,
        buf: B,
        remote_addr: u64,
        rkey: &Rkey,
    ) -> Result<OpFuture<B>> {
        self.post(false, |w| {
            // SAFETY: the buffer moves into the request (Worker::hold)
            // before the lock is released, and IoBuf keeps its memory put
            // until the request gives it back; on an error nothing keeps
            // the pointer.
            let p =
                unsafe { w.put_raw(ep, buf.as_ptr(), buf.len(), remote_addr, rkey, Op::new()) }?;
            Ok(w.hold_posted(p, buf))
        })
    }

    /// Reads `buf.len()` bytes at `remote_addr` of the peer's memory named
    /// by `rkey` into `buf`.
    pub fn get<B: IoBufMut>(
        &self,
        ep: Ep,
        mut buf: B,
        remote_addr: u64,
        rkey: &Rkey,
    ) -> Result<OpFuture<B>> {
        self.post(false, |w| {
            // SAFETY: as in put; the buffer is exclusively the request's.
            let p = unsafe {
                w.get_raw(
                    ep,
                    buf.as_mut_ptr(),
                    buf.len(),
                    remote_addr,
                    rkey,
                    Op::new(),
                )
            }?;
            Ok(w.hold_posted(p, buf))
        })
    }

    /// Performs `op` with `value` on the word at `remote_addr` without
    /// fetching (see [`Worker::atomic_post`]).
    pub fn atomic_post(
        &self,
        ep: Ep,
        op: AtomicOp,
        value: AtomicValue,
        remote_addr: u64,
        rkey: &Rkey,
    ) -> Result<OpFuture<()>> {
        self.post(false, |w| {
            w.atomic_post(ep, op, value, remote_addr, rkey, Op::new())
        })
    }

    /// Performs `op` with `value` (and `compare` for `Cswap`) on the word
    /// at `remote_addr`; the future gives the old value.
    pub fn atomic_fetch(
        &self,
        ep: Ep,
        op: AtomicOp,
        value: AtomicValue,
        compare: u64,
        remote_addr: u64,
        rkey: &Rkey,
    ) -> Result<OpFuture<Fetched>> {
        self.post(false, |w| {
            let mut out = Fetched(vec![0u64]);
            let at: *mut u64 = out.0.as_mut_ptr();
            // SAFETY: the value moves into the request before the lock is
            // released; the Vec's heap word stays put (and is reached only
            // through `at`) until the request gives it back.
            let p = unsafe {
                w.atomic_fetch_raw(ep, op, value, compare, at, remote_addr, rkey, Op::new())
            }?;
            Ok(w.hold_posted(p, out))
        })
    }
}

/// The old value a fetching atomic read.
#[derive(Debug)]
pub struct Fetched(Vec<u64>);

impl Fetched {
    /// The word as it was before the operation (a 32-bit one widened).
    pub fn value(&self) -> u64 {
        self.0.first().copied().unwrap_or(0)
    }
}

//! A [`SharedWorker`]'s operations: each takes the lock for the post
//! alone and returns a future ([`OpFuture`], [`Polling`], [`Accepting`]).
#![allow(unsafe_code)]

use super::futures::OpFuture;
use super::handoff::{self, PostResult, Slot};
use super::polling::{Incoming, Polling, SharedListener};
use super::SharedWorker;
use crate::proto::am_rndv::AmProto;
use crate::request::{IoBuf, IoBufMut, Posted};
use crate::{
    AmParams, AtomicOp, AtomicValue, CloseMode, Ep, EpParams, Op, OpError, Result, Rkey, Worker,
};
use std::borrow::Borrow;
use std::net::SocketAddr;

/// A handed post whose future was dropped before it ran: what the future's
/// drop would have done (`CANCEL`: a receive, canceled).
fn abandoned<B: Send + 'static, const CANCEL: bool>(w: &mut Worker, r: PostResult<B>) {
    if let Ok(Posted::InFlight(id)) = r {
        if CANCEL {
            w.request_cancel(id);
        }
        w.request_release(id);
    }
}

/// `buf` held by the request `p` posted from it (or given back with the
/// error).
pub(crate) fn held<B: Send + 'static>(
    w: &mut Worker,
    p: Result<Posted<()>>,
    buf: B,
) -> PostResult<B> {
    match p {
        Ok(p) => Ok(w.hold_posted(p, buf)),
        Err(error) => Err(OpError { error, buf }),
    }
}

/// A stream send of `buf` through the raw tier, the buffer held by its
/// request (or given back with the error).
pub(crate) fn stream_send_post<B: IoBuf>(w: &mut Worker, ep: Ep, buf: B) -> PostResult<B> {
    // SAFETY: the buffer moves into the request (`held`) before the
    // worker can progress, and IoBuf keeps its memory put until the
    // request gives it back; on an error nothing keeps the pointer.
    let p = unsafe { w.stream_send_raw(ep, buf.as_ptr(), buf.len(), Op::new()) };
    held(w, p, buf)
}

/// An active message send of `header` and `buf` through the raw tier, as
/// [`stream_send_post`].
pub(crate) fn am_send_post<B: IoBuf>(
    w: &mut Worker,
    ep: Ep,
    id: u16,
    header: &[u8],
    buf: B,
    params: AmParams,
) -> PostResult<B> {
    // SAFETY: as in stream_send_post.
    let p = unsafe { w.am_send_raw(ep, id, header, (buf.as_ptr(), buf.len()), params, Op::new()) };
    held(w, p, buf)
}

/// A put of `buf` through the raw tier, as [`stream_send_post`].
pub(crate) fn put_post<B: IoBuf>(
    w: &mut Worker,
    ep: Ep,
    buf: B,
    remote_addr: u64,
    rkey: &Rkey,
) -> PostResult<B> {
    // SAFETY: as in stream_send_post.
    let p = unsafe { w.put_raw(ep, buf.as_ptr(), buf.len(), remote_addr, rkey, Op::new()) };
    held(w, p, buf)
}

/// A get into `buf` through the raw tier, as [`stream_send_post`].
pub(crate) fn get_post<B: IoBufMut>(
    w: &mut Worker,
    ep: Ep,
    mut buf: B,
    remote_addr: u64,
    rkey: &Rkey,
) -> PostResult<B> {
    let (at, len) = (buf.as_mut_ptr(), buf.len());
    // SAFETY: as in stream_send_post; the buffer is exclusively the
    // request's.
    let p = unsafe { w.get_raw(ep, at, len, remote_addr, rkey, Op::new()) };
    held(w, p, buf)
}

/// A non-fetching atomic through the owned tier, its future's value `()`.
pub(crate) fn atomic_post_post(
    w: &mut Worker,
    ep: Ep,
    op: AtomicOp,
    value: AtomicValue,
    remote_addr: u64,
    rkey: &Rkey,
) -> PostResult<()> {
    let p = w.atomic_post(ep, op, value, remote_addr, rkey, Op::new());
    held(w, p, ())
}

/// A fetching atomic through the raw tier, the old value written into a
/// [`Fetched`] that its request holds.
pub(crate) fn atomic_fetch_post(
    w: &mut Worker,
    ep: Ep,
    op: AtomicOp,
    value: AtomicValue,
    compare: u64,
    remote_addr: u64,
    rkey: &Rkey,
) -> PostResult<Fetched> {
    let mut out = Fetched(vec![0u64]);
    let at: *mut u64 = out.0.as_mut_ptr();
    // SAFETY: the value moves into the request (`held`) before the worker
    // can progress; the Vec's heap word stays put (and is reached only
    // through `at`) until the request gives it back.
    let p = unsafe { w.atomic_fetch_raw(ep, op, value, compare, at, remote_addr, rkey, Op::new()) };
    held(w, p, out)
}

impl SharedWorker {
    /// Posts now with the lock held; the future of what it posted.
    fn post_locked<B: Send + 'static>(
        &self,
        cancel: bool,
        f: impl FnOnce(&mut Worker) -> Result<Posted<B>>,
    ) -> Result<OpFuture<B>> {
        let mut g = self.lock();
        let p = f(g.worker());
        g.unlock(false);
        Ok(OpFuture::new(self, p?, cancel))
    }

    /// Posts now if the lock is free, else hands the post to the thread
    /// that holds it (`handoff.rs`); `x` is what `f` borrows, owned only for
    /// a handed post. A failure of a handed post is the future's.
    fn post<B, X, F>(&self, cancel: bool, x: &X, f: F) -> Result<OpFuture<B>>
    where
        B: Send + 'static,
        X: ToOwned + ?Sized,
        X::Owned: Send + 'static,
        F: FnOnce(&mut Worker, &X) -> PostResult<B> + Send + 'static,
    {
        if let Some(mut g) = self.try_lock_briefly() {
            let p = f(g.worker(), x);
            g.unlock(false);
            return Ok(OpFuture::new(self, p.map_err(|e| e.error)?, cancel));
        }
        let x = x.to_owned();
        let slot = Slot::new();
        let job = if cancel {
            handoff::job(
                slot.clone(),
                move |w| f(w, x.borrow()),
                abandoned::<B, true>,
            )
        } else {
            handoff::job(
                slot.clone(),
                move |w| f(w, x.borrow()),
                abandoned::<B, false>,
            )
        };
        self.hand(job);
        Ok(OpFuture::queued(self, slot, cancel))
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
        self.tag_send_op(ep, buf, tag, Op::new())
    }

    /// Sends `buf` with `tag` on `ep`, completing once a receive matched
    /// it (`ucp_tag_send_sync_nbx`).
    pub fn tag_send_sync<B: IoBuf>(&self, ep: Ep, buf: B, tag: u64) -> Result<OpFuture<B>> {
        self.tag_send_op(ep, buf, tag, Op::new().sync())
    }

    fn tag_send_op<B: IoBuf>(&self, ep: Ep, buf: B, tag: u64, op: Op) -> Result<OpFuture<B>> {
        let buf = if op.sync {
            buf
        } else {
            match self.gate_send(ep, buf, tag) {
                Ok(f) => return Ok(f),
                Err(buf) => buf,
            }
        };
        if !self.inner.hands {
            // The owned tier's own post: measurably shorter than the raw
            // one plus `held` on a 0.2 µs shared-memory round trip.
            return self.post_locked(false, |w| w.tag_send(ep, buf, tag, op));
        }
        self.post(false, &(), move |w, ()| {
            // SAFETY: the buffer moves into the request (`held`) before the
            // lock is released, and IoBuf keeps its memory put until the
            // request gives it back; on an error nothing keeps the pointer.
            let p = unsafe { w.tag_send_raw(ep, buf.as_ptr(), buf.len(), tag, op) };
            held(w, p, buf)
        })
    }

    /// Sends `buf` through `ep`'s own send path if it is open for it; else
    /// gives `buf` back.
    #[inline]
    fn gate_send<B: IoBuf>(&self, ep: Ep, buf: B, tag: u64) -> std::result::Result<OpFuture<B>, B> {
        let len = buf.len();
        if len == 0 {
            return Err(buf);
        }
        // SAFETY: IoBuf promises `len` readable bytes at `as_ptr` while
        // `buf` lives, and it lives past the send, which copies them.
        let data = unsafe { std::slice::from_raw_parts(buf.as_ptr(), len) };
        if !self.try_tag_send_short(ep, data, tag) {
            return Err(buf);
        }
        let info = crate::Info { tag, length: len };
        Ok(OpFuture::new(self, Posted::Done(info, buf), false))
    }

    /// Sends `data` with `tag` on `ep` now, without the worker's lock, if
    /// the endpoint's own send path is open for it: `true` once sent (the
    /// send is complete: `data` was copied). `false` sends nothing: post
    /// the message the usual way ([`SharedWorker::tag_send`], or the raw
    /// tier through [`SharedWorker::post_with`]).
    ///
    /// The path is open for a short message (one `am_short`) on an
    /// endpoint whose transport offers it (shared memory), once a send of
    /// the endpoint took the worker's fast path: nothing queued on the
    /// endpoint, its eager credit quiet. Every other send on the endpoint
    /// closes it until then, so a thread's messages keep their order
    /// whichever way each went. It is not taken while a post this thread
    /// handed over ([`SharedWorker::post_with`]) may not have run yet.
    /// [`SharedWorker::tag_send`] tries it first.
    #[inline]
    pub fn try_tag_send_short(&self, ep: Ep, data: &[u8], tag: u64) -> bool {
        self.settled() && self.inner.gates.try_tag_send_short(ep, data, tag)
    }

    /// Whether every post handed over so far ran (`handoff.rs`): a post of
    /// this thread may pass the lock only then.
    #[inline]
    fn settled(&self) -> bool {
        self.inner.handoffs.settled()
    }

    /// Receives a message matching `(tag, mask)` into `buf`; a drop before
    /// completion cancels the receive.
    pub fn tag_recv<B: IoBufMut>(&self, mut buf: B, tag: u64, mask: u64) -> Result<OpFuture<B>> {
        if !self.inner.hands {
            // As in tag_send_op.
            return self.post_locked(true, |w| w.tag_recv(buf, tag, mask, Op::new()));
        }
        self.post(true, &(), move |w, ()| {
            // SAFETY: as in tag_send_op; the buffer is exclusively the
            // request's.
            let p = unsafe { w.tag_recv_raw(buf.as_mut_ptr(), buf.len(), tag, mask, Op::new()) };
            held(w, p, buf)
        })
    }

    /// Sends `buf` on `ep`'s stream (see [`Worker::stream_send`]).
    pub fn stream_send<B: IoBuf>(&self, ep: Ep, buf: B) -> Result<OpFuture<B>> {
        self.post(false, &(), move |w, ()| stream_send_post(w, ep, buf))
    }

    /// Receives at least one byte of `ep`'s stream into `buf`; a drop
    /// before completion cancels it.
    pub fn stream_recv<B: IoBufMut>(&self, ep: Ep, buf: B) -> Result<OpFuture<B>> {
        self.post_locked(true, |w| w.stream_recv(ep, buf, Op::new()))
    }

    /// Receives exactly `buf.len()` bytes of `ep`'s stream into `buf`.
    pub fn stream_recv_all<B: IoBufMut>(&self, ep: Ep, buf: B) -> Result<OpFuture<B>> {
        self.post_locked(true, |w| w.stream_recv_all(ep, buf, Op::new()))
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
        let len = buf.len();
        if header.is_empty() && len > 0 && params.proto != AmProto::Rndv && self.settled() {
            // SAFETY: as in gate_send.
            let data = unsafe { std::slice::from_raw_parts(buf.as_ptr(), len) };
            if self
                .inner
                .gates
                .try_am_send_short(ep, id, data, params.reply)
            {
                let info = crate::Info {
                    tag: 0,
                    length: len,
                };
                return Ok(OpFuture::new(self, Posted::Done(info, buf), false));
            }
        }
        self.post(false, header, move |w, header| {
            am_send_post(w, ep, id, header, buf, params)
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
        self.post(false, rkey, move |w, rkey| {
            put_post(w, ep, buf, remote_addr, rkey)
        })
    }

    /// Reads `buf.len()` bytes at `remote_addr` of the peer's memory named
    /// by `rkey` into `buf`.
    pub fn get<B: IoBufMut>(
        &self,
        ep: Ep,
        buf: B,
        remote_addr: u64,
        rkey: &Rkey,
    ) -> Result<OpFuture<B>> {
        self.post(false, rkey, move |w, rkey| {
            get_post(w, ep, buf, remote_addr, rkey)
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
        self.post(false, rkey, move |w, rkey| {
            atomic_post_post(w, ep, op, value, remote_addr, rkey)
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
        self.post(false, rkey, move |w, rkey| {
            atomic_fetch_post(w, ep, op, value, compare, remote_addr, rkey)
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

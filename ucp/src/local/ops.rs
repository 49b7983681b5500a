//! A [`LocalWorker`]'s operations beyond messages and memory: atomics,
//! flushes, endpoint close, connecting by socket address and listening,
//! each a future.

use super::polling::{LocalListener, LocalPolling};
use super::{LocalFlush, LocalFuture, LocalWorker};
use crate::request::IoBufMut;
use crate::shared::ops::{atomic_fetch_post, atomic_post_post};
use crate::shared::polling::Incoming;
use crate::shared::Fetched;
use crate::{AtomicOp, AtomicValue, CloseMode, Ep, EpParams, Op, Result, Rkey};
use std::net::SocketAddr;

impl LocalWorker {
    /// An endpoint to the worker at `remote` with endpoint parameters
    /// (error mode and handler; see [`Worker::connect_with`]).
    ///
    /// [`Worker::connect_with`]: crate::Worker::connect_with
    pub fn connect_with(&self, remote: &[u8], params: EpParams) -> Result<Ep> {
        let ep = self.inner.borrow_for_post()?.connect_with(remote, params);
        self.kick();
        ep
    }

    /// Connects to the listener at `addr`: the endpoint once the server
    /// accepted, or its refusal (see [`Worker::connect_start`]).
    ///
    /// [`Worker::connect_start`]: crate::Worker::connect_start
    pub fn connect_to(&self, addr: SocketAddr, params: EpParams) -> LocalPolling<Ep> {
        LocalPolling::start(
            self,
            |w| w.connect_start(addr, params),
            |w, c| w.connect_poll(c),
        )
    }

    /// Listens for clients on `addr` (port 0: any); their requests queue
    /// in the listener until [`LocalListener::accept`] takes them.
    pub fn listen(&self, addr: SocketAddr) -> Result<LocalListener> {
        let incoming = Incoming::default();
        let queue = Incoming::clone(&incoming);
        let l = self
            .inner
            .borrow_for_post()?
            .listen(addr, move |_, req| queue.lock().push_back(req))?;
        Ok(LocalListener {
            w: self.clone(),
            l,
            incoming,
        })
    }

    /// Completes every operation posted on the worker so far.
    pub fn flush(&self) -> LocalFlush {
        LocalPolling::start(self, |w| Ok(w.flush_start()), |w, f| w.flush_poll(f))
    }

    /// Completes every operation posted on `ep` so far.
    pub fn ep_flush(&self, ep: Ep) -> LocalFlush {
        LocalPolling::start(self, |w| w.ep_flush_start(ep), |w, f| w.flush_poll(f))
    }

    /// Closes `ep` in `mode` (see [`Worker::ep_close_start`]); the future
    /// ends once it is closed.
    ///
    /// [`Worker::ep_close_start`]: crate::Worker::ep_close_start
    pub fn ep_close(&self, ep: Ep, mode: CloseMode) -> LocalPolling<()> {
        LocalPolling::start(
            self,
            |w| w.ep_close_start(ep, mode),
            |w, c| w.ep_close_poll(c),
        )
    }

    /// Receives exactly `buf.len()` bytes of `ep`'s stream into `buf`; a
    /// drop before completion cancels it.
    pub fn stream_recv_all<B: IoBufMut>(&self, ep: Ep, buf: B) -> Result<LocalFuture<B>> {
        self.post(true, |w| w.stream_recv_all(ep, buf, Op::new()))
    }

    /// Performs `op` with `value` on the word at `remote_addr` without
    /// fetching (see [`Worker::atomic_post`]).
    ///
    /// [`Worker::atomic_post`]: crate::Worker::atomic_post
    pub fn atomic_post(
        &self,
        ep: Ep,
        op: AtomicOp,
        value: AtomicValue,
        remote_addr: u64,
        rkey: &Rkey,
    ) -> Result<LocalFuture<()>> {
        self.post_raw(false, |w| {
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
    ) -> Result<LocalFuture<Fetched>> {
        self.post_raw(false, |w| {
            atomic_fetch_post(w, ep, op, value, compare, remote_addr, rkey)
        })
    }
}

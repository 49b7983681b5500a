//! [`WorkerMut`]: the worker as completion callbacks and scoped sections
//! get it.
//!
//! A callback runs inside `progress`, and a scoped section inside
//! [`Worker::scope`], while the worker holds requests whose buffers are
//! borrowed (a scope's) or owned by it. Handing such code a `&mut Worker`
//! would let it move the worker out (`std::mem::swap` or
//! `std::mem::replace` with another one) and keep it: the scope would then
//! drain the wrong worker and return while the real one still has
//! transfers writing into the scope's buffers. A `WorkerMut` offers every
//! operation of the worker but never the worker itself: it dereferences
//! only to `&Worker`, so nothing can be moved out of it.
//!
//! Every `&mut self` method of [`Worker`] that an application calls has a
//! forwarder here; a new one gets its forwarder beside the others.
#![allow(unsafe_code)]

use super::{Message, OpError, Scope};
use crate::dt::{Pack, Unpack};
use crate::request::{Completion, Info, IoBuf, IoBufMut, Op, Posted, ReqId};
use crate::rma::{AtomicOp, AtomicValue, Rkey};
use crate::uct::{Iov, IovMut};
use crate::worker::{
    AmMsg, AmParams, Armed, CloseMode, Closing, ConnRequest, Connecting, EpParams, Flushing,
    Listener, Waker,
};
use crate::{Ep, Error, Result, Worker};
use std::os::fd::RawFd;
use std::time::Duration;

/// Every operation of a [`Worker`], for code that runs while the worker is
/// borrowed by rucx: completion callbacks ([`Op::callback`]) and
/// [`Scope::with_worker`]. Reads go through `Deref<Target = Worker>`;
/// there is no way to get the `&mut Worker` itself, so the worker cannot
/// be swapped or moved away while its requests are in flight.
pub struct WorkerMut<'w> {
    w: &'w mut Worker,
}

impl std::fmt::Debug for WorkerMut<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("WorkerMut").field(&*self.w).finish()
    }
}

impl<'w> WorkerMut<'w> {
    /// Lends `w` to code that must not move it.
    pub(crate) fn new(w: &'w mut Worker) -> WorkerMut<'w> {
        WorkerMut { w }
    }
}

impl std::ops::Deref for WorkerMut<'_> {
    type Target = Worker;

    #[inline]
    fn deref(&self) -> &Worker {
        self.w
    }
}

/// Forwarders of safe, non-generic methods: `fn name(&mut self, args) ->
/// ret;` becomes a method calling `Worker::name`.
macro_rules! forward {
    ($($(#[$doc:meta])* fn $name:ident(&mut self $(, $arg:ident: $ty:ty)*) $(-> $ret:ty)?;)*) => {
        $(
            $(#[$doc])*
            #[inline]
            pub fn $name(&mut self $(, $arg: $ty)*) $(-> $ret)? {
                self.w.$name($($arg),*)
            }
        )*
    };
}

impl WorkerMut<'_> {
    forward! {
        /// [`Worker::connect`].
        fn connect(&mut self, remote: &[u8]) -> Result<Ep>;
        /// [`Worker::connect_with`].
        fn connect_with(&mut self, remote: &[u8], params: EpParams) -> Result<Ep>;
        /// [`Worker::waker`].
        fn waker(&mut self) -> Result<Waker>;
        /// [`Worker::accept`].
        fn accept(&mut self, req: ConnRequest, params: EpParams) -> Result<Ep>;
        /// [`Worker::listener_close`].
        fn listener_close(&mut self, l: Listener) -> Result<()>;
        /// [`Worker::connect_start`].
        fn connect_start(&mut self, addr: std::net::SocketAddr, params: EpParams) -> Result<Connecting>;
        /// [`Worker::connect_poll`].
        fn connect_poll(&mut self, c: &mut Connecting) -> Option<Result<Ep>>;
        /// [`Worker::am_send`].
        fn am_send(&mut self, ep: Ep, id: u16, header: &[u8], data: &[u8], params: AmParams) -> Result<Posted<()>>;
        /// [`Worker::am_recv_data_blocking`].
        fn am_recv_data_blocking(&mut self, msg: AmMsg, buf: &mut [u8]) -> Result<Info>;
        /// [`Worker::am_clear_handler`].
        fn am_clear_handler(&mut self, id: u16);
        /// [`Worker::connect_to`].
        fn connect_to(&mut self, addr: std::net::SocketAddr, params: EpParams) -> Result<Ep>;
        /// [`Worker::ep_close`].
        fn ep_close(&mut self, ep: Ep) -> Result<()>;
        /// [`Worker::ep_close_start`].
        fn ep_close_start(&mut self, ep: Ep, mode: CloseMode) -> Result<Closing>;
        /// [`Worker::ep_close_poll`].
        fn ep_close_poll(&mut self, c: &mut Closing) -> Option<Result<()>>;
        /// [`Worker::flush_start`].
        fn flush_start(&mut self) -> Flushing;
        /// [`Worker::ep_flush_start`].
        fn ep_flush_start(&mut self, ep: Ep) -> Result<Flushing>;
        /// [`Worker::fence_start`].
        fn fence_start(&mut self) -> Flushing;
        /// [`Worker::flush_poll`].
        fn flush_poll(&mut self, f: &mut Flushing) -> Option<Result<()>>;
        /// [`Worker::ep_flush`].
        fn ep_flush(&mut self, ep: Ep) -> Result<()>;
        /// [`Worker::flush`].
        fn flush(&mut self) -> Result<()>;
        /// [`Worker::fence`].
        fn fence(&mut self) -> Result<()>;
        /// [`Worker::progress`].
        fn progress(&mut self) -> usize;
        /// [`Worker::next_completion`].
        fn next_completion(&mut self) -> Option<Completion>;
        /// [`Worker::request_test`].
        fn request_test(&mut self, id: ReqId) -> Option<Result<Info>>;
        /// [`Worker::request_wait`].
        fn request_wait(&mut self, id: ReqId) -> Result<Info>;
        /// [`Worker::request_release`].
        fn request_release(&mut self, id: ReqId);
        /// [`Worker::take_released_error`].
        fn take_released_error(&mut self) -> Option<Error>;
        /// [`Worker::request_cancel`].
        fn request_cancel(&mut self, id: ReqId) -> bool;
        /// [`Worker::tag_probe`].
        fn tag_probe(&mut self, tag: u64, mask: u64) -> Option<Info>;
        /// [`Worker::tag_probe_remove`].
        fn tag_probe_remove(&mut self, tag: u64, mask: u64) -> Option<Message>;
        /// [`Worker::tag_msg_recv_blocking`].
        fn tag_msg_recv_blocking(&mut self, msg: Message, buf: &mut [u8]) -> Result<Info>;
        /// [`Worker::tag_send_blocking`].
        fn tag_send_blocking(&mut self, ep: Ep, buf: &[u8], tag: u64) -> Result<Info>;
        /// [`Worker::tag_send_sync_blocking`].
        fn tag_send_sync_blocking(&mut self, ep: Ep, buf: &[u8], tag: u64) -> Result<Info>;
        /// [`Worker::tag_recv_blocking`].
        fn tag_recv_blocking(&mut self, buf: &mut [u8], tag: u64, mask: u64) -> Result<Info>;
        /// [`Worker::put_blocking`].
        fn put_blocking(&mut self, ep: Ep, data: &[u8], remote_addr: u64, rkey: &Rkey) -> Result<()>;
        /// [`Worker::get_blocking`].
        fn get_blocking(&mut self, ep: Ep, buf: &mut [u8], remote_addr: u64, rkey: &Rkey) -> Result<()>;
        /// [`Worker::atomic_post`].
        fn atomic_post(&mut self, ep: Ep, op: AtomicOp, value: AtomicValue, remote_addr: u64, rkey: &Rkey, o: Op) -> Result<Posted<()>>;
        /// [`Worker::atomic_blocking`].
        fn atomic_blocking(&mut self, ep: Ep, op: AtomicOp, value: AtomicValue, compare: u64, remote_addr: u64, rkey: &Rkey) -> Result<AtomicValue>;
        /// [`Worker::event_fd`].
        fn event_fd(&mut self) -> Result<RawFd>;
        /// [`Worker::arm`].
        fn arm(&mut self) -> Result<Armed>;
        /// [`Worker::wait_event`].
        fn wait_event(&mut self, timeout: Option<Duration>) -> Result<()>;
    }

    /// [`Worker::am_set_handler`].
    pub fn am_set_handler(
        &mut self,
        id: u16,
        f: impl FnMut(&mut WorkerMut<'_>, AmMsg) + Send + 'static,
    ) {
        self.w.am_set_handler(id, f)
    }

    /// [`Worker::am_set_inline_handler`].
    pub fn am_set_inline_handler(
        &mut self,
        id: u16,
        f: impl FnMut(&[u8], &[u8]) -> bool + Send + 'static,
    ) {
        self.w.am_set_inline_handler(id, f)
    }

    /// [`Worker::listen`].
    pub fn listen(
        &mut self,
        addr: std::net::SocketAddr,
        on_request: impl FnMut(&mut WorkerMut<'_>, ConnRequest) + Send + 'static,
    ) -> Result<Listener> {
        self.w.listen(addr, on_request)
    }

    /// [`Worker::tag_send`].
    #[inline]
    pub fn tag_send<B: IoBuf>(&mut self, ep: Ep, buf: B, tag: u64, op: Op) -> Result<Posted<B>> {
        self.w.tag_send(ep, buf, tag, op)
    }

    /// [`Worker::tag_recv`].
    #[inline]
    pub fn tag_recv<B: IoBufMut>(
        &mut self,
        buf: B,
        tag: u64,
        mask: u64,
        op: Op,
    ) -> Result<Posted<B>> {
        self.w.tag_recv(buf, tag, mask, op)
    }

    /// [`Worker::tag_msg_recv`].
    #[inline]
    pub fn tag_msg_recv<B: IoBufMut>(&mut self, msg: Message, buf: B, op: Op) -> Result<Posted<B>> {
        self.w.tag_msg_recv(msg, buf, op)
    }

    /// [`Worker::am_recv_data`].
    #[inline]
    pub fn am_recv_data<B: IoBufMut>(&mut self, msg: AmMsg, buf: B, op: Op) -> Result<Posted<B>> {
        self.w.am_recv_data(msg, buf, op)
    }

    /// [`Worker::am_send_owned`].
    #[inline]
    pub fn am_send_owned<B: IoBuf>(
        &mut self,
        ep: Ep,
        id: u16,
        header: &[u8],
        buf: B,
        params: AmParams,
        op: Op,
    ) -> Result<Posted<B>> {
        self.w.am_send_owned(ep, id, header, buf, params, op)
    }

    /// [`Worker::tag_send_dt`].
    pub fn tag_send_dt<D: Pack>(&mut self, ep: Ep, data: D, tag: u64, op: Op) -> Result<Posted<D>> {
        self.w.tag_send_dt(ep, data, tag, op)
    }

    /// [`Worker::tag_recv_dt`].
    pub fn tag_recv_dt<D: Unpack>(
        &mut self,
        data: D,
        tag: u64,
        mask: u64,
        op: Op,
    ) -> Result<Posted<D>> {
        self.w.tag_recv_dt(data, tag, mask, op)
    }

    /// [`Worker::stream_send_dt`].
    pub fn stream_send_dt<D: Pack>(&mut self, ep: Ep, data: D, op: Op) -> Result<Posted<D>> {
        self.w.stream_send_dt(ep, data, op)
    }

    /// [`Worker::stream_recv_dt`].
    pub fn stream_recv_dt<D: Unpack>(&mut self, ep: Ep, data: D, op: Op) -> Result<Posted<D>> {
        self.w.stream_recv_dt(ep, data, op)
    }

    /// [`Worker::tag_msg_recv_dt`].
    pub fn tag_msg_recv_dt<D: Unpack>(
        &mut self,
        msg: Message,
        data: D,
        op: Op,
    ) -> Result<Posted<D>> {
        self.w.tag_msg_recv_dt(msg, data, op)
    }

    /// [`Worker::stream_recv_all_dt`].
    pub fn stream_recv_all_dt<D: Unpack>(&mut self, ep: Ep, data: D, op: Op) -> Result<Posted<D>> {
        self.w.stream_recv_all_dt(ep, data, op)
    }

    /// [`Worker::am_send_dt`].
    pub fn am_send_dt<D: Pack>(
        &mut self,
        ep: Ep,
        id: u16,
        header: &[u8],
        data: D,
        params: AmParams,
        op: Op,
    ) -> Result<Posted<D>> {
        self.w.am_send_dt(ep, id, header, data, params, op)
    }

    /// [`Worker::am_recv_data_dt`]: a handler fetches a rendezvous
    /// message's data into a layout of its choosing.
    pub fn am_recv_data_dt<D: Unpack>(&mut self, msg: AmMsg, data: D, op: Op) -> Result<Posted<D>> {
        self.w.am_recv_data_dt(msg, data, op)
    }

    /// [`Worker::take`].
    #[inline]
    pub fn take<B: 'static>(&mut self, id: ReqId) -> Option<Result<(Info, B), OpError<B>>> {
        self.w.take(id)
    }

    /// [`Worker::scope`]: a scope nested in a callback or a scoped
    /// section drains before it returns, like any other.
    #[inline]
    pub fn scope<'env, F, T>(&mut self, f: F) -> T
    where
        F: for<'s> FnOnce(&'s Scope<'s, 'env>) -> T,
    {
        self.w.scope(f)
    }

    /// [`Worker::tag_send_raw`].
    ///
    /// # Safety
    ///
    /// As for [`Worker::tag_send_raw`].
    #[inline]
    pub unsafe fn tag_send_raw(
        &mut self,
        ep: Ep,
        ptr: *const u8,
        len: usize,
        tag: u64,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.w.tag_send_raw(ep, ptr, len, tag, op) }
    }

    /// [`Worker::tag_recv_raw`].
    ///
    /// # Safety
    ///
    /// As for [`Worker::tag_recv_raw`].
    #[inline]
    pub unsafe fn tag_recv_raw(
        &mut self,
        ptr: *mut u8,
        len: usize,
        tag: u64,
        mask: u64,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.w.tag_recv_raw(ptr, len, tag, mask, op) }
    }

    /// [`Worker::am_recv_data_raw`].
    ///
    /// # Safety
    ///
    /// As for [`Worker::am_recv_data_raw`].
    #[inline]
    pub unsafe fn am_recv_data_raw(
        &mut self,
        msg: AmMsg,
        ptr: *mut u8,
        len: usize,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.w.am_recv_data_raw(msg, ptr, len, op) }
    }

    /// [`Worker::put_raw`].
    ///
    /// # Safety
    ///
    /// As for [`Worker::put_raw`].
    #[inline]
    pub unsafe fn put_raw(
        &mut self,
        ep: Ep,
        ptr: *const u8,
        len: usize,
        remote_addr: u64,
        rkey: &Rkey,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.w.put_raw(ep, ptr, len, remote_addr, rkey, op) }
    }

    /// [`Worker::get_raw`].
    ///
    /// # Safety
    ///
    /// As for [`Worker::get_raw`].
    #[inline]
    pub unsafe fn get_raw(
        &mut self,
        ep: Ep,
        ptr: *mut u8,
        len: usize,
        remote_addr: u64,
        rkey: &Rkey,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.w.get_raw(ep, ptr, len, remote_addr, rkey, op) }
    }

    /// [`Worker::put_iov_raw`].
    ///
    /// # Safety
    ///
    /// As for [`Worker::put_iov_raw`].
    #[inline]
    pub unsafe fn put_iov_raw(
        &mut self,
        ep: Ep,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &Rkey,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.w.put_iov_raw(ep, iov, remote_addr, rkey, op) }
    }

    /// [`Worker::get_iov_raw`].
    ///
    /// # Safety
    ///
    /// As for [`Worker::get_iov_raw`].
    #[inline]
    pub unsafe fn get_iov_raw(
        &mut self,
        ep: Ep,
        iov: &[IovMut],
        remote_addr: u64,
        rkey: &Rkey,
        op: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.w.get_iov_raw(ep, iov, remote_addr, rkey, op) }
    }

    /// [`Worker::atomic_fetch_raw`].
    ///
    /// # Safety
    ///
    /// As for [`Worker::atomic_fetch_raw`].
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub unsafe fn atomic_fetch_raw(
        &mut self,
        ep: Ep,
        op: AtomicOp,
        value: AtomicValue,
        compare: u64,
        result: *mut u64,
        remote_addr: u64,
        rkey: &Rkey,
        o: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: forwarded from this function's contract.
        unsafe {
            self.w
                .atomic_fetch_raw(ep, op, value, compare, result, remote_addr, rkey, o)
        }
    }
}

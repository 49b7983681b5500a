//! Operations posted on a client endpoint whose connect is not answered
//! yet: as UCX does, the call returns a request at once, and the
//! operation goes out, in posting order, once the connection is there
//! (or its request fails with the connect's status, or with
//! `UCS_ERR_CANCELED` if the endpoint is closed with
//! `UCP_EP_CLOSE_FLAG_FORCE` first).
//!
//! Deferred this way: tag, stream and active message sends and stream
//! receives (`post::post_ep`); puts, gets and atomics (`onesided.rs`;
//! the implicit ones with a request the application does not see);
//! endpoint flushes (`flush.rs`), started once the operations before them
//! are posted, and worker flushes wait for them too; and a flush-mode
//! close, which
//! closes the endpoint once its connect ended and what was posted on it
//! went out. A remote key unpacked on such an endpoint keeps its bytes
//! until the connect unpacks it ([`List::add_key`]). The other calls
//! that need the Rust endpoint (`ucp_ep_evaluate_perf`,
//! `ucp_ep_print_info`) wait for the connect inside the call,
//! progressing the worker (`Endpoint::rep`).

use crate::ep::{Conn, Endpoint};
use crate::request::{self, Cb, Header, Opts};
use crate::rkey::RkeyH;
use crate::status;
use crate::types::*;
use crate::worker::{Polled, Worker};
use rucx::{Op, Posted, Rkey};
use std::borrow::Cow;
use std::ffi::c_void;

/// An operation that posts itself on the Rust endpoint it is given.
pub(crate) type Deferred =
    Box<dyn FnOnce(&mut rucx::Worker, rucx::Ep, Op) -> rucx::Result<Posted<()>>>;

/// A deferred operation.
enum Entry {
    /// Posted with an [`Op`] reporting to its request.
    Op(Deferred),
    /// An endpoint flush, polled once started.
    Flush,
}

/// The Rust endpoint an operation on `e` goes to: `Some` if connected,
/// `None` if it waits for the connect (under way, or failed and not
/// reported yet: its operations fail when its error handler runs, as
/// those of a later failure); the endpoint's status if it failed.
#[inline]
pub(crate) fn target(e: &Endpoint) -> Result<Option<rucx::Ep>, StatusCode> {
    if let Ok(Conn::Ready(ep)) = e.conn.try_borrow().as_deref() {
        return Ok(Some(*ep));
    }
    target_slow(e)
}

/// [`target`] of an endpoint not ready.
#[cold]
fn target_slow(e: &Endpoint) -> Result<Option<rucx::Ep>, StatusCode> {
    let me = (e as *const Endpoint).cast_mut();
    match &*e.conn.borrow() {
        Conn::Ready(ep) => Ok(Some(*ep)),
        Conn::Connecting(_) => Ok(None),
        Conn::Failed(_) if e.worker().with_connecting(|v| v.contains(&me)) => Ok(None),
        Conn::Failed(st) | Conn::Broken(_, st) => Err(*st),
    }
}

/// Whether operations on `e` wait for its connect ([`target`] is `None`).
pub(crate) fn waits_for_connect(e: &Endpoint) -> bool {
    matches!(target(e), Ok(None))
}

/// Defers `entry` on `e` with a request of options `o`: the request
/// handle, or an error pointer if there is no request.
fn push(e: &Endpoint, o: &Opts, entry: Entry) -> StatusPtr {
    match request::alloc(e.worker(), o) {
        Ok(h) => {
            e.deferred.borrow_mut().ops.push((h, entry));
            request::user_ptr(h)
        }
        Err(st) => status::ptr(st),
    }
}

/// Defers operation `f` on `e`, which waits for its connect.
pub(crate) fn defer(e: &Endpoint, o: &Opts, f: Deferred) -> StatusPtr {
    if o.force_imm {
        // It cannot complete while its endpoint connects.
        return crate::status::ptr(crate::status::NO_RESOURCE);
    }
    push(e, o, Entry::Op(f))
}

/// Defers implicit operation `f` (an `_nbi` one) on `e`, which waits for
/// its connect: its request is one the application does not hold (it
/// goes back to the pool when the operation ends); a flush waits for
/// it. `UCS_INPROGRESS`, or the status if there is no request.
pub(crate) fn defer_implicit(e: &Endpoint, f: Deferred) -> StatusCode {
    match request::alloc(e.worker(), &Opts::new(Cb::None)) {
        Ok(h) => {
            // SAFETY: a fresh header, not handed out.
            unsafe { (*h).flags |= request::RELEASED };
            e.deferred.borrow_mut().ops.push((h, Entry::Op(f)));
            status::INPROGRESS
        }
        Err(st) => st,
    }
}

/// Whether operations wait on `e` for its connect (a worker flush waits
/// for them too).
pub(crate) fn has_ops(e: &Endpoint) -> bool {
    e.deferred.try_borrow().map_or(true, |l| !l.ops.is_empty())
}

/// Defers a flush of `e`, which waits for its connect: it starts once
/// the operations deferred before it are posted.
pub(crate) fn defer_flush(e: &Endpoint, o: &Opts) -> StatusPtr {
    push(e, o, Entry::Flush)
}

/// Defers a flush-mode close of `e`, which waits for its connect: once
/// connected, the deferred operations are posted and the endpoint is
/// closed as `ucp_ep_close_nbx` closes a connected one; if the connect
/// fails, they fail with it and the close completes (see [`close_failed`]).
/// The application gave `e` up: nothing is posted on it after this.
pub(crate) fn defer_close(e: &Endpoint, o: &Opts) -> StatusPtr {
    match request::alloc(e.worker(), o) {
        Ok(h) => {
            e.deferred.borrow_mut().close = Some(h);
            request::user_ptr(h)
        }
        Err(st) => status::ptr(st),
    }
}

/// A remote key an operation uses, owned so that the operation can wait
/// for its endpoint's connect.
pub(crate) enum OwnedKey {
    /// Unpacked.
    Ready(Rkey),
    /// Packed, unpacked on the endpoint the operation runs on.
    Packed(Box<[u8]>),
}

impl OwnedKey {
    /// The key of `k` (the key of a map of 0 bytes has none).
    pub(crate) fn of(k: &RkeyH) -> Option<OwnedKey> {
        match (&k.key, &k.pending) {
            (Some(key), _) => Some(OwnedKey::Ready(key.clone())),
            (None, Some(p)) => Some(OwnedKey::Packed(p.bytes.clone())),
            (None, None) => None,
        }
    }

    /// The key on endpoint `ep` of `rw`.
    pub(crate) fn on(&self, rw: &mut rucx::Worker, ep: rucx::Ep) -> rucx::Result<Cow<'_, Rkey>> {
        match self {
            OwnedKey::Ready(k) => Ok(Cow::Borrowed(k)),
            OwnedKey::Packed(bytes) => rw.rkey_unpack(ep, bytes).map(Cow::Owned),
        }
    }
}

/// Posts what was deferred on `p`, which just connected as `ep`: unpacks
/// its keys, posts its operations in order, starts its flushes, then, if
/// the application closed it meanwhile, closes it (and frees it). Runs no
/// C code but the application's `request_init`: the requests of those
/// done at once are completed by the next `ucp_worker_progress`
/// ([`Worker::with_late`]).
pub(crate) fn run(w: &Worker, p: *mut Endpoint, ep: rucx::Ep) {
    let (ops, keys, close) = {
        // SAFETY: a live endpoint (in the worker's tables); this reference
        // ends before the close below may free it.
        let mut l = unsafe { &*p }.deferred.borrow_mut();
        (
            std::mem::take(&mut l.ops),
            std::mem::take(&mut l.keys),
            l.close.take(),
        )
    };
    for k in keys {
        // SAFETY: a live key: one destroyed leaves the list first.
        let k = unsafe { &mut *k };
        let Some(mut pending) = k.pending.take() else {
            continue;
        };
        match w.with(|rw| rw.rkey_unpack(ep, &pending.bytes)) {
            Ok(key) => k.key = Some(key),
            Err(e) => {
                // Operations with it unpack it again and fail.
                tracing::debug!("rucx: remote key unpacked while connecting: {e}");
                pending.ep = std::ptr::null();
                k.pending = Some(pending);
            }
        }
    }
    let mut done = Vec::new();
    for (h, entry) in ops {
        let r = match entry {
            Entry::Op(f) => {
                let op = Op::new().queue().user_data(h as usize as u64);
                w.with(|rw| f(rw, ep, op))
            }
            Entry::Flush => match w.with(|rw| rw.ep_flush_start(ep)) {
                Ok(f) => {
                    w.with_polled(|v| v.push((h, Polled::Flush(f))));
                    continue;
                }
                Err(e) => Err(e),
            },
        };
        match r {
            // SAFETY: the header of a request posted now; the worker's
            // lock is held.
            Ok(Posted::InFlight(id)) => unsafe { request::set_in_flight(h, id) },
            Ok(Posted::Done(info, ())) => done.push((
                h,
                status::OK,
                TagRecvInfo {
                    sender_tag: info.tag,
                    length: info.length,
                },
            )),
            Err(err) => done.push((h, status::of(&err), TagRecvInfo::default())),
        }
    }
    w.with_late(|v| v.extend(done));
    // Every deferred operation is in the worker: sends may take the
    // endpoint's own path from now on.
    // SAFETY: live, as above (the close below may free it).
    unsafe { &*p }.publish(ep);
    if let Some(h) = close {
        // The close's own request reports to the application's.
        let o = Opts::new(Cb::Send(close_done, h.cast()));
        // SAFETY: a live endpoint the application gave up; freed here,
        // and not used after.
        let r = unsafe { crate::ep::close(p, false, &o) };
        if let Some(st) = status::of_ptr(r) {
            w.with_late(|v| v.push((h, st, TagRecvInfo::default())));
        }
    }
}

/// Completes the application's close request `h` with the status of the
/// close made for it (`req`), and frees the latter.
unsafe extern "C" fn close_done(req: *mut c_void, st: StatusCode, h: *mut c_void) {
    // SAFETY: `req` is the close's request, completed now, freed once;
    // `h` the live header of the application's request, not completed
    // yet; this runs where C code may run.
    unsafe {
        request::ucp_request_free(req);
        request::complete(h.cast(), st, TagRecvInfo::default());
    }
}

/// Completes the operations deferred on `e` with `st` (its connect
/// failed, or it is closed); returns how many. Its keys will not be
/// unpacked by a connect.
pub(crate) fn fail(e: &Endpoint, st: StatusCode) -> usize {
    let ops = {
        let mut l = e.deferred.borrow_mut();
        l.forget_keys();
        std::mem::take(&mut l.ops)
    };
    let n = ops.len();
    for (h, _) in ops {
        // SAFETY: a live header not completed yet; no borrow is alive.
        unsafe { request::complete(h, st, TagRecvInfo::default()) };
    }
    n
}

/// For client endpoint `p` whose connect failed with `st`: if the
/// application closed it in flush mode meanwhile, fails its deferred
/// operations, frees it and completes the close (`UCS_OK`, as the close
/// of an endpoint never connected); how many requests ended. `None` if
/// it was not closed (its error handler is then to run). Runs C
/// callbacks.
pub(crate) fn close_failed(p: *mut Endpoint, st: StatusCode) -> Option<usize> {
    // SAFETY: a live endpoint (the caller's contract).
    let e = unsafe { &*p };
    let h = e.deferred.borrow_mut().close.take()?;
    let n = fail(e, st);
    // SAFETY: a live endpoint the application gave up, out of the
    // connecting list: freed here, done at once.
    let r = unsafe { crate::ep::close(p, false, &Opts::new(Cb::None)) };
    let close_st = status::of_ptr(r).unwrap_or(status::OK);
    // SAFETY: the application's live request; no borrow is alive.
    unsafe { request::complete(h, close_st, TagRecvInfo::default()) };
    Some(n + 1)
}

/// The deferred operations of an endpoint, with their requests, in
/// posting order; the remote keys unpacked on it while it connects; the
/// request of a flush-mode close.
#[derive(Default)]
pub(crate) struct List {
    ops: Vec<(*mut Header, Entry)>,
    keys: Vec<*mut RkeyH>,
    close: Option<*mut Header>,
}

impl List {
    /// Appends operation `f`, whose request is `h`.
    pub(crate) fn push(&mut self, h: *mut Header, f: Deferred) {
        self.ops.push((h, Entry::Op(f)));
    }

    /// Adds key `k`, whose bytes wait for the connect.
    pub(crate) fn add_key(&mut self, k: *mut RkeyH) {
        self.keys.push(k);
    }

    /// Removes key `k` (destroyed before the connect).
    pub(crate) fn remove_key(&mut self, k: *mut RkeyH) {
        self.keys.retain(|&q| q != k);
    }

    /// Tells the keys waiting for the connect that it will not unpack
    /// them (their endpoint goes, or failed).
    fn forget_keys(&mut self) {
        for k in self.keys.drain(..) {
            // SAFETY: a live key: one destroyed leaves the list first.
            if let Some(p) = unsafe { (*k).pending.as_mut() } {
                p.ep = std::ptr::null();
            }
        }
    }
}

impl Drop for List {
    fn drop(&mut self) {
        self.forget_keys();
    }
}

impl std::fmt::Debug for List {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} deferred operations, {} keys, close: {}",
            self.ops.len(),
            self.keys.len(),
            self.close.is_some()
        )
    }
}

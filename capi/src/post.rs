//! Posting an operation for C: [`post`] gives it a request (from the
//! pool only once it goes in flight) or returns NULL when it is done at
//! once; [`post_ep`] posts on a C endpoint, or defers the operation while
//! the endpoint still connects (`deferred.rs`). The tag, stream and
//! active message calls post through here.

use crate::ep::{Conn, Endpoint};
use crate::request::{self, Cb, Opts};
use crate::status;
use crate::types::*;
use crate::worker::Worker;
use rucx::{Op, Posted};
use std::ptr;

/// Posts an operation of worker `w` with request options `o`: `post`
/// gets the Rust worker and the [`Op`] that reports to the request.
pub(crate) fn post(
    w: &Worker,
    o: &Opts,
    post: impl FnOnce(&mut rucx::Worker, Op) -> rucx::Result<Posted<()>>,
) -> StatusPtr {
    if !o.no_imm {
        if !o.external.is_null() && !request::aligned(o.external) {
            return status::ptr(status::INVALID_PARAM);
        }
        let at = Done {
            external: o.external,
            recv_info: o.recv_info,
            mark: true,
        };
        let force = o.force_imm;
        return post_lazy(
            w,
            &at,
            || *o,
            || o.cb,
            move |rw, op| post(rw, if force { op.immediate() } else { op }),
        );
    }
    let h = match request::alloc(w, o) {
        Ok(h) => h,
        Err(st) => return status::ptr(st),
    };
    let op = o.op(Op::new().queue().user_data(h as usize as u64));
    let r = w.with(|rw| post(rw, op));
    match r {
        Ok(Posted::InFlight(id)) => {
            // SAFETY: the header just written; the worker's lock is held.
            unsafe { request::set_in_flight(h, id) };
            request::user_ptr(h)
        }
        Ok(Posted::Done(info, ())) => {
            let info = TagRecvInfo {
                sender_tag: info.tag,
                length: info.length,
            };
            if !o.recv_info.is_null() {
                // SAFETY: `recv_info` of the parameters is writable (the
                // caller's contract).
                unsafe { *o.recv_info = info };
            }
            // SAFETY: a fresh header; no borrow of the worker alive.
            unsafe { request::complete(h, status::OK, info) };
            request::user_ptr(h)
        }
        Err(e) => {
            // SAFETY: the request never went in flight.
            unsafe { request::recycle(h) };
            status::ptr(status::of(&e))
        }
    }
}

/// Where an operation that completes when posted reports: the
/// application's request memory (marked completed, for a later test, as
/// UCX's is, if `mark`) and a receive's `recv_info`; NULL for none.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    pub(crate) external: *mut std::ffi::c_void,
    pub(crate) recv_info: *mut TagRecvInfo,
    /// Mark `external` when done at once. UCX does for a receive (Open
    /// MPI tests its receive's memory whatever the call returned); a send
    /// done at once never touches it, and neither does this one's.
    pub(crate) mark: bool,
}

/// Posts an operation that takes a request only once it goes in flight
/// (a small send or a receive of a message already there completes when
/// posted and needs none): `opts` gives the request's options then (`cb`
/// its callback alone, for the application's request memory), and
/// the Rust request gets the request's address as its user data (known
/// before posting for the application's request memory, set after for
/// a pooled request). An operation done at once reports through `at`
/// and returns NULL.
///
/// `at.external`, if not NULL, was checked by [`request::aligned`].
#[inline(always)]
pub(crate) fn post_lazy(
    w: &Worker,
    at: &Done,
    opts: impl FnOnce() -> Opts,
    cb: impl FnOnce() -> Cb,
    post: impl FnOnce(&mut rucx::Worker, Op) -> rucx::Result<Posted<()>>,
) -> StatusPtr {
    // Marked memory is likely to go in flight (a receive): its user data
    // is set now, not looked up again after.
    let early = at.mark && !at.external.is_null();
    let h = request::header_of(at.external);
    let op = if early {
        // SAFETY: the application's request memory, aligned (checked by
        // the caller), with a header's room before it (contract of the
        // calls that take request memory); written before the post, whose
        // completion may mark it.
        unsafe { request::write_in_flight(w, h, cb()) };
        Op::new().queue().user_data(h as usize as u64)
    } else {
        Op::new().queue()
    };
    match w.with(|rw| post(rw, op)) {
        Ok(Posted::Done(info, ())) => {
            let info = TagRecvInfo {
                sender_tag: info.tag,
                length: info.length,
            };
            if !at.recv_info.is_null() {
                // SAFETY: `recv_info` of the parameters is writable (the
                // caller's contract).
                unsafe { *at.recv_info = info };
            }
            if early {
                // SAFETY: the application's request memory, aligned
                // (checked by the caller), with room for a header before
                // it (contract of the calls that take request memory).
                unsafe { request::write_done(w, at.external, info) };
            }
            ptr::null_mut()
        }
        Ok(Posted::InFlight(id)) if early => {
            // SAFETY: the header written above; the worker's lock is held.
            unsafe { request::set_in_flight(h, id) };
            at.external
        }
        Ok(Posted::InFlight(id)) => attach(w, &opts(), id),
        Err(e) => status::ptr(status::of(&e)),
    }
}

/// The outcome of a post that did not complete at once: a request with
/// the options `opts` gives if it went in flight, else its error (or NULL
/// if it did complete).
#[inline(never)]
pub(crate) fn finish(
    w: &Worker,
    r: rucx::Result<Posted<()>>,
    opts: impl FnOnce() -> Opts,
) -> StatusPtr {
    match r {
        Ok(Posted::Done(..)) => ptr::null_mut(),
        Ok(Posted::InFlight(id)) => attach(w, &opts(), id),
        Err(e) => status::ptr(status::of(&e)),
    }
}

/// A request with options `o` for Rust request `id`, which went in
/// flight.
#[inline(never)]
fn attach(w: &Worker, o: &Opts, id: rucx::ReqId) -> StatusPtr {
    match request::alloc(w, o) {
        Ok(h) => {
            w.with(|rw| rw.request_set_user_data(id, h as usize as u64));
            // SAFETY: the header just written; its request is in flight.
            unsafe { (*h).id = Some(id) };
            request::user_ptr(h)
        }
        Err(st) => {
            // No request to report to: it finishes on its own, and its
            // completion (user data 0) is passed over.
            w.with(|rw| rw.request_release(id));
            status::ptr(st)
        }
    }
}

/// Posts operation `f` on C endpoint `e` with options `o`: at once if
/// `e` is connected; with a request, deferred, while its connect is under
/// way; the endpoint's status if it failed.
#[inline(always)]
pub(crate) fn post_ep(
    e: &Endpoint,
    o: &Opts,
    f: impl FnOnce(&mut rucx::Worker, rucx::Ep, Op) -> rucx::Result<Posted<()>> + 'static,
) -> StatusPtr {
    if let Ok(Conn::Ready(ep)) = e.conn.try_borrow().as_deref() {
        let ep = *ep;
        return post(e.worker(), o, move |rw, op| f(rw, ep, op));
    }
    post_ep_slow(e, o, f)
}

/// [`post_ep`] on an endpoint not ready.
#[inline(never)]
fn post_ep_slow(
    e: &Endpoint,
    o: &Opts,
    f: impl FnOnce(&mut rucx::Worker, rucx::Ep, Op) -> rucx::Result<Posted<()>> + 'static,
) -> StatusPtr {
    let w = e.worker();
    let state = match &*e.conn.borrow() {
        Conn::Ready(ep) => Ok(Some(*ep)),
        Conn::Connecting(_) => Ok(None),
        // A connect that failed at once, not reported yet: its requests
        // fail when its error handler runs, as those of a later failure.
        Conn::Failed(_)
            if w.with_connecting(|v| v.contains(&(e as *const Endpoint).cast_mut())) =>
        {
            Ok(None)
        }
        Conn::Failed(st) | Conn::Broken(_, st) => Err(*st),
    };
    match state {
        Ok(Some(ep)) => post(w, o, move |rw, op| f(rw, ep, op)),
        // It cannot complete while its endpoint connects.
        Ok(None) if o.force_imm => status::ptr(status::NO_RESOURCE),
        Ok(None) => match request::alloc(w, o) {
            Ok(h) => {
                e.deferred.borrow_mut().push(h, Box::new(f));
                request::user_ptr(h)
            }
            Err(st) => status::ptr(st),
        },
        Err(st) => status::ptr(st),
    }
}

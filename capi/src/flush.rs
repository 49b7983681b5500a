//! Flushes: `ucp_ep_flush_nbx`, `ucp_ep_flush_nb`, `ucp_worker_flush_nbx`,
//! `ucp_worker_flush_nb`, and the blocking `ucp_ep_flush` and
//! `ucp_worker_flush` of the compatibility header. A flush is over once
//! everything posted before it left this process (a rendezvous send once
//! its receiver took the data).
//!
//! A flush of a client endpoint whose connect is under way returns a
//! request at once and starts once the endpoint connected and the
//! operations posted on it before went out (`deferred.rs`), and a worker
//! flush waits for the operations of such endpoints too; the blocking
//! `ucp_ep_flush` waits for its request, progressing the worker.

use crate::deferred;
use crate::ep::{post_polled, wait_ptr, Endpoint};
use crate::request::{self, ucp_request_free, Cb, Header, Opts};
use crate::status::{self, guard_ptr, guard_status};
use crate::types::*;
use crate::worker::{Polled, Worker};
use std::ffi::{c_uint, c_void};
use std::ptr;

/// Flush of endpoint `ep` as a request.
///
/// # Safety
///
/// `ep` is NULL or a live endpoint.
unsafe fn ep_flush(ep: *mut Endpoint, o: &Opts) -> StatusPtr {
    // SAFETY: NULL or live (contract).
    let Some(e) = (unsafe { ep.as_ref() }) else {
        return status::ptr(status::INVALID_PARAM);
    };
    let w = e.worker();
    let _g = w.enter();
    let rep = match deferred::target(e) {
        Ok(Some(r)) => r,
        Ok(None) => return deferred::defer_flush(e, o),
        Err(st) => return status::ptr(st),
    };
    match w.with(|rw| rw.ep_flush_start(rep)) {
        Ok(f) => post_polled(w, Polled::Flush(f), o),
        Err(e) => status::ptr(status::of(&e)),
    }
}

/// Flush of every endpoint of `worker` as a request: of the Rust
/// worker, and of each client endpoint whose connect is under way with
/// operations waiting for it ([`Group`]).
///
/// # Safety
///
/// `worker` is NULL or a live worker.
unsafe fn worker_flush(worker: *mut Worker, o: &Opts) -> StatusPtr {
    // SAFETY: NULL or live (contract).
    let Some(w) = (unsafe { worker.as_ref() }) else {
        return status::ptr(status::INVALID_PARAM);
    };
    let _g = w.enter();
    let f = w.with(|rw| rw.flush_start());
    let waiting: Vec<*mut Endpoint> = w.with_connecting(|v| {
        v.iter()
            .copied()
            // SAFETY: endpoints leave the list before they are freed.
            .filter(|&p| deferred::has_ops(unsafe { &*p }))
            .collect()
    });
    if waiting.is_empty() {
        return post_polled(w, Polled::Flush(f), o);
    }
    // One part more while the parts are posted, so that none ends it.
    let g = Box::into_raw(Box::new(Group {
        h: ptr::null_mut(),
        left: 1,
        status: status::OK,
    }));
    let ep_part = Opts::new(Cb::Send(ep_part_done, g.cast()));
    for p in waiting {
        // SAFETY: `g` is live until its last part ends.
        unsafe { (*g).left += 1 };
        // SAFETY: as above.
        let r = deferred::defer_flush(unsafe { &*p }, &ep_part);
        if status::of_ptr(r).is_some() {
            // SAFETY: a live group with parts left.
            unsafe { group_done(g, status::OK) };
        }
    }
    // SAFETY: as above.
    unsafe { (*g).left += 1 };
    let r = post_polled(
        w,
        Polled::Flush(f),
        &Opts::new(Cb::Send(part_done, g.cast())),
    );
    if let Some(st) = status::of_ptr(r) {
        // SAFETY: a live group with parts left.
        unsafe { group_done(g, st) };
    }
    // SAFETY: the group is live (its extra part is not counted down yet);
    // no part ends before the next progress.
    unsafe {
        if (*g).left == 1 {
            let g = Box::from_raw(g);
            return request::done_at_once(w, o, g.status, TagRecvInfo::default());
        }
        (*g).left -= 1;
        match request::alloc(w, o) {
            Ok(h) => {
                (*g).h = h;
                request::user_ptr(h)
            }
            Err(st) => status::ptr(st),
        }
    }
}

/// A worker flush made of parts: the application's request (NULL if
/// there is none) completes once the last part ended, with the status of
/// the Rust worker's flush (an endpoint whose connect failed reports
/// that to its error handler, not to the flush).
struct Group {
    h: *mut Header,
    left: usize,
    status: StatusCode,
}

/// Counts a part of group `g` ended with `st`; after the last, completes
/// the group's request and frees the group.
///
/// # Safety
///
/// `g` is a live group with parts left; no borrow of its worker is alive.
unsafe fn group_done(g: *mut Group, st: StatusCode) {
    // SAFETY: live (contract).
    let left = unsafe {
        if st != status::OK && (*g).status == status::OK {
            (*g).status = st;
        }
        (*g).left -= 1;
        (*g).left
    };
    if left == 0 {
        // SAFETY: made by Box::into_raw in worker_flush, freed once here.
        let g = unsafe { Box::from_raw(g) };
        if !g.h.is_null() {
            // SAFETY: the application's live request, not completed yet.
            unsafe { request::complete(g.h, g.status, TagRecvInfo::default()) };
        }
    }
}

/// The end of the Rust worker's flush of a group (`g`).
unsafe extern "C" fn part_done(req: *mut c_void, st: StatusCode, g: *mut c_void) {
    // SAFETY: the part's request, over now, freed once; `g` its group.
    unsafe {
        ucp_request_free(req);
        group_done(g.cast(), st);
    }
}

/// The end of a connecting endpoint's flush of a group (`g`).
unsafe extern "C" fn ep_part_done(req: *mut c_void, _st: StatusCode, g: *mut c_void) {
    // SAFETY: as in `part_done`.
    unsafe {
        ucp_request_free(req);
        group_done(g.cast(), status::OK);
    }
}

/// `ucp_ep_flush_nbx`.
///
/// # Safety
///
/// `ep` is a live endpoint; `param` NULL or a valid `ucp_request_param_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_ep_flush_nbx(
    ep: *mut Endpoint,
    param: *const RequestParam,
) -> StatusPtr {
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe { ep_flush(ep, &Opts::from_param(param, false)) })
}

/// `ucp_ep_flush_nb` (legacy); `flags` are reserved.
///
/// # Safety
///
/// `ep` is a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn ucp_ep_flush_nb(
    ep: *mut Endpoint,
    _flags: c_uint,
    cb: Option<SendCb>,
) -> StatusPtr {
    let o = Opts::new(cb.map_or(Cb::None, Cb::SendLegacy));
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe { ep_flush(ep, &o) })
}

/// `ucp_worker_flush_nbx`.
///
/// # Safety
///
/// `worker` is a live worker; `param` NULL or a valid
/// `ucp_request_param_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_flush_nbx(
    worker: *mut Worker,
    param: *const RequestParam,
) -> StatusPtr {
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe { worker_flush(worker, &Opts::from_param(param, false)) })
}

/// `ucp_worker_flush_nb` (legacy); `flags` are reserved.
///
/// # Safety
///
/// `worker` is a live worker.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_flush_nb(
    worker: *mut Worker,
    _flags: c_uint,
    cb: Option<SendCb>,
) -> StatusPtr {
    let o = Opts::new(cb.map_or(Cb::None, Cb::SendLegacy));
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe { worker_flush(worker, &o) })
}

/// `ucp_ep_flush` (blocking, legacy).
///
/// # Safety
///
/// `ep` is a live endpoint.
#[no_mangle]
pub unsafe extern "C" fn ucp_ep_flush(ep: *mut Endpoint) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or live (contract).
        let Some(e) = (unsafe { ep.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        let w = e.worker();
        // SAFETY: live endpoint (contract).
        let req = unsafe { ep_flush(ep, &Opts::new(Cb::None)) };
        wait_ptr(w, req)
    })
}

/// `ucp_worker_flush` (blocking, legacy).
///
/// # Safety
///
/// `worker` is a live worker.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_flush(worker: *mut Worker) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        // SAFETY: live worker (contract).
        let req = unsafe { worker_flush(worker, &Opts::new(Cb::None)) };
        wait_ptr(w, req)
    })
}

//! Flushes: `ucp_ep_flush_nbx`, `ucp_ep_flush_nb`, `ucp_worker_flush_nbx`,
//! `ucp_worker_flush_nb`, and the blocking `ucp_ep_flush` and
//! `ucp_worker_flush` of the compatibility header. A flush is over once
//! everything posted before it left this process (a rendezvous send once
//! its receiver took the data).
//!
//! A flush of a client endpoint whose connect is under way returns a
//! request at once and starts once the endpoint connected and the
//! operations posted on it before went out (`deferred.rs`); the blocking
//! `ucp_ep_flush` waits for that request, progressing the worker.

use crate::ep::{post_polled, wait_ptr, Endpoint};
use crate::request::{Cb, Opts};
use crate::status::{self, guard_ptr, guard_status};
use crate::types::*;
use crate::worker::{Polled, Worker};
use std::ffi::c_uint;

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
    let rep = match crate::deferred::target(e) {
        Ok(Some(r)) => r,
        Ok(None) => return crate::deferred::defer_flush(e, o),
        Err(st) => return status::ptr(st),
    };
    match w.with(|rw| rw.ep_flush_start(rep)) {
        Ok(f) => post_polled(w, Polled::Flush(f), o),
        Err(e) => status::ptr(status::of(&e)),
    }
}

/// Flush of every endpoint of `worker` as a request.
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
    post_polled(w, Polled::Flush(f), o)
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

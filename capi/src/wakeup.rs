//! Sleeping until a worker has work: `ucp_worker_get_efd`,
//! `ucp_worker_arm`, `ucp_worker_wait`, `ucp_worker_signal`.
//!
//! `arm` says `UCS_ERR_BUSY` whenever something is pending: in the Rust
//! worker (completions, commands, transports with events), or in this
//! layer (endpoint failures to report, closes and flushes under way: these
//! move on in `ucp_worker_progress`, so a caller with one pending
//! progresses rather than sleeps).

use crate::status::{self, guard_status};
use crate::types::StatusCode;
use crate::worker::Worker;
use rucx::ucp::Armed;
use std::ffi::c_int;

/// `ucp_worker_get_efd`: one file descriptor that becomes readable when
/// the worker may have work; call `ucp_worker_arm` before sleeping on it.
///
/// # Safety
///
/// `worker` is a live worker; `fd` is writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_get_efd(worker: *mut Worker, fd: *mut c_int) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        if fd.is_null() {
            return status::INVALID_PARAM;
        }
        let _g = w.enter();
        match w.with(|rw| rw.event_fd()) {
            Ok(f) => {
                // SAFETY: writable (contract, checked non-NULL).
                unsafe { *fd = f };
                status::OK
            }
            Err(e) => status::of(&e),
        }
    })
}

/// `ucp_worker_arm`: `UCS_OK` if the event fd will signal new work,
/// `UCS_ERR_BUSY` if work is pending already (progress instead).
///
/// # Safety
///
/// `worker` is a live worker.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_arm(worker: *mut Worker) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        let _g = w.enter();
        if w.pending() {
            return status::BUSY;
        }
        match w.with(|rw| rw.arm()) {
            Ok(Armed::Sleep) => status::OK,
            Ok(_) => status::BUSY,
            Err(e) => status::of(&e),
        }
    })
}

/// `ucp_worker_wait`: sleeps until the worker may have work (returns at
/// once if it has some already). It may return without any, as UCX's
/// may: callers progress and wait in a loop.
///
/// # Safety
///
/// `worker` is a live worker.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_wait(worker: *mut Worker) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        let _g = w.enter();
        if w.pending() {
            return status::OK;
        }
        match w.with(|rw| rw.wait_event(None)) {
            Ok(()) => status::OK,
            Err(e) => status::of(&e),
        }
    })
}

/// `ucp_worker_signal`: wakes the worker from any thread (its `wait`
/// returns, its next `arm` says busy).
///
/// # Safety
///
/// `worker` is a live worker.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_signal(worker: *mut Worker) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or live (contract). Only the thread-safe waker is
        // used: no lock and no borrow of the worker's state.
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        match w.waker.wake() {
            Ok(()) => status::OK,
            Err(e) => status::of(&e),
        }
    })
}

//! Streams: `ucp_stream_send_nbx`, `ucp_stream_recv_nbx`, the legacy
//! `ucp_stream_send_nb` and `ucp_stream_recv_nb`, and
//! `ucp_stream_recv_request_test`, over rucx's stream calls
//! (`stream_send_raw`, `stream_recv_raw`, `stream_*_dt`), with contiguous,
//! iovec and generic datatypes (`dt.rs`). The receives that hand data over
//! without a copy and `ucp_stream_worker_poll` are in `stream_data.rs`.
//!
//! A receive completes with what has arrived (at least one byte), or,
//! with `UCP_STREAM_RECV_FLAG_WAITALL`, once its buffer is full; the
//! length it reports is in bytes. A receive that completes when posted
//! returns NULL and sets `*length`, and its callback does not run, as in
//! UCX. A receive into a contiguous datatype of elements wider than a
//! byte completes with whole elements (or a full buffer), as UCX's; into
//! other datatypes, with any number of bytes.

use crate::dt::{self, Data};
use crate::ep::Endpoint;
use crate::post::post_ep;
use crate::request::{self, Cb, Opts};
use crate::status::{self, guard_ptr, guard_status};
use crate::types::*;
use std::ffi::{c_uint, c_void};

/// `ucp_stream_recv_callback_t` (the legacy receive's callback): the
/// request, its status and the bytes received.
pub type StreamRecvCb =
    unsafe extern "C" fn(request: *mut c_void, status: StatusCode, length: usize);

/// `UCP_STREAM_RECV_FLAG_WAITALL`: the receive completes once its buffer
/// is full.
pub const UCP_STREAM_RECV_FLAG_WAITALL: u32 = 1;

/// A stream send on `ep` with options `o`.
///
/// # Safety
///
/// `ep` is NULL or live; `buffer` holds the data until completion (an
/// iovec datatype's buffer is its list).
unsafe fn send(ep: *mut Endpoint, buffer: *const c_void, count: usize, o: &Opts) -> StatusPtr {
    // SAFETY: NULL or live (contract).
    let Some(e) = (unsafe { ep.as_ref() }) else {
        return status::ptr(status::INVALID_PARAM);
    };
    // SAFETY: forwarded contract.
    let data = match unsafe { dt::data(o.datatype, buffer, count, true) } {
        Ok(d) => d,
        Err(st) => return status::ptr(st),
    };
    let _g = e.worker().enter();
    post_ep(e, o, move |rw, rep, op| match data {
        // SAFETY: the application keeps the buffer valid until the request
        // completes (UCX's contract, which is the raw tier's).
        Data::Contig(len) => unsafe { rw.stream_send_raw(rep, buffer.cast(), len, op) },
        Data::Iov(iov) => {
            let r = rw.stream_send_dt(rep, iov, op);
            dt::detach(rw, r)
        }
        Data::Generic(g) => {
            let r = rw.stream_send_dt(rep, g, op);
            dt::detach(rw, r)
        }
    })
}

/// A stream receive on `ep` with options `o` (`o.flags` may hold
/// `UCP_STREAM_RECV_FLAG_WAITALL`); `*length` set if it completes at once.
///
/// # Safety
///
/// `ep` is NULL or live; `buffer` stays writable until completion (an
/// iovec datatype's buffer is its list); `length` is NULL or writable.
unsafe fn recv(
    ep: *mut Endpoint,
    buffer: *mut c_void,
    count: usize,
    length: *mut usize,
    o: &Opts,
) -> StatusPtr {
    // SAFETY: NULL or live (contract).
    let Some(e) = (unsafe { ep.as_ref() }) else {
        return status::ptr(status::INVALID_PARAM);
    };
    if length.is_null() {
        return status::ptr(status::INVALID_PARAM);
    }
    let wait_all = o.flags & UCP_STREAM_RECV_FLAG_WAITALL != 0;
    // SAFETY: forwarded contract.
    let data = match unsafe { dt::data(o.datatype, buffer, count, false) } {
        Ok(d) => d,
        Err(st) => return status::ptr(st),
    };
    // A contiguous receive completes with whole elements, as UCX's.
    let elem = (o.datatype >> UCP_DATATYPE_SHIFT) as usize;
    let _g = e.worker().enter();
    // `post` reports a completion at once here.
    let mut info = TagRecvInfo::default();
    let o = Opts {
        recv_info: &mut info,
        ..*o
    };
    let r = post_ep(e, &o, move |rw, rep, op| match data {
        // SAFETY: the application keeps the buffer valid until completion.
        Data::Contig(len) => unsafe {
            rw.stream_recv_elems_raw(rep, buffer.cast(), len, elem, wait_all, op)
        },
        Data::Iov(iov) => {
            let r = match wait_all {
                true => rw.stream_recv_all_dt(rep, iov, op),
                false => rw.stream_recv_dt(rep, iov, op),
            };
            dt::detach(rw, r)
        }
        Data::Generic(g) => {
            let r = match wait_all {
                true => rw.stream_recv_all_dt(rep, g, op),
                false => rw.stream_recv_dt(rep, g, op),
            };
            dt::detach(rw, r)
        }
    });
    if r.is_null() {
        // SAFETY: checked non-NULL; writable (contract).
        unsafe { *length = info.length };
    }
    r
}

/// The options of a stream receive's `param`: as a tag receive's, with
/// the callback read as `cb.recv_stream`.
///
/// # Safety
///
/// `param` is NULL or a valid `ucp_request_param_t`.
unsafe fn recv_opts(param: *const RequestParam) -> Opts {
    // SAFETY: forwarded contract.
    let mut o = unsafe { Opts::from_param(param, true) };
    o.recv_info = std::ptr::null_mut();
    // SAFETY: NULL or valid (contract).
    if let Some(p) = unsafe { param.as_ref() } {
        if p.op_attr_mask & UCP_OP_ATTR_FIELD_CALLBACK != 0 {
            let ud = match p.op_attr_mask & UCP_OP_ATTR_FIELD_USER_DATA != 0 {
                true => p.user_data,
                false => std::ptr::null_mut(),
            };
            // SAFETY: every member of the union is one function pointer;
            // `recv_am` has the type of `recv_stream`.
            o.cb = match unsafe { p.cb.recv_am } {
                Some(f) => Cb::StreamRecv(f, ud),
                None => Cb::None,
            };
        }
    }
    o
}

/// `ucp_stream_send_nbx`: sends `count` elements of the datatype at
/// `buffer` on `ep`'s stream. NULL if done at once, a request, or an
/// error pointer (`UCS_ERR_INVALID_PARAM` for a NULL endpoint).
///
/// # Safety
///
/// `ep` is NULL or a live endpoint; `buffer` holds the data until the
/// send completes; `param` is NULL or a valid `ucp_request_param_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_stream_send_nbx(
    ep: *mut Endpoint,
    buffer: *const c_void,
    count: usize,
    param: *const RequestParam,
) -> StatusPtr {
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe { send(ep, buffer, count, &Opts::from_param(param, false)) })
}

/// `ucp_stream_recv_nbx`: receives what has arrived on `ep`'s stream (at
/// least one byte, at most the buffer), or with
/// `UCP_STREAM_RECV_FLAG_WAITALL` in `param`'s flags a full buffer. NULL
/// with `*length` set if done at once, a request (its callback, if any,
/// gets the length), or an error pointer (`UCS_ERR_INVALID_PARAM` for a
/// NULL endpoint or `length`).
///
/// # Safety
///
/// `ep` is NULL or a live endpoint; `buffer` has room for `count`
/// elements and stays writable until the receive completes; `length` is
/// NULL or writable; `param` is NULL or a valid `ucp_request_param_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_stream_recv_nbx(
    ep: *mut Endpoint,
    buffer: *mut c_void,
    count: usize,
    length: *mut usize,
    param: *const RequestParam,
) -> StatusPtr {
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe { recv(ep, buffer, count, length, &recv_opts(param)) })
}

/// `ucp_stream_send_nb` (legacy): as `ucp_stream_send_nbx` with a
/// datatype and a callback, which does not run if the send completes at
/// once (NULL).
///
/// # Safety
///
/// As `ucp_stream_send_nbx`.
#[no_mangle]
pub unsafe extern "C" fn ucp_stream_send_nb(
    ep: *mut Endpoint,
    buffer: *const c_void,
    count: usize,
    datatype: Datatype,
    cb: Option<SendCb>,
    flags: c_uint,
) -> StatusPtr {
    let o = Opts {
        datatype,
        flags,
        ..Opts::new(cb.map_or(Cb::None, Cb::SendLegacy))
    };
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe { send(ep, buffer, count, &o) })
}

/// `ucp_stream_recv_nb` (legacy): as `ucp_stream_recv_nbx` with a
/// datatype, a callback (not run if the receive completes at once: NULL,
/// `*length` set) and the flags.
///
/// # Safety
///
/// As `ucp_stream_recv_nbx`.
#[no_mangle]
pub unsafe extern "C" fn ucp_stream_recv_nb(
    ep: *mut Endpoint,
    buffer: *mut c_void,
    count: usize,
    datatype: Datatype,
    cb: Option<StreamRecvCb>,
    length: *mut usize,
    flags: c_uint,
) -> StatusPtr {
    let o = Opts {
        datatype,
        flags,
        ..Opts::new(cb.map_or(Cb::None, Cb::StreamRecvLegacy))
    };
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe { recv(ep, buffer, count, length, &o) })
}

/// `ucp_stream_recv_request_test`: the status of a stream receive's
/// request, `UCS_INPROGRESS` while in flight; once it completed well,
/// `*length_p` (if not NULL) is the bytes received.
///
/// # Safety
///
/// `request` is NULL or a live request handle; `length_p` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_stream_recv_request_test(
    request: *mut c_void,
    length_p: *mut usize,
) -> StatusCode {
    guard_status(|| {
        if request.is_null() {
            return status::INVALID_PARAM;
        }
        // SAFETY: live handle (contract).
        let _g = unsafe { request::worker_of(request) }.enter();
        // SAFETY: as above.
        match unsafe { request::test(request) } {
            None => status::INPROGRESS,
            Some((st, info)) => {
                if st == status::OK && !length_p.is_null() {
                    // SAFETY: writable (contract).
                    unsafe { *length_p = info.length };
                }
                st
            }
        }
    })
}

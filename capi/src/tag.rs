//! Tag-matched messages: `ucp_tag_send_nbx`, `ucp_tag_send_sync_nbx`,
//! `ucp_tag_recv_nbx`, the probes and matched receives, and the legacy
//! `_nb`/`_nbr` forms, with contiguous, iovec and generic datatypes (`dt.rs`).
//!
//! An operation that completes when posted returns NULL (the receive's
//! `recv_info` filled if given), unless `UCP_OP_ATTR_FLAG_NO_IMM_CMPL`
//! asks for a request: the legacy receives do, so their callbacks run
//! before they return, as UCX's may.

use crate::dt::{self, Data};
use crate::ep::Endpoint;
use crate::post::{self, post, post_ep, post_lazy, Done};
use crate::request::{Cb, Opts};
use crate::status::{self, guard, guard_ptr, guard_status};
use crate::types::*;
use crate::worker::Worker;
use rucx::{Op, Posted};
use std::ffi::{c_int, c_void};
use std::ptr;

/// A tag send on `ep` with options `o`.
///
/// # Safety
///
/// `ep` is NULL or live; `buffer` holds the message until completion.
unsafe fn send(
    ep: *mut Endpoint,
    buffer: *const c_void,
    count: usize,
    tag: u64,
    o: &Opts,
    sync: bool,
) -> StatusPtr {
    // SAFETY: NULL or live (contract).
    let Some(e) = (unsafe { ep.as_ref() }) else {
        return status::ptr(status::INVALID_PARAM);
    };
    // SAFETY: an iovec datatype's buffer is its list (contract).
    let data = match unsafe { dt::data(o.datatype, buffer, count, true) } {
        Ok(d) => d,
        Err(st) => return status::ptr(st),
    };
    if let Data::Contig(len) = data {
        // SAFETY: forwarded contract.
        if !sync && !o.no_imm && !buffer.is_null() && unsafe { try_path(e, buffer, len, tag) } {
            return ptr::null_mut();
        }
    }
    let _g = e.worker().enter();
    post_ep(e, o, move |rw, rep, op| {
        let op = if sync { op.sync() } else { op };
        match data {
            // SAFETY: the application keeps the buffer valid until the
            // request completes (UCX's contract, which is the raw tier's).
            Data::Contig(len) => unsafe { rw.tag_send_raw(rep, buffer.cast(), len, tag, op) },
            Data::Iov(iov) => {
                let r = rw.tag_send_dt(rep, iov, tag, op);
                dt::detach(rw, r)
            }
            Data::Generic(g) => {
                let r = rw.tag_send_dt(rep, g, tag, op);
                dt::detach(rw, r)
            }
        }
    })
}

/// Sends `len` bytes at `buffer` with `tag` on `e` by the endpoint's
/// own send path, if its worker is in `UCS_THREAD_MODE_MULTI` and the path
/// is open for it: `true` once sent (done; nothing else to do).
///
/// # Safety
///
/// `buffer` holds `len` readable bytes (copied if the send goes).
#[inline]
unsafe fn try_path(e: &Endpoint, buffer: *const c_void, len: usize, tag: u64) -> bool {
    let Some((paths, rep)) = e.paths() else {
        return false;
    };
    // SAFETY: forwarded contract.
    let data = unsafe { std::slice::from_raw_parts(buffer.cast::<u8>(), len) };
    paths.try_tag_send_short(rep, data, tag)
}

/// A tag receive on `worker` with options `o`.
///
/// # Safety
///
/// `worker` is NULL or live; `buffer` stays writable until completion.
unsafe fn recv(
    worker: *mut Worker,
    buffer: *mut c_void,
    count: usize,
    tag: u64,
    mask: u64,
    o: &Opts,
) -> StatusPtr {
    // SAFETY: NULL or live (contract).
    let Some(w) = (unsafe { worker.as_ref() }) else {
        return status::ptr(status::INVALID_PARAM);
    };
    // SAFETY: an iovec datatype's buffer is its list (contract).
    let data = match unsafe { dt::data(o.datatype, buffer, count, false) } {
        Ok(d) => d,
        Err(st) => return status::ptr(st),
    };
    let _g = w.enter();
    post(w, o, |rw, op| match data {
        // SAFETY: the application keeps the buffer valid until completion.
        Data::Contig(len) => unsafe { rw.tag_recv_raw(buffer.cast(), len, tag, mask, op) },
        Data::Iov(iov) => {
            let r = rw.tag_recv_dt(iov, tag, mask, op);
            dt::detach(rw, r)
        }
        Data::Generic(g) => {
            let r = rw.tag_recv_dt(g, tag, mask, op);
            dt::detach(rw, r)
        }
    })
}

/// What the message-rate path of `ucp_tag_send_nbx`/`ucp_tag_recv_nbx`
/// takes from `param`: the bytes of contiguous data of `count` elements,
/// and where an operation done at once reports. `None` for everything
/// else (other datatypes, `UCP_OP_ATTR_FLAG_NO_IMM_CMPL` or
/// `UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL`, misaligned
/// request memory, a NULL buffer), which the general path takes.
///
/// # Safety
///
/// `param` is NULL or a valid `ucp_request_param_t`.
#[inline(always)]
unsafe fn lean(
    param: *const RequestParam,
    buffer: *const c_void,
    count: usize,
    recv: bool,
) -> Option<(usize, Done)> {
    // SAFETY: NULL or valid (contract).
    let p = unsafe { param.as_ref() };
    let mask = p.map_or(0, |p| p.op_attr_mask);
    if mask & (UCP_OP_ATTR_FLAG_NO_IMM_CMPL | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL) != 0
        || buffer.is_null()
    {
        return None;
    }
    let mut at = Done {
        external: ptr::null_mut(),
        recv_info: ptr::null_mut(),
        mark: recv,
    };
    let mut datatype = DT_CONTIG_BYTES;
    if let Some(p) = p {
        if mask & UCP_OP_ATTR_FIELD_DATATYPE != 0 {
            datatype = p.datatype;
        }
        if mask & UCP_OP_ATTR_FIELD_REQUEST != 0 {
            if !crate::request::aligned(p.request) {
                return None;
            }
            at.external = p.request;
        }
        if recv && mask & UCP_OP_ATTR_FIELD_RECV_INFO != 0 {
            at.recv_info = p.recv_info.cast();
        }
    }
    if datatype & UCP_DATATYPE_CLASS_MASK != UCP_DATATYPE_CONTIG {
        return None;
    }
    let len = count.checked_mul((datatype >> UCP_DATATYPE_SHIFT) as usize)?;
    Some((len, at))
}

/// `ucp_tag_send_nbx`.
///
/// # Safety
///
/// `ep` is a live endpoint; `buffer` holds `count` elements until the
/// send completes; `param` is NULL or a valid `ucp_request_param_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_tag_send_nbx(
    ep: *mut Endpoint,
    buffer: *const c_void,
    count: usize,
    tag: u64,
    param: *const RequestParam,
) -> StatusPtr {
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe {
        // The message-rate path: contiguous data on a connected endpoint.
        if let (Some(e), Some((len, _))) = (ep.as_ref(), lean(param, buffer, count, false)) {
            if try_path(e, buffer, len, tag) {
                return ptr::null_mut();
            }
            let w = e.worker();
            let _g = w.enter();
            if let Some(rep) = e.ready() {
                // A send done at once returns NULL and touches nothing
                // else (not even request memory the application passed);
                // the rest is out of line.
                // SAFETY: the application keeps the buffer valid until the
                // request completes (UCX's contract, which is the raw
                // tier's).
                let r =
                    w.with(|rw| rw.tag_send_raw(rep, buffer.cast(), len, tag, Op::new().queue()));
                if let Ok(Posted::Done(..)) = r {
                    return ptr::null_mut();
                }
                return post::finish(w, r, || Opts::from_param(param, false));
            }
        }
        send(
            ep,
            buffer,
            count,
            tag,
            &Opts::from_param(param, false),
            false,
        )
    })
}

/// `ucp_tag_send_sync_nbx`: completes once a receive matched the message.
///
/// # Safety
///
/// As `ucp_tag_send_nbx`.
#[no_mangle]
pub unsafe extern "C" fn ucp_tag_send_sync_nbx(
    ep: *mut Endpoint,
    buffer: *const c_void,
    count: usize,
    tag: u64,
    param: *const RequestParam,
) -> StatusPtr {
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe {
        send(
            ep,
            buffer,
            count,
            tag,
            &Opts::from_param(param, false),
            true,
        )
    })
}

/// Options of the legacy calls: `datatype`, and a callback.
fn legacy(datatype: Datatype, cb: Cb) -> Opts {
    Opts {
        datatype,
        ..Opts::new(cb)
    }
}

/// `ucp_tag_send_nb` (legacy).
///
/// # Safety
///
/// As `ucp_tag_send_nbx`.
#[no_mangle]
pub unsafe extern "C" fn ucp_tag_send_nb(
    ep: *mut Endpoint,
    buffer: *const c_void,
    count: usize,
    datatype: Datatype,
    tag: u64,
    cb: Option<SendCb>,
) -> StatusPtr {
    let o = legacy(datatype, cb.map_or(Cb::None, Cb::SendLegacy));
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe { send(ep, buffer, count, tag, &o, false) })
}

/// `ucp_tag_send_sync_nb` (legacy).
///
/// # Safety
///
/// As `ucp_tag_send_nbx`.
#[no_mangle]
pub unsafe extern "C" fn ucp_tag_send_sync_nb(
    ep: *mut Endpoint,
    buffer: *const c_void,
    count: usize,
    datatype: Datatype,
    tag: u64,
    cb: Option<SendCb>,
) -> StatusPtr {
    let o = legacy(datatype, cb.map_or(Cb::None, Cb::SendLegacy));
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe { send(ep, buffer, count, tag, &o, true) })
}

/// The status of an `_nbr` call from the status pointer of the post.
fn nbr_status(p: StatusPtr) -> StatusCode {
    status::of_ptr(p).unwrap_or(status::INPROGRESS)
}

/// `ucp_tag_send_nbr`: the request is the application's memory `req`,
/// with rucx's header in the `request_size` bytes before it. `UCS_OK` if
/// done at once, `UCS_INPROGRESS` (test with `ucp_request_check_status`)
/// or an error.
///
/// # Safety
///
/// As `ucp_tag_send_nbx`; `req` has `request_size` (from
/// `ucp_context_query`) writable bytes before it, 8-aligned, and stays
/// valid until the request completes.
#[no_mangle]
pub unsafe extern "C" fn ucp_tag_send_nbr(
    ep: *mut Endpoint,
    buffer: *const c_void,
    count: usize,
    datatype: Datatype,
    tag: u64,
    req: *mut c_void,
) -> StatusCode {
    guard_status(|| {
        if req.is_null() {
            return status::INVALID_PARAM;
        }
        let o = Opts {
            external: req,
            ..legacy(datatype, Cb::None)
        };
        // SAFETY: forwarded contract.
        nbr_status(unsafe { send(ep, buffer, count, tag, &o, false) })
    })
}

/// `ucp_tag_recv_nbx`.
///
/// # Safety
///
/// `worker` is a live worker; `buffer` has room for `count` elements and
/// stays writable until the receive completes; `param` is NULL or a valid
/// `ucp_request_param_t` (its `recv_info.tag_info` writable if set).
#[no_mangle]
pub unsafe extern "C" fn ucp_tag_recv_nbx(
    worker: *mut Worker,
    buffer: *mut c_void,
    count: usize,
    tag: u64,
    tag_mask: u64,
    param: *const RequestParam,
) -> StatusPtr {
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe {
        // The message-rate path: contiguous data.
        if let (Some(w), Some((len, at))) = (worker.as_ref(), lean(param, buffer, count, true)) {
            let _g = w.enter();
            return post_lazy(
                w,
                &at,
                || Opts::from_param(param, true),
                || param.as_ref().map_or(Cb::None, |p| Cb::of_param(p, true)),
                // SAFETY: the application keeps the buffer valid until
                // completion.
                |rw, op| rw.tag_recv_raw(buffer.cast(), len, tag, tag_mask, op),
            );
        }
        recv(
            worker,
            buffer,
            count,
            tag,
            tag_mask,
            &Opts::from_param(param, true),
        )
    })
}

/// `ucp_tag_recv_nb` (legacy): always returns a request (its callback has
/// run if it completed at once).
///
/// # Safety
///
/// As `ucp_tag_recv_nbx`.
#[no_mangle]
pub unsafe extern "C" fn ucp_tag_recv_nb(
    worker: *mut Worker,
    buffer: *mut c_void,
    count: usize,
    datatype: Datatype,
    tag: u64,
    tag_mask: u64,
    cb: Option<TagRecvCb>,
) -> StatusPtr {
    let o = Opts {
        no_imm: true,
        ..legacy(datatype, cb.map_or(Cb::None, Cb::RecvLegacy))
    };
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe { recv(worker, buffer, count, tag, tag_mask, &o) })
}

/// `ucp_tag_recv_nbr`: as `ucp_tag_send_nbr`, for a receive.
///
/// # Safety
///
/// As `ucp_tag_recv_nbx` and `ucp_tag_send_nbr`.
#[no_mangle]
pub unsafe extern "C" fn ucp_tag_recv_nbr(
    worker: *mut Worker,
    buffer: *mut c_void,
    count: usize,
    datatype: Datatype,
    tag: u64,
    tag_mask: u64,
    req: *mut c_void,
) -> StatusCode {
    guard_status(|| {
        if req.is_null() {
            return status::INVALID_PARAM;
        }
        let o = Opts {
            external: req,
            ..legacy(datatype, Cb::None)
        };
        // SAFETY: forwarded contract.
        nbr_status(unsafe { recv(worker, buffer, count, tag, tag_mask, &o) })
    })
}

/// What `ucp_tag_probe_nb` returns without `remove`: a non-NULL handle
/// that says "there is one" and that `ucp_tag_msg_recv_nb` refuses.
static PROBED: u8 = 0;

/// `ucp_tag_probe_nb`: the oldest unexpected message matching
/// `(tag, tag_mask)`, its tag and length in `info`; with `remove`, taken
/// out of the queue for `ucp_tag_msg_recv_nb(x)`. NULL if none.
///
/// # Safety
///
/// `worker` is a live worker; `info` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_tag_probe_nb(
    worker: *mut Worker,
    tag: u64,
    tag_mask: u64,
    remove: c_int,
    info: *mut TagRecvInfo,
) -> *mut c_void {
    guard(ptr::null_mut(), || {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return ptr::null_mut();
        };
        let _g = w.enter();
        let (found, handle) = if remove != 0 {
            match w.with(|rw| rw.tag_probe_remove(tag, tag_mask)) {
                Some(m) => (m.info(), Box::into_raw(Box::new(m)).cast::<c_void>()),
                None => return ptr::null_mut(),
            }
        } else {
            match w.with(|rw| rw.tag_probe(tag, tag_mask)) {
                Some(i) => (i, ptr::addr_of!(PROBED).cast_mut().cast::<c_void>()),
                None => return ptr::null_mut(),
            }
        };
        if !info.is_null() {
            // SAFETY: writable (contract).
            unsafe {
                *info = TagRecvInfo {
                    sender_tag: found.tag,
                    length: found.length,
                }
            };
        }
        handle
    })
}

/// A matched receive of `message` into `buffer`.
///
/// # Safety
///
/// `worker` is NULL or live; `message` came from `ucp_tag_probe_nb` with
/// `remove` and is not used after; `buffer` stays writable until
/// completion.
unsafe fn msg_recv(
    worker: *mut Worker,
    buffer: *mut c_void,
    count: usize,
    message: *mut c_void,
    o: &Opts,
) -> StatusPtr {
    // SAFETY: NULL or live (contract).
    let Some(w) = (unsafe { worker.as_ref() }) else {
        return status::ptr(status::INVALID_PARAM);
    };
    if message.is_null() || ptr::eq(message.cast_const().cast::<u8>(), &PROBED) {
        return status::ptr(status::INVALID_PARAM);
    }
    // SAFETY: an iovec datatype's buffer is its list (contract).
    let data = match unsafe { dt::data(o.datatype, buffer, count, false) } {
        Ok(d) => d,
        Err(st) => return status::ptr(st),
    };
    let _g = w.enter();
    // SAFETY: boxed by ucp_tag_probe_nb, consumed once (contract).
    let msg = *unsafe { Box::from_raw(message.cast::<rucx::Message>()) };
    post(w, o, |rw, op| match data {
        // SAFETY: the application keeps the buffer valid until completion.
        Data::Contig(len) => unsafe { rw.tag_msg_recv_raw(msg, buffer.cast(), len, op) },
        Data::Iov(iov) => {
            let r = rw.tag_msg_recv_dt(msg, iov, op);
            dt::detach(rw, r)
        }
        Data::Generic(g) => {
            let r = rw.tag_msg_recv_dt(msg, g, op);
            dt::detach(rw, r)
        }
    })
}

/// `ucp_tag_msg_recv_nbx`.
///
/// # Safety
///
/// As `ucp_tag_recv_nbx`; `message` came from `ucp_tag_probe_nb` with
/// `remove` and is not used after.
#[no_mangle]
pub unsafe extern "C" fn ucp_tag_msg_recv_nbx(
    worker: *mut Worker,
    buffer: *mut c_void,
    count: usize,
    message: *mut c_void,
    param: *const RequestParam,
) -> StatusPtr {
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe {
        msg_recv(
            worker,
            buffer,
            count,
            message,
            &Opts::from_param(param, true),
        )
    })
}

/// `ucp_tag_msg_recv_nb` (legacy): always returns a request.
///
/// # Safety
///
/// As `ucp_tag_msg_recv_nbx`.
#[no_mangle]
pub unsafe extern "C" fn ucp_tag_msg_recv_nb(
    worker: *mut Worker,
    buffer: *mut c_void,
    count: usize,
    datatype: Datatype,
    message: *mut c_void,
    cb: Option<TagRecvCb>,
) -> StatusPtr {
    let o = Opts {
        no_imm: true,
        ..legacy(datatype, cb.map_or(Cb::None, Cb::RecvLegacy))
    };
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe { msg_recv(worker, buffer, count, message, &o) })
}

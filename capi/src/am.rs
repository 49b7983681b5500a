//! Active messages: `ucp_worker_set_am_recv_handler`, `ucp_am_send_nbx`,
//! `ucp_am_recv_data_nbx`, `ucp_am_data_release`, and the legacy
//! `ucp_worker_set_am_handler` and `ucp_am_send_nb`.
//!
//! # Delivery
//! Each id with a C handler has a Rust handler ([`rucx::Worker::am_set_handler`])
//! that only queues the message: it runs inside the Rust progress, where
//! C must not be called. After progress returns, [`deliver`] takes the
//! messages in arrival order and calls the C handlers with no borrow of
//! the worker alive, so a handler may call any entry point (reply on the
//! reply endpoint, fetch rendezvous data, post sends).
//!
//! # Data
//! An eager message's data is moved out of the message into a buffer the
//! handler sees (`UCP_AM_RECV_ATTR_FLAG_DATA`, or `UCP_CB_PARAM_FLAG_DATA`
//! for a legacy handler). A handler that returns `UCS_INPROGRESS` keeps
//! it until `ucp_am_data_release`; otherwise it is freed when the handler
//! returns. A rendezvous message (`UCP_AM_RECV_ATTR_FLAG_RNDV`) gives the
//! handler a descriptor instead: `ucp_am_recv_data_nbx` fetches the data
//! into a buffer of the handler's choice, from the handler or later if
//! it returned `UCS_INPROGRESS`; a descriptor released (or not kept) with
//! its data unfetched discards the data, and the sender's send completes.
//! A legacy handler gets a rendezvous message's data fetched for it first.

use crate::dt::{self, Data};
use crate::ep::{Conn, Endpoint};
use crate::post::{post, post_ep};
use crate::request::{Cb, Opts};
use crate::status::{self, guard, guard_ptr, guard_status};
use crate::types::*;
use crate::worker::Worker;
use rucx::{AmMsg, AmParams};
use std::collections::HashMap;
use std::ffi::{c_uint, c_void};
use std::ptr;

/// Messages the Rust handlers queued, in arrival order.
pub(crate) type Queue = crate::inbox::Inbox<AmMsg>;

/// A C handler of one id.
#[derive(Debug, Clone, Copy)]
enum Handler {
    /// `ucp_am_recv_callback_t` with its argument.
    Recv(AmRecvCb, *mut c_void),
    /// The legacy `ucp_am_callback_t` with its argument.
    Legacy(AmLegacyCb, *mut c_void),
}

/// Data handed to C and not released yet.
#[derive(Debug)]
enum Kept {
    /// An eager message's data (the handler's pointer is its buffer).
    Eager(Vec<u8>),
    /// A rendezvous message (the handler's pointer is the box).
    Rndv(Box<AmMsg>),
}

/// A worker's C handlers and the data C holds, by the pointer C has.
#[derive(Debug, Default)]
pub(crate) struct AmState {
    handlers: HashMap<u16, Handler>,
    kept: HashMap<usize, Kept>,
}

/// Registers `h` for `id` on `w` (or removes the handler of `id`).
fn set_handler(w: &Worker, id: u16, h: Option<Handler>) {
    let q = w.am_queue.clone();
    w.with(|rw| match h {
        Some(_) => rw.am_set_handler(id, move |_, m| q.push(m)),
        None => rw.am_clear_handler(id),
    });
    w.with_am(|a| match h {
        Some(h) => a.handlers.insert(id, h),
        None => a.handlers.remove(&id),
    });
}

/// The C endpoint C's handlers get for Rust endpoint `ep`: one the
/// application created, or one made here (freed with the worker).
fn reply_endpoint(w: &Worker, ep: rucx::Ep) -> *mut Endpoint {
    w.with_eps(|m| {
        let v = m.entry(ep.to_u64()).or_default();
        if let Some(&p) = v.first() {
            return p;
        }
        let p = Box::into_raw(Box::new(Endpoint::new(
            w,
            Conn::Ready(ep),
            ErrHandler {
                cb: None,
                arg: ptr::null_mut(),
            },
            false,
        )));
        v.push(p);
        p
    })
}

/// Delivers the queued messages to the C handlers; how many.
pub(crate) fn deliver(w: &Worker) -> usize {
    let mut n = 0;
    loop {
        let Some(m) = w.am_queue.pop() else {
            return n;
        };
        n += 1;
        deliver_one(w, m);
    }
}

/// Calls the C handler of `m`'s id with `m`.
fn deliver_one(w: &Worker, m: AmMsg) {
    let id = m.id();
    let Some(h) = w.with_am(|a| a.handlers.get(&id).copied()) else {
        eprintln!("rucx: active message id {id} has no handler: dropped");
        return;
    };
    let reply = m
        .reply_ep()
        .map_or(ptr::null_mut(), |ep| reply_endpoint(w, ep));
    let header = m.header().to_vec();
    let rndv = m.is_rndv();
    let (key, len, kept) = match (h, rndv) {
        (Handler::Recv(..), true) => {
            let len = m.data_len();
            let b = Box::new(m);
            (&*b as *const AmMsg as usize, len, Kept::Rndv(b))
        }
        (Handler::Legacy(..), true) => {
            // The legacy handler has no descriptor: fetch the data now.
            let len = m.data_len();
            let mut buf = vec![0u8; len];
            if let Err(e) = w.with(|rw| rw.am_recv_data_blocking(m, &mut buf)) {
                eprintln!("rucx: active message id {id}: fetching its data failed: {e}");
                return;
            }
            if buf.capacity() == 0 {
                buf.reserve(1);
            }
            (buf.as_mut_ptr() as usize, len, Kept::Eager(buf))
        }
        (_, false) => {
            let mut d = m.into_data();
            let len = d.len();
            if d.capacity() == 0 {
                // A heap address of its own, to tell kept buffers apart.
                d.reserve(1);
            }
            (d.as_mut_ptr() as usize, len, Kept::Eager(d))
        }
    };
    w.with_am(|a| a.kept.insert(key, kept));
    let data = key as *mut c_void;
    let hdr = if header.is_empty() {
        ptr::null()
    } else {
        header.as_ptr().cast()
    };
    let st = match h {
        Handler::Recv(cb, arg) => {
            let mut attr = if rndv {
                UCP_AM_RECV_ATTR_FLAG_RNDV
            } else {
                UCP_AM_RECV_ATTR_FLAG_DATA
            };
            if !reply.is_null() {
                attr |= UCP_AM_RECV_ATTR_FIELD_REPLY_EP;
            }
            let param = AmRecvParam {
                recv_attr: attr,
                reply_ep: reply.cast(),
            };
            // SAFETY: the application's handler with UCX's arguments; the
            // header and data live until it returns (the data longer if
            // kept); no borrow of the worker is alive.
            unsafe { cb(arg, hdr, header.len(), data, len, &param) }
        }
        Handler::Legacy(cb, arg) => {
            // SAFETY: as above.
            unsafe { cb(arg, data, len, reply.cast(), UCP_CB_PARAM_FLAG_DATA) }
        }
    };
    if st != status::INPROGRESS {
        // Not kept (gone already if the handler fetched it).
        let d = w.with_am(|a| a.kept.remove(&key));
        drop(d);
    }
}

/// `ucp_worker_set_am_recv_handler`: `cb` for messages of `id` (a NULL
/// `cb` removes the handler). `UCP_AM_FLAG_WHOLE_MSG` and
/// `UCP_AM_FLAG_PERSISTENT_DATA` hold always: messages come whole, and
/// data the handler keeps stays valid until released.
///
/// # Safety
///
/// `worker` is a live worker; `param` points to a `ucp_am_handler_param_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_set_am_recv_handler(
    worker: *mut Worker,
    param: *const AmHandlerParam,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(w), Some(p)) = (unsafe { worker.as_ref() }, unsafe { param.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        let has = |bit| p.field_mask & bit != 0;
        if !has(UCP_AM_HANDLER_PARAM_FIELD_ID) || !has(UCP_AM_HANDLER_PARAM_FIELD_CB) {
            return status::INVALID_PARAM;
        }
        let Ok(id) = u16::try_from(p.id) else {
            return status::INVALID_PARAM;
        };
        let arg = if has(UCP_AM_HANDLER_PARAM_FIELD_ARG) {
            p.arg
        } else {
            ptr::null_mut()
        };
        let _g = w.enter();
        set_handler(w, id, p.cb.map(|cb| Handler::Recv(cb, arg)));
        status::OK
    })
}

/// `ucp_worker_set_am_handler` (legacy): `cb` for messages of `id` (NULL
/// removes it); `flags` (`UCP_AM_FLAG_WHOLE_MSG`) hold always.
///
/// # Safety
///
/// `worker` is a live worker.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_set_am_handler(
    worker: *mut Worker,
    id: u16,
    cb: Option<AmLegacyCb>,
    arg: *mut c_void,
    _flags: u32,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        let _g = w.enter();
        set_handler(w, id, cb.map(|cb| Handler::Legacy(cb, arg)));
        status::OK
    })
}

/// Sends message `id` on `ep` with `header` and `count` elements of `o`'s
/// datatype at `buffer`.
///
/// # Safety
///
/// `ep` is NULL or live; `header` holds `header_length` bytes for the
/// call; `buffer` holds the data until completion.
unsafe fn send(
    ep: *mut Endpoint,
    id: c_uint,
    (header, header_length): (*const c_void, usize),
    buffer: *const c_void,
    count: usize,
    o: &Opts,
    flags: u32,
) -> StatusPtr {
    // SAFETY: NULL or live (contract).
    let Some(e) = (unsafe { ep.as_ref() }) else {
        return status::ptr(status::INVALID_PARAM);
    };
    let Ok(id) = u16::try_from(id) else {
        return status::ptr(status::INVALID_PARAM);
    };
    if header.is_null() && header_length != 0 {
        return status::ptr(status::INVALID_PARAM);
    }
    let hdr: &[u8] = if header_length == 0 {
        &[]
    } else {
        // SAFETY: `header_length` readable bytes (contract); copied by
        // the Rust send before it returns.
        unsafe { std::slice::from_raw_parts(header.cast(), header_length) }
    };
    let mut params = AmParams::new();
    if flags & UCP_AM_SEND_FLAG_REPLY != 0 {
        params = params.reply();
    }
    if flags & UCP_AM_SEND_FLAG_EAGER != 0 {
        params = params.eager();
    } else if flags & UCP_AM_SEND_FLAG_RNDV != 0 {
        params = params.rndv();
    }
    // SAFETY: an iovec datatype's buffer is its list (contract).
    let data = match unsafe { dt::data(o.datatype, buffer, count, true) } {
        Ok(d) => d,
        Err(st) => return status::ptr(st),
    };
    if let Data::Contig(len) = data {
        let eager = header_length == 0 && flags & UCP_AM_SEND_FLAG_RNDV == 0;
        // SAFETY: forwarded contract.
        if eager && !o.no_imm && unsafe { try_path(e, id, buffer, len, flags) } {
            return ptr::null_mut();
        }
    }
    let _g = e.worker().enter();
    // The header is the caller's for this call only: a send that waits
    // for its endpoint's connect keeps a copy.
    let kept = e.is_connecting().then(|| hdr.to_vec());
    let (hp, hl) = (hdr.as_ptr(), hdr.len());
    post_ep(e, o, move |rw, rep, op| {
        let hdr: &[u8] = match &kept {
            Some(v) => v,
            // SAFETY: posted within the call (no copy was kept), while
            // the caller's header is readable.
            None => unsafe { std::slice::from_raw_parts(hp, hl) },
        };
        match data {
            // SAFETY: the application keeps the buffer valid until the
            // request completes (UCX's contract, which is the raw tier's).
            Data::Contig(len) => unsafe {
                rw.am_send_raw(rep, id, hdr, (buffer.cast(), len), params, op)
            },
            Data::Iov(iov) => {
                let r = rw.am_send_dt(rep, id, hdr, iov, params, op);
                dt::detach(rw, r)
            }
            Data::Generic(g) => {
                let r = rw.am_send_dt(rep, id, hdr, g, params, op);
                dt::detach(rw, r)
            }
        }
    })
}

/// Sends `len` bytes at `buffer` as active message `id` without a user
/// header on `e` by the endpoint's own send path, if its worker is in
/// `UCS_THREAD_MODE_MULTI` and the path is open for it: `true` once sent.
///
/// # Safety
///
/// `buffer` is NULL or holds `len` readable bytes (copied if the send
/// goes).
unsafe fn try_path(e: &Endpoint, id: u16, buffer: *const c_void, len: usize, flags: u32) -> bool {
    let Some((paths, rep)) = e.paths().filter(|_| !buffer.is_null()) else {
        return false;
    };
    // SAFETY: forwarded contract.
    let data = unsafe { std::slice::from_raw_parts(buffer.cast::<u8>(), len) };
    paths.try_am_send_short(rep, id, data, flags & UCP_AM_SEND_FLAG_REPLY != 0)
}

/// `ucp_am_send_nbx`: message `id` with a user header (copied before
/// this returns) and `count` elements at `buffer`; `param->flags` takes
/// `UCP_AM_SEND_FLAG_REPLY`, `_EAGER` and `_RNDV`.
///
/// # Safety
///
/// `ep` is a live endpoint; `header` holds `header_length` bytes;
/// `buffer` holds the data until the send completes; `param` is NULL or
/// a valid `ucp_request_param_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_am_send_nbx(
    ep: *mut Endpoint,
    id: c_uint,
    header: *const c_void,
    header_length: usize,
    buffer: *const c_void,
    count: usize,
    param: *const RequestParam,
) -> StatusPtr {
    guard_ptr(|| {
        // SAFETY: NULL or valid (contract).
        let o = unsafe { Opts::from_param(param, false) };
        // SAFETY: forwarded contract.
        unsafe { send(ep, id, (header, header_length), buffer, count, &o, o.flags) }
    })
}

/// `ucp_am_send_nb` (legacy): message `id` without a header, sent
/// eagerly as UCX's; `UCP_AM_SEND_REPLY` gives the receiver a reply
/// endpoint.
///
/// # Safety
///
/// `ep` is a live endpoint; `buffer` holds the data until the send
/// completes.
#[no_mangle]
pub unsafe extern "C" fn ucp_am_send_nb(
    ep: *mut Endpoint,
    id: u16,
    buffer: *const c_void,
    count: usize,
    datatype: Datatype,
    cb: Option<SendCb>,
    flags: c_uint,
) -> StatusPtr {
    guard_ptr(|| {
        let mut o = Opts::new(cb.map_or(Cb::None, Cb::SendLegacy));
        o.datatype = datatype;
        let flags = (flags & UCP_AM_SEND_FLAG_REPLY) | UCP_AM_SEND_FLAG_EAGER;
        // SAFETY: forwarded contract.
        unsafe { send(ep, id.into(), (ptr::null(), 0), buffer, count, &o, flags) }
    })
}

/// `ucp_am_recv_data_nbx`: receives the data of descriptor `data_desc`
/// (a rendezvous message's, or eager data a handler kept) into `count`
/// elements at `buffer`; the descriptor is consumed. The callback is
/// `param->cb.recv_am`; `param->recv_info.length` gets the length of a
/// receive that completes at once.
///
/// # Safety
///
/// `worker` is a live worker; `buffer` stays writable until completion;
/// `param` is NULL or a valid `ucp_request_param_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_am_recv_data_nbx(
    worker: *mut Worker,
    data_desc: *mut c_void,
    buffer: *mut c_void,
    count: usize,
    param: *const RequestParam,
) -> StatusPtr {
    guard_ptr(|| {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return status::ptr(status::INVALID_PARAM);
        };
        // SAFETY: NULL or valid (contract).
        let mut o = unsafe { Opts::from_param(param, false) };
        // SAFETY: NULL or valid (contract).
        if let Some(p) = unsafe { param.as_ref() } {
            if p.op_attr_mask & UCP_OP_ATTR_FIELD_CALLBACK != 0 {
                // SAFETY: every member of the union is one function
                // pointer; this call's is `recv_am`.
                o.cb = match unsafe { p.cb.recv_am } {
                    Some(f) => Cb::AmRecv(f, p.user_data),
                    None => Cb::None,
                };
            }
        }
        // SAFETY: NULL or valid (contract).
        let length_p = match unsafe { param.as_ref() } {
            Some(p) if p.op_attr_mask & UCP_OP_ATTR_FIELD_RECV_INFO != 0 => {
                p.recv_info.cast::<usize>()
            }
            _ => ptr::null_mut(),
        };
        // SAFETY: an iovec datatype's buffer is its list (contract).
        let data = match unsafe { dt::data(o.datatype, buffer, count, false) } {
            Ok(d) => d,
            Err(st) => return status::ptr(st),
        };
        let _g = w.enter();
        let Some(kept) = w.with_am(|a| a.kept.remove(&(data_desc as usize))) else {
            return status::ptr(status::INVALID_PARAM);
        };
        let msg = match kept {
            Kept::Rndv(b) => *b,
            Kept::Eager(v) => {
                let st = copy_kept(&v, buffer, data);
                if st == status::OK && !length_p.is_null() {
                    // SAFETY: writable when the field is set (contract).
                    unsafe { *length_p = v.len() };
                }
                return match (st, o.no_imm) {
                    (status::OK, false) => ptr::null_mut(),
                    (st, false) => status::ptr(st),
                    (st, true) => crate::request::done_at_once(
                        w,
                        &o,
                        st,
                        TagRecvInfo {
                            sender_tag: 0,
                            length: v.len(),
                        },
                    ),
                };
            }
        };
        let len = msg.data_len();
        let r = post(w, &o, |rw, op| match data {
            // SAFETY: the application keeps the buffer writable until
            // completion (contract).
            Data::Contig(n) => unsafe { rw.am_recv_data_raw(msg, buffer.cast(), n, op) },
            Data::Iov(iov) => {
                let r = rw.am_recv_data_dt(msg, iov, op);
                dt::detach(rw, r)
            }
            Data::Generic(g) => {
                let r = rw.am_recv_data_dt(msg, g, op);
                dt::detach(rw, r)
            }
        });
        if r.is_null() && !length_p.is_null() {
            // SAFETY: as above.
            unsafe { *length_p = len };
        }
        r
    })
}

/// Copies kept eager data `src` into the receive layout `data` at
/// `buffer`.
fn copy_kept(src: &[u8], buffer: *mut c_void, data: Data) -> StatusCode {
    match data {
        Data::Contig(n) => {
            if src.len() > n {
                return status::of(&rucx::Error::Truncated {
                    length: src.len(),
                    capacity: n,
                });
            }
            // SAFETY: `n` writable bytes at `buffer` (the caller's
            // contract), distinct from the kept data.
            unsafe { ptr::copy_nonoverlapping(src.as_ptr(), buffer.cast::<u8>(), src.len()) };
            status::OK
        }
        _ => status::UNSUPPORTED,
    }
}

/// `ucp_am_data_release`: frees data a handler kept by returning
/// `UCS_INPROGRESS` (a rendezvous descriptor's data is discarded).
///
/// # Safety
///
/// `worker` is a live worker; `data` was given to one of its handlers.
#[no_mangle]
pub unsafe extern "C" fn ucp_am_data_release(worker: *mut Worker, data: *mut c_void) {
    guard((), || {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return;
        };
        let _g = w.enter();
        let d = w.with_am(|a| a.kept.remove(&(data as usize)));
        if d.is_none() {
            eprintln!("rucx: ucp_am_data_release: {data:p} is no kept active message data");
        }
        // Dropped outside the borrow: a descriptor's drop reaches only
        // the Rust worker's own list.
        drop(d);
    })
}

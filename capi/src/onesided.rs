//! Posting one-sided operations (`rma.rs`, `atomic.rs`): with a request
//! of this layer's or implicitly (`_nbi`), with a remote key (one
//! unpacked while its endpoint connected is unpacked for the operation
//! if the connect has not yet), and, on a client endpoint whose connect
//! is under way, deferred until the connect (`deferred.rs`).

use crate::deferred::{self, OwnedKey};
use crate::ep::Endpoint;
use crate::request::{self, Cb, Opts};
use crate::rkey::RkeyH;
use crate::status;
use crate::types::*;
use crate::worker::Worker;
use rucx::{Op, Posted, Rkey};
use std::ptr;

/// Posts an operation of `w` with request options `o`; `post` gets the
/// Rust worker and the [`Op`] that reports to the request. NULL if it
/// ended at once (or a completed request with
/// `UCP_OP_ATTR_FLAG_NO_IMM_CMPL`), the request, or an error pointer.
pub(crate) fn post(
    w: &Worker,
    o: &Opts,
    post: impl FnOnce(&mut rucx::Worker, Op) -> rucx::Result<Posted<()>>,
) -> StatusPtr {
    let h = match request::alloc(w, o) {
        Ok(h) => h,
        Err(st) => return status::ptr(st),
    };
    let op = o.op(Op::new().queue().user_data(h as usize as u64));
    match w.with(|rw| post(rw, op)) {
        Ok(Posted::InFlight(id)) => {
            // SAFETY: the header just written; the worker's lock is held.
            unsafe { request::set_in_flight(h, id) };
            request::user_ptr(h)
        }
        Ok(Posted::Done(..)) => {
            if o.no_imm {
                // SAFETY: a fresh header; no borrow of the worker alive.
                unsafe { request::complete(h, status::OK, TagRecvInfo::default()) };
                return request::user_ptr(h);
            }
            // SAFETY: the header just written: completed without a
            // callback (as UCX's immediate completions), then recycled.
            unsafe {
                (*h).cb = Cb::None;
                request::complete(h, status::OK, TagRecvInfo::default());
                request::recycle(h);
            }
            ptr::null_mut()
        }
        Err(e) => {
            // SAFETY: the request never went in flight.
            unsafe { request::recycle(h) };
            status::ptr(status::of(&e))
        }
    }
}

/// Posts an implicit (`_nbi`) operation of `w`: its Rust request, if in
/// flight, is released and completes on its own.
pub(crate) fn post_nbi(
    w: &Worker,
    post: impl FnOnce(&mut rucx::Worker, Op) -> rucx::Result<Posted<()>>,
) -> StatusCode {
    let r = w.with(|rw| {
        let r = post(rw, Op::new());
        if let Ok(Posted::InFlight(id)) = &r {
            rw.request_release(*id);
        }
        r
    });
    match r {
        Ok(Posted::Done(..)) => status::OK,
        Ok(Posted::InFlight(_)) => status::INPROGRESS,
        Err(e) => status::of(&e),
    }
}

/// Posts implicit operation `f` (with key `k`) on C endpoint `e`: on
/// `rep` if `e` is connected as `rep` (see [`post_nbi`]); else deferred
/// until the connect (`UCS_INPROGRESS`; a flush waits for it), with a
/// copy of the key. `k` is not the key of a map of 0 bytes.
pub(crate) fn post_keyed_nbi(
    e: &Endpoint,
    k: &RkeyH,
    rep: Option<rucx::Ep>,
    f: impl FnOnce(&mut rucx::Worker, rucx::Ep, &Rkey, Op) -> rucx::Result<Posted<()>> + 'static,
) -> StatusCode {
    if let Some(rep) = rep {
        return post_nbi(e.worker(), |rw, op| {
            with_key(rw, rep, k, |rw, key| f(rw, rep, key, op))
        });
    }
    let Some(key) = OwnedKey::of(k) else {
        return status::INVALID_PARAM;
    };
    let f = move |rw: &mut rucx::Worker, rep: rucx::Ep, op: Op| {
        let key = key.on(rw, rep)?;
        f(rw, rep, &key, op)
    };
    deferred::defer_implicit(e, Box::new(f))
}

/// The endpoint and key of an operation, or the status that refuses it.
///
/// # Safety
///
/// `ep` and `rkey` are NULL or live.
pub(crate) unsafe fn target<'a>(
    ep: *mut Endpoint,
    rkey: *mut RkeyH,
) -> Result<(&'a Endpoint, &'a RkeyH), StatusCode> {
    // SAFETY: NULL or live (contract).
    match (unsafe { ep.as_ref() }, unsafe { rkey.as_ref() }) {
        (Some(e), Some(k)) => Ok((e, k)),
        _ => Err(status::INVALID_PARAM),
    }
}

/// Whether `k` is the key of a map of 0 bytes (none to use).
pub(crate) fn is_empty_key(k: &RkeyH) -> bool {
    k.key.is_none() && k.pending.is_none()
}

/// Runs `f` with the key `k` gives on endpoint `rep`: a key unpacked
/// while its endpoint connected, used before that connect unpacked it,
/// is unpacked for this call.
pub(crate) fn with_key<R>(
    rw: &mut rucx::Worker,
    rep: rucx::Ep,
    k: &RkeyH,
    f: impl FnOnce(&mut rucx::Worker, &Rkey) -> rucx::Result<R>,
) -> rucx::Result<R> {
    match &k.key {
        Some(key) => f(rw, key),
        None => {
            let bytes = k.pending.as_ref().map_or(&[][..], |p| &p.bytes[..]);
            let key = rw.rkey_unpack(rep, bytes)?;
            f(rw, &key)
        }
    }
}

/// Posts `f` (an operation with key `k`) on C endpoint `e` with request
/// options `o`: on `rep` if `e` is connected as `rep` (NULL if done at
/// once, see [`post`]); else with a request, waiting for the connect
/// (`deferred.rs`), with a copy of the key. `k` is not the key of a map
/// of 0 bytes.
pub(crate) fn post_keyed(
    e: &Endpoint,
    k: &RkeyH,
    o: &Opts,
    rep: Option<rucx::Ep>,
    f: impl FnOnce(&mut rucx::Worker, rucx::Ep, &Rkey, Op) -> rucx::Result<Posted<()>> + 'static,
) -> StatusPtr {
    if let Some(rep) = rep {
        return post(e.worker(), o, |rw, op| {
            with_key(rw, rep, k, |rw, key| f(rw, rep, key, op))
        });
    }
    let Some(key) = OwnedKey::of(k) else {
        return status::ptr(status::INVALID_PARAM);
    };
    let f = move |rw: &mut rucx::Worker, rep: rucx::Ep, op: Op| {
        let key = key.on(rw, rep)?;
        f(rw, rep, &key, op)
    };
    deferred::defer(e, o, Box::new(f))
}

/// The endpoint and key of an atomic operation (the key of a map of 0
/// bytes has no word: `UCS_ERR_INVALID_PARAM`).
///
/// # Safety
///
/// `ep` and `rkey` are NULL or live.
pub(crate) unsafe fn atomic_target<'a>(
    ep: *mut Endpoint,
    rkey: *mut RkeyH,
) -> Result<(&'a Endpoint, &'a RkeyH), StatusCode> {
    // SAFETY: forwarded contract.
    match unsafe { target(ep, rkey) } {
        Ok((e, k)) if !is_empty_key(k) => Ok((e, k)),
        _ => Err(status::INVALID_PARAM),
    }
}

/// Posts atomic `f` on `e` with key `k` and request options `o`: at once
/// if connected, with a request waiting for the connect while it is
/// under way, the endpoint's status if it failed.
pub(crate) fn post_atomic(
    e: &Endpoint,
    k: &RkeyH,
    o: &Opts,
    f: impl FnOnce(&mut rucx::Worker, rucx::Ep, &Rkey, Op) -> rucx::Result<Posted<()>> + 'static,
) -> StatusPtr {
    let _g = e.worker().enter();
    match crate::deferred::target(e) {
        Ok(rep) => post_keyed(e, k, o, rep, f),
        Err(st) => status::ptr(st),
    }
}

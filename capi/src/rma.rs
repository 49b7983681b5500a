//! One-sided transfers: `ucp_put_nbi`, `ucp_get_nbi`, `ucp_put_nb`,
//! `ucp_get_nb`, `ucp_put_nbx`, `ucp_get_nbx`, and the blocking `ucp_put`
//! and `ucp_get` of the compatibility header, over rucx's `put_raw` and
//! `get_raw`.
//!
//! The `_nb` and `_nbx` forms go in flight with a request of this
//! layer's, completed as tag operations are (the worker's completion
//! queue, then the callback). The `_nbi` forms release their Rust
//! request at once: it completes on its own, and a flush of the
//! endpoint or worker waits for it (`UCS_OK` if it was over at once,
//! `UCS_INPROGRESS` if not). Contiguous data only: other datatypes are
//! `UCS_ERR_UNSUPPORTED`. An operation of 0 bytes is `UCS_OK` at once.
//!
//! On a client endpoint whose connect is under way, the `_nb` and `_nbx`
//! forms return a request at once, the `_nbi` ones `UCS_INPROGRESS`, and
//! the operation waits for the connect (`deferred.rs`); the blocking ones
//! wait for their request, progressing the worker.

use crate::deferred;
use crate::ep::{wait_ptr, Endpoint};
use crate::onesided::{is_empty_key, post_keyed, post_keyed_nbi, target};
use crate::request::{self, Cb, Opts};
use crate::rkey::RkeyH;
use crate::status::{self, guard_ptr, guard_status};
use crate::types::*;
use rucx::{Op, Rkey};
use std::ffi::c_void;

/// Bytes of `count` elements of contiguous `datatype`.
fn contig_len(datatype: Datatype, count: usize) -> Result<usize, StatusCode> {
    if datatype & UCP_DATATYPE_CLASS_MASK != UCP_DATATYPE_CONTIG {
        return Err(status::UNSUPPORTED);
    }
    let elem = (datatype >> UCP_DATATYPE_SHIFT) as usize;
    count.checked_mul(elem).ok_or(status::INVALID_PARAM)
}

/// How a put or get reports its end.
enum Mode<'o> {
    /// `_nbi`: implicitly.
    Implicit,
    /// `_nb`/`_nbx`: with a request.
    Request(&'o Opts),
}

/// A put (`get == false`) or get of `len` bytes between `buffer` and
/// `remote_addr`, as `mode` says; the status as a pointer.
///
/// # Safety
///
/// `ep` and `rkey` NULL or live; `buffer` holds `len` bytes (writable for
/// a get) until the operation completes.
unsafe fn rma(
    get: bool,
    ep: *mut Endpoint,
    buffer: *mut c_void,
    len: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
    mode: Mode<'_>,
) -> StatusPtr {
    // SAFETY: forwarded contract.
    let (e, k) = match unsafe { target(ep, rkey) } {
        Ok(t) => t,
        Err(st) => return status::ptr(st),
    };
    let w = e.worker();
    let _g = w.enter();
    let rep = match deferred::target(e) {
        Ok(r) => r,
        Err(st) => return status::ptr(st),
    };
    if len == 0 || is_empty_key(k) {
        let st = if len == 0 {
            status::OK
        } else {
            status::INVALID_PARAM
        };
        return match mode {
            Mode::Implicit => status::ptr(st),
            Mode::Request(o) => request::done_at_once(w, o, st, TagRecvInfo::default()),
        };
    }
    // SAFETY (of the closure's block): the application keeps the buffer
    // valid (and writable for a get) until the operation completes, UCX's
    // contract, which is the raw tier's.
    let go = move |rw: &mut rucx::Worker, rep: rucx::Ep, key: &Rkey, op: Op| unsafe {
        if get {
            rw.get_raw(rep, buffer.cast(), len, remote_addr, key, op)
        } else {
            rw.put_raw(rep, buffer.cast(), len, remote_addr, key, op)
        }
    };
    match mode {
        Mode::Request(o) => post_keyed(e, k, o, rep, go),
        Mode::Implicit => status::ptr(post_keyed_nbi(e, k, rep, go)),
    }
}

/// The status of an `_nbi` call from its pointer.
fn nbi_status(p: StatusPtr) -> StatusCode {
    status::of_ptr(p).unwrap_or(status::INPROGRESS)
}

/// `ucp_put_nbi`: `UCS_OK` if the data left at once, `UCS_INPROGRESS`
/// (a flush waits for it; `buffer` stays unchanged until then) or an
/// error.
///
/// # Safety
///
/// `ep` and `rkey` live (the key unpacked on `ep`); `buffer` holds
/// `length` bytes until a flush completes.
#[no_mangle]
pub unsafe extern "C" fn ucp_put_nbi(
    ep: *mut Endpoint,
    buffer: *const c_void,
    length: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: forwarded contract; a put only reads `buffer`.
        nbi_status(unsafe {
            rma(
                false,
                ep,
                buffer.cast_mut(),
                length,
                remote_addr,
                rkey,
                Mode::Implicit,
            )
        })
    })
}

/// `ucp_get_nbi`: as `ucp_put_nbi`; the data is in `buffer` once a flush
/// completes.
///
/// # Safety
///
/// As `ucp_put_nbi`, `buffer` writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_get_nbi(
    ep: *mut Endpoint,
    buffer: *mut c_void,
    length: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: forwarded contract.
        nbi_status(unsafe { rma(true, ep, buffer, length, remote_addr, rkey, Mode::Implicit) })
    })
}

/// `ucp_put_nb` (legacy): NULL if done at once, a request whose `cb`
/// runs at completion, or an error pointer.
///
/// # Safety
///
/// As `ucp_put_nbi`, `buffer` valid until completion.
#[no_mangle]
pub unsafe extern "C" fn ucp_put_nb(
    ep: *mut Endpoint,
    buffer: *const c_void,
    length: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
    cb: Option<SendCb>,
) -> StatusPtr {
    let o = Opts::new(cb.map_or(Cb::None, Cb::SendLegacy));
    guard_ptr(|| {
        // SAFETY: forwarded contract; a put only reads `buffer`.
        unsafe {
            rma(
                false,
                ep,
                buffer.cast_mut(),
                length,
                remote_addr,
                rkey,
                Mode::Request(&o),
            )
        }
    })
}

/// `ucp_get_nb` (legacy): as `ucp_put_nb`.
///
/// # Safety
///
/// As `ucp_get_nbi`, `buffer` writable until completion.
#[no_mangle]
pub unsafe extern "C" fn ucp_get_nb(
    ep: *mut Endpoint,
    buffer: *mut c_void,
    length: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
    cb: Option<SendCb>,
) -> StatusPtr {
    let o = Opts::new(cb.map_or(Cb::None, Cb::SendLegacy));
    guard_ptr(|| {
        // SAFETY: forwarded contract.
        unsafe {
            rma(
                true,
                ep,
                buffer,
                length,
                remote_addr,
                rkey,
                Mode::Request(&o),
            )
        }
    })
}

/// A put or get of `count` elements of the parameters' datatype.
///
/// # Safety
///
/// As `rma`; `param` NULL or a valid `ucp_request_param_t`.
unsafe fn rma_nbx(
    get: bool,
    ep: *mut Endpoint,
    buffer: *mut c_void,
    count: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
    param: *const RequestParam,
) -> StatusPtr {
    // SAFETY: NULL or valid (contract).
    let o = unsafe { Opts::from_param(param, false) };
    match contig_len(o.datatype, count) {
        // SAFETY: forwarded contract.
        Ok(len) => unsafe { rma(get, ep, buffer, len, remote_addr, rkey, Mode::Request(&o)) },
        Err(st) => status::ptr(st),
    }
}

/// `ucp_put_nbx`.
///
/// # Safety
///
/// `ep` and `rkey` live; `buffer` holds `count` elements until
/// completion; `param` NULL or a valid `ucp_request_param_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_put_nbx(
    ep: *mut Endpoint,
    buffer: *const c_void,
    count: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
    param: *const RequestParam,
) -> StatusPtr {
    // SAFETY: forwarded contract; a put only reads `buffer`.
    guard_ptr(|| unsafe {
        rma_nbx(
            false,
            ep,
            buffer.cast_mut(),
            count,
            remote_addr,
            rkey,
            param,
        )
    })
}

/// `ucp_get_nbx`.
///
/// # Safety
///
/// As `ucp_put_nbx`, `buffer` writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_get_nbx(
    ep: *mut Endpoint,
    buffer: *mut c_void,
    count: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
    param: *const RequestParam,
) -> StatusPtr {
    // SAFETY: forwarded contract.
    guard_ptr(|| unsafe { rma_nbx(true, ep, buffer, count, remote_addr, rkey, param) })
}

/// A blocking put or get: posted with a request, waited for.
///
/// # Safety
///
/// As `rma`.
unsafe fn blocking(
    get: bool,
    ep: *mut Endpoint,
    buffer: *mut c_void,
    length: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
) -> StatusCode {
    // SAFETY: NULL or live (contract).
    let Some(e) = (unsafe { ep.as_ref() }) else {
        return status::INVALID_PARAM;
    };
    let o = Opts::new(Cb::None);
    // SAFETY: forwarded contract.
    let req = unsafe {
        rma(
            get,
            ep,
            buffer,
            length,
            remote_addr,
            rkey,
            Mode::Request(&o),
        )
    };
    wait_ptr(e.worker(), req)
}

/// `ucp_put` (blocking, legacy): returns once the data is in the remote
/// memory.
///
/// # Safety
///
/// `ep` and `rkey` live; `buffer` holds `length` bytes.
#[no_mangle]
pub unsafe extern "C" fn ucp_put(
    ep: *mut Endpoint,
    buffer: *const c_void,
    length: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
) -> StatusCode {
    // SAFETY: forwarded contract; a put only reads `buffer`.
    guard_status(|| unsafe { blocking(false, ep, buffer.cast_mut(), length, remote_addr, rkey) })
}

/// `ucp_get` (blocking, legacy): returns once the data is in `buffer`.
///
/// # Safety
///
/// As `ucp_put`, `buffer` writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_get(
    ep: *mut Endpoint,
    buffer: *mut c_void,
    length: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
) -> StatusCode {
    // SAFETY: forwarded contract.
    guard_status(|| unsafe { blocking(true, ep, buffer, length, remote_addr, rkey) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr;

    #[test]
    fn only_contiguous_data() {
        assert_eq!(contig_len(DT_CONTIG_BYTES, 10), Ok(10));
        assert_eq!(
            contig_len((8 << UCP_DATATYPE_SHIFT) | UCP_DATATYPE_CONTIG, 3),
            Ok(24)
        );
        assert_eq!(contig_len(2, 1), Err(status::UNSUPPORTED));
        assert_eq!(nbi_status(ptr::null_mut()), status::OK);
        assert_eq!(
            nbi_status(status::ptr(status::INVALID_PARAM)),
            status::INVALID_PARAM
        );
    }
}

//! Datatypes of the tag calls: contiguous (`ucp_dt_make_contig(n)`),
//! scatter-gather lists (`ucp_dt_make_iov()`, a `ucp_dt_iov_t` array of
//! `count` entries) and generic datatypes (`ucp_dt_create_generic`).
//! Strided datatypes are `UCS_ERR_UNSUPPORTED`.
//!
//! A list goes through rucx's datatype operations (`tag_send_dt`,
//! `tag_recv_dt`, `tag_msg_recv_dt`) as an [`Iov`] of [`RawBuf`]s: the
//! application's memory, which UCX's contract keeps valid until the
//! request completes.
//!
//! A generic datatype is, as in UCX, the address of an allocation (here
//! a [`Generic`]: the application's callbacks and context) with the class
//! bits `UCP_DATATYPE_GENERIC` set in its low bits, which the allocation's
//! alignment leaves free. Each operation calls `start_pack` or
//! `start_unpack` and wraps the state it returns in a [`GenericOp`], which
//! implements rucx's [`Pack`] and [`Unpack`] through the other callbacks
//! and calls `finish` when it is dropped: exactly once per operation,
//! whether it completed, failed, was canceled or could not be posted.

use crate::status;
use crate::types::UCP_DATATYPE_SHIFT;
use crate::types::{Datatype, StatusCode, UCP_DATATYPE_CLASS_MASK, UCP_DATATYPE_CONTIG};
use rucx::dt::{Iov, Pack, Unpack};
use rucx::ucp::{IoBuf, IoBufMut};
use rucx::Posted;
use std::ffi::c_void;

/// `UCP_DATATYPE_IOV`.
pub const UCP_DATATYPE_IOV: u64 = 2;

/// `UCP_DATATYPE_GENERIC`.
pub const UCP_DATATYPE_GENERIC: u64 = 7;

/// `ucp_generic_dt_ops_t`: the callbacks of a generic datatype.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct GenericDtOps {
    /// Starts packing `count` elements at `buffer`; returns the state.
    pub start_pack: Option<unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> *mut c_void>,
    /// Starts unpacking into `count` elements at `buffer`; returns the
    /// state.
    pub start_unpack: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> *mut c_void>,
    /// Packed size of the operation's data.
    pub packed_size: Option<unsafe extern "C" fn(*mut c_void) -> usize>,
    /// Packs from `offset` into at most `max_length` bytes at `dest`;
    /// returns how many it wrote.
    pub pack: Option<unsafe extern "C" fn(*mut c_void, usize, *mut c_void, usize) -> usize>,
    /// Unpacks `length` bytes at `src`, packed offset `offset`.
    pub unpack:
        Option<unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize) -> StatusCode>,
    /// Ends the operation and releases its state.
    pub finish: Option<unsafe extern "C" fn(*mut c_void)>,
}

/// The callbacks of a generic datatype, every one present: made once, by
/// `ucp_dt_create_generic`, from a complete [`GenericDtOps`].
#[derive(Debug, Clone, Copy)]
struct Ops {
    start_pack: unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> *mut c_void,
    start_unpack: unsafe extern "C" fn(*mut c_void, *mut c_void, usize) -> *mut c_void,
    packed_size: unsafe extern "C" fn(*mut c_void) -> usize,
    pack: unsafe extern "C" fn(*mut c_void, usize, *mut c_void, usize) -> usize,
    unpack: unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize) -> StatusCode,
    finish: unsafe extern "C" fn(*mut c_void),
}

impl Ops {
    /// The callbacks of `o`, or `None` if one is missing.
    fn of(o: &GenericDtOps) -> Option<Ops> {
        Some(Ops {
            start_pack: o.start_pack?,
            start_unpack: o.start_unpack?,
            packed_size: o.packed_size?,
            pack: o.pack?,
            unpack: o.unpack?,
            finish: o.finish?,
        })
    }
}

/// What a generic `ucp_datatype_t` points to.
#[derive(Debug)]
pub struct Generic {
    ops: Ops,
    context: *mut c_void,
}

/// One operation's generic datatype: the callbacks and the state that
/// `start_pack` or `start_unpack` returned. Dropping it calls `finish`.
#[derive(Debug)]
pub struct GenericOp {
    ops: Ops,
    state: *mut c_void,
    size: usize,
}

// SAFETY: the state belongs to this operation only, and the worker that
// owns the value calls it from one thread at a time; UCX's callbacks run
// on whichever thread progresses the worker too.
unsafe impl Send for GenericOp {}

impl GenericOp {
    /// Starts an operation of `g` over `count` elements at `buffer`:
    /// `start_pack` if `send`, else `start_unpack`.
    ///
    /// # Safety
    ///
    /// `buffer` is what the datatype's callbacks expect, valid until the
    /// operation finishes.
    unsafe fn start(g: &Generic, buffer: *mut c_void, count: usize, send: bool) -> GenericOp {
        // SAFETY: the application's contract covers the callbacks'
        // arguments.
        let state = unsafe {
            match send {
                true => (g.ops.start_pack)(g.context, buffer, count),
                false => (g.ops.start_unpack)(g.context, buffer, count),
            }
        };
        // SAFETY: a state just returned by start_*, not finished.
        let size = unsafe { (g.ops.packed_size)(state) };
        GenericOp {
            ops: g.ops,
            state,
            size,
        }
    }
}

impl Drop for GenericOp {
    fn drop(&mut self) {
        // SAFETY: the state of this operation, finished once (here).
        unsafe { (self.ops.finish)(self.state) }
    }
}

impl Pack for GenericOp {
    fn packed_size(&self) -> usize {
        self.size
    }
    fn pack(&mut self, offset: usize, dest: &mut [u8]) -> usize {
        // SAFETY: a live state; `dest` is writable for its length.
        let n =
            unsafe { (self.ops.pack)(self.state, offset, dest.as_mut_ptr().cast(), dest.len()) };
        n.min(dest.len())
    }
}

impl Unpack for GenericOp {
    fn packed_size(&self) -> usize {
        self.size
    }
    fn unpack(&mut self, offset: usize, src: &[u8]) -> rucx::Result<()> {
        // SAFETY: a live state; `src` is readable for its length.
        let st = unsafe { (self.ops.unpack)(self.state, offset, src.as_ptr().cast(), src.len()) };
        match st {
            status::OK => Ok(()),
            // rucx's errors carry no arbitrary status: the receive fails
            // with UCS_ERR_INVALID_PARAM.
            st => Err(rucx::Error::InvalidParam(format!(
                "generic datatype unpack returned status {st}"
            ))),
        }
    }
}

/// `ucp_dt_create_generic`: a datatype whose operations call `ops` with
/// `context`. Every callback must be set.
///
/// # Safety
///
/// `ops` is NULL or a readable `ucp_generic_dt_ops_t`; `datatype_p` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_dt_create_generic(
    ops: *const GenericDtOps,
    context: *mut c_void,
    datatype_p: *mut Datatype,
) -> StatusCode {
    status::guard_status(|| {
        // SAFETY: NULL or readable (contract).
        let Some(ops) = (unsafe { ops.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        let (Some(ops), false) = (Ops::of(ops), datatype_p.is_null()) else {
            return status::INVALID_PARAM;
        };
        let g = Box::into_raw(Box::new(Generic { ops, context }));
        debug_assert_eq!(g as u64 & UCP_DATATYPE_CLASS_MASK, 0);
        // SAFETY: checked non-NULL; writable (contract).
        unsafe { *datatype_p = g as u64 | UCP_DATATYPE_GENERIC };
        status::OK
    })
}

/// `ucp_dt_destroy`: releases a generic datatype (operations started
/// with it keep their own copy of the callbacks). Other classes have
/// nothing to release.
///
/// # Safety
///
/// `datatype` came from `ucp_dt_create_generic` and is not used after,
/// or is of another class.
#[no_mangle]
pub unsafe extern "C" fn ucp_dt_destroy(datatype: Datatype) {
    status::guard((), || {
        if datatype & UCP_DATATYPE_CLASS_MASK == UCP_DATATYPE_GENERIC {
            let g = (datatype & !UCP_DATATYPE_CLASS_MASK) as *mut Generic;
            if !g.is_null() {
                // SAFETY: made by Box::into_raw in ucp_dt_create_generic,
                // freed once (contract).
                drop(unsafe { Box::from_raw(g) });
            }
        }
    })
}

/// `ucp_dt_iov_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DtIov {
    /// Start of the buffer.
    pub buffer: *mut c_void,
    /// Its length in bytes.
    pub length: usize,
}

/// A buffer of the application, valid until its request completes.
#[derive(Debug)]
pub struct RawBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the memory belongs to the application, which keeps it valid and
// untouched until the request completes (UCX's contract for every
// non-blocking call); the worker that holds it is used by one thread at a
// time.
unsafe impl Send for RawBuf {}

// SAFETY: `ptr` and `len` never change, and the application keeps the
// `len` bytes at `ptr` valid until the request that holds this completes
// and drops it.
unsafe impl IoBuf for RawBuf {
    fn as_ptr(&self) -> *const u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

// SAFETY: as for IoBuf; a receive's buffers are writable (contract).
unsafe impl IoBufMut for RawBuf {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
}

/// The memory of an operation.
#[derive(Debug)]
pub(crate) enum Data {
    /// `len` contiguous bytes.
    Contig(usize),
    /// A scatter-gather list.
    Iov(Iov<RawBuf>),
    /// A generic datatype's operation, started.
    Generic(GenericOp),
}

/// The layout of `count` elements of `datatype` at `buffer`, for a send
/// if `send` (a generic datatype's `start_pack`) or a receive.
///
/// # Safety
///
/// For an iovec datatype, `buffer` points to `count` readable
/// `ucp_dt_iov_t`; a generic one came from `ucp_dt_create_generic` and is
/// not destroyed yet, and `buffer` is what its callbacks expect.
#[inline]
pub(crate) unsafe fn data(
    datatype: Datatype,
    buffer: *const c_void,
    count: usize,
    send: bool,
) -> Result<Data, StatusCode> {
    if datatype & UCP_DATATYPE_CLASS_MASK == UCP_DATATYPE_CONTIG {
        let elem = (datatype >> UCP_DATATYPE_SHIFT) as usize;
        let len = count.checked_mul(elem).ok_or(status::INVALID_PARAM)?;
        if buffer.is_null() && len > 0 {
            return Err(status::INVALID_PARAM);
        }
        return Ok(Data::Contig(len));
    }
    // SAFETY: forwarded contract.
    unsafe { data_other(datatype, buffer, count, send) }
}

/// [`data`] of the datatypes other than contiguous.
///
/// # Safety
///
/// As [`data`].
#[inline(never)]
unsafe fn data_other(
    datatype: Datatype,
    buffer: *const c_void,
    count: usize,
    send: bool,
) -> Result<Data, StatusCode> {
    match datatype & UCP_DATATYPE_CLASS_MASK {
        UCP_DATATYPE_IOV => {
            if buffer.is_null() && count > 0 {
                return Err(status::INVALID_PARAM);
            }
            let list = if count == 0 {
                &[][..]
            } else {
                // SAFETY: `count` entries (contract), checked non-NULL.
                unsafe { std::slice::from_raw_parts(buffer.cast::<DtIov>(), count) }
            };
            let mut bufs = Vec::with_capacity(count);
            for e in list {
                if e.buffer.is_null() && e.length > 0 {
                    return Err(status::INVALID_PARAM);
                }
                bufs.push(RawBuf {
                    ptr: e.buffer.cast(),
                    len: e.length,
                });
            }
            Ok(Data::Iov(Iov::new(bufs)))
        }
        UCP_DATATYPE_GENERIC => {
            let g = (datatype & !UCP_DATATYPE_CLASS_MASK) as *const Generic;
            // SAFETY: a live generic datatype (contract).
            let Some(g) = (unsafe { g.as_ref() }) else {
                return Err(status::INVALID_PARAM);
            };
            // SAFETY: forwarded contract.
            let op = unsafe { GenericOp::start(g, buffer.cast_mut(), count, send) };
            Ok(Data::Generic(op))
        }
        _ => Err(status::UNSUPPORTED),
    }
}

/// The outcome of a datatype operation as a raw-tier one: the list is
/// released to the worker (nobody takes it back: it is dropped when the
/// request completes, whose completion still goes to the queue).
pub(crate) fn detach<D>(
    rw: &mut rucx::Worker,
    r: rucx::Result<Posted<D>>,
) -> rucx::Result<Posted<()>> {
    Ok(match r? {
        Posted::Done(info, _) => Posted::Done(info, ()),
        Posted::InFlight(id) => {
            rw.request_release(id);
            Posted::InFlight(id)
        }
    })
}

//! Datatypes of the tag calls: contiguous (`ucp_dt_make_contig(n)`) and
//! scatter-gather lists (`ucp_dt_make_iov()`, a `ucp_dt_iov_t` array of
//! `count` entries). Generic and strided datatypes are
//! `UCS_ERR_UNSUPPORTED`.
//!
//! A list goes through rucx's datatype operations (`tag_send_dt`,
//! `tag_recv_dt`, `tag_msg_recv_dt`) as an [`Iov`] of [`RawBuf`]s: the
//! application's memory, which UCX's contract keeps valid until the
//! request completes.

use crate::status;
use crate::types::UCP_DATATYPE_SHIFT;
use crate::types::{Datatype, StatusCode, UCP_DATATYPE_CLASS_MASK, UCP_DATATYPE_CONTIG};
use rucx::dt::Iov;
use rucx::ucp::{IoBuf, IoBufMut};
use rucx::Posted;
use std::ffi::c_void;

/// `UCP_DATATYPE_IOV`.
pub const UCP_DATATYPE_IOV: u64 = 2;

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
}

/// The layout of `count` elements of `datatype` at `buffer`.
///
/// # Safety
///
/// For an iovec datatype, `buffer` points to `count` readable `ucp_dt_iov_t`.
pub(crate) unsafe fn data(
    datatype: Datatype,
    buffer: *const c_void,
    count: usize,
) -> Result<Data, StatusCode> {
    match datatype & UCP_DATATYPE_CLASS_MASK {
        UCP_DATATYPE_CONTIG => {
            let elem = (datatype >> UCP_DATATYPE_SHIFT) as usize;
            let len = count.checked_mul(elem).ok_or(status::INVALID_PARAM)?;
            if buffer.is_null() && len > 0 {
                return Err(status::INVALID_PARAM);
            }
            Ok(Data::Contig(len))
        }
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
        _ => Err(status::UNSUPPORTED),
    }
}

/// The outcome of a datatype operation as a raw-tier one: the list is
/// released to the worker (nobody takes it back: it is dropped when the
/// request completes, whose completion still goes to the queue).
pub(crate) fn detach(
    rw: &mut rucx::Worker,
    r: rucx::Result<Posted<Iov<RawBuf>>>,
) -> rucx::Result<Posted<()>> {
    Ok(match r? {
        Posted::Done(info, _) => Posted::Done(info, ()),
        Posted::InFlight(id) => {
            rw.request_release(id);
            Posted::InFlight(id)
        }
    })
}

//! `put_zcopy` and `get_zcopy` of the `self` transport.
//!
//! The initiator is in the same process as the memory, so it does the copy
//! itself at post time (the operations return `Done`), after checking the
//! key against the live registration table: the registration must still
//! exist with the key's generation and secret (else `InvalidParam`), the
//! whole range must lie inside it, and it must grant the right (else
//! `RemoteAccess`). The key's declared address, length and rights are not
//! trusted. After any violation nothing is copied. The table stays read-locked during the copy, so a concurrent
//! `mem_dereg` waits for it.

use super::{rkey, MAX_IOV, MAX_RMA};
use crate::{Access, Error, Iov, RemoteKey, Result};

/// Total length of `iov`, checked against the entry count and [`MAX_RMA`].
fn total_len(op: &'static str, iov: &[Iov]) -> Result<usize> {
    crate::limits::check_iov(op, iov, MAX_IOV, MAX_RMA)
}

/// The checked fields of a key given to an operation.
fn key_fields(rkey: &RemoteKey) -> Result<crate::KeyFields> {
    if rkey.md_name != "self" {
        return Err(Error::InvalidParam(format!(
            "self: remote key of memory domain {:?}",
            rkey.md_name
        )));
    }
    rkey::decode(&rkey.packed)
}

/// Copies the ranges of `iov`, in order, to `remote_addr`.
///
/// # Safety
///
/// Each range of `iov` is valid for reads during the call.
pub(super) unsafe fn put(iov: &[Iov], remote_addr: u64, rkey: &RemoteKey) -> Result<()> {
    let total = total_len("put_zcopy", iov)?;
    let key = key_fields(rkey)?;
    super::REGS.with_range(&key, remote_addr, total, Access::REMOTE_WRITE, |dst| {
        let mut at = 0;
        for v in iov.iter().filter(|v| v.len > 0) {
            // SAFETY: the source range is readable (this function's
            // contract). The destination `[dst + at, dst + at + v.len)`
            // lies within `total` bytes that `with_range` found inside a
            // live registration with remote write rights; `mem_reg`'s
            // caller keeps that memory valid, and free of Rust references,
            // until `mem_dereg`, which waits for the table lock held
            // around this closure. `ptr::copy` allows the ranges to
            // overlap (a put from a process's own registered memory).
            unsafe { std::ptr::copy(v.ptr, dst.wrapping_add(at), v.len) };
            at += v.len;
        }
    })
}

/// Copies from `remote_addr` into the ranges of `iov`, in order.
///
/// # Safety
///
/// Each range of `iov` is valid for writes during the call, and not
/// accessed by anyone else meanwhile.
pub(super) unsafe fn get(iov: &[Iov], remote_addr: u64, rkey: &RemoteKey) -> Result<()> {
    let total = total_len("get_zcopy", iov)?;
    let key = key_fields(rkey)?;
    super::REGS.with_range(&key, remote_addr, total, Access::REMOTE_READ, |src| {
        let mut at = 0;
        for v in iov.iter().filter(|v| v.len > 0) {
            // SAFETY: the destination range is writable (this function's
            // contract; `get_zcopy` hands its iov over for writing). The
            // source `[src + at, src + at + v.len)` lies within `total`
            // bytes that `with_range` found inside a live registration with
            // remote read rights, kept valid by `mem_reg`'s caller until
            // `mem_dereg`, which waits for the table lock held around this
            // closure. `ptr::copy` allows overlap with the registration.
            unsafe { std::ptr::copy(src.wrapping_add(at), v.ptr.cast_mut(), v.len) };
            at += v.len;
        }
    })
}

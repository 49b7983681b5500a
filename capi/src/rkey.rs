//! Remote keys of mapped memory (`mem.rs`): `ucp_rkey_pack`,
//! `ucp_rkey_buffer_release`, `ucp_ep_rkey_unpack`, `ucp_rkey_ptr`,
//! `ucp_rkey_destroy`.
//!
//! The key of a map of 0 bytes reaches nothing: only operations of 0
//! bytes go through it. A packed key is rucx's
//! packed key after an 8-byte prefix (a magic and the length), so that
//! `ucp_ep_rkey_unpack`, which gets no length, knows how much to read
//! and refuses a buffer that is no key with a status. A `ucp_rkey_h`
//! holds the rucx [`Rkey`] unpacked on the endpoint's Rust endpoint
//! (or, while a client endpoint connects, the bytes the connect unpacks).

pub use crate::mem::*;

use crate::context::Context;
use crate::ep::Endpoint;
use crate::status::{self, guard, guard_status};
use crate::types::StatusCode;
use rucx::ucp::ucs::Status;
use rucx::Rkey;
use std::ffi::c_void;
use std::ptr;

/// `UCS_ERR_UNREACHABLE`: what `ucp_rkey_ptr` returns for memory not
/// mapped into this process.
pub const UNREACHABLE: StatusCode = Status::Unreachable as StatusCode;

/// `ucp_rkey_h`: a peer's memory as one endpoint reaches it.
#[derive(Debug)]
pub struct RkeyH {
    /// The Rust key; `None` for the key of a map of 0 bytes, or while
    /// `pending`.
    pub(crate) key: Option<Rkey>,
    /// A key unpacked on an endpoint whose connect is under way: its
    /// bytes, unpacked by the connect (`deferred.rs`).
    pub(crate) pending: Option<PendingKey>,
}

/// The bytes of a key waiting for its endpoint's connect.
#[derive(Debug)]
pub(crate) struct PendingKey {
    /// The packed key.
    pub(crate) bytes: Box<[u8]>,
    /// The endpoint whose deferred list holds the key; NULL once that
    /// list let it go (the endpoint closed, or its connect failed).
    pub(crate) ep: *const Endpoint,
}

/// Magic of a packed key as C sees it.
const KEY_MAGIC: [u8; 4] = *b"rcxk";
/// Bytes before rucx's packed key: the magic and the length.
const KEY_PREFIX: usize = 8;
/// Longest packed key `ucp_ep_rkey_unpack` reads.
const KEY_MAX: usize = 1 << 16;

/// `ucp_rkey_pack`: the key peers unpack to reach `memh`, in memory
/// `ucp_rkey_buffer_release` frees.
///
/// # Safety
///
/// `context` live; `memh` a live handle of it; the pointers writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_rkey_pack(
    context: *mut Context,
    memh: *mut MemH,
    rkey_buffer_p: *mut *mut c_void,
    size_p: *mut usize,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(c), Some(h)) = (unsafe { context.as_ref() }, unsafe { memh.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        if rkey_buffer_p.is_null() || size_p.is_null() {
            return status::INVALID_PARAM;
        }
        crate::ucm::register(&c.ctx);
        let packed = match &h.map {
            Some(m) => match m.rkey_pack() {
                Ok(p) => p,
                Err(e) => return status::of(&e),
            },
            None => Vec::new(),
        };
        let total = KEY_PREFIX + packed.len();
        // SAFETY: plain allocation, freed by ucp_rkey_buffer_release.
        let buf = unsafe { libc::malloc(total) }.cast::<u8>();
        if buf.is_null() {
            return status::NO_MEMORY;
        }
        let mut head = KEY_MAGIC.to_vec();
        head.extend_from_slice(&(packed.len() as u32).to_le_bytes());
        // SAFETY: `buf` holds `total` bytes; the sources do not overlap it.
        unsafe {
            ptr::copy_nonoverlapping(head.as_ptr(), buf, KEY_PREFIX);
            ptr::copy_nonoverlapping(packed.as_ptr(), buf.add(KEY_PREFIX), packed.len());
            *rkey_buffer_p = buf.cast();
            *size_p = total;
        }
        status::OK
    })
}

/// `ucp_rkey_buffer_release`.
///
/// # Safety
///
/// `rkey_buffer` is NULL or came from `ucp_rkey_pack`, released once.
#[no_mangle]
pub unsafe extern "C" fn ucp_rkey_buffer_release(rkey_buffer: *mut c_void) {
    // SAFETY: malloc'd by ucp_rkey_pack (or NULL), freed once (contract).
    guard((), || unsafe { libc::free(rkey_buffer) })
}

/// The rucx key inside C key `p`, or `None` if it is no key.
///
/// # Safety
///
/// `p` points to at least [`KEY_PREFIX`] readable bytes, and to the whole
/// key if it starts with the magic (a buffer from `ucp_rkey_pack`).
unsafe fn unwrap_key<'a>(p: *const c_void) -> Option<&'a [u8]> {
    // SAFETY: the prefix is readable (contract).
    let head = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), KEY_PREFIX) };
    if head[..4] != KEY_MAGIC {
        return None;
    }
    let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    if len > KEY_MAX {
        return None;
    }
    // SAFETY: a packed key holds `len` bytes after its prefix (contract).
    Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>().add(KEY_PREFIX), len) })
}

/// `ucp_ep_rkey_unpack`: the key for operations on `ep`. A buffer that
/// is no packed key (or a malformed one) is `UCS_ERR_INVALID_PARAM`. On
/// a client endpoint whose connect is under way it returns at once: the
/// key is unpacked when the endpoint connects (operations posted with it
/// meanwhile wait for the connect too), and `ucp_rkey_ptr` finds no
/// mapping until then.
///
/// # Safety
///
/// `ep` live; `rkey_buffer` NULL or a buffer of at least 8 readable
/// bytes (a key from `ucp_rkey_pack`, whole); `rkey_p` writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_ep_rkey_unpack(
    ep: *mut Endpoint,
    rkey_buffer: *const c_void,
    rkey_p: *mut *mut RkeyH,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or live (contract).
        let Some(e) = (unsafe { ep.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        if rkey_buffer.is_null() || rkey_p.is_null() {
            return status::INVALID_PARAM;
        }
        // SAFETY: readable as the contract says.
        let Some(bytes) = (unsafe { unwrap_key(rkey_buffer) }) else {
            return status::INVALID_PARAM;
        };
        let mut k = RkeyH {
            key: None,
            pending: None,
        };
        if bytes.is_empty() {
            // SAFETY: writable (contract).
            unsafe { *rkey_p = Box::into_raw(Box::new(k)) };
            return status::OK;
        }
        let w = e.worker();
        let _g = w.enter();
        match crate::deferred::target(e) {
            Ok(Some(rep)) => match w.with(|rw| rw.rkey_unpack(rep, bytes)) {
                Ok(key) => k.key = Some(key),
                Err(e) => return status::of(&e),
            },
            Ok(None) => {
                k.pending = Some(PendingKey {
                    bytes: bytes.into(),
                    ep,
                });
                let p = Box::into_raw(Box::new(k));
                e.deferred.borrow_mut().add_key(p);
                // SAFETY: writable (contract).
                unsafe { *rkey_p = p };
                return status::OK;
            }
            Err(st) => return st,
        }
        // SAFETY: writable (contract).
        unsafe { *rkey_p = Box::into_raw(Box::new(k)) };
        status::OK
    })
}

/// `ucp_rkey_ptr`: where `raddr` of the peer's memory is in this
/// process, for memory the peer allocated (`UCP_MEM_MAP_ALLOCATE`) in a
/// shared segment this process mapped; `UCS_ERR_UNREACHABLE` otherwise.
///
/// # Safety
///
/// `rkey` NULL or live; `addr_p` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_rkey_ptr(
    rkey: *mut RkeyH,
    raddr: u64,
    addr_p: *mut *mut c_void,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or live (contract).
        let Some(k) = (unsafe { rkey.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        if addr_p.is_null() {
            return status::INVALID_PARAM;
        }
        match k.key.as_ref().map(|k| k.ptr(raddr)) {
            Some(Ok(p)) => {
                // SAFETY: writable (contract).
                unsafe { *addr_p = p.cast() };
                status::OK
            }
            _ => UNREACHABLE,
        }
    })
}

/// `ucp_rkey_destroy`.
///
/// # Safety
///
/// `rkey` is NULL or came from `ucp_ep_rkey_unpack`; not used after.
#[no_mangle]
pub unsafe extern "C" fn ucp_rkey_destroy(rkey: *mut RkeyH) {
    guard((), || {
        if rkey.is_null() {
            return;
        }
        // SAFETY: from ucp_ep_rkey_unpack's Box, freed once (contract).
        let k = unsafe { Box::from_raw(rkey) };
        if let Some(ep) = k.pending.as_ref().map(|p| p.ep).filter(|p| !p.is_null()) {
            // SAFETY: an endpoint whose list holds the key is live (it
            // lets its keys go when it goes).
            let e = unsafe { &*ep };
            let _g = e.worker().enter();
            e.deferred.borrow_mut().remove_key(rkey);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_are_not_keys_are_refused() {
        let junk = [0x5au8; 16];
        // SAFETY: 16 readable bytes.
        assert!(unsafe { unwrap_key(junk.as_ptr().cast()) }.is_none());
        let mut long = KEY_MAGIC.to_vec();
        long.extend_from_slice(&u32::MAX.to_le_bytes());
        // SAFETY: 8 readable bytes; the length is refused before reading on.
        assert!(unsafe { unwrap_key(long.as_ptr().cast()) }.is_none());
    }
}

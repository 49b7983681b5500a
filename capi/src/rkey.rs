//! Memory for one-sided access and its remote keys: `ucp_mem_map`,
//! `ucp_mem_unmap`, `ucp_mem_query`, `ucp_mem_advise`, `ucp_rkey_pack`,
//! `ucp_rkey_buffer_release`, `ucp_ep_rkey_unpack`, `ucp_rkey_ptr`,
//! `ucp_rkey_destroy`.
//!
//! A `ucp_mem_h` holds a rucx [`MemMap`] (the caller's memory, or memory
//! rucx allocates with `UCP_MEM_MAP_ALLOCATE`); a map of 0 bytes is
//! accepted, as UCX does, and holds none: its key reaches nothing, and
//! only operations of 0 bytes go through it. A packed key is rucx's
//! packed key after an 8-byte prefix (a magic and the length), so that
//! `ucp_ep_rkey_unpack`, which gets no length, knows how much to read
//! and refuses a buffer that is no key with a status. A `ucp_rkey_h`
//! holds the rucx [`Rkey`] unpacked on the endpoint's Rust endpoint.

use crate::context::Context;
use crate::ep::Endpoint;
use crate::status::{self, guard, guard_status};
use crate::types::StatusCode;
use rucx::ucp::ucs::Status;
use rucx::{Access, MemMap, Rkey};
use std::ffi::{c_int, c_uint, c_void};
use std::ptr;

/// `UCP_MEM_MAP_PARAM_FIELD_ADDRESS`.
pub const UCP_MEM_MAP_PARAM_FIELD_ADDRESS: u64 = 1 << 0;
/// `UCP_MEM_MAP_PARAM_FIELD_LENGTH`.
pub const UCP_MEM_MAP_PARAM_FIELD_LENGTH: u64 = 1 << 1;
/// `UCP_MEM_MAP_PARAM_FIELD_FLAGS`.
pub const UCP_MEM_MAP_PARAM_FIELD_FLAGS: u64 = 1 << 2;
/// `UCP_MEM_MAP_PARAM_FIELD_PROT`.
pub const UCP_MEM_MAP_PARAM_FIELD_PROT: u64 = 1 << 3;
/// `UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE`.
pub const UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE: u64 = 1 << 4;
/// `UCP_MEM_MAP_ALLOCATE`.
pub const UCP_MEM_MAP_ALLOCATE: c_uint = 1 << 1;
/// `UCP_MEM_MAP_FIXED`.
pub const UCP_MEM_MAP_FIXED: c_uint = 1 << 2;
/// `UCP_MEM_MAP_PROT_REMOTE_READ`.
pub const UCP_MEM_MAP_PROT_REMOTE_READ: c_uint = 1 << 8;
/// `UCP_MEM_MAP_PROT_REMOTE_WRITE`.
pub const UCP_MEM_MAP_PROT_REMOTE_WRITE: c_uint = 1 << 9;
/// `UCP_MEM_ATTR_FIELD_ADDRESS`.
pub const UCP_MEM_ATTR_FIELD_ADDRESS: u64 = 1 << 0;
/// `UCP_MEM_ATTR_FIELD_LENGTH`.
pub const UCP_MEM_ATTR_FIELD_LENGTH: u64 = 1 << 1;
/// `UCP_MEM_ATTR_FIELD_MEM_TYPE`.
pub const UCP_MEM_ATTR_FIELD_MEM_TYPE: u64 = 1 << 2;
/// `UCS_MEMORY_TYPE_HOST`: the only memory type rucx maps.
pub const UCS_MEMORY_TYPE_HOST: c_int = 0;
/// `UCS_MEMORY_TYPE_UNKNOWN` (`UCS_MEMORY_TYPE_LAST`, 5 in UCX 1.13):
/// "find out", taken as host memory.
pub const UCS_MEMORY_TYPE_UNKNOWN: c_int = 5;
/// `UCS_ERR_UNREACHABLE`: what `ucp_rkey_ptr` returns for memory not
/// mapped into this process.
pub const UNREACHABLE: StatusCode = Status::Unreachable as StatusCode;

/// `ucp_mem_map_params_t`.
#[repr(C)]
#[derive(Debug)]
pub struct MemMapParams {
    /// `UCP_MEM_MAP_PARAM_FIELD_*` bits: the fields that are set.
    pub field_mask: u64,
    /// The memory to map (or, with `UCP_MEM_MAP_ALLOCATE`, a hint).
    pub address: *mut c_void,
    /// Its length.
    pub length: usize,
    /// `UCP_MEM_MAP_NONBLOCK`, `ALLOCATE`, `FIXED`.
    pub flags: c_uint,
    /// `UCP_MEM_MAP_PROT_*` bits.
    pub prot: c_uint,
    /// `ucs_memory_type_t`.
    pub memory_type: c_int,
}

/// `ucp_mem_attr_t`.
#[repr(C)]
#[derive(Debug)]
pub struct MemAttr {
    /// `UCP_MEM_ATTR_FIELD_*` bits: the fields to fill.
    pub field_mask: u64,
    /// Start of the mapped memory.
    pub address: *mut c_void,
    /// Its length.
    pub length: usize,
    /// `ucs_memory_type_t`.
    pub mem_type: c_int,
}

/// `ucp_mem_advise_params_t`.
#[repr(C)]
#[derive(Debug)]
pub struct MemAdviseParams {
    /// `UCP_MEM_ADVISE_PARAM_FIELD_*` bits.
    pub field_mask: u64,
    /// Start of the advised range.
    pub address: *mut c_void,
    /// Its length.
    pub length: usize,
    /// `ucp_mem_advice_t`.
    pub advice: c_int,
}

/// `ucp_mem_h`: mapped memory.
#[derive(Debug)]
pub struct MemH {
    /// The registration; `None` for a map of 0 bytes.
    pub(crate) map: Option<MemMap>,
    address: *mut c_void,
    length: usize,
}

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

/// The rights `prot` grants (all of them if not given): writing implies
/// atomics, which UCX's protections do not name apart.
fn access_of(p: &MemMapParams) -> Access {
    let prot = if p.field_mask & UCP_MEM_MAP_PARAM_FIELD_PROT != 0 {
        p.prot
    } else {
        UCP_MEM_MAP_PROT_REMOTE_READ | UCP_MEM_MAP_PROT_REMOTE_WRITE
    };
    let mut a = Access::empty();
    if prot & UCP_MEM_MAP_PROT_REMOTE_READ != 0 {
        a |= Access::REMOTE_READ;
    }
    if prot & UCP_MEM_MAP_PROT_REMOTE_WRITE != 0 {
        a |= Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    }
    a
}

/// `ucp_mem_map`: maps `length` bytes at `address`, or allocates them
/// with `UCP_MEM_MAP_ALLOCATE` (the address is then a hint, ignored;
/// `UCP_MEM_MAP_FIXED` is `UCS_ERR_UNSUPPORTED`). Host memory only.
///
/// # Safety
///
/// `context` is a live context; `params` NULL or a valid
/// `ucp_mem_map_params_t` whose memory (unless allocated) stays valid
/// until `ucp_mem_unmap`; `memh_p` writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_mem_map(
    context: *mut Context,
    params: *const MemMapParams,
    memh_p: *mut *mut MemH,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(c), Some(p)) = (unsafe { context.as_ref() }, unsafe { params.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        if memh_p.is_null() || p.field_mask & UCP_MEM_MAP_PARAM_FIELD_LENGTH == 0 {
            return status::INVALID_PARAM;
        }
        let has = |bit| p.field_mask & bit != 0;
        let flags = if has(UCP_MEM_MAP_PARAM_FIELD_FLAGS) {
            p.flags
        } else {
            0
        };
        let address = if has(UCP_MEM_MAP_PARAM_FIELD_ADDRESS) {
            p.address
        } else {
            ptr::null_mut()
        };
        if has(UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE)
            && p.memory_type != UCS_MEMORY_TYPE_HOST
            && p.memory_type != UCS_MEMORY_TYPE_UNKNOWN
        {
            return status::UNSUPPORTED;
        }
        if flags & UCP_MEM_MAP_FIXED != 0 {
            return status::UNSUPPORTED;
        }
        let allocate = flags & UCP_MEM_MAP_ALLOCATE != 0;
        if !allocate && address.is_null() && p.length > 0 {
            return status::INVALID_PARAM;
        }
        crate::ucm::register(&c.ctx);
        crate::ucm::drain();
        let access = access_of(p);
        let (map, address) = if p.length == 0 {
            (None, address)
        } else if allocate {
            match c.ctx.mem_alloc(p.length, access) {
                Ok(m) => {
                    let a = m.ptr().cast();
                    (Some(m), a)
                }
                Err(e) => return status::of(&e),
            }
        } else {
            // SAFETY: the application keeps the memory valid until
            // ucp_mem_unmap and accesses it knowing peers may write it
            // (UCX's contract).
            match unsafe { c.ctx.mem_map(address.cast(), p.length, access) } {
                Ok(m) => (Some(m), address),
                Err(e) => return status::of(&e),
            }
        };
        let h = Box::new(MemH {
            map,
            address,
            length: p.length,
        });
        // SAFETY: writable (contract).
        unsafe { *memh_p = Box::into_raw(h) };
        status::OK
    })
}

/// `ucp_mem_unmap`: ends the registrations (keys peers hold are refused
/// from then on) and frees memory `ucp_mem_map` allocated.
///
/// # Safety
///
/// `memh` came from `ucp_mem_map` and is not used after.
#[no_mangle]
pub unsafe extern "C" fn ucp_mem_unmap(_context: *mut Context, memh: *mut MemH) -> StatusCode {
    guard_status(|| {
        if memh.is_null() {
            return status::INVALID_PARAM;
        }
        // SAFETY: from ucp_mem_map's Box, freed once (contract).
        let h = unsafe { Box::from_raw(memh) };
        match h.map {
            Some(m) => match m.unmap() {
                Ok(()) => status::OK,
                Err(e) => status::of(&e),
            },
            None => status::OK,
        }
    })
}

/// `ucp_mem_query`: address, length and memory type (host).
///
/// # Safety
///
/// `memh` is a live memory handle; `attr` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_mem_query(memh: *const MemH, attr: *mut MemAttr) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(h), Some(a)) = (unsafe { memh.as_ref() }, unsafe { attr.as_mut() }) else {
            return status::INVALID_PARAM;
        };
        if a.field_mask & UCP_MEM_ATTR_FIELD_ADDRESS != 0 {
            a.address = h.address;
        }
        if a.field_mask & UCP_MEM_ATTR_FIELD_LENGTH != 0 {
            a.length = h.length;
        }
        if a.field_mask & UCP_MEM_ATTR_FIELD_MEM_TYPE != 0 {
            a.mem_type = UCS_MEMORY_TYPE_HOST;
        }
        status::OK
    })
}

/// `ucp_mem_advise`: checks its arguments and returns `UCS_OK`, doing
/// nothing else: rucx maps memory eagerly, so there is nothing to fault
/// in ahead of use.
///
/// # Safety
///
/// `memh` is NULL or live; `params` NULL or a valid
/// `ucp_mem_advise_params_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_mem_advise(
    context: *mut Context,
    memh: *mut MemH,
    params: *mut MemAdviseParams,
) -> StatusCode {
    guard_status(|| {
        if context.is_null() || memh.is_null() || params.is_null() {
            return status::INVALID_PARAM;
        }
        status::OK
    })
}

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
    use std::mem::{offset_of, size_of};

    /// The layouts of UCX 1.13's headers on x86_64.
    #[test]
    fn layouts_are_ucx_s() {
        assert_eq!(size_of::<MemMapParams>(), 40);
        assert_eq!(offset_of!(MemMapParams, flags), 24);
        assert_eq!(offset_of!(MemMapParams, memory_type), 32);
        assert_eq!(size_of::<MemAttr>(), 32);
        assert_eq!(offset_of!(MemAttr, mem_type), 24);
        assert_eq!(size_of::<MemAdviseParams>(), 32);
        assert_eq!(offset_of!(MemAdviseParams, advice), 24);
    }

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

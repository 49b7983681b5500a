//! Memory a domain allocates for peers to map, and peers' memory mapped
//! into this process: UCX's `uct_md_mem_alloc` and `uct_rkey_ptr`.
//!
//! Both are capabilities a [`MemoryDomain`](crate::MemoryDomain) may have,
//! visible in its type: [`MemoryDomain::mem_alloc_ops`] and
//! [`MemoryDomain::rkey_ptr_ops`] return `None` for a domain without them.
//!
//! * [`MemAllocOps::mem_alloc`] gives a [`MemAlloc`]: memory the domain
//!   owns, already registered with it (its [`MemAlloc::memh`] packs with
//!   [`MemoryDomain::mkey_pack`](crate::MemoryDomain::mkey_pack) as any
//!   registration does). Dropping the `MemAlloc` ends the registration and
//!   frees the memory, in that order.
//! * [`RkeyPtrOps::rkey_ptr`] maps the memory a peer's key names into this
//!   process when the domain can (a peer on this host that allocated it
//!   with `mem_alloc`), as an [`RkeyMapping`]: the peer's address of the
//!   mapping's first byte, a local pointer and a length. Dropping the last
//!   `Arc` of the mapping unmaps it.
//!
//! The memory is shared with other processes, so neither type hands out
//! references to it: only raw pointers, to be used as memory that others
//! change at any time (volatile or atomic accesses, or copies whose
//! result is checked).
//!
//! [`MemoryDomain::mem_alloc_ops`]: crate::MemoryDomain::mem_alloc_ops
//! [`MemoryDomain::rkey_ptr_ops`]: crate::MemoryDomain::rkey_ptr_ops

use super::{Access, MemHandle, RemoteKey};
use crate::Result;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

/// What keeps allocated or mapped memory alive; dropping it frees or
/// unmaps the memory (and, for an allocation, ends its registration
/// first). Provided by the domain.
pub type MemOwner = Box<dyn Send + Sync + fmt::Debug>;

/// Memory a domain allocated and registered ([`MemAllocOps::mem_alloc`]).
///
/// `[ptr, ptr + len)` stays valid for reads and writes until the
/// `MemAlloc` is dropped; its registration [`MemAlloc::memh`] with the
/// domain that allocated it lasts as long. Drop it (never deregister the
/// handle yourself) to end both.
pub struct MemAlloc {
    ptr: NonNull<u8>,
    len: usize,
    memh: MemHandle,
    owner: Option<MemOwner>,
}

// SAFETY: the type holds an address range, a plain handle and the owner
// (`Send + Sync`); it never reads or writes the memory itself, whose users
// go through raw pointers and synchronise as for any shared memory.
unsafe impl Send for MemAlloc {}
// SAFETY: `&MemAlloc` only gives out the pointer, length and handle.
unsafe impl Sync for MemAlloc {}

impl MemAlloc {
    /// An allocation of `len` bytes at `ptr`, registered as `memh`, kept
    /// alive by `owner`.
    ///
    /// # Safety
    ///
    /// `[ptr, ptr + len)` is valid for reads and writes, and `memh` is a
    /// live registration of exactly that range, until `owner` is dropped;
    /// dropping `owner` ends the registration before it frees the memory.
    pub unsafe fn new(ptr: NonNull<u8>, len: usize, memh: MemHandle, owner: MemOwner) -> MemAlloc {
        MemAlloc {
            ptr,
            len,
            memh,
            owner: Some(owner),
        }
    }

    /// The first byte (page aligned where the domain says so).
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes allocated.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the allocation is empty (never: allocations are non-empty).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The registration with the allocating domain.
    pub fn memh(&self) -> &MemHandle {
        &self.memh
    }
}

impl Drop for MemAlloc {
    fn drop(&mut self) {
        // The owner's drop deregisters, then frees.
        drop(self.owner.take());
    }
}

impl fmt::Debug for MemAlloc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemAlloc")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("memh", &self.memh)
            .finish()
    }
}

/// A domain's allocation of memory that peers can map (UCX's
/// `UCT_MD_FLAG_ALLOC`).
pub trait MemAllocOps: Send + Sync + fmt::Debug {
    /// Allocates `len` zeroed bytes and registers them with `access`
    /// rights. The packed key of the registration carries what a peer's
    /// [`RkeyPtrOps::rkey_ptr`] needs to map the memory.
    ///
    /// Errors: `len` of 0 is `InvalidParam`; lack of memory is `NoMemory`.
    fn mem_alloc(&self, len: usize, access: Access) -> Result<MemAlloc>;
}

/// A peer's memory mapped into this process ([`RkeyPtrOps::rkey_ptr`]).
///
/// The peer's address `remote_base` is local address [`RkeyMapping::ptr`];
/// `len` bytes from there are mapped read-write until the mapping is
/// dropped, even after the peer ended its registration or exited (the
/// memory then belongs to no one else; writes are harmless to the peer).
pub struct RkeyMapping {
    remote_base: u64,
    ptr: NonNull<u8>,
    len: usize,
    _owner: MemOwner,
}

// SAFETY: as for `MemAlloc`: an address range and its owner, never
// accessed by the type itself.
unsafe impl Send for RkeyMapping {}
// SAFETY: `&RkeyMapping` only gives out the addresses and the length.
unsafe impl Sync for RkeyMapping {}

impl RkeyMapping {
    /// A mapping of `len` bytes at `ptr`, which the peer sees at
    /// `remote_base`, kept by `owner`.
    ///
    /// # Safety
    ///
    /// `[ptr, ptr + len)` is valid for reads and writes until `owner` is
    /// dropped.
    pub unsafe fn new(remote_base: u64, ptr: NonNull<u8>, len: usize, owner: MemOwner) -> Self {
        RkeyMapping {
            remote_base,
            ptr,
            len,
            _owner: owner,
        }
    }

    /// The peer's address of the first mapped byte.
    pub fn remote_base(&self) -> u64 {
        self.remote_base
    }

    /// The first mapped byte in this process.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is mapped (never: mappings are non-empty).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where `len` bytes at the peer's `remote_addr` are in this process,
    /// if the mapping covers them all (`None` also for `len` 0 at or past
    /// the end).
    #[inline]
    pub fn local_ptr(&self, remote_addr: u64, len: usize) -> Option<*mut u8> {
        let off = usize::try_from(remote_addr.checked_sub(self.remote_base)?).ok()?;
        if off >= self.len || off.checked_add(len)? > self.len {
            return None;
        }
        // `off < self.len`: inside the mapping.
        Some(self.ptr.as_ptr().wrapping_add(off))
    }
}

impl fmt::Debug for RkeyMapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RkeyMapping")
            .field("remote_base", &format_args!("{:#x}", self.remote_base))
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

/// A domain's mapping of peers' memory into this process (UCX's
/// `UCT_MD_FLAG_RKEY_PTR`).
pub trait RkeyPtrOps: Send + Sync + fmt::Debug {
    /// Maps the memory that `rkey` (unpacked by this domain's
    /// [`MemoryDomain::rkey_unpack`](crate::MemoryDomain::rkey_unpack))
    /// names: `Ok(None)` when the key names no memory this process can map
    /// (not allocated with `mem_alloc`, or on another host), an error when
    /// it should be mappable and is not (the owner is gone, the memory is
    /// shorter than the key says). The key's bytes are untrusted: the
    /// domain checks them again, and the mapping covers no more than what
    /// the owner's memory holds.
    fn rkey_ptr(&self, rkey: &RemoteKey) -> Result<Option<Arc<RkeyMapping>>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_ptr_stays_inside() {
        let mut mem = vec![0u8; 64];
        let p = NonNull::new(mem.as_mut_ptr()).unwrap();
        // SAFETY: `mem` outlives the mapping, which only computes pointers.
        let m = unsafe { RkeyMapping::new(0x1000, p, 64, Box::new(())) };
        assert_eq!(m.local_ptr(0x1000, 64), Some(p.as_ptr()));
        assert_eq!(m.local_ptr(0x1008, 8), Some(p.as_ptr().wrapping_add(8)));
        assert_eq!(m.local_ptr(0x103f, 0), Some(p.as_ptr().wrapping_add(63)));
        assert_eq!(m.local_ptr(0x1040, 0), None);
        assert_eq!(m.local_ptr(0x1039, 8), None);
        assert_eq!(m.local_ptr(0xfff, 1), None);
        assert_eq!(m.local_ptr(u64::MAX, usize::MAX), None);
        drop(m);
        drop(mem);
    }
}

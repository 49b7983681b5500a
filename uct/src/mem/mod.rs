//! Memory registration and remote keys.
//!
//! A memory domain registers a range of the caller's memory with access
//! rights ([`Access`]) and returns a [`MemHandle`]. [`MemoryDomain::mkey_pack`]
//! turns the handle into bytes that a peer unpacks with
//! [`MemoryDomain::rkey_unpack`] into a [`RemoteKey`], which names the range
//! in one-sided operations (`put_zcopy`, `get_zcopy`). Packed keys travel
//! over the wire and are untrusted: unpacking validates their format, and
//! the side that owns the memory checks every access against the live
//! registration (its secret, range, rights, not deregistered), so a forged,
//! guessed or stale key gets an error, never someone else's memory.
//!
//! A domain may also allocate memory that peers on its host map
//! ([`MemAllocOps`]) and map such memory of a peer from its key
//! ([`RkeyPtrOps`]); see `alloc.rs`.
//!
//! [`MemoryDomain::mkey_pack`]: crate::MemoryDomain::mkey_pack
//! [`MemoryDomain::rkey_unpack`]: crate::MemoryDomain::rkey_unpack

use std::sync::Arc;

bitflags::bitflags! {
    /// Access rights of a registration.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Access: u32 {
        /// Local operations may write into it (e.g. the sink of a get).
        const LOCAL_WRITE = 1 << 0;
        /// Peers may read it (`get_zcopy` from a peer).
        const REMOTE_READ = 1 << 1;
        /// Peers may write it (`put_zcopy` from a peer).
        const REMOTE_WRITE = 1 << 2;
        /// Peers may perform atomic operations on it.
        const REMOTE_ATOMIC = 1 << 3;
    }
}

/// A registration of local memory with one memory domain.
///
/// Opaque beyond the range and rights it covers; released with
/// [`MemoryDomain::mem_dereg`](crate::MemoryDomain::mem_dereg).
#[derive(Debug, Clone)]
pub struct MemHandle {
    /// Start address of the registered range.
    pub addr: usize,
    /// Length in bytes.
    pub len: usize,
    /// Rights granted.
    pub access: Access,
    /// The domain's own identity of the registration.
    pub id: u64,
    /// Which registration table issued it ([`RegTable::id`]; 0 for domains
    /// that keep no table): a domain refuses handles of other tables.
    pub table: u64,
}

/// A peer's registration, unpacked from its packed key.
///
/// The domain-specific part is behind an `Arc` so that keys are cheap to
/// clone into every operation that uses them.
#[derive(Debug, Clone)]
pub struct RemoteKey {
    /// Name of the memory domain that packed it.
    pub md_name: String,
    /// The packed bytes, as received.
    pub packed: Arc<[u8]>,
    /// Start address of the remote range, as the peer declared it.
    pub addr: u64,
    /// Length of the remote range, as the peer declared it.
    pub len: u64,
    /// Rights the peer declared.
    pub access: Access,
}

impl RemoteKey {
    /// Whether `[addr, addr + len)` lies inside the declared range. The
    /// owner of the memory checks again against its live registration.
    pub fn covers(&self, addr: u64, len: usize) -> bool {
        let Some(end) = addr.checked_add(len as u64) else {
            return false;
        };
        let Some(key_end) = self.addr.checked_add(self.len) else {
            return false;
        };
        addr >= self.addr && end <= key_end
    }
}

/// Cost of registering memory: `c0 + c1 * len` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RegCost {
    /// Fixed cost per registration, seconds.
    pub c0: f64,
    /// Cost per byte, seconds.
    pub c1: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_checks_bounds_and_overflow() {
        let k = RemoteKey {
            md_name: "x".into(),
            packed: Arc::from(&[][..]),
            addr: 1000,
            len: 100,
            access: Access::REMOTE_READ,
        };
        assert!(k.covers(1000, 100));
        assert!(k.covers(1050, 0));
        assert!(!k.covers(999, 1));
        assert!(!k.covers(1001, 100));
        assert!(!k.covers(u64::MAX, 2));
    }
}

mod alloc;
mod key;
mod table;
pub use alloc::{MemAlloc, MemAllocOps, MemOwner, RkeyMapping, RkeyPtrOps};
pub use key::{process_nonce, KeyLayout};
pub use table::{KeyFields, RegTable};

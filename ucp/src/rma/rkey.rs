//! Remote keys unpacked on an endpoint.

use super::mem::{decode_packed, PackedKey};
use super::wire::KeyRef;
use crate::ucs::slab::SlabId;
use crate::ucs::AccessDenied;
use crate::uct::{Access, RemoteKey, RkeyMapping};
use crate::{Ep, Error, Result, Worker};
use std::sync::Arc;

/// A peer's mapped memory as one endpoint reaches it: made by
/// [`Worker::rkey_unpack`] from the bytes of the peer's
/// [`crate::MemMap::rkey_pack`], valid for operations on that endpoint.
///
/// The declared range and rights are checked here before anything is
/// sent; the target checks again against its live registration wherever
/// it takes part in the access.
#[derive(Debug, Clone)]
pub struct Rkey {
    pub(crate) ep: SlabId,
    pub(crate) key: KeyRef,
    pub(crate) addr: u64,
    pub(crate) len: u64,
    pub(crate) access: Access,
    /// Atomics on the memory are executed by devices only (the owner's
    /// `RUCX_ATOMIC_MODE`, `amo.rs`).
    pub(crate) amo_device: bool,
    /// Per lane of the endpoint: the key of that lane's memory domain, if
    /// the peer's map was registered with it.
    pub(crate) lanes: Vec<Option<RemoteKey>>,
    /// The peer's memory, mapped here by a memory domain of the context
    /// (a shared segment on this host).
    pub(crate) mapped: Option<Arc<RkeyMapping>>,
}

impl Rkey {
    /// Start of the remote range.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Length of the remote range.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the remote range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Rights the peer granted.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Whether atomics on the memory are executed by devices only (its
    /// owner mapped it in device mode, `RUCX_ATOMIC_MODE`), rather than
    /// by the owner's CPU.
    pub fn atomics_by_device(&self) -> bool {
        self.amo_device
    }

    /// A pointer to `remote_addr` of the peer's memory in this process
    /// (UCX's `ucp_rkey_ptr`): only for memory the peer allocated with
    /// [`crate::Context::mem_alloc`] by a memory domain that allocates
    /// memory peers map (shared memory on this host), and a domain of this
    /// context mapped it; [`Error::Unsupported`] otherwise.
    /// `remote_addr` must lie in the key's range.
    ///
    /// The memory is shared with the peer (and others who map it): read
    /// and write it through raw pointers or atomics, never through Rust
    /// references. The pointer stays valid while this key (or a clone)
    /// lives, even after the peer unmapped its side.
    pub fn ptr(&self, remote_addr: u64) -> Result<*mut u8> {
        self.mapped_ptr(remote_addr, 0).ok_or_else(|| {
            Error::Unsupported(format!(
                "{remote_addr:#x} is not in memory mapped into this process \
                 (the peer's memory is not a shared segment on this host)"
            ))
        })
    }

    /// Where `len` bytes at `remote_addr` are in this process, if the
    /// peer's segment is mapped and covers them (and the key declares
    /// them).
    #[inline]
    pub(crate) fn mapped_ptr(&self, remote_addr: u64, len: usize) -> Option<*mut u8> {
        let m = self.mapped.as_ref()?;
        let end = remote_addr.checked_add(len as u64)?;
        if remote_addr < self.addr || end > self.addr + self.len {
            return None;
        }
        m.local_ptr(remote_addr, len)
    }

    /// Checks an access of `len` bytes at `addr` with right `need` against
    /// what the key declares.
    #[inline(always)]
    pub(crate) fn check(&self, ep: Ep, addr: u64, len: usize, need: Access) -> Result<()> {
        let inside = addr
            .checked_add(len as u64)
            .is_some_and(|end| addr >= self.addr && end <= self.addr + self.len);
        if self.ep == ep.0 && inside && self.access.contains(need) {
            Ok(())
        } else {
            Err(self.refusal(ep, addr, len, need))
        }
    }

    /// Why [`Rkey::check`] refused an access (kept out of the fast path).
    #[cold]
    #[inline(never)]
    fn refusal(&self, ep: Ep, addr: u64, len: usize, need: Access) -> Error {
        if self.ep != ep.0 {
            return Error::InvalidParam("the remote key was unpacked on another endpoint".into());
        }
        if !self.access.contains(need) {
            return Error::remote_access(AccessDenied::Rights {
                granted: format!("{:?}", self.access),
                needed: format!("{need:?}"),
            });
        }
        Error::remote_access(AccessDenied::OutOfRange {
            addr,
            len,
            reg_addr: self.addr,
            reg_len: usize::try_from(self.len).unwrap_or(usize::MAX),
        })
    }
}

impl Worker {
    /// Unpacks a peer's packed key for operations on `ep`. The bytes are
    /// untrusted: a malformed key is an error, and the target checks every
    /// access it takes part in against its live registration.
    ///
    /// A packed key has one entry per memory domain of its owner, named as
    /// the owner names them; the name of a domain may differ between hosts
    /// (RDMA domains are named after their device). Each lane takes the
    /// entry of the domain that owns its remote iface, as the peer's
    /// address said, and unpacks it with the domain of its local iface: a
    /// lane joins ifaces of one transport, so both domains read one key
    /// format.
    pub fn rkey_unpack(&self, ep: Ep, packed: &[u8]) -> Result<Rkey> {
        let p = decode_packed(packed)?;
        let st = self.core.eps.get(ep.0).ok_or(Error::InvalidHandle)?;
        let lanes = st
            .lanes
            .iter()
            .zip(&st.remote_mds)
            .map(|(&(iface, _), remote_md)| {
                let md = self.core.ctx.md(*self.core.iface_md.get(iface)?)?;
                let (_, bytes) = p.mds.iter().find(|(name, _)| **name == **remote_md)?;
                match md.rkey_unpack(bytes) {
                    Ok(k) => Some(k),
                    Err(e) => {
                        tracing::debug!("rkey_unpack: {remote_md} by {}: {e}", md.name());
                        None
                    }
                }
            })
            .collect();
        let mapped = self.rkey_map(&p);
        Ok(Rkey {
            ep: ep.0,
            key: p.key,
            addr: p.addr,
            len: p.len,
            access: p.access,
            amo_device: p.amo_device,
            lanes,
            mapped,
        })
    }

    /// The peer's memory mapped into this process by the first memory
    /// domain of the context that maps peers' memory
    /// ([`MemoryDomain::rkey_ptr_ops`](crate::uct::MemoryDomain::rkey_ptr_ops))
    /// and unpacks the key's entry of a domain of its own name, whichever
    /// lanes the endpoint has; `None` if no domain can.
    fn rkey_map(&self, p: &PackedKey<'_>) -> Option<Arc<RkeyMapping>> {
        let ctx = &self.core.ctx;
        (0..ctx.md_count()).find_map(|i| {
            let md = ctx.md(i)?;
            let ops = md.rkey_ptr_ops()?;
            let (_, bytes) = p.mds.iter().find(|(name, _)| *name == md.name())?;
            let key = md
                .rkey_unpack(bytes)
                .map_err(|e| tracing::debug!("rkey_unpack: {}: {e}", md.name()))
                .ok()?;
            match ops.rkey_ptr(&key) {
                Ok(m) => m,
                Err(e) => {
                    tracing::debug!(
                        "rkey_unpack: {} cannot map the peer's memory: {e}",
                        md.name()
                    );
                    None
                }
            }
        })
    }
}

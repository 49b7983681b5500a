//! Mapped memory: registrations a peer can reach with a remote key.
#![allow(unsafe_code)]

use crate::rma::wire::KeyRef;
use crate::uct::{process_nonce, Access, MemAlloc, MemHandle, RegTable};
use crate::{Context, Error, Result};
use std::alloc::Layout;

/// Registrations the protocol layer checks itself: the target side of
/// operations emulated over active messages. One per process, like the
/// transports' own tables.
pub(crate) static RMA_REGS: RegTable = RegTable::new("ucp");

/// Copies `data` to `addr` in the registration of [`RMA_REGS`] that `key`
/// names, if it is live, holds the whole range and grants remote writes
/// (else nothing is touched): an emulated put at its target.
pub(crate) fn remote_write(
    key: &crate::uct::KeyFields,
    addr: u64,
    data: &[u8],
) -> crate::ucs::Result<()> {
    RMA_REGS.with_range(key, addr, data.len(), Access::REMOTE_WRITE, |p| {
        // SAFETY: every registration of `RMA_REGS` is of memory that
        // stays valid until it ends (`Context::mem_map`'s contract, or
        // memory a `MemMap` owns); `with_range` checked the range lies
        // in a live one with remote-write rights and keeps it from
        // ending meanwhile; `data` is the message, not registered
        // memory.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) }
    })
}

/// The `len` bytes at `addr` in the registration `key` names, checked as
/// for [`remote_write`] with remote-read rights: an emulated get.
pub(crate) fn remote_read(
    key: &crate::uct::KeyFields,
    addr: u64,
    len: usize,
) -> crate::ucs::Result<Vec<u8>> {
    RMA_REGS.with_range(key, addr, len, Access::REMOTE_READ, |p| {
        let mut out = Vec::with_capacity(len);
        // SAFETY: as in `remote_write`, for reads; `out` has room for
        // `len` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), len);
            out.set_len(len);
        }
        out
    })
}

/// Applies `op` to the word at `addr` (aligned to its width) in the
/// registration `key` names, checked as for [`remote_write`] with atomic
/// rights; returns the word's old value: an atomic at its target.
pub(crate) fn remote_atomic(
    key: &crate::uct::KeyFields,
    addr: u64,
    op: super::AtomicOp,
    value: super::AtomicValue,
    compare: u64,
) -> crate::ucs::Result<super::AtomicValue> {
    let width = value.width();
    if addr % width as u64 != 0 {
        return Err(crate::ucs::Error::InvalidAddr(format!(
            "atomic on {addr:#x}: not aligned to {width} bytes"
        )));
    }
    RMA_REGS.with_range(key, addr, width, Access::REMOTE_ATOMIC, |p| {
        // SAFETY: `width` bytes inside a live registration with atomic
        // rights (checked, held by the lock), aligned (the registered
        // pointer and the address agree, and the address is aligned),
        // and peers reach such words only through atomics.
        unsafe { super::atomic::apply(p, op, value, compare) }
    })
}

/// Rights a domain registration may carry; remote atomics are added for
/// the domains whose device executes them, on memory mapped in device
/// mode only (`amo.rs`).
const MD_ACCESS: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE);

/// Memory this process allocated for a [`MemMap`].
#[derive(Debug)]
enum Alloc {
    /// Private memory.
    Heap { ptr: *mut u8, layout: Layout },
    /// Memory that memory domain `md` of the context allocated and
    /// registered (e.g. a shared segment that peers on this host map):
    /// its registration is the map's registration with that domain, and
    /// dropping it ends the registration and frees the memory.
    Md { md: usize, mem: MemAlloc },
}

/// A range of memory registered for one-sided access by peers: with the
/// protocol layer (operations it executes: atomics, and put and get where
/// no transport reaches the memory itself) and with every memory domain of
/// the context that registers memory (CMA on one host, TCP's put
/// emulation, `self`).
///
/// Made by [`Context::mem_map`] (the caller's memory) or
/// [`Context::mem_alloc`] (memory rucx allocates, zeroed). Dropping it (or
/// [`MemMap::unmap`]) ends every registration: later accesses through its
/// keys are refused. Peers reach it with the bytes of
/// [`MemMap::rkey_pack`], unpacked on an endpoint with
/// [`crate::Worker::rkey_unpack`].
///
/// While mapped, the memory may change under the process at any time
/// (remote writes and atomics), so this type hands out no references to
/// it: read and write it with [`MemMap::read`] / [`MemMap::write`], or
/// through [`MemMap::ptr`] with the care shared memory needs.
#[derive(Debug)]
pub struct MemMap {
    ctx: Context,
    ptr: *mut u8,
    len: usize,
    access: Access,
    /// The protocol layer's registration.
    am: MemHandle,
    /// Registrations with memory domains: (domain index, handle).
    mds: Vec<(usize, MemHandle)>,
    alloc: Option<Alloc>,
    /// The registrations have ended.
    released: bool,
    /// Atomics on it are executed by devices only (`amo.rs`).
    amo_device: bool,
}

// SAFETY: the pointers are addresses of memory that stays valid until the
// map is dropped (the caller's promise for `mem_map`, ours for
// `mem_alloc`); nothing in `MemMap` is tied to a thread.
unsafe impl Send for MemMap {}
// SAFETY: shared access only reads the fields; the memory itself is
// accessed through raw pointers whose rules `MemMap` documents.
unsafe impl Sync for MemMap {}

impl Context {
    /// Registers `len` bytes at `ptr` for one-sided access by peers with
    /// `access` rights ([`Access::REMOTE_READ`], [`Access::REMOTE_WRITE`],
    /// [`Access::REMOTE_ATOMIC`]).
    ///
    /// # Safety
    ///
    /// The memory stays valid until the returned map is dropped, and while
    /// it is mapped the process does not hold Rust references to it (peers
    /// may write it at any time): it reads and writes it through raw
    /// pointers or [`MemMap::read`] / [`MemMap::write`].
    pub unsafe fn mem_map(&self, ptr: *mut u8, len: usize, access: Access) -> Result<MemMap> {
        if ptr.is_null() || len == 0 {
            return Err(Error::InvalidParam(format!(
                "mem_map of {len} bytes at {ptr:p}: the range must be non-empty"
            )));
        }
        if (ptr as usize).checked_add(len).is_none() {
            return Err(Error::InvalidParam("mem_map: the range wraps".into()));
        }
        self.register_map(ptr, len, access, None)
    }

    /// Allocates `len` zeroed bytes (page-aligned) and maps them as
    /// [`Context::mem_map`] does. The memory is freed when the map is
    /// dropped.
    ///
    /// The first memory domain of the context that allocates memory
    /// ([`MemoryDomain::mem_alloc_ops`](crate::uct::MemoryDomain::mem_alloc_ops),
    /// e.g. shared memory) allocates it: peers on this host map it when
    /// they unpack the key (with a domain that maps peers' memory) and
    /// then reach it with plain loads, stores and atomic instructions
    /// ([`Rkey::ptr`](crate::Rkey::ptr); put, get and atomics take that
    /// way). Without such a domain, or if it fails, it is private memory.
    pub fn mem_alloc(&self, len: usize, access: Access) -> Result<MemMap> {
        if len == 0 {
            return Err(Error::InvalidParam("mem_alloc of 0 bytes".into()));
        }
        let allocator = (0..self.md_count())
            .find_map(|i| Some((i, self.md(i)?.mem_alloc_ops()?, self.md(i)?.name())));
        if let Some((md, ops, name)) = allocator {
            match ops.mem_alloc(len, access & MD_ACCESS) {
                Ok(mem) => {
                    let ptr = mem.ptr();
                    return self.register_map(ptr, len, access, Some(Alloc::Md { md, mem }));
                }
                Err(e) => tracing::info!("mem_alloc: not by {name} ({e}); private memory"),
            }
        }
        let layout = Layout::from_size_align(len, crate::ucs::sys::page_size())
            .map_err(|e| Error::InvalidParam(format!("mem_alloc of {len} bytes: {e}")))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::InvalidParam(format!(
                "mem_alloc: {len} bytes not available"
            )));
        }
        self.register_map(ptr, len, access, Some(Alloc::Heap { ptr, layout }))
    }

    fn register_map(
        &self,
        ptr: *mut u8,
        len: usize,
        access: Access,
        alloc: Option<Alloc>,
    ) -> Result<MemMap> {
        let mds_atomics = (0..self.md_count()).filter_map(|i| Some(self.md(i)?.atomic_caps()));
        let amo_device = super::amo::device_memory(self.config().atomic_mode, mds_atomics);
        // Device memory: the protocol layer executes no atomic on it.
        let rma_access = if amo_device {
            access.difference(Access::REMOTE_ATOMIC)
        } else {
            access
        };
        let am = match RMA_REGS.register(ptr, len, rma_access) {
            Ok(h) => h,
            Err(e) => {
                free(alloc);
                return Err(Error::transport(e));
            }
        };
        let mut mds = Vec::new();
        let md_access = access & MD_ACCESS;
        let allocated_by = match &alloc {
            Some(Alloc::Md { md, mem }) => {
                mds.push((*md, mem.memh().clone()));
                Some(*md)
            }
            _ => None,
        };
        for i in 0..self.md_count() {
            let Some(md) = self.md(i) else { continue };
            // Device memory: atomic rights for the domains whose device
            // executes atomics.
            let md_access = if amo_device
                && access.contains(Access::REMOTE_ATOMIC)
                && !md.atomic_caps().is_empty()
            {
                md_access | Access::REMOTE_ATOMIC
            } else {
                md_access
            };
            if allocated_by == Some(i)
                || !md.can_register()
                || md_access
                    .intersection(
                        Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
                    )
                    .is_empty()
            {
                continue;
            }
            // SAFETY: forwarded from `mem_map`'s contract (or our own
            // allocation), valid until the map is dropped, which
            // deregisters first.
            match unsafe { md.mem_reg(ptr, len, md_access) } {
                Ok(h) => mds.push((i, h)),
                Err(e) => tracing::debug!("mem_map: {} does not register: {e}", md.name()),
            }
        }
        Ok(MemMap {
            ctx: self.clone(),
            ptr,
            len,
            access,
            am,
            mds,
            alloc,
            released: false,
            amo_device,
        })
    }
}

fn free(alloc: Option<Alloc>) {
    if let Some(Alloc::Heap { ptr, layout }) = alloc {
        // SAFETY: allocated by `mem_alloc` with this layout, freed once.
        unsafe { std::alloc::dealloc(ptr, layout) };
    }
    // Memory a domain allocated is deregistered and freed by it when
    // dropped (peers keep their mappings).
}

/// Packed-key magic and version. Version 2: the domains' keys say
/// themselves where peers map the memory; no segment entry follows them.
/// Byte 52 says which atomics the memory takes (0 CPU, 1 device only;
/// `amo.rs`), bytes 53..56 are zero.
const MAGIC: [u8; 4] = *b"rkey";
const VERSION: u8 = 2;
/// Bytes before the domains' keys.
pub(crate) const FIXED_LEN: usize = 56;

impl MemMap {
    /// Start of the mapped range.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Start of the mapped range as an address peers use in operations.
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty (never: maps are non-empty).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Rights granted to peers.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Whether a memory domain allocated the memory, so that peers on this
    /// host can map it (a shared-memory segment).
    pub fn is_shared(&self) -> bool {
        matches!(self.alloc, Some(Alloc::Md { .. }))
    }

    /// Names of the memory domains that registered the range too.
    pub fn domains(&self) -> Vec<String> {
        self.mds
            .iter()
            .filter_map(|(i, _)| self.ctx.md(*i).map(|m| m.name().to_string()))
            .collect()
    }

    fn check(&self, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::InvalidParam(format!(
                "{len} bytes at offset {offset} are outside the map of {} bytes",
                self.len
            ))),
        }
    }

    /// Copies `out.len()` bytes at `offset` of the map into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check(offset, out.len())?;
        // SAFETY: inside the mapped range (checked), valid while mapped;
        // `out` is the caller's own memory and cannot overlap it (the map
        // hands out no references).
        unsafe { std::ptr::copy(self.ptr.add(offset), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Copies `data` to `offset` of the map.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check(offset, data.len())?;
        // SAFETY: as in `read`.
        unsafe { std::ptr::copy(data.as_ptr(), self.ptr.add(offset), data.len()) };
        Ok(())
    }

    /// Reads the naturally aligned 64-bit word at `offset` atomically (to
    /// watch words peers update with atomics or puts).
    pub fn load_u64(&self, offset: usize) -> Result<u64> {
        self.check(offset, 8)?;
        // SAFETY: inside the range (checked).
        let p = unsafe { self.ptr.add(offset) };
        if p.align_offset(8) != 0 {
            return Err(Error::InvalidParam(format!(
                "offset {offset} is not 8-byte aligned"
            )));
        }
        // SAFETY: aligned and valid; peers' atomics use the same hardware
        // atomics, and a load races with a plain remote write only as any
        // shared-memory load does.
        Ok(unsafe { std::sync::atomic::AtomicU64::from_ptr(p.cast()) }
            .load(std::sync::atomic::Ordering::Acquire))
    }

    /// The key peers need to reach this memory: the range, the rights, the
    /// protocol layer's registration and each memory domain's packed key
    /// under the domain's name here (which peers learn, per iface, from
    /// this worker's address).
    pub fn rkey_pack(&self) -> Result<Vec<u8>> {
        let f = RMA_REGS.key_fields(&self.am).map_err(Error::transport)?;
        let mut v = Vec::with_capacity(FIXED_LEN + 64 * self.mds.len());
        v.extend_from_slice(&MAGIC);
        v.push(VERSION);
        v.push(0); // domain count, set below
        v.extend_from_slice(&[0; 2]);
        let key = KeyRef {
            owner: process_nonce(),
            index: f.index,
            generation: f.generation,
            secret: f.secret,
        };
        v.extend_from_slice(&key.owner.to_le_bytes());
        v.extend_from_slice(&key.index.to_le_bytes());
        v.extend_from_slice(&key.generation.to_le_bytes());
        v.extend_from_slice(&key.secret.to_le_bytes());
        v.extend_from_slice(&self.addr().to_le_bytes());
        v.extend_from_slice(&(self.len as u64).to_le_bytes());
        v.extend_from_slice(&self.access.bits().to_le_bytes());
        v.extend_from_slice(&[u8::from(self.amo_device), 0, 0, 0]);
        let mut n = 0u8;
        for (i, h) in &self.mds {
            let Some(md) = self.ctx.md(*i) else { continue };
            let packed = match md.mkey_pack(h) {
                Ok(p) => p,
                Err(e) => {
                    tracing::debug!("rkey_pack: {}: {e}", md.name());
                    continue;
                }
            };
            let (Ok(nl), Ok(kl)) = (u8::try_from(md.name().len()), u16::try_from(packed.len()))
            else {
                continue;
            };
            v.push(nl);
            v.extend_from_slice(md.name().as_bytes());
            v.extend_from_slice(&kl.to_le_bytes());
            v.extend_from_slice(&packed);
            n += 1;
        }
        v[5] = n;
        Ok(v)
    }

    /// Ends the registrations now; the first error of a domain, if any.
    pub fn unmap(mut self) -> Result<()> {
        self.release()
    }

    fn release(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.released, true) {
            return Ok(());
        }
        let mut first = Ok(());
        // Rendezvous registrations cached on this memory end too.
        self.ctx.rcache_invalidate(self.ptr, self.len);
        if let Err(e) = RMA_REGS.deregister(&self.am) {
            first = Err(Error::transport(e));
        }
        let allocated_by = match &self.alloc {
            Some(Alloc::Md { md, .. }) => Some(*md),
            _ => None,
        };
        for (i, h) in std::mem::take(&mut self.mds) {
            // The allocating domain's registration ends with the memory.
            if allocated_by == Some(i) {
                continue;
            }
            if let Some(md) = self.ctx.md(i) {
                if let Err(e) = md.mem_dereg(&h) {
                    if first.is_ok() {
                        first = Err(Error::transport(e));
                    }
                }
            }
        }
        free(self.alloc.take());
        first
    }
}

impl Drop for MemMap {
    fn drop(&mut self) {
        if let Err(e) = self.release() {
            tracing::warn!("mem_unmap: {e}");
        }
    }
}

/// What a packed key says, decoded from untrusted bytes.
#[derive(Debug, Clone)]
pub(crate) struct PackedKey<'a> {
    pub(crate) key: KeyRef,
    pub(crate) addr: u64,
    pub(crate) len: u64,
    pub(crate) access: Access,
    /// Atomics on the memory are executed by devices only.
    pub(crate) amo_device: bool,
    /// (domain name as the owner names it, its packed key)
    pub(crate) mds: Vec<(&'a str, &'a [u8])>,
}

fn invalid(what: &str) -> Error {
    Error::InvalidParam(format!("invalid remote key: {what}"))
}

/// Decodes a key packed by [`MemMap::rkey_pack`], checking its form.
pub(crate) fn decode_packed(b: &[u8]) -> Result<PackedKey<'_>> {
    if b.len() < FIXED_LEN {
        return Err(invalid(&format!("{} bytes", b.len())));
    }
    if b[0..4] != MAGIC || b[4] != VERSION {
        return Err(invalid("not a rucx key of this version"));
    }
    if b[6] != 0 || b[7] != 0 || b[52] > 1 || b[53..56] != [0; 3] {
        return Err(invalid(
            "reserved bytes are not zero (or an unknown atomic mode)",
        ));
    }
    let u64_at = |at: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(a)
    };
    let u32_at = |at: usize| {
        let mut a = [0u8; 4];
        a.copy_from_slice(&b[at..at + 4]);
        u32::from_le_bytes(a)
    };
    let key = KeyRef {
        owner: u64_at(8),
        index: u32_at(16),
        generation: u32_at(20),
        secret: u64_at(24),
    };
    let (addr, len) = (u64_at(32), u64_at(40));
    if addr.checked_add(len).is_none() {
        return Err(invalid("the range wraps"));
    }
    let access = Access::from_bits(u32_at(48)).ok_or_else(|| invalid("unknown access bits"))?;
    let amo_device = b[52] == 1;
    let mut mds = Vec::new();
    let mut at = FIXED_LEN;
    for _ in 0..b[5] {
        let nl = usize::from(*b.get(at).ok_or_else(|| invalid("truncated domain entry"))?);
        let name = b
            .get(at + 1..at + 1 + nl)
            .and_then(|n| std::str::from_utf8(n).ok())
            .ok_or_else(|| invalid("bad domain name"))?;
        at += 1 + nl;
        let kl = b
            .get(at..at + 2)
            .map(|k| usize::from(u16::from_le_bytes([k[0], k[1]])))
            .ok_or_else(|| invalid("truncated domain entry"))?;
        let packed = b
            .get(at + 2..at + 2 + kl)
            .ok_or_else(|| invalid("truncated domain key"))?;
        at += 2 + kl;
        mds.push((name, packed));
    }
    if at != b.len() {
        return Err(invalid("trailing bytes"));
    }
    Ok(PackedKey {
        key,
        addr,
        len,
        access,
        amo_device,
        mds,
    })
}

//! Memory the `shm` domain allocates for peers on this host to map, and
//! the mapping of such memory of a peer: the domain's
//! [`MemAllocOps`] and [`RkeyPtrOps`].
//!
//! `mem_alloc` creates a [`Segment`] (the backend of `RUCX_POSIX_*`) and
//! registers it in [`REGS`](crate::md_keys::REGS) as `mem_reg` would; the
//! allocation is remembered by its handle so that `mkey_pack` of that
//! handle appends the segment entry (this host, the descriptor, the
//! segment's length; see `md_keys`). `rkey_ptr` decodes a peer's key
//! again, and if it has a segment entry naming this host attaches the
//! segment through `/proc/<owner>/fd/<fd>`, which checks that the owner
//! is still the process the key names and that the file is long enough.
//!
//! What it does not do: map memory registered with `mem_reg` (it is the
//! owner's private memory), or keep a peer from writing a segment after
//! the owner freed it (the peer's mapping stays, harmless to the owner).

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use uct::ucs::{Error, Result};
use uct::{Access, MemAlloc, MemAllocOps, MemHandle, RemoteKey, RkeyMapping, RkeyPtrOps};

use crate::md_keys::{self, SegEntry, REGS};
use crate::proc_id::HostId;
use crate::segment::{PosixConfig, Segment};

/// A live allocation, as `mkey_pack` describes it.
#[derive(Debug, Clone, Copy)]
struct AllocEntry {
    /// Start address (the registration's).
    addr: usize,
    /// This process's descriptor of the segment.
    fd: u32,
    /// Segment length.
    len: usize,
}

/// Live allocations by registration id.
type Allocs = HashMap<u64, AllocEntry>;

static ALLOCS: Mutex<Option<Allocs>> = Mutex::new(None);

/// How many allocations `ALLOCS` holds, stored under its lock: while
/// there are none, `mkey_pack` (once per rendezvous) does not take the
/// process-wide lock that every thread's rendezvous would share.
static LIVE: AtomicUsize = AtomicUsize::new(0);

fn with_allocs<R>(f: impl FnOnce(&mut Allocs) -> R) -> R {
    let mut g = ALLOCS.lock().unwrap_or_else(PoisonError::into_inner);
    let a = g.get_or_insert_with(HashMap::new);
    let r = f(a);
    LIVE.store(a.len(), Ordering::Relaxed);
    r
}

/// What keeps an allocation: dropping it forgets the allocation, ends the
/// registration, then unmaps and closes the segment.
#[derive(Debug)]
struct Allocated {
    memh: MemHandle,
    /// Unmapped and closed after `drop` ended the registration.
    _seg: Segment,
}

impl Drop for Allocated {
    fn drop(&mut self) {
        with_allocs(|a| a.remove(&self.memh.id));
        if let Err(e) = md_keys::deregister(&self.memh) {
            tracing::warn!("shm: mem_free: {e}");
        }
        // `_seg` unmaps and closes when dropped (peers keep their mappings).
    }
}

/// Allocates a segment of `len` bytes with `config` and registers it.
pub(crate) fn mem_alloc(len: usize, access: Access, config: &PosixConfig) -> Result<MemAlloc> {
    let seg = Segment::create(len, config)?;
    let fd = seg
        .fd()
        .ok_or_else(|| Error::Unsupported("shm: a created segment without descriptor".into()))?;
    let ptr = seg.as_ptr();
    let memh = md_keys::register(ptr.as_ptr(), len, access)?;
    let entry = AllocEntry {
        addr: memh.addr,
        fd,
        len,
    };
    with_allocs(|a| a.insert(memh.id, entry));
    let owner = Allocated {
        memh: memh.clone(),
        _seg: seg,
    };
    // SAFETY: the segment maps `len` read-write bytes at `ptr` until it is
    // dropped, which `Allocated` does after ending the registration
    // `memh` of exactly that range.
    Ok(unsafe { MemAlloc::new(ptr, len, memh, Box::new(owner)) })
}

/// The packed key of `memh`, with the segment entry if the domain
/// allocated that memory (and this host's identity can be read).
pub(crate) fn mkey_pack(memh: &MemHandle) -> Result<Vec<u8>> {
    let mut k = md_keys::pack(memh)?;
    // An allocation's handle reaches its packer after `mem_alloc` counted
    // it (whatever passed the handle on orders the two), so a count of 0
    // means that `memh` is no allocation.
    if LIVE.load(Ordering::Relaxed) == 0 {
        return Ok(k);
    }
    let alloc = with_allocs(|a| a.get(&memh.id).copied());
    if let Some(e) = alloc {
        if e.addr == memh.addr && memh.table == REGS.id() {
            match HostId::current() {
                Ok(host) => SegEntry {
                    host,
                    fd: e.fd,
                    len: e.len as u64,
                }
                .append_to(&mut k),
                Err(e) => tracing::debug!("shm: mkey_pack without segment entry: {e}"),
            }
        }
    }
    Ok(k)
}

/// Maps the segment `rkey` names, if it is on this host.
pub(crate) fn rkey_ptr(rkey: &RemoteKey) -> Result<Option<Arc<RkeyMapping>>> {
    let d = md_keys::key_decode(rkey)?;
    let Some(e) = d.seg else { return Ok(None) };
    if e.host != HostId::current()? {
        return Ok(None);
    }
    // The entry's length was checked against `isize::MAX` when decoded.
    let len = usize::try_from(e.len)
        .map_err(|_| Error::InvalidParam(format!("shm: segment length {}", e.len)))?;
    let seg = Segment::attach(d.owner, e.fd, len)?;
    let ptr: NonNull<u8> = seg.as_ptr();
    // SAFETY: the segment maps `len` read-write bytes at `ptr` until it is
    // dropped, and the mapping owns it.
    let m = unsafe { RkeyMapping::new(d.fields.addr, ptr, seg.len(), Box::new(seg)) };
    Ok(Some(Arc::new(m)))
}

/// The domain's allocation capability.
#[derive(Debug)]
pub(crate) struct ShmAlloc {
    pub(crate) posix: PosixConfig,
}

impl MemAllocOps for ShmAlloc {
    fn mem_alloc(&self, len: usize, access: Access) -> Result<MemAlloc> {
        mem_alloc(len, access, &self.posix)
    }
}

/// The domain's mapping capability.
#[derive(Debug)]
pub(crate) struct ShmRkeyPtr;

impl RkeyPtrOps for ShmRkeyPtr {
    fn rkey_ptr(&self, rkey: &RemoteKey) -> Result<Option<Arc<RkeyMapping>>> {
        rkey_ptr(rkey)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uct::ucs::Status;

    fn rw() -> Access {
        Access::REMOTE_READ | Access::REMOTE_WRITE
    }

    #[test]
    fn allocated_memory_maps_from_its_key() {
        let a = mem_alloc(8192, rw(), &PosixConfig::default()).unwrap();
        assert_eq!(a.len(), 8192);
        let k = mkey_pack(a.memh()).unwrap();
        assert_eq!(k.len(), 56 + md_keys::SEG_ENTRY_LEN);
        let rkey = md_keys::unpack(&k).unwrap();
        assert_eq!((rkey.addr, rkey.len), (a.ptr() as u64, 8192));
        let m = rkey_ptr(&rkey).unwrap().expect("mapped");
        assert_eq!((m.remote_base(), m.len()), (a.ptr() as u64, 8192));
        let q = m.local_ptr(a.ptr() as u64 + 64, 8).unwrap();
        // SAFETY: 8 bytes inside both mappings of the segment.
        unsafe { q.cast::<u64>().write_volatile(0x55aa) };
        // SAFETY: as above, through the allocating side.
        let seen = unsafe { a.ptr().add(64).cast::<u64>().read_volatile() };
        assert_eq!(seen, 0x55aa);
        // Freeing ends the registration; the mapping stays usable.
        let memh = a.memh().clone();
        drop(a);
        assert_eq!(
            md_keys::deregister(&memh).unwrap_err().status(),
            Status::InvalidParam
        );
        // SAFETY: still mapped here.
        assert_eq!(unsafe { q.cast::<u64>().read_volatile() }, 0x55aa);
    }

    #[test]
    fn registered_memory_and_other_hosts_do_not_map() {
        let mut buf = [0u8; 64];
        let h = md_keys::register(buf.as_mut_ptr(), 64, rw()).unwrap();
        let k = mkey_pack(&h).unwrap();
        assert_eq!(k.len(), 56);
        assert!(rkey_ptr(&md_keys::unpack(&k).unwrap()).unwrap().is_none());
        md_keys::deregister(&h).unwrap();

        let a = mem_alloc(64, rw(), &PosixConfig::default()).unwrap();
        let mut k = mkey_pack(a.memh()).unwrap();
        k[56] ^= 1; // another boot id
        assert!(rkey_ptr(&md_keys::unpack(&k).unwrap()).unwrap().is_none());
        k[56] ^= 1;
        k[88..92].copy_from_slice(&1_000_000u32.to_le_bytes()); // no such fd
        assert!(rkey_ptr(&md_keys::unpack(&k).unwrap()).is_err());
        let mut other = md_keys::unpack(&mkey_pack(a.memh()).unwrap()).unwrap();
        other.md_name = "tcp".into();
        assert_eq!(rkey_ptr(&other).unwrap_err().status(), Status::InvalidParam);
    }

    #[test]
    fn malformed_segment_entries_are_refused() {
        let a = mem_alloc(4096, rw(), &PosixConfig::default()).unwrap();
        let k = mkey_pack(a.memh()).unwrap();
        let set = |at: usize, b: &[u8]| {
            let mut k = k.clone();
            k[at..at + b.len()].copy_from_slice(b);
            k
        };
        let bad = [
            k[..k.len() - 1].to_vec(),
            [&k[..], &[0][..]].concat(),
            set(88, &(1u32 << 31).to_le_bytes()),
            set(92, &0u64.to_le_bytes()),
            set(92, &u64::MAX.to_le_bytes()),
            set(92, &4095u64.to_le_bytes()), // shorter than declared
        ];
        for b in bad {
            let e = md_keys::unpack(&b).unwrap_err();
            assert_eq!(e.status(), Status::InvalidParam, "{e}");
        }
        assert!(md_keys::unpack(&set(92, &8192u64.to_le_bytes())).is_ok());
    }
}

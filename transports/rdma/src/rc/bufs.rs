//! Registered buffers of an RC iface, all of one size, from chunks
//! registered once with the device: one pool of receive buffers posted on
//! its shared receive queue, one of copy-send buffers.
//!
//! Chunks are anonymous mappings, not zeroed up front: a page costs
//! memory only once a message is written into it.
//!
//! The memory is reached only through raw pointers: the provider writes
//! receive buffers while they are posted, and no Rust reference to a
//! buffer exists except [`Bufs::slice`] of one that is not posted.

use std::sync::Arc;

use crate::provider::Device;
use crate::verbs::{Mr, PdId, QpId, Sge};
use uct::ucs::{Error, Result};
use uct::Access;

/// Buffers per registered chunk.
pub(crate) const CHUNK: usize = 64;

/// Who holds a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    Free,
    /// Posted on the shared receive queue (or filled and not reposted).
    Srq,
    /// Carrying a send on this queue pair.
    Tx(QpId),
}

#[derive(Debug)]
struct Chunk {
    ptr: *mut u8,
    len: usize,
    mr: Mr,
}

/// A pool of equal registered buffers, named by index.
#[derive(Debug)]
pub(crate) struct Bufs {
    device: Arc<dyn Device>,
    pd: PdId,
    seg: usize,
    chunks: Vec<Chunk>,
    owner: Vec<Owner>,
    free: Vec<u32>,
    /// Most buffers this pool may hold.
    max: usize,
}

// SAFETY: the chunks are plain heap memory owned by the pool; the raw
// pointers are only dereferenced by the pool's owner (one thread at a time)
// and by the provider under the posting contract.
unsafe impl Send for Bufs {}

impl Bufs {
    pub(crate) fn new(device: Arc<dyn Device>, pd: PdId, seg: usize, max: usize) -> Bufs {
        Bufs {
            device,
            pd,
            seg,
            chunks: Vec::new(),
            owner: Vec::new(),
            free: Vec::new(),
            max,
        }
    }

    /// Size of each buffer.
    pub(crate) fn seg(&self) -> usize {
        self.seg
    }

    /// Whether one more chunk fits under the pool's limit.
    pub(crate) fn can_grow(&self) -> bool {
        self.owner.len() + CHUNK <= self.max.max(CHUNK)
    }

    /// Adds a registered chunk of [`CHUNK`] buffers, all free.
    pub(crate) fn grow(&mut self) -> Result<()> {
        if !self.can_grow() {
            return Err(Error::NoMemory(format!(
                "rc: buffer pool at its limit of {} buffers",
                self.max.max(CHUNK)
            )));
        }
        let len = self.seg * CHUNK;
        // SAFETY: a private anonymous mapping of a non-zero length
        // (seg >= 256) at an address the kernel picks; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::NoMemory("rc: buffer chunk".into()));
        }
        let ptr = ptr.cast::<u8>();
        let access = Access::LOCAL_WRITE;
        // SAFETY: the chunk lives until `Drop` deregisters it first; it is
        // only reached through raw pointers.
        let mr = match unsafe { self.device.reg_mr(self.pd, ptr, len, access) } {
            Ok(mr) => mr,
            Err(e) => {
                // SAFETY: mapped above with this length, not registered.
                unsafe { libc::munmap(ptr.cast(), len) };
                return Err(e);
            }
        };
        let base = self.owner.len() as u32;
        self.chunks.push(Chunk { ptr, len, mr });
        self.owner.extend(std::iter::repeat_n(Owner::Free, CHUNK));
        self.free.extend((base..base + CHUNK as u32).rev());
        Ok(())
    }

    /// A free buffer, now owned by `owner`, growing the pool if it can;
    /// `None` when the pool is at its limit (or memory ran out).
    pub(crate) fn take(&mut self, owner: Owner) -> Option<u32> {
        if self.free.is_empty() && self.can_grow() {
            if let Err(e) = self.grow() {
                tracing::warn!(error = %e, "rc: no more registered buffers");
            }
        }
        self.take_free(owner)
    }

    /// A free buffer, now owned by `owner`, without growing the pool.
    pub(crate) fn take_free(&mut self, owner: Owner) -> Option<u32> {
        let i = self.free.pop()?;
        self.owner[i as usize] = owner;
        Some(i)
    }

    /// Returns buffer `i` to the pool.
    pub(crate) fn give(&mut self, i: u32) {
        if let Some(o) = self.owner.get_mut(i as usize) {
            if *o != Owner::Free {
                *o = Owner::Free;
                self.free.push(i);
            }
        }
    }

    /// Who holds buffer `i`.
    pub(crate) fn owner(&self, i: u32) -> Owner {
        self.owner.get(i as usize).copied().unwrap_or(Owner::Free)
    }

    /// Buffers held for queue pair `qp` (to free them when it is destroyed).
    pub(crate) fn held_by(&self, qp: QpId) -> Vec<u32> {
        let mut out = Vec::new();
        for (i, o) in self.owner.iter().enumerate() {
            if matches!(o, Owner::Tx(q) if *q == qp) {
                out.push(i as u32);
            }
        }
        out
    }

    /// Address of buffer `i`.
    pub(crate) fn ptr(&self, i: u32) -> *mut u8 {
        let (c, o) = (i as usize / CHUNK, i as usize % CHUNK);
        // SAFETY: `i` names a buffer of chunk `c` (indices come from
        // `take`), so the offset stays inside the chunk's allocation.
        unsafe { self.chunks[c].ptr.add(o * self.seg) }
    }

    /// A scatter/gather entry for the first `len` bytes of buffer `i`.
    pub(crate) fn sge(&self, i: u32, len: usize) -> Sge {
        Sge {
            addr: self.ptr(i) as u64,
            len: len.min(self.seg) as u32,
            lkey: self.chunks[i as usize / CHUNK].mr.lkey,
        }
    }

    /// The first `len` bytes of buffer `i`, which must not be posted: a
    /// send buffer, or a receive whose completion was polled and that is
    /// not posted again while the slice lives.
    pub(crate) fn slice(&self, i: u32, len: usize) -> &[u8] {
        // SAFETY: the buffer has `seg` bytes; it is not posted, so no
        // provider writes it while the slice lives (the pool is borrowed,
        // and reposting takes it mutably).
        unsafe { std::slice::from_raw_parts(self.ptr(i), len.min(self.seg)) }
    }

    /// Copies `parts` into buffer `i` from offset 0; returns the length,
    /// or `None` if they do not fit.
    pub(crate) fn fill(&mut self, i: u32, parts: &[&[u8]]) -> Option<usize> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total > self.seg {
            return None;
        }
        let mut at = self.ptr(i);
        for p in parts {
            // SAFETY: `total <= seg`, so every part fits; the buffer is
            // owned by the caller (not posted) and does not overlap `p`,
            // which is caller memory.
            unsafe {
                std::ptr::copy_nonoverlapping(p.as_ptr(), at, p.len());
                at = at.add(p.len());
            }
        }
        Some(total)
    }
}

impl Drop for Bufs {
    fn drop(&mut self) {
        for c in self.chunks.drain(..) {
            if let Err(e) = self.device.dereg_mr(&c.mr) {
                tracing::debug!(error = %e, "rc: buffer chunk not deregistered");
            }
            // SAFETY: mapped in `grow` with this length; deregistered, and
            // the iface destroyed its queues before its buffers.
            unsafe { libc::munmap(c.ptr.cast(), c.len) };
        }
    }
}

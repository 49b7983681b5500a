//! The receiver's segment: a header, the table of senders, and the FIFO.
//!
//! ```text
//! offset 0     magic u64            SEGMENT_MAGIC once initialised
//! offset 8     closes u64           bumped by a sender after it closed its
//!                                   slot, so the receiver scans the table
//!                                   only when something changed
//! offset 16    used u32             slots ever handed out: claims take the
//!                                   next unused slot (no scan), the
//!                                   receiver looks only below this mark
//! offset 20    limit u32            slots this receiver accepts, at most
//!                                   MAX_SENDERS
//! offset 64    MAX_SENDERS entries of 32 bytes:
//!                state u32          FREE, CLAIMED (being filled), LIVE,
//!                                   CLOSED (no more messages from it)
//!                generation u32     bumped at each claim: source ids of a
//!                                   reused slot differ
//!                pid u32, pad u32, start_time u64, pad u64
//! offset FIFO_OFF  the FIFO region (see `crate::fifo`)
//! ```
//!
//! The segment is fresh (zero) when the receiver initialises it, so the
//! table is not written up front: a page of it is touched only once a slot
//! on it is used. A sender takes slot `used` (bumping `used` with a CAS)
//! while `used < limit`, and scans for a FREE slot only once every slot
//! has been used; when none is free the table is full.
//!
//! A sender claims a FREE slot with a CAS, fills in who it is and stores
//! LIVE (Release) before its first message, so the receiver, having seen a
//! message of the slot (Acquire), sees the entry. The slot number travels in
//! each message's source field. The receiver alone sets a slot FREE again,
//! once it has taken every message the sender published before closing or
//! dying (see `progress.rs`).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::proc_id::ProcessId;
use uct::ucs::Result;

/// "RUCXSHM" and layout version 2.
pub(crate) const SEGMENT_MAGIC: u64 = 0x5255_4358_5348_4d02;
/// Senders one receiver accepts at a time: far above any host's process
/// count. The table costs address space only; a page of it is touched
/// once a slot on it is used.
pub(crate) const MAX_SENDERS: usize = 32768;
const TABLE_OFF: usize = 64;
const ENTRY: usize = 32;
/// Offset of the FIFO region in the segment.
pub(crate) const FIFO_OFF: usize = TABLE_OFF + MAX_SENDERS * ENTRY;

pub(crate) const FREE: u32 = 0;
const CLAIMED: u32 = 1;
pub(crate) const LIVE: u32 = 2;
pub(crate) const CLOSED: u32 = 3;

/// A sender-table entry as read by the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) state: u32,
    pub(crate) generation: u32,
    pub(crate) process: Option<ProcessId>,
}

/// The header and sender table of a mapped segment (owner's or peer's).
///
/// Holds a raw pointer: the owner of the mapping keeps it alive for as long
/// as this value exists (both live in the same iface or peer record).
#[derive(Debug)]
pub(crate) struct Shared {
    base: NonNull<u8>,
}

// SAFETY: the header is only accessed through atomics.
unsafe impl Send for Shared {}

impl Shared {
    /// # Safety
    ///
    /// `base` points to a mapping of at least `FIFO_OFF` bytes, 64-byte
    /// aligned, that outlives the returned value, and those bytes are only
    /// accessed atomically.
    pub(crate) unsafe fn new(base: NonNull<u8>) -> Shared {
        Shared { base }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off % 4 == 0 && off + 4 <= FIFO_OFF);
        // SAFETY: in bounds and aligned (contract of `new`, offsets below
        // FIFO_OFF and multiples of 4); accessed only atomically.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(off).cast()) }
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off % 8 == 0 && off + 8 <= FIFO_OFF);
        // SAFETY: as in `u32_at`, 8-aligned.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(off).cast()) }
    }

    /// Owner side, on a fresh (zero-filled) segment: an empty table that
    /// accepts `limit` senders (at most [`MAX_SENDERS`]), then the magic
    /// (Release). The FIFO is initialised separately, before.
    pub(crate) fn init(&self, limit: usize) {
        let limit = limit.min(MAX_SENDERS) as u32;
        self.u64_at(8).store(0, Ordering::Relaxed);
        self.u32_at(16).store(0, Ordering::Relaxed);
        self.u32_at(20).store(limit, Ordering::Relaxed);
        self.u64_at(0).store(SEGMENT_MAGIC, Ordering::Release);
    }

    /// Owner side: the iface is closing; senders' checks fail from now on.
    pub(crate) fn close_segment(&self) {
        self.u64_at(0).store(!SEGMENT_MAGIC, Ordering::Release);
    }

    /// Whether the segment was initialised by a receiver of this layout
    /// and is still open.
    pub(crate) fn check(&self) -> bool {
        self.u64_at(0).load(Ordering::Acquire) == SEGMENT_MAGIC
    }

    /// Sender side: claims a free slot for `me`; `None` if the table is
    /// full. `reserve(off, len)` is called on the bytes of a slot's entry
    /// before they are touched (the table is a hole of the segment whose
    /// pages are allocated on first use); if it fails, so does the claim.
    pub(crate) fn claim(
        &self,
        me: ProcessId,
        reserve: &dyn Fn(usize, usize) -> Result<()>,
    ) -> Result<Option<u16>> {
        // A peer may scribble on the header: clamp what is read.
        let limit = (self.u32_at(20).load(Ordering::Relaxed) as usize).min(MAX_SENDERS);
        let used = self.u32_at(16);
        let mut n = used.load(Ordering::Relaxed);
        while (n as usize) < limit {
            match used.compare_exchange_weak(n, n + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    if let Some(slot) = self.take(n as usize, me, reserve)? {
                        return Ok(Some(slot));
                    }
                    n = used.load(Ordering::Relaxed);
                }
                Err(now) => n = now,
            }
        }
        for slot in 0..limit {
            if let Some(slot) = self.take(slot, me, reserve)? {
                return Ok(Some(slot));
            }
        }
        Ok(None)
    }

    /// Claims `slot` for `me` if it is FREE.
    fn take(
        &self,
        slot: usize,
        me: ProcessId,
        reserve: &dyn Fn(usize, usize) -> Result<()>,
    ) -> Result<Option<u16>> {
        let e = TABLE_OFF + slot * ENTRY;
        reserve(e, ENTRY)?;
        let state = self.u32_at(e);
        if state
            .compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Ok(None);
        }
        self.u32_at(e + 4).fetch_add(1, Ordering::Relaxed);
        self.u32_at(e + 8).store(me.pid, Ordering::Relaxed);
        self.u64_at(e + 16).store(me.start_time, Ordering::Relaxed);
        state.store(LIVE, Ordering::Release);
        Ok(Some(slot as u16))
    }

    /// The sender table's bytes: the owner leaves them unreserved (past the
    /// first page) and senders reserve the entry they claim.
    pub(crate) fn table_hole() -> std::ops::Range<usize> {
        TABLE_OFF..FIFO_OFF
    }

    /// Receiver side: slots below this were ever claimed; the others are
    /// FREE and need no look.
    pub(crate) fn used(&self) -> u16 {
        let n = self.u32_at(16).load(Ordering::Acquire) as usize;
        n.min(MAX_SENDERS).min(usize::from(u16::MAX)) as u16
    }

    /// Sender side: no more messages from `slot`. Every message published
    /// before happens-before this store.
    pub(crate) fn close(&self, slot: u16) {
        let e = TABLE_OFF + usize::from(slot) % MAX_SENDERS * ENTRY;
        self.u32_at(e).store(CLOSED, Ordering::Release);
        self.u64_at(8).fetch_add(1, Ordering::Release);
    }

    /// Receiver side: the table's change counter.
    pub(crate) fn closes(&self) -> u64 {
        self.u64_at(8).load(Ordering::Acquire)
    }

    /// Receiver side: reads entry `slot` (any value: a peer may scribble).
    pub(crate) fn entry(&self, slot: u16) -> Entry {
        let e = TABLE_OFF + usize::from(slot) % MAX_SENDERS * ENTRY;
        let state = self.u32_at(e).load(Ordering::Acquire);
        let generation = self.u32_at(e + 4).load(Ordering::Relaxed);
        let pid = self.u32_at(e + 8).load(Ordering::Relaxed);
        let start_time = self.u64_at(e + 16).load(Ordering::Relaxed);
        Entry {
            state,
            generation,
            process: (pid != 0).then_some(ProcessId { pid, start_time }),
        }
    }

    /// Receiver side: the slot may be claimed again.
    pub(crate) fn free(&self, slot: u16) {
        let e = TABLE_OFF + usize::from(slot) % MAX_SENDERS * ENTRY;
        self.u32_at(e + 8).store(0, Ordering::Relaxed);
        self.u32_at(e).store(FREE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fifo::AlignedBlock;

    #[test]
    fn claim_close_free_cycle() {
        let mut buf = AlignedBlock::zeroed_buffer(FIFO_OFF);
        let base = NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: `buf` outlives `s` and is only used through it.
        let s = unsafe { Shared::new(base) };
        assert!(!s.check());
        s.init(MAX_SENDERS);
        assert!(s.check());
        let me = ProcessId::current().unwrap();
        let a = s.claim(me, &|_, _| Ok(())).unwrap().unwrap();
        let b = s.claim(me, &|_, _| Ok(())).unwrap().unwrap();
        assert_ne!(a, b);
        let e = s.entry(a);
        assert_eq!((e.state, e.generation, e.process), (LIVE, 1, Some(me)));
        s.close(a);
        assert_eq!(s.entry(a).state, CLOSED);
        assert_eq!(s.closes(), 1);
        s.free(a);
        assert_eq!(
            s.claim(me, &|_, _| Ok(())).unwrap(),
            Some(2),
            "fresh slots are taken first"
        );
        assert_eq!(s.used(), 3);
        for _ in 3..MAX_SENDERS {
            assert!(s.claim(me, &|_, _| Ok(())).unwrap().is_some());
        }
        assert_eq!(
            s.claim(me, &|_, _| Ok(())).unwrap(),
            Some(a),
            "then a freed slot is reused"
        );
        assert_eq!(s.entry(a).generation, 2);
        assert_eq!(s.claim(me, &|_, _| Ok(())).unwrap(), None, "table full");
    }

    #[test]
    fn a_small_limit_fills_then_reuses_freed_slots() {
        let mut buf = AlignedBlock::zeroed_buffer(FIFO_OFF);
        let base = NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: `buf` outlives `s` and is only used through it.
        let s = unsafe { Shared::new(base) };
        s.init(3);
        let me = ProcessId::current().unwrap();
        let got: Vec<_> = (0..3)
            .map(|_| s.claim(me, &|_, _| Ok(())).unwrap())
            .collect();
        assert_eq!(got, [Some(0), Some(1), Some(2)], "fresh slots in order");
        assert_eq!(s.claim(me, &|_, _| Ok(())).unwrap(), None, "table full");
        s.close(1);
        s.free(1);
        assert_eq!(s.claim(me, &|_, _| Ok(())).unwrap(), Some(1));
        assert_eq!(s.used(), 3);
        assert_eq!(s.claim(me, &|_, _| Ok(())).unwrap(), None);
    }
}

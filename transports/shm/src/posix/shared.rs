//! The receiver's segment: a header, the table of senders, and the FIFO.
//!
//! ```text
//! offset 0     magic u64            SEGMENT_MAGIC once initialised
//! offset 8     closes u64           bumped by a sender after it closed its
//!                                   slot, so the receiver scans the table
//!                                   only when something changed
//! offset 64    MAX_SENDERS entries of 32 bytes:
//!                state u32          FREE, CLAIMED (being filled), LIVE,
//!                                   CLOSED (no more messages from it)
//!                generation u32     bumped at each claim: source ids of a
//!                                   reused slot differ
//!                pid u32, pad u32, start_time u64, pad u64
//! offset FIFO_OFF  the FIFO region (see `crate::fifo`)
//! ```
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

/// "RUCXSHM" and layout version 1.
pub(crate) const SEGMENT_MAGIC: u64 = 0x5255_4358_5348_4d01;
/// Senders one receiver accepts at a time.
pub(crate) const MAX_SENDERS: usize = 1024;
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

    /// Owner side: an empty table, then the magic (Release). The FIFO is
    /// initialised separately, before.
    pub(crate) fn init(&self) {
        for slot in 0..MAX_SENDERS {
            let e = TABLE_OFF + slot * ENTRY;
            self.u32_at(e).store(FREE, Ordering::Relaxed);
            self.u32_at(e + 4).store(0, Ordering::Relaxed);
        }
        self.u64_at(8).store(0, Ordering::Relaxed);
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

    /// Sender side: claims a free slot for `me`; `None` if the table is full.
    pub(crate) fn claim(&self, me: ProcessId) -> Option<u16> {
        (0..MAX_SENDERS).find_map(|slot| {
            let e = TABLE_OFF + slot * ENTRY;
            let state = self.u32_at(e);
            state
                .compare_exchange(FREE, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
                .ok()?;
            self.u32_at(e + 4).fetch_add(1, Ordering::Relaxed);
            self.u32_at(e + 8).store(me.pid, Ordering::Relaxed);
            self.u64_at(e + 16).store(me.start_time, Ordering::Relaxed);
            state.store(LIVE, Ordering::Release);
            Some(slot as u16)
        })
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
        s.init();
        assert!(s.check());
        let me = ProcessId::current().unwrap();
        let a = s.claim(me).unwrap();
        let b = s.claim(me).unwrap();
        assert_ne!(a, b);
        let e = s.entry(a);
        assert_eq!((e.state, e.generation, e.process), (LIVE, 1, Some(me)));
        s.close(a);
        assert_eq!(s.entry(a).state, CLOSED);
        assert_eq!(s.closes(), 1);
        s.free(a);
        assert_eq!(s.claim(me), Some(a), "a freed slot is reused");
        assert_eq!(s.entry(a).generation, 2);
        for _ in 2..MAX_SENDERS {
            assert!(s.claim(me).is_some());
        }
        assert_eq!(s.claim(me), None, "table full");
    }
}

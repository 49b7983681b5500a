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
//! offset 24    touch u64            written by senders, read by no one
//!                                   (see `Shared::touch`)
//! offset 64    entries of slots 0 .. HOT_SLOTS, 32 bytes each:
//!                state u32          FREE, CLAIMED (being filled), LIVE,
//!                                   CLOSED (no more messages from it)
//!                generation u32     bumped at each claim: source ids of a
//!                                   reused slot differ
//!                pid u32, pad u32, start_time u64, pad u64
//! offset FIFO_OFF (512)  the FIFO region (see `crate::fifo`), R bytes
//! offset FIFO_OFF + R    entries of slots HOT_SLOTS .. MAX_SENDERS
//! ```
//!
//! The first page holds what a sender needs of the receiver: the header,
//! the entries of the first senders, the FIFO's head and tail and its
//! first elements. A peer that sends little maps and touches that page
//! alone (and a descriptor's page for a copied message). A sender's first
//! access to that page is a write ([`Shared::touch`]): a read fault would
//! make the kernel map the owner's neighbouring pages too (fault-around),
//! each of them counted in the sender's resident memory.
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
//! dying (see `rx.rs`).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::proc_id::ProcessId;
use uct::ucs::Result;

/// "RUCXSHM" and layout version 3.
pub(crate) const SEGMENT_MAGIC: u64 = 0x5255_4358_5348_4d03;
/// Senders one receiver accepts at a time: far above any host's process
/// count. The table costs address space only; a page of it is touched
/// once a slot on it is used.
pub(crate) const MAX_SENDERS: usize = 32768;
const HEADER: usize = 64;
/// The header's word that senders write to map the first page.
const TOUCH_OFF: usize = 24;
const ENTRY: usize = 32;
/// Slots whose entries are in the first page, before the FIFO.
const HOT_SLOTS: usize = 14;
/// Offset of the FIFO region in the segment.
pub(crate) const FIFO_OFF: usize = HEADER + HOT_SLOTS * ENTRY;
// The FIFO's head, tail and first elements (of the default 128 bytes) are
// in the first page, with the header and the first senders' entries.
const _: () = assert!(FIFO_OFF + crate::layout::HEADER_SIZE + 16 * 128 <= 4096);

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
    /// Offset of the entry of slot `HOT_SLOTS`: after the FIFO region.
    table_off: usize,
}

// SAFETY: the header is only accessed through atomics.
unsafe impl Send for Shared {}
// SAFETY: as for `Send`: every method takes `&self` and reaches the
// mapping through atomics alone, so threads may share one.
unsafe impl Sync for Shared {}

impl Shared {
    /// Bytes of a segment whose FIFO region is `region` bytes (a multiple
    /// of 64): as many as a table of every slot, a header and the FIFO.
    pub(crate) fn segment_len(region: usize) -> usize {
        HEADER + MAX_SENDERS * ENTRY + region
    }

    /// # Safety
    ///
    /// `base` points to a mapping of at least `segment_len(region)`
    /// bytes, 64-byte aligned, that outlives the returned value, and the
    /// bytes outside `FIFO_OFF..FIFO_OFF + region` are only accessed
    /// atomically. `region` is a multiple of 64.
    pub(crate) unsafe fn new(base: NonNull<u8>, region: usize) -> Shared {
        Shared {
            base,
            table_off: FIFO_OFF + region,
        }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off % 4 == 0 && self.in_bounds(off, 4));
        // SAFETY: in bounds and aligned (contract of `new`: offsets of the
        // header and of entries, multiples of 4, outside the FIFO);
        // accessed only atomically.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(off).cast()) }
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off % 8 == 0 && self.in_bounds(off, 8));
        // SAFETY: as in `u32_at`, 8-aligned.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(off).cast()) }
    }

    fn in_bounds(&self, off: usize, n: usize) -> bool {
        off + n <= FIFO_OFF
            || (off >= self.table_off
                && off + n <= self.table_off + (MAX_SENDERS - HOT_SLOTS) * ENTRY)
    }

    /// Offset of the entry of `slot` (taken modulo [`MAX_SENDERS`]).
    fn entry_off(&self, slot: usize) -> usize {
        let slot = slot % MAX_SENDERS;
        if slot < HOT_SLOTS {
            HEADER + slot * ENTRY
        } else {
            self.table_off + (slot - HOT_SLOTS) * ENTRY
        }
    }

    /// Sender side, before anything else is read: stores to the header's
    /// spare word (which no one reads), so that the first page is mapped
    /// by a write fault, alone, not with the owner's pages around it. (A
    /// `fetch_add(0)` would not do: the compiler makes it a load.)
    pub(crate) fn touch(&self) {
        self.u64_at(TOUCH_OFF).store(0, Ordering::Relaxed);
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
        let e = self.entry_off(slot);
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

    /// The bytes of the entries after the FIFO region of `region` bytes:
    /// the owner leaves them unreserved and senders reserve the entry they
    /// claim.
    pub(crate) fn table_hole(region: usize) -> std::ops::Range<usize> {
        FIFO_OFF + region..Shared::segment_len(region)
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
        let e = self.entry_off(usize::from(slot));
        self.u32_at(e).store(CLOSED, Ordering::Release);
        self.u64_at(8).fetch_add(1, Ordering::Release);
    }

    /// Receiver side: the table's change counter.
    pub(crate) fn closes(&self) -> u64 {
        self.u64_at(8).load(Ordering::Acquire)
    }

    /// Receiver side: reads entry `slot` (any value: a peer may scribble).
    pub(crate) fn entry(&self, slot: u16) -> Entry {
        let e = self.entry_off(usize::from(slot));
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
        let e = self.entry_off(usize::from(slot));
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
        let mut buf = AlignedBlock::zeroed_buffer(Shared::segment_len(0));
        let base = NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: `buf` outlives `s` and is only used through it.
        let s = unsafe { Shared::new(base, 0) };
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
        let mut buf = AlignedBlock::zeroed_buffer(Shared::segment_len(0));
        let base = NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: `buf` outlives `s` and is only used through it.
        let s = unsafe { Shared::new(base, 0) };
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

    #[test]
    fn entries_before_and_after_the_fifo_leave_it_alone() {
        const REGION: usize = 4096;
        let mut buf = AlignedBlock::zeroed_buffer(Shared::segment_len(REGION));
        let bytes = buf.as_mut_ptr().cast::<u8>();
        // SAFETY: the FIFO's bytes lie inside `buf`, not yet shared.
        unsafe { std::ptr::write_bytes(bytes.add(FIFO_OFF), 0xa5, REGION) };
        let base = NonNull::new(bytes).unwrap();
        {
            // SAFETY: `buf` outlives `s`; its bytes outside the FIFO are only
            // used through `s`, and the FIFO's only read below, after `s`.
            let s = unsafe { Shared::new(base, REGION) };
            s.init(MAX_SENDERS);
            s.touch();
            let me = ProcessId::current().unwrap();
            for want in 0..3 * HOT_SLOTS as u16 {
                assert_eq!(s.claim(me, &|_, _| Ok(())).unwrap(), Some(want));
            }
            assert_eq!(Shared::table_hole(REGION).end, Shared::segment_len(REGION));
            for slot in [
                0,
                HOT_SLOTS as u16 - 1,
                HOT_SLOTS as u16,
                3 * HOT_SLOTS as u16 - 1,
            ] {
                assert_eq!(s.entry(slot).process, Some(me), "slot {slot}");
                s.close(slot);
                assert_eq!(s.entry(slot).state, CLOSED);
            }
        }
        // SAFETY: as above; `s` is gone.
        let fifo = unsafe { std::slice::from_raw_parts(bytes.add(FIFO_OFF), REGION) };
        assert!(fifo.iter().all(|&b| b == 0xa5), "the FIFO was written");
    }
}

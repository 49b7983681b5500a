//! A FIFO region in raw memory.

use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;

use crate::fifo::{AlignedBlock, FifoError};
use crate::layout::{
    Geometry, CACHE_LINE, CAPACITY_OFF, DESC_SIZE_OFF, ELEM_HEADER_SIZE, ELEM_SIZE_OFF, FIFO_MAGIC,
    HEADER_SIZE, HEAD_OFF, MAGIC_OFF, TAIL_OFF,
};
use crate::sync::{AtomicU64, Ordering};

/// Base pointer and geometry of a region at least `geom.region_size()` bytes
/// long and `CACHE_LINE`-aligned (both checked by the constructors).
pub(crate) struct Region {
    base: NonNull<u8>,
    geom: Geometry,
    /// The buffer this region owns, freed on drop; `None` for mapped memory.
    owned: Option<NonNull<[AlignedBlock]>>,
}

// SAFETY: the region is only accessed through atomics and through payload
// copies whose exclusivity the FIFO protocol establishes (see `fifo`); the
// owned buffer is plain bytes with no thread affinity.
unsafe impl Send for Region {}
// SAFETY: as above; `&Region` hands out `&AtomicU64`s and raw payload access
// guarded by `unsafe fn` contracts.
unsafe impl Sync for Region {}

impl Region {
    /// Takes ownership of `buf`.
    pub(crate) fn owned(buf: Box<[AlignedBlock]>, geom: Geometry) -> Result<Self, FifoError> {
        let len = std::mem::size_of_val(&*buf);
        check_size(len, &geom)?;
        let owned = NonNull::from(Box::leak(buf));
        Ok(Self {
            base: owned.cast(),
            geom,
            owned: Some(owned),
        })
    }

    /// # Safety
    ///
    /// As [`crate::Fifo::from_raw`].
    pub(crate) unsafe fn raw(
        ptr: NonNull<u8>,
        len: usize,
        geom: Geometry,
    ) -> Result<Self, FifoError> {
        if ptr.as_ptr() as usize % CACHE_LINE != 0 {
            return Err(FifoError::Misaligned {
                addr: ptr.as_ptr() as usize,
            });
        }
        check_size(len, &geom)?;
        Ok(Self {
            base: ptr,
            geom,
            owned: None,
        })
    }

    fn u64_at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off % 8 == 0 && off + 8 <= self.geom.region_size());
        // SAFETY: every caller passes an 8-aligned offset inside the header
        // or a control word of an element with index < capacity, so the 8
        // bytes lie within the region (size checked at construction) and are
        // 8-aligned (base is 64-aligned). The region outlives `&self`, and
        // these bytes are only ever accessed atomically by this crate.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(off).cast()) }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off % 4 == 0 && off + 4 <= HEADER_SIZE);
        // SAFETY: as in `u64_at`, for the 4-aligned config fields of the header.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(off).cast()) }
    }

    pub(crate) fn head(&self) -> &AtomicU64 {
        self.u64_at(HEAD_OFF)
    }

    pub(crate) fn tail(&self) -> &AtomicU64 {
        self.u64_at(TAIL_OFF)
    }

    fn elem_off(&self, index: usize) -> usize {
        debug_assert!(index < self.geom.capacity);
        HEADER_SIZE + index * self.geom.elem_size
    }

    /// Control word of element `index` (< capacity).
    pub(crate) fn ctl(&self, index: usize) -> &AtomicU64 {
        self.u64_at(self.elem_off(index))
    }

    /// Offset of the payload of element `index`: inline, or in its
    /// descriptor.
    fn payload_off(&self, index: usize, desc: bool) -> usize {
        if desc {
            debug_assert!(index < self.geom.capacity);
            self.geom.desc_off() + index * self.geom.desc_size
        } else {
            self.elem_off(index) + ELEM_HEADER_SIZE
        }
    }

    /// Copies `parts` back to back into the payload of element `index`,
    /// inline or (`desc`) into its descriptor.
    ///
    /// # Safety
    ///
    /// `index < capacity`, the total length is at most `max_inline` (or
    /// `desc_size` with `desc`), and the caller owns the element (claimed it
    /// and has not yet published it).
    pub(crate) unsafe fn write_payload(&self, index: usize, desc: bool, parts: &[&[u8]]) {
        let mut off = self.payload_off(index, desc);
        for part in parts {
            // SAFETY: the parts total at most the place's size, so the
            // destination stays inside element `index` or its descriptor,
            // inside the region; the element is exclusively ours by the
            // caller's contract, and a caller's slice cannot overlap the
            // region it is not handed.
            unsafe {
                uct::ucs::copy::copy_small(part.as_ptr(), self.base.as_ptr().add(off), part.len());
            }
            off += part.len();
        }
    }

    /// Writes the 8-byte `header` (little-endian) and then `payload` into
    /// the inline payload of element `index`.
    ///
    /// # Safety
    ///
    /// `index < capacity`, `8 + payload.len()` is at most `max_inline`,
    /// and the caller owns the element (claimed it and has not yet
    /// published it).
    #[inline]
    pub(crate) unsafe fn write_short(&self, index: usize, header: u64, payload: &[u8]) {
        let off = self.payload_off(index, false);
        // SAFETY: both writes stay inside element `index` (the caller's
        // length bound), which is exclusively ours; a caller's slice cannot
        // overlap the region it is not handed.
        unsafe {
            let dst = self.base.as_ptr().add(off);
            std::ptr::write_unaligned(dst.cast::<u64>(), header.to_le());
            uct::ucs::copy::copy_small(payload.as_ptr(), dst.add(8), payload.len());
        }
    }

    /// Calls `f` on the first `len` payload bytes of element `index`,
    /// inline or (`desc`) in its descriptor.
    ///
    /// # Safety
    ///
    /// `index < capacity`, `len <= max_inline` (or `desc_size` with `desc`),
    /// and the element is owned by the consumer (its owner bit was seen with
    /// Acquire) until `f` returns.
    pub(crate) unsafe fn with_payload<R>(
        &self,
        index: usize,
        desc: bool,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> R {
        let off = self.payload_off(index, desc);
        // SAFETY: `off + len` is within element `index` or its descriptor,
        // and so within the region; a well-behaved producer does not write the element until
        // the consumer releases it after `f` returns. The slice does not
        // outlive `f`.
        let data = unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off), len) };
        f(data)
    }

    /// Writes an empty FIFO: counters zero, every control word zero (not
    /// ready for lap 0), the geometry, then the magic with Release.
    pub(crate) fn init(&self) {
        self.head().store(0, Ordering::Relaxed);
        self.tail().store(0, Ordering::Relaxed);
        for index in 0..self.geom.capacity {
            self.ctl(index).store(0, Ordering::Relaxed);
        }
        self.u32_at(ELEM_SIZE_OFF)
            .store(self.geom.elem_size as u32, Ordering::Relaxed);
        self.u32_at(CAPACITY_OFF)
            .store(self.geom.capacity as u32, Ordering::Relaxed);
        self.u32_at(DESC_SIZE_OFF)
            .store(self.geom.desc_size as u32, Ordering::Relaxed);
        self.u32_at(MAGIC_OFF).store(FIFO_MAGIC, Ordering::Release);
    }

    /// Checks that the region holds a FIFO initialised with our geometry.
    pub(crate) fn check(&self) -> Result<(), FifoError> {
        let magic = self.u32_at(MAGIC_OFF).load(Ordering::Acquire);
        if magic != FIFO_MAGIC {
            return Err(FifoError::BadMagic { found: magic });
        }
        let elem_size = self.u32_at(ELEM_SIZE_OFF).load(Ordering::Relaxed) as usize;
        let capacity = self.u32_at(CAPACITY_OFF).load(Ordering::Relaxed) as usize;
        let desc_size = self.u32_at(DESC_SIZE_OFF).load(Ordering::Relaxed) as usize;
        if elem_size != self.geom.elem_size
            || capacity != self.geom.capacity
            || desc_size != self.geom.desc_size
        {
            return Err(FifoError::GeometryMismatch {
                elem_size,
                capacity,
                desc_size,
            });
        }
        Ok(())
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if let Some(owned) = self.owned {
            // SAFETY: `owned` came from `Box::leak` in `Region::owned` and is
            // freed exactly once, here; no reference into it outlives `self`.
            drop(unsafe { Box::from_raw(owned.as_ptr()) });
        }
    }
}

fn check_size(len: usize, geom: &Geometry) -> Result<(), FifoError> {
    let needed = geom.region_size();
    if len < needed {
        return Err(FifoError::RegionTooSmall { len, needed });
    }
    Ok(())
}

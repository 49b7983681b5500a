//! Message buffers handed to the communication layer as raw pointers.
//!
//! A [`Slots`] owns `n` buffers of one message each and only gives out
//! raw pointers, so that the layer may read or write them while an
//! operation is in flight without any Rust reference aliasing them. Slices
//! are made only for slots with nothing in flight (the loops guarantee it).

use super::error::{PerfError, Result};
use std::ptr::NonNull;

/// Alignment of the buffers: a page, as UCX's perftest allocates them (a
/// copy between buffers of different alignment within a page is slower).
const ALIGN: usize = 4096;

/// `count` buffers of `len` bytes each, contiguous, page aligned.
#[derive(Debug)]
pub(crate) struct Slots {
    base: NonNull<u8>,
    len: usize,
    count: usize,
    leaked: bool,
}

impl Slots {
    /// Allocates `count` buffers of `len` bytes and writes zeros into
    /// them; allocation failure is an error, not an abort.
    ///
    /// Written, not just allocated zeroed: fresh anonymous pages all map
    /// the kernel's one zero page until written, and a test sending from
    /// them would read one cached 4 KiB page over and over instead of its
    /// buffer, which no application sending data it produced does.
    pub(crate) fn new(len: usize, count: usize) -> Result<Slots> {
        let count = count.max(1);
        let total = len
            .checked_mul(count)
            .ok_or(PerfError::NoMemory(usize::MAX))?;
        let layout = Self::layout(total)?;
        // SAFETY: the layout's size is at least 1.
        let raw = unsafe { std::alloc::alloc(layout) };
        let base = NonNull::new(raw).ok_or(PerfError::NoMemory(total))?;
        // SAFETY: `raw` points to `total` bytes just allocated, ours alone.
        unsafe { std::ptr::write_bytes(raw, 0, total) };
        Ok(Slots {
            base,
            len,
            count,
            leaked: false,
        })
    }

    /// The allocation of `total` bytes (at least one, page aligned).
    fn layout(total: usize) -> Result<std::alloc::Layout> {
        std::alloc::Layout::from_size_align(total.max(1), ALIGN)
            .map_err(|_| PerfError::NoMemory(total))
    }

    /// Length of one buffer.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Number of buffers.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The buffer of message `sn`.
    #[inline]
    pub(crate) fn ptr(&self, sn: u64) -> *mut u8 {
        // One shared buffer is the common case: no division for it.
        let slot = if self.count == 1 {
            0
        } else {
            (sn % self.count as u64) as usize
        };
        // In bounds: slot < count and the allocation is len * count bytes
        // (for len 0 the offset is 0).
        self.base.as_ptr().wrapping_add(slot * self.len)
    }

    /// The buffer of message `sn` as a slice.
    ///
    /// # Safety
    ///
    /// No operation may be in flight on that buffer while the slice lives.
    pub(crate) unsafe fn slice_mut(&mut self, sn: u64) -> &mut [u8] {
        // SAFETY: the pointer is inside the allocation and `len` bytes
        // long; the caller promises nobody else touches it meanwhile, and
        // `&mut self` rules out a second slice from this owner.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(sn), self.len) }
    }

    /// Gives up the memory without freeing it: used when operations may
    /// still be in flight on it after a failure.
    pub(crate) fn leak(&mut self) {
        self.leaked = true;
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        if self.leaked {
            return;
        }
        // `new` made this very layout, so it cannot fail here.
        if let Ok(layout) = Self::layout(self.len * self.count) {
            // SAFETY: `base` was allocated in `new` with this layout and is
            // freed once, here.
            unsafe { std::alloc::dealloc(self.base.as_ptr(), layout) };
        }
    }
}

// SAFETY: Slots owns its memory like a Box<[u8]>; moving it to another
// thread moves that ownership.
unsafe impl Send for Slots {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_distinct_and_cycle() {
        let mut s = Slots::new(16, 3).unwrap();
        assert_eq!((s.len(), s.count()), (16, 3));
        assert_eq!(s.ptr(0) as usize % ALIGN, 0, "page aligned");
        assert_ne!(s.ptr(0), s.ptr(1));
        assert_eq!(s.ptr(0), s.ptr(3));
        // SAFETY: nothing is in flight in a unit test.
        unsafe {
            s.slice_mut(1).fill(0xab);
            assert!(s.slice_mut(0).iter().all(|&b| b == 0));
            assert!(s.slice_mut(4).iter().all(|&b| b == 0xab));
        }
    }

    #[test]
    fn empty_messages_work() {
        let mut s = Slots::new(0, 4).unwrap();
        assert_eq!(s.len(), 0);
        // SAFETY: nothing is in flight in a unit test.
        assert!(unsafe { s.slice_mut(2) }.is_empty());
    }

    #[test]
    fn impossible_sizes_are_errors() {
        assert!(Slots::new(usize::MAX, 2).is_err());
        assert!(Slots::new(usize::MAX / 2, 1).is_err());
    }
}

//! Index bookkeeping shared by the chunked pools: which slots exist, which
//! are handed out, and the free list.

/// Slot indices of a pool that grows one chunk at a time.
///
/// Slot `i` lives in chunk `i >> shift` at offset `i & mask`; chunks hold
/// `1 << shift` slots except the last one, which may be shorter when the
/// pool's limit cuts it.
#[derive(Debug)]
pub(crate) struct IndexAlloc {
    shift: u32,
    /// Slots that exist.
    allocated: u32,
    /// Most slots allowed.
    max: u32,
    /// Handed out, per slot.
    used: Vec<bool>,
    /// Free slots; the last one is handed out next. Its capacity is kept at
    /// `allocated`, so `release` never allocates.
    free: Vec<u32>,
}

impl IndexAlloc {
    /// `per_chunk` is rounded up to a power of two (at least 1); `max` is
    /// capped at `u32::MAX` slots.
    pub(crate) fn new(per_chunk: usize, max: usize) -> IndexAlloc {
        let per_chunk = per_chunk.clamp(1, 1 << 31).next_power_of_two();
        IndexAlloc {
            shift: per_chunk.trailing_zeros(),
            allocated: 0,
            max: u32::try_from(max).unwrap_or(u32::MAX),
            used: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Slots per full chunk.
    pub(crate) fn per_chunk(&self) -> usize {
        1 << self.shift
    }

    /// Takes a free slot, if one exists (no growth).
    #[inline]
    pub(crate) fn pop(&mut self) -> Option<u32> {
        let idx = self.free.pop()?;
        self.used[idx as usize] = true;
        Some(idx)
    }

    /// Adds the next chunk's slots to the free list and returns how many;
    /// 0 at the limit. The caller adds a chunk of that many elements.
    pub(crate) fn grow(&mut self) -> usize {
        let n = (self.per_chunk() as u32).min(self.max - self.allocated);
        if n == 0 {
            return 0;
        }
        let first = self.allocated;
        self.allocated += n;
        self.used.resize(self.allocated as usize, false);
        self.free.reserve_exact(n as usize);
        // Reversed, so that the lowest index is handed out first.
        self.free.extend((first..first + n).rev());
        n as usize
    }

    /// Returns a handed-out slot; `false` (and nothing changes) if `idx` is
    /// not handed out.
    #[inline]
    pub(crate) fn release(&mut self, idx: u32) -> bool {
        match self.used.get_mut(idx as usize) {
            Some(u) if *u => {
                *u = false;
                self.free.push(idx);
                true
            }
            _ => false,
        }
    }

    /// Whether `idx` is handed out.
    #[inline]
    pub(crate) fn is_used(&self, idx: u32) -> bool {
        self.used.get(idx as usize).copied().unwrap_or(false)
    }

    /// Chunk and offset of `idx`.
    #[inline]
    pub(crate) fn locate(&self, idx: u32) -> (usize, usize) {
        (
            (idx >> self.shift) as usize,
            (idx & ((1 << self.shift) - 1)) as usize,
        )
    }

    /// Slots that exist.
    pub(crate) fn allocated(&self) -> usize {
        self.allocated as usize
    }

    /// Slots handed out.
    pub(crate) fn in_use(&self) -> usize {
        self.allocated as usize - self.free.len()
    }

    /// Most slots allowed.
    pub(crate) fn max(&self) -> usize {
        self.max as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_limit() {
        let mut a = IndexAlloc::new(3, 6);
        assert_eq!(a.per_chunk(), 4);
        assert_eq!(a.pop(), None);
        assert_eq!(a.grow(), 4);
        assert_eq!(a.grow(), 2);
        assert_eq!(a.grow(), 0);
        assert_eq!(a.allocated(), 6);
        let got: Vec<u32> = std::iter::from_fn(|| a.pop()).collect();
        // The newest chunk's slots come first, lowest index first.
        assert_eq!(got, [4, 5, 0, 1, 2, 3]);
        assert_eq!(a.in_use(), 6);
        assert_eq!(a.locate(5), (1, 1));
        assert!(a.release(4));
        assert!(!a.release(4), "double release");
        assert!(!a.release(99));
        assert!(!a.is_used(4) && a.is_used(5));
        assert_eq!(a.pop(), Some(4));
    }

    #[test]
    fn odd_sizes() {
        assert_eq!(IndexAlloc::new(0, 10).per_chunk(), 1);
        assert_eq!(IndexAlloc::new(usize::MAX, 10).per_chunk(), 1 << 31);
        assert_eq!(IndexAlloc::new(8, usize::MAX).max(), u32::MAX as usize);
        let mut a = IndexAlloc::new(8, 0);
        assert_eq!(a.grow(), 0);
    }
}

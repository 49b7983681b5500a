//! A table of entries addressed by index, with a generation per slot.
//!
//! Endpoints are named by their index alone ([`uct::EpId`]); sources pack
//! the low bits of the generation into their [`uct::SrcId`] so that a
//! reused slot gets a new id.
//!
//! The slots are in chunks of [`CHUNK`]: past the first (which grows like a
//! vector, so that a table of a few entries stays small), the table grows a
//! chunk at a time, allocated whole, with no copy of what it holds and
//! never more than one chunk of unused slots (a doubling vector of
//! thousands of connections would leave up to as many again, and the old
//! arrays as holes in the heap). A chunk keeps its generations apart from
//! its entries, so that a generation does not pad every entry to the
//! entry's alignment.

/// Slots per chunk.
const CHUNK: usize = 64;

/// Entries of type `T` in reusable slots.
#[derive(Debug)]
pub(crate) struct Slots<T> {
    /// Every chunk but the last is full.
    chunks: Vec<Chunk<T>>,
    free: Vec<u32>,
    len: usize,
}

/// Up to [`CHUNK`] slots: their entries and generations, index for index.
#[derive(Debug)]
struct Chunk<T> {
    vals: Vec<Option<T>>,
    gens: Vec<u32>,
}

impl<T> Chunk<T> {
    fn with_capacity(cap: usize) -> Chunk<T> {
        Chunk {
            vals: Vec::with_capacity(cap),
            gens: Vec::with_capacity(cap),
        }
    }

    fn len(&self) -> usize {
        self.vals.len()
    }
}

impl<T> Slots<T> {
    pub(crate) fn new() -> Slots<T> {
        Slots {
            chunks: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn entry(&self, idx: u32) -> Option<&Option<T>> {
        let i = idx as usize;
        self.chunks.get(i / CHUNK)?.vals.get(i % CHUNK)
    }

    /// The entry and the generation of slot `idx`.
    fn entry_mut(&mut self, idx: u32) -> Option<(&mut Option<T>, &mut u32)> {
        let i = idx as usize;
        let c = self.chunks.get_mut(i / CHUNK)?;
        Some((c.vals.get_mut(i % CHUNK)?, c.gens.get_mut(i % CHUNK)?))
    }

    /// Inserts `val`; returns its index and the slot's generation.
    pub(crate) fn insert(&mut self, val: T) -> (u32, u32) {
        self.len += 1;
        if let Some(idx) = self.free.pop() {
            if let Some((e, gen)) = self.entry_mut(idx) {
                *e = Some(val);
                return (idx, *gen);
            }
        }
        if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
            let cap = if self.chunks.is_empty() { 0 } else { CHUNK };
            self.chunks.push(Chunk::with_capacity(cap));
        }
        let full = (self.chunks.len() - 1) * CHUNK;
        let Some(last) = self.chunks.last_mut() else {
            // Cannot happen: a chunk was just made if there was none.
            return (0, 0);
        };
        last.vals.push(Some(val));
        last.gens.push(0);
        ((full + last.len() - 1) as u32, 0)
    }

    pub(crate) fn get(&self, idx: u32) -> Option<&T> {
        self.entry(idx)?.as_ref()
    }

    pub(crate) fn get_mut(&mut self, idx: u32) -> Option<&mut T> {
        self.entry_mut(idx)?.0.as_mut()
    }

    /// Removes an entry; the slot's generation moves on.
    pub(crate) fn remove(&mut self, idx: u32) -> Option<T> {
        let (e, gen) = self.entry_mut(idx)?;
        let val = e.take()?;
        *gen = gen.wrapping_add(1);
        self.free.push(idx);
        self.len -= 1;
        Some(val)
    }

    /// Indices of used slots, in order.
    pub(crate) fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.chunks
            .iter()
            .flat_map(|c| c.vals.iter())
            .enumerate()
            .filter(|(_, e)| e.is_some())
            .map(|(i, _)| i as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuse_bumps_generation() {
        let mut s = Slots::new();
        let (a, ga) = s.insert("a");
        let (b, _) = s.insert("b");
        assert_eq!(s.len(), 2);
        assert_eq!(s.remove(a), Some("a"));
        assert_eq!(s.remove(a), None);
        assert_eq!(s.get(a), None);
        let (c, gc) = s.insert("c");
        assert_eq!(c, a);
        assert_ne!(gc, ga);
        assert_eq!(s.get(c), Some(&"c"));
        *s.get_mut(b).unwrap() = "B";
        assert_eq!(s.indices().collect::<Vec<_>>(), vec![a, b]);
        assert_eq!(s.get(b), Some(&"B"));
        assert_eq!(s.get(99), None);
    }

    #[test]
    fn slots_span_chunks() {
        let mut s = Slots::new();
        let n = 3 * CHUNK + 5;
        for k in 0..n {
            assert_eq!(s.insert(k), (k as u32, 0));
        }
        assert_eq!(s.chunks.len(), 4);
        for k in 0..n {
            assert_eq!(s.get(k as u32), Some(&k));
        }
        assert_eq!(s.remove(CHUNK as u32), Some(CHUNK));
        assert_eq!(s.indices().count(), n - 1);
        assert!(s.indices().all(|i| i != CHUNK as u32));
        // The freed slot is reused, with a new generation; no new chunk.
        assert_eq!(s.insert(7), (CHUNK as u32, 1));
        assert_eq!(s.chunks.len(), 4);
        assert_eq!(s.get(n as u32), None);
        assert_eq!(s.get(u32::MAX), None);
    }
}

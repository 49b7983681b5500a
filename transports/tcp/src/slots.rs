//! A table of entries addressed by index, with a generation per slot.
//!
//! Endpoints are named by their index alone ([`uct::EpId`]); sources pack
//! the low bits of the generation into their [`uct::SrcId`] so that a
//! reused slot gets a new id.

/// Entries of type `T` in reusable slots.
#[derive(Debug)]
pub(crate) struct Slots<T> {
    entries: Vec<Entry<T>>,
    free: Vec<u32>,
    len: usize,
}

#[derive(Debug)]
struct Entry<T> {
    gen: u32,
    val: Option<T>,
}

impl<T> Slots<T> {
    pub(crate) fn new() -> Slots<T> {
        Slots {
            entries: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Inserts `val`; returns its index and the slot's generation.
    pub(crate) fn insert(&mut self, val: T) -> (u32, u32) {
        self.len += 1;
        if let Some(idx) = self.free.pop() {
            let e = &mut self.entries[idx as usize];
            e.val = Some(val);
            return (idx, e.gen);
        }
        let idx = self.entries.len() as u32;
        self.entries.push(Entry {
            gen: 0,
            val: Some(val),
        });
        (idx, 0)
    }

    pub(crate) fn get(&self, idx: u32) -> Option<&T> {
        self.entries.get(idx as usize)?.val.as_ref()
    }

    pub(crate) fn get_mut(&mut self, idx: u32) -> Option<&mut T> {
        self.entries.get_mut(idx as usize)?.val.as_mut()
    }

    /// Removes an entry; the slot's generation moves on.
    pub(crate) fn remove(&mut self, idx: u32) -> Option<T> {
        let e = self.entries.get_mut(idx as usize)?;
        let val = e.val.take()?;
        e.gen = e.gen.wrapping_add(1);
        self.free.push(idx);
        self.len -= 1;
        Some(val)
    }

    /// Indices of used slots, in order.
    pub(crate) fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.val.is_some())
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
}

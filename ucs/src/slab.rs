//! A slab of entries named by generational ids.
//!
//! An id is an index plus a generation. Removing an entry bumps the
//! generation of its slot, so a stale id — from a completion that raced with
//! a cancel, or from a peer on the wire — finds nothing instead of someone
//! else's entry.

/// A generational id: 32-bit slot index and 32-bit generation.
///
/// Aligned to 8 bytes so that it moves as one machine word: an
/// `Option<SlabId>` is then two words instead of 12 bytes, which the
/// compiler otherwise assembles through the stack with partial stores
/// (store-forwarding stalls on the tag matcher's hot path).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(C, align(8))]
pub struct SlabId {
    index: u32,
    gen: u32,
}

impl SlabId {
    /// Packs the id into 64 bits (index low, generation high), e.g. for the
    /// wire or a transport token.
    pub fn to_u64(self) -> u64 {
        u64::from(self.index) | (u64::from(self.gen) << 32)
    }

    /// Unpacks an id made by [`SlabId::to_u64`]. Any value is accepted; a
    /// forged one simply finds no entry.
    pub fn from_u64(v: u64) -> SlabId {
        SlabId {
            index: v as u32,
            gen: (v >> 32) as u32,
        }
    }

    /// The slot index.
    pub fn index(self) -> u32 {
        self.index
    }
}

#[derive(Debug)]
enum Slot<T> {
    Used(T),
    Free { next: u32 },
}

#[derive(Debug)]
struct Entry<T> {
    gen: u32,
    slot: Slot<T>,
}

const NIL: u32 = u32::MAX;

/// Entries of type `T` in reusable slots.
#[derive(Debug)]
pub struct Slab<T> {
    entries: Vec<Entry<T>>,
    free: u32,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab::new()
    }
}

impl<T> Slab<T> {
    /// An empty slab.
    pub fn new() -> Slab<T> {
        Slab {
            entries: Vec::new(),
            free: NIL,
            len: 0,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Inserts `value` and returns its id. Reuses a free slot if any.
    pub fn insert(&mut self, value: T) -> SlabId {
        self.insert_with(|_| value)
    }

    /// Inserts the value `make` builds, given the id it will have. Inlined
    /// with `make`, the value is built in its slot rather than moved there
    /// (what matters for large entries on a hot path).
    #[inline(always)]
    pub fn insert_with(&mut self, make: impl FnOnce(SlabId) -> T) -> SlabId {
        let index = if self.free != NIL {
            let index = self.free;
            if let Slot::Free { next } = self.entries[index as usize].slot {
                self.free = next;
            }
            index
        } else {
            self.entries.push(Entry {
                gen: 0,
                slot: Slot::Free { next: NIL },
            });
            (self.entries.len() - 1) as u32
        };
        let e = &mut self.entries[index as usize];
        let id = SlabId { index, gen: e.gen };
        e.slot = Slot::Used(make(id));
        self.len += 1;
        id
    }

    /// The entry named by `id`, if it is still there.
    pub fn get(&self, id: SlabId) -> Option<&T> {
        match self.entries.get(id.index as usize) {
            Some(Entry {
                gen,
                slot: Slot::Used(v),
            }) if *gen == id.gen => Some(v),
            _ => None,
        }
    }

    /// The entry named by `id`, mutably, if it is still there.
    pub fn get_mut(&mut self, id: SlabId) -> Option<&mut T> {
        match self.entries.get_mut(id.index as usize) {
            Some(Entry {
                gen,
                slot: Slot::Used(v),
            }) if *gen == id.gen => Some(v),
            _ => None,
        }
    }

    /// Removes and returns the entry named by `id`, if it is still there.
    pub fn remove(&mut self, id: SlabId) -> Option<T> {
        let e = self.entries.get_mut(id.index as usize)?;
        if e.gen != id.gen || matches!(e.slot, Slot::Free { .. }) {
            return None;
        }
        let old = std::mem::replace(&mut e.slot, Slot::Free { next: self.free });
        e.gen = e.gen.wrapping_add(1);
        self.free = id.index;
        self.len -= 1;
        match old {
            Slot::Used(v) => Some(v),
            Slot::Free { .. } => None,
        }
    }

    /// Runs `f` on the entry named by `id`; when it returns `Some`, the
    /// entry is removed (dropped in its slot, not moved out) and that value
    /// returned. `None` if the entry is not there or `f` keeps it.
    #[inline]
    pub fn take_map<R>(&mut self, id: SlabId, f: impl FnOnce(&mut T) -> Option<R>) -> Option<R> {
        self.take_map_forget(id, f, |_| false)
    }

    /// As [`Slab::take_map`], except that an entry for which `owns_nothing`
    /// holds once `f` ran is forgotten rather than dropped: no drop code
    /// runs for it. Only for entries whose drop would do nothing; whatever
    /// such an entry did own would leak (never unsound, only wasteful).
    #[inline(always)]
    pub fn take_map_forget<R>(
        &mut self,
        id: SlabId,
        f: impl FnOnce(&mut T) -> Option<R>,
        owns_nothing: impl FnOnce(&T) -> bool,
    ) -> Option<R> {
        let e = self.entries.get_mut(id.index as usize)?;
        if e.gen != id.gen {
            return None;
        }
        let Slot::Used(v) = &mut e.slot else {
            return None;
        };
        let out = f(v)?;
        let free = Slot::Free { next: self.free };
        if owns_nothing(v) {
            // SAFETY: `e.slot` is a valid, initialised place of this type;
            // overwriting it without running the old value's drop forgets
            // that value, which is always sound (at worst a leak).
            unsafe { std::ptr::write(&mut e.slot, free) };
        } else {
            e.slot = free;
        }
        e.gen = e.gen.wrapping_add(1);
        self.free = id.index;
        self.len -= 1;
        Some(out)
    }

    /// Ids and entries, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (SlabId, &T)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match &e.slot {
                Slot::Used(v) => Some((
                    SlabId {
                        index: i as u32,
                        gen: e.gen,
                    },
                    v,
                )),
                Slot::Free { .. } => None,
            })
    }

    /// Ids of all entries, in slot order.
    pub fn ids(&self) -> Vec<SlabId> {
        self.iter().map(|(id, _)| id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_ids_find_nothing() {
        let mut s = Slab::new();
        let a = s.insert("a");
        let b = s.insert("b");
        assert_eq!(s.remove(a), Some("a"));
        assert_eq!(s.get(a), None);
        let c = s.insert("c");
        assert_eq!(c.index(), a.index(), "slot is reused");
        assert_ne!(c, a, "with a new generation");
        assert_eq!(s.get(a), None);
        assert_eq!(s.remove(a), None);
        assert_eq!(s.get(c), Some(&"c"));
        assert_eq!(s.get(b), Some(&"b"));
        assert_eq!(s.len(), 2);
        assert_eq!(SlabId::from_u64(c.to_u64()), c);
        assert_eq!(s.get(SlabId::from_u64(u64::MAX)), None);
        let ids: Vec<_> = s.iter().map(|(_, v)| *v).collect();
        assert_eq!(ids, vec!["c", "b"]);
    }

    #[test]
    fn take_map_forget_skips_the_drop_only_when_told() {
        use std::cell::Cell;
        /// Counts its drops (and owns no memory, so forgetting it leaks
        /// nothing).
        struct Noisy<'a>(&'a Cell<u32>);
        impl Drop for Noisy<'_> {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
            }
        }
        let drops = Cell::new(0);
        let mut s = Slab::new();
        let a = s.insert(Some(Noisy(&drops)));
        let b = s.insert(Some(Noisy(&drops)));
        let c = s.insert(Some(Noisy(&drops)));
        // Kept when `f` says None, whatever `owns_nothing` would say.
        assert!(s.take_map_forget(a, |_| None::<()>, |_| true).is_none());
        assert_eq!((s.len(), drops.get()), (3, 0));
        // Dropped in its slot.
        assert_eq!(s.take_map_forget(a, |_| Some(1), |_| false), Some(1));
        assert_eq!(drops.get(), 1);
        // Emptied by `f` (the value dropped there), then forgotten.
        assert_eq!(
            s.take_map_forget(b, |v| v.take().map(drop), Option::is_none),
            Some(())
        );
        assert_eq!(drops.get(), 2);
        // Forgotten while still holding a value: its drop never runs.
        assert_eq!(s.take_map_forget(c, |_| Some(()), |_| true), Some(()));
        assert_eq!(drops.get(), 2);
        assert!(s.get(b).is_none() && s.get(c).is_none());
        assert_eq!(s.len(), 0);
        let d = s.insert(None);
        assert!(matches!(s.get(d), Some(None)), "freed slots are reused");
        assert!(
            s.take_map_forget(b, |_| Some(()), |_| true).is_none(),
            "stale id"
        );
    }

    #[test]
    fn insert_with_sees_its_id_and_take_map_removes_on_some() {
        let mut s = Slab::new();
        let a = s.insert_with(|id| (id, String::from("a")));
        assert_eq!(s.get(a).map(|v| v.0), Some(a));
        assert_eq!(s.take_map(a, |_| None::<()>), None, "kept");
        assert_eq!(s.len(), 1);
        let got = s.take_map(a, |v| Some(std::mem::take(&mut v.1)));
        assert_eq!(got.as_deref(), Some("a"));
        assert_eq!(s.len(), 0);
        assert!(s.get(a).is_none());
        assert_eq!(s.take_map(a, |_| Some(())), None, "stale id");
        let b = s.insert_with(|id| (id, String::from("b")));
        assert_eq!(b.index(), a.index());
        assert_ne!(b, a);
    }
}

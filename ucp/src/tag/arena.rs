//! Slots named by index and generation, and intrusive doubly linked lists
//! threaded through them by index.
//!
//! Every slot keeps its list metadata `M` (tag, links) even while free, so
//! walking a list only reads plain fields; the payload `T` is an `Option`
//! that is taken out on removal. Links are `u32` slot indices with [`NIL`]
//! as the end marker. A linked index always names a live slot: lists are
//! only changed by [`List::push_back`] and [`List::unlink`], and the owner
//! unlinks a slot before it calls [`Arena::remove`].

/// End of a list / no slot.
pub(super) const NIL: u32 = u32::MAX;

/// A slot's position in one list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Link {
    pub(super) prev: u32,
    pub(super) next: u32,
}

impl Link {
    /// Not in any list.
    pub(super) const NONE: Link = Link {
        prev: NIL,
        next: NIL,
    };
}

/// Head and tail of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct List {
    pub(super) first: u32,
    pub(super) last: u32,
}

impl List {
    /// The empty list.
    pub(super) const EMPTY: List = List {
        first: NIL,
        last: NIL,
    };

    /// Whether the list has no slot.
    pub(super) fn is_empty(&self) -> bool {
        self.first == NIL
    }

    /// Appends slot `i`, which must be live and in no list of this kind.
    #[inline]
    pub(super) fn push_back<M, T>(
        &mut self,
        arena: &mut Arena<M, T>,
        i: u32,
        link: impl Fn(&mut M) -> &mut Link,
    ) {
        let last = self.last;
        *link(arena.meta_mut(i)) = Link {
            prev: last,
            next: NIL,
        };
        if last == NIL {
            self.first = i;
        } else {
            link(arena.meta_mut(last)).next = i;
        }
        self.last = i;
    }

    /// Removes slot `i`, which must be in this list.
    #[inline]
    pub(super) fn unlink<M, T>(
        &mut self,
        arena: &mut Arena<M, T>,
        i: u32,
        link: impl Fn(&mut M) -> &mut Link,
    ) {
        let Link { prev, next } = std::mem::replace(link(arena.meta_mut(i)), Link::NONE);
        if prev == NIL {
            self.first = next;
        } else {
            link(arena.meta_mut(prev)).next = next;
        }
        if next == NIL {
            self.last = prev;
        } else {
            link(arena.meta_mut(next)).prev = prev;
        }
    }
}

#[derive(Debug)]
struct Slot<M, T> {
    gen: u32,
    next_free: u32,
    meta: M,
    val: Option<T>,
}

/// Reusable slots holding list metadata `M` and a payload `T`.
#[derive(Debug)]
pub(super) struct Arena<M, T> {
    slots: Vec<Slot<M, T>>,
    free: u32,
    len: usize,
}

impl<M, T> Arena<M, T> {
    pub(super) fn new() -> Self {
        Arena {
            slots: Vec::new(),
            free: NIL,
            len: 0,
        }
    }

    /// Number of live slots.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Stores `meta` and `val` in a free slot; returns its index and
    /// generation.
    ///
    /// # Panics
    ///
    /// If `u32::MAX - 1` slots are live at once (memory runs out long
    /// before).
    #[inline]
    pub(super) fn insert(&mut self, meta: M, val: T) -> (u32, u32) {
        self.len += 1;
        if self.free != NIL {
            let i = self.free;
            let s = &mut self.slots[i as usize];
            self.free = s.next_free;
            s.next_free = NIL;
            s.meta = meta;
            s.val = Some(val);
            return (i, s.gen);
        }
        let i = self.slots.len();
        assert!(i < NIL as usize, "tag matcher: too many entries");
        self.slots.push(Slot {
            gen: 0,
            next_free: NIL,
            meta,
            val: Some(val),
        });
        (i as u32, 0)
    }

    /// The metadata of slot `i` (live or not).
    #[inline]
    pub(super) fn meta(&self, i: u32) -> &M {
        &self.slots[i as usize].meta
    }

    #[inline]
    fn meta_mut(&mut self, i: u32) -> &mut M {
        &mut self.slots[i as usize].meta
    }

    /// The current generation of slot `i`.
    #[inline]
    pub(super) fn gen(&self, i: u32) -> u32 {
        self.slots[i as usize].gen
    }

    /// Whether `(i, gen)` names a live slot.
    #[inline]
    pub(super) fn is_live(&self, i: u32, gen: u32) -> bool {
        matches!(self.slots.get(i as usize), Some(s) if s.gen == gen && s.val.is_some())
    }

    /// The metadata and payload of slot `(i, gen)`, if it is live.
    pub(super) fn get(&self, i: u32, gen: u32) -> Option<(&M, &T)> {
        let s = self.slots.get(i as usize)?;
        if s.gen != gen {
            return None;
        }
        Some((&s.meta, s.val.as_ref()?))
    }

    /// The payload of slot `(i, gen)`, mutably, if it is live.
    pub(super) fn get_mut(&mut self, i: u32, gen: u32) -> Option<&mut T> {
        let s = self.slots.get_mut(i as usize)?;
        if s.gen != gen {
            return None;
        }
        s.val.as_mut()
    }

    /// The payload of live slot `i`, mutably.
    pub(super) fn val_mut(&mut self, i: u32) -> Option<&mut T> {
        self.slots[i as usize].val.as_mut()
    }

    /// Frees slot `i` and returns its payload; the slot's generation moves
    /// on so that old ids find nothing. The caller has unlinked it.
    #[inline]
    pub(super) fn remove(&mut self, i: u32) -> Option<T> {
        let s = &mut self.slots[i as usize];
        let val = s.val.take()?;
        s.gen = s.gen.wrapping_add(1);
        s.next_free = self.free;
        self.free = i;
        self.len -= 1;
        Some(val)
    }

    /// As [`Arena::remove`] for a `Copy` payload: the value is read and the
    /// slot cleared in place. (`Option::take` builds the `None` in a
    /// temporary and copies it over, a store-forwarding stall on the tag
    /// matcher's hottest line.)
    #[inline]
    pub(super) fn remove_copy(&mut self, i: u32) -> Option<T>
    where
        T: Copy,
    {
        let s = &mut self.slots[i as usize];
        let val = s.val?;
        s.val = None;
        s.gen = s.gen.wrapping_add(1);
        s.next_free = self.free;
        self.free = i;
        self.len -= 1;
        Some(val)
    }

    /// Indices of live slots, in slot order.
    pub(super) fn live(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.val.is_some())
            .map(|(i, _)| i as u32)
    }
}

/// Maps a tag to one of a power-of-two number of buckets (Fibonacci
/// hashing: one multiply, the top bits of the product depend on every bit
/// of the tag, so source ranks in high tag bits spread as well as user
/// tags in low bits).
#[derive(Debug, Clone, Copy)]
pub(super) struct BucketHash {
    shift: u32,
    mask: u64,
}

impl BucketHash {
    /// A hash onto `1 << bits` buckets, `bits <= 16`.
    pub(super) fn new(bits: u32) -> Self {
        debug_assert!(bits <= 16);
        BucketHash {
            shift: 64 - bits.max(1),
            mask: (1u64 << bits) - 1,
        }
    }

    /// Number of buckets.
    pub(super) fn buckets(self) -> usize {
        self.mask as usize + 1
    }

    /// The bucket of `tag`.
    #[inline]
    pub(super) fn index(self, tag: u64) -> usize {
        ((tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) & self.mask) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(m: &mut Link) -> &mut Link {
        m
    }

    fn collect(l: &List, a: &Arena<Link, char>) -> Vec<char> {
        let mut v = Vec::new();
        let mut i = l.first;
        while i != NIL {
            v.push(*a.slots[i as usize].val.as_ref().unwrap());
            i = a.meta(i).next;
        }
        v
    }

    #[test]
    fn list_push_unlink_reuse() {
        let mut a = Arena::new();
        let mut l = List::EMPTY;
        let ids: Vec<_> = "abcd".chars().map(|c| a.insert(Link::NONE, c)).collect();
        for &(i, _) in &ids {
            l.push_back(&mut a, i, link);
        }
        assert_eq!(collect(&l, &a), vec!['a', 'b', 'c', 'd']);
        l.unlink(&mut a, ids[1].0, link);
        assert_eq!(a.remove(ids[1].0), Some('b'));
        assert_eq!(a.remove(ids[1].0), None, "double remove finds nothing");
        l.unlink(&mut a, ids[3].0, link);
        a.remove(ids[3].0);
        l.unlink(&mut a, ids[0].0, link);
        a.remove(ids[0].0);
        assert_eq!(collect(&l, &a), vec!['c']);
        assert_eq!(l.first, l.last);
        assert!(!a.is_live(ids[0].0, ids[0].1));
        let (ni, ng) = a.insert(Link::NONE, 'e');
        assert_eq!(ni, ids[0].0, "last freed slot is reused first");
        assert_ne!(ng, ids[0].1);
        assert!(a.get(ids[0].0, ids[0].1).is_none());
        assert_eq!(a.get(ni, ng).map(|(_, v)| *v), Some('e'));
        l.push_back(&mut a, ni, link);
        assert_eq!(collect(&l, &a), vec!['c', 'e']);
        l.unlink(&mut a, ids[2].0, link);
        l.unlink(&mut a, ni, link);
        assert!(l.is_empty());
        assert_eq!(a.len(), 2);
        assert_eq!(a.live().count(), 2);
    }

    #[test]
    fn hash_in_range_and_spreads_high_bits() {
        let h = BucketHash::new(10);
        assert_eq!(h.buckets(), 1024);
        let mut seen = std::collections::HashSet::new();
        for r in 0..64u64 {
            let b = h.index(r << 44);
            assert!(b < 1024);
            seen.insert(b);
        }
        assert!(seen.len() > 32, "tags differing in high bits spread");
        let one = BucketHash::new(0);
        assert_eq!(one.buckets(), 1);
        assert_eq!(one.index(u64::MAX), 0);
        assert_eq!(one.index(12345), 0);
    }
}

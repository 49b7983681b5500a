//! An intrusive least-recently-used list over slab entries.
//!
//! The links live in the entries themselves, so moving an entry to the back
//! or taking it out is O(1) and never allocates.

use crate::slab::{Slab, SlabId};

/// An entry's place in the list.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Links {
    prev: Option<SlabId>,
    next: Option<SlabId>,
    linked: bool,
}

/// An entry that can be on an [`Lru`].
pub(super) trait Linked {
    fn links(&mut self) -> &mut Links;
}

/// The list: front is the least recently used entry, back the most.
#[derive(Debug, Default)]
pub(super) struct Lru {
    head: Option<SlabId>,
    tail: Option<SlabId>,
    len: usize,
}

fn links<T: Linked>(slab: &mut Slab<T>, id: SlabId) -> &mut Links {
    slab.get_mut(id)
        .expect("LRU entries are in the slab")
        .links()
}

impl Lru {
    /// Entries on the list.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Appends `id`, which must not be on the list, as the most recent.
    pub(super) fn push_back<T: Linked>(&mut self, slab: &mut Slab<T>, id: SlabId) {
        let l = links(slab, id);
        debug_assert!(!l.linked, "entry already on the LRU list");
        *l = Links {
            prev: self.tail,
            next: None,
            linked: true,
        };
        match self.tail {
            Some(t) => links(slab, t).next = Some(id),
            None => self.head = Some(id),
        }
        self.tail = Some(id);
        self.len += 1;
    }

    /// Takes `id` off the list; `false` if it was not on it.
    pub(super) fn remove<T: Linked>(&mut self, slab: &mut Slab<T>, id: SlabId) -> bool {
        let l = links(slab, id);
        if !l.linked {
            return false;
        }
        let Links { prev, next, .. } = std::mem::take(l);
        match prev {
            Some(p) => links(slab, p).next = next,
            None => self.head = next,
        }
        match next {
            Some(n) => links(slab, n).prev = prev,
            None => self.tail = prev,
        }
        self.len -= 1;
        true
    }

    /// Takes the least recent entry off the list.
    pub(super) fn pop_front<T: Linked>(&mut self, slab: &mut Slab<T>) -> Option<SlabId> {
        let id = self.head?;
        self.remove(slab, id);
        Some(id)
    }

    /// Ids from least to most recent.
    #[cfg(test)]
    pub(super) fn ids<T: Linked>(&self, slab: &mut Slab<T>) -> Vec<SlabId> {
        let mut out = Vec::with_capacity(self.len);
        let mut cur = self.head;
        while let Some(id) = cur {
            out.push(id);
            cur = links(slab, id).next;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct E(Links);

    impl Linked for E {
        fn links(&mut self) -> &mut Links {
            &mut self.0
        }
    }

    #[test]
    fn order_remove_and_pop() {
        let mut slab = Slab::new();
        let ids: Vec<_> = (0..4).map(|_| slab.insert(E::default())).collect();
        let mut lru = Lru::default();
        for &id in &ids {
            lru.push_back(&mut slab, id);
        }
        assert_eq!(lru.ids(&mut slab), ids);
        assert!(lru.remove(&mut slab, ids[2]), "middle");
        assert!(!lru.remove(&mut slab, ids[2]), "twice");
        assert!(lru.remove(&mut slab, ids[3]), "tail");
        assert!(lru.remove(&mut slab, ids[0]), "head");
        lru.push_back(&mut slab, ids[0]);
        assert_eq!(lru.ids(&mut slab), [ids[1], ids[0]]);
        assert_eq!(lru.len(), 2);
        assert_eq!(lru.pop_front(&mut slab), Some(ids[1]));
        assert_eq!(lru.pop_front(&mut slab), Some(ids[0]));
        assert_eq!(lru.pop_front(&mut slab), None);
        assert_eq!(lru.len(), 0);
        lru.push_back(&mut slab, ids[3]);
        assert_eq!(lru.ids(&mut slab), [ids[3]]);
    }
}

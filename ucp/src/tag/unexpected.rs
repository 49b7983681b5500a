//! The unexpected queue: messages that arrived before a matching receive.
//!
//! Each message is linked twice: into its tag's bucket and into one global
//! list, both in arrival order. A full-mask receive walks only the bucket;
//! a wildcard receive walks the global list.

use super::arena::{Arena, BucketHash, Link, List, NIL};

/// Where an unexpected message lives and its tag.
#[derive(Debug)]
pub(super) struct MsgMeta {
    tag: u64,
    bucket: Link,
    all: Link,
}

fn bucket_link(m: &mut MsgMeta) -> &mut Link {
    &mut m.bucket
}

fn all_link(m: &mut MsgMeta) -> &mut Link {
    &mut m.all
}

/// Unexpected messages with payloads `U`.
#[derive(Debug)]
pub(super) struct Unexpected<U> {
    arena: Arena<MsgMeta, U>,
    buckets: Box<[List]>,
    all: List,
    hash: BucketHash,
}

impl<U> Unexpected<U> {
    pub(super) fn new(hash: BucketHash) -> Self {
        Unexpected {
            arena: Arena::new(),
            buckets: vec![List::EMPTY; hash.buckets()].into_boxed_slice(),
            all: List::EMPTY,
            hash,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.arena.len()
    }

    /// Queues a message behind all earlier ones; returns its slot and
    /// generation.
    #[inline]
    pub(super) fn push(&mut self, tag: u64, msg: U) -> (u32, u32) {
        let meta = MsgMeta {
            tag,
            bucket: Link::NONE,
            all: Link::NONE,
        };
        let (i, gen) = self.arena.insert(meta, msg);
        self.buckets[self.hash.index(tag)].push_back(&mut self.arena, i, bucket_link);
        self.all.push_back(&mut self.arena, i, all_link);
        (i, gen)
    }

    /// The slot of the oldest message matching `(tag, mask)`.
    #[inline]
    pub(super) fn find(&self, tag: u64, mask: u64) -> Option<u32> {
        if mask == u64::MAX {
            let mut i = self.buckets[self.hash.index(tag)].first;
            while i != NIL {
                let m = self.arena.meta(i);
                if m.tag == tag {
                    return Some(i);
                }
                i = m.bucket.next;
            }
        } else {
            let mut i = self.all.first;
            while i != NIL {
                let m = self.arena.meta(i);
                if (m.tag ^ tag) & mask == 0 {
                    return Some(i);
                }
                i = m.all.next;
            }
        }
        None
    }

    /// The tag of slot `i`.
    pub(super) fn tag(&self, i: u32) -> u64 {
        self.arena.meta(i).tag
    }

    /// The generation of slot `i`.
    pub(super) fn gen(&self, i: u32) -> u32 {
        self.arena.gen(i)
    }

    /// Unlinks and frees live slot `i`; returns its payload.
    #[inline]
    pub(super) fn remove(&mut self, i: u32) -> Option<U> {
        let b = self.hash.index(self.arena.meta(i).tag);
        self.buckets[b].unlink(&mut self.arena, i, bucket_link);
        self.all.unlink(&mut self.arena, i, all_link);
        self.arena.remove(i)
    }

    /// The tag and payload of message `(i, gen)`, if still queued.
    pub(super) fn get(&self, i: u32, gen: u32) -> Option<(u64, &U)> {
        self.arena.get(i, gen).map(|(m, u)| (m.tag, u))
    }

    /// The payload of message `(i, gen)`, mutably, if still queued.
    pub(super) fn get_mut(&mut self, i: u32, gen: u32) -> Option<&mut U> {
        self.arena.get_mut(i, gen)
    }

    /// Removes message `(i, gen)` if still queued.
    pub(super) fn take(&mut self, i: u32, gen: u32) -> Option<U> {
        if !self.arena.is_live(i, gen) {
            return None;
        }
        self.remove(i)
    }

    /// Keeps only the messages for which `keep(tag, payload)` is true,
    /// visiting them in arrival order.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(u64, &mut U) -> bool) {
        let mut i = self.all.first;
        while i != NIL {
            let next = self.arena.meta(i).all.next;
            let tag = self.arena.meta(i).tag;
            let kept = match self.arena.val_mut(i) {
                Some(u) => keep(tag, u),
                None => true,
            };
            if !kept {
                self.remove(i);
            }
            i = next;
        }
    }

    /// Removes every message; returns them with their tags in arrival
    /// order.
    pub(super) fn drain(&mut self) -> Vec<(u64, U)> {
        let mut out = Vec::with_capacity(self.len());
        while self.all.first != NIL {
            let i = self.all.first;
            let tag = self.tag(i);
            out.extend(self.remove(i).map(|u| (tag, u)));
        }
        out
    }
}

//! The expected queue: posted receives waiting for a message.
//!
//! Receives with a full mask sit in one bucket per tag hash; receives with
//! any wildcard bit sit in one wildcard list. Both kinds of list are in post
//! order, and every receive carries a sequence number from one counter, so
//! "the oldest matching receive" is the older of the first match in the
//! tag's bucket and the first match in the wildcard list.

use super::arena::{Arena, BucketHash, Link, List, NIL};

/// Where a posted receive lives and what it matches.
#[derive(Debug)]
pub(super) struct RecvMeta {
    tag: u64,
    mask: u64,
    seq: u64,
    link: Link,
}

fn link(m: &mut RecvMeta) -> &mut Link {
    &mut m.link
}

/// Posted receives with handles `R`.
#[derive(Debug)]
pub(super) struct Expected<R> {
    arena: Arena<RecvMeta, R>,
    buckets: Box<[List]>,
    wild: List,
    hash: BucketHash,
    next_seq: u64,
}

impl<R: Copy> Expected<R> {
    pub(super) fn new(hash: BucketHash) -> Self {
        Expected {
            arena: Arena::new(),
            buckets: vec![List::EMPTY; hash.buckets()].into_boxed_slice(),
            wild: List::EMPTY,
            hash,
            next_seq: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.arena.len()
    }

    /// Queues a receive behind all earlier ones; returns its slot and
    /// generation.
    #[inline(always)]
    pub(super) fn post(&mut self, tag: u64, mask: u64, req: R) -> (u32, u32) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let meta = RecvMeta {
            tag,
            mask,
            seq,
            link: Link::NONE,
        };
        let (i, gen) = self.arena.insert(meta, req);
        let list = if mask == u64::MAX {
            &mut self.buckets[self.hash.index(tag)]
        } else {
            &mut self.wild
        };
        list.push_back(&mut self.arena, i, link);
        (i, gen)
    }

    /// Removes and returns the oldest receive matching a message tagged
    /// `tag`.
    #[inline(always)]
    pub(super) fn arrive(&mut self, tag: u64) -> Option<R> {
        let bucket = self.hash.index(tag);
        let mut best = self.buckets[bucket].first;
        while best != NIL {
            let m = self.arena.meta(best);
            if m.tag == tag {
                break;
            }
            best = m.link.next;
        }
        let mut in_wild = false;
        if !self.wild.is_empty() {
            // Only a wildcard receive older than the exact match can win.
            let limit = if best == NIL {
                u64::MAX
            } else {
                self.arena.meta(best).seq
            };
            let mut w = self.wild.first;
            while w != NIL {
                let m = self.arena.meta(w);
                if m.seq > limit {
                    break;
                }
                if (m.tag ^ tag) & m.mask == 0 {
                    best = w;
                    in_wild = true;
                    break;
                }
                w = m.link.next;
            }
        }
        if best == NIL {
            return None;
        }
        if in_wild {
            self.wild.unlink(&mut self.arena, best, link);
        } else {
            self.buckets[bucket].unlink(&mut self.arena, best, link);
        }
        self.arena.remove_copy(best)
    }

    /// Removes the receive `(i, gen)` if it is still queued.
    pub(super) fn cancel(&mut self, i: u32, gen: u32) -> Option<R> {
        if !self.arena.is_live(i, gen) {
            return None;
        }
        self.unlink(i);
        self.arena.remove_copy(i)
    }

    fn unlink(&mut self, i: u32) {
        let m = self.arena.meta(i);
        if m.mask == u64::MAX {
            let b = self.hash.index(m.tag);
            self.buckets[b].unlink(&mut self.arena, i, link);
        } else {
            self.wild.unlink(&mut self.arena, i, link);
        }
    }

    /// Removes every receive; returns them in post order.
    pub(super) fn drain(&mut self) -> Vec<R> {
        let mut order: Vec<(u64, u32)> = self
            .arena
            .live()
            .map(|i| (self.arena.meta(i).seq, i))
            .collect();
        order.sort_unstable();
        let mut out = Vec::with_capacity(order.len());
        for (_, i) in order {
            self.unlink(i);
            out.extend(self.arena.remove_copy(i));
        }
        out
    }
}

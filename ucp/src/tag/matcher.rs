//! The tag matcher: MPI-ordered matching of posted receives and arrived
//! messages, with no I/O, clock or allocation per message once warm.
//!
//! A receive is posted with `(tag, mask)`; a message tagged `t` matches it
//! iff `(t ^ tag) & mask == 0` (bits outside `mask` are wildcards, so mask
//! `0` matches everything). Ordering follows MPI:
//!
//! 1. an arriving message takes the **oldest posted** receive that matches;
//! 2. a posted receive takes the **oldest unexpected** message that matches;
//! 3. hence, with arrival order equal to send order per sender, a sender's
//!    messages match in the order they were sent.
//!
//! How the queues are kept (the layout UCX's `tag_match` uses):
//!
//! * expected queue — full-mask receives in one FIFO per tag-hash bucket,
//!   wildcard receives in one FIFO; all share one sequence counter. An
//!   arrival scans only its bucket while no wildcard receive is posted,
//!   otherwise the oldest of the two first matches wins;
//! * unexpected queue — each message in its tag's bucket FIFO and in one
//!   global FIFO. A full-mask receive scans its bucket, a wildcard receive
//!   the global FIFO.
//!
//! Entries are slots of an arena linked into intrusive lists by index, so
//! cancel and take-from-the-middle are O(1). Ids ([`PostId`], [`UnexpId`])
//! carry a generation: a stale id finds nothing.
//!
//! The caller drives it: on a message, [`TagMatcher::arrive`]; if that
//! returns `None`, [`TagMatcher::push_unexpected`]. On a receive,
//! [`TagMatcher::post`].

use std::fmt;

use super::arena::BucketHash;
use super::expected::Expected;
use super::unexpected::Unexpected;

/// Default number of hash buckets per queue, as a power of two (1024).
const DEFAULT_BUCKET_BITS: u32 = 10;
/// Largest bucket count accepted by [`TagMatcher::with_buckets`], as a
/// power of two.
const MAX_BUCKET_BITS: u32 = 16;

/// Names a posted receive, e.g. to [`TagMatcher::cancel`] it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PostId {
    index: u32,
    gen: u32,
}

/// Names a queued unexpected message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UnexpId {
    index: u32,
    gen: u32,
}

macro_rules! id_u64 {
    ($t:ident) => {
        impl $t {
            /// Packs the id into 64 bits (index low, generation high).
            pub fn to_u64(self) -> u64 {
                u64::from(self.index) | (u64::from(self.gen) << 32)
            }

            /// Unpacks an id made by `to_u64`. Any value is accepted; a
            /// forged one finds nothing.
            pub fn from_u64(v: u64) -> Self {
                $t {
                    index: v as u32,
                    gen: (v >> 32) as u32,
                }
            }
        }
    };
}
id_u64!(PostId);
id_u64!(UnexpId);

/// What [`TagMatcher::post`] did with a receive.
#[derive(Debug, PartialEq, Eq)]
pub enum PostOutcome<R, U> {
    /// No unexpected message matched: the receive is queued.
    Queued(PostId),
    /// The oldest matching unexpected message was removed and is handed
    /// over; the receive was not queued and is handed back.
    Matched {
        /// The receive handle passed to `post`.
        req: R,
        /// The id the message had (now stale), e.g. to find state kept
        /// for its later fragments.
        id: UnexpId,
        /// The message's tag.
        tag: u64,
        /// The message.
        msg: U,
    },
}

/// Posted receives (handles `R`) and unexpected messages (payloads `U`),
/// matched by tag in MPI order. See the [module docs](self).
pub struct TagMatcher<R, U> {
    expected: Expected<R>,
    unexpected: Unexpected<U>,
}

impl<R: Copy, U> fmt::Debug for TagMatcher<R, U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TagMatcher")
            .field("expected", &self.expected_len())
            .field("unexpected", &self.unexpected_len())
            .finish()
    }
}

impl<R: Copy, U> Default for TagMatcher<R, U> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: Copy, U> TagMatcher<R, U> {
    /// An empty matcher with 1024 hash buckets per queue.
    pub fn new() -> Self {
        Self::with_bits(DEFAULT_BUCKET_BITS)
    }

    /// An empty matcher with `buckets` hash buckets per queue, rounded up
    /// to a power of two and capped at 65536. Fewer buckets save memory
    /// (16 bytes each) and cost longer scans when many distinct tags are
    /// queued; matching results never depend on it.
    pub fn with_buckets(buckets: usize) -> Self {
        let bits = buckets
            .max(1)
            .checked_next_power_of_two()
            .map_or(MAX_BUCKET_BITS, |n| n.trailing_zeros());
        Self::with_bits(bits.min(MAX_BUCKET_BITS))
    }

    fn with_bits(bits: u32) -> Self {
        let hash = BucketHash::new(bits);
        TagMatcher {
            expected: Expected::new(hash),
            unexpected: Unexpected::new(hash),
        }
    }

    /// Number of posted receives waiting.
    pub fn expected_len(&self) -> usize {
        self.expected.len()
    }

    /// Number of unexpected messages queued.
    pub fn unexpected_len(&self) -> usize {
        self.unexpected.len()
    }

    /// Posts a receive for `(tag, mask)`. If an unexpected message
    /// matches, the oldest such is removed and returned with `req`;
    /// otherwise the receive is queued behind all earlier receives.
    #[inline]
    pub fn post(&mut self, tag: u64, mask: u64, req: R) -> PostOutcome<R, U> {
        if let Some(i) = self.unexpected.find(tag, mask) {
            let id = UnexpId {
                index: i,
                gen: self.unexpected.gen(i),
            };
            let msg_tag = self.unexpected.tag(i);
            if let Some(msg) = self.unexpected.remove(i) {
                return PostOutcome::Matched {
                    req,
                    id,
                    tag: msg_tag,
                    msg,
                };
            }
        }
        let (index, gen) = self.expected.post(tag, mask, req);
        PostOutcome::Queued(PostId { index, gen })
    }

    /// Queues receive `req` as expected without looking at the unexpected
    /// messages: only for when there are none
    /// ([`unexpected_len`](Self::unexpected_len) is 0), where it is what
    /// [`post`](Self::post) does.
    #[inline]
    pub fn post_expected(&mut self, tag: u64, mask: u64, req: R) -> PostId {
        debug_assert_eq!(self.unexpected.len(), 0);
        let (index, gen) = self.expected.post(tag, mask, req);
        PostId { index, gen }
    }

    /// A message tagged `tag` arrived: removes and returns the oldest
    /// posted receive that matches it, or `None` (then queue the message
    /// with [`push_unexpected`](Self::push_unexpected)).
    #[inline]
    pub fn arrive(&mut self, tag: u64) -> Option<R> {
        self.expected.arrive(tag)
    }

    /// Queues an unexpected message behind all earlier ones. Call it after
    /// [`arrive`](Self::arrive) found no receive, or order breaks.
    #[inline]
    pub fn push_unexpected(&mut self, tag: u64, msg: U) -> UnexpId {
        let (index, gen) = self.unexpected.push(tag, msg);
        UnexpId { index, gen }
    }

    /// The oldest unexpected message matching `(tag, mask)`, with its id
    /// and tag, left in the queue.
    pub fn probe(&self, tag: u64, mask: u64) -> Option<(UnexpId, u64, &U)> {
        let i = self.unexpected.find(tag, mask)?;
        let gen = self.unexpected.gen(i);
        let (msg_tag, msg) = self.unexpected.get(i, gen)?;
        Some((UnexpId { index: i, gen }, msg_tag, msg))
    }

    /// The tag and payload of a queued unexpected message.
    pub fn unexpected(&self, id: UnexpId) -> Option<(u64, &U)> {
        self.unexpected.get(id.index, id.gen)
    }

    /// The payload of a queued unexpected message, mutably (e.g. to add
    /// fragments that arrive later).
    pub fn unexpected_mut(&mut self, id: UnexpId) -> Option<&mut U> {
        self.unexpected.get_mut(id.index, id.gen)
    }

    /// Removes a queued unexpected message (e.g. after a matching probe).
    pub fn take_unexpected(&mut self, id: UnexpId) -> Option<U> {
        self.unexpected.take(id.index, id.gen)
    }

    /// Removes a posted receive; `None` if it already matched or was
    /// cancelled.
    pub fn cancel(&mut self, id: PostId) -> Option<R> {
        self.expected.cancel(id.index, id.gen)
    }

    /// Keeps only the unexpected messages for which `keep(tag, msg)` is
    /// true (e.g. drops a failed sender's messages); visits them in
    /// arrival order, drops the others.
    pub fn retain_unexpected(&mut self, keep: impl FnMut(u64, &mut U) -> bool) {
        self.unexpected.retain(keep);
    }

    /// Removes all posted receives; returns them in post order (e.g. to
    /// complete them as cancelled at shutdown).
    pub fn drain_expected(&mut self) -> Vec<R> {
        self.expected.drain()
    }

    /// Removes all unexpected messages; returns them with their tags in
    /// arrival order.
    pub fn drain_unexpected(&mut self) -> Vec<(u64, U)> {
        self.unexpected.drain()
    }
}

#[cfg(test)]
mod tests;

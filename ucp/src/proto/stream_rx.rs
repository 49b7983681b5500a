//! The receiving half of an endpoint's stream (`stream.rs` has the
//! protocol): bytes kept by fragment, posted receives, and the offset
//! the next fragment must start at.

use crate::request::{Kind, Request, StreamRecvState};
use crate::ucs::slab::{Slab, SlabId};
use crate::ucs::PeerMisbehaved;
use std::collections::VecDeque;

/// The receiving half of an endpoint's stream.
#[derive(Debug, Default)]
pub(crate) struct StreamRx {
    /// Stream offset of the next byte to arrive.
    pub(crate) next: u64,
    /// Arrived bytes no receive has taken, by fragment; `head` bytes of
    /// the first are taken already.
    pub(crate) chunks: VecDeque<Vec<u8>>,
    head: usize,
    /// Posted receives, oldest first.
    pub(crate) recvs: VecDeque<SlabId>,
}

impl StreamRx {
    /// Takes fragment bytes at stream offset `off`: into posted receives,
    /// the rest kept. Returns the receives that are now complete.
    pub(crate) fn arrive(
        &mut self,
        reqs: &mut Slab<Request>,
        off: u64,
        mut bytes: &[u8],
        done: &mut Vec<SlabId>,
    ) -> Result<(), PeerMisbehaved> {
        if off != self.next {
            return Err(PeerMisbehaved::Invalid {
                what: "stream fragment",
                detail: format!("at stream offset {off} where {} was due", self.next),
            });
        }
        self.next = self.next.wrapping_add(bytes.len() as u64);
        while !bytes.is_empty() {
            let Some(&id) = self.recvs.front() else {
                self.chunks.push_back(bytes.to_vec());
                break;
            };
            let Some(Request {
                kind: Kind::StreamRecv(r),
                ..
            }) = reqs.get_mut(id)
            else {
                self.recvs.pop_front();
                continue;
            };
            let n = r.buf.write(r.filled, bytes);
            r.filled += n;
            bytes = &bytes[n..];
            if !r.wait_all || r.filled == r.buf.capacity() {
                self.recvs.pop_front();
                done.push(id);
            }
        }
        Ok(())
    }

    /// Copies kept bytes into `r`; whether it is then complete.
    pub(crate) fn fill(&mut self, r: &mut StreamRecvState) -> bool {
        while let Some(c) = self.chunks.front() {
            let n = r.buf.write(r.filled, &c[self.head..]);
            r.filled += n;
            self.head += n;
            if self.head == c.len() {
                self.chunks.pop_front();
                self.head = 0;
            }
            if r.filled == r.buf.capacity() {
                break;
            }
        }
        r.filled == r.buf.capacity() || (!r.wait_all && r.filled > 0)
    }

    /// The oldest kept fragment, whole (its taken bytes cut off).
    pub(crate) fn take_chunk(&mut self) -> Option<Vec<u8>> {
        let mut c = self.chunks.pop_front()?;
        c.drain(..std::mem::take(&mut self.head));
        Some(c)
    }

    /// Joins bytes that arrived under the endpoint's source before it was
    /// known; `self` is the endpoint's (empty unless it had a stream from
    /// another lane, which no sender does).
    pub(crate) fn adopt(
        &mut self,
        reqs: &mut Slab<Request>,
        early: StreamRx,
        done: &mut Vec<SlabId>,
    ) {
        let head = early.head;
        for (i, c) in early.chunks.iter().enumerate() {
            let from = if i == 0 { head } else { 0 };
            let off = self.next;
            // Offsets are this stream's own: the bytes always fit.
            let _ = self.arrive(reqs, off, &c[from..], done);
        }
        self.next = early.next;
    }
}

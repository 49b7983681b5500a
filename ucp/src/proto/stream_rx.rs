//! The receiving half of an endpoint's stream (`stream.rs` has the
//! protocol): bytes kept by fragment, posted receives, the offset the
//! next fragment must start at, and what waits behind a large send's data
//! being fetched (`stream_rndv.rs`).

use crate::request::{Kind, Request, StreamRecvState};
use crate::ucs::slab::{Slab, SlabId};
use crate::ucs::PeerMisbehaved;
use std::collections::VecDeque;

/// Buffers kept for fetching large sends' data into, per worker.
pub(crate) const STREAM_SPARE: usize = 4;

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
    /// From the first rendezvous send whose data is not in yet on, the
    /// stream in order: nothing behind it is handed out before it.
    pub(crate) held: VecDeque<Held>,
}

/// A part of the stream from the first data still at its sender on.
#[derive(Debug)]
pub(crate) enum Held {
    /// A rendezvous send's data, still at the sender: probed message
    /// `pid` of `len` bytes.
    Remote { pid: SlabId, len: usize },
    /// A rendezvous send's data being fetched by request `rid`: into
    /// the oldest posted receive, or into a buffer of the stream's that
    /// becomes a kept fragment (`Some` once the fetch is over).
    Fetch { rid: SlabId, done: Option<Vec<u8>> },
    /// Fragment bytes that arrived behind a fetch.
    Bytes(Vec<u8>),
}

/// Where the data of a rendezvous send goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FetchTo {
    /// Straight into receive `.0`, from its byte `.1` on.
    Recv(SlabId, usize),
    /// Into a buffer of the stream's.
    Kept,
}

impl StreamRx {
    /// Takes fragment bytes at stream offset `off`: into posted receives,
    /// the rest kept. Returns the receives that are now complete.
    pub(crate) fn arrive(
        &mut self,
        reqs: &mut Slab<Request>,
        off: u64,
        bytes: &[u8],
        done: &mut Vec<SlabId>,
    ) -> Result<(), PeerMisbehaved> {
        if off != self.next {
            return Err(PeerMisbehaved::Invalid {
                what: "stream fragment",
                detail: format!("at stream offset {off} where {} was due", self.next),
            });
        }
        self.next = self.next.wrapping_add(bytes.len() as u64);
        if !self.held.is_empty() {
            self.held.push_back(Held::Bytes(bytes.to_vec()));
            return Ok(());
        }
        self.deliver(reqs, bytes, done);
        Ok(())
    }

    /// Hands bytes that are next in the stream to the posted receives;
    /// the rest is kept.
    fn deliver(&mut self, reqs: &mut Slab<Request>, mut bytes: &[u8], done: &mut Vec<SlabId>) {
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
            if r.satisfied() {
                self.recvs.pop_front();
                done.push(id);
            }
        }
    }

    /// A rendezvous send of `len` bytes at stream offset `off` arrived,
    /// kept as probed message `pid`: its data stays at the sender until
    /// [`StreamRx::pump`] says where to fetch it.
    pub(crate) fn arrive_remote(
        &mut self,
        off: u64,
        pid: SlabId,
        len: usize,
    ) -> Result<(), PeerMisbehaved> {
        if off != self.next {
            return Err(PeerMisbehaved::Invalid {
                what: "stream rendezvous",
                detail: format!("at stream offset {off} where {} was due", self.next),
            });
        }
        self.next = self.next.wrapping_add(len as u64);
        self.held.push_back(Held::Remote { pid, len });
        Ok(())
    }

    /// Hands out what no longer waits, in stream order, until the next
    /// data still at the sender: that one's probed message, length and
    /// where to fetch it. Straight into the oldest receive if it has room
    /// for all of it (marked `fetching` then); else into a buffer of the
    /// stream's, at once (so that the sender's send completes whatever
    /// the receiving program does, as an eager one would). The caller
    /// starts the fetch and records it with [`StreamRx::fetching`].
    pub(crate) fn pump(
        &mut self,
        reqs: &mut Slab<Request>,
        done: &mut Vec<SlabId>,
        spare: &mut Vec<Vec<u8>>,
    ) -> Option<(SlabId, usize, FetchTo)> {
        loop {
            // Kept bytes come first.
            while !self.chunks.is_empty() {
                let Some(&id) = self.recvs.front() else {
                    break;
                };
                if let Some(Request {
                    kind: Kind::StreamRecv(r),
                    ..
                }) = reqs.get_mut(id)
                {
                    if !self.fill(r) {
                        break;
                    }
                    done.push(id);
                }
                self.recvs.pop_front();
            }
            match self.held.front_mut()? {
                Held::Fetch { done: None, .. } => return None,
                Held::Fetch { done: d, .. } => {
                    let data = d.take().unwrap_or_default();
                    self.held.pop_front();
                    self.deliver_owned(reqs, data, done, spare);
                }
                Held::Bytes(b) => {
                    let data = std::mem::take(b);
                    self.held.pop_front();
                    self.deliver_owned(reqs, data, done, spare);
                }
                &mut Held::Remote { pid, len } => {
                    let next = self.chunks.is_empty();
                    let room = self.recvs.front().filter(|_| next).and_then(|&id| {
                        match reqs.get_mut(id) {
                            Some(Request {
                                kind: Kind::StreamRecv(r),
                                ..
                            }) if r.buf.capacity() - r.filled >= len => {
                                r.fetching = true;
                                Some(FetchTo::Recv(id, r.filled))
                            }
                            _ => None,
                        }
                    });
                    return Some((pid, len, room.unwrap_or(FetchTo::Kept)));
                }
            }
        }
    }

    /// The data at the front, still at the sender, is being fetched by
    /// request `rid` (`None`: it is in already, `data` if it went into a
    /// buffer of the stream's; or the fetch could not start).
    pub(crate) fn fetching(&mut self, rid: Option<SlabId>, data: Option<Vec<u8>>) {
        if let Some(h @ Held::Remote { .. }) = self.held.front_mut() {
            *h = match rid {
                Some(rid) => Held::Fetch { rid, done: None },
                None => Held::Bytes(data.unwrap_or_default()),
            };
        }
    }

    /// Fetch `rid` is over; `data` is the buffer of the stream's it
    /// filled (`None` for a fetch into a receive, or one that failed).
    /// [`StreamRx::pump`] then hands out what waited behind it.
    pub(crate) fn fetched(&mut self, rid: SlabId, data: Option<Vec<u8>>) {
        if let Some(Held::Fetch { done, .. }) = self
            .held
            .iter_mut()
            .find(|h| matches!(h, Held::Fetch { rid: r, .. } if *r == rid))
        {
            *done = Some(data.unwrap_or_default());
        }
    }

    /// Whether bytes are kept or waiting at the sender: something for the
    /// program to take.
    pub(crate) fn has_data(&self) -> bool {
        !self.chunks.is_empty() || !self.held.is_empty()
    }

    /// [`StreamRx::deliver`] of a buffer the stream owns: kept whole, not
    /// copied, when no receive takes it; one the receives took goes to
    /// `spare`.
    fn deliver_owned(
        &mut self,
        reqs: &mut Slab<Request>,
        data: Vec<u8>,
        done: &mut Vec<SlabId>,
        spare: &mut Vec<Vec<u8>>,
    ) {
        if self.recvs.is_empty() {
            if !data.is_empty() {
                self.chunks.push_back(data);
            }
            return;
        }
        self.deliver(reqs, &data, done);
        if spare.len() < STREAM_SPARE {
            spare.push(data);
        }
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
        r.satisfied()
    }

    /// Whether the bytes kept complete, at once, a receive into
    /// `capacity` bytes in units of `unit` posted now ([`StreamRx::fill`]
    /// would).
    pub(crate) fn completes_at_once(&self, capacity: usize, unit: usize) -> bool {
        if !self.recvs.is_empty() {
            return false;
        }
        let kept = self.chunks.iter().map(Vec::len).sum::<usize>() - self.head;
        StreamRecvState::satisfied_by(kept.min(capacity), capacity, unit)
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
        // Fetches of the early bytes go on; what waits behind them joins.
        self.held.extend(early.held);
        self.next = early.next;
    }
}

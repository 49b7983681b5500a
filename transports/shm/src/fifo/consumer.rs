//! The receiving side: poll, dispatch, release; arm for sleep; skip the
//! hole a dead producer left.

use std::ops::Deref;

use super::{Fifo, FifoError};
use crate::layout::{decode, encode, ARMED, OWNER, PAD};
use crate::sync::Ordering;

/// A message as the consumer's handler sees it.
#[derive(Debug, Clone, Copy)]
pub struct Message<'m> {
    /// Active-message id.
    pub am_id: u8,
    /// The producer's source id.
    pub src: u16,
    /// The payload, valid during the handler call.
    pub data: &'m [u8],
}

/// Takes messages out of a [`Fifo`] in order. One per FIFO. `F` is how it
/// holds the FIFO: `&Fifo` from [`Fifo::consumer`], or an owning pointer
/// such as `Arc<Fifo>` from [`Consumer::new`].
#[derive(Debug)]
pub struct Consumer<F: Deref<Target = Fifo>> {
    fifo: F,
    /// Next position to read.
    read: u64,
    /// Last position published to `tail`.
    released: u64,
}

impl<F: Deref<Target = Fifo>> Consumer<F> {
    /// The consumer of the FIFO `fifo` points to;
    /// [`FifoError::ConsumerTaken`] if that FIFO handle has one already.
    pub fn new(fifo: F) -> Result<Self, FifoError> {
        fifo.consumer_taken
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .map_err(|_| FifoError::ConsumerTaken)?;
        // The consumer is the only writer of `tail`, so it is where the
        // previous consumer of this FIFO stopped.
        let read = fifo.region.tail().load(Ordering::Acquire);
        Ok(Self {
            fifo,
            read,
            released: read,
        })
    }

    /// Takes the next message if one is ready: calls `f(am_id, payload)` and
    /// returns its result. `Ok(None)`: nothing ready. A corrupt element is
    /// skipped and reported as [`FifoError::Corrupt`].
    pub fn poll<R>(&mut self, f: impl FnOnce(u8, &[u8]) -> R) -> Result<Option<R>, FifoError> {
        self.poll_msg(|m| f(m.am_id, m.data))
    }

    /// As [`Consumer::poll`], with the message's source id.
    pub fn poll_msg<R>(
        &mut self,
        f: impl FnOnce(Message<'_>) -> R,
    ) -> Result<Option<R>, FifoError> {
        let geom = self.fifo.geom;
        loop {
            let pos = self.read;
            let index = geom.index(pos);
            let word = self.fifo.region.ctl(index).load(Ordering::Acquire);
            if word & OWNER != geom.owner(pos) {
                return Ok(None);
            }
            let Some(ctl) = decode(word, &geom) else {
                self.advance();
                return Err(FifoError::Corrupt {
                    position: pos,
                    word,
                });
            };
            if ctl.pad {
                self.advance();
                continue;
            }
            // SAFETY: `index < capacity` (masked), `ctl.len` fits its place
            // (checked by `decode`), and the element is ours: its owner bit
            // was loaded with Acquire, and we release it only in `advance`,
            // after `f` has returned.
            let out = unsafe {
                self.fifo
                    .region
                    .with_payload(index, ctl.desc, ctl.len, |data| {
                        f(Message {
                            am_id: ctl.am_id,
                            src: ctl.src,
                            data,
                        })
                    })
            };
            self.advance();
            return Ok(Some(out));
        }
    }

    /// Position of the next message to read (free-running).
    pub fn position(&self) -> u64 {
        self.read
    }

    /// Prepares to sleep: publishes `tail`, then sets ARMED on `head` if
    /// nothing was claimed beyond what this consumer read. `true`: armed,
    /// the next producer will ask for a wake-up; `false`: messages are (or
    /// are about to be) there, poll instead of sleeping.
    pub fn arm(&mut self) -> bool {
        if self.read != self.released {
            self.release();
        }
        let head = self.fifo.region.head();
        let raw = head.load(Ordering::Relaxed);
        if raw & ARMED != 0 {
            return raw & !ARMED == self.read;
        }
        raw == self.read
            && head
                .compare_exchange(raw, raw | ARMED, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Whether the consumer waits at a position some producer claimed but
    /// has not published (`head` is past it).
    pub fn is_stuck(&self) -> bool {
        let geom = self.fifo.geom;
        let word = self
            .fifo
            .region
            .ctl(geom.index(self.read))
            .load(Ordering::Acquire);
        let head = self.fifo.region.head().load(Ordering::Relaxed) & !ARMED;
        word & OWNER != geom.owner(self.read) && head.wrapping_sub(self.read) as i64 > 0
    }

    /// Gives up on the claimed but unpublished element at the read
    /// position: marks it as padding for this lap and moves past it.
    /// Returns `false` (and does nothing) if the consumer is not stuck.
    ///
    /// Call it only when the producer that claimed the position can no
    /// longer write to it (its process died): a producer that publishes
    /// after the skip would write into an element the FIFO has reused.
    pub fn skip_stuck(&mut self) -> bool {
        if !self.is_stuck() {
            return false;
        }
        let geom = self.fifo.geom;
        let pos = self.read;
        // The padding word carries this lap's owner bit, so the element is
        // not mistaken for ready when the read position reaches it one lap
        // later (the stale word of the lap before would be).
        self.fifo
            .region
            .ctl(geom.index(pos))
            .store(encode(geom.owner(pos), PAD, 0, 0, 0), Ordering::Release);
        self.advance();
        true
    }

    fn advance(&mut self) {
        self.read = self.read.wrapping_add(1);
        if self.read.wrapping_sub(self.released) >= self.fifo.geom.release_every {
            self.release();
        }
    }

    fn release(&mut self) {
        self.fifo.region.tail().store(self.read, Ordering::Release);
        self.released = self.read;
    }
}

impl<F: Deref<Target = Fifo>> Drop for Consumer<F> {
    /// Releases what was consumed and lets a new consumer take over.
    fn drop(&mut self) {
        if self.read != self.released {
            self.release();
        }
        self.fifo.consumer_taken.store(false, Ordering::Release);
    }
}

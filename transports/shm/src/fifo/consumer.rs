//! The receiving side: poll, dispatch, release.

use super::{Fifo, FifoError};
use crate::layout::{decode, OWNER};
use crate::sync::Ordering;

/// Takes messages out of a [`Fifo`] in order. One per FIFO.
#[derive(Debug)]
pub struct Consumer<'a> {
    fifo: &'a Fifo,
    /// Next position to read.
    read: u64,
    /// Last position published to `tail`.
    released: u64,
}

impl<'a> Consumer<'a> {
    pub(super) fn new(fifo: &'a Fifo) -> Self {
        // The consumer is the only writer of `tail`, so it is where the
        // previous consumer of this FIFO stopped.
        let read = fifo.region.tail().load(Ordering::Acquire);
        Self {
            fifo,
            read,
            released: read,
        }
    }

    /// Takes the next message if one is ready: calls `f(am_id, payload)` and
    /// returns its result. `Ok(None)`: nothing ready. A corrupt element is
    /// skipped and reported as [`FifoError::Corrupt`].
    pub fn poll<R>(&mut self, f: impl FnOnce(u8, &[u8]) -> R) -> Result<Option<R>, FifoError> {
        let geom = &self.fifo.geom;
        let pos = self.read;
        let index = geom.index(pos);
        let word = self.fifo.region.ctl(index).load(Ordering::Acquire);
        if word & OWNER != geom.owner(pos) {
            return Ok(None);
        }
        let Some(ctl) = decode(word, geom) else {
            self.advance();
            return Err(FifoError::Corrupt {
                position: pos,
                word,
            });
        };
        // SAFETY: `index < capacity` (masked), `ctl.len <= max_payload`
        // (checked by `decode`), and the element is ours: its owner bit was
        // loaded with Acquire, and we release it only in `advance`, after `f`
        // has returned.
        let out = unsafe {
            self.fifo
                .region
                .with_payload(index, ctl.len, |data| f(ctl.am_id, data))
        };
        self.advance();
        Ok(Some(out))
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

impl Drop for Consumer<'_> {
    /// Releases what was consumed and lets a new consumer take over.
    fn drop(&mut self) {
        if self.read != self.released {
            self.release();
        }
        self.fifo.consumer_taken.store(false, Ordering::Release);
    }
}

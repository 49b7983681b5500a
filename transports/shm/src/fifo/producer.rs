//! The sending side: claim, write, publish, and wake a sleeping consumer.

use std::ops::Deref;

use super::{Fifo, FifoError};
use crate::layout::{encode, ARMED, DESC, INLINE};
use crate::sync::Ordering;

/// Outcome of [`Producer::try_push_from`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// The FIFO is full: nothing was written; retry after the consumer made
    /// progress.
    Full,
    /// The message is published. With `wake`, the consumer had armed
    /// itself to sleep and this producer must wake it (out of band: a
    /// socket, an eventfd); no other producer will.
    Sent {
        /// The consumer needs a wake-up.
        wake: bool,
    },
}

/// Pushes messages into a [`Fifo`]. Any number may exist, in any threads and
/// processes. `F` is how it holds the FIFO: `&Fifo` from [`Fifo::producer`],
/// or an owning pointer such as `Arc<Fifo>` from [`Producer::new`].
#[derive(Debug, Clone)]
pub struct Producer<F: Deref<Target = Fifo>> {
    fifo: F,
    /// Last `tail` this producer loaded (with Acquire).
    cached_tail: u64,
}

impl<F: Deref<Target = Fifo>> Producer<F> {
    /// A producer for the FIFO `fifo` points to.
    pub fn new(fifo: F) -> Self {
        Self {
            fifo,
            cached_tail: 0,
        }
    }

    /// Pushes one message made of `parts` (concatenated) with active-message
    /// id `am_id` and source 0; `Ok(false)`: the FIFO is full. For FIFOs
    /// whose consumer never sleeps: a requested wake-up is dropped.
    pub fn try_push(&mut self, am_id: u8, parts: &[&[u8]]) -> Result<bool, FifoError> {
        Ok(matches!(
            self.try_push_from(am_id, 0, parts)?,
            Push::Sent { .. }
        ))
    }

    /// Pushes one message made of `parts` (concatenated) with active-message
    /// id `am_id`, tagged with the caller's source id `src` (opaque to the
    /// FIFO, handed to the consumer). Payloads up to
    /// [`Fifo::max_inline`] travel inline, longer ones up to
    /// [`Fifo::max_payload`] in the element's descriptor.
    pub fn try_push_from(
        &mut self,
        am_id: u8,
        src: u16,
        parts: &[&[u8]],
    ) -> Result<Push, FifoError> {
        let geom = self.fifo.geom;
        let max = geom.max_payload();
        let len = parts
            .iter()
            .try_fold(0usize, |acc, p| acc.checked_add(p.len()))
            .unwrap_or(usize::MAX);
        if len > max {
            return Err(FifoError::PayloadTooLong { len, max });
        }
        let desc = len > geom.max_inline();
        // SAFETY (of the write): `index < capacity` (masked by `publish`)
        // and `len` fits the place chosen (inline room or descriptor,
        // checked above); the element is ours until published.
        self.publish(am_id, src, len, desc, |region, index| unsafe {
            region.write_payload(index, desc, parts)
        })
    }

    /// Claims the next position, lets `write` fill element `index` (inline
    /// or, with `desc`, its descriptor) with the `len` payload bytes, and
    /// publishes it. `write` must stay within what `len` and `desc` allow.
    #[inline(always)]
    fn publish(
        &mut self,
        am_id: u8,
        src: u16,
        len: usize,
        desc: bool,
        write: impl FnOnce(&crate::region::Region, usize),
    ) -> Result<Push, FifoError> {
        let geom = self.fifo.geom;
        let Some((pos, wake)) = self.claim() else {
            return Ok(Push::Full);
        };
        let index = geom.index(pos);
        // Position `pos` is ours: the CAS in `claim` gave it to this
        // producer alone, after a `tail` covering its previous lap.
        write(&self.fifo.region, index);
        let place = if desc { DESC } else { INLINE };
        self.fifo.region.ctl(index).store(
            encode(geom.owner(pos), place, am_id, src, len),
            Ordering::Release,
        );
        Ok(Push::Sent { wake })
    }

    /// Pushes one inline message made of the 8-byte `header` (stored
    /// little-endian) followed by `payload`, as [`Producer::try_push_from`]
    /// would push `[header bytes, payload]`, with less work per message
    /// (the short active messages of the transports).
    #[inline]
    pub fn try_push_short(
        &mut self,
        am_id: u8,
        src: u16,
        header: u64,
        payload: &[u8],
    ) -> Result<Push, FifoError> {
        let geom = self.fifo.geom;
        let len = payload.len().saturating_add(8);
        if len > geom.max_inline() {
            return Err(FifoError::PayloadTooLong {
                len,
                max: geom.max_inline(),
            });
        }
        // SAFETY (of the write): `index < capacity` (masked by `publish`)
        // and `len` fits inline (checked above); the element is ours until
        // published.
        self.publish(am_id, src, len, false, |region, index| unsafe {
            region.write_short(index, header, payload)
        })
    }

    /// Whether a push would find room now (a hint: other producers may
    /// take it first).
    pub fn has_room(&mut self) -> bool {
        let region = &self.fifo.region;
        let capacity = self.fifo.geom.capacity as u64;
        let head = region.head().load(Ordering::Relaxed) & !ARMED;
        if head.wrapping_sub(self.cached_tail) < capacity {
            return true;
        }
        self.cached_tail = region.tail().load(Ordering::Acquire);
        let head = region.head().load(Ordering::Relaxed) & !ARMED;
        head.wrapping_sub(self.cached_tail) < capacity
    }

    /// Claims the next position: `(position, consumer was armed)`, or
    /// `None` when the FIFO is full.
    fn claim(&mut self) -> Option<(u64, bool)> {
        let region = &self.fifo.region;
        let capacity = self.fifo.geom.capacity as u64;
        let mut raw = region.head().load(Ordering::Relaxed);
        loop {
            let head = raw & !ARMED;
            // Wrapping: a corrupt `tail` ahead of `head` reads as full.
            if head.wrapping_sub(self.cached_tail) >= capacity {
                self.cached_tail = region.tail().load(Ordering::Acquire);
                // Reload head after that Acquire: every claim below the new
                // tail happens-before it, so this load sees head >= tail. A
                // head loaded before it may be older than the tail and would
                // make the FIFO look full (or wrapped) when it is not.
                raw = region.head().load(Ordering::Relaxed);
                if (raw & !ARMED).wrapping_sub(self.cached_tail) >= capacity {
                    return None;
                }
                continue;
            }
            // The new value never carries ARMED: this claim consumes the
            // consumer's request to be woken.
            match region.head().compare_exchange_weak(
                raw,
                head.wrapping_add(1) & !ARMED,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some((head, raw & ARMED != 0)),
                Err(current) => raw = current,
            }
        }
    }
}

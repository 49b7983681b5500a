//! The sending side: claim, write, publish.

use super::{Fifo, FifoError};
use crate::layout::encode;
use crate::sync::Ordering;

/// Pushes messages into a [`Fifo`]. Any number may exist, in any threads and
/// processes.
#[derive(Debug, Clone)]
pub struct Producer<'a> {
    fifo: &'a Fifo,
    /// Last `tail` this producer loaded (with Acquire).
    cached_tail: u64,
}

impl<'a> Producer<'a> {
    pub(super) fn new(fifo: &'a Fifo) -> Self {
        Self {
            fifo,
            cached_tail: 0,
        }
    }

    /// Pushes one message made of `parts` (concatenated) with active-message
    /// id `am_id`. `Ok(false)`: the FIFO is full, nothing was written; retry
    /// after the consumer made progress.
    pub fn try_push(&mut self, am_id: u8, parts: &[&[u8]]) -> Result<bool, FifoError> {
        let geom = &self.fifo.geom;
        let max = geom.max_payload();
        let len = parts
            .iter()
            .try_fold(0usize, |acc, p| acc.checked_add(p.len()))
            .unwrap_or(usize::MAX);
        if len > max {
            return Err(FifoError::PayloadTooLong { len, max });
        }
        let Some(pos) = self.claim() else {
            return Ok(false);
        };
        let index = geom.index(pos);
        // SAFETY: `index < capacity` (masked), `len <= max_payload` (checked
        // above), and position `pos` is ours: the CAS in `claim` gave it to
        // this producer alone, after a `tail` covering its previous lap.
        unsafe { self.fifo.region.write_payload(index, parts) };
        self.fifo
            .region
            .ctl(index)
            .store(encode(geom.owner(pos), am_id, len), Ordering::Release);
        Ok(true)
    }

    /// Claims the next position, or `None` when the FIFO is full.
    fn claim(&mut self) -> Option<u64> {
        let region = &self.fifo.region;
        let capacity = self.fifo.geom.capacity as u64;
        let mut head = region.head().load(Ordering::Relaxed);
        loop {
            // Wrapping: a corrupt `tail` ahead of `head` reads as full.
            if head.wrapping_sub(self.cached_tail) >= capacity {
                self.cached_tail = region.tail().load(Ordering::Acquire);
                // Reload head after that Acquire: every claim below the new
                // tail happens-before it, so this load sees head >= tail. A
                // head loaded before it may be older than the tail and would
                // make the FIFO look full (or wrapped) when it is not.
                head = region.head().load(Ordering::Relaxed);
                if head.wrapping_sub(self.cached_tail) >= capacity {
                    return None;
                }
            }
            match region.head().compare_exchange_weak(
                head,
                head.wrapping_add(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(head),
                Err(current) => head = current,
            }
        }
    }
}

//! What the worker keeps of active messages on their way in: whole ones
//! waiting for their handlers, ones still arriving in fragments, and a
//! rendezvous announcement while its wrapped request is decoded (the
//! protocols are `am.rs` and `am_rndv.rs`).

use super::am_wire::{AmFrag, AmRts};
use crate::ucs::slab::SlabId;
use crate::uct::SrcId;

/// An inline active message handler: runs inside `progress`, in the
/// transport's receive, on a whole eager message's user header and data
/// where they arrived (no copy, no queueing); returns whether it consumed
/// the message. One that does not is handed to the id's regular handler
/// (`Worker::am_set_handler`) as an `AmMsg`, as are rendezvous
/// messages and messages whose sender asked for a reply endpoint.
pub type AmInlineHandler = Box<dyn FnMut(&[u8], &[u8]) -> bool + Send>;

/// An active message that arrived whole, until its handler runs.
#[derive(Debug)]
pub(crate) struct AmArrival {
    pub(crate) id: u16,
    /// The user header, then the data.
    pub(crate) bytes: AmBytes,
    pub(crate) hdr_len: u32,
    /// Where the sender's messages come from, if it asked for the
    /// endpoint back to it: `(iface, source)`, resolved when the handler
    /// runs (the endpoint may be made by a wireup carried out after this
    /// message arrived).
    pub(crate) reply_from: Option<(u32, SrcId)>,
    /// A rendezvous message: the probed message that holds its data, and
    /// the data's length (`bytes` is then the user header only). Boxed:
    /// the rare case, kept out of the size of every small message, which
    /// is moved several times on its way to the handler.
    pub(crate) rndv: Option<Box<(SlabId, usize)>>,
}

/// A message whose fragments are still arriving.
#[derive(Debug)]
pub(crate) struct AmPartial {
    pub(crate) first: AmFrag,
    pub(crate) bytes: Vec<u8>,
}

/// An announcement being decoded: its wrapper and user header, until the
/// wrapped request reaches `rts_arrived`.
#[derive(Debug)]
pub(crate) struct AmRtsIn {
    pub(crate) rts: AmRts,
    pub(crate) header: Vec<u8>,
}

/// Longest message (user header plus data) kept inline in [`AmBytes`]:
/// as much as fits beside the length in the heap variant's size, so
/// that inline storage makes the value no larger.
pub(crate) const AM_INLINE: usize = 22;

/// A message's user header and data: short ones inline, so that a small
/// message costs no allocation on its way to the handler; longer ones on
/// the heap.
#[derive(Debug)]
pub(crate) enum AmBytes {
    Inline { len: u8, buf: [u8; AM_INLINE] },
    Heap(Vec<u8>),
}

impl AmBytes {
    /// A copy of `b`.
    #[inline]
    pub(crate) fn copy(b: &[u8]) -> AmBytes {
        if b.len() <= AM_INLINE {
            let mut buf = [0u8; AM_INLINE];
            buf[..b.len()].copy_from_slice(b);
            AmBytes::Inline {
                len: b.len() as u8,
                buf,
            }
        } else {
            AmBytes::Heap(b.to_vec())
        }
    }

    /// The bytes.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            AmBytes::Inline { len, buf } => &buf[..*len as usize],
            AmBytes::Heap(v) => v,
        }
    }

    /// The bytes from `at` on, owned (the heap buffer itself when there
    /// is one).
    pub(crate) fn into_vec_from(self, at: usize) -> Vec<u8> {
        match self {
            AmBytes::Inline { .. } => self.as_slice()[at..].to_vec(),
            AmBytes::Heap(mut v) => {
                v.drain(..at);
                v
            }
        }
    }
}

impl From<Vec<u8>> for AmBytes {
    fn from(v: Vec<u8>) -> AmBytes {
        AmBytes::Heap(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_bytes_are_inline_and_long_ones_on_the_heap() {
        for n in [0, 1, AM_INLINE - 1, AM_INLINE, AM_INLINE + 1, 4096] {
            let b: Vec<u8> = (0..n).map(|i| i as u8).collect();
            let a = AmBytes::copy(&b);
            assert_eq!(matches!(a, AmBytes::Inline { .. }), n <= AM_INLINE);
            assert_eq!(a.as_slice(), &b[..]);
            let at = n / 3;
            assert_eq!(AmBytes::copy(&b).into_vec_from(at), b[at..].to_vec());
        }
    }

    #[test]
    fn a_small_arrival_stays_small() {
        // It is moved from the receive path to the handler several times.
        assert!(std::mem::size_of::<AmBytes>() <= 32);
        assert!(std::mem::size_of::<AmArrival>() <= 64);
    }
}

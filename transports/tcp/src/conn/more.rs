//! The parts of a connection that most connections never use, kept out of
//! [`Conn`](super::Conn): its endpoint list holds one endpoint inline, and
//! the queues of pending tokens, flushes and puts live in a box allocated on
//! first use and freed when they are all empty again.

use std::collections::VecDeque;

use uct::{EpId, Token};

use super::{Flush, PutOut};
use crate::wire::PutStatus;

/// The endpoints sending on a connection, in the order they came.
#[derive(Debug, Default)]
pub(crate) enum EpList {
    /// None.
    #[default]
    Empty,
    /// One, inline: the usual case.
    One(u32),
    /// Two or more; boxed, keeping the list two words long (a `Vec` inline
    /// would make every connection's list four).
    #[allow(clippy::box_collection)]
    Many(Box<Vec<u32>>),
}

impl EpList {
    /// The endpoints, in order.
    pub(crate) fn as_slice(&self) -> &[u32] {
        match self {
            EpList::Empty => &[],
            EpList::One(e) => std::slice::from_ref(e),
            EpList::Many(v) => v,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.as_slice().is_empty()
    }

    /// Adds `ep` at the end.
    pub(crate) fn push(&mut self, ep: u32) {
        match self {
            EpList::Empty => *self = EpList::One(ep),
            EpList::One(e) => *self = EpList::Many(Box::new(vec![*e, ep])),
            EpList::Many(v) => v.push(ep),
        }
    }

    /// Removes every occurrence of `ep`, keeping the order of the rest.
    pub(crate) fn remove(&mut self, ep: u32) {
        let rest: Vec<u32> = self
            .as_slice()
            .iter()
            .copied()
            .filter(|&e| e != ep)
            .collect();
        if rest.len() != self.as_slice().len() {
            *self = EpList::Empty;
            for e in rest {
                self.push(e);
            }
        }
    }

    /// Moves the endpoints of `other` to the end, leaving it empty.
    pub(crate) fn append(&mut self, other: &mut EpList) {
        for &e in std::mem::take(other).as_slice() {
            self.push(e);
        }
    }
}

/// A connection's queues of pending tokens, flushes and puts.
#[derive(Debug, Default)]
pub(crate) struct ConnMore {
    /// `pending_add` tokens, in order.
    pub(crate) pending: VecDeque<(EpId, Token)>,
    /// Flushes waiting for the backlog to drain and puts to be answered.
    pub(crate) waiters: Vec<Flush>,
    /// Our puts on it not yet acknowledged, in order.
    pub(crate) puts: VecDeque<PutOut>,
    /// The seq of our next put. It may start over once the box is freed:
    /// nothing then refers to an earlier seq (no put awaits its
    /// acknowledgement, no flush its mark).
    pub(crate) put_seq: u64,
    /// Acknowledgements of the peer's puts that the backlog could not
    /// take yet, in order.
    pub(crate) acks: VecDeque<(u64, PutStatus)>,
}

impl ConnMore {
    /// Whether every queue is empty.
    pub(crate) fn is_idle(&self) -> bool {
        self.pending.is_empty()
            && self.waiters.is_empty()
            && self.puts.is_empty()
            && self.acks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ep_list_keeps_order_through_pushes_and_removals() {
        let mut l = EpList::default();
        assert!(l.is_empty());
        l.push(3);
        assert!(matches!(l, EpList::One(3)));
        l.push(5);
        l.push(7);
        assert_eq!(l.as_slice(), &[3, 5, 7]);
        l.remove(3);
        assert_eq!(l.as_slice(), &[5, 7]);
        l.remove(9);
        assert_eq!(l.as_slice(), &[5, 7]);
        let mut other = EpList::default();
        other.push(1);
        l.append(&mut other);
        assert!(other.is_empty());
        assert_eq!(l.as_slice(), &[5, 7, 1]);
        l.remove(5);
        l.remove(7);
        assert!(matches!(l, EpList::One(1)));
        l.remove(1);
        assert!(l.is_empty());
    }
}

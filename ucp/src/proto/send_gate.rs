//! Endpoints' own send paths, for workers that many threads use.
//!
//! On a [`SharedWorker`](crate::SharedWorker) every post takes the
//! worker's lock. A tag message short enough for `am_short` needs nothing
//! of the worker, though: only the endpoint's lane and some of its eager
//! credit; nor does an active message without a user header (no credit).
//! A [`SendGate`] is that path for one endpoint: the transport's
//! [`ShortSender`] for the lane, behind a lock of the endpoint's own, and a
//! lease of the endpoint's credit. Threads that send on different
//! endpoints then send at the same time, and a send does not wait while
//! another thread progresses the worker.
//!
//! The worker (under its lock) opens the gate and tops up the lease when
//! one of its own tag or active message sends took the fast path: nothing
//! is queued on the endpoint, it has not failed, and its credit is quiet
//! (`credit.rs`).
//! The lease is charged to the endpoint's credit when given, so the
//! worker's sends see it as used. Every other send on the endpoint closes
//! the gate first ([`Core::gate_close`]), taking back what is left of the
//! lease: a send that the gate holds is then in the transport before the
//! worker's, and messages keep the order in which one thread posted them.
//! So do failure, close and removal of the endpoint. A gate's sender may
//! find the transport full: the message then takes the worker's path,
//! which queues it (and closes the gate).
//!
//! A worker that one thread uses makes no gates (`Core::gates` is `None`)
//! unless asked to ([`crate::SendPaths`]).

use super::am::am_only_header;
use super::am_wire::AM_USER_ONLY;
use super::core::Core;
use super::credit::charge_of;
use super::lanes::Lanes;
use super::wire::AM_EAGER_ONLY;
use crate::ucs::slab::SlabId;
use crate::uct::ShortSender;
use parking_lot::Mutex;
use std::sync::{Arc, OnceLock};

/// The most credit one top-up leases. An endpoint whose receiver has no
/// limit may charge up to `u64::MAX`: a lease of all of it would leave the
/// worker's own sends no room to count in.
const LEASE_MAX: u64 = 1 << 40;

/// Endpoints per chunk of a [`GateTable`].
const CHUNK: usize = 256;
/// Chunks of a [`GateTable`]: endpoints whose index is below
/// `CHUNK * CHUNKS` can have a gate; the others send by the worker.
const CHUNKS: usize = 1024;

/// The gates of a worker's endpoints, by endpoint index: read by threads
/// without the worker's lock, written under it.
///
/// A send finds its endpoint's slot with one load (the chunk's
/// `OnceLock`) and no write to memory other threads read, so threads
/// sending on different endpoints share no cache line. A chunk is made
/// the first time an endpoint of its range gets a gate and stays until the
/// table goes; a slot is reused by the next endpoint of its index.
#[derive(Debug)]
pub(crate) struct GateTable {
    chunks: Box<[OnceLock<Box<[SendGate]>>]>,
}

impl Default for GateTable {
    fn default() -> Self {
        GateTable {
            chunks: (0..CHUNKS).map(|_| OnceLock::new()).collect(),
        }
    }
}

impl GateTable {
    /// The slot of endpoint index `i`, if its chunk was made.
    #[inline]
    pub(crate) fn slot(&self, i: usize) -> Option<&SendGate> {
        self.chunks.get(i / CHUNK)?.get()?.get(i % CHUNK)
    }

    /// The slot of endpoint index `i`, making its chunk; `None` past the
    /// table's end.
    fn slot_made(&self, i: usize) -> Option<&SendGate> {
        let chunk = self.chunks.get(i / CHUNK)?.get_or_init(|| {
            (0..CHUNK)
                .map(|_| SendGate {
                    state: Mutex::new(None),
                })
                .collect()
        });
        chunk.get(i % CHUNK)
    }

    /// The slots of the chunks made.
    fn slots(&self) -> impl Iterator<Item = &SendGate> {
        self.chunks
            .iter()
            .filter_map(OnceLock::get)
            .flat_map(|c| c.iter())
    }
}

/// One endpoint index's send path past the worker's lock: the gate of the
/// endpoint that has the index now, if it has one.
#[derive(Debug)]
pub(crate) struct SendGate {
    state: Mutex<Option<GateState>>,
}

#[derive(Debug)]
struct GateState {
    /// The endpoint whose gate it is.
    ep: SlabId,
    tx: Box<dyn ShortSender>,
    /// Sends may pass; else they take the worker's path.
    open: bool,
    /// Credit this gate may still charge (already charged to the endpoint).
    lease: u64,
    /// Tag messages shorter than this go with `am_short`.
    short_end: usize,
    /// Messages sent through the gate.
    sent: u64,
}

/// Whether an endpoint has a gate.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GateMark {
    /// Not asked for yet.
    #[default]
    Untried,
    /// It has one, in the worker's table.
    Made,
    /// The lane's transport has none, or the endpoint goes.
    None,
}

impl SendGate {
    /// Sends `data` with `tag` as an eager short message if the gate is
    /// open for it: `true` once sent. `false` leaves it to the worker's
    /// path (the gate is closed, the message is not short or exceeds the
    /// lease, the transport is full or refused it).
    pub(crate) fn try_tag_send(&self, ep: SlabId, data: &[u8], tag: u64) -> bool {
        let mut g = self.state.lock();
        let Some(g) = g.as_mut() else {
            return false;
        };
        let charge = charge_of(data.len());
        if g.ep != ep || !g.open || data.len() >= g.short_end || g.lease < charge {
            return false;
        }
        if matches!(g.tx.am_short(AM_EAGER_ONLY, tag, data), Ok(true)) {
            g.lease -= charge;
            g.sent += 1;
            return true;
        }
        false
    }

    /// Sends `data` as active message `id` without a user header (the
    /// worker's `am_send_short`), if the gate is open for it: `true` once
    /// sent. Active messages are charged no credit.
    pub(crate) fn try_am_send(&self, ep: SlabId, id: u16, data: &[u8], reply: bool) -> bool {
        let mut g = self.state.lock();
        let Some(g) = g.as_mut() else {
            return false;
        };
        if g.ep != ep || !g.open || data.len() >= g.short_end {
            return false;
        }
        let hdr = u64::from_le_bytes(am_only_header(id, reply));
        if matches!(g.tx.am_short(AM_USER_ONLY, hdr, data), Ok(true)) {
            g.sent += 1;
            return true;
        }
        false
    }
}

/// Messages sent through the gates of `table` so far (of the endpoints
/// that still have one).
pub(crate) fn gate_sends(table: &GateTable) -> u64 {
    table
        .slots()
        .filter_map(|g| g.state.lock().as_ref().map(|s| s.sent))
        .sum()
}

/// `ep`'s gate in `gates`, if it has one (the slot, locked).
fn gate_of(
    gates: &Option<Arc<GateTable>>,
    ep: SlabId,
) -> Option<parking_lot::MappedMutexGuard<'_, GateState>> {
    let slot = gates.as_ref()?.slot(ep.index() as usize)?;
    parking_lot::MutexGuard::try_map(slot.state.lock(), |s| s.as_mut().filter(|s| s.ep == ep)).ok()
}

impl Core {
    /// Lets endpoints have gates from now on; the table that names them.
    pub(crate) fn gates_enable(&mut self) -> Arc<GateTable> {
        Arc::clone(self.gates.get_or_insert_with(Default::default))
    }

    /// Drops every gate from the table, as the worker goes: a send through
    /// one that is under way ends first (it holds the gate's lock).
    pub(crate) fn gates_clear(&mut self) {
        if let Some(t) = &self.gates {
            for g in t.slots() {
                *g.state.lock() = None;
            }
        }
    }

    /// After a send of `ep` took the fast path: opens its gate (making it
    /// if need be) and gives it the credit the endpoint can charge without
    /// asking for more.
    #[inline(never)]
    pub(crate) fn gate_top_up(&mut self, tx: &mut dyn Lanes, ep: SlabId) {
        let Some(st) = self.eps.get(ep) else {
            return;
        };
        if st.failed.is_some() || !st.queue.is_empty() || st.announce_due {
            return;
        }
        let made = match st.gate {
            GateMark::None => return,
            GateMark::Made => true,
            GateMark::Untried => false,
        };
        if !made {
            let slot = self
                .gates
                .as_ref()
                .and_then(|t| t.slot_made(ep.index() as usize));
            let (Some(slot), Some(tx)) = (slot, tx.short_sender(st.iface, st.uct_ep)) else {
                if let Some(st) = self.eps.get_mut(ep) {
                    st.gate = GateMark::None;
                }
                return;
            };
            *slot.state.lock() = Some(GateState {
                ep,
                tx,
                open: false,
                lease: 0,
                short_end: 0,
                sent: 0,
            });
        }
        let Some(mut g) = gate_of(&self.gates, ep) else {
            return;
        };
        let Some(st) = self.eps.get_mut(ep) else {
            return;
        };
        st.gate = GateMark::Made;
        let c = &mut st.credit;
        let room = c
            .limit
            .min(c.ask_at)
            .saturating_sub(c.sent)
            .saturating_sub(1)
            .min(LEASE_MAX);
        g.open = true;
        g.short_end = st.short_end;
        g.lease += room;
        c.sent += room;
    }

    /// Closes `ep`'s gate, if it has an open one, and takes back what is
    /// left of its lease. A send the gate holds now is in the transport
    /// once this returns.
    #[inline]
    pub(crate) fn gate_close(&mut self, ep: SlabId) {
        if !matches!(self.eps.get(ep), Some(st) if st.gate == GateMark::Made) {
            return;
        }
        self.gate_close_made(ep);
    }

    #[inline(never)]
    fn gate_close_made(&mut self, ep: SlabId) {
        let Some(mut g) = gate_of(&self.gates, ep) else {
            return;
        };
        if g.open {
            g.open = false;
            if let Some(st) = self.eps.get_mut(ep) {
                st.credit.sent -= g.lease;
            }
            g.lease = 0;
        }
    }

    /// Closes `ep`'s gate for good and drops it from the table, before the
    /// endpoint goes.
    pub(crate) fn gate_remove(&mut self, ep: SlabId) {
        self.gate_close(ep);
        let Some(st) = self.eps.get_mut(ep) else {
            return;
        };
        if std::mem::replace(&mut st.gate, GateMark::None) != GateMark::Made {
            return;
        }
        if let Some(slot) = self
            .gates
            .as_ref()
            .and_then(|t| t.slot(ep.index() as usize))
        {
            let mut g = slot.state.lock();
            if g.as_ref().is_some_and(|g| g.ep == ep) {
                *g = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{GateTable, CHUNK, CHUNKS};

    #[test]
    fn slots_exist_once_their_chunk_is_made_and_not_past_the_end() {
        let t = GateTable::default();
        assert!(t.slot(0).is_none());
        assert!(t.slot_made(CHUNK + 3).is_some());
        assert!(t.slot(CHUNK + 3).is_some());
        assert!(std::ptr::eq(
            t.slot(CHUNK).expect("same chunk"),
            t.slot_made(CHUNK).expect("made")
        ));
        assert!(t.slot(0).is_none(), "another chunk was made");
        assert!(t.slot_made(CHUNK * CHUNKS).is_none());
        assert!(t.slot(usize::MAX).is_none());
        assert_eq!(t.slots().count(), CHUNK);
        assert_eq!(super::gate_sends(&t), 0);
    }
}

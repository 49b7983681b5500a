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
use parking_lot::{Mutex, RwLock};
use std::sync::Arc;

/// The most credit one top-up leases. An endpoint whose receiver has no
/// limit may charge up to `u64::MAX`: a lease of all of it would leave the
/// worker's own sends no room to count in.
const LEASE_MAX: u64 = 1 << 40;

/// The gates of a worker's endpoints, by endpoint index: read by threads
/// without the worker's lock, written under it.
pub(crate) type GateTable = RwLock<Vec<Option<Arc<SendGate>>>>;

/// One endpoint's send path past the worker's lock.
#[derive(Debug)]
pub(crate) struct SendGate {
    ep: SlabId,
    state: Mutex<GateState>,
}

#[derive(Debug)]
struct GateState {
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
        if ep != self.ep {
            return false;
        }
        let mut g = self.state.lock();
        let charge = charge_of(data.len());
        if !g.open || data.len() >= g.short_end || g.lease < charge {
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
        if ep != self.ep {
            return false;
        }
        let mut g = self.state.lock();
        if !g.open || data.len() >= g.short_end {
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
    let t = table.read();
    t.iter().flatten().map(|g| g.state.lock().sent).sum()
}

impl Core {
    /// Lets endpoints have gates from now on; the table that names them.
    pub(crate) fn gates_enable(&mut self) -> Arc<GateTable> {
        Arc::clone(self.gates.get_or_insert_with(Default::default))
    }

    /// Drops every gate from the table, as the worker goes: a send through
    /// one that is under way ends first (it holds the table's read lock).
    pub(crate) fn gates_clear(&mut self) {
        if let Some(t) = &self.gates {
            t.write().clear();
        }
    }

    /// `ep`'s gate, if it has one.
    fn gate_of(&self, ep: SlabId) -> Option<Arc<SendGate>> {
        let t = self.gates.as_ref()?.read();
        let g = t.get(ep.index() as usize)?.as_ref()?;
        (g.ep == ep).then(|| Arc::clone(g))
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
        let gate = match st.gate {
            GateMark::None => return,
            GateMark::Made => match self.gate_of(ep) {
                Some(g) => g,
                None => return,
            },
            GateMark::Untried => {
                let (Some(table), Some(sender)) =
                    (&self.gates, tx.short_sender(st.iface, st.uct_ep))
                else {
                    if let Some(st) = self.eps.get_mut(ep) {
                        st.gate = GateMark::None;
                    }
                    return;
                };
                let g = Arc::new(SendGate {
                    ep,
                    state: Mutex::new(GateState {
                        tx: sender,
                        open: false,
                        lease: 0,
                        short_end: 0,
                        sent: 0,
                    }),
                });
                let i = ep.index() as usize;
                let mut t = table.write();
                if t.len() <= i {
                    t.resize(i + 1, None);
                }
                t[i] = Some(Arc::clone(&g));
                g
            }
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
        let mut g = gate.state.lock();
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
        let Some(gate) = self.gate_of(ep) else {
            return;
        };
        let mut g = gate.state.lock();
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
        if let Some(t) = &self.gates {
            let mut t = t.write();
            if let Some(e) = t.get_mut(ep.index() as usize) {
                if e.as_ref().is_some_and(|g| g.ep == ep) {
                    *e = None;
                }
            }
        }
    }
}

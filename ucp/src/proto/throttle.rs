//! A bound on the memory unexpected tag messages take on a worker
//! (`RUCX_UNEXPECTED_MAX`).
//!
//! The receiver counts the bytes its unexpected eager messages hold. Once
//! over the limit, each endpoint an unexpected eager message arrives from
//! is sent `THROTTLE` on (once); its sender then sends every non-empty
//! tag message by rendezvous, so only the small announcement waits here
//! and the data stays with the sender until a receive matches it (and a
//! sender that waits on its requests is slowed). When the held bytes fall
//! to half the limit, every throttled endpoint is sent `THROTTLE` off.
//! Announcements and eager messages travel the same lane in order, so
//! matching order is untouched; messages already on their way when the
//! sender switches still arrive eagerly, which is why the limit is a
//! target the worker returns to, not a hard cap. Empty messages stay
//! eager (they hold no data). UCX has no such bound.

use super::command::Command;
use super::core::{Core, Unexp};
use super::lanes::Lanes;
use crate::ucs::slab::SlabId;
use crate::ucs::PeerMisbehaved;
use crate::uct::{AmId, SrcId};

/// Active message id of `THROTTLE`: one byte, 1 (send by rendezvous) or
/// 0 (eager again).
pub(crate) const AM_THROTTLE: AmId = 27;

/// What a worker's unexpected messages hold, against the limit.
#[derive(Debug)]
pub(crate) struct UnexpBudget {
    /// Bytes held now.
    held: usize,
    /// The limit (`usize::MAX`: none).
    max: usize,
    /// Endpoints told to send by rendezvous.
    throttled: Vec<SlabId>,
    /// Highest `held` seen.
    peak: usize,
}

impl UnexpBudget {
    pub(crate) fn new(max: usize) -> UnexpBudget {
        UnexpBudget {
            held: 0,
            max,
            throttled: Vec::new(),
            peak: 0,
        }
    }

    /// Bytes held now.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// Highest bytes held so far.
    pub(crate) fn peak(&self) -> usize {
        self.peak
    }
}

/// What unexpected message `u` is counted as: its buffer and its entry.
fn cost(u: &Unexp) -> usize {
    u.data.capacity() + std::mem::size_of::<Unexp>()
}

impl Core {
    /// Counts unexpected message `u`, arriving from `src` of the current
    /// iface, and throttles that endpoint if the worker is over its limit.
    pub(crate) fn unexp_added(&mut self, src: Option<SrcId>, u: &Unexp) {
        self.unexp_grew(src, cost(u));
    }

    /// An unexpected message from `src` grew by `bytes`.
    pub(crate) fn unexp_grew(&mut self, src: Option<SrcId>, bytes: usize) {
        let b = &mut self.unexp;
        b.held = b.held.saturating_add(bytes);
        b.peak = b.peak.max(b.held);
        if b.held <= b.max {
            return;
        }
        let Some(&ep) = src.and_then(|s| self.src_eps.get(&(self.cur_iface, s))) else {
            return;
        };
        let Some(st) = self.eps.get_mut(ep) else {
            return;
        };
        if !st.throttled_peer {
            st.throttled_peer = true;
            self.unexp.throttled.push(ep);
            self.commands.push_back(Command::Throttle { ep, on: true });
        }
    }

    /// Unexpected message `u` left the queue (matched, probed away or
    /// dropped); throttled senders are released below half the limit.
    pub(crate) fn unexp_taken(&mut self, u: &Unexp) {
        let b = &mut self.unexp;
        b.held = b.held.saturating_sub(cost(u));
        if b.throttled.is_empty() || b.held > b.max / 2 {
            return;
        }
        for ep in std::mem::take(&mut b.throttled) {
            if let Some(st) = self.eps.get_mut(ep) {
                st.throttled_peer = false;
                self.commands.push_back(Command::Throttle { ep, on: false });
            }
        }
    }

    /// Sends `THROTTLE` `on` to the peer of endpoint `ep`.
    pub(crate) fn throttle_send(&mut self, tx: &mut dyn Lanes, ep: SlabId, on: bool) {
        self.send_ctrl(tx, ep, AM_THROTTLE, vec![u8::from(on)]);
    }

    /// A `THROTTLE` message arrived from `src`: tag sends on the endpoint
    /// answering it go by rendezvous (1) or as selected (0).
    pub(crate) fn rx_throttle(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let on = match data {
            [0] => false,
            [1] => true,
            _ => {
                return Err(PeerMisbehaved::Invalid {
                    what: "throttle message",
                    detail: format!("{} bytes", data.len()),
                })
            }
        };
        let Some(&ep) = self.src_eps.get(&(self.cur_iface, src)) else {
            return Ok(());
        };
        if let Some(st) = self.eps.get_mut(ep) {
            st.rndv_only = on;
            st.short_end = if on {
                0
            } else {
                st.tables[0].short_end(st.cfg.max_short)
            };
        }
        Ok(())
    }
}

//! Flushes: complete once the active messages before them have arrived
//! and the one-sided operations before them have finished.
//!
//! A flush with nothing outstanding is `Done`. Otherwise it becomes a
//! [`FlushWait`] of its node: if messages of its scope are on the wire, a
//! marker packet due with the last of them clears its `marker`; it also
//! waits for every one-sided operation of its scope numbered below
//! `rma_upto`. It completes with `Ok` when both are done (checked when a
//! marker arrives or an operation finishes), or with an error when its
//! endpoint or iface fails first.

use super::net::{Body, Net, Packet, Report, State};
use super::send::failed_ep;
use crate::{EpId, Error, Posted, Result, SrcId, Token};

/// A flush that waits.
#[derive(Debug)]
pub(super) struct FlushWait {
    /// Names its marker.
    id: u64,
    token: Token,
    /// The endpoint's uid; `None`: the whole iface.
    ep: Option<u64>,
    /// Operations numbered below this must finish first.
    rma_upto: u64,
    /// Whether its marker is still on the wire.
    marker: bool,
}

impl FlushWait {
    fn covers(&self, ep: u64) -> bool {
        self.ep.is_none_or(|e| e == ep)
    }
}

impl Net {
    /// `Done` if nothing of `ep` (or of the node) is outstanding; else
    /// `InFlight` until it is.
    pub(super) fn flush(&mut self, me: usize, ep: Option<EpId>, token: Token) -> Result<Posted> {
        let uid = match ep {
            Some(ep) => {
                let e = self.ep_ref(me, ep)?;
                if e.failed {
                    return Err(failed_ep());
                }
                Some(e.uid)
            }
            None if self.nodes[me].state != State::Open => return Err(failed_ep()),
            None => None,
        };
        let last = self
            .wire
            .iter()
            .filter(|(_, p)| {
                p.from == me && matches!(p.body, Body::Am { .. }) && (uid.is_none() || p.ep == uid)
            })
            .map(|(&(t, _), _)| t)
            .max();
        let rma = self.nodes[me]
            .rma
            .values()
            .any(|op| uid.is_none_or(|u| op.ep == u));
        if last.is_none() && !rma {
            return Ok(Posted::Done);
        }
        let id = self.next_flush;
        self.next_flush += 1;
        if let Some(time) = last {
            let seq = self.next_seq();
            let packet = Packet {
                from: me,
                ep: uid,
                to: me,
                src: SrcId(0),
                body: Body::Flush(id),
            };
            self.wire.insert((time, seq), packet);
        }
        self.nodes[me].flushes.push(FlushWait {
            id,
            token,
            ep: uid,
            rma_upto: self.next_rma,
            marker: last.is_some(),
        });
        Ok(Posted::InFlight)
    }

    /// The marker of flush `id` of `node` arrived.
    pub(super) fn marker_arrived(&mut self, node: usize, id: u64) {
        if let Some(w) = self.nodes[node].flushes.iter_mut().find(|w| w.id == id) {
            w.marker = false;
            self.check_flushes(node);
        }
    }

    /// Completes the flushes of an open `node` that have nothing left to
    /// wait for, in the order they were asked for.
    pub(super) fn check_flushes(&mut self, node: usize) {
        if self.nodes[node].state != State::Open || self.nodes[node].flushes.is_empty() {
            return;
        }
        let n = &mut self.nodes[node];
        let rma = &n.rma;
        let mut done = Vec::new();
        n.flushes.retain(|w| {
            let busy = w.marker || rma.range(..w.rma_upto).any(|(_, op)| w.covers(op.ep));
            if !busy {
                done.push(w.token);
            }
            busy
        });
        for t in done {
            self.report(node, Report::Completed(t, Ok(())));
        }
    }

    /// A marker taken off the wire by a failure: its flush fails.
    pub(super) fn marker_canceled(&mut self, node: usize, id: u64, error: Error) {
        let flushes = &mut self.nodes[node].flushes;
        if let Some(i) = flushes.iter().position(|w| w.id == id) {
            let w = flushes.remove(i);
            self.report(node, Report::Completed(w.token, Err(error)));
        }
    }

    /// Fails the flushes of `node` on endpoint `ep` (every one with
    /// `None`), in order.
    pub(super) fn fail_flushes(&mut self, node: usize, ep: Option<u64>, error: &Error) {
        let mut failed = Vec::new();
        self.nodes[node].flushes.retain(|w| {
            let hit = ep.is_none() || w.ep == ep;
            if hit {
                failed.push(w.token);
            }
            !hit
        });
        for t in failed {
            self.report(node, Report::Completed(t, Err(error.duplicate())));
        }
    }
}

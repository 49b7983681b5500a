//! Progress: advancing the clock when idle, handing over reports,
//! messages and pending tokens, and arming the event fd.

use super::config::NodeId;
use super::net::{Body, Net, Packet, Report, State};
use super::packet::Fate;
use crate::{Armed, EpId, Error, Result};

/// Most messages one `progress` delivers.
const PROGRESS_BATCH: usize = 64;

impl Net {
    fn node_ready(&self, i: usize) -> bool {
        let n = &self.nodes[i];
        !n.reports.is_empty()
            || !n.inbox.is_empty()
            || n.pending_eps.iter().any(|&e| {
                n.eps[e as usize]
                    .as_ref()
                    .is_some_and(|ep| !ep.failed && self.has_room(i, ep.target))
            })
    }

    /// Auto-advance: while no open node has anything to do now, jumps to
    /// the next arrival.
    fn auto_advance(&mut self) {
        loop {
            let busy = (0..self.nodes.len())
                .any(|i| self.nodes[i].state == State::Open && self.node_ready(i));
            match self.next_event_time() {
                Some(t) if !busy => {
                    self.now = self.now.max(t);
                    self.settle();
                }
                _ => return,
            }
        }
    }

    /// Collects what `me` has to report: queued reports, then arrived
    /// messages (a batch), then pending tokens of endpoints with room.
    pub(super) fn progress(&mut self, me: usize, out: &mut Vec<Report>) {
        if self.cfg.auto_advance {
            self.auto_advance();
        }
        if self.nodes[me].state == State::Closed {
            return;
        }
        out.extend(self.nodes[me].reports.drain(..));
        for _ in 0..PROGRESS_BATCH {
            let Some((seq, p)) = self.nodes[me].inbox.pop_front() else {
                break;
            };
            self.consume(me, seq, p, out);
        }
        if !self.nodes[me].pending_eps.is_empty() {
            self.dispatch_pending(me, out);
        }
    }

    fn consume(&mut self, me: usize, seq: u64, p: Packet, out: &mut Vec<Report>) {
        let Some(src) = self.nodes[me].srcs.get_mut(p.src.0 as usize) else {
            return;
        };
        let (delivered, ended) = (src.delivered, src.ended);
        match &p.body {
            Body::Am { .. } if !ended => src.delivered = true,
            Body::End(_) => src.ended = true,
            _ => {}
        }
        let fate = if ended { Fate::Lost } else { Fate::Delivered };
        self.record(self.now, seq, &p, fate);
        let (from, src) = (p.from, p.src);
        match p.body {
            Body::Am { id, data, .. } => {
                self.release(from, me, data.len());
                if !self.nodes[from].pending_eps.is_empty() {
                    self.wake(from);
                }
                // After its end, a source delivers nothing (cannot happen
                // while ends are queued behind the source's messages).
                if !ended {
                    out.push(Report::Am { id, src, data });
                }
            }
            Body::End(reason) if delivered && !ended => {
                let e = Error::ConnectionLost {
                    peer: NodeId(from as u64).to_string(),
                    reason: reason.into(),
                };
                out.push(Report::SrcFailed(src, e));
            }
            _ => {}
        }
    }

    fn dispatch_pending(&mut self, me: usize, out: &mut Vec<Report>) {
        let mut list = std::mem::take(&mut self.nodes[me].pending_eps);
        list.retain(|&i| {
            let target = match &self.nodes[me].eps[i as usize] {
                Some(ep) if !ep.failed => ep.target,
                _ => return false,
            };
            if !self.has_room(me, target) {
                return true;
            }
            if let Some(ep) = self.nodes[me].eps[i as usize].as_mut() {
                out.extend(
                    ep.pending
                        .drain(..)
                        .map(|t| Report::PendingReady(EpId(i), t)),
                );
                ep.in_pending_list = false;
            }
            false
        });
        // Nothing adds to the list while it is out (single caller, locked).
        self.nodes[me].pending_eps = list;
    }

    /// `Busy` if `me` has work now, or (auto-advance) anything is on the
    /// wire that only a `progress` will move; else arms the fd.
    pub(super) fn arm(&mut self, me: usize) -> Result<Armed> {
        if self.node_ready(me) || (self.cfg.auto_advance && !self.wire.is_empty()) {
            return Ok(Armed::Busy);
        }
        let n = &mut self.nodes[me];
        let Some(e) = &n.event else {
            return Err(Error::Unsupported(
                "virt: no event fd (VirtConfig::event_fd)".into(),
            ));
        };
        let _ = e.drain();
        n.armed = true;
        Ok(Armed::Sleep)
    }
}

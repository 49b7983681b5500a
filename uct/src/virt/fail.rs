//! Endpoints and ifaces going away: `ep_destroy`, `kill` (peer death) and
//! dropping an iface (a clean close).

use super::config::NodeId;
use super::net::{Body, Net, Packet, Report, State};
use super::packet::Fate;
use super::rma::RmaMsg;
use crate::{EpId, Error, SrcId};

impl Net {
    /// Takes every packet of endpoint `uid` off the wire: lost messages,
    /// their zero-copy completions, the endpoint's one-sided operations
    /// (requests and replies) and the markers of its flushes reported to
    /// the sender with `error()`.
    fn cancel_packets(&mut self, uid: u64, error: &impl Fn() -> Error) {
        let keys: Vec<(u64, u64)> = self
            .wire
            .iter()
            .filter(|(_, p)| p.ep == Some(uid))
            .map(|(k, _)| *k)
            .collect();
        for key in keys {
            let Some(p) = self.wire.remove(&key) else {
                continue;
            };
            self.record(self.now, key.1, &p, Fate::Lost);
            match &p.body {
                Body::Am { data, token, .. } => {
                    self.release(p.from, p.to, data.len());
                    if let Some(t) = *token {
                        self.report(p.from, Report::Completed(t, Err(error())));
                    }
                }
                Body::Rma { op, msg, .. } => {
                    let initiator = match msg {
                        RmaMsg::Reply(_) => p.to,
                        _ => p.from,
                    };
                    self.cancel_rma(initiator, *op, error());
                }
                Body::Flush(id) => self.marker_canceled(p.from, *id, error()),
                Body::End(_) => {}
            }
        }
    }

    /// Cancels what endpoint `uid` of `node` has outstanding: its packets
    /// (see `cancel_packets`), then its flushes; flushes of the whole iface
    /// that waited only for it complete.
    fn cancel_ep(&mut self, node: usize, uid: u64, error: impl Fn() -> Error) {
        self.cancel_packets(uid, &error);
        self.fail_flushes(node, Some(uid), &error());
    }

    /// Fails endpoint `idx` of `node` (live and not failed yet): reports
    /// `ep_failed`, then its cancelled operations and flushes, then its
    /// pending tokens.
    fn fail_ep(&mut self, node: usize, idx: usize, error: &Error) {
        let Some(ep) = self.nodes[node].eps.get_mut(idx).and_then(Option::as_mut) else {
            return;
        };
        if ep.failed {
            return;
        }
        ep.failed = true;
        ep.in_pending_list = false;
        let uid = ep.uid;
        let pending = std::mem::take(&mut ep.pending);
        let id = EpId(idx as u32);
        self.nodes[node].pending_eps.retain(|&i| i != id.0);
        self.report(node, Report::EpFailed(id, error.duplicate()));
        self.cancel_ep(node, uid, || error.duplicate());
        for t in pending {
            self.report(node, Report::PendingReady(id, t));
        }
        self.check_flushes(node);
    }

    /// Fails every endpoint of every other node that targets `dead`.
    fn fail_eps_to(&mut self, dead: usize, error: &Error) {
        for n in 0..self.nodes.len() {
            if n == dead || self.nodes[n].state == State::Closed {
                continue;
            }
            for i in 0..self.nodes[n].eps.len() {
                let hit = self.nodes[n].eps[i]
                    .as_ref()
                    .is_some_and(|e| e.target == dead && !e.failed);
                if hit {
                    self.fail_ep(n, i, error);
                }
            }
        }
    }

    /// Queues the end of source `src` at `to`, behind the source's
    /// messages: after everything due by `time` (at or after now).
    fn end_source(&mut self, from: usize, to: usize, src: SrcId, time: u64, why: &'static str) {
        if !self.is_open(to) {
            return;
        }
        let seq = self.next_seq();
        let packet = Packet {
            from,
            ep: None,
            to,
            src,
            body: Body::End(why),
        };
        self.wire.insert((time.max(self.now), seq), packet);
        self.settle();
    }

    /// Empties a node's inbox, giving the senders their window back.
    fn discard_inbox(&mut self, node: usize) {
        let inbox = std::mem::take(&mut self.nodes[node].inbox);
        for (seq, p) in inbox {
            self.record(self.now, seq, &p, Fate::Lost);
            if let Body::Am { data, .. } = &p.body {
                self.release(p.from, node, data.len());
            }
        }
    }

    /// `ep_destroy`: what is still on the wire is lost (zero-copy sends
    /// and flushes complete with `Canceled`), pending tokens are dropped,
    /// and the receiver sees the source end.
    pub(super) fn ep_destroy(&mut self, me: usize, ep: EpId) {
        let node = &mut self.nodes[me];
        let Some(e) = node.eps.get_mut(ep.0 as usize).and_then(Option::take) else {
            return;
        };
        node.free_eps.push(ep.0);
        node.pending_eps.retain(|&i| i != ep.0);
        if !e.failed {
            self.cancel_ep(me, e.uid, || Error::Canceled);
            self.check_flushes(me);
            self.end_source(me, e.target, e.src, self.now, "endpoint destroyed");
        }
    }

    /// Peer death: `x` stops at once. Its messages still on the wire are
    /// lost; its own endpoints and every endpoint to it fail; each side
    /// hears `src_failed` for the sources of the other that delivered.
    pub(super) fn kill(&mut self, x: usize) {
        if self.nodes[x].state != State::Open {
            return;
        }
        self.nodes[x].state = State::Killed;
        let error = Error::ConnectionLost {
            peer: NodeId(x as u64).to_string(),
            reason: "iface killed".into(),
        };
        for i in 0..self.nodes[x].eps.len() {
            let live = self.nodes[x].eps[i].as_ref().filter(|e| !e.failed);
            let Some((target, src)) = live.map(|e| (e.target, e.src)) else {
                continue;
            };
            self.fail_ep(x, i, &error);
            if target != x {
                self.end_source(x, target, src, self.now, "peer killed");
            }
        }
        // Iface flushes of the dead node (those of its endpoints failed
        // with them).
        self.wire
            .retain(|_, p| !(p.from == x && matches!(p.body, Body::Flush(_))));
        self.fail_flushes(x, None, &error);
        self.discard_inbox(x);
        for i in 0..self.nodes[x].srcs.len() {
            let s = &mut self.nodes[x].srcs[i];
            let report = s.delivered && !s.ended;
            s.ended = true;
            if report {
                self.report(x, Report::SrcFailed(SrcId(i as u32), error.duplicate()));
            }
        }
        self.fail_eps_to(x, &error);
    }

    /// The iface of `x` was dropped: what it sent is still delivered, then
    /// its sources end; endpoints to it fail; what was sent to it is lost.
    pub(super) fn close(&mut self, x: usize) {
        if self.nodes[x].state == State::Closed {
            return;
        }
        let was_open = self.nodes[x].state == State::Open;
        self.nodes[x].state = State::Closed;
        let eps = std::mem::take(&mut self.nodes[x].eps);
        for e in eps.iter().flatten().filter(|e| !e.failed && was_open) {
            let last = self
                .wire
                .iter()
                .filter(|(_, p)| p.ep == Some(e.uid))
                .map(|(&(t, _), _)| t)
                .max()
                .unwrap_or(self.now);
            self.end_source(x, e.target, e.src, last, "peer closed");
        }
        self.discard_inbox(x);
        let node = &mut self.nodes[x];
        node.free_eps.clear();
        node.pending_eps.clear();
        node.reports.clear();
        node.event = None;
        // Forgotten: replies still on the wire find nothing to write into.
        node.rma.clear();
        node.flushes.clear();
        let error = Error::ConnectionLost {
            peer: NodeId(x as u64).to_string(),
            reason: "iface closed".into(),
        };
        self.fail_eps_to(x, &error);
    }
}

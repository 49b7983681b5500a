//! Sending: messages onto the wire, pending tokens, flushes.

use super::config::{NodeId, Op, PacketInfo, Verdict};
use super::net::{no_ep, Body, Net, Packet, State};
use crate::{AmId, EpId, Error, Posted, Result, SrcId, Token};

fn failed_ep() -> Error {
    Error::EndpointFailed("virt: endpoint failed".into())
}

impl Net {
    /// Puts a message of `len` bytes (written by `fill`) on the wire, or
    /// refuses it for lack of window.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn post(
        &mut self,
        me: usize,
        ep: EpId,
        op: Op,
        id: AmId,
        len: usize,
        token: Option<Token>,
        fill: impl FnOnce(&mut Vec<u8>),
    ) -> Result<Posted> {
        let e = self.ep_ref(me, ep)?;
        if e.failed {
            return Err(failed_ep());
        }
        let (to, src, uid) = (e.target, e.src, e.uid);
        if !self.has_room(me, to) {
            return Ok(Posted::NoResource);
        }
        let cfg = self.link_cfg(me, to);
        let mut data = Vec::with_capacity(len);
        fill(&mut data);
        let seq = self.next_seq();
        let info = PacketInfo {
            from: NodeId(me as u64),
            to: NodeId(to as u64),
            src,
            id,
            op,
            seq,
            time: self.now,
            data: &data,
        };
        let verdict = self.filter.as_mut().map_or(Verdict::Pass, |f| f(&info));
        // Draws happen in a fixed order, and only for enabled faults, so
        // that one seed and one sequence of sends give one outcome.
        let dropped = verdict == Verdict::Drop || (cfg.loss > 0.0 && self.rng.chance(cfg.loss));
        let jitter = if cfg.jitter > 0 {
            self.rng.up_to(cfg.jitter)
        } else {
            0
        };
        let extra = match verdict {
            Verdict::Delay(d) => d,
            _ => 0,
        };
        let tx = match cfg.bandwidth {
            0 => 0,
            bw => (data.len() as u128 * 1_000_000_000)
                .div_ceil(u128::from(bw))
                .min(u128::from(u64::MAX)) as u64,
        };
        let now = self.now;
        let link = self.links.entry((me, to)).or_default();
        let start = now.max(link.busy_until);
        link.busy_until = start.saturating_add(tx);
        let mut arrival = link
            .busy_until
            .saturating_add(cfg.latency)
            .saturating_add(jitter)
            .saturating_add(extra);
        if !cfg.reorder {
            arrival = arrival.max(link.last_arrival);
        }
        link.last_arrival = link.last_arrival.max(arrival);
        link.msgs += 1;
        link.bytes = link.bytes.saturating_add(data.len());
        let body = Body::Am {
            id,
            data,
            token,
            dropped,
        };
        let packet = Packet {
            from: me,
            ep: Some(uid),
            to,
            src,
            body,
        };
        self.wire.insert((arrival, seq), packet);
        self.settle();
        Ok(if token.is_some() {
            Posted::InFlight
        } else {
            Posted::Done
        })
    }

    pub(super) fn pending_add(&mut self, me: usize, ep: EpId, token: Token) -> Result<()> {
        let node = &mut self.nodes[me];
        let e = node
            .eps
            .get_mut(ep.0 as usize)
            .and_then(Option::as_mut)
            .ok_or_else(|| no_ep(ep))?;
        if e.failed {
            return Err(failed_ep());
        }
        e.pending.push_back(token);
        if !e.in_pending_list {
            e.in_pending_list = true;
            node.pending_eps.push(ep.0);
        }
        Ok(())
    }

    /// `Done` if nothing of `ep` (or of the node) is on the wire; else a
    /// flush marker due with the last of it.
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
        let Some(time) = last else {
            return Ok(Posted::Done);
        };
        let seq = self.next_seq();
        let packet = Packet {
            from: me,
            ep: uid,
            to: me,
            src: SrcId(0),
            body: Body::Flush(token),
        };
        self.wire.insert((time, seq), packet);
        Ok(Posted::InFlight)
    }
}

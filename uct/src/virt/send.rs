//! Sending: packets onto the wire (timing, faults, byte counts), active
//! messages, pending tokens.

use super::config::NodeId;
use super::net::{no_ep, Body, Net, Packet};
use super::packet::{Op, PacketInfo, Verdict};
use crate::{AmId, EpId, Error, Posted, Result, SrcId, Token};

pub(super) fn failed_ep() -> Error {
    Error::endpoint_failed("virt", crate::ucs::EndpointCause::PeerGone)
}

/// When and whether a packet arrives, as [`Net::transmit`] decided.
#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    /// Number of the packet on the net.
    pub(super) seq: u64,
    /// Arrival time.
    pub(super) arrival: u64,
    /// Lost on the wire (loss or filter).
    pub(super) dropped: bool,
}

impl Net {
    /// Schedules a packet of `data` on the link `from -> to`: runs the
    /// filter, draws loss and jitter, queues it behind the link's earlier
    /// packets by the link's bandwidth, and counts its bytes for the
    /// device. The window is the caller's business.
    pub(super) fn transmit(
        &mut self,
        from: usize,
        to: usize,
        src: SrcId,
        id: AmId,
        op: Op,
        data: &[u8],
    ) -> Slot {
        let cfg = self.link_cfg(from, to);
        let seq = self.next_seq();
        let info = PacketInfo {
            from: NodeId(from as u64),
            to: NodeId(to as u64),
            src,
            id,
            op,
            seq,
            time: self.now,
            data,
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
        let dev = self.nodes[from].dev;
        self.dev_bytes[dev] = self.dev_bytes[dev].saturating_add(data.len() as u64);
        let now = self.now;
        let link = self.links.entry((from, to)).or_default();
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
        Slot {
            seq,
            arrival,
            dropped,
        }
    }

    /// Takes `len` bytes of the window of `from -> to`.
    pub(super) fn occupy(&mut self, from: usize, to: usize, len: usize) {
        let link = self.links.entry((from, to)).or_default();
        link.msgs += 1;
        link.bytes = link.bytes.saturating_add(len);
    }

    /// The target, source id and uid of a live endpoint of `me` whose link
    /// has room; `None` when the window is full.
    pub(super) fn sendable(&self, me: usize, ep: EpId) -> Result<Option<(usize, SrcId, u64)>> {
        let e = self.ep_ref(me, ep)?;
        if e.failed {
            return Err(failed_ep());
        }
        if !self.has_room(me, e.target) {
            return Ok(None);
        }
        Ok(Some((e.target, e.src, e.uid)))
    }

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
        let Some((to, src, uid)) = self.sendable(me, ep)? else {
            return Ok(Posted::NoResource);
        };
        let mut data = Vec::with_capacity(len);
        fill(&mut data);
        let slot = self.transmit(me, to, src, id, op, &data);
        self.occupy(me, to, data.len());
        let body = Body::Am {
            id,
            op,
            data,
            token,
            dropped: slot.dropped,
        };
        let packet = Packet {
            from: me,
            ep: Some(uid),
            to,
            src,
            body,
        };
        self.wire.insert((slot.arrival, slot.seq), packet);
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
}

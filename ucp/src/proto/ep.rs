//! Protocol endpoints: their lanes, selection tables and send queue, and
//! what happens to their requests when one fails.
//!
//! The worker creates the transport endpoints of a new endpoint's lanes
//! (`worker/connect.rs`) and hands them to [`Core::add_ep`], which builds
//! the selection tables and queues the `WIREUP` message.

use super::core::Core;
use super::select::{EpLanes, LaneInfo, Op as SelOp, SelectionTable};
use super::wire::FIRST_HDR;
use crate::request::Kind;
use crate::ucs::slab::SlabId;
use crate::uct::{Caps, EpId, IfaceAttr};
use crate::{Error, Result};
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::sync::Arc;

/// Transport-level settings of an endpoint, from its lane's iface.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EpConfig {
    /// Largest payload sent with `am_short` (after the 8-byte tag).
    pub(crate) max_short: usize,
    /// Largest `am_bcopy` total (header + fragment).
    pub(crate) max_bcopy: usize,
    /// Largest zero-copy fragment, 0 if the lane has no `am_zcopy`.
    pub(crate) max_zcopy: usize,
}

impl EpConfig {
    /// The settings for an endpoint whose active message lane has `a`.
    pub(crate) fn of(a: &IfaceAttr) -> EpConfig {
        let zcopy = a.caps.contains(Caps::AM_ZCOPY) && a.max_hdr >= FIRST_HDR + 8 && a.max_iov >= 1;
        EpConfig {
            max_short: if a.caps.contains(Caps::AM_SHORT) {
                a.max_short
            } else {
                0
            },
            max_bcopy: a.max_bcopy,
            max_zcopy: if zcopy { a.max_zcopy } else { 0 },
        }
    }
}

/// An endpoint's lanes as (iface, transport endpoint): kept inline for
/// the usual one.
pub(crate) type LaneEps = SmallVec<[(usize, EpId); 1]>;

/// A protocol endpoint.
#[derive(Debug)]
pub(crate) struct EpState {
    pub(crate) iface: usize,
    pub(crate) uct_ep: EpId,
    /// Every lane as (iface, transport endpoint), in the order of the
    /// selection's lane indexes; the first is `(iface, uct_ep)`, which
    /// carries active messages. Further lanes move rendezvous data, and
    /// the last may be the atomic lane (`worker/atomic_lane.rs`), which
    /// selection does not see.
    pub(crate) lanes: LaneEps,
    /// Per lane, in the order of `lanes`: the name of the memory domain
    /// that owns the lane's remote iface (from the peer's address), under
    /// which the peer's packed remote keys carry the key for the lane.
    /// (Interned: every endpoint to peers of one kind shares the names.)
    pub(crate) remote_mds: SmallVec<[Arc<str>; 1]>,
    /// Sends waiting for transport resources, in posting order.
    pub(crate) queue: VecDeque<SlabId>,
    /// Per lane (bit `i` for `lanes[i]`): the transport was asked to say
    /// when the lane has room, and has not yet (`room.rs`).
    pub(crate) awaiting: u64,
    /// Set once the endpoint failed; every later operation fails with it.
    /// (Boxed: rare, and large next to the other fields.)
    pub(crate) failed: Option<Box<Error>>,
    /// It failed because the peer closed its end (`EP_CLOSE`), not
    /// because the peer or the path broke.
    pub(crate) closed_by_peer: bool,
    /// Peer error mode: its failure is reported (`Reports::ep_failures`),
    /// to this handler if it has one.
    pub(crate) report_failure: bool,
    /// The endpoint's wireup waits in `queue` for its first operation
    /// (`ctrl.rs`, [`Core::wake_ep`]).
    pub(crate) announce_due: bool,
    pub(crate) on_error: Option<Box<crate::request::OnError>>,
    /// The remote worker's uuid.
    pub(crate) remote_uuid: u64,
    /// Protocol by message size: tag send, synchronous tag send.
    pub(crate) tables: [Arc<SelectionTable>; 2],
    /// Tag sends shorter than this go out with eager short
    /// (`tables[0].short_end`): the fast path needs no lookup.
    pub(crate) short_end: usize,
    /// Stream offset of the next byte to send.
    pub(crate) stream_tx: u64,
    /// The receiving half of the stream, once used.
    pub(crate) stream: Option<Box<crate::proto::stream_rx::StreamRx>>,
    /// Keepalive rounds since the peer was last heard (`keepalive.rs`).
    pub(crate) ka_missed: u32,
    /// Eager credit, sending and receiving (`credit.rs`).
    pub(crate) credit: super::credit::EagerCredit,
    /// Data lanes not connected yet (`lazy_lanes.rs`); their entries in
    /// `lanes` hold [`super::lazy_lanes::LAZY`].
    /// (Boxed, so that the usual endpoint without any pays 8 bytes.)
    #[allow(clippy::box_collection)]
    pub(crate) lazy: Option<Box<Vec<super::lazy_lanes::LazyLane>>>,
    /// Whether the endpoint has its own send path, on a worker that
    /// threads share (`send_gate.rs`; the gate is in `Core::gates`).
    pub(crate) gate: super::send_gate::GateMark,
}

/// The endpoints to one remote worker, oldest first: nearly always one,
/// kept without an allocation of its own.
#[derive(Debug)]
pub(crate) enum UuidEps {
    One(SlabId),
    /// (Boxed: the map entry of the usual single endpoint stays small.)
    #[allow(clippy::box_collection)]
    Many(Box<Vec<SlabId>>),
}

impl UuidEps {
    fn iter(&self) -> impl Iterator<Item = SlabId> + '_ {
        let (one, many) = match self {
            UuidEps::One(id) => (Some(*id), &[][..]),
            UuidEps::Many(v) => (None, &v[..]),
        };
        one.into_iter().chain(many.iter().copied())
    }

    fn push(&mut self, id: SlabId) {
        match self {
            UuidEps::One(first) => *self = UuidEps::Many(Box::new(vec![*first, id])),
            UuidEps::Many(v) => v.push(id),
        }
    }

    /// Removes `id`; whether none is left.
    fn remove(&mut self, id: SlabId) -> bool {
        match self {
            UuidEps::One(first) => *first == id,
            UuidEps::Many(v) => {
                v.retain(|&x| x != id);
                v.is_empty()
            }
        }
    }
}

impl Core {
    /// `name`, interned: the remote domain names of all endpoints share
    /// one allocation per distinct name.
    pub(crate) fn intern_md(&mut self, name: &str) -> Arc<str> {
        if let Some(n) = self.md_names.iter().find(|n| &***n == name) {
            return Arc::clone(n);
        }
        let n: Arc<str> = name.into();
        self.md_names.push(Arc::clone(&n));
        n
    }

    /// A working endpoint to the worker with `uuid`, if there is one.
    /// A lookup by uuid, not a scan: endpoint creation stays flat in the
    /// number of endpoints.
    pub(crate) fn find_ep(&self, uuid: u64) -> Option<SlabId> {
        self.uuid_eps.get(&uuid)?.iter().find(|&id| {
            self.eps
                .get(id)
                .is_some_and(|e| e.remote_uuid == uuid && e.failed.is_none())
        })
    }

    /// Removes endpoint `ep` from the worker's tables (not its lanes).
    pub(crate) fn remove_ep(&mut self, ep: SlabId) -> Option<EpState> {
        self.gate_remove(ep);
        let st = self.eps.remove(ep)?;
        self.ep_sockaddrs.remove(&ep);
        self.credit_forget(&st.credit);
        if let Some(ids) = self.uuid_eps.get_mut(&st.remote_uuid) {
            if ids.remove(ep) {
                self.uuid_eps.remove(&st.remote_uuid);
            }
        }
        Some(st)
    }

    /// What selection sees of local iface `i`, named `name`, with `attr`:
    /// its attributes, with the zero-copy operations rendezvous cannot use
    /// without registration removed, and the registration cost of its
    /// memory domain.
    pub(crate) fn lane_info(&self, name: String, attr: &IfaceAttr, i: usize) -> LaneInfo {
        let mut info = LaneInfo::from_attr(name, attr);
        match self.iface_md.get(i).and_then(|&m| self.ctx.md(m)) {
            Some(md) if md.can_register() => {
                let c = md.reg_cost();
                info.reg_cost = super::select::Linear { c0: c.c0, c1: c.c1 };
            }
            _ => {
                info.caps.remove(Caps::GET_ZCOPY | Caps::PUT_ZCOPY);
                info.max_get_zcopy = 0;
                info.max_put_zcopy = 0;
            }
        }
        info
    }

    /// Makes a protocol endpoint over `lanes` (as (iface, transport
    /// endpoint), the first carrying active messages), described for
    /// selection by `infos`, to the worker `remote_uuid`, and queues its
    /// wireup. Fails if selection has no protocol for some message size;
    /// the caller then destroys the transport endpoints.
    pub(crate) fn add_ep(
        &mut self,
        lanes: Vec<(usize, EpId)>,
        remote_mds: Vec<Arc<str>>,
        infos: Vec<LaneInfo>,
        cfg: EpConfig,
        remote_uuid: u64,
    ) -> Result<SlabId> {
        let Some(&(iface, uct_ep)) = lanes.first() else {
            return Err(Error::InvalidParam("an endpoint needs a lane".into()));
        };
        let lanes_info = EpLanes::new(infos);
        let mut table = |op| {
            self.select
                .get(&lanes_info, op)
                .map_err(|e| Error::Unsupported(format!("no protocol for some message sizes: {e}")))
        };
        let tables = [table(SelOp::TagSend)?, table(SelOp::TagSendSync)?];
        for t in &tables {
            for note in t.notes() {
                tracing::info!("protocol selection: {note}");
            }
            if self.proto_info {
                eprintln!("endpoint to worker {remote_uuid:#x}:\n{t}");
            }
        }
        if self.ep_cfgs.len() <= iface {
            self.ep_cfgs.resize(iface + 1, cfg);
        }
        self.ep_cfgs[iface] = cfg;
        let id = self.eps.insert(EpState {
            iface,
            uct_ep,
            lanes: lanes.iter().copied().collect(),
            remote_mds: remote_mds.into_iter().collect(),
            queue: Default::default(),
            awaiting: 0,
            failed: None,
            closed_by_peer: false,
            report_failure: false,
            on_error: None,
            remote_uuid,
            short_end: tables[0].short_end(cfg.max_short),
            tables,
            stream_tx: 0,
            stream: None,
            ka_missed: 0,
            credit: Default::default(),
            lazy: None,
            announce_due: false,
            gate: Default::default(),
        });
        match self.uuid_eps.get_mut(&remote_uuid) {
            Some(ids) => ids.push(id),
            None => {
                self.uuid_eps.insert(remote_uuid, UuidEps::One(id));
            }
        }
        for &(i, e) in &lanes {
            if e != super::lazy_lanes::LAZY {
                self.set_lane_ep(i, e, Some(id));
            }
        }
        self.announce(id);
        self.credit_new_ep(id);
        Ok(id)
    }

    /// Fails the sends queued on endpoint `ep` and marks it failed.
    pub(crate) fn fail_ep(&mut self, ep: SlabId, err: Error) {
        self.gate_close(ep);
        let Some(state) = self.eps.get_mut(ep) else {
            return;
        };
        if state.failed.is_none() {
            tracing::debug!("endpoint {:?} failed: {err}", ep);
            state.failed = Some(Box::new(err.clone()));
            if state.report_failure {
                let h = state.on_error.take();
                self.done.ep_failures.push((ep, err.clone(), h.map(|b| *b)));
            }
        }
        let queue = std::mem::take(&mut state.queue);
        for id in queue {
            self.fail_send(id, err.clone());
        }
        // Synchronous sends that left but wait for the receiver's answer.
        let waiting: Vec<SlabId> = self
            .reqs
            .iter()
            .filter(|(_, r)| {
                matches!(&r.kind, Kind::Send(s) if s.ep == ep
                    && ((s.sync == crate::request::SyncState::AwaitAck)
                        || s.rndv.awaits_peer()))
            })
            .map(|(id, _)| id)
            .collect();
        for id in waiting {
            self.fail_send(id, err.clone());
        }
        self.fail_rma(ep, &err);
        self.fail_reads_on(ep, &err);
        self.fail_streams(ep, &err);
        self.src_eps.retain(|_, e| *e != ep);
    }
}

#[cfg(test)]
mod tests {
    use super::UuidEps;
    use crate::ucs::slab::Slab;

    #[test]
    fn endpoint_state_stays_small() {
        // Per endpoint, at ten thousand of them: every byte shows in the
        // memory per endpoint (`rucx-scale`).
        let sizes = (
            std::mem::size_of::<super::EpState>(),
            std::mem::size_of::<UuidEps>(),
            std::mem::size_of::<super::LaneEps>(),
        );
        eprintln!("sizes {sizes:?}");
        assert!(sizes.0 <= 256, "EpState is {} bytes", sizes.0);
        assert!(sizes.1 <= 16, "UuidEps is {} bytes", sizes.1);
        assert!(
            sizes.2 <= 24,
            "one lane is kept inline in {} bytes",
            sizes.2
        );
    }

    #[test]
    fn endpoints_of_one_uuid_keep_their_order_and_empty_out() {
        let mut slab = Slab::new();
        let (a, b, c) = (slab.insert(1), slab.insert(2), slab.insert(3));
        let mut ids = UuidEps::One(a);
        assert_eq!(ids.iter().collect::<Vec<_>>(), vec![a]);
        ids.push(b);
        ids.push(c);
        assert_eq!(ids.iter().collect::<Vec<_>>(), vec![a, b, c]);
        assert!(!ids.remove(b));
        assert_eq!(ids.iter().collect::<Vec<_>>(), vec![a, c]);
        assert!(!ids.remove(a));
        assert!(ids.remove(c), "none left");
        assert!(UuidEps::One(a).remove(a));
        assert!(!UuidEps::One(a).remove(b));
    }
}

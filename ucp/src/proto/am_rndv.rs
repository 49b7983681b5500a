//! Rendezvous active messages: a large message's data stays in the
//! sender's buffer until the receiver's handler (or the program, later)
//! receives it into a buffer of its choosing, as UCX's `ucp_am_send_nbx`
//! with `UCP_AM_SEND_FLAG_RNDV` and `ucp_am_recv_data_nbx`.
//!
//! The sender makes a tag rendezvous send whose request to send goes out
//! wrapped in `AM_USER_RTS` (`am_wire::AmRts`) with the handler id, flags
//! and user header. The receiver unwraps it, decodes the wrapped request
//! as the tag protocol does, and instead of matching it keeps it as a
//! probed message (`probed.rs`) that the handler's descriptor names;
//! receiving the descriptor is receiving that message, by whichever
//! rendezvous (get, put, active messages) the sender chose.

use super::am_state::{AmArrival, AmRtsIn};
use super::am_wire::{AmRts, AM_MAX, FLAG_REPLY, FLAG_STREAM};
use super::core::{AckTo, Core, Rts};
use super::eager_tx::Started;
use super::lanes::Lanes;
use super::select::ProtocolId;
use super::wire::{AM_RNDV_RTS, AM_RNDV_RTS_GET, AM_RNDV_RTS_PUT};
use crate::request::buf::SendBuf;
use crate::request::SyncState;
use crate::request::{
    AmPhase, AmSendInfo, GetPhase, Kind, Op, PutPhase, Request, RndvPhase, SendState,
};
use crate::ucs::slab::SlabId;
use crate::ucs::PeerMisbehaved;
use crate::uct::SrcId;
use crate::{Error, Result};

/// Room kept in a copy send for the wrapped request to send and its
/// packed key, beside the user header.
const RTS_ROOM: usize = 32 + 512;

/// How an active message goes (`AmParams`' forcing flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AmProto {
    /// As the endpoint's selection table says for the data's size.
    Auto,
    /// Eagerly, copied, whatever the size.
    Eager,
    /// By rendezvous, whatever the size.
    Rndv,
}

impl Core {
    /// Whether an active message of `len` data bytes on `ep` goes by
    /// rendezvous, and by which phase it starts.
    fn am_rndv_phase(&self, ep: SlabId, len: usize, how: AmProto) -> Option<RndvPhase> {
        let st = self.eps.get(ep)?;
        if len == 0 {
            // Nothing to fetch: an empty message always goes eagerly.
            return None;
        }
        let proto = st.tables[0].lookup(len).proto;
        let phase = match proto {
            ProtocolId::RndvGetZcopy => RndvPhase::Get(GetPhase::Rts),
            ProtocolId::RndvPutZcopy => RndvPhase::Put(PutPhase::Rts),
            // Forced below the threshold: active messages work on any lane.
            _ => RndvPhase::Am(AmPhase::Rts),
        };
        let rndv = matches!(
            proto,
            ProtocolId::RndvGetZcopy | ProtocolId::RndvPutZcopy | ProtocolId::RndvAm
        );
        match how {
            AmProto::Rndv => Some(phase),
            AmProto::Auto if rndv => Some(phase),
            _ => None,
        }
    }

    /// Whether an active message of `len` data bytes on `ep` goes by
    /// rendezvous.
    pub(crate) fn am_is_rndv(&self, ep: SlabId, len: usize, how: AmProto) -> bool {
        self.am_rndv_phase(ep, len, how).is_some()
    }

    /// The length of probed message `pid`, if it is still there.
    pub(crate) fn probed_len(&self, pid: SlabId) -> Option<usize> {
        self.probed.get(pid)?.msg.as_ref().map(|u| u.total)
    }

    /// Sends active message `id` with `header` and the data in `buf`.
    /// Eager messages are copied (`buf` may go once this returns);
    /// a rendezvous one reads `buf` until the request completes.
    pub(crate) fn am_start(
        &mut self,
        tx: &mut dyn Lanes,
        ep: SlabId,
        (id, header, buf): (u16, &[u8], SendBuf),
        (reply, how): (bool, AmProto),
        op: Op,
    ) -> Result<Started> {
        if header.is_empty() && how != AmProto::Rndv {
            if let Some(done) = self.am_send_short(tx, ep, id, &buf, reply) {
                if done.is_ok() && self.gates.is_some() {
                    self.gate_top_up(tx, ep);
                }
                return done;
            }
        }
        self.wake_ep(tx, ep);
        let Some(st) = self.eps.get(ep) else {
            return Err(Error::InvalidHandle);
        };
        if let Some(e) = &st.failed {
            return Err(Error::clone(e));
        }
        let Some(rndv) = self.am_rndv_phase(ep, buf.len(), how) else {
            return self.am_send(tx, ep, id, (header, buf.slice(0, buf.len())), reply, op);
        };
        if op.immediate {
            return Err(Error::NoResource);
        }
        let max_hdr = self.ep_cfgs[st.iface].max_bcopy.saturating_sub(RTS_ROOM);
        if header.len() > max_hdr || buf.len() as u64 > AM_MAX {
            return Err(Error::Limit {
                op: "rendezvous active message header",
                len: header.len(),
                max: max_hdr,
            });
        }
        let am = AmSendInfo {
            id,
            flags: if reply { FLAG_REPLY } else { 0 },
            header: header.to_vec(),
        };
        self.rndv_wrapped_send(tx, (ep, buf), rndv, am, op)
    }

    /// Starts rendezvous send `buf` on `ep` from phase `rndv`, its request
    /// to send wrapped by `am` (an active message's, or a stream's).
    pub(crate) fn rndv_wrapped_send(
        &mut self,
        tx: &mut dyn Lanes,
        (ep, buf): (SlabId, SendBuf),
        rndv: RndvPhase,
        am: AmSendInfo,
        op: Op,
    ) -> Result<Started> {
        self.next_msg_id += 1;
        let rid = self.reqs.insert(Request::new(
            Kind::Send(SendState {
                ep,
                tag: 0,
                buf,
                offset: 0,
                msg_id: self.next_msg_id,
                zcopy_inflight: 0,
                error: None,
                sync: SyncState::No,
                zcopy: false,
                rndv,
                memh: None,
                stream: false,
                am: Some(Box::new(am)),
            }),
            op,
        ));
        self.queue_send(tx, ep, rid)
    }

    /// An `AM_USER_RTS` arrived from `src`.
    pub(crate) fn rx_am_rts(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let (rts, header, inner) = AmRts::decode(data)?;
        self.am_rts = Some(AmRtsIn {
            rts,
            header: header.to_vec(),
        });
        let r = match rts.inner {
            AM_RNDV_RTS => self.rx_rts(src, inner, false),
            AM_RNDV_RTS_PUT => self.rx_rts(src, inner, true),
            AM_RNDV_RTS_GET => self.rx_rts_get(src, inner),
            other => Err(PeerMisbehaved::UnknownId(other)),
        };
        // Left if the wrapped request was refused before it arrived.
        self.am_rts = None;
        r
    }

    /// The wrapped request of `am` arrived: keep it for the handler.
    pub(crate) fn am_rts_arrived(&mut self, am: AmRtsIn, total: usize, to: AckTo, kind: Rts) {
        if am.rts.flags & FLAG_STREAM != 0 {
            // Not for a handler: a large stream send.
            return self.stream_rts_arrived(am, total, to, kind);
        }
        if total as u64 > AM_MAX {
            // No sender announces more; the data would be fetched (or
            // discarded) into a buffer of that size.
            tracing::warn!(
                "rendezvous active message of {total} bytes (over {AM_MAX}) from source {}: dropped",
                to.src.0
            );
            return;
        }
        let pid = self.probe_rts(total, to, kind);
        let reply_from = (am.rts.flags & FLAG_REPLY != 0).then_some((to.iface as u32, to.src));
        let hdr_len = am.rts.hdr_len;
        self.done.am_arrivals.push(AmArrival {
            id: am.rts.id,
            bytes: am.header.into(),
            hdr_len,
            reply_from,
            rndv: Some(Box::new((pid, total))),
        });
    }
}

//! What the protocols ask the worker to do once an iface's `progress`
//! has returned.
//!
//! Protocol code runs inside an iface's `progress` (as its sink) or inside
//! an API call, where it may not hold the ifaces; work that needs them is
//! recorded as a [`Command`] in the worker's one queue and carried out, in
//! the order recorded, by the executor (`worker/exec.rs`) right after the
//! iface returns. Commands recorded while carrying one out join the end of
//! the queue and run in the same pass.

use crate::proto::core::{AckTo, Core, PutOffer, RemoteBuf};
use crate::proto::lanes::Lanes;
use crate::proto::wire::AM_SYNC_ACK;
use crate::rma::wire::AM_RMA_REPLY;
use crate::ucs;
use crate::ucs::slab::SlabId;
use crate::uct::{EpId, SrcId};
use crate::wireup::address::WorkerAddress;
use crate::Error;

/// One piece of deferred protocol work.
#[derive(Debug)]
pub(crate) enum Command {
    /// Transport endpoint `uct_ep` of iface `iface` has room again: resume
    /// what waits on it.
    Resume { iface: usize, uct_ep: EpId },
    /// Transport endpoint `uct_ep` of iface `iface` failed: fail the
    /// protocol endpoint it serves.
    FailLane {
        iface: usize,
        uct_ep: EpId,
        error: ucs::Error,
    },
    /// The worker behind source `src` of iface `iface` announced itself:
    /// find or make the endpoint back to it.
    Wireup {
        iface: usize,
        src: SrcId,
        addr: WorkerAddress,
    },
    /// A receive matched a synchronous send: acknowledge it.
    AckSync(AckTo),
    /// Answer an emulated one-sided operation from source `src`.
    RmaReply {
        iface: usize,
        src: SrcId,
        msg: Vec<u8>,
    },
    /// Ask the sender `to` for the data of receive `rreq` as active
    /// messages (`RNDV_RTR`).
    SendRtr { to: AckTo, rreq: u64 },
    /// The receiver of send `sreq` asked for its data (`RNDV_RTR`).
    DataRequested { sreq: u64, rreq: u64 },
    /// Read the sender's buffer into matched receive `req`.
    StartGet {
        req: SlabId,
        to: AckTo,
        rb: RemoteBuf,
    },
    /// Every read of receive `req` has completed.
    ReadsDone(SlabId),
    /// Offer matched receive `rreq`'s buffer to sender `to` for its
    /// writes (`RNDV_RTR_PUT`).
    OfferBuffer { to: AckTo, rreq: u64 },
    /// A receiver offered its buffer: write into it.
    StartPut(PutOffer),
    /// Every write of put send `id` completed: tell the receiver (`ATP`),
    /// then complete.
    SendAtp(SlabId),
}

impl Core {
    /// Carries out command `c` through `tx`. [`Command::Wireup`], which
    /// needs the ifaces, is the executor's own and ignored here.
    pub(crate) fn execute(&mut self, tx: &mut dyn Lanes, c: Command) {
        match c {
            Command::Resume { iface, uct_ep } => {
                let Some(ep) = self.lane_ep(iface, uct_ep) else {
                    return;
                };
                if let Some(s) = self.eps.get_mut(ep) {
                    s.waiting = false;
                }
                self.resume_ep(tx, ep);
                if !self.get_plans.is_empty() {
                    self.resume_gets(tx, ep);
                }
                if self.rma_parked > 0 {
                    self.resume_rma(tx);
                }
            }
            Command::FailLane {
                iface,
                uct_ep,
                error,
            } => {
                if let Some(ep) = self.lane_ep(iface, uct_ep) {
                    self.fail_ep(ep, Error::endpoint(error));
                }
            }
            Command::Wireup { .. } => {}
            Command::AckSync(ack) => match self.src_eps.get(&(ack.iface, ack.src)) {
                Some(&ep) => {
                    let d = ack.sreq.to_le_bytes().to_vec();
                    self.send_ctrl(tx, ep, AM_SYNC_ACK, d);
                }
                None => tracing::warn!("no endpoint to acknowledge a synchronous send on"),
            },
            Command::RmaReply { iface, src, msg } => match self.src_eps.get(&(iface, src)) {
                Some(&ep) => self.send_ctrl(tx, ep, AM_RMA_REPLY, msg),
                None => tracing::warn!("no endpoint to answer a one-sided operation on"),
            },
            Command::SendRtr { to, rreq } => self.send_rtr(tx, to, rreq),
            Command::DataRequested { sreq, rreq } => self.data_requested(tx, sreq, rreq),
            Command::StartGet { req, to, rb } => self.start_get(tx, req, to, rb),
            Command::ReadsDone(req) => self.reads_done(tx, req),
            Command::OfferBuffer { to, rreq } => self.answer_put(tx, to, SlabId::from_u64(rreq)),
            Command::StartPut(offer) => self.start_put(tx, offer),
            Command::SendAtp(id) => self.send_atp(tx, id),
        }
    }
}

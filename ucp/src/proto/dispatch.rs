//! Hands each [`Command`] to the protocol that carries it out, through the
//! [`Lanes`] of the worker's ifaces (wireup, which needs the ifaces
//! themselves, is the executor's own: `worker/exec.rs`).

use crate::proto::command::Command;
use crate::proto::core::Core;
use crate::proto::lanes::Lanes;
use crate::rma::wire::AM_RMA_REPLY;
use crate::ucs::slab::SlabId;
use crate::Error;

impl Core {
    /// Carries out command `c` through `tx`. [`Command::Wireup`] and
    /// [`Command::AwaitRoom`], which need the ifaces, are the executor's
    /// own and ignored here.
    pub(crate) fn execute(&mut self, tx: &mut dyn Lanes, c: Command) {
        match c {
            Command::Resume { iface, uct_ep } => {
                let Some(ep) = self.room_again(iface, uct_ep) else {
                    return;
                };
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
            // The executor's own.
            Command::Wireup { .. } | Command::AwaitRoom { .. } => {}
            Command::AckSync(ack) => self.ack_sync(tx, ack),
            Command::KeepaliveAnswer { ep } => self.keepalive_answer(tx, ep),
            Command::CreditRequest {
                iface,
                src,
                sent,
                need,
            } => self.credit_requested(tx, (iface, src), (sent, need)),
            Command::CreditGranted { iface, src, limit } => {
                self.credit_granted((iface, src), limit)
            }
            Command::CreditGrant { ep } => self.credit_grant(tx, ep),
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
            Command::AmoStep(id) => self.push_rma_amo(tx, id),
        }
    }
}

//! The executor: carries out the protocols' [`Command`]s with the ifaces.

use super::ifaces::Ifaces;
use crate::proto::command::Command;
use crate::proto::core::Core;
use crate::proto::wire::AM_SYNC_ACK;
use crate::rma::wire::AM_RMA_REPLY;
use crate::ucs::slab::SlabId;
use crate::Error;

impl Core {
    /// Whether commands wait to be carried out.
    #[inline]
    pub(crate) fn has_commands(&self) -> bool {
        !self.commands.is_empty()
    }

    /// Carries out every queued command, in order, including those queued
    /// meanwhile. Returns how many it carried out.
    pub(crate) fn run_commands(&mut self, ifaces: &mut Ifaces) -> usize {
        let mut n = 0;
        while let Some(c) = self.commands.pop_front() {
            n += 1;
            self.execute(ifaces, c);
        }
        n
    }

    fn execute(&mut self, ifaces: &mut Ifaces, c: Command) {
        match c {
            Command::Resume { iface, uct_ep } => {
                let Some(ep) = self.lane_ep(iface, uct_ep) else {
                    return;
                };
                if let Some(s) = self.eps.get_mut(ep) {
                    s.waiting = false;
                }
                self.resume_ep(ifaces, ep);
                if !self.get_plans.is_empty() {
                    self.resume_gets(ifaces, ep);
                }
                if self.rma_parked > 0 {
                    self.resume_rma(ifaces);
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
            Command::Wireup { iface, src, addr } => match self.wireup_peer(ifaces, &addr) {
                Ok(ep) => {
                    self.src_eps.insert((iface, src), ep);
                }
                Err(e) => tracing::warn!("no endpoint back to worker {:#x}: {e}", addr.uuid),
            },
            Command::AckSync(ack) => match self.src_eps.get(&(ack.iface, ack.src)) {
                Some(&ep) => {
                    let d = ack.sreq.to_le_bytes().to_vec();
                    self.send_ctrl(ifaces, ep, AM_SYNC_ACK, d);
                }
                None => tracing::warn!("no endpoint to acknowledge a synchronous send on"),
            },
            Command::RmaReply { iface, src, msg } => match self.src_eps.get(&(iface, src)) {
                Some(&ep) => self.send_ctrl(ifaces, ep, AM_RMA_REPLY, msg),
                None => tracing::warn!("no endpoint to answer a one-sided operation on"),
            },
            Command::SendRtr { to, rreq } => self.send_rtr(ifaces, to, rreq),
            Command::DataRequested { sreq, rreq } => self.data_requested(ifaces, sreq, rreq),
            Command::StartGet { req, to, rb } => self.start_get(ifaces, req, to, rb),
            Command::ReadsDone(req) => self.reads_done(ifaces, req),
            Command::OfferBuffer { to, rreq } => {
                self.answer_put(ifaces, to, SlabId::from_u64(rreq))
            }
            Command::StartPut(offer) => self.start_put(ifaces, offer),
            Command::SendAtp(id) => self.send_atp(ifaces, id),
        }
    }
}

//! Synchronous sends (`MPI_Ssend`): the receiver acknowledges the match.
//!
//! A synchronous send carries its request id (`EAGER_SYNC_*`, or the
//! rendezvous request to send). Whichever way the receiver matches it,
//! [`Core::matched_sync`] records a [`Command::AckSync`]; carrying it out
//! sends `SYNC_ACK` back on the endpoint that answers the sender
//! ([`Core::ack_sync`]). The sender's request, in
//! `SyncState::AwaitAck` until then,
//! completes once the acknowledgement arrived and its data left
//! ([`Core::sync_acked`]).

use super::command::Command;
use super::core::{AckTo, Core};
use super::lanes::Lanes;
use super::wire::{self, AM_SYNC_ACK};
use crate::request::{Kind, Request};
use crate::ucs::slab::SlabId;
use crate::ucs::PeerMisbehaved;

impl Core {
    /// A receive matched a message; `ack` names its synchronous sender, if
    /// it has one, to acknowledge.
    #[inline]
    pub(crate) fn matched_sync(&mut self, ack: Option<AckTo>) {
        if let Some(a) = ack {
            self.commands.push_back(Command::AckSync(a));
        }
    }

    /// Sends the acknowledgement `ack` names.
    pub(crate) fn ack_sync(&mut self, tx: &mut dyn Lanes, ack: AckTo) {
        match self.src_eps.get(&(ack.iface, ack.src)) {
            Some(&ep) => {
                let d = ack.sreq.to_le_bytes().to_vec();
                self.send_ctrl(tx, ep, AM_SYNC_ACK, d);
            }
            None => tracing::warn!("no endpoint to acknowledge a synchronous send on"),
        }
    }

    /// A `SYNC_ACK` arrived.
    pub(crate) fn rx_sync_ack(&mut self, data: &[u8]) -> Result<(), PeerMisbehaved> {
        wire::decode_ack(data).map(|r| self.sync_acked(SlabId::from_u64(r)))
    }

    /// The receiver matched synchronous send `id` (from the wire: may be
    /// stale or forged, in which case nothing happens).
    pub(crate) fn sync_acked(&mut self, id: SlabId) {
        if let Some(Request {
            kind: Kind::Send(s),
            ..
        }) = self.reqs.get_mut(id)
        {
            if s.sync.is_sync() {
                s.sync.ack();
                self.finish_send(id);
            }
        }
    }
}

//! Closing an endpoint in flush mode, the protocol side: once its sends
//! have left, the closing side tells the peer (`EP_CLOSE`), whose endpoint
//! back then fails with a reset (reported in peer mode), as UCX's
//! `ucp_ep_close_nbx` without `UCP_EP_CLOSE_FLAG_FORCE` does.

use super::core::Core;
use super::lanes::Lanes;
use crate::ucs::slab::SlabId;
use crate::ucs::{self, PeerMisbehaved};
use crate::uct::{AmId, SrcId};
use crate::Error;

/// Active message id of the close announcement (no payload).
pub(crate) const AM_EP_CLOSE: AmId = 25;

impl Core {
    /// Whether endpoint `ep` still has sends or one-sided operations that
    /// have not left.
    pub(crate) fn ep_busy(&self, ep: SlabId) -> bool {
        self.eps.get(ep).is_some_and(|s| !s.queue.is_empty())
            || self.rndv_sends_on(ep)
            || self.rma_waiting(Some(ep))
    }

    /// Tells the peer of `ep` that this side closes it (unless the peer
    /// never heard of it).
    pub(crate) fn announce_close(&mut self, tx: &mut dyn Lanes, ep: SlabId) {
        self.gate_close(ep);
        if self.drop_deferred(ep) {
            return;
        }
        self.send_ctrl(tx, ep, AM_EP_CLOSE, Vec::new());
    }

    /// An `EP_CLOSE` arrived from `src`: the endpoint back fails.
    pub(crate) fn rx_ep_close(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        if !data.is_empty() {
            return Err(PeerMisbehaved::Invalid {
                what: "endpoint close",
                detail: format!("{} bytes of payload", data.len()),
            });
        }
        if let Some(&ep) = self.src_eps.get(&(self.cur_iface, src)) {
            let e = ucs::Error::ConnectionLost {
                peer: format!("endpoint {ep:?}"),
                reason: "closed by the peer".into(),
            };
            self.fail_ep(ep, Error::endpoint(e));
            if let Some(st) = self.eps.get_mut(ep) {
                st.closed_by_peer = true;
            }
        }
        Ok(())
    }
}

//! Wireup, the protocol side: a new endpoint announces this worker's
//! address (`WIREUP`) on its lane, and an announcement that arrives asks
//! the executor to find or make the endpoint back to its sender
//! ([`Command::Wireup`]; creating transport endpoints needs the ifaces,
//! which `worker/connect.rs` holds).

use super::command::Command;
use super::core::Core;
use crate::ucs::slab::SlabId;
use crate::ucs::PeerMisbehaved;
use crate::uct::SrcId;
use crate::wireup::address::WorkerAddress;

impl Core {
    /// Marks new endpoint `ep` as owing its peer a wireup (who this worker
    /// is). The wireup is sent with the endpoint's first operation
    /// ([`Core::wake_ep`]), so that making an endpoint costs its peer
    /// nothing until it is used.
    pub(crate) fn announce(&mut self, ep: SlabId) {
        if let Some(st) = self.eps.get_mut(ep) {
            st.announce_due = true;
        }
    }

    /// A `WIREUP` arrived from `src`.
    pub(crate) fn rx_wireup(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let addr = WorkerAddress::decode(data).map_err(|e| PeerMisbehaved::Invalid {
            what: "wireup address",
            detail: e.to_string(),
        })?;
        self.commands.push_back(Command::Wireup {
            iface: self.cur_iface,
            src,
            addr,
        });
        Ok(())
    }
}

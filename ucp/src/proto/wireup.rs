//! Wireup, the protocol side: a new endpoint announces this worker's
//! address (`WIREUP`) on its lane, and an announcement that arrives asks
//! the executor to find or make the endpoint back to its sender
//! ([`Command::Wireup`]; creating transport endpoints needs the ifaces,
//! which `worker/connect.rs` holds).

use super::command::Command;
use super::core::Core;
use super::lanes::Lanes;
use super::wire::AM_WIREUP;
use crate::ucs::slab::SlabId;
use crate::ucs::PeerMisbehaved;
use crate::uct::SrcId;
use crate::wireup::address::WorkerAddress;

impl Core {
    /// Tells the peer of new endpoint `ep` who this worker is.
    pub(crate) fn announce(&mut self, tx: &mut dyn Lanes, ep: SlabId) {
        let me = self.address.clone();
        self.send_ctrl(tx, ep, AM_WIREUP, me);
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

//! The atomic lane of an endpoint.
//!
//! Device memory (`rma/amo.rs`) takes atomics executed by a device only,
//! so an initiator needs a lane whose iface posts them. An endpoint whose
//! active-message lane is shared memory, TCP or `self` (a peer of the same
//! host, or one reached over TCP) and whose rendezvous data lanes are on
//! that lane's memory domain has none. Such an endpoint gets one more
//! lane, as UCX gives every endpoint an atomic lane chosen apart from its
//! message lanes: on a local iface with device atomics to the peer's iface
//! of the same transport (an RC transport loops back through the NIC to a
//! peer of the same host), connected when an atomic first needs it
//! (`proto/lazy_lanes.rs`). It is declared when the endpoint is made, so
//! every key unpacked on the endpoint has an entry for it (`rkey.rs`).
//! Selection never sees it: it carries atomics only (and puts and gets
//! once connected, where the key's domain registered the memory).

use super::ifaces::Ifaces;
use crate::proto::core::Core;
use crate::rma::{AtomicMode, AMO_BASE as BASE};
use crate::uct::{Caps, EpId};
use crate::wireup::address::WorkerAddress;

impl Core {
    /// Whether local iface `i` posts device atomics from which every
    /// atomic is built ([`BASE`]).
    pub(crate) fn atomic_iface(&self, ifaces: &Ifaces, i: usize) -> bool {
        ifaces[i].attr().caps.contains(Caps::ATOMIC_DEVICE)
            && self
                .iface_md
                .get(i)
                .and_then(|&m| self.ctx.md(m))
                .is_some_and(|md| md.atomic_caps().contains(BASE))
    }

    /// The atomic lane for an endpoint to `addr` whose lanes are `lanes`:
    /// (local iface, remote iface), or `None` where a lane already posts
    /// device atomics, this context takes none (`RUCX_ATOMIC_MODE=cpu`),
    /// or no local iface with device atomics reaches an iface of the
    /// peer's address of its transport with them.
    pub(crate) fn atomic_lane(
        &self,
        ifaces: &Ifaces,
        addr: &WorkerAddress,
        lanes: &[(usize, EpId)],
    ) -> Option<(usize, usize)> {
        if self.ctx.config().atomic_mode == AtomicMode::Cpu
            || lanes.iter().any(|&(i, _)| self.atomic_iface(ifaces, i))
        {
            return None;
        }
        (0..ifaces.len())
            .filter(|&li| self.atomic_iface(ifaces, li))
            .find_map(|li| {
                let local = &ifaces[li];
                let ri = addr.ifaces.iter().position(|r| {
                    r.tl_name == local.tl_name()
                        && r.caps.contains(Caps::ATOMIC_DEVICE)
                        && local.is_reachable(&r.dev_addr, &r.iface_addr)
                })?;
                Some((li, ri))
            })
    }
}

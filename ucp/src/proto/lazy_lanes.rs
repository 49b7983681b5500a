//! Data lanes that connect when first used.
//!
//! An endpoint's further lanes (rendezvous data over another device of
//! the same memory domain, `worker/connect.rs`) are known at creation, so
//! selection plans with them, but their transport endpoints are created
//! only when a rendezvous first picks them: an endpoint that never sends
//! a message the selection splits over several lanes (small messages, or
//! a peer for which the model sees no gain) keeps one connection. A lane
//! that cannot be created is given up for good, with an info line, and
//! the transfer goes over the lanes that exist (lane 0 at least).
//!
//! An endpoint's atomic lane (`worker/atomic_lane.rs`) is lazy too: the
//! first device atomic that needs it connects it ([`Core::connect_lane`]).

use super::core::Core;
use super::lanes::Lanes;
use super::select::ProtocolId;
use crate::ucs::slab::SlabId;
use crate::uct::EpId;

/// What `EpState::lanes` holds for a lane not connected (yet, or ever).
pub(crate) const LAZY: EpId = EpId(u32::MAX);

/// A data lane (or the atomic lane) to connect when first used.
#[derive(Debug, Clone)]
pub(crate) struct LazyLane {
    /// Its index in the endpoint's lanes.
    pub(crate) lane: usize,
    /// The remote iface's addresses.
    pub(crate) dev_addr: Vec<u8>,
    pub(crate) iface_addr: Vec<u8>,
}

impl Core {
    /// Connects the lanes that `table` of endpoint `ep` picks for `size`
    /// bytes by `proto`, if they wait to be.
    pub(crate) fn connect_lanes(
        &mut self,
        tx: &mut dyn Lanes,
        ep: SlabId,
        table: usize,
        (size, proto): (usize, ProtocolId),
    ) {
        let Some(st) = self.eps.get_mut(ep) else {
            return;
        };
        let Some(lazy) = st.lazy.as_deref_mut() else {
            return;
        };
        let choice = st.tables[table].lookup(size);
        if choice.proto != proto {
            return;
        }
        let mut made = Vec::new();
        for (l, _) in choice.lanes.iter() {
            let Some(k) = lazy.iter().position(|z| z.lane == l) else {
                continue;
            };
            let z = lazy.swap_remove(k);
            let Some(&(iface, _)) = st.lanes.get(l) else {
                continue;
            };
            match tx.ep_create(iface, &z.dev_addr, &z.iface_addr) {
                Ok(e) => {
                    st.lanes[l] = (iface, e);
                    made.push((iface, e));
                }
                Err(e) => tracing::info!(
                    "endpoint to worker {:#x}: data lane {l} (iface {iface}) not \
                     connected ({e}); its share goes over the other lanes",
                    st.remote_uuid
                ),
            }
        }
        for (iface, e) in made {
            self.set_lane_ep(iface, e, Some(ep));
        }
    }
}

impl Core {
    /// Connects lane `lane` of endpoint `ep` if it waits to be: its
    /// transport endpoint, or `None` where the lane is not lazy (any
    /// more) or cannot be created (then it stays unconnected for good,
    /// with an info line).
    pub(crate) fn connect_lane(
        &mut self,
        tx: &mut dyn Lanes,
        ep: SlabId,
        lane: usize,
    ) -> Option<EpId> {
        let st = self.eps.get_mut(ep)?;
        let lazy = st.lazy.as_deref_mut()?;
        let k = lazy.iter().position(|z| z.lane == lane)?;
        let z = lazy.swap_remove(k);
        let &(iface, _) = st.lanes.get(lane)?;
        match tx.ep_create(iface, &z.dev_addr, &z.iface_addr) {
            Ok(e) => {
                st.lanes[lane] = (iface, e);
                self.set_lane_ep(iface, e, Some(ep));
                Some(e)
            }
            Err(e) => {
                tracing::info!(
                    "endpoint to worker {:#x}: lane {lane} (iface {iface}) not connected ({e})",
                    st.remote_uuid
                );
                None
            }
        }
    }

    /// Whether lane `lane` of endpoint `ep` waits to be connected.
    pub(crate) fn lane_is_lazy(&self, ep: SlabId, lane: usize) -> bool {
        self.eps
            .get(ep)
            .and_then(|st| st.lazy.as_deref())
            .is_some_and(|l| l.iter().any(|z| z.lane == lane))
    }
}

//! Lane selection: which local iface serves an endpoint, from the models.
//!
//! Deterministic and driven only by the numbers in `uct::IfaceAttr` and
//! the remote worker address: no transport names in the decision.

use super::address::{IfaceEntry, WorkerAddress};
use crate::uct::{Caps, Iface};

/// A chosen lane: local iface index and the remote iface entry it reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneChoice {
    /// Index of the local iface in the worker.
    pub iface: usize,
    /// Index of the remote iface in the remote address.
    pub remote: usize,
}

/// Capabilities an active-message lane needs.
pub const AM_LANE_CAPS: Caps = Caps::AM_SHORT.union(Caps::AM_BCOPY);

fn am_score(local: &dyn Iface, remote: &IfaceEntry) -> f64 {
    let l = &local.attr().model;
    l.latency.max(remote.model.latency) + l.overhead + remote.model.overhead
}

/// Picks the active-message lane: the reachable pair of ifaces with the
/// lowest latency plus overheads. `None` if nothing reaches the peer.
pub fn select_am_lane(locals: &[Box<dyn Iface>], remote: &WorkerAddress) -> Option<LaneChoice> {
    am_lane_candidates(locals, remote).first().copied()
}

/// Every reachable pair of ifaces that could carry the active-message
/// lane, best first (lowest latency plus overheads; ties in iface order),
/// so that a lane that cannot be created for this peer gives way to the
/// next.
pub fn am_lane_candidates(locals: &[Box<dyn Iface>], remote: &WorkerAddress) -> Vec<LaneChoice> {
    let mut all: Vec<(f64, LaneChoice)> = Vec::new();
    for (li, local) in locals.iter().enumerate() {
        if !local.attr().caps.contains(AM_LANE_CAPS) {
            continue;
        }
        for (ri, r) in remote.ifaces.iter().enumerate() {
            if r.tl_name != local.tl_name()
                || !r.caps.contains(AM_LANE_CAPS)
                || !local.is_reachable(&r.dev_addr, &r.iface_addr)
            {
                continue;
            }
            let choice = LaneChoice {
                iface: li,
                remote: ri,
            };
            all.push((am_score(local.as_ref(), r), choice));
        }
    }
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    all.into_iter().map(|(_, c)| c).collect()
}

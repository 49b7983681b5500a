//! Endpoint creation and wireup.
//!
//! `connect` picks the lane, creates the transport endpoint and queues a
//! `WIREUP` message carrying this worker's address as the endpoint's first
//! message. A worker that receives one learns which endpoint answers that
//! transport source, creating an endpoint back to the sender if it has none,
//! so that either side can answer the other (acknowledgements, later
//! rendezvous replies) whoever connected first.

use super::ifaces::Ifaces;
use crate::proto::core::{Core, EpConfig};
use crate::proto::lazy_lanes::{LazyLane, LAZY};
use crate::proto::select::LaneInfo;
use crate::proto::wire::FIRST_HDR;
use crate::ucs::slab::SlabId;
use crate::uct::Caps;
use crate::wireup::address::WorkerAddress;
use crate::wireup::lanes::{am_lane_candidates, LaneChoice};
use crate::{Error, Result};

impl Core {
    /// The endpoint to `addr`'s worker: an existing one, or a new one.
    pub(crate) fn wireup_peer(
        &mut self,
        ifaces: &mut Ifaces,
        addr: &WorkerAddress,
    ) -> Result<SlabId> {
        match self.find_ep(addr.uuid) {
            Some(ep) => Ok(ep),
            None => self.connect(ifaces, addr),
        }
    }

    /// Creates an endpoint to `addr`'s worker and queues its wireup. The
    /// active-message lane is the best one that can be created: when a
    /// transport cannot take this peer (a full table, no more connections)
    /// the next candidate is tried, with an info line.
    pub(crate) fn connect(&mut self, ifaces: &mut Ifaces, addr: &WorkerAddress) -> Result<SlabId> {
        let candidates = am_lane_candidates(ifaces, addr);
        if candidates.is_empty() {
            let offered: Vec<&str> = addr.ifaces.iter().map(|i| i.tl_name.as_str()).collect();
            let ours: Vec<String> = ifaces
                .iter()
                .map(|i| format!("{}/{}", i.tl_name(), i.dev_name()))
                .collect();
            return Err(Error::Unreachable(format!(
                "no local transport ({}) reaches the peer's ({})",
                ours.join(", "),
                offered.join(", ")
            )));
        }
        let mut last = None;
        for (k, &lane) in candidates.iter().enumerate() {
            match self.connect_on(ifaces, addr, lane) {
                Ok(id) => return Ok(id),
                Err(e) => {
                    let i = &ifaces[lane.iface];
                    let next = if k + 1 < candidates.len() {
                        "trying the next lane"
                    } else {
                        "no lane left"
                    };
                    tracing::info!(
                        "endpoint to worker {:#x}: lane {}/{} not created ({e}); {next}",
                        addr.uuid,
                        i.tl_name(),
                        i.dev_name()
                    );
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::Unreachable("no lane".into())))
    }

    /// Creates an endpoint to `addr`'s worker with `lane` as its
    /// active-message lane.
    fn connect_on(
        &mut self,
        ifaces: &mut Ifaces,
        addr: &WorkerAddress,
        lane: LaneChoice,
    ) -> Result<SlabId> {
        let r = &addr.ifaces[lane.remote];
        let iface = &mut ifaces[lane.iface];
        let uct_ep = iface
            .ep_create(&r.dev_addr, &r.iface_addr)
            .map_err(Error::transport)?;
        let a = iface.attr().clone();
        if a.max_bcopy <= self.address.len().max(FIRST_HDR + 8) {
            iface.ep_destroy(uct_ep);
            return Err(Error::Unsupported(format!(
                "{} max_bcopy {} too small for eager fragments",
                iface.tl_name(),
                a.max_bcopy
            )));
        }
        let cfg = EpConfig::of(&a);
        tracing::debug!(
            "endpoint to worker {:#x}: am lane {}/{}",
            addr.uuid,
            iface.tl_name(),
            iface.dev_name()
        );
        let mut lanes = vec![(lane.iface, uct_ep)];
        let mut remote_mds = vec![self.intern_md(&addr.ifaces[lane.remote].md_name)];
        let mut infos = vec![self.iface_lane_info(ifaces, lane.iface)];
        // Data lanes connect when a rendezvous first uses them
        // (`proto/lazy_lanes.rs`); selection sees them.
        let data = self.data_lanes(ifaces, addr, lane.iface, lane.remote);
        for &(li, _) in &data {
            lanes.push((li, LAZY));
            infos.push(self.iface_lane_info(ifaces, li));
        }
        // The atomic lane, where no lane posts device atomics; after the
        // lanes selection sees, connected by the first atomic that needs
        // it (`atomic_lane.rs`).
        let atomic = self.atomic_lane(ifaces, addr, &lanes);
        if let Some((li, _)) = atomic {
            lanes.push((li, LAZY));
        }
        let mut lazy = Vec::new();
        for (k, (_, ri)) in data.into_iter().chain(atomic).enumerate() {
            let r = &addr.ifaces[ri];
            lazy.push(LazyLane {
                lane: 1 + k,
                dev_addr: r.dev_addr.clone(),
                iface_addr: r.iface_addr.clone(),
            });
            remote_mds.push(self.intern_md(&r.md_name));
        }
        match self.add_ep(lanes, remote_mds, infos, cfg, addr.uuid) {
            Ok(id) => {
                if let Some(st) = self.eps.get_mut(id) {
                    st.lazy = (!lazy.is_empty()).then(|| Box::new(lazy));
                }
                Ok(id)
            }
            Err(e) => {
                ifaces[lane.iface].ep_destroy(uct_ep);
                Err(e)
            }
        }
    }

    /// What selection sees of local iface `i` (see [`Core::lane_info`]).
    fn iface_lane_info(&self, ifaces: &Ifaces, i: usize) -> LaneInfo {
        let iface = &ifaces[i];
        let name = format!("{}/{}", iface.tl_name(), iface.dev_name());
        self.lane_info(name, iface.attr(), i)
    }

    /// Further lanes for rendezvous data to `addr`: (local iface, remote
    /// iface) pairs with zero-copy put or get on other local ifaces of the
    /// active message lane's memory domain (so one key serves them all),
    /// or of its transport on another device whose domain registers
    /// memory (RDMA devices, one domain each: a rendezvous by get offers a
    /// key of each domain, one by put keeps to the first lane's), each
    /// remote iface used once, up to `RUCX_MAX_RNDV_LANES` lanes in all. Also between processes of one host over its loopback path
    /// (`Iface::loops_back`): measured on two cores, a second TCP socket
    /// there costs 256 KiB messages about 12 % and gains 1 MiB ones about
    /// 30 %, so the lanes stay (as before `loops_back` was known).
    fn data_lanes(
        &self,
        ifaces: &Ifaces,
        addr: &WorkerAddress,
        am_iface: usize,
        am_remote: usize,
    ) -> Vec<(usize, usize)> {
        let rma = Caps::PUT_ZCOPY | Caps::GET_ZCOPY;
        let max = self.select.config().rndv_lanes();
        let md = self.iface_md.get(am_iface).copied();
        if md
            .and_then(|m| self.ctx.md(m))
            .is_none_or(|m| !m.can_register())
        {
            return Vec::new();
        }
        let am_tl = ifaces[am_iface].tl_name();
        let registers = |m: Option<usize>| {
            m.and_then(|m| self.ctx.md(m))
                .is_some_and(|m| m.can_register())
        };
        let mut used = vec![am_remote];
        let mut out = Vec::new();
        for (li, local) in ifaces.iter().enumerate() {
            if out.len() + 1 >= max {
                break;
            }
            let lmd = self.iface_md.get(li).copied();
            let keyed = lmd == md || (local.tl_name() == am_tl && registers(lmd));
            if li == am_iface || !keyed || !local.attr().caps.intersects(rma) {
                continue;
            }
            let found = addr.ifaces.iter().enumerate().find(|(ri, r)| {
                !used.contains(ri)
                    && r.tl_name == local.tl_name()
                    && r.caps.intersects(rma)
                    && local.is_reachable(&r.dev_addr, &r.iface_addr)
            });
            if let Some((ri, _)) = found {
                used.push(ri);
                out.push((li, ri));
            }
        }
        out
    }
}

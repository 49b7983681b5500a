//! Which way each one-sided operation takes on an endpoint, for
//! `rucx-info -e`.

use super::AtomicMode;
use crate::uct::Caps;
use crate::{Ep, Error, Result, Worker};

/// How one kind of one-sided operation travels on an endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RmaProtocol {
    /// `put`, `get`, `atomic`, or `all, mem_alloc` (every operation on
    /// memory the peer allocated with `mem_alloc`).
    pub op: &'static str,
    /// The protocol, e.g. `zero-copy write` or `emulated (target executes)`.
    pub protocol: &'static str,
    /// The lane, `transport/device`.
    pub lane: String,
}

impl Worker {
    /// The protocol of put, get and atomics on `ep`, given that the peer
    /// mapped its memory with every memory domain of its context (what
    /// `mem_map` does). A key the peer's domain did not register falls back
    /// to the emulated way.
    pub fn ep_rma_protocols(&self, ep: Ep) -> Result<Vec<RmaProtocol>> {
        let st = self.core.eps.get(ep.0).ok_or(Error::InvalidHandle)?;
        let name = |iface: usize| {
            let i = &self.ifaces[iface];
            format!("{}/{}", i.tl_name(), i.dev_name())
        };
        let am_lane = name(st.iface);
        let zcopy = |cap: Caps| {
            st.lanes.iter().find_map(|&(iface, _)| {
                let a = self.ifaces[iface].attr();
                let md = self.core.ctx.md(*self.core.iface_md.get(iface)?)?;
                (a.caps.contains(cap) && md.can_register()).then(|| name(iface))
            })
        };
        let emulated = "emulated (target executes)";
        let mut v = Vec::new();
        for (op, cap, how) in [
            ("put", Caps::PUT_ZCOPY, "zero-copy write"),
            ("get", Caps::GET_ZCOPY, "zero-copy read"),
        ] {
            v.push(match zcopy(cap) {
                Some(lane) => RmaProtocol {
                    op,
                    protocol: how,
                    lane,
                },
                None => RmaProtocol {
                    op,
                    protocol: emulated,
                    lane: am_lane.clone(),
                },
            });
        }
        // Atomics: as the memory's owner mapped it (`amo.rs`); this
        // context's mode says what it accepts.
        let device = st.lanes.iter().find_map(|&(iface, _)| {
            let a = self.ifaces[iface].attr();
            a.caps.contains(Caps::ATOMIC_DEVICE).then(|| name(iface))
        });
        let (protocol, lane) = match (self.core.ctx.config().atomic_mode, device) {
            (AtomicMode::Cpu, _) => (emulated, am_lane),
            (AtomicMode::Device, Some(lane)) => (
                "device (others built from fetch-add and compare-and-swap)",
                lane,
            ),
            (AtomicMode::Device, None) => ("unsupported (device mode, no device lane)", am_lane),
            (AtomicMode::Guess, Some(lane)) => {
                ("device or emulated, as the target's memory says", lane)
            }
            (AtomicMode::Guess, None) => (
                "emulated (target executes; unsupported on device memory: no device lane)",
                am_lane,
            ),
        };
        v.push(RmaProtocol {
            op: "atomic",
            protocol,
            lane,
        });
        // Memory the peer allocated with mem_alloc by a domain whose memory
        // a domain here maps (a shared segment on this host): every
        // operation on it is a load, store or atomic here.
        let maps = (0..self.core.ctx.md_count()).any(|i| {
            self.core
                .ctx
                .md(i)
                .is_some_and(|m| m.rkey_ptr_ops().is_some())
        });
        if maps {
            v.push(RmaProtocol {
                op: "all, mem_alloc",
                protocol: "mapped segment",
                lane: "memory".into(),
            });
        }
        Ok(v)
    }
}

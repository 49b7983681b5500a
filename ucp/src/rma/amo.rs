//! Which atomics memory takes (`RUCX_ATOMIC_MODE`), and atomics executed
//! by a device.
//!
//! # The rule
//!
//! A word must never see device atomics and CPU atomics mixed: a NIC's
//! fetch-and-add and a CPU's `lock xadd` on the same word are not atomic
//! with respect to each other. So the choice is made per memory map, by
//! the process that owns the memory, when it maps it, and every
//! initiator follows it:
//!
//! * **cpu** memory is registered with the protocol layer for atomics and
//!   with no memory domain for them: every atomic on it is executed by
//!   its owner's CPU (emulated over active messages, or on a shared
//!   segment mapped by a peer of the same host). A device atomic on it is
//!   refused by the target's device (its registration lacks the right).
//! * **device** memory is registered for atomics with every memory domain
//!   whose device executes them ([`MemoryDomain::atomic_caps`]) and
//!   *not* with the protocol layer: an emulated atomic on it is refused
//!   by the target. Initiators post atomics on it to a lane whose iface
//!   does that operation in hardware ([`AtomicOps`]) and whose key grants
//!   the right. An operation the device lacks is built at the initiator
//!   from the device's own 64-bit fetch-and-add and compare-and-swap
//!   (`amo_built.rs`: a compare-and-swap loop on the aligned 8-byte word,
//!   for 32-bit words too), so the word still sees device atomics only.
//!   Only where no lane of the endpoint does the operation or 64-bit
//!   compare-and-swap (or a 32-bit word's 8-byte word leaves the key's
//!   range) does it fail with [`Error::Unsupported`]; it is never
//!   emulated by the target.
//!
//! The packed key says which (see `mem.rs`). `RUCX_ATOMIC_MODE` chooses,
//! as UCX's `UCX_ATOMIC_MODE` does, but for memory rather than per
//! process:
//!
//! * `cpu`: memory this context maps is cpu memory;
//! * `device`: it is device memory;
//! * `guess` (the default): device memory if some memory domain of the
//!   context has a device that executes 64-bit fetch-and-add and
//!   compare-and-swap ([`BASE`], what every other atomic is built from),
//!   as UCX's guess picks device atomics as soon as one transport has
//!   them; cpu memory otherwise. So `rc_verbs` next to shared memory, TCP,
//!   `self` or CMA means device atomics, on a NIC with atomics.
//!
//! Such a context has endpoints whose lanes have no device: the
//! active-message lane of a peer of the same host is shared memory (or
//! TCP), and the rendezvous data lanes are on that lane's memory domain
//! (`worker/connect.rs`). As UCX gives every endpoint an atomic lane apart
//! from its message lanes, such an endpoint gets one more lane
//! (`worker/atomic_lane.rs`): a local iface with device atomics to the
//! peer's iface of the same transport (RC loops back through the NIC to a
//! peer of the same host). It is declared when the endpoint is made, so
//! every key unpacked on the endpoint has its domain's key for it
//! (`rkey.rs`; device memory is registered with every domain, with atomic
//! rights where the device has atomics), and connected by the first
//! atomic that picks it (`proto/lazy_lanes.rs`): that atomic waits for the
//! connection in the transport (held, or refused with `NoResource` until
//! there is room: `push_rma_amo`), it is never emulated. Connected lanes
//! are preferred. Where the peer's address has no such iface (it has no
//! transport with device atomics that this context reaches), there is no
//! atomic lane and atomics on device memory fail with
//! [`Error::Unsupported`], saying so. A context in `cpu` mode makes no
//! atomic lane; one in `device` mode makes it too.
//!
//! On the initiator the setting is checked too: `device` refuses to
//! emulate an atomic on cpu memory, `cpu` refuses to post one on device
//! memory (both [`Error::Unsupported`], naming the mismatch).
//!
//! [`MemoryDomain::atomic_caps`]: crate::uct::MemoryDomain::atomic_caps
#![allow(unsafe_code)]

use super::amo_built::{Built, BuiltState};
use super::atomic::{AtomicOp, AtomicValue};
use super::rkey::Rkey;
use super::RmaSink;
use crate::proto::core::Core;
use crate::proto::lanes::Lanes;
use crate::proto::lazy_lanes::LAZY;
use crate::request::buf::ResultWord;
use crate::request::{Kind, Request};
use crate::ucs::slab::SlabId;
use crate::uct::{self, Access, AtomicCaps, AtomicOps, Caps, EpId, RemoteKey, Token};
use crate::{Ep, Error, Op, Posted, Result, Worker};

crate::ucs::config_enum! {
    /// Which atomics memory mapped by this context takes (like
    /// `UCX_ATOMIC_MODE`; see the `rma` module's documentation).
    pub enum AtomicMode {
        /// Atomics executed by the owner's CPU (emulated over active
        /// messages, or on a mapped shared segment).
        Cpu = "cpu",
        /// Atomics executed by the devices (RDMA atomics) only.
        Device = "device",
        /// Device if some memory domain's device executes 64-bit
        /// fetch-and-add and compare-and-swap, cpu otherwise.
        Guess = "guess",
    }
}

/// What a device must execute for `guess` to choose device memory (and
/// for an iface to carry an endpoint's atomic lane): 64-bit
/// fetch-and-add and compare-and-swap, from which every other atomic is
/// built (`amo_built.rs`).
pub(crate) const BASE: AtomicCaps = AtomicCaps::FADD64.union(AtomicCaps::CSWAP64);

/// Whether memory mapped under `mode` is device memory, given the atomic
/// operations of each memory domain of the context.
pub(crate) fn device_memory(mode: AtomicMode, mds: impl IntoIterator<Item = AtomicCaps>) -> bool {
    match mode {
        AtomicMode::Cpu => false,
        AtomicMode::Device => true,
        AtomicMode::Guess => mds.into_iter().any(|c| c.contains(BASE)),
    }
}

/// The uct operand of a protocol-layer value.
fn word(v: AtomicValue) -> uct::AtomicWord {
    match v {
        AtomicValue::U32(x) => uct::AtomicWord::U32(x),
        AtomicValue::U64(x) => uct::AtomicWord::U64(x),
    }
}

/// A lane that executes an atomic in hardware: (iface, transport
/// endpoint, the key of the lane's memory domain).
pub(crate) type DeviceLane = (usize, EpId, RemoteKey);

/// One atomic to execute: the operation, its form, operands and word.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Amo {
    pub(crate) op: AtomicOp,
    pub(crate) fetch: bool,
    pub(crate) value: AtomicValue,
    pub(crate) compare: u64,
    pub(crate) remote: u64,
}

impl Amo {
    fn name(&self) -> String {
        let w = word(self.value);
        format!("{}{}", self.op.name(self.fetch), w.width() * 8)
    }
}

impl Worker {
    /// Where atomic `a` on the memory of `rkey` goes: `None` to the
    /// owner's CPU (emulation, or a mapped segment), or a lane that does
    /// it in hardware, or builds it from the device's operations
    /// (`amo_built.rs`); an error where the memory's mode and this context's
    /// `RUCX_ATOMIC_MODE`, or the lanes, leave no way.
    pub(crate) fn amo_route(
        &mut self,
        ep: Ep,
        a: &Amo,
        rkey: &Rkey,
    ) -> Result<Option<DeviceRoute>> {
        let mode = self.core.ctx.config().atomic_mode;
        match (rkey.amo_device, mode) {
            (false, AtomicMode::Device) => Err(Error::Unsupported(format!(
                "{}: RUCX_ATOMIC_MODE=device, but the target's memory takes CPU atomics \
                 (its owner mapped it in cpu mode)",
                a.name()
            ))),
            (false, _) => Ok(None),
            (true, AtomicMode::Cpu) => Err(Error::Unsupported(format!(
                "{}: RUCX_ATOMIC_MODE=cpu, but the target's memory takes device atomics only \
                 (its owner mapped it in device mode)",
                a.name()
            ))),
            (true, _) => {
                let width = a.value.width();
                if a.remote % width as u64 != 0 {
                    return Err(Error::InvalidParam(format!(
                        "atomic on {:#x}: not aligned to {width} bytes",
                        a.remote
                    )));
                }
                rkey.check(ep, a.remote, width, Access::REMOTE_ATOMIC)?;
                self.ep_usable(ep)?;
                self.device_lane(ep, a, rkey).map(Some)
            }
        }
    }

    fn device_lane(&mut self, ep: Ep, a: &Amo, rkey: &Rkey) -> Result<DeviceRoute> {
        let st = self.core.eps.get(ep.0).ok_or(Error::InvalidHandle)?;
        let (op, w) = (a.op, word(a.value));
        // Connected lanes first, then one that waits to be (the atomic
        // lane, `worker/atomic_lane.rs`); on each, in hardware where a
        // lane does the operation itself, else built from what it does.
        let mut found = None;
        'search: for lazy in [false, true] {
            for build in [false, true] {
                for (li, &(iface, uct_ep)) in st.lanes.iter().enumerate() {
                    let Some(Some(key)) = rkey.lanes.get(li) else {
                        continue;
                    };
                    if (uct_ep == LAZY) != lazy
                        || (lazy && !self.core.lane_is_lazy(ep.0, li))
                        || !key.access.contains(Access::REMOTE_ATOMIC)
                    {
                        continue;
                    }
                    let Some(caps) = self.ifaces[iface].atomic().map(|o| o.atomic_caps()) else {
                        continue;
                    };
                    if !build && caps.offers(op, a.fetch, w) {
                        found = Some((li, iface, key.clone(), None));
                        break 'search;
                    }
                    if !build {
                        continue;
                    }
                    if let Some(b) = Built::plan(a, caps, key)? {
                        found = Some((li, iface, key.clone(), Some(b)));
                        break 'search;
                    }
                }
            }
        }
        let Some((li, iface, key, built)) = found else {
            return Err(self.no_device_lane(ep, a));
        };
        let lane_ep = st.lanes[li].1;
        let uct_ep = match lane_ep {
            // The atomic waits for the connection (the transport holds
            // it, or refuses it until then: `push_rma_amo`).
            LAZY => self
                .core
                .connect_lane(&mut self.ifaces, ep.0, li)
                .ok_or_else(|| {
                    let i = &self.ifaces[iface];
                    Error::Unsupported(format!(
                        "{}: the target's memory takes device atomics only \
                         (RUCX_ATOMIC_MODE), and this endpoint's atomic lane {}/{} could \
                         not be connected",
                        a.name(),
                        i.tl_name(),
                        i.dev_name()
                    ))
                })?,
            e => e,
        };
        Ok(match built {
            None => DeviceRoute::Direct((iface, uct_ep, key)),
            Some(b) => DeviceRoute::Built((iface, uct_ep, key), b),
        })
    }

    /// Why endpoint `ep` has no lane for atomic `a` on device memory.
    #[cold]
    fn no_device_lane(&self, ep: Ep, a: &Amo) -> Error {
        let on_lane =
            |&(i, _): &(usize, EpId)| self.ifaces[i].attr().caps.contains(Caps::ATOMIC_DEVICE);
        let ours: Vec<String> = self
            .ifaces
            .iter()
            .filter(|i| i.attr().caps.contains(Caps::ATOMIC_DEVICE))
            .map(|i| format!("{}/{}", i.tl_name(), i.dev_name()))
            .collect();
        let lanes = self.core.eps.get(ep.0).map(|st| &st.lanes[..]);
        let lanes_have = lanes.is_some_and(|l| l.iter().any(on_lane));
        // Every device lane was left unconnected for good (its connection
        // failed: `connect_lane`).
        let given_up = lanes.is_some_and(|l| {
            l.iter()
                .enumerate()
                .all(|(li, x)| !on_lane(x) || (x.1 == LAZY && !self.core.lane_is_lazy(ep.0, li)))
        });
        if lanes_have && given_up {
            return Error::Unsupported(format!(
                "{}: the target's memory takes device atomics only (RUCX_ATOMIC_MODE), and \
                 this endpoint's atomic lane could not be connected (see the info log)",
                a.name()
            ));
        }
        if !ours.is_empty() && !lanes_have {
            return Error::Unsupported(format!(
                "{}: the target's memory takes device atomics only (RUCX_ATOMIC_MODE), and \
                 the peer's worker address has no iface that this context's transports with \
                 device atomics ({}) reach, so the endpoint has no lane to post them on",
                a.name(),
                ours.join(", ")
            ));
        }
        Error::Unsupported(format!(
            "{}: the target's memory takes device atomics only (RUCX_ATOMIC_MODE), and no lane \
             of this endpoint with a key granting atomics does this operation in hardware or \
             64-bit compare-and-swap to build it from",
            a.name()
        ))
    }

    /// Starts atomic `a` on the lane of `route`; a fetching one's old
    /// value goes to `result`. Where the lane has no room, the atomic (or
    /// its next step) waits for it like a zero-copy step (`resume_rma`).
    pub(crate) fn atomic_device_start(
        &mut self,
        ep: Ep,
        route: DeviceRoute,
        a: Amo,
        result: Option<ResultWord>,
        o: Op,
    ) -> Result<Posted<()>> {
        let width = a.value.width();
        let (plan, sink) = match route {
            DeviceRoute::Direct((iface, uct_ep, key)) => {
                let sink = match result {
                    Some(word) => RmaSink::DeviceFetch {
                        word,
                        width,
                        slot: Box::new([0; 8]),
                    },
                    None => RmaSink::None,
                };
                (AmoPlan::new(iface, uct_ep, key, a), sink)
            }
            DeviceRoute::Built(lane, built) => {
                let (iface, uct_ep, key) = lane.clone();
                let plan = AmoPlan::new(iface, uct_ep, key, built.step());
                let state = BuiltState {
                    lane,
                    built,
                    result,
                    slot: [0; 8],
                };
                (plan, RmaSink::DeviceBuilt(Box::new(state)))
            }
        };
        let id = self.rma_request(ep, width, sink, o);
        if let Some(Request {
            kind: Kind::Rma(s), ..
        }) = self.core.reqs.get_mut(id)
        {
            s.amo = Some(Box::new(plan));
        }
        self.core.push_rma_amo(&mut self.ifaces, id);
        self.rma_posted(id)
    }
}

/// How an atomic on device memory is executed.
#[derive(Debug)]
pub(crate) enum DeviceRoute {
    /// By a lane that does it in hardware.
    Direct(DeviceLane),
    /// Built from the operations of a lane's device (`amo_built.rs`).
    Built(DeviceLane, Built),
}

/// An atomic for a device, waiting to be posted.
#[derive(Debug)]
pub(crate) struct AmoPlan {
    iface: usize,
    uct_ep: EpId,
    key: RemoteKey,
    amo: Amo,
}

impl AmoPlan {
    pub(crate) fn new(iface: usize, uct_ep: EpId, key: RemoteKey, amo: Amo) -> AmoPlan {
        AmoPlan {
            iface,
            uct_ep,
            key,
            amo,
        }
    }
}

impl Core {
    /// Posts the device atomic of RMA request `id`, if it still has one,
    /// unless the lane has no room (then it waits for room: `resume_rma`).
    pub(crate) fn push_rma_amo(&mut self, tx: &mut dyn Lanes, id: SlabId) {
        let token = Token(id.to_u64());
        let Some(req) = self.reqs.get_mut(id) else {
            return;
        };
        if req.result.is_some() {
            return;
        }
        let Kind::Rma(s) = &mut req.kind else { return };
        let Some(plan) = s.amo.as_deref() else {
            return;
        };
        let slot = match &mut s.sink {
            RmaSink::DeviceFetch { slot, .. } => slot.as_mut_ptr(),
            RmaSink::DeviceBuilt(b) => b.slot.as_mut_ptr(),
            _ => std::ptr::null_mut(),
        };
        let a = plan.amo;
        let r = match tx.atomic(plan.iface) {
            None => Err(crate::ucs::Error::op_unsupported("this iface", "atomics")),
            Some(ops) => post(ops, plan.uct_ep, &a, slot, &plan.key, token),
        };
        match r {
            Ok(uct::Posted::InFlight) => {
                s.amo = None;
                s.pending += 1;
                s.zcopy_inflight += 1;
            }
            Ok(uct::Posted::Done) => {
                // Executed at once: the old value (if any) is in the slot.
                s.amo = None;
                s.pending += 1;
                s.zcopy_inflight += 1;
                self.rma_zcopy_done(id, Ok(()));
            }
            Ok(uct::Posted::NoResource) => {
                let (ep, iface, uct_ep) = (s.ep, plan.iface, plan.uct_ep);
                self.await_room(ep, iface, uct_ep);
                self.rma_parked += 1;
            }
            Err(e) => {
                s.amo = None;
                s.error.get_or_insert(super::transport_error(e));
                if !s.posting && s.pending == 0 {
                    s.pending = 1;
                    self.rma_step_done(id, Ok(()));
                }
            }
        }
    }
}

/// The transport call of one device atomic.
fn post(
    ops: &mut dyn AtomicOps,
    ep: EpId,
    a: &Amo,
    slot: *mut u8,
    key: &RemoteKey,
    token: Token,
) -> crate::ucs::Result<uct::Posted> {
    let (op, w) = (a.op, word(a.value));
    if !a.fetch {
        return ops.atomic_post(ep, op, w, a.remote, key, token);
    }
    if slot.is_null() {
        return Err(crate::ucs::Error::InvalidParam(
            "fetching atomic without a result".into(),
        ));
    }
    // SAFETY: `slot` is the 8 bytes boxed in the request's sink, which live
    // in the request until the transport reports this token (the request
    // waits for it even when it fails: `zcopy_inflight`).
    unsafe { ops.atomic_fetch(ep, op, w, a.compare, slot, a.remote, key, token) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guess_asks_some_domain_for_fetch_add_and_compare_swap() {
        let rc = AtomicCaps::ADD64 | AtomicCaps::FADD64 | AtomicCaps::CSWAP64;
        let full = AtomicCaps::FULL;
        let none = AtomicCaps::empty();
        for (mode, mds, want) in [
            (AtomicMode::Cpu, vec![full], false),
            (AtomicMode::Device, vec![none], true),
            (AtomicMode::Device, vec![], true),
            (AtomicMode::Guess, vec![full, full], true),
            (AtomicMode::Guess, vec![rc], true),
            (AtomicMode::Guess, vec![rc, full], true),
            (AtomicMode::Guess, vec![BASE], true),
            // A domain without device atomics (shared memory, TCP) next
            // to one with them: peers reach the memory over an atomic
            // lane of the latter.
            (AtomicMode::Guess, vec![rc, none], true),
            (AtomicMode::Guess, vec![none, full], true),
            (AtomicMode::Guess, vec![none, none], false),
            (AtomicMode::Guess, vec![AtomicCaps::FADD64, none], false),
            (AtomicMode::Guess, vec![AtomicCaps::FADD64], false),
            (AtomicMode::Guess, vec![AtomicCaps::CSWAP64], false),
            (AtomicMode::Guess, vec![], false),
        ] {
            assert_eq!(device_memory(mode, mds.clone()), want, "{mode:?} {mds:?}");
        }
    }
}

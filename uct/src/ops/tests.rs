//! The derivation of the operation bits from the accessors and limits.

use super::*;
use crate::iface::{AmSink, Armed, ConnectMode, IfaceInfo};
use crate::PerfModel;
use std::os::fd::RawFd;

/// An iface whose families are chosen by the test; its operations are
/// never called.
#[derive(Debug)]
struct Fake {
    info: IfaceInfo,
    am: bool,
    zcopy: bool,
    put: bool,
    get: bool,
    /// The atomics `atomic()` offers, `None` for no atomic family.
    amo: Option<AtomicCaps>,
}

fn attr(max: usize) -> IfaceAttr {
    IfaceAttr {
        caps: Caps::EVENT_FD | Caps::AM_ZCOPY,
        max_short: max,
        max_bcopy: max,
        max_zcopy: max,
        max_hdr: max,
        max_iov: 1,
        max_put_zcopy: max,
        max_get_zcopy: max,
        model: PerfModel {
            latency: 0.0,
            overhead: 0.0,
            bandwidth: 1.0,
        },
        connect: ConnectMode::ToIface,
    }
}

fn fake(max: usize, [am, zcopy, put, get]: [bool; 4]) -> Fake {
    Fake {
        info: IfaceInfo {
            tl_name: "fake".into(),
            dev_name: "fake0".into(),
            device_addr: Vec::new(),
            iface_addr: Vec::new(),
            attr: attr(max),
        },
        am,
        zcopy,
        put,
        get,
        amo: None,
    }
}

fn never<T>() -> T {
    unreachable!("the derivation calls no operation")
}

impl AmOps for Fake {
    fn am_short(&mut self, _: EpId, _: AmId, _: u64, _: &[u8]) -> Result<Posted> {
        never()
    }
    fn am_bcopy(&mut self, _: EpId, _: AmId, _: &[&[u8]]) -> Result<(Posted, usize)> {
        never()
    }
}

impl AmZcopyOps for Fake {
    unsafe fn am_zcopy(
        &mut self,
        _: EpId,
        _: AmId,
        _: &[u8],
        _: &[Iov],
        _: Token,
    ) -> Result<Posted> {
        never()
    }
}

impl PutOps for Fake {
    unsafe fn put_zcopy(
        &mut self,
        _: EpId,
        _: &[Iov],
        _: u64,
        _: &RemoteKey,
        _: Token,
    ) -> Result<Posted> {
        never()
    }
}

impl GetOps for Fake {
    unsafe fn get_zcopy(
        &mut self,
        _: EpId,
        _: &[IovMut],
        _: u64,
        _: &RemoteKey,
        _: Token,
    ) -> Result<Posted> {
        never()
    }
}

impl AtomicOps for Fake {
    fn atomic_caps(&self) -> AtomicCaps {
        self.amo.unwrap_or_default()
    }
    fn atomic_post(
        &mut self,
        _: EpId,
        _: AtomicOp,
        _: AtomicWord,
        _: u64,
        _: &RemoteKey,
        _: Token,
    ) -> Result<Posted> {
        never()
    }
    unsafe fn atomic_fetch(
        &mut self,
        _: EpId,
        _: AtomicOp,
        _: AtomicWord,
        _: u64,
        _: *mut u8,
        _: u64,
        _: &RemoteKey,
        _: Token,
    ) -> Result<Posted> {
        never()
    }
}

impl Iface for Fake {
    fn info(&self) -> &IfaceInfo {
        &self.info
    }
    fn is_reachable(&self, _: &[u8], _: &[u8]) -> bool {
        false
    }
    fn ep_create(&mut self, _: &[u8], _: &[u8]) -> Result<EpId> {
        never()
    }
    fn ep_destroy(&mut self, _: EpId) {}
    fn am(&mut self) -> Option<&mut dyn AmOps> {
        self.am.then_some(self as &mut dyn AmOps)
    }
    fn zcopy(&mut self) -> Option<&mut dyn AmZcopyOps> {
        self.zcopy.then_some(self as &mut dyn AmZcopyOps)
    }
    fn put(&mut self) -> Option<&mut dyn PutOps> {
        self.put.then_some(self as &mut dyn PutOps)
    }
    fn get(&mut self) -> Option<&mut dyn GetOps> {
        self.get.then_some(self as &mut dyn GetOps)
    }
    fn atomic(&mut self) -> Option<&mut dyn AtomicOps> {
        self.amo.is_some().then_some(self as &mut dyn AtomicOps)
    }
    fn pending_add(&mut self, _: EpId, _: Token) -> Result<()> {
        never()
    }
    fn flush(&mut self, _: Option<EpId>, _: Token) -> Result<Posted> {
        never()
    }
    fn progress(&mut self, _: &mut dyn AmSink) -> usize {
        0
    }
    fn event_fd(&self) -> Option<RawFd> {
        None
    }
    fn arm(&mut self) -> Result<Armed> {
        Ok(Armed::Sleep)
    }
}

#[test]
fn each_family_sets_its_bits() {
    let am = Caps::AM_SHORT | Caps::AM_BCOPY;
    for (families, want) in [
        ([false; 4], Caps::empty()),
        ([true, false, false, false], am),
        ([false, true, false, false], Caps::AM_ZCOPY),
        ([false, false, true, false], Caps::PUT_ZCOPY),
        ([false, false, false, true], Caps::GET_ZCOPY),
        (
            [true; 4],
            Caps::OPS.difference(Caps::PENDING | Caps::ATOMIC_DEVICE),
        ),
    ] {
        let got = op_caps(&mut fake(64, families));
        assert_eq!(got, want | Caps::PENDING, "{families:?}");
    }
}

#[test]
fn atomics_set_their_bit_only_with_operations() {
    for (amo, want) in [
        (None, false),
        (Some(AtomicCaps::empty()), false),
        (Some(AtomicCaps::FADD64), true),
    ] {
        let mut f = fake(64, [false; 4]);
        f.amo = amo;
        let got = derive_caps(&mut f);
        assert_eq!(got.contains(Caps::ATOMIC_DEVICE), want, "{amo:?}: {got:?}");
    }
}

#[test]
fn a_zero_limit_clears_the_bit() {
    assert_eq!(op_caps(&mut fake(0, [true; 4])), Caps::PENDING);
    let mut f = fake(64, [true; 4]);
    f.info.attr.max_short = 0;
    f.info.attr.max_get_zcopy = 0;
    let got = op_caps(&mut f);
    assert!(!got.intersects(Caps::AM_SHORT | Caps::GET_ZCOPY), "{got:?}");
    assert!(got.contains(Caps::AM_BCOPY | Caps::PUT_ZCOPY), "{got:?}");
    f.info.attr.max_iov = 0;
    assert!(!op_caps(&mut f).contains(Caps::AM_ZCOPY));
}

#[test]
fn derived_caps_keep_properties_and_replace_operation_bits() {
    // The stored AM_ZCOPY is not backed by `zcopy()`: it goes.
    let mut f = fake(64, [true, false, false, false]);
    let caps = derive_caps(&mut f);
    assert_eq!(
        caps,
        Caps::EVENT_FD | Caps::AM_SHORT | Caps::AM_BCOPY | Caps::PENDING
    );
}

#[test]
fn a_bcopy_reports_its_length_only_when_done() {
    assert_eq!(Posted::Done.with_len(7), (Posted::Done, 7));
    assert_eq!(Posted::InFlight.with_len(7), (Posted::InFlight, 0));
    assert_eq!(Posted::NoResource.with_len(7), (Posted::NoResource, 0));
}

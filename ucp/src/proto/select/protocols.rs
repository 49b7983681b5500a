//! The protocol registry and the eager protocols' cost models.
//!
//! Every formula gives seconds as a function of the message size `s` in
//! bytes, from the active message lane's model: overhead `o` (s), latency
//! `l` (s), bandwidth `bw` (B/s), registration `reg(s)` (s); the host copy
//! bandwidth `M` ([`SelectConfig::memcpy_bw`], B/s); and the protocols' own
//! software costs `P` ([`ProtoOverhead`](super::ProtoOverhead)). Costs are
//! the time from the send call until the data is in the receiver's buffer.
//! rucx drives transports from the calling thread, so copies, transport
//! calls and waiting add up rather than overlap; only lanes working side by
//! side overlap (see the rendezvous protocols).

use super::config::{SelectConfig, SYNC_EXTRA_HDR};
use super::lanes::{EpLanes, LaneSet};
use super::linear::{Linear, PiecewiseLinear};
use super::rndv;
use crate::proto::wire::{FIRST_HDR, MIDDLE_HDR, ONLY_HDR};
use crate::uct::Caps;

/// The operation a table is selected for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// Tagged send.
    TagSend,
    /// Tagged send completing when the receiver has matched it.
    TagSendSync,
}

impl Op {
    /// Every operation.
    pub const ALL: [Op; 2] = [Op::TagSend, Op::TagSendSync];

    /// Human-readable name, e.g. `"tag send"`.
    pub fn description(self) -> &'static str {
        match self {
            Op::TagSend => "tag send",
            Op::TagSendSync => "tag send sync",
        }
    }
}

/// Protocol classes, in increasing priority: a class forced by its
/// threshold disables the classes below it (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProtoClass {
    /// Eager with `am_short`.
    Short,
    /// Eager copying into transport buffers (`am_bcopy`).
    Bcopy,
    /// Eager sending from the user's buffer (`am_zcopy`).
    Zcopy,
    /// Rendezvous.
    Rndv,
}

/// A protocol. The declaration order is the registration order: on equal
/// cost the earlier protocol wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProtocolId {
    /// One `am_short`.
    EagerShort,
    /// One `am_bcopy`.
    EagerBcopySingle,
    /// One `am_zcopy`.
    EagerZcopySingle,
    /// `am_bcopy` fragments.
    EagerBcopyMulti,
    /// `am_zcopy` fragments.
    EagerZcopyMulti,
    /// One `am_bcopy`, acknowledged by the receiver.
    EagerSyncBcopySingle,
    /// One `am_zcopy`, acknowledged by the receiver.
    EagerSyncZcopySingle,
    /// `am_bcopy` fragments, acknowledged by the receiver.
    EagerSyncBcopyMulti,
    /// `am_zcopy` fragments, acknowledged by the receiver.
    EagerSyncZcopyMulti,
    /// Rendezvous: the receiver reads with `get_zcopy`.
    RndvGetZcopy,
    /// Rendezvous: the sender writes with `put_zcopy` after an RTR.
    RndvPutZcopy,
    /// Rendezvous: the sender sends `am_bcopy` fragments after an RTR.
    RndvAm,
}

/// What a protocol's probe found: its cost over the sizes it can send and
/// the lanes it would use.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// Cost over the valid sizes.
    pub cost: PiecewiseLinear,
    /// Lanes carrying the data.
    pub lanes: LaneSet,
}

/// Eager variants, for the shared cost model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Eager {
    Short,
    BcopySingle,
    ZcopySingle,
    BcopyMulti,
    ZcopyMulti,
}

impl ProtocolId {
    /// Whether the protocol moves the data with zero-copy operations.
    pub fn zcopy(self) -> bool {
        use ProtocolId::*;
        matches!(
            self,
            EagerZcopySingle
                | EagerZcopyMulti
                | EagerSyncZcopySingle
                | EagerSyncZcopyMulti
                | RndvGetZcopy
                | RndvPutZcopy
        )
    }

    /// Every protocol, in registration order.
    pub const ALL: [ProtocolId; 12] = [
        ProtocolId::EagerShort,
        ProtocolId::EagerBcopySingle,
        ProtocolId::EagerZcopySingle,
        ProtocolId::EagerBcopyMulti,
        ProtocolId::EagerZcopyMulti,
        ProtocolId::EagerSyncBcopySingle,
        ProtocolId::EagerSyncZcopySingle,
        ProtocolId::EagerSyncBcopyMulti,
        ProtocolId::EagerSyncZcopyMulti,
        ProtocolId::RndvGetZcopy,
        ProtocolId::RndvPutZcopy,
        ProtocolId::RndvAm,
    ];

    /// Short name, e.g. `"eager_bcopy_multi"`.
    pub fn name(self) -> &'static str {
        use ProtocolId::*;
        match self {
            EagerShort => "eager_short",
            EagerBcopySingle => "eager_bcopy_single",
            EagerZcopySingle => "eager_zcopy_single",
            EagerBcopyMulti => "eager_bcopy_multi",
            EagerZcopyMulti => "eager_zcopy_multi",
            EagerSyncBcopySingle => "eager_sync_bcopy_single",
            EagerSyncZcopySingle => "eager_sync_zcopy_single",
            EagerSyncBcopyMulti => "eager_sync_bcopy_multi",
            EagerSyncZcopyMulti => "eager_sync_zcopy_multi",
            RndvGetZcopy => "rndv_get_zcopy",
            RndvPutZcopy => "rndv_put_zcopy",
            RndvAm => "rndv_am",
        }
    }

    /// Description for tables, in UCX's words.
    pub fn description(self) -> &'static str {
        use ProtocolId::*;
        match self {
            EagerShort => "eager short",
            EagerBcopySingle => "eager copy-in copy-out",
            EagerZcopySingle => "eager zero-copy copy-out",
            EagerBcopyMulti => "multi-frag eager copy-in copy-out",
            EagerZcopyMulti => "multi-frag eager zero-copy copy-out",
            EagerSyncBcopySingle => "eager sync copy-in copy-out",
            EagerSyncZcopySingle => "eager sync zero-copy copy-out",
            EagerSyncBcopyMulti => "multi-frag eager sync copy-in copy-out",
            EagerSyncZcopyMulti => "multi-frag eager sync zero-copy copy-out",
            RndvGetZcopy => "rendezvous zero-copy read from remote",
            RndvPutZcopy => "rendezvous zero-copy write to remote",
            RndvAm => "rendezvous fragmented copy-in copy-out",
        }
    }

    /// The protocol's class.
    pub fn class(self) -> ProtoClass {
        use ProtocolId::*;
        match self {
            EagerShort => ProtoClass::Short,
            EagerBcopySingle | EagerBcopyMulti | EagerSyncBcopySingle | EagerSyncBcopyMulti => {
                ProtoClass::Bcopy
            }
            EagerZcopySingle | EagerZcopyMulti | EagerSyncZcopySingle | EagerSyncZcopyMulti => {
                ProtoClass::Zcopy
            }
            RndvGetZcopy | RndvPutZcopy | RndvAm => ProtoClass::Rndv,
        }
    }

    /// Whether the protocol implements `op`. Rendezvous serves both: the
    /// sender learns of the match from the RTR or ATS anyway.
    pub fn serves(self, op: Op) -> bool {
        use ProtocolId::*;
        match self {
            EagerShort | EagerBcopySingle | EagerZcopySingle | EagerBcopyMulti
            | EagerZcopyMulti => op == Op::TagSend,
            EagerSyncBcopySingle | EagerSyncZcopySingle | EagerSyncBcopyMulti
            | EagerSyncZcopyMulti => op == Op::TagSendSync,
            RndvGetZcopy | RndvPutZcopy | RndvAm => true,
        }
    }

    /// The protocol's cost over the sizes it can send on `lanes`, or `None`
    /// if the lanes cannot run it.
    pub fn probe(self, lanes: &EpLanes, cfg: &SelectConfig) -> Option<Probe> {
        use ProtocolId::*;
        let probe = match self {
            EagerShort => eager(Eager::Short, false, lanes, cfg),
            EagerBcopySingle => eager(Eager::BcopySingle, false, lanes, cfg),
            EagerZcopySingle => eager(Eager::ZcopySingle, false, lanes, cfg),
            EagerBcopyMulti => eager(Eager::BcopyMulti, false, lanes, cfg),
            EagerZcopyMulti => eager(Eager::ZcopyMulti, false, lanes, cfg),
            EagerSyncBcopySingle => eager(Eager::BcopySingle, true, lanes, cfg),
            EagerSyncZcopySingle => eager(Eager::ZcopySingle, true, lanes, cfg),
            EagerSyncBcopyMulti => eager(Eager::BcopyMulti, true, lanes, cfg),
            EagerSyncZcopyMulti => eager(Eager::ZcopyMulti, true, lanes, cfg),
            RndvGetZcopy => rndv::get_zcopy(lanes, cfg),
            RndvPutZcopy => rndv::put_zcopy(lanes, cfg),
            RndvAm => rndv::am(lanes, cfg),
        }?;
        (!probe.cost.is_empty()).then_some(probe)
    }
}

/// Seconds per byte of a host memory copy: `1 / M`, with `M` replaced by
/// the default when it is not a positive number.
pub(crate) fn copy_per_byte(cfg: &SelectConfig) -> f64 {
    match cfg.memcpy_bw {
        b if b == f64::INFINITY => 0.0,
        b if b > 0.0 && b.is_finite() => 1.0 / b,
        _ => 1.0 / super::config::MEMCPY_BW,
    }
}

/// `per` seconds for each of `ceil(s / frag)` fragments, bounded above by
/// the line `per + per * s / frag` (exact at one past a multiple of `frag`).
pub(crate) fn fragments(per: f64, frag: usize) -> Linear {
    Linear::new(per, per / frag.max(1) as f64)
}

/// Cost of an eager protocol (`sync`: the synchronous variant).
///
/// Every eager message lands in a transport buffer at the receiver, which
/// copies it out: `s / M`. A synchronous send also waits for the
/// receiver's acknowledgement, one more small message: `2 o + l`.
///
/// * short, `0..=max_short`: `P.single + o + l + s/bw + s/M`;
/// * copy single, `0..=max_bcopy - header`: the same `+ s/M` for the copy
///   into the transport buffer;
/// * zero-copy single, `1..=max_zcopy`: `P.single + reg(s) + o + l + s/bw
///   + s/M`;
/// * copy multi, `1..`, fragments `F = max_bcopy - middle header`:
///   `(o + P.multi)(1 + s/F) + l + s/bw + 2 s/M`;
/// * zero-copy multi, `1..`, fragments `F = max_zcopy`:
///   `reg(s) + (o + P.multi)(1 + s/F) + l + s/bw + s/M`.
fn eager(kind: Eager, sync: bool, lanes: &EpLanes, cfg: &SelectConfig) -> Option<Probe> {
    let (lane, m) = lanes.am()?;
    let p = &cfg.overhead;
    let copy = Linear::new(0.0, copy_per_byte(cfg));
    let extra = if sync { SYNC_EXTRA_HDR } else { 0 };
    let wire = Linear::new(m.latency, m.per_byte);
    let per_frag = m.overhead + p.multi;
    let bcopy = lane.caps.contains(Caps::AM_BCOPY) && lane.max_bcopy > 0;
    let zcopy = lane.caps.contains(Caps::AM_ZCOPY) && lane.max_zcopy > 0;
    let (start, end, f) = match kind {
        Eager::Short => {
            // am_short's 8-byte header is the tag: no room for sync ids.
            if sync || !lane.caps.contains(Caps::AM_SHORT) || lane.max_short == 0 {
                return None;
            }
            let f = Linear::constant(p.single).add(m.message()).add(copy);
            (0, lane.max_short, f)
        }
        Eager::BcopySingle => {
            let max = lane.max_bcopy.checked_sub(ONLY_HDR + extra)?;
            if !bcopy {
                return None;
            }
            let f = Linear::constant(p.single)
                .add(m.message())
                .add(copy.scale(2.0));
            (0, max, f)
        }
        Eager::ZcopySingle => {
            if !zcopy {
                return None;
            }
            let f = Linear::constant(p.single)
                .add(m.reg?)
                .add(m.message())
                .add(copy);
            (1, lane.max_zcopy, f)
        }
        Eager::BcopyMulti => {
            let frag = lane.max_bcopy.checked_sub(MIDDLE_HDR)?;
            if !bcopy || lane.max_bcopy <= FIRST_HDR + extra || frag == 0 {
                return None;
            }
            let f = fragments(per_frag, frag).add(wire).add(copy.scale(2.0));
            (1, usize::MAX, f)
        }
        Eager::ZcopyMulti => {
            if !zcopy {
                return None;
            }
            let f = m
                .reg?
                .add(fragments(per_frag, lane.max_zcopy))
                .add(wire)
                .add(copy);
            (1, usize::MAX, f)
        }
    };
    let ack = if sync { m.control() } else { 0.0 };
    Some(Probe {
        cost: PiecewiseLinear::new(start, end, f.add(Linear::constant(ack))),
        lanes: LaneSet::one(lanes.am_lane),
    })
}

#[cfg(test)]
mod tests {
    use super::super::lanes::tests::lane;
    use super::*;

    fn cfg() -> SelectConfig {
        SelectConfig::default()
    }

    #[test]
    fn eager_short_formula() {
        let lanes = EpLanes::new(vec![lane("x", 5e-6, 2e-6, 1e9)]);
        let p = ProtocolId::EagerShort.probe(&lanes, &cfg()).unwrap();
        let want = 5e-9 + 2e-6 + 5e-6 + 1000.0 / 1e9 + 1000.0 / 10e9;
        assert!((p.cost.eval(1000).unwrap() - want).abs() < 1e-15);
        assert!(p.cost.eval(8184).is_some());
        assert_eq!(p.cost.eval(8185), None);
        assert!(ProtocolId::EagerShort.serves(Op::TagSend));
        assert!(!ProtocolId::EagerShort.serves(Op::TagSendSync));
    }

    #[test]
    fn sync_pays_an_ack_and_header() {
        let lanes = EpLanes::new(vec![lane("x", 5e-6, 2e-6, 1e9)]);
        let a = ProtocolId::EagerBcopySingle.probe(&lanes, &cfg()).unwrap();
        let b = ProtocolId::EagerSyncBcopySingle
            .probe(&lanes, &cfg())
            .unwrap();
        let d = b.cost.eval(100).unwrap() - a.cost.eval(100).unwrap();
        // The acknowledgement: 2 o + l.
        assert!((d - 9e-6).abs() < 1e-15);
        let last = |p: &Probe| p.cost.segments().last().unwrap().end;
        assert_eq!(last(&a), 64 * 1024 - ONLY_HDR);
        assert_eq!(last(&b), 64 * 1024 - ONLY_HDR - SYNC_EXTRA_HDR);
    }

    #[test]
    fn missing_caps_and_bad_models_give_none() {
        let mut l = lane("x", 5e-6, 2e-6, 1e9);
        l.caps = Caps::AM_SHORT;
        let lanes = EpLanes::new(vec![l]);
        for id in ProtocolId::ALL {
            let has = id.probe(&lanes, &cfg()).is_some();
            assert_eq!(has, id == ProtocolId::EagerShort, "{id:?}");
        }
        let lanes = EpLanes::new(vec![lane("x", 5e-6, 2e-6, 0.0)]);
        assert!(ProtocolId::ALL
            .iter()
            .all(|id| id.probe(&lanes, &cfg()).is_none()));
        let mut lanes = EpLanes::new(vec![lane("x", 5e-6, 2e-6, 1e9)]);
        lanes.am_lane = 7;
        assert!(ProtocolId::EagerShort.probe(&lanes, &cfg()).is_none());
    }

    #[test]
    fn zcopy_pays_registration() {
        let mut l = lane("x", 1e-6, 1e-7, 1e10);
        l.reg_cost = Linear::new(1e-6, 1e-10);
        let lanes = EpLanes::new(vec![l]);
        let b = ProtocolId::EagerBcopySingle.probe(&lanes, &cfg()).unwrap();
        let z = ProtocolId::EagerZcopySingle.probe(&lanes, &cfg()).unwrap();
        // Both pay s/M out; bcopy also s/M in, zcopy reg(s).
        let s = 10_000;
        let d = z.cost.eval(s).unwrap() - b.cost.eval(s).unwrap();
        let want = 1e-6 + 1e-10 * s as f64 - s as f64 / 10e9;
        assert!((d - want).abs() < 1e-15);
        assert_eq!(z.cost.eval(0), None);
    }
}

//! Cost models of the rendezvous protocols.
//!
//! Notation as in [`protocols`](super::protocols): `A` is the active
//! message lane, which carries the control messages (RTS, RTR, ATP), each
//! costing `ctl = 2 o_A + l_A` (sent and handled); the data lanes `i` carry shares `w_i` of the
//! data (proportional to bandwidth, see [`EpLanes`]) side by side, so the
//! transfer takes as long as the slowest lane: the upper envelope (`max`)
//! of the lanes' times. Fragments are `F_i = min(rndv_frag_size, lane
//! limit)`. Registration is paid for the whole buffer on every data lane,
//! at the sender and at the receiver (assumed to run the same lanes).
//! Zero-length messages never use rendezvous: every protocol here starts
//! at 1 byte.

use super::config::SelectConfig;
use super::lanes::{EpLanes, LaneInfo, LaneSet};
use super::linear::{Linear, PiecewiseLinear};
use super::protocols::{copy_per_byte, fragments, Probe};
use crate::proto::wire::MIDDLE_HDR;
use crate::uct::Caps;

/// Room a rendezvous control message needs on the active message lane
/// (an RTS: tag, ids, address, length and a packed remote key).
pub const RNDV_CTRL_LEN: usize = 128;

/// Whether `lane` can carry rendezvous control messages.
fn carries_control(lane: &LaneInfo) -> bool {
    (lane.caps.contains(Caps::AM_SHORT) && lane.max_short >= RNDV_CTRL_LEN)
        || (lane.caps.contains(Caps::AM_BCOPY) && lane.max_bcopy >= RNDV_CTRL_LEN)
}

/// Which zero-copy operation moves the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Zcopy {
    Get,
    Put,
}

/// The data lanes' transfer and registration for a zero-copy scheme:
/// `max_i [ (o_i + P.multi)(1 + w_i s / F_i) + k l_i + w_i s / bw_i ]`
/// with `k = 2` for both: a read is a round trip, and a write completes
/// (so the ATP may follow) once the target acknowledged it; and
/// `2 sum_i reg_i(s)`.
fn zcopy_transfer(
    lanes: &EpLanes,
    cfg: &SelectConfig,
    op: Zcopy,
) -> Option<(PiecewiseLinear, Linear, LaneSet)> {
    let limit = |l: &LaneInfo| match op {
        Zcopy::Get => l.max_get_zcopy,
        Zcopy::Put => l.max_put_zcopy,
    };
    let set = lanes.rndv_lanes(cfg.rndv_lanes(), limit);
    if set.is_empty() {
        return None;
    }
    let trips = 2.0;
    let mut transfer: Option<PiecewiseLinear> = None;
    let mut reg = Linear::ZERO;
    for (i, w) in set.iter() {
        let lane = lanes.lanes.get(i)?;
        let m = lane.cost_model()?;
        let frag = match cfg.rndv_frag_size {
            0 => limit(lane),
            f => f.min(limit(lane)),
        };
        let per = m.overhead + cfg.overhead.multi;
        let fr = fragments(per, frag);
        let f = Linear::new(fr.c0 + trips * m.latency, w * (fr.c1 + m.per_byte));
        let t = PiecewiseLinear::new(1, usize::MAX, f);
        transfer = Some(match transfer {
            None => t,
            Some(acc) => acc.max(&t),
        });
        reg = reg.add(m.reg?.scale(2.0));
    }
    Some((transfer?, reg, set))
}

/// Get zero-copy: `P.rts + ctl + 2 sum reg_i(s) + transfer(s)`; the
/// receiver reads after the RTS and acknowledges (ATS) after the data is
/// in place, so the ATS is not counted.
pub(crate) fn get_zcopy(lanes: &EpLanes, cfg: &SelectConfig) -> Option<Probe> {
    let (am, a) = lanes.am()?;
    if !carries_control(am) {
        return None;
    }
    let (transfer, reg, set) = zcopy_transfer(lanes, cfg, Zcopy::Get)?;
    let fixed = Linear::constant(cfg.overhead.rndv_rts + a.control()).add(reg);
    Some(Probe {
        cost: transfer.add_linear(fixed),
        lanes: set,
    })
}

/// Put zero-copy: `P.rts + ctl + P.rtr + ctl + 2 sum reg_i(s) +
/// transfer(s) + ctl`: RTS, the receiver's RTR with its address, the
/// writes, then the ATP that tells the receiver the data is there.
pub(crate) fn put_zcopy(lanes: &EpLanes, cfg: &SelectConfig) -> Option<Probe> {
    let (am, a) = lanes.am()?;
    if !carries_control(am) {
        return None;
    }
    let (transfer, reg, set) = zcopy_transfer(lanes, cfg, Zcopy::Put)?;
    let p = &cfg.overhead;
    let fixed = Linear::constant(p.rndv_rts + p.rndv_rtr + 3.0 * a.control()).add(reg);
    Some(Probe {
        cost: transfer.add_linear(fixed),
        lanes: set,
    })
}

/// Active message pipeline: `P.rts + P.rtr + 2 ctl + (o + P.multi)(1 +
/// s/F) + l + s/bw + 2 s/M` with `F = max_bcopy - middle header`: RTS,
/// RTR, then copy-in copy-out fragments on lane `A`. No registration.
pub(crate) fn am(lanes: &EpLanes, cfg: &SelectConfig) -> Option<Probe> {
    let (lane, a) = lanes.am()?;
    if !carries_control(lane) || !lane.caps.contains(Caps::AM_BCOPY) {
        return None;
    }
    let frag = lane.max_bcopy.checked_sub(MIDDLE_HDR).filter(|&f| f > 0)?;
    let p = &cfg.overhead;
    let f = Linear::constant(p.rndv_rts + p.rndv_rtr + 2.0 * a.control())
        .add(fragments(a.overhead + p.multi, frag))
        .add(Linear::new(
            a.latency,
            a.per_byte + 2.0 * copy_per_byte(cfg),
        ));
    Some(Probe {
        cost: PiecewiseLinear::new(1, usize::MAX, f),
        lanes: LaneSet::one(lanes.am_lane),
    })
}

#[cfg(test)]
mod tests {
    use super::super::lanes::tests::lane;
    use super::super::protocols::ProtocolId;
    use super::*;

    fn cfg() -> SelectConfig {
        SelectConfig::default()
    }

    #[test]
    fn get_formula_one_lane() {
        let mut l = lane("x", 1e-6, 1e-7, 1e10);
        l.max_get_zcopy = 1 << 20;
        l.reg_cost = Linear::new(2e-6, 0.0);
        let lanes = EpLanes::new(vec![l]);
        let p = get_zcopy(&lanes, &cfg()).unwrap();
        let s = 4 << 20;
        let per = 1e-7 + 10e-9;
        // Fragments of the lane's largest get (the default).
        let frags = per * (1.0 + s as f64 / (1024.0 * 1024.0));
        // RTS (P.rts + 2 o + l), registration at both ends, the read (two
        // trips), the data.
        let want = 275e-9 + 1.2e-6 + 4e-6 + frags + 2e-6 + s as f64 / 1e10;
        assert!((p.cost.eval(s).unwrap() - want).abs() < 1e-12);
        assert_eq!(p.cost.eval(0), None);
        assert!(put_zcopy(&lanes, &cfg()).is_none());
    }

    #[test]
    fn two_lanes_overlap() {
        let mut a = lane("a", 1e-6, 1e-7, 2e9);
        let mut b = lane("b", 1e-6, 1e-7, 1e9);
        a.max_put_zcopy = 1 << 20;
        b.max_put_zcopy = 1 << 20;
        let both = EpLanes::new(vec![a.clone(), b]);
        let one = EpLanes::new(vec![a]);
        let p2 = put_zcopy(&both, &cfg()).unwrap();
        let p1 = put_zcopy(&one, &cfg()).unwrap();
        let s = 64 << 20;
        // Three-halves of the bandwidth: close to 2/3 of the time.
        let r = p2.cost.eval(s).unwrap() / p1.cost.eval(s).unwrap();
        assert!((r - 2.0 / 3.0).abs() < 0.01, "{r}");
        assert_eq!(p2.lanes.len(), 2);
    }

    #[test]
    fn am_needs_bcopy_and_no_registration() {
        let mut l = lane("x", 1e-6, 1e-7, 1e10);
        l.reg_cost = Linear::new(f64::NAN, 0.0);
        let lanes = EpLanes::new(vec![l.clone()]);
        assert!(am(&lanes, &cfg()).is_some());
        assert!(ProtocolId::EagerZcopySingle.probe(&lanes, &cfg()).is_none());
        l.caps = Caps::AM_SHORT | Caps::AM_ZCOPY;
        assert!(am(&EpLanes::new(vec![l]), &cfg()).is_none());
    }
}

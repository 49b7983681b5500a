//! Lanes as selection sees them: plain data copied from iface attributes,
//! not tied to live ifaces.

use super::config::{MAX_LANES, MULTI_LANE_MAX_RATIO};
use super::linear::Linear;
use crate::proto::wire::FIRST_HDR;
use crate::uct::{Caps, IfaceAttr, PerfModel};

/// Most lanes of an endpoint that selection looks at; later ones are
/// ignored.
pub const MAX_EP_LANES: usize = 32;

/// One lane of an endpoint: a transport resource and what it can do.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneInfo {
    /// Transport and device, e.g. `"tcp/lo"`.
    pub name: String,
    /// Latency (s), overhead (s) and bandwidth (B/s).
    pub model: PerfModel,
    /// Operations offered.
    pub caps: Caps,
    /// Largest `am_short` payload after the 8-byte header (0: none).
    pub max_short: usize,
    /// Largest `am_bcopy` message (0: none).
    pub max_bcopy: usize,
    /// Largest `am_zcopy` payload (0: none).
    pub max_zcopy: usize,
    /// Largest `put_zcopy` (0: none).
    pub max_put_zcopy: usize,
    /// Largest `get_zcopy` (0: none).
    pub max_get_zcopy: usize,
    /// Cost of registering `size` bytes for zero-copy: `c0` seconds plus
    /// `c1` seconds per byte.
    pub reg_cost: Linear,
}

impl LaneInfo {
    /// A lane described by an iface's attributes; no put/get zero-copy and
    /// free registration until transports report them. Operations the caps
    /// do not offer get limit 0, and so does `am_zcopy` when its header
    /// cannot hold an eager first-fragment header.
    pub fn from_attr(name: impl Into<String>, attr: &IfaceAttr) -> LaneInfo {
        let has = |c: Caps, n: usize| if attr.caps.contains(c) { n } else { 0 };
        // Eager zero-copy fragments carry a first-fragment header.
        let zcopy_ok = attr.max_hdr >= FIRST_HDR && attr.max_iov >= 1;
        LaneInfo {
            name: name.into(),
            model: attr.model,
            caps: attr.caps,
            max_short: has(Caps::AM_SHORT, attr.max_short),
            max_bcopy: has(Caps::AM_BCOPY, attr.max_bcopy),
            max_zcopy: if zcopy_ok {
                has(Caps::AM_ZCOPY, attr.max_zcopy)
            } else {
                0
            },
            max_put_zcopy: has(Caps::PUT_ZCOPY, attr.max_put_zcopy),
            max_get_zcopy: has(Caps::GET_ZCOPY, attr.max_get_zcopy),
            reg_cost: Linear::ZERO,
        }
    }

    /// The lane's model with degenerate numbers made safe; `None` if the
    /// lane is unusable (NaN or infinite latency or overhead, bandwidth
    /// zero, negative or NaN). Negative times count as 0; an infinite
    /// bandwidth costs nothing per byte.
    pub(crate) fn cost_model(&self) -> Option<LaneModel> {
        let m = &self.model;
        let time = |t: f64| t.is_finite().then_some(t.max(0.0));
        let per_byte = match m.bandwidth {
            b if b == f64::INFINITY => 0.0,
            b if b > 0.0 && b.is_finite() => 1.0 / b,
            _ => return None,
        };
        let r = self.reg_cost;
        let reg = r
            .is_finite()
            .then(|| Linear::new(r.c0.max(0.0), r.c1.max(0.0)));
        Some(LaneModel {
            overhead: time(m.overhead)?,
            latency: time(m.latency)?,
            per_byte,
            reg,
        })
    }
}

/// A lane's model, checked: see [`LaneInfo::cost_model`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct LaneModel {
    /// Sender CPU per message, seconds.
    pub(crate) overhead: f64,
    /// One-way latency, seconds.
    pub(crate) latency: f64,
    /// Seconds per byte on the wire (1 / bandwidth).
    pub(crate) per_byte: f64,
    /// Registration cost; `None` if it was not finite (no zero-copy).
    pub(crate) reg: Option<Linear>,
}

impl LaneModel {
    /// One message of `size` bytes: `overhead + latency + size / bandwidth`.
    pub(crate) fn message(&self) -> Linear {
        Linear::new(self.overhead + self.latency, self.per_byte)
    }

    /// A small control message: `2 overhead + latency`. Unlike a data
    /// message, whose receive side overlaps the next send, a protocol
    /// message is waited for: the receiver's handling (about the sender's
    /// overhead again) is on the critical path.
    pub(crate) fn control(&self) -> f64 {
        2.0 * self.overhead + self.latency
    }
}

/// The lanes of an endpoint configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct EpLanes {
    /// The lanes; at most [`MAX_EP_LANES`] are looked at.
    pub lanes: Vec<LaneInfo>,
    /// The lane of active messages: eager data and rendezvous control.
    pub am_lane: usize,
}

impl EpLanes {
    /// Lanes whose first is the active message lane.
    pub fn new(lanes: Vec<LaneInfo>) -> EpLanes {
        EpLanes { lanes, am_lane: 0 }
    }

    /// The active message lane, if it exists and is usable.
    pub(crate) fn am(&self) -> Option<(&LaneInfo, LaneModel)> {
        if self.am_lane >= MAX_EP_LANES {
            return None;
        }
        let lane = self.lanes.get(self.am_lane)?;
        Some((lane, lane.cost_model()?))
    }

    /// Lane `i`'s name, or `"?"`.
    pub fn name(&self, i: usize) -> &str {
        self.lanes.get(i).map_or("?", |l| l.name.as_str())
    }

    /// An exact key of everything selection reads from these lanes.
    pub fn fingerprint(&self) -> LanesFingerprint {
        let lanes = self
            .lanes
            .iter()
            .take(MAX_EP_LANES)
            .map(|l| {
                let words = [
                    l.model.latency.to_bits(),
                    l.model.overhead.to_bits(),
                    l.model.bandwidth.to_bits(),
                    u64::from(l.caps.bits()),
                    l.max_short as u64,
                    l.max_bcopy as u64,
                    l.max_zcopy as u64,
                    l.max_put_zcopy as u64,
                    l.max_get_zcopy as u64,
                    l.reg_cost.c0.to_bits(),
                    l.reg_cost.c1.to_bits(),
                ];
                (l.name.clone(), words)
            })
            .collect();
        LanesFingerprint {
            am_lane: self.am_lane,
            lanes,
        }
    }

    /// The lanes a zero-copy rendezvous uses, where `limit(lane)` is the
    /// lane's largest operation (0: cannot). The fastest usable lanes, at
    /// most `max`, dropping any slower than the fastest by more than
    /// [`MULTI_LANE_MAX_RATIO`]; shares proportional to bandwidth.
    pub(crate) fn rndv_lanes(&self, max: usize, limit: impl Fn(&LaneInfo) -> usize) -> LaneSet {
        let mut cands: Vec<(usize, f64)> = self
            .lanes
            .iter()
            .take(MAX_EP_LANES)
            .enumerate()
            .filter(|(_, l)| limit(l) > 0)
            .filter(|(_, l)| l.cost_model().is_some_and(|m| m.reg.is_some()))
            .map(|(i, l)| (i, l.model.bandwidth))
            .collect();
        cands.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut set = LaneSet::default();
        let Some(&(_, fastest)) = cands.first() else {
            return set;
        };
        let max = if fastest.is_infinite() { 1 } else { max };
        let chosen: Vec<_> = cands
            .into_iter()
            .take_while(|&(_, bw)| bw * MULTI_LANE_MAX_RATIO >= fastest)
            .take(max.clamp(1, MAX_LANES))
            .collect();
        let total: f64 = chosen.iter().map(|c| c.1).sum();
        for (i, bw) in chosen {
            let share = if total.is_finite() { bw / total } else { 1.0 };
            set.push(i, share);
        }
        set
    }
}

/// An exact key of an [`EpLanes`] (bit patterns of every number, names).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LanesFingerprint {
    am_lane: usize,
    lanes: Vec<(String, [u64; 11])>,
}

/// The lanes a protocol uses and the share of the data each carries.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LaneSet {
    len: u8,
    lanes: [u8; MAX_LANES],
    shares: [f64; MAX_LANES],
}

impl LaneSet {
    /// Lane `lane` alone.
    pub fn one(lane: usize) -> LaneSet {
        let mut s = LaneSet::default();
        s.push(lane, 1.0);
        s
    }

    /// Adds a lane; ignored when full or the index exceeds 255.
    fn push(&mut self, lane: usize, share: f64) {
        let n = self.len as usize;
        if n < MAX_LANES {
            if let Ok(l) = u8::try_from(lane) {
                self.lanes[n] = l;
                self.shares[n] = share;
                self.len += 1;
            }
        }
    }

    /// `(lane index, share of the data)` pairs, fastest lane first.
    pub fn iter(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        let n = self.len as usize;
        self.lanes[..n]
            .iter()
            .zip(&self.shares[..n])
            .map(|(&l, &s)| (usize::from(l), s))
    }

    /// Number of lanes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether no lane is used.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A lane with the given numbers and every active message operation.
    pub(crate) fn lane(name: &str, latency: f64, overhead: f64, bandwidth: f64) -> LaneInfo {
        LaneInfo {
            name: name.to_string(),
            model: PerfModel {
                latency,
                overhead,
                bandwidth,
            },
            caps: Caps::AM_SHORT | Caps::AM_BCOPY | Caps::AM_ZCOPY,
            max_short: 8184,
            max_bcopy: 64 * 1024,
            max_zcopy: 1 << 20,
            max_put_zcopy: 0,
            max_get_zcopy: 0,
            reg_cost: Linear::ZERO,
        }
    }

    #[test]
    fn degenerate_models() {
        let ok = lane("a", 1e-6, 1e-7, 1e9);
        assert!(ok.cost_model().is_some());
        for bw in [0.0, -1.0, f64::NAN] {
            assert!(lane("a", 1e-6, 1e-7, bw).cost_model().is_none(), "{bw}");
        }
        assert!(lane("a", f64::NAN, 0.0, 1e9).cost_model().is_none());
        assert!(lane("a", 0.0, f64::INFINITY, 1e9).cost_model().is_none());
        let m = lane("a", -1.0, 0.0, f64::INFINITY).cost_model().unwrap();
        assert_eq!((m.latency, m.per_byte), (0.0, 0.0));
        let mut bad_reg = ok.clone();
        bad_reg.reg_cost = Linear::new(f64::INFINITY, 0.0);
        assert!(bad_reg.cost_model().unwrap().reg.is_none());
    }

    #[test]
    fn rndv_lanes_split_by_bandwidth() {
        let mut a = lane("a", 1e-6, 1e-7, 3e9);
        let mut b = lane("b", 1e-6, 1e-7, 1e9);
        let mut slow = lane("slow", 1e-6, 1e-7, 0.5e9);
        for l in [&mut a, &mut b, &mut slow] {
            l.max_get_zcopy = 1 << 20;
        }
        let lanes = EpLanes::new(vec![b, slow, a]);
        let set = lanes.rndv_lanes(8, |l| l.max_get_zcopy);
        let v: Vec<_> = set.iter().collect();
        // Fastest first; "slow" is more than 4 times slower than "a".
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].0, v[1].0), (2, 0));
        assert!((v[0].1 - 0.75).abs() < 1e-12 && (v[1].1 - 0.25).abs() < 1e-12);
        assert_eq!(lanes.rndv_lanes(1, |l| l.max_get_zcopy).len(), 1);
        assert!(lanes.rndv_lanes(2, |l| l.max_put_zcopy).is_empty());
    }

    #[test]
    fn fingerprint_sees_every_number() {
        let a = EpLanes::new(vec![lane("a", 1e-6, 1e-7, 1e9)]);
        let mut b = a.clone();
        assert_eq!(a.fingerprint(), b.fingerprint());
        b.lanes[0].max_get_zcopy = 1;
        assert_ne!(a.fingerprint(), b.fingerprint());
        let mut c = a.clone();
        c.lanes[0].model.latency = 2e-6;
        assert_ne!(a.fingerprint(), c.fingerprint());
    }
}

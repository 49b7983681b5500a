//! Selection tables for typical lanes, thresholds, and random models.

use super::lanes::tests::lane;
use super::*;
use crate::ucs::config::MemUnits;
use crate::uct::Caps;
use proptest::prelude::*;

const MIB: f64 = 1024.0 * 1024.0;

/// A TCP lane on loopback with rucx's TCP model; `put` adds put zero-copy
/// (as UCX's TCP transport offers), no registration cost.
fn tcp(put: bool) -> LaneInfo {
    let mut l = lane("tcp/lo", 5.2e-6 + 576.0 / 100e9, 2e-6, 2200.0 * MIB);
    l.max_put_zcopy = if put { 1 << 20 } else { 0 };
    l
}

/// A lane like `self`: memory bandwidth, no latency, get and put.
fn self_like() -> LaneInfo {
    let mut l = lane("self/memory", 0.0, 10e-9, 6911.0 * MIB);
    l.max_short = 8192;
    l.max_get_zcopy = 1 << 20;
    l.max_put_zcopy = 1 << 20;
    l.reg_cost = Linear::new(100e-9, 0.0);
    l
}

fn table(lanes: Vec<LaneInfo>, cfg: &SelectConfig, op: Op) -> SelectionTable {
    let t = select(&EpLanes::new(lanes), cfg, op).expect("a protocol for every size");
    println!("{t}");
    check_cover(&t);
    t
}

/// Ranges cover 0..=MAX in order, without gaps or overlaps.
fn check_cover(t: &SelectionTable) {
    let c = t.choices();
    assert!(!c.is_empty());
    assert_eq!(c[0].start, 0);
    assert_eq!(c[c.len() - 1].end, usize::MAX);
    for w in c.windows(2) {
        assert!(w[0].start <= w[0].end);
        assert_eq!(w[0].end + 1, w[1].start, "gap or overlap in {t}");
    }
}

/// First size sent with rendezvous, if any.
fn rndv_from(t: &SelectionTable) -> Option<usize> {
    t.choices()
        .iter()
        .find(|c| c.proto.class() == ProtoClass::Rndv)
        .map(|c| c.start)
}

fn protos(t: &SelectionTable) -> Vec<ProtocolId> {
    let mut v: Vec<_> = t.choices().iter().map(|c| c.proto).collect();
    v.dedup();
    v
}

fn with(f: impl FnOnce(&mut SelectConfig)) -> SelectConfig {
    let mut c = SelectConfig::default();
    f(&mut c);
    c
}

#[test]
fn tcp_switches_to_put_rendezvous_at_a_plausible_size() {
    let t = table(vec![tcp(true)], &SelectConfig::default(), Op::TagSend);
    assert_eq!(t.lookup(0).proto, ProtocolId::EagerShort);
    assert_eq!(t.lookup(8184).proto, ProtocolId::EagerShort);
    assert_ne!(t.lookup(8185).proto, ProtocolId::EagerShort);
    let from = rndv_from(&t).expect("rendezvous for large messages");
    println!("tcp eager -> rendezvous at {from} bytes");
    assert!((64 << 10..=1 << 20).contains(&from), "{from}");
    assert_eq!(t.lookup(usize::MAX).proto, ProtocolId::RndvPutZcopy);
    assert!(!protos(&t).contains(&ProtocolId::RndvGetZcopy));
    // Rendezvous is synchronous anyway: a sync send switches earlier.
    let s = table(vec![tcp(true)], &SelectConfig::default(), Op::TagSendSync);
    assert!(rndv_from(&s).unwrap() < from);
    assert_eq!(s.lookup(0).proto, ProtocolId::EagerSyncBcopySingle);
}

#[test]
fn tcp_without_put_never_picks_am_rendezvous_by_cost() {
    let t = table(vec![tcp(false)], &SelectConfig::default(), Op::TagSend);
    assert_eq!(rndv_from(&t), None);
    // Forced, rendezvous goes over active messages.
    let cfg = with(|c| c.rndv_thresh = MemUnits::Bytes(64 << 10));
    let t = table(vec![tcp(false)], &cfg, Op::TagSend);
    assert_eq!(rndv_from(&t), Some(64 << 10));
    assert_eq!(t.lookup(64 << 10).proto, ProtocolId::RndvAm);
    assert_ne!(t.lookup((64 << 10) - 1).proto.class(), ProtoClass::Rndv);
    assert!(t.notes().is_empty());
}

#[test]
fn self_like_lane_reads_from_remote() {
    let t = table(vec![self_like()], &SelectConfig::default(), Op::TagSend);
    assert_eq!(t.lookup(0).proto, ProtocolId::EagerShort);
    assert_eq!(t.lookup(1 << 30).proto, ProtocolId::RndvGetZcopy);
    let from = rndv_from(&t).unwrap();
    assert!(from <= 64 << 10, "{from}");
    let cfg = with(|c| c.rndv_scheme = RndvScheme::PutZcopy);
    let t = table(vec![self_like()], &cfg, Op::TagSend);
    assert_eq!(t.lookup(1 << 30).proto, ProtocolId::RndvPutZcopy);
    assert!(!protos(&t).contains(&ProtocolId::RndvGetZcopy));
}

#[test]
fn scheme_fallback_is_recorded() {
    let cfg = with(|c| c.rndv_scheme = RndvScheme::GetZcopy);
    let t = table(vec![tcp(true)], &cfg, Op::TagSend);
    assert_eq!(
        t.notes(),
        &[Note::SchemeUnavailable {
            requested: RndvScheme::GetZcopy
        }]
    );
    assert_eq!(t.lookup(1 << 30).proto, ProtocolId::RndvPutZcopy);
    println!("{}", t.notes()[0]);
    // A scheme the lanes can do: no note.
    let cfg = with(|c| c.rndv_scheme = RndvScheme::Am);
    let t = table(vec![tcp(true)], &cfg, Op::TagSend);
    assert!(t.notes().is_empty());
    assert!(!protos(&t).contains(&ProtocolId::RndvPutZcopy));
}

#[test]
fn two_lanes_split_by_bandwidth() {
    let mut a = lane("fast/dev0", 1e-6, 50e-9, 10e9);
    let mut b = lane("slow/dev1", 1.5e-6, 50e-9, 5e9);
    a.max_get_zcopy = 1 << 20;
    b.max_get_zcopy = 1 << 20;
    let t = table(
        vec![a.clone(), b.clone()],
        &SelectConfig::default(),
        Op::TagSend,
    );
    let big = t.lookup(1 << 30);
    assert_eq!(big.proto, ProtocolId::RndvGetZcopy);
    let shares: Vec<_> = big.lanes.iter().collect();
    assert_eq!(shares.len(), 2);
    assert_eq!((shares[0].0, shares[1].0), (0, 1));
    assert!((shares[0].1 - 2.0 / 3.0).abs() < 1e-12);
    let text = t.to_string();
    assert!(
        text.contains("67% on fast/dev0 and 33% on slow/dev1"),
        "{text}"
    );
    // One lane only: slower for large messages.
    let cfg = with(|c| c.max_rndv_lanes = 1);
    let one = table(vec![a, b], &cfg, Op::TagSend);
    let single = one.lookup(1 << 30);
    assert_eq!(single.lanes.len(), 1);
    assert!(single.cost_at(1 << 30) > big.cost_at(1 << 30));
}

#[test]
fn forced_rendezvous_everywhere_but_zero() {
    let cfg = with(|c| c.rndv_thresh = MemUnits::Bytes(0));
    for lanes in [vec![tcp(true)], vec![tcp(false)], vec![self_like()]] {
        let t = table(lanes, &cfg, Op::TagSend);
        assert_eq!(t.lookup(0).proto.class(), ProtoClass::Short);
        assert_eq!(t.choices()[1].start, 1);
        assert!(t.choices()[1..]
            .iter()
            .all(|c| c.proto.class() == ProtoClass::Rndv));
        assert!(t.notes().is_empty());
    }
}

#[test]
fn infinite_threshold_means_never() {
    let cfg = with(|c| c.rndv_thresh = MemUnits::Inf);
    let t = table(vec![self_like()], &cfg, Op::TagSend);
    assert_eq!(rndv_from(&t), None);
    let cfg = with(|c| c.zcopy_thresh = MemUnits::Inf);
    let t = table(vec![tcp(true)], &cfg, Op::TagSend);
    assert!(t
        .choices()
        .iter()
        .all(|c| c.proto.class() != ProtoClass::Zcopy));
}

#[test]
fn copy_and_zcopy_thresholds_are_priorities() {
    // Registration makes zero-copy dearer than copying below 10000 bytes.
    let mut l = tcp(true);
    l.reg_cost = Linear::new(1e-6, 0.0);
    let cfg = with(|c| c.bcopy_thresh = MemUnits::Bytes(1000));
    let t = table(vec![l.clone()], &cfg, Op::TagSend);
    assert_eq!(t.lookup(999).proto, ProtocolId::EagerShort);
    assert_eq!(t.lookup(1000).proto, ProtocolId::EagerBcopySingle);
    assert_eq!(t.lookup(20_000).proto, ProtocolId::EagerZcopySingle);
    assert_eq!(t.lookup(1 << 30).proto, ProtocolId::RndvPutZcopy);
    // Forced zero-copy from 100: no copy eager above, rendezvous still wins
    // large sizes on cost; below 100, no zero-copy.
    let cfg = with(|c| c.zcopy_thresh = MemUnits::Bytes(100));
    let t = table(vec![l], &cfg, Op::TagSend);
    assert_eq!(t.lookup(99).proto, ProtocolId::EagerShort);
    assert_eq!(t.lookup(100).proto, ProtocolId::EagerZcopySingle);
    assert_eq!(t.lookup(1 << 30).proto, ProtocolId::RndvPutZcopy);
}

#[test]
fn impossible_settings_fall_back_with_notes() {
    // No rendezvous at all on this lane, yet rndv_thresh asks for it.
    let mut l = tcp(false);
    l.caps = Caps::AM_SHORT | Caps::AM_ZCOPY;
    let cfg = with(|c| c.rndv_thresh = MemUnits::Bytes(0));
    let t = table(vec![l], &cfg, Op::TagSend);
    assert_eq!(t.lookup(1 << 20).proto, ProtocolId::EagerZcopySingle);
    assert_eq!(
        t.notes(),
        &[Note::ForcedUnavailable {
            setting: "rndv_thresh",
            sizes: Ranges::from_range(1, usize::MAX)
        }]
    );
    // Copy forbidden below 1M on a lane that has nothing else (rendezvous
    // over active messages would do, were it not forbidden too).
    let mut l = tcp(false);
    l.caps = Caps::AM_SHORT | Caps::AM_BCOPY;
    let cfg = with(|c| c.bcopy_thresh = MemUnits::Bytes(1 << 20));
    let t = table(vec![l.clone()], &cfg, Op::TagSend);
    assert_eq!(t.lookup(10_000).proto, ProtocolId::RndvAm);
    assert!(t.notes().is_empty());
    let cfg = with(|c| {
        c.bcopy_thresh = MemUnits::Bytes(1 << 20);
        c.rndv_thresh = MemUnits::Inf;
    });
    let t = table(vec![l], &cfg, Op::TagSend);
    assert_eq!(t.lookup(10_000).proto, ProtocolId::EagerBcopySingle);
    assert_eq!(
        t.notes(),
        &[Note::ThresholdsIgnored {
            sizes: Ranges::from_range(8185, (1 << 20) - 1)
        }]
    );
}

#[test]
fn no_protocol_is_an_error() {
    let cfg = SelectConfig::default();
    let e = select(&EpLanes::new(Vec::new()), &cfg, Op::TagSend).unwrap_err();
    assert_eq!((e.start, e.end), (0, usize::MAX));
    let mut l = tcp(false);
    l.caps = Caps::AM_SHORT;
    let e = select(&EpLanes::new(vec![l]), &cfg, Op::TagSend).unwrap_err();
    assert_eq!((e.start, e.end), (8185, usize::MAX));
}

#[test]
fn lookup_at_boundaries() {
    let t = table(vec![tcp(true)], &SelectConfig::default(), Op::TagSend);
    for (k, c) in t.choices().iter().enumerate() {
        assert_eq!(t.lookup(c.start), c);
        assert_eq!(t.lookup(c.end), c);
        if let Some(next) = t.choices().get(k + 1) {
            assert_eq!(t.lookup(c.end + 1), next);
        }
    }
    // Many lookups through the same table: a plain walk of the ranges.
    let mut hits = [0usize; 16];
    for s in (0..4 << 20).step_by(4093) {
        let c = t.lookup(s);
        assert!(c.start <= s && s <= c.end);
        hits[t.choices().iter().position(|x| x == c).unwrap()] += 1;
    }
    assert!(hits.iter().filter(|&&h| h > 0).count() >= 3);
}

#[test]
fn printed_table_looks_like_ucx() {
    let t = table(vec![tcp(true)], &SelectConfig::default(), Op::TagSend);
    let text = t.to_string();
    let lines: Vec<_> = text.lines().collect();
    assert!(lines[0].starts_with("+-") && lines[0].ends_with("-+"));
    assert!(lines[1].starts_with("| tag send") && lines[1].contains("tcp/lo"));
    assert!(lines[3].contains("0..8184") && lines[3].contains("eager short"));
    assert!(lines[lines.len() - 2].contains("..inf"));
    assert!(text.contains("rendezvous zero-copy write to remote"));
    let widths: Vec<_> = lines.iter().map(|l| l.len()).collect();
    assert!(widths.iter().all(|&w| w == widths[0]), "{text}");
}

fn arb_lane() -> impl Strategy<Value = LaneInfo> {
    (
        (0.0f64..20e-6, 0.0f64..5e-6, 1e6f64..100e9),
        (0u32..8, 0usize..20_000, 0usize..200_000, 0usize..4 << 20),
        (0usize..4 << 20, 0usize..4 << 20, 0.0f64..5e-6, 0.0f64..1e-9),
    )
        .prop_map(|((l, o, bw), (caps, s, b, z), (put, get, r0, r1))| {
            let mut x = lane("r/x", l, o, bw);
            x.caps = Caps::from_bits_truncate(caps);
            (x.max_short, x.max_bcopy, x.max_zcopy) = (s, b, z);
            (x.max_put_zcopy, x.max_get_zcopy) = (put, get);
            x.reg_cost = Linear::new(r0, r1);
            x
        })
}

fn arb_thresh() -> impl Strategy<Value = MemUnits> {
    prop_oneof![
        Just(MemUnits::Auto),
        Just(MemUnits::Inf),
        (0u64..1 << 22).prop_map(MemUnits::Bytes),
    ]
}

proptest! {
    #[test]
    fn tables_cover_every_size(
        lanes in prop::collection::vec(arb_lane(), 1..4),
        (rt, zt, bt) in (arb_thresh(), arb_thresh(), arb_thresh()),
        scheme in prop::sample::select(RndvScheme::ALL.to_vec()),
        sync in any::<bool>(),
        sizes in prop::collection::vec(any::<usize>(), 10),
    ) {
        let cfg = with(|c| {
            (c.rndv_thresh, c.zcopy_thresh, c.bcopy_thresh) = (rt, zt, bt);
            c.rndv_scheme = scheme;
        });
        let op = if sync { Op::TagSendSync } else { Op::TagSend };
        let lanes = EpLanes::new(lanes);
        match select(&lanes, &cfg, op) {
            Ok(t) => {
                check_cover(&t);
                prop_assert!(t.lookup(0).proto.class() <= ProtoClass::Bcopy);
                for s in sizes.into_iter().chain([0, 1, usize::MAX]) {
                    let c = t.lookup(s);
                    prop_assert!(c.start <= s && s <= c.end);
                    prop_assert!(c.proto.serves(op));
                    // The choice's cost is its protocol's own model.
                    let p = c.proto.probe(&lanes, &cfg).unwrap();
                    prop_assert_eq!(p.cost.eval(s), Some(c.cost_at(s)));
                }
            }
            // Only when some size has no protocol at all.
            Err(e) => {
                let any = ProtocolId::ALL.iter().any(|id| {
                    id.serves(op)
                        && id.probe(&lanes, &cfg).is_some_and(|p| p.cost.eval(e.start).is_some())
                });
                prop_assert!(!any);
            }
        }
    }

    #[test]
    fn auto_picks_the_cheapest(
        lanes in prop::collection::vec(arb_lane(), 1..3),
        sizes in prop::collection::vec(any::<usize>(), 10),
    ) {
        let cfg = SelectConfig::default();
        let lanes = EpLanes::new(lanes);
        if let Ok(t) = select(&lanes, &cfg, Op::TagSend) {
            prop_assert!(t.notes().is_empty());
            for s in sizes.into_iter().chain([0, 1, 8184, 65536]) {
                let got = t.lookup(s).cost_at(s);
                for id in ProtocolId::ALL.iter().filter(|id| id.serves(Op::TagSend)) {
                    if let Some(v) = id.probe(&lanes, &cfg).and_then(|p| p.cost.eval(s)) {
                        prop_assert!(got <= v + v.abs() * 1e-12, "{:?} {} < {}", id, v, got);
                    }
                }
            }
        }
    }
}

/// `short_end` is exactly the bound of the sizes a lookup sends with eager
/// short within the transport's `max_short` (what the send fast path uses
/// in place of the lookup).
#[test]
fn short_end_matches_lookup() {
    let mut copy_first = tcp(true);
    copy_first.reg_cost = Linear::new(1e-6, 0.0);
    let tables = [
        table(vec![tcp(true)], &SelectConfig::default(), Op::TagSend),
        table(vec![self_like()], &SelectConfig::default(), Op::TagSend),
        table(
            vec![copy_first],
            &with(|c| c.bcopy_thresh = MemUnits::Bytes(1000)),
            Op::TagSend,
        ),
        table(
            vec![tcp(true)],
            &with(|c| c.rndv_thresh = MemUnits::Bytes(0)),
            Op::TagSend,
        ),
    ];
    for t in &tables {
        for max_short in [0usize, 1, 100, 999, 8184, usize::MAX] {
            let end = t.short_end(max_short);
            let short = |s: usize| s <= max_short && t.lookup(s).proto == ProtocolId::EagerShort;
            let probes = (0..=10_000).chain([end.saturating_sub(1), end, end.saturating_add(1)]);
            for s in probes {
                assert_eq!(
                    s < end,
                    short(s),
                    "size {s}, max_short {max_short}, end {end}"
                );
            }
        }
    }
}

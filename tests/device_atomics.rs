//! Atomics executed by an RDMA device, and `RUCX_ATOMIC_MODE`.
//!
//! Without a NIC, the device is `rc_amo`: the RC transport over a test
//! double of a provider (`device_atomics/double.rs`: the iWARP provider
//! plus 64-bit atomics executed in this process). With the `verbs`
//! feature the device tests also run over `rc_verbs` when a device with
//! atomics exists, and say `skipped: no RDMA device` otherwise (fail with
//! `RUCX_REQUIRE_ALL=1`).
//!
//! Checked: fetch-add and compare-and-swap results, posted add, atomics
//! from two endpoints at once, `cpu` emulating, `guess` taking device
//! atomics, `device` refusing every atomic over `rc_iwarp` (whose device
//! has none), the initiator refusing a mode mismatch, a forged key refused
//! by the target's device, a key lying about the memory's mode refused by
//! the target or finding no lane, and a property test against a model.
//! `built.rs`: every other operation and width built from the device's
//! fetch-add and compare-and-swap (every form against a model without the
//! target progressing, concurrent loops from two initiators, 32-bit words
//! whose 8-byte word leaves the key, the connection breaking mid-loop).
//! `lane.rs`: next to shared memory and TCP (`rc_amo,posix`,
//! `rc_amo,tcp`), `guess` maps device memory and an endpoint whose message
//! lane is shared memory or TCP reaches it over its atomic lane, connected
//! by the first atomic (every form, the target not progressing after);
//! a peer without the device's transport is unsupported.

#[path = "device_atomics/built.rs"]
mod built;
#[path = "device_atomics/double.rs"]
mod double;
#[path = "device_atomics/harness.rs"]
mod harness;
#[path = "device_atomics/lane.rs"]
mod lane;

use harness::*;
use proptest::prelude::*;
use rucx::ucp::uct::Token;
use rucx::ucp::uct::{AtomicCaps, AtomicOp as UctOp, AtomicWord, Caps, Component, IfaceParams};
use rucx::{AtomicOp, AtomicValue, Error, Op};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[test]
fn device_fetch_add_and_cswap() {
    let _g = serial();
    for f in fabrics() {
        let mut p = pair(&f, "device");
        let (_b, m, k) = p.map();
        assert!(
            k.atomics_by_device(),
            "{}: device mode maps device memory",
            f.tls
        );
        let how = p.a.ep_rma_protocols(p.at).unwrap();
        let amo = how
            .iter()
            .find(|r| r.op == "atomic")
            .expect("an atomic row");
        assert!(
            amo.protocol.starts_with("device") && amo.lane.starts_with(f.tls),
            "{amo:?}"
        );
        let before = executed();
        let w = k.addr() + 8;
        let u = AtomicValue::U64;
        assert_eq!(p.fetch(AtomicOp::Add, u(5), 0, w, &k).unwrap(), 0);
        assert_eq!(p.fetch(AtomicOp::Add, u(u64::MAX), 0, w, &k).unwrap(), 5);
        assert_eq!(
            m.load_u64(8).unwrap(),
            4,
            "{}: 5 + (2^64 - 1) wraps to 4",
            f.tls
        );
        assert_eq!(
            p.fetch(AtomicOp::Cswap, u(77), 3, w, &k).unwrap(),
            4,
            "mismatch"
        );
        assert_eq!(
            m.load_u64(8).unwrap(),
            4,
            "{}: no swap on a mismatch",
            f.tls
        );
        assert_eq!(p.fetch(AtomicOp::Cswap, u(77), 4, w, &k).unwrap(), 4);
        assert_eq!(m.load_u64(8).unwrap(), 77);
        p.post(AtomicOp::Add, u(3), w, &k).unwrap();
        assert_eq!(m.load_u64(8).unwrap(), 80, "{}: posted add", f.tls);
        assert_eq!(
            m.load_u64(0).unwrap(),
            0,
            "{}: the word before untouched",
            f.tls
        );
        assert_eq!(
            m.load_u64(16).unwrap(),
            0,
            "{}: the word after untouched",
            f.tls
        );
        if f.counted {
            assert_eq!(executed() - before, 5, "every atomic went to the device");
        }
        drop(m);
    }
}

#[test]
fn cpu_mode_emulates() {
    let _g = serial();
    let mut p = pair(&double_fabric(), "cpu");
    let (_b, m, k) = p.map();
    assert!(!k.atomics_by_device());
    let how = p.a.ep_rma_protocols(p.at).unwrap();
    let amo = how
        .iter()
        .find(|r| r.op == "atomic")
        .expect("an atomic row");
    assert!(amo.protocol.starts_with("emulated"), "{amo:?}");
    let before = executed();
    let u = AtomicValue::U64;
    assert_eq!(p.fetch(AtomicOp::Add, u(5), 0, k.addr(), &k).unwrap(), 0);
    assert_eq!(p.fetch(AtomicOp::Cswap, u(9), 5, k.addr(), &k).unwrap(), 5);
    assert_eq!(p.fetch(AtomicOp::Or, u(0x10), 0, k.addr(), &k).unwrap(), 9);
    p.post(AtomicOp::Add, u(1), k.addr(), &k).unwrap();
    assert_eq!(m.load_u64(0).unwrap(), 0x1a);
    assert_eq!(executed(), before, "no atomic reached the device");
}

#[test]
fn guess_takes_device_atomics_over_rc() {
    let _g = serial();
    for f in fabrics() {
        let mut p = pair(&f, "guess");
        let (_b, m, k) = p.map();
        assert!(
            k.atomics_by_device(),
            "{}: rc offers fadd64 and cswap64: guess takes device atomics",
            f.tls
        );
        let before = executed();
        let u = AtomicValue::U64;
        assert_eq!(p.fetch(AtomicOp::Xor, u(6), 0, k.addr(), &k).unwrap(), 0);
        assert_eq!(p.fetch(AtomicOp::Add, u(1), 0, k.addr(), &k).unwrap(), 6);
        assert_eq!(m.load_u64(0).unwrap(), 7, "{}", f.tls);
        if f.counted {
            assert!(executed() - before >= 2, "the device executed them");
        }
        drop(m);
    }
}

#[test]
fn device_mode_over_a_transport_without_atomics_is_unsupported() {
    let f = Fabric {
        registry: rucx::registry(),
        tls: "rc_iwarp",
        counted: false,
    };
    let mut p = pair(&f, "device");
    let (_b, m, k) = p.map();
    let msg = unsupported(p.fetch(AtomicOp::Add, AtomicValue::U64(1), 0, k.addr(), &k));
    assert!(msg.contains("fadd64") && msg.contains("hardware"), "{msg}");
    unsupported(p.post(AtomicOp::Add, AtomicValue::U64(1), k.addr(), &k));
    assert_eq!(m.load_u64(0).unwrap(), 0);
    // Put and get are not affected.
    let data = 9u64.to_le_bytes();
    // SAFETY: `data` outlives the request, which `wait` completes.
    let put = unsafe { p.a.put_raw(p.at, data.as_ptr(), 8, k.addr(), &k, Op::new()) };
    p.wait(put).unwrap();
    assert_eq!(m.load_u64(0).unwrap(), 9);
}

#[test]
fn initiator_refuses_a_mode_mismatch() {
    let _g = serial();
    let f = double_fabric();
    let mut p = pair_modes(&f, "cpu", "device");
    let (_b, m, k) = p.map();
    let msg = unsupported(p.fetch(AtomicOp::Add, AtomicValue::U64(1), 0, k.addr(), &k));
    assert!(msg.contains("RUCX_ATOMIC_MODE=cpu"), "{msg}");
    let mut p = pair_modes(&f, "device", "cpu");
    let (_b2, m2, k2) = p.map();
    let msg = unsupported(p.fetch(AtomicOp::Add, AtomicValue::U64(1), 0, k2.addr(), &k2));
    assert!(msg.contains("RUCX_ATOMIC_MODE=device"), "{msg}");
    // A guessing initiator follows the memory, either way.
    let mut p = pair_modes(&f, "guess", "device");
    let (_b3, m3, k3) = p.map();
    let before = executed();
    assert_eq!(
        p.fetch(AtomicOp::Add, AtomicValue::U64(4), 0, k3.addr(), &k3)
            .unwrap(),
        0
    );
    assert_eq!(executed() - before, 1);
    assert_eq!(
        (
            m.load_u64(0).unwrap(),
            m2.load_u64(0).unwrap(),
            m3.load_u64(0).unwrap()
        ),
        (0, 0, 4)
    );
}

#[test]
fn two_endpoints_at_once() {
    const N: u64 = 300;
    let _g = serial();
    for f in fabrics() {
        let (tctx, mut t, inits) = target_and_initiators(&f, 2);
        let (_b, m, _) = map(&tctx, &inits[0].0, inits[0].1);
        let packed = m.rkey_pack().unwrap();
        let done = std::sync::atomic::AtomicUsize::new(0);
        let olds: Vec<Vec<u64>> = std::thread::scope(|s| {
            let hs: Vec<_> = inits
                .into_iter()
                .map(|(mut w, ep)| {
                    let (packed, done) = (&packed, &done);
                    s.spawn(move || {
                        let k = w.rkey_unpack(ep, packed).expect("unpack");
                        let olds: Vec<u64> = (0..N)
                            .map(|_| {
                                w.atomic_blocking(
                                    ep,
                                    AtomicOp::Add,
                                    AtomicValue::U64(1),
                                    0,
                                    k.addr(),
                                    &k,
                                )
                                .expect("fadd")
                                .as_u64()
                            })
                            .collect();
                        done.fetch_add(1, Ordering::SeqCst);
                        olds
                    })
                })
                .collect();
            let deadline = Instant::now() + Duration::from_secs(60);
            while done.load(Ordering::SeqCst) < 2 {
                assert!(Instant::now() < deadline, "timed out");
                t.progress();
            }
            hs.into_iter()
                .map(|h| h.join().expect("initiator"))
                .collect()
        });
        assert_eq!(m.load_u64(0).unwrap(), 2 * N, "{}: no add lost", f.tls);
        let mut all: Vec<u64> = olds.concat();
        all.sort_unstable();
        assert_eq!(
            all,
            (0..2 * N).collect::<Vec<_>>(),
            "{}: each old value once",
            f.tls
        );
        drop(m);
    }
}

#[test]
fn forged_key_is_refused_by_the_target_device() {
    let _g = serial();
    for f in fabrics() {
        let mut p = pair(&f, "device");
        let (_b, m, _) = p.map();
        let mut packed = m.rkey_pack().unwrap();
        // The RC domain's key: "rcmk", version, 3 zero bytes, then the
        // steering tag (little-endian).
        let at = packed
            .windows(4)
            .position(|w| w == b"rcmk")
            .expect("an rc key in the packed key");
        packed[at + 11] ^= 0x5a;
        let k = p.a.rkey_unpack(p.at, &packed).expect("unpack");
        let before = executed();
        let r = p.fetch(AtomicOp::Add, AtomicValue::U64(1), 0, k.addr(), &k);
        assert!(
            matches!(&r, Err(Error::RemoteAccess { .. })),
            "{}: a forged steering tag is a remote access error, got {r:?}",
            f.tls
        );
        assert_eq!(m.load_u64(0).unwrap(), 0, "{}: nothing executed", f.tls);
        if f.counted {
            assert_eq!(executed(), before);
        }
    }
}

/// Byte of the packed key that says which atomics the memory takes.
const MODE_BYTE: usize = 52;

#[test]
fn a_key_lying_about_the_mode_changes_nothing() {
    let _g = serial();
    let f = double_fabric();
    // Device memory whose key claims CPU atomics: the initiator emulates,
    // and the target refuses (its protocol-layer registration has no
    // atomic rights).
    let mut p = pair_modes(&f, "guess", "cpu");
    let tctx = context(&f, "device");
    let (_b, m, _) = map(&tctx, &p.a, p.at);
    let mut packed = m.rkey_pack().unwrap();
    assert_eq!(packed[MODE_BYTE], 1);
    packed[MODE_BYTE] = 0;
    let k = p.a.rkey_unpack(p.at, &packed).expect("unpack");
    assert!(!k.atomics_by_device());
    let r = p.fetch(AtomicOp::Add, AtomicValue::U64(1), 0, k.addr(), &k);
    assert!(matches!(&r, Err(Error::RemoteAccess { .. })), "{r:?}");
    assert_eq!(m.load_u64(0).unwrap(), 0);
    // CPU memory whose key claims device atomics: no lane's key grants
    // atomics (the domains registered none), so nothing is posted.
    let (_b2, m2, _) = p.map();
    let mut packed = m2.rkey_pack().unwrap();
    assert_eq!(packed[MODE_BYTE], 0);
    packed[MODE_BYTE] = 1;
    let k2 = p.a.rkey_unpack(p.at, &packed).expect("unpack");
    let before = executed();
    unsupported(p.fetch(AtomicOp::Add, AtomicValue::U64(1), 0, k2.addr(), &k2));
    assert_eq!((m2.load_u64(0).unwrap(), executed()), (0, before));
    // Any other value of the byte is a malformed key.
    packed[MODE_BYTE] = 2;
    assert!(p.a.rkey_unpack(p.at, &packed).is_err());
}

#[test]
fn rc_iface_offers_exactly_fetch_add_and_compare_swap() {
    let rc = AtomicCaps::ADD64 | AtomicCaps::FADD64 | AtomicCaps::CSWAP64;
    for (comp, want) in [
        (&double::COMPONENT, rc),
        (&rucx_iwarp::COMPONENT, AtomicCaps::empty()),
    ] {
        let mds = comp.md_open().expect("md_open");
        let md = mds.first().expect("a device (loopback)");
        assert_eq!(md.atomic_caps(), want);
        let res = md.resources().expect("resources");
        let mut iface = md
            .iface_open(&res[0], &IfaceParams::default())
            .expect("iface");
        let caps = iface.attr().caps;
        assert_eq!(
            caps.contains(Caps::ATOMIC_DEVICE),
            !want.is_empty(),
            "{caps:?}"
        );
        assert_eq!(
            iface.atomic().map(|a| a.atomic_caps()),
            (!want.is_empty()).then_some(rc)
        );
        if let Some(a) = iface.atomic() {
            // Refused before any endpoint or key is looked at.
            let key = rucx::ucp::uct::RemoteKey {
                md_name: "x".into(),
                packed: std::sync::Arc::from(&[][..]),
                addr: 0,
                len: 8,
                access: ALL,
            };
            let ep = rucx::ucp::uct::EpId(0);
            for (op, w) in [
                (UctOp::Or, AtomicWord::U64(1)),
                (UctOp::Swap, AtomicWord::U64(1)),
                (UctOp::Add, AtomicWord::U32(1)),
            ] {
                let r = a.atomic_post(ep, op, w, 0, &key, Token(1));
                assert!(
                    matches!(r, Err(rucx::ucp::uct::Error::OpUnsupported { .. })),
                    "{op:?} {w:?}: {r:?}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Fetch-adds and compare-and-swaps on one word give what a model
    /// gives, old values included.
    #[test]
    fn device_atomics_match_a_model(ops in proptest::collection::vec(
        (any::<bool>(), any::<u64>(), 0u64..4), 1..24)) {
        let _g = serial();
        let mut p = pair(&double_fabric(), "device");
        let (_b, m, k) = p.map();
        let mut model = 0u64;
        for (cswap, v, hint) in ops {
            let prev = model;
            let old = if cswap {
                // Compare against the current value half of the time.
                let cmp = if hint < 2 { model } else { model ^ hint };
                let old = p.fetch(AtomicOp::Cswap, AtomicValue::U64(v), cmp, k.addr(), &k).unwrap();
                if model == cmp {
                    model = v;
                }
                old
            } else {
                let old = p.fetch(AtomicOp::Add, AtomicValue::U64(v), 0, k.addr(), &k).unwrap();
                model = model.wrapping_add(v);
                old
            };
            prop_assert_eq!(old, prev);
            prop_assert_eq!(m.load_u64(0).unwrap(), model);
        }
    }
}

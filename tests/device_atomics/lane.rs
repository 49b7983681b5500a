//! The atomic lane: in a context with shared memory or TCP next to a
//! transport with device atomics, `guess` maps device memory, and an
//! endpoint whose message lane is shared memory or TCP reaches it over an
//! extra lane of the device's transport, connected by the first atomic.

use super::built::every_form;
use super::double;
use super::harness::*;
use rucx::{AtomicOp, AtomicValue};

/// The double's `rc_amo` next to `others`.
fn mixed(others: &'static str) -> Fabric {
    Fabric {
        registry: rucx::registry().with(&double::COMPONENT),
        tls: others,
        counted: true,
    }
}

/// `rc_amo` next to shared memory and next to TCP; the same with
/// `rc_verbs` where a device with atomics exists (`fabrics`).
fn mixed_fabrics() -> Vec<Fabric> {
    let mut v = vec![mixed("rc_amo,posix"), mixed("rc_amo,tcp")];
    if fabrics().iter().any(|f| f.tls == "rc_verbs") {
        for tls in ["rc_verbs,posix", "rc_verbs,tcp"] {
            v.push(Fabric {
                registry: rucx::registry(),
                tls,
                counted: false,
            });
        }
    }
    v
}

/// The endpoint's atomic row of `ep_rma_protocols`: (protocol, lane).
fn atomic_row(p: &Pair) -> (String, String) {
    let how = p.a.ep_rma_protocols(p.at).expect("protocols");
    let r = how
        .iter()
        .find(|r| r.op == "atomic")
        .expect("an atomic row");
    (r.protocol.to_string(), r.lane.clone())
}

#[test]
fn guess_reaches_device_memory_over_a_lazy_atomic_lane() {
    let _g = serial();
    for f in mixed_fabrics() {
        let tls = f.tls;
        let device = tls.split(',').next().unwrap_or_default();
        let mut p = pair(&f, "guess");
        let (_b, m, k) = p.map();
        assert!(
            k.atomics_by_device(),
            "{tls}: a domain with fetch-add and compare-and-swap: guess maps device memory"
        );
        let (protocol, lane) = atomic_row(&p);
        assert!(
            protocol.starts_with("device") && lane.starts_with(&format!("{device}/")),
            "{tls}: the atomic lane is listed: {protocol} on {lane}"
        );
        // The atomic lane waits unconnected.
        let connected = p.a.ep_lanes_connected(p.at).expect("lanes");
        // The first atomic connects the lane (the target progresses for
        // the connection's setup) and is executed by the device.
        let before = executed();
        assert_eq!(
            p.fetch(AtomicOp::Add, AtomicValue::U64(0), 0, k.addr() + 56, &k)
                .expect("first atomic"),
            0
        );
        if f.counted {
            assert_eq!(executed() - before, 1, "{tls}: the device executed it");
        }
        assert_eq!(
            p.a.ep_lanes_connected(p.at).expect("lanes"),
            connected + 1,
            "{tls}: the first atomic connected the atomic lane"
        );
        // From then on the target does not progress.
        p.target_progress = false;
        every_form(&mut p, &f, &m, &k);
        // A key unpacked now takes the lane too.
        let k2 =
            p.a.rkey_unpack(p.at, &m.rkey_pack().expect("pack"))
                .expect("unpack");
        let before = executed();
        assert_eq!(
            p.fetch(AtomicOp::Cswap, AtomicValue::U64(7), 0, k2.addr() + 56, &k2)
                .expect("cswap"),
            0
        );
        assert_eq!(m.load_u64(56).unwrap(), 7, "{tls}");
        if f.counted {
            assert_eq!(executed() - before, 1, "{tls}: the device executed it");
        }
        assert_eq!(
            p.a.ep_lanes_connected(p.at).expect("lanes"),
            connected + 1,
            "{tls}: one atomic lane"
        );
        drop(m);
    }
}

#[test]
fn device_mode_in_a_mixed_context_takes_the_atomic_lane_too() {
    let _g = serial();
    let f = mixed("rc_amo,posix");
    let mut p = pair(&f, "device");
    let (_b, m, k) = p.map();
    let before = executed();
    assert_eq!(
        p.fetch(AtomicOp::Add, AtomicValue::U64(3), 0, k.addr(), &k)
            .unwrap(),
        0
    );
    p.post(AtomicOp::Add, AtomicValue::U64(4), k.addr(), &k)
        .unwrap();
    assert_eq!((m.load_u64(0).unwrap(), executed() - before), (7, 2));
    drop(m);
}

#[test]
fn cpu_mode_has_no_atomic_lane() {
    let _g = serial();
    let f = mixed("rc_amo,posix");
    let mut p = pair(&f, "cpu");
    let (_b, m, k) = p.map();
    assert!(!k.atomics_by_device());
    let (protocol, _) = atomic_row(&p);
    assert!(protocol.starts_with("emulated"), "{protocol}");
    let connected = p.a.ep_lanes_connected(p.at).expect("lanes");
    let before = executed();
    assert_eq!(
        p.fetch(AtomicOp::Add, AtomicValue::U64(3), 0, k.addr(), &k)
            .unwrap(),
        0
    );
    assert_eq!(m.load_u64(0).unwrap(), 3);
    assert_eq!(executed(), before, "emulated by the target");
    assert_eq!(p.a.ep_lanes_connected(p.at).expect("lanes"), connected);
}

#[test]
fn a_peer_without_the_device_iface_is_unsupported() {
    let _g = serial();
    // The target has shared memory only, and maps device memory (device
    // mode): its address offers no rc_amo iface for an atomic lane.
    let init = mixed("rc_amo,posix");
    let target = mixed("posix");
    let actx = context(&init, "guess");
    let tctx = context(&target, "device");
    let mut a = actx.create_worker().expect("worker a");
    let mut t = tctx.create_worker().expect("worker t");
    let at = a.connect(&t.address()).expect("a->t");
    let _ta = t.connect(&a.address()).expect("t->a");
    let (protocol, _) = {
        let how = a.ep_rma_protocols(at).expect("protocols");
        let r = how.iter().find(|r| r.op == "atomic").expect("atomic row");
        (r.protocol.to_string(), r.lane.clone())
    };
    assert!(
        protocol.starts_with("emulated"),
        "no device lane: {protocol}"
    );
    let (_b, m, k) = map(&tctx, &a, at);
    assert!(k.atomics_by_device());
    let mut p = Pair {
        a,
        t,
        at,
        tctx,
        target_progress: true,
    };
    let before = executed();
    for r in [
        p.fetch(AtomicOp::Add, AtomicValue::U64(1), 0, k.addr(), &k),
        p.fetch(AtomicOp::Cswap, AtomicValue::U32(1), 0, k.addr(), &k),
    ] {
        let msg = unsupported(r);
        assert!(
            msg.contains("peer's worker address") && msg.contains("rc_amo/"),
            "names why: {msg}"
        );
    }
    let msg = unsupported(p.post(AtomicOp::Or, AtomicValue::U64(1), k.addr(), &k));
    assert!(msg.contains("peer's worker address"), "{msg}");
    assert_eq!((m.load_u64(0).unwrap(), executed()), (0, before));
    drop(m);
}
